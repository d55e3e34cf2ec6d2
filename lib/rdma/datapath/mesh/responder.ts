// The responder half of the mesh data path: a request from a peer node is
// applied to this node's guest through the same responder code the loopback
// path uses (verbs.ts: receive delivery, rkey checks, atomics), then answered.
// Rkeys are resolved here, against our own MR table; key 0 from a peer is
// refused (locally it means "the address is a bus address": a peer must
// never reach all of guest memory).
//
// Receiver not ready: a SEND (or WRITE_IMM) for a QP with no receive posted
// is held, in the buffer it arrived in (its room in the inbound queue is kept
// by MeshMessage.retain, so TCP backpressure bounds it), and the messages
// behind it for that QP wait with it, so nothing is reordered. It is tried
// again when the guest posts receives, and fails with RNR_RETRY_EXCEEDED
// after 5 s, or at once when the mesh reports inbound pressure (0.5 s of a
// reader waiting for room). Datagrams are never held: with no receive, UD
// drops them, and they are not acknowledged.
//
// RC rules (as a real HCA's): a request for an RC/UC QP is executed only if
// it comes from the node and QPN the QP is connected to (its AV's GID, mapped
// to a node through the GID table when the AV was set, and its dest QPN);
// anything else is answered as if the QP were not there and counted. A
// remote access, length or operation error at a working QP answers with its
// status and moves the QP to ERR with its asynchronous event, so a key
// cannot be guessed over one connection: the first wrong one ends it. A
// header of another wire version is refused whole (datagrams dropped,
// requests answered REMOTE_INV_REQ, no QP touched).

import { DeviceCounter } from '../../counters';
import type { DataPathDevice } from '../../hooks';
import { warnLimited, RateLimiter } from '../../../log';
import { GSI_QPN, RDMA_QPN_MASK } from '../../limits';
import { KeyStatus } from '../../resources';
import type { QpRecord } from '../../resources';
import { MrFlag, QpFlag, QpState, QpType } from '../../types';
import type { AddressVector } from '../../address';
import type { GuestMemory } from '../../../vfio-user/guest-memory';
import { guardedTimeout } from '../../../guard';
import { IonicWireOp, meshBufferPool, MsgType, RNR_TIMEOUT_MS } from '../../../mesh';
import type { Placement } from '../../../mesh';
import { copySlices } from '../copy';
import { lendViews, returnViews } from '../../../vfio-user/lent-views';
import { LEND_MIN_BYTES } from './requester';
import { IonicStatus, isResponderError, RecvOp } from '../cqe';
import { datagramAccepted, GRH_SIZE } from '../datagram';
import { ATOMIC_SIZE } from '../wqe-layout';
import type { Verbs } from '../../executor/verbs';
import { qpStateIfAny } from '../../executor/qp-state';
import type { MeshSender } from './requester';
import { unpackDatagramAv, WIRE_FLAG_DATAGRAM, WIRE_FLAG_SOLICITED, WIRE_VERSION_FLAGS, wireVersionOk } from './wire';
import {
  IONIC_WIRE_HEADER_SIZE,
  WireHeader,
  newWireHeader,
  readWireHeader,
  writeWireHeader,
} from '../../../mesh/ionic-header';

/** How a responder error fails its QP (WqeExecutor.responderError: ERR and the async event). */
export interface ResponderFailures {
  responderError(qp: QpRecord, status: number): void;
}

/** A QP that takes requests. */
function ready(state: QpState): boolean {
  return state === QpState.RTR || state === QpState.RTS || state === QpState.SQD;
}

/** A request as it arrived: who sent it, its header and payload (views kept valid by `release` until called). */
export interface InboundRequest {
  readonly from: number;
  readonly header: Buffer;
  readonly payload: Buffer;
  /** Payload bytes already written into the MR as they arrived (place()); `payload` is then empty. */
  readonly placed?: number;
  /** Keep the bytes past the event; call the result when done. */
  retain(): () => void;
}

interface Held {
  readonly from: number;
  readonly h: WireHeader;
  readonly payload: Buffer;
  readonly placed: number;
  readonly release: () => void;
  readonly deadline: number;
}

/** States in which a QP's receive side works. */
function receives(state: QpState): boolean {
  return state === QpState.RTR || state === QpState.RTS || state === QpState.SQD || state === QpState.SQE;
}

type Applied = number | 'hold' | 'silent';

export class MeshResponder {
  readonly #dev: DataPathDevice;
  readonly #mesh: MeshSender;
  readonly #verbs: Verbs;
  readonly #failures: ResponderFailures;
  readonly #rnrMs: number;
  readonly #limiter = new RateLimiter(5, 10_000);
  readonly #h: WireHeader = newWireHeader();
  readonly #reply: WireHeader = newWireHeader();
  readonly #placeHdr: WireHeader = newWireHeader();
  readonly #one: Buffer[] = [Buffer.alloc(0)];
  /** Held messages per destination QP id, in arrival order. */
  readonly #held = new Map<number, Held[]>();
  #timer: NodeJS.Timeout | null = null;
  /** A datagram's address facts for the receive CQE (reused). */
  readonly #av = { ipVersion: 4, smac: Buffer.alloc(6), vlanTci: -1 };
  /** Answers dropped because the connection back had no reply room. */
  repliesDropped = 0;
  /** WRITEs whose payload went straight into the MR (place()). */
  placedWrites = 0;
  /** Requests refused unexecuted: not from the QP's peer node and QPN, or of another wire version. */
  refused = 0;

  constructor(
    dev: DataPathDevice,
    mesh: MeshSender,
    verbs: Verbs,
    failures: ResponderFailures,
    rnrMs = RNR_TIMEOUT_MS,
  ) {
    this.#dev = dev;
    this.#mesh = mesh;
    this.#verbs = verbs;
    this.#failures = failures;
    this.#rnrMs = rnrMs;
  }

  get heldCount(): number {
    let n = 0;
    for (const q of this.#held.values()) n += q.length;
    return n;
  }

  /** A request from a peer. */
  request(m: InboundRequest): void {
    const mem = this.#dev.memory();
    // No guest attached: nothing to apply it to; the requester's deadline answers it.
    if (!mem) return;
    const h = this.#h;
    readWireHeader(m.header, h);
    if (!wireVersionOk(h.flags)) {
      this.#refuse(m.from, h, `wire version ${(h.flags >>> 8) & 0xff}`);
      if (!(h.flags & WIRE_FLAG_DATAGRAM)) this.#answer(m.from, h, IonicStatus.REMOTE_INV_REQ, null);
      return;
    }
    const qpId = h.dstQp & RDMA_QPN_MASK;
    const queue = this.#held.get(qpId);
    // Behind a held SEND for the same QP: wait with it (no reordering); only its peer's requests are kept.
    if (queue && !(h.flags & WIRE_FLAG_DATAGRAM) && this.#fromPeer(this.#dev.rm.qps.get(qpId), m.from, h)) {
      this.#hold(queue, m, h);
      return;
    }
    const r = this.#apply(mem, m.from, h, m.payload, m.placed ?? 0);
    if (r === 'hold') {
      const q: Held[] = [];
      this.#held.set(qpId, q);
      this.#hold(q, m, h);
      return;
    }
    if (r !== 'silent') this.#answer(m.from, h, r, null);
  }

  /**
   * A large RDMA WRITE's payload straight into the MR as it arrives
   * (Mesh.setPlacer): only a plain WRITE to a connected QP that is taking
   * requests, with nothing held before it, whose rkey grants the whole range
   * (the checks #write makes); the views are lent until the message is
   * delivered. Anything else is left to arrive whole: null.
   */
  place(mem: GuestMemory | undefined, from: number, head: Buffer, rest: number): Placement | null {
    if (!mem) return null;
    const h = this.#placeHdr;
    readWireHeader(head, h);
    if (
      h.op !== IonicWireOp.WRITE ||
      h.flags & WIRE_FLAG_DATAGRAM ||
      !wireVersionOk(h.flags) ||
      h.length !== rest ||
      h.rkey === 0
    )
      return null;
    const qpId = h.dstQp & RDMA_QPN_MASK;
    const dest = this.#dev.rm.qps.get(qpId);
    // Anything but the QP's own peer arrives whole and is refused by #apply.
    if (!dest || !this.#fromPeer(dest, from, h) || this.#held.has(qpId) || !ready(dest.state)) return null;
    const v = this.#verbs;
    v.clear();
    const x = v.remote(mem, dest, h.rkey, h.remoteVa, rest, MrFlag.REMOTE_WRITE, QpFlag.REMOTE_WRITE, true);
    const views = x === IonicStatus.OK ? v.dst.slice() : null;
    v.clear();
    if (!views) return null;
    lendViews(views);
    this.placedWrites++;
    return { views, done: () => returnViews(views) };
  }

  #hold(q: Held[], m: InboundRequest, h: WireHeader): void {
    q.push({
      from: m.from,
      h: { ...h },
      payload: m.payload,
      placed: m.placed ?? 0,
      release: m.retain(),
      deadline: Date.now() + this.#rnrMs,
    });
    this.#arm();
  }

  /** Receives were posted on `qpId` (-1: on an SRQ, any QP may have them now). */
  receivesPosted(qpId: number): void {
    if (this.#held.size === 0) return;
    if (qpId >= 0) {
      this.#retry(qpId, false);
      return;
    }
    for (const id of [...this.#held.keys()]) this.#retry(id, false);
  }

  /** The mesh's readers wait for room: held SENDs stop waiting for receives (they fail now), and what is behind them goes on. */
  pressure(): void {
    for (const id of [...this.#held.keys()]) this.#retry(id, true);
  }

  /** Try a QP's held messages in order; with `giveUp`, one still without a receive fails instead of waiting. */
  #retry(qpId: number, giveUp: boolean): void {
    const q = this.#held.get(qpId);
    const mem = this.#dev.memory();
    if (!q) return;
    const now = Date.now();
    while (q.length > 0) {
      const head = q[0]!;
      let r: Applied = mem
        ? this.#apply(mem, head.from, head.h, head.payload, head.placed)
        : IonicStatus.RETRY_EXCEEDED;
      if (r === 'hold') {
        if (!giveUp && head.deadline > now) break;
        r = IonicStatus.RNR_RETRY_EXCEEDED;
        this.#dev.counters.inc(DeviceCounter.rnr_retry_exceeded);
      }
      q.shift();
      if (r !== 'silent') this.#answer(head.from, head.h, r, null);
      head.release();
    }
    if (q.length === 0) this.#held.delete(qpId);
  }

  #arm(): void {
    if (this.#timer || this.#held.size === 0) return;
    let first = Infinity;
    for (const q of this.#held.values()) if (q.length > 0 && q[0]!.deadline < first) first = q[0]!.deadline;
    if (first === Infinity) return;
    this.#timer = guardedTimeout(this.#dev.log, 'mesh RNR deadline', Math.max(0, first - Date.now()), () => {
      this.#timer = null;
      const now = Date.now();
      for (const [id, q] of [...this.#held]) if (q.length > 0 && q[0]!.deadline <= now) this.#retry(id, false);
      this.#arm();
    });
    this.#timer.unref();
  }

  /**
   * Whether request `h` from node `from` is from the peer `dest` is
   * connected to: an RC/UC QP whose AV named that node when it was set
   * (QpDp.node) and whose dest QPN is the sender's QP. Integer compares only.
   */
  #fromPeer(dest: QpRecord | undefined, from: number, h: WireHeader): boolean {
    if (!dest || (dest.type !== QpType.RC && dest.type !== QpType.UC)) return false;
    const s = qpStateIfAny(dest);
    return (
      s !== undefined && s.handle === dest.handle && s.node === from && s.node >= 0 && h.srcQp === dest.attrs.destQpn
    );
  }

  /** Count a request refused unexecuted and say so (rate limited). */
  #refuse(from: number, h: WireHeader, why: string): void {
    this.refused++;
    this.#dev.counters.inc(DeviceCounter.mesh_refused_requests);
    warnLimited(
      this.#dev.log,
      this.#limiter,
      'mesh-refused',
      `mesh: refused a request from node ${from} for QP ${h.dstQp & RDMA_QPN_MASK}: ${why}`,
    );
  }

  /** Apply one request to the guest: its status, 'hold' (no receive yet) or 'silent' (a datagram: no answer). */
  #apply(mem: GuestMemory, from: number, h: WireHeader, payload: Buffer, placed: number): Applied {
    const rm = this.#dev.rm;
    const dest = rm.qps.get(h.dstQp & RDMA_QPN_MASK);
    if (h.flags & WIRE_FLAG_DATAGRAM) {
      this.#datagram(mem, h, payload, dest);
      return 'silent';
    }
    if (!dest || (dest.type !== QpType.RC && dest.type !== QpType.UC) || !ready(dest.state)) {
      return IonicStatus.RETRY_EXCEEDED;
    }
    // Not its peer: answered as if the QP were not there, and the QP is left alone.
    if (!this.#fromPeer(dest, from, h)) {
      this.#refuse(
        from,
        h,
        `QP ${dest.id} is connected to node ${qpStateIfAny(dest)?.node ?? -1} QP ${dest.attrs.destQpn}, not node ${from} QP ${h.srcQp}`,
      );
      return IonicStatus.RETRY_EXCEEDED;
    }
    const r = this.#execute(mem, from, h, payload, placed, dest);
    if (typeof r === 'number' && isResponderError(r)) this.#failures.responderError(dest, r);
    return r;
  }

  #execute(mem: GuestMemory, from: number, h: WireHeader, payload: Buffer, placed: number, dest: QpRecord): Applied {
    const v = this.#verbs;
    v.clear();
    try {
      switch (h.op) {
        case IonicWireOp.SEND:
        case IonicWireOp.SEND_IMM:
        case IonicWireOp.SEND_INV:
          return this.#send(mem, h, payload, dest);
        case IonicWireOp.WRITE:
        case IonicWireOp.WRITE_IMM:
          return this.#write(mem, h, payload, dest, placed);
        case IonicWireOp.READ_REQ:
          return this.#read(mem, from, h, dest);
        case IonicWireOp.ATOMIC_REQ:
          return this.#atomic(mem, from, h, dest);
        default:
          return IonicStatus.REMOTE_INV_REQ;
      }
    } finally {
      v.clear();
    }
  }

  #send(mem: GuestMemory, h: WireHeader, payload: Buffer, dest: QpRecord): Applied {
    const v = this.#verbs;
    if (payload.length !== h.length) return IonicStatus.REMOTE_INV_REQ;
    const ring = v.takeRecv(mem, dest);
    if (ring === 'empty') {
      this.#dev.counters.inc(DeviceCounter.rnr_naks);
      return 'hold';
    }
    if (ring === 'bad') return IonicStatus.REMOTE_OPER;
    v.src.push(payload);
    const op =
      h.op === IonicWireOp.SEND ? RecvOp.SEND : h.op === IonicWireOp.SEND_IMM ? RecvOp.SEND_IMM : RecvOp.SEND_INV;
    const st = v.deliver(
      mem,
      h.srcQp,
      dest,
      ring,
      payload.length,
      null,
      op,
      h.op === IonicWireOp.SEND ? 0 : h.imm,
      (h.flags & WIRE_FLAG_SOLICITED) !== 0,
      null,
    );
    if (st === IonicStatus.LOCAL_LEN) return IonicStatus.REMOTE_INV_REQ;
    if (st !== IonicStatus.OK) return IonicStatus.REMOTE_OPER;
    if (h.op === IonicWireOp.SEND_INV && this.#dev.rm.invalidate(h.imm) === KeyStatus.OK)
      this.#dev.counters.inc(DeviceCounter.remote_invalidates);
    return IonicStatus.OK;
  }

  #write(mem: GuestMemory, h: WireHeader, payload: Buffer, dest: QpRecord, placed: number): Applied {
    const v = this.#verbs;
    const len = placed > 0 ? placed : payload.length;
    if (len !== h.length || (placed > 0 && (payload.length > 0 || h.op !== IonicWireOp.WRITE)))
      return IonicStatus.REMOTE_INV_REQ;
    if (h.rkey === 0 && len > 0) return IonicStatus.REMOTE_ACC;
    const imm = h.op === IonicWireOp.WRITE_IMM;
    const ring = imm ? v.takeRecv(mem, dest) : null;
    if (ring === 'empty') {
      this.#dev.counters.inc(DeviceCounter.rnr_naks);
      return 'hold';
    }
    if (ring === 'bad') return IonicStatus.REMOTE_OPER;
    const x = v.remote(mem, dest, h.rkey, h.remoteVa, len, MrFlag.REMOTE_WRITE, QpFlag.REMOTE_WRITE, true);
    if (x !== IonicStatus.OK) return x;
    // Checked again for the answer; a placed payload is already in the MR (place() checked the same).
    if (placed === 0) {
      this.#one[0] = payload;
      copySlices(v.dst, 0, this.#one, 0, len);
    }
    v.written(null, len);
    if (ring)
      v.deliver(
        mem,
        h.srcQp,
        dest,
        ring,
        len,
        null,
        RecvOp.RDMA_WRITE_IMM,
        h.imm,
        (h.flags & WIRE_FLAG_SOLICITED) !== 0,
        null,
        true,
      );
    return IonicStatus.OK;
  }

  #read(mem: GuestMemory, from: number, h: WireHeader, dest: QpRecord): Applied {
    const v = this.#verbs;
    const len = h.length;
    if (h.rkey === 0 && len > 0) return IonicStatus.REMOTE_ACC;
    const x = v.remote(mem, dest, h.rkey, h.remoteVa, len, MrFlag.REMOTE_READ, QpFlag.REMOTE_READ, false);
    if (x !== IonicStatus.OK) return x;
    this.#dev.counters.inc(DeviceCounter.rdma_read_bytes, len);
    if (len >= LEND_MIN_BYTES) {
      // A large READ answers out of guest memory itself (lent until the kernel has it; requester.ts #sendLent).
      this.#answerLent(from, h, v.dst.slice());
      return 'silent';
    }
    const msg = meshBufferPool.take(IONIC_WIRE_HEADER_SIZE + len);
    this.#one[0] = msg.subarray(IONIC_WIRE_HEADER_SIZE);
    copySlices(this.#one, 0, v.dst, 0, len);
    this.#answer(from, h, IonicStatus.OK, msg);
    return 'silent';
  }

  /** READ_RESP of `views` (the MR's bytes, not copied). Dropped when there is no reply room. */
  #answerLent(from: number, h: WireHeader, views: Buffer[]): void {
    const r = this.#replyTo(h, IonicStatus.OK);
    for (const b of views) r.length += b.length;
    const hdr = Buffer.allocUnsafe(IONIC_WIRE_HEADER_SIZE);
    writeWireHeader(hdr, r);
    lendViews(views);
    const res = this.#mesh.send(from, MsgType.IONIC, hdr, views, {
      srcQpn: r.srcQp,
      dstQpn: r.dstQp,
      reply: true,
      onDone: () => returnViews(views),
    });
    if (res !== 'queued') {
      this.repliesDropped++;
      returnViews(views);
    }
  }

  #atomic(mem: GuestMemory, from: number, h: WireHeader, dest: QpRecord): Applied {
    const v = this.#verbs;
    if (h.rkey === 0) return IonicStatus.REMOTE_ACC;
    if (h.length !== ATOMIC_SIZE) return IonicStatus.REMOTE_INV_REQ;
    const x = v.atomicTarget(mem, dest, h.rkey, h.remoteVa);
    if (x !== IonicStatus.OK) return x;
    const old = v.atomicApply(h.atomicCs, h.swapAddLo, h.swapAddHi, h.compareLo, h.compareHi);
    const msg = Buffer.allocUnsafe(IONIC_WIRE_HEADER_SIZE + ATOMIC_SIZE);
    old.copy(msg, IONIC_WIRE_HEADER_SIZE);
    this.#answer(from, h, IonicStatus.OK, msg);
    return 'silent';
  }

  /** A datagram: delivered if the destination takes it (a datagram QP, its Q_Key, a receive posted), else dropped. */
  #datagram(mem: GuestMemory, h: WireHeader, payload: Buffer, dest: QpRecord | undefined): void {
    if (!dest || !receives(dest.state) || payload.length < GRH_SIZE || payload.length !== h.length) return;
    const destUd = dest.type === QpType.UD || dest.id === GSI_QPN;
    if (!datagramAccepted(destUd, dest.attrs.qkey, h.rkey)) return;
    if (h.op !== IonicWireOp.SEND && h.op !== IonicWireOp.SEND_IMM) return;
    const v = this.#verbs;
    v.clear();
    const ring = v.takeRecv(mem, dest);
    if (typeof ring === 'string') return;
    const av = this.#av;
    const [ipVersion, vlan] = unpackDatagramAv(h, av.smac);
    av.ipVersion = ipVersion === 6 ? 6 : 4;
    av.vlanTci = vlan;
    v.src.push(payload.subarray(GRH_SIZE));
    v.deliver(
      mem,
      h.srcQp,
      dest,
      ring,
      payload.length - GRH_SIZE,
      payload.subarray(0, GRH_SIZE),
      h.op === IonicWireOp.SEND ? RecvOp.SEND : RecvOp.SEND_IMM,
      h.op === IonicWireOp.SEND_IMM ? h.imm : 0,
      (h.flags & WIRE_FLAG_SOLICITED) !== 0,
      av as unknown as AddressVector,
    );
    v.clear();
  }

  /** Answer request `h` to `from`: ACK, READ_RESP or ATOMIC_RESP (`msg`: header room + data, or null). Dropped when there is no reply room. */
  #answer(from: number, h: WireHeader, status: number, msg: Buffer | null): void {
    const r = this.#replyTo(h, status);
    const data = status === IonicStatus.OK && msg ? msg.length - IONIC_WIRE_HEADER_SIZE : 0;
    r.length = data;
    const buf = msg && data > 0 ? msg : Buffer.allocUnsafe(IONIC_WIRE_HEADER_SIZE);
    writeWireHeader(buf, r);
    const res = this.#mesh.send(
      from,
      MsgType.IONIC,
      buf.subarray(0, IONIC_WIRE_HEADER_SIZE),
      buf.subarray(IONIC_WIRE_HEADER_SIZE, IONIC_WIRE_HEADER_SIZE + data),
      { srcQpn: r.srcQp, dstQpn: r.dstQp, reply: true, onDone: () => meshBufferPool.give(buf) },
    );
    if (res !== 'queued') {
      this.repliesDropped++;
      meshBufferPool.give(buf);
    }
  }

  /** The reply header (reused) answering request `h` with `status`; length 0. */
  #replyTo(h: WireHeader, status: number): WireHeader {
    const r = this.#reply;
    r.op =
      h.op === IonicWireOp.READ_REQ
        ? IonicWireOp.READ_RESP
        : h.op === IonicWireOp.ATOMIC_REQ
          ? IonicWireOp.ATOMIC_RESP
          : IonicWireOp.ACK;
    r.atomicCs = false;
    r.flags = WIRE_VERSION_FLAGS;
    r.srcQp = h.dstQp;
    r.dstQp = h.srcQp;
    r.reqId = h.reqId;
    r.rkey = 0;
    r.imm = 0;
    r.status = status;
    r.remoteVa = 0;
    r.swapAddLo = r.swapAddHi = r.compareLo = r.compareHi = 0;
    r.length = 0;
    return r;
  }

  /** A QP is gone: what was held for it is answered RETRY_EXCEEDED (as if nobody were there) and let go. */
  destroyed(qp: QpRecord): void {
    const q = this.#held.get(qp.id);
    if (!q) return;
    this.#held.delete(qp.id);
    for (const m of q) {
      if (!(m.h.flags & WIRE_FLAG_DATAGRAM)) this.#answer(m.from, m.h, IonicStatus.RETRY_EXCEEDED, null);
      m.release();
    }
  }

  /** Device reset or detach: everything held is let go unanswered (the requesters' deadlines answer). */
  reset(): void {
    for (const q of this.#held.values()) for (const m of q) m.release();
    this.#held.clear();
    if (this.#timer) {
      clearTimeout(this.#timer);
      this.#timer = null;
    }
  }
}
