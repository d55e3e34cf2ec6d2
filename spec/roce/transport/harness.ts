// Two RoCE endpoints in one process for the transport specs: fake guest
// memory behind memory keys, SQ/RQ arrays, recorded completions and events,
// and a wire that carries the real encoded frames between the ports, in
// order or through a seeded lossy, reordering link. Timers are whatever
// setTimeout/setImmediate are: the specs install sinon fake timers.

import * as sinon from 'sinon';
import { RocePath } from '../../../lib/roce/frame';
import { RocePort } from '../../../lib/roce/transport/port';
import type { RoceQp } from '../../../lib/roce/transport/qp';
import {
  ACCESS_LOCAL_WRITE,
  ACCESS_REMOTE_ATOMIC,
  ACCESS_REMOTE_READ,
  ACCESS_REMOTE_WRITE,
  type Completion,
  QPS_INIT,
  QPS_RTR,
  QPS_RTS,
  QPT_RC,
  type RecvWqe,
  type RoceMemory,
  RoceQpConfig,
  type SendWqe,
  WR_SEND,
} from '../../../lib/roce/transport/types';
import { xorshift } from '../../support/rng';
import { ipv4Path } from '../paths';

const ALL_ACCESS = ACCESS_LOCAL_WRITE | ACCESS_REMOTE_WRITE | ACCESS_REMOTE_READ | ACCESS_REMOTE_ATOMIC;

interface Region {
  base: number;
  buf: Buffer;
  access: number;
}

/** Guest memory: regions by key, each a buffer at a base address with access rights. */
class FakeMemory implements RoceMemory {
  readonly regions = new Map<number, Region>();

  register(key: number, base: number, size: number, access = ALL_ACCESS): Buffer {
    const buf = Buffer.alloc(size);
    this.regions.set(key, { base, buf, access });
    return buf;
  }

  #at(key: number, addr: number, len: number, remote: boolean, access: number): Region | null {
    const r = this.regions.get(key);
    if (!r) return null;
    if (remote && (r.access & access) !== access) return null;
    if (!remote && access && (r.access & access) !== access) return null;
    if (!(addr >= r.base && len >= 0 && addr + len <= r.base + r.buf.length)) return null;
    return r;
  }

  read(key: number, addr: number, len: number, remote: boolean, access: number, dst: Buffer, dstOff: number): boolean {
    const r = this.#at(key, addr, len, remote, access);
    if (!r) return false;
    r.buf.copy(dst, dstOff, addr - r.base, addr - r.base + len);
    return true;
  }

  write(key: number, addr: number, len: number, remote: boolean, access: number, src: Buffer, srcOff: number): boolean {
    const r = this.#at(key, addr, len, remote, access);
    if (!r) return false;
    src.copy(r.buf, addr - r.base, srcOff, srcOff + len);
    return true;
  }

  check(key: number, addr: number, len: number, remote: boolean, access: number): boolean {
    return this.#at(key, addr, len, remote, access) !== null;
  }
}

interface RecordedCompletion {
  wrId: number;
  status: number;
  opcode: number;
  byteLen: number;
  signaled: boolean;
  hasImm: boolean;
  imm: number;
  hasInv: boolean;
  invRkey: number;
  srcQp: number;
  hasGrh: boolean;
}

function record(c: Completion): RecordedCompletion {
  return {
    wrId: c.wrId,
    status: c.status,
    opcode: c.opcode,
    byteLen: c.byteLen,
    signaled: c.signaled,
    hasImm: c.hasImm,
    imm: c.imm,
    hasInv: c.hasInv,
    invRkey: c.invRkey,
    srcQp: c.srcQp,
    hasGrh: c.hasGrh,
  };
}

/** One side: a port with one QP, its memory and queues, and what came out of it. */
export class Endpoint {
  readonly port = new RocePort();
  readonly mem = new FakeMemory();
  readonly sq: SendWqe[] = [];
  readonly rq: RecvWqe[] = [];
  readonly sendCqes: RecordedCompletion[] = [];
  readonly recvCqes: RecordedCompletion[] = [];
  readonly events: number[] = [];
  /** Frames sent and not yet delivered (copies). */
  readonly out: Buffer[] = [];
  /** Every frame ever sent (copies), for the specs that look at them. */
  readonly sent: Buffer[] = [];
  readonly cfg: RoceQpConfig;
  readonly qp: RoceQp;

  constructor(
    readonly path: RocePath,
    qpn: number,
    type: number,
    tune?: (cfg: RoceQpConfig) => void,
  ) {
    this.cfg = new RoceQpConfig(path);
    this.cfg.type = type;
    this.cfg.qpn = qpn;
    tune?.(this.cfg);
    this.port.addGid(path.srcGid);
    this.qp = this.port.createQp(this.cfg, {
      memory: this.mem,
      queues: { nextSend: () => this.sq.shift() ?? null, nextRecv: () => this.rq.shift() ?? null },
      completions: {
        sendCompleted: (c) => {
          this.sendCqes.push(record(c));
        },
        recvCompleted: (c) => {
          this.recvCqes.push(record(c));
        },
      },
      events: {
        qpEvent: (_qpn, e) => {
          this.events.push(e);
        },
      },
      wire: {
        send: (b, n) => {
          const copy = Buffer.from(b.subarray(0, n));
          this.out.push(copy);
          this.sent.push(copy);
        },
      },
    });
  }

  /** Post a send WQE and ring the doorbell. */
  post(wqe: Partial<SendWqe> & { wrId: number }): void {
    this.sq.push({
      opcode: WR_SEND,
      sgl: [],
      inline: null,
      length: 0,
      signaled: true,
      solicited: false,
      remoteAddr: 0,
      rkey: 0,
      imm: 0,
      swapHi: 0,
      swapLo: 0,
      cmpHi: 0,
      cmpLo: 0,
      ud: null,
      ...wqe,
    });
    this.qp.kick();
  }

  postRecv(wrId: number, lkey: number, addr: number, length: number): void {
    this.rq.push({ wrId, sgl: [{ addr, length, lkey }], length });
  }
}

/** Two connected QPs (a: QPN 0x11 at 10.0.0.1, b: QPN 0x22 at 10.0.0.2), both in RTS. */
export function connectedPair(tune?: (cfg: RoceQpConfig) => void, type = QPT_RC): { a: Endpoint; b: Endpoint } {
  const a = new Endpoint(ipv4Path(1, 2), 0x11, type, (c) => {
    c.destQpn = 0x22;
    tune?.(c);
  });
  const b = new Endpoint(ipv4Path(2, 1), 0x22, type, (c) => {
    c.destQpn = 0x11;
    tune?.(c);
  });
  for (const e of [a, b]) {
    e.qp.modify(QPS_INIT);
    e.qp.modify(QPS_RTR);
  }
  // PSNs: a sends from a.cfg.sqPsn, which b expects as its rqPsn, and the other way round.
  a.qp.modify(QPS_RTS);
  b.qp.modify(QPS_RTS);
  return { a, b };
}

/** Move frames between the two until both are quiet and no timer is left (bounded), firing timers as the clock reaches them. */
export function settle(
  clock: sinon.SinonFakeTimers,
  a: Endpoint,
  b: Endpoint,
  wire: (from: Endpoint, to: Endpoint, frames: Buffer[]) => void = deliverAll,
  maxSteps = 100000,
): void {
  for (let step = 0; step < maxSteps; step++) {
    if (a.out.length || b.out.length) {
      wire(a, b, a.out.splice(0));
      wire(b, a, b.out.splice(0));
      continue;
    }
    if (clock.countTimers() === 0) return;
    clock.next();
  }
  throw new Error('the endpoints did not settle');
}

export function deliverAll(_from: Endpoint, to: Endpoint, frames: Buffer[]): void {
  for (const f of frames) to.port.receive(f, f.length);
}

/** A link that loses `lossPercent` of frames and reorders within a small window, from a seed. */
export function lossyWire(seed: number, lossPercent: number): (from: Endpoint, to: Endpoint, frames: Buffer[]) => void {
  const next = xorshift(seed);
  return (_from, to, frames) => {
    const kept = frames.filter(() => next() % 100 >= lossPercent);
    for (let i = kept.length - 1; i > 0; i--) {
      if (next() % 4 === 0) {
        const j = Math.max(0, i - 1 - (next() % 3));
        [kept[i], kept[j]] = [kept[j]!, kept[i]!];
      }
    }
    for (const f of kept) to.port.receive(f, f.length);
  };
}

export function fakeClock(): sinon.SinonFakeTimers {
  return sinon.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'setImmediate', 'clearImmediate'] });
}

/** Bytes 0..n-1 from a seed. */
export function pattern(n: number, seed: number): Buffer {
  const next = xorshift(seed);
  const b = Buffer.alloc(n);
  for (let i = 0; i < n; i++) b[i] = next() & 0xff;
  return b;
}
