// The S3 store's RDMA data path, written against two DMA callbacks: a GET
// with a token writes the object into the client's registered buffer
// (toHost), a PUT reads the object from it (fromHost). No QP is connected;
// the token's rkey is resolved in the device's own MR table by the callbacks,
// which check the key's bounds and access. Key 0 (the driver's reserved DMA
// key, a raw guest address) is refused here, before any callback runs.
// Transfers are capped by the token's length and maxpart (and, for GET, the
// object); a short transfer is reported in x-amz-rdma-bytes. A transfer may
// be gigabytes: it moves a slice per step through the pacer (../pace.ts),
// each slice resolved in the MR table again, so an MR the guest takes away
// halfway refuses the rest (403, as a refused first slice would).

import { pacer, SLICE } from '../pace';
import { fail, ok, S3Result } from './store/errors';
import type { RdmaHook } from './store/context';
import { encodeToken, parseTokenHeader, RdmaToken, TRANSPORT_RC } from './token';

/** Guest memory by rkey, as the device resolves it. Each returns null when the key, range or access is refused. */
export interface RdmaDma {
  /** Fill `dst` from `addr` of the MR named by `rkey` (needs remote read): `dst.length` bytes. */
  fromHost(rkey: number, addr: bigint, dst: Buffer): boolean;
  /** Write `data` at `addr` of the MR named by `rkey` (needs remote write). */
  toHost(rkey: number, addr: bigint, data: Buffer): boolean;
  /**
   * Would a transfer of `len` bytes at `addr` be allowed (key, access, both
   * ends in bounds)? Asked before the first slice, so the usual refusals move
   * nothing.
   */
  check?(rkey: number, addr: bigint, len: number, toHost: boolean): boolean;
}

/** The reserved DMA key: never accepted from a client. */
const RESERVED_DMA_KEY = 0;
/** Service QP numbers of the S3 store (the 0x00d0xxxx convention). */
const S3_SERVICE_QPN = 0x00d00000;

interface RdmaCounts {
  gets: number;
  puts: number;
  bytesToHost: number;
  bytesFromHost: number;
  refused: number;
}

/** The server's token in replies: RC, its service QPN, its IPv4-mapped GID, the bytes moved. */
function serverToken(ip: Buffer, moved: number): string {
  const gid = Buffer.alloc(16);
  gid[10] = 0xff;
  gid[11] = 0xff;
  ip.copy(gid, 12);
  const t: RdmaToken = {
    transport: TRANSPORT_RC,
    qpNum: S3_SERVICE_QPN,
    gid,
    rkey: 0,
    remoteAddr: 0n,
    length: BigInt(moved),
    portNum: 1,
    lid: 0,
  };
  return encodeToken(t);
}

export class RdmaPath implements RdmaHook {
  readonly counts: RdmaCounts = { gets: 0, puts: 0, bytesToHost: 0, bytesFromHost: 0, refused: 0 };
  readonly #dma: RdmaDma;
  readonly #ip: Buffer;

  /** `ip`: the store's IPv4 address (4 bytes), for the GID of its reply token. */
  constructor(dma: RdmaDma, ip: Buffer) {
    this.#dma = dma;
    this.#ip = Buffer.from(ip);
  }

  #token(header: string): S3Result<RdmaToken> {
    const r = parseTokenHeader(header);
    if (!r.ok) {
      this.counts.refused++;
      return fail('InvalidArgument', `x-amz-rdma-token: ${r.error}`);
    }
    if (r.token.rkey === RESERVED_DMA_KEY) {
      this.counts.refused++;
      return fail('AccessDenied', 'x-amz-rdma-token: key 0 is reserved');
    }
    return ok(r.token);
  }

  /** Run `move(offset, length)` over [0, n) a slice per step; false as soon as one is refused. */
  async #slices(
    rkey: number,
    addr: bigint,
    n: number,
    toHost: boolean,
    move: (off: number, len: number) => boolean,
  ): Promise<boolean> {
    if (n > 0 && this.#dma.check && !this.#dma.check(rkey, addr, n, toHost)) return false;
    let off = 0;
    let good = true;
    await pacer.start(() => {
      const len = Math.min(SLICE.copy, n - off);
      if (len > 0 && !move(off, len)) good = false;
      off += len;
      return !good || off >= n;
    });
    return good;
  }

  async write(header: string, data: Buffer): Promise<S3Result<{ bytes: number; serverToken: string }>> {
    const t = this.#token(header);
    if (!t.ok) return t;
    const n = Number(t.value.length < BigInt(data.length) ? t.value.length : BigInt(data.length));
    const { rkey, remoteAddr } = t.value;
    if (
      !(await this.#slices(rkey, remoteAddr, n, true, (off, len) =>
        this.#dma.toHost(rkey, remoteAddr + BigInt(off), data.subarray(off, off + len)),
      ))
    ) {
      this.counts.refused++;
      return fail('AccessDenied', 'the client buffer refused the write');
    }
    this.counts.gets++;
    this.counts.bytesToHost += n;
    return ok({ bytes: n, serverToken: serverToken(this.#ip, n) });
  }

  async read(header: string, max: number): Promise<S3Result<{ data: Buffer; serverToken: string }>> {
    const t = this.#token(header);
    if (!t.ok) return t;
    const n = Number(t.value.length < BigInt(max) ? t.value.length : BigInt(max));
    // The object's own buffer, filled straight from guest memory (one copy).
    const data = Buffer.allocUnsafe(n);
    const { rkey, remoteAddr } = t.value;
    if (
      !(await this.#slices(rkey, remoteAddr, n, false, (off, len) =>
        this.#dma.fromHost(rkey, remoteAddr + BigInt(off), data.subarray(off, off + len)),
      ))
    ) {
      this.counts.refused++;
      return fail('AccessDenied', 'the client buffer refused the read');
    }
    this.counts.puts++;
    this.counts.bytesFromHost += n;
    return ok({ data, serverToken: serverToken(this.#ip, n) });
  }
}
