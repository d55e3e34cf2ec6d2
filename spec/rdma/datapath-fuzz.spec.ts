// Bad input and seeded fuzz for the RDMA data path. Garbage and truncated
// WQEs never throw; random but plausible WQEs go through decode, translate
// and the operations, and every outcome is checked against an independent
// byte-by-byte model of the MRs: failures leave guest memory untouched,
// successes move exactly the modelled bytes, and nothing outside writable
// MRs changes unless a key-0 privilege allowed it.

import { expect } from 'chai';
import {
  decodeCqe, decodeRecvWqe, decodeSendWqe, encodeCqe, MIN_WQE_SIZE, MrFlag, newCqeRecord, newRecvWqe, newSendWqe, QpFlag,
  RecvWqe, SendVerb, SendWqe, WqeErrorCode,
} from '../../lib/rdma/datapath/layouts';
import { execAtomic, execRdmaRead, execRdmaWrite, execSend, GRH_SIZE, messageLength, newOpEnv, NO_COMPLETION, OpResult } from '../../lib/rdma/datapath/ops';
import {
  Access, KeyContext, KeyUse, MemoryRegion, MrBuildError, mrFromDirect, mrFromPages, translate,
} from '../../lib/rdma/datapath/translate';
import { BufferMemory } from '../../lib/vfio-user/buffer-memory';
import { FakeMrs, kctx, Poke, randInt, rng } from './datapath-helpers';

const PG = 4096;
const RAM = 0x100000;
const RAM_PAGES = 64;
const LW = MrFlag.LOCAL_WRITE;
const RW = MrFlag.REMOTE_WRITE;
const RR = MrFlag.REMOTE_READ;
const RA = MrFlag.REMOTE_ATOMIC;
const QP_REMOTE = QpFlag.REMOTE_WRITE | QpFlag.REMOTE_READ | QpFlag.REMOTE_ATOMIC;

/** The test's own model of an MR: byte offset -> RAM offset, written without the code under test. */
interface ModelMr {
  key: number;
  pd: number;
  base: number;
  length: number;
  flags: number;
  pages: number[]; // RAM page numbers
  firstOffset: number;
}

const MODEL: ModelMr[] = [
  { key: 0x101, pd: 1, base: 0x10000, length: 4 * PG, flags: LW, pages: [0, 1, 2, 3], firstOffset: 0 },
  { key: 0x201, pd: 1, base: 0x7000_0000_0100, length: 3 * PG + 0x80, flags: LW | RW | RR | RA, pages: [10, 12, 13, 20], firstOffset: 0x100 },
  { key: 0x305, pd: 1, base: 0x40000, length: PG, flags: RR, pages: [25], firstOffset: 0 },
  { key: 0x401, pd: 2, base: 0x50000, length: PG, flags: LW | RW | RR | RA, pages: [30], firstOffset: 0 },
  { key: 0x501, pd: 1, base: 0, length: 2 * PG, flags: LW | RW | MrFlag.ZERO_BASED, pages: [40, 41], firstOffset: 0 },
];
const BAD_KEYS = [0x202, 0x306, 0x999901, 0xffffffff];

function build(m: ModelMr): MemoryRegion {
  const spec = { key: m.key, pd: m.pd, iova: m.base === 0 ? 0x1234000 : m.base, length: m.length, flags: m.flags };
  const r = m.pages.length === 1
    ? mrFromDirect(spec, RAM + m.pages[0]! * PG + m.firstOffset)
    : mrFromPages(spec, { pageSizeLog2: 12, firstPageOffset: m.firstOffset }, m.pages.map((p) => RAM + p * PG));
  if (typeof r === 'number') throw new Error(`model MR ${m.key.toString(16)}: ${r as MrBuildError}`);
  return r;
}

/** RAM offsets of [va, va+len) through `key`, or null where the model says the access fails. */
function model(key: number, va: number, len: number, access: number, ctx: KeyContext, use: KeyUse): number[] | null {
  if (len === 0) return [];
  if (!Number.isSafeInteger(va) || va < 0) return null;
  if (key === 0) {
    const allowed = use === KeyUse.LOCAL ? (ctx.qpFlags & QpFlag.PRIVILEGED) !== 0
      : use === KeyUse.REMOTE ? (ctx.qpFlags & QpFlag.REMOTE_PRIVILEGED) !== 0 : false;
    if (!allowed || va < RAM || va + len > RAM + RAM_PAGES * PG) return null;
    return Array.from({ length: len }, (_, i) => va - RAM + i);
  }
  const m = MODEL.find((x) => x.key === key);
  if (!m || m.pd !== ctx.pd || (m.flags & access) !== access) return null;
  if (va < m.base || va + len > m.base + m.length) return null;
  const out: number[] = [];
  for (let i = 0; i < len; i++) {
    const o = va - m.base + i + m.firstOffset;
    out.push(m.pages[Math.floor(o / PG)]! * PG + (o % PG));
  }
  return out;
}

function writableByAnyMr(): Set<number> {
  const s = new Set<number>();
  for (const m of MODEL) {
    if ((m.flags & (LW | RW | RA)) === 0) continue;
    for (const off of model(m.key, m.base, m.length, 0, kctx(m.pd), KeyUse.LOCAL)!) s.add(off);
  }
  return s;
}

const WRITABLE = writableByAnyMr();

type Sg = [number, number, number];

function pickKey(r: () => number): number {
  const x = r();
  if (x < 0.7) return MODEL[randInt(r, MODEL.length)]!.key;
  if (x < 0.85) return 0;
  return BAD_KEYS[randInt(r, BAD_KEYS.length)]!;
}

function pickLen(r: () => number): number {
  return [0, 1, 7, 8, 16, 64, 300, PG - 1, PG, PG + 1, 2 * PG + 5][randInt(r, 11)]!;
}

function pickVa(r: () => number, key: number, len: number): number {
  const m = MODEL.find((x) => x.key === key);
  const x = r();
  if (x < 0.05) return 2 ** 60 + randInt(r, 1000); // undecodable as a JS number once written BE64
  if (key === 0 || !m) return RAM + randInt(r, RAM_PAGES * PG + 64) - 32;
  if (x < 0.7) return m.base + randInt(r, Math.max(1, m.length - len + 1));
  return m.base + randInt(r, m.length + 64) - 32;
}

function sgl(r: () => number, n: number): Sg[] {
  const out: Sg[] = [];
  for (let i = 0; i < n; i++) {
    const key = pickKey(r);
    const len = pickLen(r);
    out.push([pickVa(r, key, len), len, key]);
  }
  return out;
}

function verbWqe(r: () => number, verb: number, version: number): Buffer {
  const p = new Poke(256).u8(8, version < 2 ? verb : [0x20, 0xa0, 0x60, 0x02, 0x21, 0x61, 0x04, 0x05, 0x06, 0x07, 0x08][verb]!);
  p.bytes(0, [randInt(r, 256), randInt(r, 256), 0, 0, 0, 0, 0, randInt(r, 256)]);
  const rkey = pickKey(r);
  if (verb === SendVerb.ATOMIC_CS || verb === SendVerb.ATOMIC_FA) {
    let va = pickVa(r, rkey, 8);
    if (r() < 0.8) va -= va % 8;
    const lkey = pickKey(r);
    const lva = pickVa(r, lkey, 8);
    p.u8(9, 1).be64(16, 0).be32(16, Math.floor(va / 2 ** 32) >>> 0).be32(20, va % 2 ** 32).be32(24, rkey)
      .be32(28, randInt(r, 2 ** 32)).be32(32, randInt(r, 2 ** 32)).be32(36, randInt(r, 3)).be32(40, randInt(r, 3));
    if (version < 2) p.sge(48, lva, r() < 0.95 ? 8 : 16, lkey); else p.be32(44, lkey).be64(48, lva);
    return p.buf;
  }
  const inline = verb !== SendVerb.RDMA_READ && r() < 0.2;
  const rva = pickVa(r, rkey, 64);
  p.be32(16, Math.floor(rva / 2 ** 32) >>> 0).be32(20, rva % 2 ** 32).be32(24, rkey);
  if (inline) {
    const n = randInt(r, 240);
    p.be16(10, 0x4).be32(28, r() < 0.95 ? n : 300);
    for (let i = 0; i < n; i++) p.u8(32 + i, randInt(r, 256));
    return p.buf;
  }
  const list = sgl(r, randInt(r, 5));
  const spec = list.length > 2 && r() < 0.5;
  const first = spec ? 64 : 32;
  p.u8(9, list.length).be16(10, spec ? 0x1000 : 0).be32(28, list.reduce((s, x) => s + x[1], 0) + (r() < 0.03 ? 1 : 0));
  list.forEach(([va, len, key], i) => p.sge(first + 16 * i, va, len, key));
  return p.buf;
}

function recvWqe(r: () => number): Buffer {
  const list = sgl(r, randInt(r, 4));
  const p = new Poke(128).u8(9, list.length);
  list.forEach(([va, len, key], i) => p.sge(32 + 16 * i, va, len, key));
  return p.buf;
}

function gatherModel(w: SendWqe, buf: Buffer, ctx: KeyContext, access: number): number[] | Buffer | null {
  if (w.inline) return buf.subarray(w.inlineOffset, w.inlineOffset + w.inlineLength);
  const all: number[] = [];
  for (let i = 0; i < w.sgeCount; i++) {
    const s = w.sges[i]!;
    const part = model(s.lkey, s.va, s.len, access, ctx, KeyUse.LOCAL);
    if (!part) return null;
    all.push(...part);
  }
  return all;
}

function recvModel(rq: RecvWqe, total: number, ctx: KeyContext): number[] | null {
  const all: number[] = [];
  let left = total;
  for (let i = 0; i < rq.sgeCount && left > 0; i++) {
    const s = rq.sges[i]!;
    const n = Math.min(left, s.len);
    const part = model(s.lkey, s.va, n, LW, ctx, KeyUse.LOCAL);
    if (!part) return null;
    all.push(...part);
    left -= n;
  }
  return left > 0 ? null : all;
}

function bytesAt(ram: Buffer, src: number[] | Buffer): Buffer {
  return Buffer.isBuffer(src) ? Buffer.from(src) : Buffer.from(src.map((o) => ram[o]!));
}

function overlaps(a: number[] | Buffer, b: number[]): boolean {
  if (Buffer.isBuffer(a)) return false;
  const s = new Set(a);
  return b.some((x) => s.has(x));
}

describe('rdma datapath: bad input and fuzz', () => {
  it('random bytes of every length never throw in any decoder', () => {
    const r = rng(0xdecaf);
    const send = newSendWqe();
    const rq = newRecvWqe();
    const cqe = newCqeRecord();
    let decoded = 0;
    for (let i = 0; i < 20000; i++) {
      const len = randInt(r, 300);
      const buf = Buffer.alloc(len);
      for (let j = 0; j < len; j++) buf[j] = randInt(r, 256);
      if (len > 9 && r() < 0.5) { buf[8] = randInt(r, 12); buf[9] = randInt(r, 6); }
      if (len > 11 && r() < 0.5) buf[10] = randInt(r, 4) << 4;
      const opts = { version: 1 + randInt(r, 2), datagram: r() < 0.3 };
      const s = decodeSendWqe(buf, opts, send);
      if (s.ok) decoded++;
      else expect(s.status).to.be.within(1, 14);
      const q = decodeRecvWqe(buf, rq);
      if (!q.ok) expect(q.status).to.be.within(1, 14);
      decodeCqe(buf, randInt(r, 40), cqe);
      encodeCqe(cqe, Buffer.alloc(32));
    }
    expect(decoded).to.be.greaterThan(100);
  });

  it('a valid WQE truncated at every length fails cleanly', () => {
    const full = new Poke(144).u8(8, 0).u8(9, 5).be16(10, 0x1000).be32(28, 5);
    for (let i = 0; i < 5; i++) full.sge(64 + 16 * i, 0x1000, 1, 0x101);
    expect(decodeSendWqe(full.buf, { version: 1, datagram: false }).ok).to.equal(true);
    for (let n = 0; n < 144; n++) {
      const r = decodeSendWqe(full.buf.subarray(0, n), { version: 1, datagram: false });
      expect(r.ok, `length ${n}`).to.equal(false);
      if (!r.ok) expect(r.code).to.equal(n < MIN_WQE_SIZE ? WqeErrorCode.TRUNCATED : WqeErrorCode.TOO_MANY_SGES);
    }
    expect(() => decodeSendWqe(null as unknown as Buffer, { version: 1, datagram: false })).to.not.throw();
    expect(() => decodeRecvWqe(undefined as unknown as Buffer)).to.not.throw();
  });

  it('translate never throws on garbage arguments', () => {
    const mem = new BufferMemory(Buffer.alloc(PG), RAM);
    const m = build(MODEL[1]!);
    const vals = [Number.NaN, -1, -0, 0.5, Infinity, -Infinity, 2 ** 53, 2 ** 64, Number.MAX_SAFE_INTEGER, 0, 1, RAM];
    for (const va of vals) for (const len of vals) {
      for (const a of [Access.LOCAL_READ, Access.LOCAL_WRITE, Access.REMOTE_ATOMIC]) {
        expect(() => translate(m, va, len, a, mem, [])).to.not.throw();
      }
    }
  });

  for (const seed of [1, 2, 3, 0xbeef]) {
    it(`seeded fuzz ${seed}: decode + translate + ops agree with the model`, function () {
      this.timeout(60000);
      const r = rng(seed);
      const ram = Buffer.alloc(RAM_PAGES * PG);
      const mem = new BufferMemory(ram, RAM);
      const mrs = new FakeMrs();
      for (const m of MODEL) mrs.add(build(m));
      const env = newOpEnv(mem, mrs);
      const sctxs = [kctx(1), kctx(1), kctx(2), kctx(1, QpFlag.PRIVILEGED)];
      const rctxs = [kctx(1, QP_REMOTE), kctx(1, QP_REMOTE), kctx(1, QpFlag.REMOTE_READ), kctx(2, QP_REMOTE), kctx(1, QP_REMOTE | QpFlag.REMOTE_PRIVILEGED)];
      const outcomes = new Map<string, number>();
      const send = newSendWqe();
      const rq = newRecvWqe();
      for (let iter = 0; iter < 1500; iter++) {
        for (let i = 0; i < ram.length; i += 4) ram.writeUInt32LE((iter * 2654435761 + i * 40503) >>> 0, i);
        const before = Buffer.from(ram);
        const version = 1 + randInt(r, 2);
        const verb = [0, 1, 2, 3, 4, 5, 6, 7][randInt(r, 8)]!;
        const buf = verbWqe(r, verb, version);
        const w = decodeSendWqe(buf, { version, datagram: false }, send);
        if (!w.ok) { outcomes.set(`decode:${w.code}`, (outcomes.get(`decode:${w.code}`) ?? 0) + 1); continue; }
        const sctx = sctxs[randInt(r, sctxs.length)]!;
        const rctx = rctxs[randInt(r, rctxs.length)]!;
        const use = r() < 0.85 ? KeyUse.REMOTE : KeyUse.UNTRUSTED;
        let res: OpResult;
        let moved: { src: number[] | Buffer; dst: number[] } | null = null;
        let atomicAt: { remote: number[]; local: number[] } | null = null;
        switch (w.verb) {
          case SendVerb.SEND: case SendVerb.SEND_IMM: case SendVerb.SEND_INV: {
            const q = decodeRecvWqe(recvWqe(r), rq);
            if (!q.ok) continue;
            const prefix = r() < 0.3 ? Buffer.alloc(GRH_SIZE, 0x5a) : null;
            res = execSend(env, w, buf, sctx, q, kctx(1), prefix);
            const src = gatherModel(w, buf, sctx, 0);
            const total = messageLength(w) + (prefix ? GRH_SIZE : 0);
            const dst = total <= q.sgeTotal ? recvModel(q, total, kctx(1)) : null;
            if (src && dst) {
              const full = prefix ? Buffer.concat([prefix, bytesAt(before, src)]) : src;
              moved = { src: full, dst };
            }
            break;
          }
          case SendVerb.RDMA_WRITE: case SendVerb.RDMA_WRITE_IMM: {
            res = execRdmaWrite(env, w, buf, sctx, rctx, use);
            const src = gatherModel(w, buf, sctx, 0);
            const len = messageLength(w);
            const dst = (rctx.qpFlags & QpFlag.REMOTE_WRITE) !== 0 || len === 0 ? model(w.rdma.rkey, w.rdma.remoteVa, len, RW, rctx, use) : null;
            if (src && dst) moved = { src, dst };
            break;
          }
          case SendVerb.RDMA_READ: {
            res = execRdmaRead(env, w, sctx, rctx, use);
            const src = (rctx.qpFlags & QpFlag.REMOTE_READ) !== 0 || w.sgeTotal === 0 ? model(w.rdma.rkey, w.rdma.remoteVa, w.sgeTotal, RR, rctx, use) : null;
            const dst = gatherModel(w, buf, sctx, LW);
            if (src && dst && !Buffer.isBuffer(dst)) moved = { src, dst };
            break;
          }
          default: {
            res = execAtomic(env, w, sctx, rctx, use);
            const aligned = w.rdma.remoteVa >= 0 && w.rdma.remoteVa % 8 === 0;
            const remote = aligned && (rctx.qpFlags & QpFlag.REMOTE_ATOMIC) !== 0 ? model(w.rdma.rkey, w.rdma.remoteVa, 8, RA, rctx, use) : null;
            const local = w.atomic.localLen === 8 ? model(w.atomic.localLkey, w.atomic.localVa, 8, LW, sctx, KeyUse.LOCAL) : null;
            if (remote && local) atomicAt = { remote, local };
            break;
          }
        }
        const key = `${w.verb}:${res.status}:${res.responder}`;
        outcomes.set(key, (outcomes.get(key) ?? 0) + 1);
        expect(res.status).to.be.within(0, 14);
        expect(res.responder === NO_COMPLETION || (res.responder >= 0 && res.responder <= 14)).to.equal(true);
        expect(env.src.length + env.dst.length, 'scratch views released').to.equal(0);

        const succeeded = res.status === 0 && (res.responder === NO_COMPLETION || res.responder === 0);
        const ctxMsg = `seed ${seed} iter ${iter} verb ${w.verb} status ${res.status}/${res.responder}`;
        expect(succeeded, `${ctxMsg}: model says ${moved || atomicAt ? 'success' : 'failure'}`).to.equal(moved !== null || atomicAt !== null);
        if (!succeeded) {
          expect(ram.equals(before), `${ctxMsg}: memory changed on failure`).to.equal(true);
          continue;
        }
        if (moved) {
          expect(res.bytes, ctxMsg).to.equal(moved.dst.length);
          // overlapping buffers (source with destination, or destination SGEs with each other) have no defined result
          const selfOverlap = new Set(moved.dst).size !== moved.dst.length;
          if (!selfOverlap && !overlaps(moved.src, moved.dst)) expect(bytesAt(ram, moved.dst).equals(bytesAt(before, moved.src)), `${ctxMsg}: wrong bytes`).to.equal(true);
        }
        if (atomicAt && !overlaps(atomicAt.remote, atomicAt.local)) {
          const old = bytesAt(before, atomicAt.remote).readBigUInt64LE(0);
          const a = w.atomic;
          const swapAdd = (BigInt(a.swapAddHi) << 32n) | BigInt(a.swapAddLo);
          const compare = (BigInt(a.compareHi) << 32n) | BigInt(a.compareLo);
          const want = w.verb === SendVerb.ATOMIC_CS ? (old === compare ? swapAdd : old) : (old + swapAdd) & 0xffffffffffffffffn;
          expect(bytesAt(ram, atomicAt.remote).readBigUInt64LE(0), ctxMsg).to.equal(want);
          expect(bytesAt(ram, atomicAt.local).readBigUInt64LE(0), ctxMsg).to.equal(old);
        }
        const privileged = (sctx.qpFlags & QpFlag.PRIVILEGED) !== 0 || (rctx.qpFlags & QpFlag.REMOTE_PRIVILEGED) !== 0;
        if (!privileged) {
          for (let i = 0; i < ram.length; i++) {
            if (ram[i] !== before[i] && !WRITABLE.has(i)) expect.fail(`${ctxMsg}: wrote RAM offset ${i} outside every writable MR`);
          }
        }
      }
      // the fuzz must reach successes and a spread of errors, not just decode failures
      const statuses = new Set([...outcomes.keys()].map((k) => k.split(':').slice(1).join(':')));
      expect(statuses.size, JSON.stringify([...outcomes])).to.be.greaterThan(5);
      expect([...outcomes.keys()].some((k) => k.endsWith(':0:-1') || k.endsWith(':0:0'))).to.equal(true);
    });
  }
});
