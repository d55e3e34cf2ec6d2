// The requester half of the mesh data path (spec: "A Remote Request, Step by
// Step"). A WQE whose destination is on another node is sent (a small payload
// gathered into one pooled buffer, a large one written from guest memory
// itself) and recorded in the pending table; its completion
// waits in the QP's inflight list until the peer answers. Datagrams complete
// at once. What bounds the requester:
//   - the connection's request room (32 MiB): 'queue-full' parks the QP on
//     that peer until the mesh says 'writable';
//   - READ replies asked of one peer at once (32 MiB), so the peer's reply
//     room is never exceeded; the QP waits for earlier replies;
//   - the lost-peer deadline (30 s, PendingRequests): RETRY_EXCEEDED.
// A request that cannot be sent at all (no route) fails at once.

import { DeviceCounter } from '../../counters';
import type { DataPathDevice } from '../../hooks';
import { KeyStatus } from '../../resources';
import type { QpRecord } from '../../resources';
import { QpType } from '../../types';
import type { GuestMemory } from '../../../vfio-user/guest-memory';
import { lendViews, returnViews } from '../../../vfio-user/lent-views';
import { U64_UNSAFE } from '../../../../protocol/field';
import { IonicWireOp, meshBufferPool, MsgType, PendingRequests, REQUEST_QUEUE_BYTES } from '../../../mesh';
import type { SendResult } from '../../../mesh';
import { copySlices } from '../copy';
import { IonicStatus } from '../cqe';
import { effectiveQkey, GRH_SIZE, writeGrh } from '../datagram';
import type { Sge, SendWqe } from '../wqe-decode';
import { ATOMIC_SIZE, SendVerb } from '../wqe-layout';
import type { GuestViews } from '../../executor/guest-views';
import { InflightWqe, QpDp, WaitKind } from '../../executor/qp-state';
import type { RemoteResult } from '../../executor/remote-path';
import type { Scheduler } from '../../executor/scheduler';
import { packDatagramAv, WIRE_FLAG_DATAGRAM, WIRE_FLAG_SOLICITED, WIRE_VERSION_FLAGS } from './wire';
import { IONIC_WIRE_HEADER_SIZE, WireHeader, newWireHeader, writeWireHeader } from '../../../mesh/ionic-header';

/** What the requester needs of the mesh. */
export interface MeshSender {
  send(
    node: number,
    type: number,
    header: Buffer,
    payload: Buffer | readonly Buffer[],
    opts: { srcQpn: number; dstQpn: number; reply?: boolean; tag?: number; onDone?: () => void },
  ): SendResult;
  takeBack(tag: number): number;
}

/** One request waiting for its answer. */
interface MeshRequest {
  readonly qp: QpRecord;
  readonly s: QpDp;
  readonly node: number;
  readonly entry: InflightWqe;
  readonly verb: SendVerb;
  readonly destQp: number;
  /** READ: bytes asked (counted against the peer's reply budget). */
  readonly readLen: number;
  /** READ / atomic: where the answer goes (copied out of the WQE). */
  readonly sges: Sge[] | null;
}

/** Payloads from this size on are written from guest memory without a gather copy (smaller ones are cheaper copied into one buffer). */
export const LEND_MIN_BYTES = 16 * 1024;

/** Reply bytes one node may ask of one peer at once: what the peer's reply room is sure to hold. */
const READ_REPLY_BUDGET = REQUEST_QUEUE_BYTES;

/** The send ops of the ionic wire protocol, by verb (-1: not a remote op). */
function wireOp(verb: SendVerb): number {
  switch (verb) {
    case SendVerb.SEND:
      return IonicWireOp.SEND;
    case SendVerb.SEND_IMM:
      return IonicWireOp.SEND_IMM;
    case SendVerb.SEND_INV:
      return IonicWireOp.SEND_INV;
    case SendVerb.RDMA_WRITE:
      return IonicWireOp.WRITE;
    case SendVerb.RDMA_WRITE_IMM:
      return IonicWireOp.WRITE_IMM;
    case SendVerb.RDMA_READ:
      return IonicWireOp.READ_REQ;
    case SendVerb.ATOMIC_CS:
    case SendVerb.ATOMIC_FA:
      return IonicWireOp.ATOMIC_REQ;
    default:
      return -1;
  }
}

export class MeshRequester {
  readonly #dev: DataPathDevice;
  readonly #mesh: MeshSender;
  readonly #views: GuestViews;
  readonly #sched: Scheduler;
  readonly #pending: PendingRequests<MeshRequest>;
  /** READ reply bytes outstanding per peer. */
  readonly #readBytes = new Map<number, number>();
  readonly #hdr: WireHeader = newWireHeader();
  readonly #src: Buffer[] = [];
  readonly #one: Buffer[] = [Buffer.alloc(0)];
  /** Answers arrived or expired: the data path posts the completions (in order). */
  readonly #answered: (qp: QpRecord, s: QpDp) => void;

  constructor(
    dev: DataPathDevice,
    mesh: MeshSender,
    views: GuestViews,
    sched: Scheduler,
    answered: (qp: QpRecord, s: QpDp) => void,
    lostPeerMs?: number,
  ) {
    this.#dev = dev;
    this.#mesh = mesh;
    this.#views = views;
    this.#sched = sched;
    this.#answered = answered;
    this.#pending = new PendingRequests<MeshRequest>((_id, r) => this.#expired(r), lostPeerMs);
  }

  get pendingCount(): number {
    return this.#pending.size;
  }

  /** Send WQE `w` of `qp` to `node`. */
  execute(
    mem: GuestMemory,
    qp: QpRecord,
    s: QpDp,
    w: SendWqe,
    buf: Buffer,
    node: number,
    datagram: boolean,
  ): RemoteResult {
    if (datagram) return this.#datagram(mem, qp, w, buf, node);
    const op = wireOp(w.verb);
    if (op < 0) return IonicStatus.LOCAL_QP_OPER;
    // UC has no responder resources: RDMA READ and atomics are RC only (IBTA table 38).
    if (qp.type === QpType.UC && (op === IonicWireOp.READ_REQ || op === IonicWireOp.ATOMIC_REQ))
      return IonicStatus.LOCAL_QP_OPER;
    const h = this.#hdr;
    h.op = op;
    h.atomicCs = w.verb === SendVerb.ATOMIC_CS;
    h.flags = WIRE_VERSION_FLAGS | (w.solicited ? WIRE_FLAG_SOLICITED : 0);
    h.srcQp = qp.id;
    h.dstQp = qp.attrs.destQpn;
    h.rkey = 0;
    h.imm = w.verb === SendVerb.SEND ? 0 : w.immDataKey;
    h.status = 0;
    h.remoteVa = 0;
    h.swapAddLo = h.swapAddHi = h.compareLo = h.compareHi = 0;
    let payloadLen = 0;
    let readLen = 0;
    let sges: Sge[] | null = null;
    const remoteOp =
      op === IonicWireOp.WRITE ||
      op === IonicWireOp.WRITE_IMM ||
      op === IonicWireOp.READ_REQ ||
      op === IonicWireOp.ATOMIC_REQ;
    if (remoteOp) {
      // An address past 2^53 names no MR the peer can have: the answer is known.
      if (w.rdma.remoteVa === U64_UNSAFE) return IonicStatus.REMOTE_ACC;
      h.rkey = w.rdma.rkey;
      h.remoteVa = w.rdma.remoteVa;
    }
    const src = this.#src;
    src.length = 0;
    if (op === IonicWireOp.READ_REQ) {
      readLen = w.sgeTotal;
      // The local buffers must take the data: checked now, resolved again when it arrives.
      if (this.#views.sgl(mem, qp, w.sges, w.sgeCount, readLen, true, src) !== KeyStatus.OK) {
        src.length = 0;
        return IonicStatus.LOCAL_PROT;
      }
      src.length = 0;
      const out = this.#readBytes.get(node) ?? 0;
      if (out > 0 && out + readLen > READ_REPLY_BUDGET) {
        this.#sched.waitFor(WaitKind.PEER, node);
        return 'wait';
      }
      h.length = readLen;
      sges = copySges(w.sges, w.sgeCount);
    } else if (op === IonicWireOp.ATOMIC_REQ) {
      const a = w.atomic;
      if (a.localLen !== ATOMIC_SIZE) return IonicStatus.LOCAL_LEN;
      if (
        this.#views.views(mem, a.localLkey, a.localVa, ATOMIC_SIZE, 0, qp.privileged, qp.pdId, true, src) !==
        KeyStatus.OK
      ) {
        src.length = 0;
        return IonicStatus.LOCAL_PROT;
      }
      src.length = 0;
      h.length = ATOMIC_SIZE;
      h.swapAddLo = a.swapAddLo;
      h.swapAddHi = a.swapAddHi;
      h.compareLo = a.compareLo;
      h.compareHi = a.compareHi;
      sges = [{ va: a.localVa, len: ATOMIC_SIZE, lkey: a.localLkey }];
    } else {
      const g = this.#gather(mem, qp, w, buf);
      if (g !== KeyStatus.OK) return IonicStatus.LOCAL_PROT;
      payloadLen = w.inline ? w.inlineLength : w.sgeTotal;
      h.length = payloadLen;
    }
    const entry: InflightWqe = { status: 'pending', remote: true, wqeIdLo: w.wqeIdLo, wqeIdHi: w.wqeIdHi };
    const req: MeshRequest = { qp, s, node, entry, verb: w.verb, destQp: h.dstQp, readLen, sges };
    const reqId = this.#pending.add(req);
    if (reqId === undefined) {
      src.length = 0;
      this.#sched.waitFor(WaitKind.PEER, node);
      return 'wait';
    }
    h.reqId = reqId;
    const r = this.#send(node, qp, h, payloadLen, null);
    if (r !== 'queued') {
      this.#pending.take(reqId);
      if (r === 'queue-full') {
        this.#sched.waitFor(WaitKind.PEER, node);
        return 'wait';
      }
      return r === 'too-large' ? IonicStatus.LOCAL_LEN : IonicStatus.RETRY_EXCEEDED;
    }
    if (readLen > 0) this.#readBytes.set(node, (this.#readBytes.get(node) ?? 0) + readLen);
    if (payloadLen > 0) this.#counted(w.verb, payloadLen);
    s.inflight.push(entry);
    return 'pending';
  }

  /** A UD/GSI send to another node: the GRH goes first, the completion now (a datagram is not acknowledged). */
  #datagram(mem: GuestMemory, qp: QpRecord, w: SendWqe, buf: Buffer, node: number): RemoteResult {
    if (w.verb !== SendVerb.SEND && w.verb !== SendVerb.SEND_IMM) return IonicStatus.LOCAL_QP_OPER;
    const ah = this.#dev.rm.ahs.get(w.ud.ahId);
    if (!ah) return IonicStatus.LOCAL_QP_OPER;
    if (this.#gather(mem, qp, w, buf) !== KeyStatus.OK) return IonicStatus.LOCAL_PROT;
    const qkey = effectiveQkey(w.ud.destQkey, qp.attrs.qkey);
    // A controlled Q_Key from a QP that has none: refused here, as on this node.
    if (qkey < 0) {
      this.#src.length = 0;
      return IonicStatus.OK;
    }
    const len = w.inline ? w.inlineLength : w.sgeTotal;
    const h = this.#hdr;
    h.op = w.verb === SendVerb.SEND ? IonicWireOp.SEND : IonicWireOp.SEND_IMM;
    h.atomicCs = false;
    h.flags = WIRE_VERSION_FLAGS | WIRE_FLAG_DATAGRAM | (w.solicited ? WIRE_FLAG_SOLICITED : 0);
    h.srcQp = qp.id;
    h.dstQp = w.ud.destQpn;
    h.reqId = 0;
    h.rkey = qkey;
    h.length = GRH_SIZE + len;
    h.imm = w.verb === SendVerb.SEND_IMM ? w.immDataKey : 0;
    h.status = 0;
    h.compareLo = h.compareHi = 0;
    packDatagramAv(h, ah.av.smac, ah.av.ipVersion, ah.av.vlanTci);
    const r = this.#send(node, qp, h, len, ah.av);
    if (r === 'queue-full') {
      this.#sched.waitFor(WaitKind.PEER, node);
      return 'wait';
    }
    // Sent or not, a datagram completes: the wire may lose it.
    if (r === 'queued') this.#counted(w.verb, len);
    return IonicStatus.OK;
  }

  /** One buffer: header, [GRH], the gathered payload (#src); handed to the mesh. */
  #send(
    node: number,
    qp: QpRecord,
    h: WireHeader,
    len: number,
    grhAv: Parameters<typeof writeGrh>[0] | null,
  ): SendResult {
    if (!grhAv && len >= LEND_MIN_BYTES) return this.#sendLent(node, qp, h);
    const pre = grhAv ? GRH_SIZE : 0;
    // From the pool, back to it once the kernel has it (a large WRITE would otherwise cost a fresh buffer each).
    const msg = meshBufferPool.take(IONIC_WIRE_HEADER_SIZE + pre + len);
    writeWireHeader(msg, h);
    if (grhAv) writeGrh(grhAv, len, msg.subarray(IONIC_WIRE_HEADER_SIZE, IONIC_WIRE_HEADER_SIZE + GRH_SIZE));
    if (len > 0) {
      this.#one[0] = msg.subarray(IONIC_WIRE_HEADER_SIZE + pre);
      copySlices(this.#one, 0, this.#src, 0, len);
    }
    this.#src.length = 0;
    const r = this.#mesh.send(
      node,
      MsgType.IONIC,
      msg.subarray(0, IONIC_WIRE_HEADER_SIZE),
      msg.subarray(IONIC_WIRE_HEADER_SIZE),
      { srcQpn: qp.id, dstQpn: h.dstQp, tag: qp.handle, onDone: () => meshBufferPool.give(msg) },
    );
    if (r !== 'queued') meshBufferPool.give(msg);
    return r;
  }

  /**
   * A large payload goes out of guest memory itself: the socket writes the
   * views (#src), lent until the kernel has them (lent-views.ts keeps their
   * mappings through a DMA_UNMAP meanwhile). Safe for RC/UC only: their
   * completion waits for the peer's answer, so the guest cannot reuse the
   * buffer before it was sent; a datagram completes at once and is copied.
   */
  #sendLent(node: number, qp: QpRecord, h: WireHeader): SendResult {
    const hdr = Buffer.allocUnsafe(IONIC_WIRE_HEADER_SIZE);
    writeWireHeader(hdr, h);
    const views = this.#src.slice();
    this.#src.length = 0;
    lendViews(views);
    const r = this.#mesh.send(node, MsgType.IONIC, hdr, views, {
      srcQpn: qp.id,
      dstQpn: h.dstQp,
      tag: qp.handle,
      onDone: () => returnViews(views),
    });
    if (r !== 'queued') returnViews(views);
    return r;
  }

  #gather(mem: GuestMemory, qp: QpRecord, w: SendWqe, buf: Buffer): number {
    const src = this.#src;
    src.length = 0;
    if (w.inline) {
      if (w.inlineLength > 0) src.push(buf.subarray(w.inlineOffset, w.inlineOffset + w.inlineLength));
      return KeyStatus.OK;
    }
    const st = this.#views.sgl(mem, qp, w.sges, w.sgeCount, w.sgeTotal, false, src);
    if (st !== KeyStatus.OK) src.length = 0;
    return st;
  }

  #counted(verb: SendVerb, len: number): void {
    const c = this.#dev.counters;
    if (verb === SendVerb.RDMA_WRITE || verb === SendVerb.RDMA_WRITE_IMM) c.inc(DeviceCounter.rdma_write_bytes, len);
    else {
      c.inc(DeviceCounter.send_msgs);
      c.inc(DeviceCounter.tx_bytes, len);
    }
  }

  /**
   * An answer (ACK, READ_RESP, ATOMIC_RESP) from `from`: complete its request.
   * Anything that does not match a request of ours (unknown id, another
   * node's, a QP since destroyed or flushed) is ignored.
   */
  answer(
    mem: GuestMemory | undefined,
    from: number,
    op: number,
    reqId: number,
    status: number,
    srcQp: number,
    payload: Buffer,
  ): void {
    // Only the peer we asked, answering for the QP we asked, completes a request.
    const req = this.#pending.peek(reqId);
    if (!req || req.node !== from || req.destQp !== srcQp) return;
    this.#pending.take(reqId);
    this.#readDone(req);
    if (req.entry.status !== 'pending' || req.qp.dp !== req.s) return;
    let st = status > 0xff ? IonicStatus.REMOTE_OPER : status;
    if (st === IonicStatus.OK && mem) {
      if (req.verb === SendVerb.RDMA_READ)
        st =
          op === IonicWireOp.READ_RESP && payload.length === req.readLen
            ? this.#scatter(mem, req, payload)
            : IonicStatus.BAD_RESP;
      else if (req.verb === SendVerb.ATOMIC_CS || req.verb === SendVerb.ATOMIC_FA) {
        st =
          op === IonicWireOp.ATOMIC_RESP && payload.length === ATOMIC_SIZE
            ? this.#scatter(mem, req, payload)
            : IonicStatus.BAD_RESP;
        if (st === IonicStatus.OK) this.#dev.counters.inc(DeviceCounter.atomic_ops);
      } else if (op !== IonicWireOp.ACK) st = IonicStatus.BAD_RESP;
      if (st === IonicStatus.OK && req.verb === SendVerb.RDMA_READ)
        this.#dev.counters.inc(DeviceCounter.rdma_read_bytes, req.readLen);
    }
    // UC has no ACK/NAK: what the responder refused still completes the requester well.
    if (req.qp.type === QpType.UC && ucSilent(st)) st = IonicStatus.OK;
    req.entry.status = st;
    this.#answered(req.qp, req.s);
  }

  /** READ data or an atomic's old value into the request's local buffers. */
  #scatter(mem: GuestMemory, req: MeshRequest, payload: Buffer): number {
    const dst = this.#src;
    dst.length = 0;
    const sges = req.sges!;
    if (this.#views.sgl(mem, req.qp, sges, sges.length, payload.length, true, dst) !== KeyStatus.OK) {
      dst.length = 0;
      return IonicStatus.LOCAL_PROT;
    }
    this.#one[0] = payload;
    copySlices(dst, 0, this.#one, 0, payload.length);
    dst.length = 0;
    return IonicStatus.OK;
  }

  #readDone(req: MeshRequest): void {
    if (req.readLen === 0) return;
    const left = (this.#readBytes.get(req.node) ?? 0) - req.readLen;
    if (left > 0) this.#readBytes.set(req.node, left);
    else this.#readBytes.delete(req.node);
    // READs that waited for the budget look again.
    this.#sched.wake(WaitKind.PEER, req.node);
  }

  /** No answer within the lost-peer deadline: RETRY_EXCEEDED; what is still queued for it is taken back. */
  #expired(req: MeshRequest): void {
    this.#readDone(req);
    if (req.entry.status !== 'pending' || req.qp.dp !== req.s) return;
    this.#mesh.takeBack(req.qp.handle);
    req.entry.status = IonicStatus.RETRY_EXCEEDED;
    this.#answered(req.qp, req.s);
  }

  /** The QP went to ERR or RESET: requests still queued are taken back, answers still due forgotten. */
  flushed(qp: QpRecord, s: QpDp): void {
    this.#mesh.takeBack(qp.handle);
    this.#pending.dropWhere((r) => {
      if (r.s !== s) return false;
      this.#readDone(r);
      return true;
    });
  }

  /** The QP is gone: its queued requests still go out (a consumer may count on an unsignaled WRITE); answers are ignored. */
  destroyed(qp: QpRecord): void {
    this.#pending.dropWhere((r) => {
      if (r.qp !== qp) return false;
      this.#readDone(r);
      return true;
    });
  }

  reset(): void {
    this.#pending.dispose();
    this.#readBytes.clear();
  }
}

function copySges(sges: readonly Sge[], n: number): Sge[] {
  const out: Sge[] = [];
  for (let i = 0; i < n; i++) out.push({ va: sges[i]!.va, len: sges[i]!.len, lkey: sges[i]!.lkey });
  return out;
}

/** Responder-side outcomes a UC requester never learns of (there is no ACK/NAK). */
function ucSilent(status: number): boolean {
  return (
    status === IonicStatus.REMOTE_ACC ||
    status === IonicStatus.REMOTE_INV_REQ ||
    status === IonicStatus.REMOTE_OPER ||
    status === IonicStatus.RETRY_EXCEEDED ||
    status === IonicStatus.RNR_RETRY_EXCEEDED
  );
}
