// The data-path operations: moving bytes between two sets of guest-memory
// views with no bounce buffer (Buffer.copy between views), and the completion
// status hardware reports for each outcome.
//
// Every operation validates everything first (keys, access, bounds, lengths on
// both sides) and only then copies, so a failed operation leaves guest memory
// exactly as it was. Each answers an OpResult (reused, inside the OpEnv):
//   status     the requester's CQE status (IonicStatus)
//   responder  the responder's receive-CQE status when a receive WQE was
//              consumed, else NO_COMPLETION
//   bytes      bytes moved (the receive byte count, prefix included)
// Statuses follow the IB requester/responder rules the hosts expect
// (contract 4.6/4.7, IB spec NAK codes):
//   local key/bounds/access on the requester's SGL -> LOCAL_PROT
//   message longer than MAX_MSG_BYTES               -> LOCAL_LEN
//   bad rkey, remote bounds, remote access, QP bit  -> REMOTE_ACC
//   remote guest memory unusable (unmapped, RO)     -> REMOTE_OPER
//   receive buffers too small                       -> REMOTE_INV_REQ (responder LOCAL_LEN)
//   receive SGL protection error                    -> REMOTE_OPER (responder LOCAL_PROT)
//   misaligned atomic                               -> REMOTE_INV_REQ
// For UD the requester sees only its own local errors; a responder-side
// failure is the receiver's alone (the caller reports OK to the sender).

import { GuestMemory, MemStatus } from '../../vfio-user/guest-memory';
import {
  ATOMIC_SIZE, CqeRecord, encodeCqe, ionic_v1_cqe, IonicStatus, RecvWqe, SendVerb, SendWqe, Sge, CQE_COLOR_BYTE,
} from './layouts';
import { Access, KeyContext, KeyUse, MrTable, qpAllows, resolveKey, translate, Xlate } from './translate';

/** OpResult.responder when no receive WQE was consumed. */
export const NO_COMPLETION = -1;

/** The outcome of one operation (reused: read it before the next operation). */
export class OpResult {
  /** Requester CQE status. */
  status: IonicStatus = IonicStatus.OK;
  /** Responder receive-CQE status, or NO_COMPLETION. */
  responder: number = NO_COMPLETION;
  /** Bytes moved. */
  bytes = 0;
  /** The translation failure behind an error status (for logs), else Xlate.OK. */
  xlate: Xlate = Xlate.OK;
  /** Atomics: the original 64-bit value at the remote address, as 32-bit halves. */
  oldHi = 0;
  oldLo = 0;

  reset(): void {
    this.status = IonicStatus.OK;
    this.responder = NO_COMPLETION;
    this.bytes = 0;
    this.xlate = Xlate.OK;
    this.oldHi = 0;
    this.oldLo = 0;
  }
}

/** What the operations work with: guest memory, the MR table, and reusable scratch. */
export interface OpEnv {
  readonly mem: GuestMemory;
  readonly mrs: MrTable;
  /** Scratch view lists (emptied after each operation so no view outlives it). */
  readonly src: Buffer[];
  readonly dst: Buffer[];
  /** 8-byte scratch for atomics, and a one-element list over it. */
  readonly word: Buffer;
  readonly wordList: Buffer[];
  /** A one-element list for a single buffer (the UD prefix). */
  readonly one: Buffer[];
  readonly res: OpResult;
}

export function newOpEnv(mem: GuestMemory, mrs: MrTable): OpEnv {
  const word = Buffer.alloc(ATOMIC_SIZE);
  return { mem, mrs, src: [], dst: [], word, wordList: [word], one: [], res: new OpResult() };
}

// ---------------------------------------------------------------------------
// Status mapping

/** Requester status for a failed translation of its own SGL. */
export function localStatus(x: Xlate): IonicStatus {
  return x === Xlate.TOO_LONG ? IonicStatus.LOCAL_LEN : IonicStatus.LOCAL_PROT;
}

/** Requester status for a failed translation of the remote range. */
export function remoteStatus(x: Xlate): IonicStatus {
  switch (x) {
    case Xlate.UNMAPPED:
    case Xlate.READ_ONLY:
      return IonicStatus.REMOTE_OPER;
    case Xlate.TOO_LONG:
      return IonicStatus.REMOTE_INV_REQ;
    default:
      return IonicStatus.REMOTE_ACC;
  }
}

// ---------------------------------------------------------------------------
// Building blocks

/**
 * Views of the first `len` bytes of an SGL (sges[0..count)) for `access`,
 * each lkey resolved as KeyUse.LOCAL against `ctx`. Zero-length pieces are
 * skipped unchecked (they touch nothing). On error `out` is left as it was.
 */
export function sglSlices(env: OpEnv, sges: readonly Sge[], count: number, len: number, access: Access, ctx: KeyContext, out: Buffer[]): Xlate {
  const start = out.length;
  let left = len;
  for (let i = 0; i < count && left > 0; i++) {
    const sge = sges[i];
    if (!sge) break;
    const n = Math.min(sge.len, left);
    if (n === 0) continue;
    const mr = resolveKey(env.mrs, sge.lkey, KeyUse.LOCAL, ctx, n);
    if (typeof mr === 'number') { out.length = start; return mr; }
    const x = translate(mr, sge.va, n, access, env.mem, out);
    if (x !== Xlate.OK) { out.length = start; return x; }
    left -= n;
  }
  if (left > 0) { out.length = start; return Xlate.BOUNDS; }
  return Xlate.OK;
}

/** The payload length of a SEND / RDMA WRITE WQE (inline byte count or SGE total). */
export function messageLength(wqe: SendWqe): number {
  return wqe.inline ? wqe.inlineLength : wqe.sgeTotal;
}

/**
 * Source views of a SEND / RDMA WRITE: the WQE's own payload area for inline
 * data (`wqeBuf` is the WQE the record was decoded from), else its SGL read
 * with LOCAL_READ under the requester's `ctx`.
 */
export function gatherSend(env: OpEnv, wqe: SendWqe, wqeBuf: Buffer, ctx: KeyContext, out: Buffer[]): Xlate {
  if (wqe.inline) {
    const end = wqe.inlineOffset + wqe.inlineLength;
    if (end > wqeBuf.length || wqe.inlineOffset < 0) return Xlate.BOUNDS;
    if (wqe.inlineLength > 0) out.push(wqeBuf.subarray(wqe.inlineOffset, end));
    return Xlate.OK;
  }
  return sglSlices(env, wqe.sges, wqe.sgeCount, wqe.sgeTotal, Access.LOCAL_READ, ctx, out);
}

/**
 * Views of a remote range named by (rkey, va, len) for a remote `access`,
 * checked against the responder QP's `ctx`: its QP access bit, the key (with
 * the DMA-key policy for `use`), the MR's access bit and bounds. A
 * zero-length range is not checked at all.
 */
export function remoteSlices(env: OpEnv, rkey: number, va: number, len: number, access: Access, ctx: KeyContext, use: KeyUse, out: Buffer[]): Xlate {
  if (len === 0) return Xlate.OK;
  if (!qpAllows(ctx, access)) return Xlate.ACCESS;
  const mr = resolveKey(env.mrs, rkey, use, ctx, len);
  if (typeof mr === 'number') return mr;
  return translate(mr, va, len, access, env.mem, out);
}

/**
 * Copy `len` bytes from the views `src` (starting `srcOff` bytes in) to the
 * views `dst` (starting `dstOff` bytes in), directly between the views.
 * Answers the bytes copied (less than `len` only if either side runs out).
 */
export function copySlices(dst: readonly Buffer[], dstOff: number, src: readonly Buffer[], srcOff: number, len: number): number {
  let di = 0;
  let si = 0;
  let doff = dstOff;
  let soff = srcOff;
  while (di < dst.length && doff >= dst[di]!.length) { doff -= dst[di]!.length; di++; }
  while (si < src.length && soff >= src[si]!.length) { soff -= src[si]!.length; si++; }
  let left = len;
  while (left > 0 && di < dst.length && si < src.length) {
    const d = dst[di]!;
    const s = src[si]!;
    const n = Math.min(left, d.length - doff, s.length - soff);
    s.copy(d, doff, soff, soff + n);
    doff += n;
    soff += n;
    left -= n;
    if (doff >= d.length) { di++; doff = 0; }
    if (soff >= s.length) { si++; soff = 0; }
  }
  return len - left;
}

function done(env: OpEnv): OpResult {
  env.src.length = 0;
  env.dst.length = 0;
  return env.res;
}

function fail(env: OpEnv, status: IonicStatus, x: Xlate, responder: number = NO_COMPLETION): OpResult {
  env.res.status = status;
  env.res.xlate = x;
  env.res.responder = responder;
  env.res.bytes = 0;
  return done(env);
}

// ---------------------------------------------------------------------------
// Operations

/**
 * Responder half of a SEND (also what a peer's inbound SEND uses): place
 * `prefix` (a UD GRH, or null) and then `srcLen` bytes of `src` into the
 * receive WQE's buffers, translated with LOCAL_WRITE under the responder QP's
 * `rctx`. Consumes the receive WQE on success and on responder errors.
 */
export function deliverSend(env: OpEnv, src: readonly Buffer[], srcLen: number, recv: RecvWqe, rctx: KeyContext, prefix: Buffer | null): OpResult {
  env.res.reset();
  const pre = prefix ? prefix.length : 0;
  const total = pre + srcLen;
  if (total > recv.sgeTotal) return fail(env, IonicStatus.REMOTE_INV_REQ, Xlate.BOUNDS, IonicStatus.LOCAL_LEN);
  const dst = env.dst;
  dst.length = 0;
  const x = sglSlices(env, recv.sges, recv.sgeCount, total, Access.LOCAL_WRITE, rctx, dst);
  if (x !== Xlate.OK) return fail(env, IonicStatus.REMOTE_OPER, x, IonicStatus.LOCAL_PROT);
  if (prefix && pre > 0) {
    env.one[0] = prefix;
    copySlices(dst, 0, env.one, 0, pre);
    env.one.length = 0;
  }
  copySlices(dst, pre, src, 0, srcLen);
  env.res.bytes = total;
  env.res.responder = IonicStatus.OK;
  return done(env);
}

/**
 * SEND / SEND_IMM / SEND_INV between two QPs of the same guest: gather the
 * requester's payload (inline or SGL under `sctx`), then deliverSend into
 * `recv` under `rctx`. Immediate data and invalidation are the caller's.
 */
export function execSend(env: OpEnv, wqe: SendWqe, wqeBuf: Buffer, sctx: KeyContext, recv: RecvWqe, rctx: KeyContext, prefix: Buffer | null = null): OpResult {
  env.res.reset();
  env.src.length = 0;
  const x = gatherSend(env, wqe, wqeBuf, sctx, env.src);
  if (x !== Xlate.OK) return fail(env, localStatus(x), x);
  return deliverSend(env, env.src, messageLength(wqe), recv, rctx, prefix);
}

/**
 * RDMA WRITE / WRITE_IMM: the requester's payload to (rkey, remote va) with
 * REMOTE_WRITE under the responder's `rctx`. For WRITE_IMM the caller then
 * consumes a receive WQE (byte count = res.bytes).
 */
export function execRdmaWrite(env: OpEnv, wqe: SendWqe, wqeBuf: Buffer, sctx: KeyContext, rctx: KeyContext, use: KeyUse = KeyUse.REMOTE): OpResult {
  env.res.reset();
  env.src.length = 0;
  env.dst.length = 0;
  let x = gatherSend(env, wqe, wqeBuf, sctx, env.src);
  if (x !== Xlate.OK) return fail(env, localStatus(x), x);
  const len = messageLength(wqe);
  x = remoteSlices(env, wqe.rdma.rkey, wqe.rdma.remoteVa, len, Access.REMOTE_WRITE, rctx, use, env.dst);
  if (x !== Xlate.OK) return fail(env, remoteStatus(x), x);
  copySlices(env.dst, 0, env.src, 0, len);
  env.res.bytes = len;
  return done(env);
}

/**
 * RDMA READ: (rkey, remote va) with REMOTE_READ under `rctx` into the
 * requester's SGL with LOCAL_WRITE under `sctx`. The remote side is checked
 * first (a bad rkey NAKs before any data returns).
 */
export function execRdmaRead(env: OpEnv, wqe: SendWqe, sctx: KeyContext, rctx: KeyContext, use: KeyUse = KeyUse.REMOTE): OpResult {
  env.res.reset();
  env.src.length = 0;
  env.dst.length = 0;
  const len = wqe.sgeTotal;
  let x = remoteSlices(env, wqe.rdma.rkey, wqe.rdma.remoteVa, len, Access.REMOTE_READ, rctx, use, env.src);
  if (x !== Xlate.OK) return fail(env, remoteStatus(x), x);
  x = sglSlices(env, wqe.sges, wqe.sgeCount, len, Access.LOCAL_WRITE, sctx, env.dst);
  if (x !== Xlate.OK) return fail(env, localStatus(x), x);
  copySlices(env.dst, 0, env.src, 0, len);
  env.res.bytes = len;
  return done(env);
}

const TWO_32 = 0x100000000;

/**
 * ATOMIC_CS / ATOMIC_FA on 8 naturally aligned bytes at (rkey, remote va),
 * the original value returned to the local 8-byte buffer. Both sides are
 * validated before anything is written. The 64-bit value is read and written
 * little-endian, the byte order of the guests this device serves (x86-64,
 * arm64); operands come from the WQE's BE32 halves.
 */
export function execAtomic(env: OpEnv, wqe: SendWqe, sctx: KeyContext, rctx: KeyContext, use: KeyUse = KeyUse.REMOTE): OpResult {
  env.res.reset();
  env.src.length = 0;
  env.dst.length = 0;
  const a = wqe.atomic;
  const va = wqe.rdma.remoteVa;
  if (!Number.isSafeInteger(va) || va < 0) return fail(env, IonicStatus.REMOTE_ACC, Xlate.BAD_VALUE);
  if (va % ATOMIC_SIZE !== 0) return fail(env, IonicStatus.REMOTE_INV_REQ, Xlate.BAD_VALUE);
  let x = remoteSlices(env, wqe.rdma.rkey, va, ATOMIC_SIZE, Access.REMOTE_ATOMIC, rctx, use, env.src);
  if (x !== Xlate.OK) return fail(env, remoteStatus(x), x);
  if (a.localLen !== ATOMIC_SIZE) return fail(env, IonicStatus.LOCAL_LEN, Xlate.BOUNDS);
  const mr = resolveKey(env.mrs, a.localLkey, KeyUse.LOCAL, sctx, ATOMIC_SIZE);
  if (typeof mr === 'number') return fail(env, localStatus(mr), mr);
  x = translate(mr, a.localVa, ATOMIC_SIZE, Access.LOCAL_WRITE, env.mem, env.dst);
  if (x !== Xlate.OK) return fail(env, localStatus(x), x);

  const word = env.word;
  copySlices(env.wordList, 0, env.src, 0, ATOMIC_SIZE);
  const oldLo = word.readUInt32LE(0);
  const oldHi = word.readUInt32LE(4);
  let newLo: number;
  let newHi: number;
  let store = true;
  if (wqe.verb === SendVerb.ATOMIC_CS) {
    store = oldHi === a.compareHi && oldLo === a.compareLo;
    newLo = a.swapAddLo;
    newHi = a.swapAddHi;
  } else {
    const lo = oldLo + a.swapAddLo;
    const carry = lo >= TWO_32 ? 1 : 0;
    newLo = lo - carry * TWO_32;
    newHi = (oldHi + a.swapAddHi + carry) % TWO_32;
  }
  if (store) {
    word.writeUInt32LE(newLo >>> 0, 0);
    word.writeUInt32LE(newHi >>> 0, 4);
    copySlices(env.src, 0, env.wordList, 0, ATOMIC_SIZE);
  }
  word.writeUInt32LE(oldLo, 0);
  word.writeUInt32LE(oldHi, 4);
  copySlices(env.dst, 0, env.wordList, 0, ATOMIC_SIZE);
  env.res.oldLo = oldLo;
  env.res.oldHi = oldHi;
  env.res.bytes = ATOMIC_SIZE;
  return done(env);
}

/**
 * Execute a decoded data-movement WQE between two QPs of the same guest:
 * RDMA WRITE(_IMM), RDMA READ, ATOMIC_CS/FA (SEND needs a receive WQE: use
 * execSend). Other verbs answer LOCAL_QP_OPER (they are the resource manager's).
 */
export function execOneSided(env: OpEnv, wqe: SendWqe, wqeBuf: Buffer, sctx: KeyContext, rctx: KeyContext, use: KeyUse = KeyUse.REMOTE): OpResult {
  switch (wqe.verb) {
    case SendVerb.RDMA_WRITE:
    case SendVerb.RDMA_WRITE_IMM:
      return execRdmaWrite(env, wqe, wqeBuf, sctx, rctx, use);
    case SendVerb.RDMA_READ:
      return execRdmaRead(env, wqe, sctx, rctx, use);
    case SendVerb.ATOMIC_CS:
    case SendVerb.ATOMIC_FA:
      return execAtomic(env, wqe, sctx, rctx, use);
    default:
      env.res.reset();
      return fail(env, IonicStatus.LOCAL_QP_OPER, Xlate.OK);
  }
}

// ---------------------------------------------------------------------------
// Datagrams (contract 5.6, architecture "Datagrams (UD and GSI)")

/** Bytes of network header (GRH) that start every UD receive; counted in the byte count. */
export const GRH_SIZE = 40;

/** A Q_Key with this bit set in a UD WQE is "controlled": use the sending QP's own Q_Key. */
export const CONTROLLED_QKEY_BIT = 0x80000000;

/**
 * The Q_Key a UD send carries: the WQE's dest_qkey, or (high bit set) the
 * sending QP's own Q_Key; -1 when the WQE asks for the QP's and it has none
 * (the datagram is refused).
 */
export function effectiveQkey(wqeQkey: number, senderQkey: number | null): number {
  if ((wqeQkey >>> 0) >= CONTROLLED_QKEY_BIT) return senderQkey === null ? -1 : senderQkey >>> 0;
  return wqeQkey >>> 0;
}

/** Whether a same-guest destination takes a datagram: it must be UD/GSI and, if it has a Q_Key, match. */
export function datagramAccepted(destIsDatagram: boolean, destQkey: number | null, qkey: number): boolean {
  if (!destIsDatagram || qkey < 0) return false;
  return destQkey === null || (destQkey >>> 0) === qkey;
}

// ---------------------------------------------------------------------------
// CQE into guest memory

/**
 * Write a CQE at guest address `addr` with the color byte published last:
 * encoded in place when the 32 bytes are one view, else through `scratch`
 * (32 bytes) as two writes, bytes 0..30 then byte 31.
 */
export function writeCqe(mem: GuestMemory, addr: number, rec: CqeRecord, scratch: Buffer): MemStatus {
  const view = mem.view(addr, ionic_v1_cqe.SIZE, true);
  if (view) return encodeCqe(rec, view, 0) ? MemStatus.OK : MemStatus.BAD_RANGE;
  if (!encodeCqe(rec, scratch, 0)) return MemStatus.BAD_RANGE;
  const st = mem.write(addr, scratch.subarray(0, CQE_COLOR_BYTE));
  if (st !== MemStatus.OK) return st;
  return mem.write(addr + CQE_COLOR_BYTE, scratch.subarray(CQE_COLOR_BYTE, ionic_v1_cqe.SIZE));
}
