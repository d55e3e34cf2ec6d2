// The verbs of the loopback data path, requester and responder in one: a
// decoded send WQE runs against its destination QP of the same device.
// RC/UC sends consume a receive (RNR when none is posted), RDMA WRITE / READ
// and atomics go through the responder's rkey checks, UD/GSI sends are
// datagrams (a refused one is dropped, as on a wire), LOCAL_INV and BIND_MW
// change keys. Payload moves view to view (copySlices). Answers are CQE
// statuses (IonicStatus); a responder-side error also fails the responder.

import type { AddressVector } from '../address';
import { DeviceCounter, QpCounter } from '../counters';
import type { DataPathDevice } from '../hooks';
import { GSI_QPN, RDMA_MAX_MSG_BYTES, RDMA_SRQ_BASE } from '../limits';
import { retagKey } from '../memory-keys';
import { KeyStatus } from '../resources';
import type { QpRecord, QueueRing, SrqRecord } from '../resources';
import { MrFlag, QpFlag, QpState, QpType } from '../types';
import type { GuestMemory } from '../../vfio-user/guest-memory';
import { getField, getRawWord, setField } from '../../../protocol/field';
import { copySlices } from '../datapath/copy';
import { IonicStatus, RecvOp } from '../datapath/cqe';
import { datagramAccepted, effectiveQkey, GRH_SIZE, writeGrh } from '../datapath/datagram';
import { decodeRecvWqe, newRecvWqe, SendWqe } from '../datapath/wqe-decode';
import { atomic_operand, ATOMIC_SIZE, ionic_v1_base_hdr, SendVerb } from '../datapath/wqe-layout';
import type { Completions } from './completions';
import { GuestViews, slotViews } from './guest-views';

/** What the verbs need of the data path: failing a QP as the device would. */
export interface QpFailures {
  /** Move `qp` to ERR on the device's own account (a responder error), with its flush hints. */
  deviceError(qp: QpRecord): void;
}

const TWO_32 = 0x100000000;

/** States in which a QP's receive side works (SQE stops only the send side). */
function receives(state: QpState): boolean {
  return state === QpState.RTR || state === QpState.RTS || state === QpState.SQD || state === QpState.SQE;
}

export class Verbs {
  readonly #dev: DataPathDevice;
  readonly #views: GuestViews;
  readonly #cqes: Completions;
  readonly #failures: QpFailures;
  /** The receive WQE being consumed, read from its ring slot into #rqSlot. */
  readonly #recv = newRecvWqe();
  readonly #rqSlot = slotViews();
  /** Source and destination views of the message being moved. */
  readonly #src: Buffer[] = [];
  readonly #dst: Buffer[] = [];
  readonly #grh = Buffer.alloc(GRH_SIZE);
  /** Atomics: the remote word's views, its value, the value before. */
  readonly #remoteWord: Buffer[] = [];
  readonly #word = Buffer.alloc(ATOMIC_SIZE);
  readonly #old = Buffer.alloc(ATOMIC_SIZE);
  /** A one-buffer list for copySlices. */
  readonly #wordList: Buffer[] = [this.#word];

  constructor(dev: DataPathDevice, views: GuestViews, completions: Completions, failures: QpFailures) {
    this.#dev = dev;
    this.#views = views;
    this.#cqes = completions;
    this.#failures = failures;
  }

  /** The message's source views (a mesh responder puts a received payload here). */
  get src(): Buffer[] {
    return this.#src;
  }

  /** The views `remote()` resolved. */
  get dst(): Buffer[] {
    return this.#dst;
  }

  /** Drop the views of the last message (before and after each WQE). */
  clear(): void {
    this.#src.length = 0;
    this.#dst.length = 0;
  }

  /** The receive ring a QP draws from (its RQ or its SRQ). */
  recvRing(qp: QpRecord): QueueRing | null {
    if (qp.rq) return qp.rq;
    if (qp.srqId === null) return null;
    const srq: SrqRecord | undefined =
      this.#dev.rm.srqs.get(qp.srqId >= RDMA_SRQ_BASE ? qp.srqId : qp.srqId + RDMA_SRQ_BASE) ??
      this.#dev.rm.srqs.get(qp.srqId);
    return srq ? srq.ring : null;
  }

  /** LOCAL_INV and BIND_MW. */
  localOp(w: SendWqe): number {
    const rm = this.#dev.rm;
    switch (w.verb) {
      case SendVerb.LOCAL_INV:
        this.#dev.counters.inc(DeviceCounter.local_inv_wqes);
        return rm.invalidate(w.immDataKey) === KeyStatus.OK ? IonicStatus.OK : IonicStatus.MEM_MGMT_OPER;
      case SendVerb.BIND_MW: {
        const b = w.bindMw;
        const newKey = retagKey(w.immDataKey, w.numSgeKey);
        return rm.bindMw(w.immDataKey, newKey, b.lkey, b.va, b.length, b.flags) === KeyStatus.OK
          ? IonicStatus.OK
          : IonicStatus.MEM_MGMT_OPER;
      }
      default:
        return IonicStatus.MEM_MGMT_OPER;
    }
  }

  /** An RC/UC WQE against `dest`: its status, or 'wait' when a SEND found no receive (RNR). `buf` is the WQE slot. */
  rcOp(mem: GuestMemory, qp: QpRecord, dest: QpRecord | undefined, w: SendWqe, buf: Buffer): number | 'wait' {
    // UC has no responder resources: RDMA READ and atomics are RC only (IBTA table 38).
    if (
      qp.type === QpType.UC &&
      (w.verb === SendVerb.RDMA_READ || w.verb === SendVerb.ATOMIC_CS || w.verb === SendVerb.ATOMIC_FA)
    ) {
      return IonicStatus.LOCAL_QP_OPER;
    }
    if (
      !dest ||
      dest.type !== qp.type ||
      (dest.state !== QpState.RTR && dest.state !== QpState.RTS && dest.state !== QpState.SQD)
    ) {
      return IonicStatus.RETRY_EXCEEDED;
    }
    switch (w.verb) {
      case SendVerb.SEND:
      case SendVerb.SEND_IMM:
      case SendVerb.SEND_INV:
      case SendVerb.RDMA_WRITE_IMM: {
        const isWrite = w.verb === SendVerb.RDMA_WRITE_IMM;
        // The requester's own buffers first: a bad lkey is reported whether or not a receive is posted.
        const g = this.#gather(mem, qp, w, buf);
        if (g !== KeyStatus.OK) return IonicStatus.LOCAL_PROT;
        const rr = this.takeRecv(mem, dest);
        if (rr === 'empty') {
          this.#src.length = 0;
          return 'wait';
        }
        if (rr === 'bad') return IonicStatus.REMOTE_OPER;
        const len = msgLen(w);
        if (isWrite) {
          const x = this.remote(
            mem,
            dest,
            w.rdma.rkey,
            w.rdma.remoteVa,
            len,
            MrFlag.REMOTE_WRITE,
            QpFlag.REMOTE_WRITE,
            true,
          );
          if (x !== IonicStatus.OK) return x;
          copySlices(this.#dst, 0, this.#src, 0, len);
          this.written(qp, len);
          this.#src.length = 0;
          this.#dst.length = 0;
          // The receive CQE carries the bytes written.
          this.deliver(mem, qp, dest, rr, len, null, RecvOp.RDMA_WRITE_IMM, w.immDataKey, w.solicited, null, true);
          return IonicStatus.OK;
        }
        const op =
          w.verb === SendVerb.SEND ? RecvOp.SEND : w.verb === SendVerb.SEND_IMM ? RecvOp.SEND_IMM : RecvOp.SEND_INV;
        const st = this.deliver(
          mem,
          qp,
          dest,
          rr,
          len,
          null,
          op,
          w.verb === SendVerb.SEND ? 0 : w.immDataKey,
          w.solicited,
          null,
        );
        if (st === IonicStatus.LOCAL_LEN) return IonicStatus.REMOTE_INV_REQ;
        if (st !== IonicStatus.OK) return IonicStatus.REMOTE_OPER;
        // The invalidation takes effect with the message, not when it fails.
        if (w.verb === SendVerb.SEND_INV && this.#dev.rm.invalidate(w.immDataKey) === KeyStatus.OK) {
          this.#dev.counters.inc(DeviceCounter.remote_invalidates);
        }
        return IonicStatus.OK;
      }
      case SendVerb.RDMA_WRITE: {
        const g = this.#gather(mem, qp, w, buf);
        if (g !== KeyStatus.OK) return IonicStatus.LOCAL_PROT;
        const len = msgLen(w);
        const x = this.remote(
          mem,
          dest,
          w.rdma.rkey,
          w.rdma.remoteVa,
          len,
          MrFlag.REMOTE_WRITE,
          QpFlag.REMOTE_WRITE,
          true,
        );
        if (x !== IonicStatus.OK) return x;
        copySlices(this.#dst, 0, this.#src, 0, len);
        this.written(qp, len);
        return IonicStatus.OK;
      }
      case SendVerb.RDMA_READ: {
        const len = w.sgeTotal;
        // The remote side is checked first (a bad rkey NAKs before data returns); its views go to #dst, then swap.
        const x = this.remote(
          mem,
          dest,
          w.rdma.rkey,
          w.rdma.remoteVa,
          len,
          MrFlag.REMOTE_READ,
          QpFlag.REMOTE_READ,
          false,
        );
        if (x !== IonicStatus.OK) return x;
        this.#src.push(...this.#dst);
        this.#dst.length = 0;
        if (this.#views.sgl(mem, qp, w.sges, w.sgeCount, len, true, this.#dst) !== KeyStatus.OK)
          return IonicStatus.LOCAL_PROT;
        copySlices(this.#dst, 0, this.#src, 0, len);
        this.#dev.counters.inc(DeviceCounter.rdma_read_bytes, len);
        qp.stats.inc(QpCounter.bytes_rdma_read, len);
        return IonicStatus.OK;
      }
      case SendVerb.ATOMIC_CS:
      case SendVerb.ATOMIC_FA:
        return this.#atomic(mem, qp, dest, w);
      default:
        return IonicStatus.LOCAL_QP_OPER;
    }
  }

  /** A UD/GSI SEND: the requester sees only its own errors; a refused datagram is dropped. */
  udSend(mem: GuestMemory, qp: QpRecord, w: SendWqe, buf: Buffer, dest: QpRecord | undefined): number {
    if (w.verb !== SendVerb.SEND && w.verb !== SendVerb.SEND_IMM) return IonicStatus.LOCAL_QP_OPER;
    const g = this.#gather(mem, qp, w, buf);
    if (g !== KeyStatus.OK) return IonicStatus.LOCAL_PROT;
    const ah = this.#dev.rm.ahs.get(w.ud.ahId);
    if (!ah) return IonicStatus.LOCAL_QP_OPER;
    const qkey = effectiveQkey(w.ud.destQkey, qp.attrs.qkey);
    if (!dest || !receives(dest.state)) return IonicStatus.OK;
    const destUd = dest.type === QpType.UD || dest.id === GSI_QPN;
    if (!datagramAccepted(destUd, dest.attrs.qkey, qkey)) return IonicStatus.OK;
    const rr = this.takeRecv(mem, dest);
    if (typeof rr === 'string') return IonicStatus.OK; // no receive posted: UD drops
    const av = ah.av;
    const len = msgLen(w);
    const grh = this.#grh;
    writeGrh(av, len, grh);
    this.deliver(
      mem,
      qp,
      dest,
      rr,
      len,
      grh,
      w.verb === SendVerb.SEND ? RecvOp.SEND : RecvOp.SEND_IMM,
      w.verb === SendVerb.SEND_IMM ? w.immDataKey : 0,
      w.solicited,
      av,
    );
    return IonicStatus.OK;
  }

  /** Views of a remote range into `dst`, with the responder's QP and MR checks; IonicStatus. */
  remote(
    mem: GuestMemory,
    dest: QpRecord,
    rkey: number,
    va: number,
    len: number,
    need: number,
    qpBit: number,
    write: boolean,
  ): number {
    if (len === 0) return IonicStatus.OK;
    if (!(dest.attrs.access & qpBit)) return IonicStatus.REMOTE_ACC;
    const st = this.#views.views(mem, rkey, va, len, need, dest.remotePrivileged, dest.pdId, write, this.#dst);
    if (st === -1) return IonicStatus.REMOTE_OPER;
    if (st === KeyStatus.BAD_RANGE && len > RDMA_MAX_MSG_BYTES) return IonicStatus.REMOTE_INV_REQ;
    return st === KeyStatus.OK ? IonicStatus.OK : IonicStatus.REMOTE_ACC;
  }

  /** Count an RDMA WRITE's bytes (on the QP that wrote, when it is ours). */
  written(qp: QpRecord | null, len: number): void {
    this.#dev.counters.inc(DeviceCounter.rdma_write_bytes, len);
    qp?.stats.inc(QpCounter.bytes_rdma_write, len);
  }

  #atomic(mem: GuestMemory, qp: QpRecord, dest: QpRecord, w: SendWqe): number {
    const x = this.atomicTarget(mem, dest, w.rdma.rkey, w.rdma.remoteVa);
    if (x !== IonicStatus.OK) return x;
    const a = w.atomic;
    if (a.localLen !== ATOMIC_SIZE) return IonicStatus.LOCAL_LEN;
    if (
      this.#views.views(
        mem,
        a.localLkey,
        a.localVa,
        ATOMIC_SIZE,
        MrFlag.LOCAL_WRITE,
        qp.privileged,
        qp.pdId,
        true,
        this.#dst,
      ) !== KeyStatus.OK
    ) {
      return IonicStatus.LOCAL_PROT;
    }
    const old = this.atomicApply(w.verb === SendVerb.ATOMIC_CS, a.swapAddLo, a.swapAddHi, a.compareLo, a.compareHi);
    this.#wordList[0] = old;
    copySlices(this.#dst, 0, this.#wordList, 0, ATOMIC_SIZE);
    return IonicStatus.OK;
  }

  /** The responder's side of an atomic: resolve the remote word (rkey, va) on `dest`; IonicStatus. */
  atomicTarget(mem: GuestMemory, dest: QpRecord, rkey: number, va: number): number {
    if (!Number.isSafeInteger(va) || va < 0) return IonicStatus.REMOTE_ACC;
    if (va % ATOMIC_SIZE !== 0) return IonicStatus.REMOTE_INV_REQ;
    const x = this.remote(mem, dest, rkey, va, ATOMIC_SIZE, MrFlag.REMOTE_ATOMIC, QpFlag.REMOTE_ATOMIC, true);
    if (x !== IonicStatus.OK) return x;
    const remote = this.#remoteWord;
    remote.length = 0;
    for (const v of this.#dst) remote.push(v);
    this.#dst.length = 0;
    return IonicStatus.OK;
  }

  /**
   * Apply the atomic to the word atomicTarget resolved (compare-and-swap when
   * `cs`, else fetch-and-add, 64-bit as lo/hi halves); returns the value
   * before (a reused 8-byte buffer, little-endian as in memory).
   */
  atomicApply(cs: boolean, swapAddLo: number, swapAddHi: number, compareLo: number, compareHi: number): Buffer {
    const remote = this.#remoteWord;
    const word = this.#word;
    this.#wordList[0] = word;
    copySlices(this.#wordList, 0, remote, 0, ATOMIC_SIZE);
    const oldLo = getField(word, 0, atomic_operand.lo);
    const oldHi = getField(word, 0, atomic_operand.hi);
    let store = true;
    let newLo = swapAddLo;
    let newHi = swapAddHi;
    if (cs) store = oldHi === compareHi && oldLo === compareLo;
    else {
      const lo = oldLo + swapAddLo;
      const carry = lo >= TWO_32 ? 1 : 0;
      newLo = lo - carry * TWO_32;
      newHi = (oldHi + swapAddHi + carry) % TWO_32;
    }
    word.copy(this.#old);
    if (store) {
      setField(word, 0, atomic_operand.lo, newLo >>> 0);
      setField(word, 0, atomic_operand.hi, newHi >>> 0);
      copySlices(remote, 0, this.#wordList, 0, ATOMIC_SIZE);
    }
    remote.length = 0;
    this.#dev.counters.inc(DeviceCounter.atomic_ops);
    return this.#old;
  }

  /** Gather a SEND / WRITE payload into #src; KeyStatus or -1. */
  #gather(mem: GuestMemory, qp: QpRecord, w: SendWqe, buf: Buffer): number {
    if (w.inline) {
      if (w.inlineLength > 0) this.#src.push(buf.subarray(w.inlineOffset, w.inlineOffset + w.inlineLength));
      return KeyStatus.OK;
    }
    return this.#views.sgl(mem, qp, w.sges, w.sgeCount, w.sgeTotal, false, this.#src);
  }

  /**
   * Take the destination's next receive WQE into #recv: the ring it came from
   * (ci not yet advanced), 'empty', or 'bad' (unreadable / undecodable).
   */
  takeRecv(mem: GuestMemory, dest: QpRecord): QueueRing | 'empty' | 'bad' {
    const ring = this.recvRing(dest);
    if (!ring || ring.ci === ring.pi) return 'empty';
    const buf = this.#views.slot(mem, ring, ring.ci, this.#rqSlot);
    const d = buf ? decodeRecvWqe(buf, this.#recv) : null;
    if (d && d.ok) return ring;
    this.#badRecv(dest, ring, buf);
    return 'bad';
  }

  /**
   * The receive WQE at the head is unreadable or malformed: consume it with a
   * LOCAL_QP_OPER completion (its wqe_id when the slot could be read) and, on
   * a connected QP, move the responder to ERR, so the next message does not
   * meet the same WQE again.
   */
  #badRecv(dest: QpRecord, ring: QueueRing, buf: Buffer | null): void {
    advance(ring);
    const id = ionic_v1_base_hdr.wqe_id;
    this.#cqes.recvError(
      dest,
      IonicStatus.LOCAL_QP_OPER,
      buf ? getRawWord(buf, 0, id, 0) : 0,
      buf ? getRawWord(buf, 0, id, 1) : 0,
    );
    dest.stats.inc(QpCounter.cqes_posted);
    dest.stats.inc(QpCounter.errors);
    if (dest.type !== QpType.UD && dest.id !== GSI_QPN) this.#failures.deviceError(dest);
  }

  /**
   * Place #src (len bytes, after `prefix`) into the receive WQE in #recv on
   * `dest`, and post its RECV CQE (with `av`, a datagram's address vector).
   * Answers the responder status.
   */
  deliver(
    mem: GuestMemory,
    from: QpRecord | number,
    dest: QpRecord,
    ring: QueueRing,
    len: number,
    prefix: Buffer | null,
    op: RecvOp,
    imm: number,
    solicited: boolean,
    av: AddressVector | null,
    countOnly = false,
  ): number {
    const r = this.#recv;
    const pre = prefix ? prefix.length : 0;
    const total = pre + len;
    let st: number = IonicStatus.OK;
    this.#dst.length = 0;
    if (countOnly) {
      /* WRITE_IMM: the data went to the rkey; only the count is reported */
    } else if (total > r.sgeTotal) st = IonicStatus.LOCAL_LEN;
    else if (this.#views.sgl(mem, dest, r.sges, r.sgeCount, total, true, this.#dst) !== KeyStatus.OK)
      st = IonicStatus.LOCAL_PROT;
    if (st === IonicStatus.OK && !countOnly) {
      if (prefix && pre > 0) {
        this.#wordList[0] = prefix;
        copySlices(this.#dst, 0, this.#wordList, 0, pre);
      }
      copySlices(this.#dst, pre, this.#src, 0, len);
      const c = this.#dev.counters;
      c.inc(DeviceCounter.send_msgs);
      c.inc(DeviceCounter.recv_msgs);
      c.inc(DeviceCounter.tx_bytes, len);
      c.inc(DeviceCounter.rx_bytes, total);
      if (typeof from !== 'number') from.stats.inc(QpCounter.bytes_sent, len);
      dest.stats.inc(QpCounter.bytes_received, total);
    }
    this.#dev.counters.inc(DeviceCounter.rx_wqes);
    advance(ring);
    this.#cqes.recv(
      dest,
      typeof from === 'number' ? from : from.id,
      st,
      total,
      r.wqeIdLo,
      r.wqeIdHi,
      op,
      imm,
      solicited,
      av,
    );
    this.#dst.length = 0;
    if (st !== IonicStatus.OK && dest.type !== QpType.UD) this.#failures.deviceError(dest);
    return st;
  }
}

/** The message length of a send WQE. */
function msgLen(w: SendWqe): number {
  return w.inline ? w.inlineLength : w.sgeTotal;
}

/** Consume the slot at a ring's head. */
function advance(ring: QueueRing): void {
  ring.ci = (ring.ci + 1) & ((1 << ring.depthLog2) - 1);
}
