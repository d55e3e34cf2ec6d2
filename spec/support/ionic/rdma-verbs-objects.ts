// The objects of the verbs guest (./rdma-verbs.ts): addresses, CQs, rings,
// SRQs, QPs and work requests as the guest keeps them, CQEs decoded with our
// own offsets (docs/driver-contract.md, ionic RDMA R4.6), MRs over scattered arena pages, and arena
// snapshots that show every byte the device wrote.

import type { Logger } from '../../../lib/log';
import type { HostLink } from '../../../lib/net/frame-endpoint';
import type { RdmaBackend } from '../../../lib/rdma/backend';
import type { IonicGuest } from './guest';
import { PAGE } from './regs';
import type { BootOptions } from './rdma-guest';
import type { TemplateOpts } from './rdma-cmds';

/** A dotted IPv4 address as 4 bytes. */
export function v4(s: string): Buffer {
  return Buffer.from(s.split('.').map(Number));
}

/** An IPv6 address (full eight groups, no ::) as 16 bytes. */
export function v6(s: string): Buffer {
  const b = Buffer.alloc(16);
  s.split(':').forEach((grp, i) => b.writeUInt16BE(parseInt(grp, 16), 2 * i));
  return b;
}

// ---- objects --------------------------------------------------------------------------------

export interface Cq {
  readonly id: number;
  readonly ring: number;
  readonly depthLog2: number;
  /** Host read position and the color it expects there (1 on the first pass). */
  next: number;
  color: number;
}

export interface WorkRing {
  readonly at: number;
  readonly depthLog2: number;
  readonly strideLog2: number;
  /** Host producer index. */
  pi: number;
}

export interface Srq {
  readonly id: number;
  readonly ring: WorkRing;
}

/** How a QP was brought to RTS, so reset() can do it again. */
type UpPlan =
  | { readonly kind: 'connected'; readonly dest: number; readonly o: ConnectOptions }
  | { readonly kind: 'datagram'; readonly qkey: number };

export interface Qp {
  readonly id: number;
  readonly type: number;
  readonly flags: number;
  readonly sq: WorkRing;
  /** Null when receives come from `srq`. */
  readonly rq: WorkRing | null;
  readonly srq: Srq | null;
  readonly sqCq: Cq;
  readonly rqCq: Cq;
  /** Remote WQEs posted since the last RESET (the host's MSN numbering, ionic RDMA R4.7). */
  remote: number;
  up: UpPlan | null;
}

export interface Sge {
  va: number | bigint;
  len: number;
  lkey: number;
}

export interface SendWr {
  op: number;
  /** wqe_id: bytes 0-3 and 4-7, LE. */
  id?: number;
  idHi?: number;
  sges?: readonly Sge[];
  /** Inline payload (INLINE flag, num_sge 0, data at 32). */
  inline?: Buffer;
  /** The length field; default the SGE sum or the inline length. */
  length?: number;
  /** num_sge_key; default the SGE count (REG_MR / BIND_MW: the new tag). */
  numSge?: number;
  /** imm_data_key, BE32: immediate, rkey to invalidate, or the current key. */
  imm?: number;
  remote?: { va: number | bigint; rkey: number };
  ud?: { ah: number; qpn: number; qkey: number };
  atomic?: { swapAdd: bigint; compare?: bigint; local: Sge };
  regMr?: {
    va: number;
    length: number;
    offset: number;
    dma: number;
    mapCount: number;
    flags: number;
    pageSizeLog2?: number;
  };
  bindMw?: { va: number; length: number; lkey: number; flags: number };
  /** Default true. */
  signaled?: boolean;
  solicited?: boolean;
  fence?: boolean;
  /** SGL in the SPEC32 format (lengths at 32, SGEs at 64). */
  spec?: boolean;
}

export interface RecvWr {
  id: number;
  idHi?: number;
  sges: readonly Sge[];
  spec?: boolean;
}

/** A CQE as the host decodes it (ionic RDMA R4.6), read with our own offsets. */
export interface Cqe {
  readonly type: number;
  readonly qid: number;
  readonly color: number;
  readonly error: boolean;
  readonly statusLength: number;
  /** RECV: wqe_id @0; SEND_NPG: npg_wqe_id @16 (LE halves). */
  readonly wqeIdLo: number;
  readonly wqeIdHi: number;
  readonly msn: number;
  readonly srcQpn: number;
  readonly recvOp: number;
  readonly vlan: boolean;
  readonly ipv4: boolean;
  readonly srcMac: Buffer;
  readonly vlanTag: number;
  readonly immDataRkey: number;
}

export function decodeCqeBytes(e: Buffer): Cqe {
  const qtf = e.readUInt32BE(28);
  const type = (qtf >>> 5) & 7;
  const sqo = e.readUInt32BE(8);
  const idAt = type === 1 ? 0 : 16;
  return {
    type,
    qid: qtf >>> 8,
    color: qtf & 1,
    error: (qtf & 2) !== 0,
    statusLength: e.readUInt32BE(24),
    wqeIdLo: e.readUInt32LE(idAt),
    wqeIdHi: e.readUInt32LE(idAt + 4),
    msn: e.readUInt32BE(4),
    srcQpn: sqo & 0xffffff,
    recvOp: (sqo >>> 24) & 0x1f,
    vlan: ((sqo >>> 30) & 1) === 1,
    ipv4: sqo >>> 31 === 1,
    srcMac: Buffer.from(e.subarray(12, 18)),
    vlanTag: e.readUInt16BE(18),
    immDataRkey: e.readUInt32BE(20),
  };
}

/** An MR over guest pages: MR byte `off` lives at at(off). */
export class GuestMr {
  constructor(
    readonly g: IonicGuest,
    readonly key: number,
    readonly va: number,
    readonly length: number,
    readonly flags: number,
    readonly pages: readonly number[],
    readonly offset: number,
  ) {}

  at(off: number): number {
    const o = off + this.offset;
    return this.pages[Math.floor(o / PAGE)]! + (o % PAGE);
  }

  /** Guest ranges [addr, len] holding MR bytes [off, off + len). */
  ranges(off: number, len: number): [number, number][] {
    const out: [number, number][] = [];
    while (len > 0) {
      const at = this.at(off);
      const n = Math.min(len, PAGE - (at % PAGE));
      out.push([at, n]);
      off += n;
      len -= n;
    }
    return out;
  }

  /** Every guest range of the MR. */
  all(): [number, number][] {
    return this.ranges(0, this.length);
  }

  read(off: number, len: number): Buffer {
    return Buffer.concat(this.ranges(off, len).map(([a, n]) => Buffer.from(this.g.mem(a, n))));
  }

  write(off: number, data: Buffer): void {
    let i = 0;
    for (const [a, n] of this.ranges(off, data.length)) {
      data.copy(this.g.mem(a, n), 0, i, i + n);
      i += n;
    }
  }

  /** An SGE over MR bytes [off, off + len). */
  sge(off: number, len: number, lkey = this.key): Sge {
    return { va: this.va + off, len, lkey };
  }
}

/** Guest bytes at some ranges, to compare later. */
export class Snapshot {
  readonly #parts: { at: number; data: Buffer }[];

  constructor(
    readonly g: IonicGuest,
    ranges: readonly (readonly [number, number])[],
  ) {
    this.#parts = ranges.map(([at, len]) => ({ at, data: Buffer.from(g.mem(at, len)) }));
  }

  /** Runs [addr, len] that differ now. */
  changed(): [number, number][] {
    const out: [number, number][] = [];
    for (const p of this.#parts) {
      const now = this.g.mem(p.at, p.data.length);
      if (now.equals(p.data)) continue;
      let i = 0;
      while (i < now.length) {
        if (now[i] === p.data[i]) {
          i++;
          continue;
        }
        const start = i;
        while (i < now.length && now[i] !== p.data[i]) i++;
        out.push([p.at + start, i - start]);
      }
    }
    return out;
  }

  /** Changed runs that fall outside every `allowed` range. */
  changedOutside(allowed: readonly (readonly [number, number])[]): [number, number][] {
    const out: [number, number][] = [];
    for (const [at, len] of this.changed()) {
      for (let a = at; a < at + len; a++) {
        if (allowed.some(([s, n]) => a >= s && a < s + n)) continue;
        const last = out[out.length - 1];
        if (last && last[0] + last[1] === a) last[1]++;
        else out.push([a, 1]);
      }
    }
    return out;
  }
}

export interface ConnectOptions {
  /** QP access flags (MODIFY_QP ACCESS_FLAGS at INIT); default remote write, read and atomic. */
  access?: number;
  rnrRetry?: number;
  rnrTimer?: number;
  retryCnt?: number;
  timeout?: number;
  pmtu?: number;
  /** The AV template; default IPv4 10.0.0.1 -> 10.0.0.1. */
  tpl?: TemplateOpts;
}

export interface VerbsOptions extends BootOptions {
  ramSize?: number;
  /** Pages in the data arena (default 256). */
  arenaPages?: number;
  /** The device's RDMA backend (default loopback). */
  rdmaBackend?: RdmaBackend;
  /** Where the device and server log (default: nowhere). */
  log?: Logger;
  /** The host side of the device's Ethernet port (default: none). */
  link?: HostLink;
}
