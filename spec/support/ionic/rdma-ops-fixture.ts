// The shared fixture of the rdma-ops specs (spec/ionic/rdma/ops-*.spec.ts):
// one verbs guest per spec file with scattered MRs of every access kind, an
// RC pair on two CQs, the CQE projections the tests compare, and an arena
// snapshot that proves nothing outside an operation's target was written.
// The guest and its objects are live bindings, set by useOpsGuest's hook.

import { expect } from 'chai';
import { PAGE } from './regs';
import { CqeT, MrF, QpT, ROp, WSt } from './rdma-regs';
import { Cq, Cqe, GuestMr, Qp, Snapshot, VerbsGuest } from './rdma-verbs';

export type Row = (number | boolean)[];
export type Range = [number, number];

export const ALL = MrF.LOCAL_WRITE | MrF.REMOTE_WRITE | MrF.REMOTE_READ | MrF.REMOTE_ATOMIC;
export const UD_QKEY = 0x11111111;
export const GSI_QKEY = 0x80010000;

// CQE projections: send CQEs carry the MSN (SEND_MSN) or the wqe_id (SEND_NPG).
export const S = (c: Cqe): Row => [
  c.type,
  c.qid,
  c.error,
  c.statusLength,
  c.type === CqeT.SEND_MSN ? c.msn : c.wqeIdLo,
];
export const R = (c: Cqe): Row => [
  c.type,
  c.qid,
  c.error,
  c.statusLength,
  c.srcQpn,
  c.recvOp,
  c.immDataRkey >>> 0,
  c.wqeIdLo,
];
export const msn = (q: Qp, n: number, st = 0): Row => [CqeT.SEND_MSN, q.id, st !== 0, st, n];
export const npg = (q: Qp, id: number, st = 0): Row => [CqeT.SEND_NPG, q.id, st !== 0, st, id];
export const recv = (q: Qp, len: number, src: number, op: number, imm: number, id: number): Row => [
  CqeT.RECV,
  q.id,
  false,
  len,
  src,
  op,
  imm,
  id,
];
export const recvErr = (q: Qp, st: number, src: number, op: number, imm: number, id: number): Row => [
  CqeT.RECV,
  q.id,
  true,
  st,
  src,
  op,
  imm,
  id,
];
export const sqFlush = (q: Qp): Row => [CqeT.SEND_NPG, q.id, true, WSt.WQE_FLUSHED, 0];
export const rqFlush = (q: Qp): Row => [CqeT.RECV, q.id, true, WSt.WQE_FLUSHED, 0, ROp.SEND, 0, 0];

/** Deterministic bytes for a test payload. */
export function pattern(len: number, seed: number): Buffer {
  const b = Buffer.alloc(len);
  for (let i = 0; i < len; i++) b[i] = (seed + i * 13 + (i >>> 8)) & 0xff;
  return b;
}

export function u64(v: bigint): Buffer {
  const b = Buffer.alloc(8);
  b.writeBigUInt64LE(BigInt.asUintN(64, v));
  return b;
}

export let v: VerbsGuest;
export let scq: Cq;
export let rcq: Cq;
/** Requester buffers and responder targets: four scattered pages each (B starts 0x123 into its first page). */
export let A: GuestMr;
export let B: GuestMr;
/** REMOTE_READ only (no local write). */
export let RO: GuestMr;
/** LOCAL_WRITE only. */
export let LWO: GuestMr;
/** No REMOTE_ATOMIC. */
export let NOAT: GuestMr;
/** Another PD. */
export let P2: GuestMr;
export let a: Qp;
export let b: Qp;
let snap: Snapshot;

const arena = (): Range[] => [[v.arena.at, v.arena.bytes]];
/** The first 8-aligned address at or after B byte `off` (B starts 0x123 into a page). */
export const bWord = (off: number): number => B.va + off + ((8 - ((B.va + off) % 8)) % 8);
export const ranges = (mr: GuestMr, off: number, len: number): Range[] => mr.ranges(off, len);

/** Remember the arena's bytes now (expectOnly compares against this). */
export function snapshot(): void {
  snap = new Snapshot(v.g, arena());
}

export function expectCqes(send: Row[], rec: Row[], what = ''): void {
  expect(v.drain(scq).map(S), `send CQEs ${what}`).to.deep.equal(send);
  expect(v.drain(rcq).map(R), `recv CQEs ${what}`).to.deep.equal(rec);
}

/** Only bytes inside `allowed` changed since the snapshot. */
export function expectOnly(allowed: Range[] = [], what = ''): void {
  expect(snap.changedOutside(allowed), `writes outside the target ${what}`).to.deep.equal([]);
}

/** Fresh QPs (RESET, then RTS again: MSNs restart at 1, rings empty) and empty CQs. */
export async function fresh(...qps: Qp[]): Promise<void> {
  for (const q of qps) await v.reset(q);
  await v.settle();
  v.drainAll();
}

/** Boot the guest and its objects before the suite's tests, close it after; no driver violations after each test. */
export function useOpsGuest(): void {
  before(async () => {
    v = await VerbsGuest.boot();
    scq = await v.createCq(300);
    rcq = await v.createCq(301);
    A = await v.createMr({ key: 0x101, pages: 4, flags: ALL });
    B = await v.createMr({ key: 0x207, pages: 4, offset: 0x123, length: 4 * PAGE - 0x123 - 0x10, flags: ALL });
    RO = await v.createMr({ key: 0x301, pages: 1, flags: MrF.REMOTE_READ });
    LWO = await v.createMr({ key: 0x401, pages: 1, flags: MrF.LOCAL_WRITE });
    NOAT = await v.createMr({ key: 0x502, pages: 1, flags: MrF.LOCAL_WRITE | MrF.REMOTE_WRITE | MrF.REMOTE_READ });
    P2 = await v.createMr({ key: 0x601, pages: 1, flags: ALL, pdId: 2 });
    a = await v.createQp(10, QpT.RC, { sqCq: scq, rqCq: rcq });
    b = await v.createQp(11, QpT.RC, { sqCq: scq, rqCq: rcq });
    await v.connectPair(a, b);
  });
  after(async () => v.close());
  afterEach(() => expect(v.g.violations).to.deep.equal([]));
}
