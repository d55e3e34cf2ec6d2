// The raw TCP baseline of bench/mesh.ts: the same messages (a 60-byte header
// and a payload) between two processes over loopback with no emulation in
// between, and the per-process CPU accounting both figures use. Run as a
// script (`node dist/bench/mesh-raw.js --raw-peer [--tls KEYFILE]`) it is the
// echoing peer; with --tls the link is TLS 1.3 with the mesh's own settings
// (lib/mesh/tls.ts: its suites, a pre-shared key), so that the TLS baseline
// and the mesh over TLS differ by the mesh alone.

import { randomFillSync } from 'crypto';
import * as net from 'net';
import type * as tls from 'tls';
import { READ_SINK, rewrapAccepted, SocketWithSink } from '../lib/mesh/dial';
import { loadMeshCredentials, MeshTls } from '../lib/mesh/tls';
import { cpuMs, mainThreadCpuMs } from './support/cpu';

/** The mesh's TLS with the key in `keyFile`, for a baseline. */
export function benchTls(keyFile: string): MeshTls {
  const c = loadMeshCredentials({ psk: keyFile }, {});
  if (!c.ok) throw new Error(c.error);
  if (!c.value) throw new Error(`no key in ${keyFile}`);
  return new MeshTls(c.value);
}

const now = (): bigint => process.hrtime.bigint();
const secsSince = (t0: bigint): number => Number(now() - t0) / 1e9;

/** CPU time of a process: all threads, and its main thread (the rest: V8 GC and compiler workers, libuv's pool). */
export interface Cpu {
  all: number;
  main: number;
}

export function cpuOf(pid: number): Cpu {
  return { all: cpuMs(pid), main: mainThreadCpuMs(pid) };
}

export function cpuSince(pid: number, c0: Cpu): Cpu {
  const c = cpuOf(pid);
  return { all: c.all - c0.all, main: c.main - c0.main };
}

/** Raw baseline framing: a 60-byte header (magic, type, payload length) and the payload. */
const RAW_HDR = 60;
const RAW_MAGIC = 0x52415721;
const RAW_PING = 1;
const RAW_DATA = 2;
const RAW_ACK = 3;

/** A DATA payload's place in the peer's destination buffer (byte 12), as an RDMA WRITE names its remote address. */
function rawHeader(type: number, len: number, offset = 0): Buffer {
  const b = Buffer.alloc(RAW_HDR);
  b.writeUInt32BE(RAW_MAGIC, 0);
  b.writeUInt32BE(type, 4);
  b.writeUInt32BE(len, 8);
  b.writeUInt32BE(offset, 12);
  return b;
}

/** The most a peer's destination buffer may grow to (offset + length of a DATA payload). */
const RAW_DEST_MAX = 64 * 1024 * 1024;
/** A DATA header's offset that asks the peer to drop the payload (read into its scratch buffer). */
const RAW_DROP = 0xffffffff;

/**
 * Where a throughput baseline's bytes live. 'buffers': the sender sends each
 * message out of its own slot of a window-sized source buffer and the peer
 * reads each payload straight into the slot the header names in a
 * destination buffer of the same size, as the mesh moves a 1 MiB WRITE out of
 * A's MR into B's (the same footprint: distinct source and destination
 * bytes, window x 1 MiB each). 'scratch': the sender repeats one 1 MiB buffer
 * and the peer reads everything into one reused 256 KiB buffer and drops it
 * (both stay in the CPU's caches: cheaper than any transfer that keeps its
 * data).
 */
type RawMode = 'buffers' | 'scratch';

// ---- the raw TCP peer (this file run with --raw-peer) ---------------------------------------

/**
 * The child side of the baselines: a TCP listener on 127.0.0.1 (its port on
 * stdout) that answers each PING with a PING of the same size and each DATA
 * message with an ACK, reading the stream as the mesh does (header, then the
 * payload, which it only counts). Exits when its stdin closes (the parent left).
 */
function rawPeer(keyFile?: string): void {
  // TLS: the accepted socket goes to a TLS server (as the mesh hands its accepted sockets over);
  // the payload comes in the TLS socket's chunks and is copied into its place, as the mesh does.
  const secure = keyFile === undefined ? null : benchTls(keyFile);
  const tlsServer = secure?.createServer(10_000) ?? null;
  tlsServer?.on('secureConnection', (s: tls.TLSSocket) => serveRaw(s));
  // Paused, then re-made to read into one reused 256 KiB buffer (as the mesh's own sockets do):
  // the baseline is the cheapest way Node has to take bytes off a socket, not Node's default of
  // a fresh 64 KiB buffer per read.
  const server = net.createServer({ pauseOnConnect: true }, (accepted) => {
    if (tlsServer) {
      accepted.setNoDelay(true);
      tlsServer.emit('connection', accepted);
      return;
    }
    serveRaw(rewrapAccepted(accepted) ?? accepted.resume());
  });
  server.listen(0, '127.0.0.1', () => {
    process.stdout.write(`${(server.address() as net.AddressInfo).port}\n`);
  });
  process.stdin.on('end', () => process.exit(0));
  process.stdin.on('close', () => process.exit(0));
  process.stdin.resume();
}

/** One baseline connection of the peer: PINGs answered, DATA payloads put in place (or dropped) and ACKed. */
function serveRaw(s: net.Socket): void {
  const sink = (s as SocketWithSink)[READ_SINK];
  s.setNoDelay(true);
  const hdr = Buffer.alloc(RAW_HDR);
  let hdrFill = 0;
  let type = 0;
  let left = -1;
  const pong = Buffer.concat([rawHeader(RAW_PING, 8), Buffer.alloc(8)]);
  const ack = rawHeader(RAW_ACK, 0);
  let dest = Buffer.alloc(0);
  /** Next byte of the current DATA payload in `dest`, or -1 while payloads are dropped. */
  let destAt = -1;
  let afterInPlace = false;
  const ended = (): void => {
    left = -1;
    destAt = -1;
    if (type === RAW_PING) s.write(pong);
    else s.write(ack);
  };
  const onChunk = (chunk: Buffer): void => {
    let pos = 0;
    while (pos < chunk.length) {
      if (left < 0) {
        const n = Math.min(RAW_HDR - hdrFill, chunk.length - pos);
        chunk.copy(hdr, hdrFill, pos, pos + n);
        hdrFill += n;
        pos += n;
        if (hdrFill < RAW_HDR) break;
        hdrFill = 0;
        if (hdr.readUInt32BE(0) !== RAW_MAGIC) {
          s.destroy();
          return;
        }
        type = hdr.readUInt32BE(4);
        left = hdr.readUInt32BE(8);
        const offset = hdr.readUInt32BE(12);
        if (type === RAW_DATA && offset !== RAW_DROP) {
          const end = offset + left;
          if (end > RAW_DEST_MAX) {
            s.destroy();
            return;
          }
          if (end > dest.length) dest = Buffer.alloc(end);
          destAt = end - left;
        }
        if (left === 0) {
          ended();
          continue;
        }
      }
      const n = Math.min(left, chunk.length - pos);
      if (destAt >= 0) {
        chunk.copy(dest, destAt, pos, pos + n);
        destAt += n;
      }
      if (type === RAW_PING && left <= 8) chunk.copy(pong, RAW_HDR + 8 - left, pos, pos + n);
      pos += n;
      left -= n;
      if (left === 0) {
        ended();
        afterInPlace = false;
      }
    }
  };
  if (sink) {
    sink.fn = onChunk;
    // The rest of a DATA payload is read straight into its place (as the mesh places a WRITE in the MR).
    sink.target = () => (destAt >= 0 && left > 0 ? dest.subarray(destAt, destAt + left) : null);
    sink.inPlace = (n) => {
      destAt += n;
      left -= n;
      if (left === 0) {
        ended();
        afterInPlace = true;
      }
    };
    // After a payload read in place, the next read takes just a header, so that the next payload goes
    // in place from its first byte (the mesh's parser does the same: FrameParser.headReadLimit).
    sink.limit = () => (afterInPlace && left < 0 && hdrFill === 0 ? RAW_HDR : 0);
  } else s.on('data', onChunk);
  s.on('error', () => s.destroy());
}

// ---- the raw TCP baselines ---------------------------------------------------------------------

/** A client of the raw peer: counts what comes back (PING replies, ACKs), no parsing beyond sizes. */
export class RawClient {
  #received = 0;
  #waiter: (() => void) | null = null;
  #want = 0;

  private constructor(readonly s: net.Socket) {
    s.on('data', (d: Buffer) => {
      this.#received += d.length;
      if (this.#waiter && this.#received >= this.#want) {
        const w = this.#waiter;
        this.#waiter = null;
        w();
      }
    });
  }

  /** To the peer on `port`; with `secure`, over TLS (the handshake done and checked before it resolves). */
  static connect(port: number, secure?: MeshTls): Promise<RawClient> {
    return new Promise((resolve, reject) => {
      const s = net.connect(port, '127.0.0.1', () => {
        s.setNoDelay(true);
        if (!secure) {
          resolve(new RawClient(s));
          return;
        }
        const t = secure.secure(s);
        t.once('error', reject);
        t.once('secureConnect', () => {
          const bad = secure.verify(t);
          if (bad !== null) reject(new Error(`raw TLS peer: ${bad}`));
          else resolve(new RawClient(t));
        });
      });
      s.once('error', reject);
    });
  }

  get received(): number {
    return this.#received;
  }

  /** Resolves once `bytes` in all have come back. */
  until(bytes: number): Promise<void> {
    if (this.#received >= bytes) return Promise.resolve();
    this.#want = bytes;
    return new Promise((r) => {
      this.#waiter = r;
    });
  }

  close(): void {
    this.s.destroy();
  }
}

/** n PING round trips of 60 + 8 bytes each way; microseconds, sorted. */
export async function rawLatency(c: RawClient, n: number): Promise<Float64Array> {
  const ping = Buffer.concat([rawHeader(RAW_PING, 8), Buffer.alloc(8)]);
  const out = new Float64Array(n);
  for (let i = 0; i < n; i++) {
    ping.writeUInt32LE(i, RAW_HDR);
    const want = c.received + ping.length;
    const t0 = now();
    c.s.write(ping);
    await c.until(want);
    out[i] = Number(now() - t0) / 1000;
  }
  return out.sort();
}

/** Bytes moved in `secs`; CPU of this process (`self`) and of the others (`peer`, in the order given) over the run. */
export interface Rate {
  bytes: number;
  secs: number;
  cpu: { self: Cpu; peer: Cpu[] };
}

/**
 * Message `i` of a throughput run. 'buffers': the header and slot i % window
 * of the source buffer in one writev (as the mesh writes a frame's header and
 * the guest memory it lends); 'scratch': one prebuilt message, repeated.
 */
function rawSender(s: net.Socket, size: number, window: number, mode: RawMode): (i: number) => void {
  if (mode === 'scratch') {
    const msg = Buffer.alloc(RAW_HDR + size);
    rawHeader(RAW_DATA, size, RAW_DROP).copy(msg, 0);
    randomFillSync(msg, RAW_HDR);
    return () => {
      s.write(msg);
    };
  }
  const src = randomFillSync(Buffer.alloc(window * size));
  const hdrs = Array.from({ length: window }, (_, k) => rawHeader(RAW_DATA, size, k * size));
  const views = Array.from({ length: window }, (_, k) => src.subarray(k * size, (k + 1) * size));
  return (i) => {
    const k = i % window;
    s.cork();
    s.write(hdrs[k]!);
    s.write(views[k]!);
    s.uncork();
  };
}

/** DATA messages of 60 + `size` bytes with `window` unacknowledged, for `secs` and at least `minBytes`. */
/** `maxSecs`: stop there even short of `minBytes` (a very slow machine). */
export async function rawThroughput(
  c: RawClient,
  peers: number[],
  size: number,
  window: number,
  secs: number,
  minBytes: number,
  maxSecs: number,
  mode: RawMode,
): Promise<Rate> {
  const send = rawSender(c.s, size, window, mode);
  const acks0 = c.received;
  let sent = 0;
  const c0 = peers.map(cpuOf);
  const s0 = cpuOf(process.pid);
  const t0 = now();
  let stop = false;
  while (sent < window) {
    send(sent);
    sent++;
  }
  for (;;) {
    const acked = (c.received - acks0) / RAW_HDR;
    if (!stop) {
      const el = secsSince(t0);
      if ((el >= secs && acked * size >= minBytes) || el >= maxSecs) stop = true;
    }
    if (stop && acked >= sent) break;
    if (!stop && sent - acked < window) {
      while (sent - acked < window) {
        send(sent);
        sent++;
      }
      continue;
    }
    await c.until(acks0 + (Math.floor(acked) + 1) * RAW_HDR);
  }
  const el = secsSince(t0);
  return {
    bytes: sent * size,
    secs: el,
    cpu: { self: cpuSince(process.pid, s0), peer: peers.map((p, i) => cpuSince(p, c0[i]!)) },
  };
}

if (require.main === module && process.argv[2] === '--raw-peer')
  rawPeer(process.argv[3] === '--tls' ? process.argv[4] : undefined);
