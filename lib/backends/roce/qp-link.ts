// One guest QP as the RoCE transport sees it: the adapter between the
// device's rings, keys, CQs and EQ (lib/rdma) and the transport's interfaces
// (lib/roce/transport/types.ts). The WQE executor still reads the SQ and
// hands over each WQE whose peer is on the wire (post()); its completion
// comes back from the transport in WQE order and goes out through the
// executor's in-order completion list. Receives are read from the RQ (or SRQ)
// ring when a request needs one, and completed on the receive CQ here.
//
// The ionic driver flushes a QP's remaining WQEs itself once it sees the QP
// in error, so the transport's flush completions are not posted.

import { DeviceCounter, QpCounter } from '../../rdma/counters';
import type { DataPathEngine } from '../../rdma/executor';
import type { WqeExecutor } from '../../rdma/executor/executor';
import { type GuestViews, slotViews } from '../../rdma/executor/guest-views';
import type { Completions } from '../../rdma/executor/completions';
import { type InflightWqe, type QpDp, qpStateIfAny } from '../../rdma/executor/qp-state';
import { GSI_QPN, RDMA_QPN_MASK } from '../../rdma/limits';
import { KeyStatus, type QpRecord } from '../../rdma/resources';
import { MrFlag, QpFlag, QpState, QpType } from '../../rdma/types';
import { IonicStatus, RecvOp } from '../../rdma/datapath/cqe';
import { cqRoom } from '../../rdma/datapath/cq-ring';
import { decodeRecvWqe, newRecvWqe, type SendWqe as DeviceSendWqe } from '../../rdma/datapath/wqe-decode';
import { ATOMIC_SIZE, SendVerb } from '../../rdma/datapath/wqe-layout';
import type { AddressVector } from '../../rdma/address';
import { RocePath } from '../../roce/frame';
import type { RoceQp } from '../../roce/transport/qp';
import {
  ACCESS_LOCAL_WRITE,
  ACCESS_REMOTE_ATOMIC,
  ACCESS_REMOTE_READ,
  ACCESS_REMOTE_WRITE,
  type Completion,
  type CompletionSink,
  type EventSink,
  EVENT_COMM_EST,
  type PacketSink,
  QPS_ERR,
  QPS_INIT,
  QPS_RESET,
  QPS_RTR,
  QPS_RTS,
  QPT_GSI,
  QPT_RC,
  QPT_UC,
  QPT_UD,
  type RecvWqe,
  RoceQpConfig,
  type RoceMemory,
  type SendWqe,
  type Sge,
  WC_BAD_RESP_ERR,
  WC_LOC_LEN_ERR,
  WC_LOC_PROT_ERR,
  WC_LOC_QP_OP_ERR,
  WC_RECV_RDMA_WITH_IMM,
  WC_REM_ACCESS_ERR,
  WC_REM_INV_REQ_ERR,
  WC_REM_OP_ERR,
  WC_RETRY_EXC_ERR,
  WC_RNR_RETRY_EXC_ERR,
  WC_SUCCESS,
  WC_WR_FLUSH_ERR,
  WR_ATOMIC_CMP_AND_SWP,
  WR_ATOMIC_FETCH_AND_ADD,
  WR_RDMA_READ,
  WR_RDMA_WRITE,
  WR_RDMA_WRITE_WITH_IMM,
  WR_SEND,
  WR_SEND_WITH_IMM,
  WR_SEND_WITH_INV,
} from '../../roce/transport/types';
import { pathFromAv } from './path';

/** What every QP link shares: the device, the executor's pieces, the wire, and the address of the frame being received. */
export interface LinkHost {
  readonly dev: DataPathEngine;
  readonly executor: WqeExecutor;
  readonly views: GuestViews;
  readonly cqes: Completions;
  readonly wire: PacketSink;
  /** The source MAC, VLAN and IP version of the frame the port is handling now (a UD receive's CQE reports them). */
  readonly rxAddress: { ipVersion: number; smac: Buffer; vlanTci: number };
  /** The path of address handle `ahId`, or null. */
  ahPath(ahId: number, localQpn: number, remoteQpn: number): RocePath | null;
}

/** ib_wr_opcode by SendVerb (-1: not a wire operation). */
const WR_OF_VERB: readonly number[] = [
  WR_SEND,
  WR_SEND_WITH_INV,
  WR_SEND_WITH_IMM,
  WR_RDMA_READ,
  WR_RDMA_WRITE,
  WR_RDMA_WRITE_WITH_IMM,
  WR_ATOMIC_CMP_AND_SWP,
  WR_ATOMIC_FETCH_AND_ADD,
  -1,
  -1,
  -1,
];

/** The CQE status of a transport completion status. */
export function ionicStatusOf(wc: number): number {
  switch (wc) {
    case WC_SUCCESS:
      return IonicStatus.OK;
    case WC_LOC_LEN_ERR:
      return IonicStatus.LOCAL_LEN;
    case WC_LOC_QP_OP_ERR:
      return IonicStatus.LOCAL_QP_OPER;
    case WC_LOC_PROT_ERR:
      return IonicStatus.LOCAL_PROT;
    case WC_WR_FLUSH_ERR:
      return IonicStatus.WQE_FLUSHED;
    case WC_BAD_RESP_ERR:
      return IonicStatus.BAD_RESP;
    case WC_REM_INV_REQ_ERR:
      return IonicStatus.REMOTE_INV_REQ;
    case WC_REM_ACCESS_ERR:
      return IonicStatus.REMOTE_ACC;
    case WC_REM_OP_ERR:
      return IonicStatus.REMOTE_OPER;
    case WC_RETRY_EXC_ERR:
      return IonicStatus.RETRY_EXCEEDED;
    case WC_RNR_RETRY_EXC_ERR:
      return IonicStatus.RNR_RETRY_EXCEEDED;
    default:
      return IonicStatus.LOCAL_QP_OPER;
  }
}

/** The transport's QP type of a device QP. */
function roceQpType(qp: QpRecord): number {
  if (qp.id === GSI_QPN) return QPT_GSI;
  return qp.type === QpType.RC ? QPT_RC : qp.type === QpType.UC ? QPT_UC : QPT_UD;
}

/** A send WQE handed to the transport and the executor's entry its completion fills. */
interface SentWqe {
  readonly wrId: number;
  readonly entry: InflightWqe;
  readonly verb: number;
  readonly bytes: number;
}

/** A receive WQE handed to the transport: its wqe_id for the CQE. */
interface TakenRecv {
  readonly wrId: number;
  readonly idLo: number;
  readonly idHi: number;
}

/** Sends a QP may have handed over and not completed: the SQ is never deeper. */
const MAX_SENT = 1 << 16;

export class RoceQpLink implements CompletionSink, EventSink, RoceMemory {
  readonly cfg: RoceQpConfig;
  /** Set by the data path once the port made the transport QP. */
  roce: RoceQp | null = null;
  readonly #host: LinkHost;
  readonly #sendQueue: SendWqe[] = [];
  #sendHead = 0;
  readonly #sent: SentWqe[] = [];
  readonly #recvs: TakenRecv[] = [];
  #nextWrId = 1;
  readonly #views: Buffer[] = [];
  readonly #rqSlot = slotViews();
  readonly #recvWqe = newRecvWqe();

  constructor(
    readonly qp: QpRecord,
    host: LinkHost,
  ) {
    this.#host = host;
    this.cfg = new RoceQpConfig(new RocePath());
    this.cfg.qpn = qp.id;
    this.cfg.type = roceQpType(qp);
    this.sync();
  }

  /** What the transport talks to for this QP. */
  get deps(): {
    memory: RoceMemory;
    queues: { nextSend(): SendWqe | null; nextRecv(): RecvWqe | null };
    completions: CompletionSink;
    events: EventSink;
    wire: PacketSink;
  } {
    return {
      memory: this,
      queues: { nextSend: () => this.#nextSend(), nextRecv: () => this.#nextRecv() },
      completions: this,
      events: this,
      wire: this.#host.wire,
    };
  }

  /** Copy the QP's attributes (as MODIFY_QP left them) into the transport's config. */
  sync(): void {
    const a = this.qp.attrs;
    const c = this.cfg;
    c.destQpn = a.destQpn & RDMA_QPN_MASK;
    if (a.av && (c.type === QPT_RC || c.type === QPT_UC)) pathFromAv(a.av, c.qpn, c.destQpn, c.path);
    // Datagrams carry at most one MTU; the link's MTU, not a path's, bounds them.
    c.pmtu = c.type === QPT_UD || c.type === QPT_GSI ? 4096 : 1 << Math.min(12, Math.max(8, a.pmtu));
    c.sqPsn = a.sqPsn & 0xffffff;
    c.rqPsn = a.rqPsn & 0xffffff;
    c.timeout = a.timeout & 0x1f;
    c.retryCnt = a.retryCnt & 7;
    c.rnrRetry = a.rnrRetry & 7;
    c.minRnrTimer = a.rnrTimer & 0x1f;
    c.maxRdAtomic = Math.max(1, 2 ** Math.min(a.rrqDepth, 8) - 1);
    c.maxDestRdAtomic = Math.max(1, 2 ** Math.min(a.rsqDepth, 8) - 1);
    c.qkey = (a.qkey ?? 0) >>> 0;
    c.accessFlags =
      (a.access & QpFlag.REMOTE_WRITE ? ACCESS_REMOTE_WRITE : 0) |
      (a.access & QpFlag.REMOTE_READ ? ACCESS_REMOTE_READ : 0) |
      (a.access & QpFlag.REMOTE_ATOMIC ? ACCESS_REMOTE_ATOMIC : 0);
  }

  /** Walk the transport QP to the device QP's state (RESET, INIT, RTR, RTS, SQD; ERR). */
  follow(): void {
    const roce = this.roce;
    if (!roce) return;
    const want = this.qp.state;
    if (want === QpState.ERR || want === QpState.SQE) {
      if (want === QpState.ERR) roce.toError(0);
      return;
    }
    if (want === QpState.RESET) {
      this.#forget();
      roce.modify(QPS_RESET);
      return;
    }
    // A QP met late (its AV pointed off the VM only now) climbs the states it missed, in order.
    if (roce.state === QPS_RESET && want >= QpState.INIT) roce.modify(QPS_INIT);
    if (roce.state === QPS_INIT && want >= QpState.RTR) roce.modify(QPS_RTR);
    if (roce.state === QPS_RTR && want >= QpState.RTS) roce.modify(QPS_RTS);
    else if (roce.state !== want) roce.modify(want);
  }

  /**
   * The executor hands over WQE `w` (its slot `buf`): a status to complete
   * it with now, or 'pending' (its entry waits in `s.inflight`).
   */
  post(w: DeviceSendWqe, buf: Buffer, s: QpDp, datagram: boolean): number | 'pending' {
    const roce = this.roce;
    if (!roce) return IonicStatus.LOCAL_QP_OPER;
    const opcode = WR_OF_VERB[w.verb] ?? -1;
    if (opcode < 0) return IonicStatus.LOCAL_QP_OPER;
    if (this.#sent.length >= MAX_SENT) return IonicStatus.LOCAL_QP_OPER;
    let ud: SendWqe['ud'] = null;
    if (datagram) {
      const path = this.#host.ahPath(w.ud.ahId, this.qp.id, w.ud.destQpn & RDMA_QPN_MASK);
      if (!path) return IonicStatus.LOCAL_QP_OPER;
      ud = { path, destQpn: w.ud.destQpn & RDMA_QPN_MASK, qkey: w.ud.destQkey >>> 0 };
    }
    const atomic = w.verb === SendVerb.ATOMIC_CS || w.verb === SendVerb.ATOMIC_FA;
    let sgl: Sge[];
    let length: number;
    let inline: Buffer | null = null;
    if (atomic) {
      sgl = [{ addr: w.atomic.localVa, length: w.atomic.localLen, lkey: w.atomic.localLkey }];
      length = ATOMIC_SIZE;
      if (w.atomic.localLen !== ATOMIC_SIZE) return IonicStatus.LOCAL_LEN;
    } else if (w.inline) {
      sgl = [];
      // The slot is reused for the next WQE: the inline bytes are kept with this one.
      inline = Buffer.from(buf.subarray(w.inlineOffset, w.inlineOffset + w.inlineLength));
      length = w.inlineLength;
    } else {
      sgl = [];
      for (let i = 0; i < w.sgeCount; i++) {
        const e = w.sges[i]!;
        sgl.push({ addr: e.va, length: e.len, lkey: e.lkey });
      }
      length = w.sgeTotal;
    }
    const wrId = this.#nextWrId;
    this.#nextWrId = this.#nextWrId >= 0x7fffffff ? 1 : this.#nextWrId + 1;
    const wqe: SendWqe = {
      wrId,
      opcode,
      sgl,
      inline,
      length,
      signaled: true,
      solicited: w.solicited,
      remoteAddr: w.rdma.remoteVa,
      rkey: w.rdma.rkey >>> 0,
      imm: w.verb === SendVerb.SEND_INV ? w.immDataKey >>> 0 : w.immDataKey | 0,
      swapHi: w.atomic.swapAddHi >>> 0,
      swapLo: w.atomic.swapAddLo >>> 0,
      cmpHi: w.atomic.compareHi >>> 0,
      cmpLo: w.atomic.compareLo >>> 0,
      ud,
    };
    const entry: InflightWqe = { status: 'pending', remote: !datagram, wqeIdLo: w.wqeIdLo, wqeIdHi: w.wqeIdHi };
    s.inflight.push(entry);
    this.#sent.push({ wrId, entry, verb: w.verb, bytes: length });
    this.#sendQueue.push(wqe);
    roce.kick();
    return 'pending';
  }

  #nextSend(): SendWqe | null {
    if (this.#sendHead >= this.#sendQueue.length) return null;
    const w = this.#sendQueue[this.#sendHead]!;
    this.#sendQueue[this.#sendHead++] = undefined as unknown as SendWqe;
    if (this.#sendHead === this.#sendQueue.length) {
      this.#sendQueue.length = 0;
      this.#sendHead = 0;
    }
    return w;
  }

  /** The next receive WQE of the QP's RQ (or SRQ), consumed; null when there is none (the transport answers RNR). */
  #nextRecv(): RecvWqe | null {
    const qp = this.qp;
    if (this.roce?.state === QPS_ERR || qp.state === QpState.ERR || qp.state === QpState.RESET) return null;
    const mem = this.#host.dev.memory();
    if (!mem) return null;
    const ring = this.#host.executor.verbs.recvRing(qp);
    if (!ring || ring.ci === ring.pi) return null;
    // No room for its completion (as far as the host has reported): not taken, so no CQE is lost;
    // an RC request is answered RNR and comes back, a datagram is dropped (counted as no_recv).
    if (cqRoom(this.#host.dev.rm, qp.rqCqId) === 0) {
      this.#host.dev.counters.inc(DeviceCounter.cq_full_waits);
      return null;
    }
    const buf = this.#host.views.slot(mem, ring, ring.ci, this.#rqSlot);
    const d = buf ? decodeRecvWqe(buf, this.#recvWqe) : null;
    ring.ci = (ring.ci + 1) & ((1 << ring.depthLog2) - 1);
    if (!d || !d.ok) {
      // Unreadable: it completes in error, and the request finds no receive (the QP fails when it is RC).
      this.#host.cqes.recvError(qp, IonicStatus.LOCAL_QP_OPER, 0, 0);
      return null;
    }
    const sgl: Sge[] = [];
    for (let i = 0; i < d.sgeCount; i++) {
      const e = d.sges[i]!;
      sgl.push({ addr: e.va, length: e.len, lkey: e.lkey });
    }
    const wrId = this.#nextWrId;
    this.#nextWrId = this.#nextWrId >= 0x7fffffff ? 1 : this.#nextWrId + 1;
    if (this.#recvs.length >= MAX_SENT) this.#recvs.shift();
    this.#recvs.push({ wrId, idLo: d.wqeIdLo, idHi: d.wqeIdHi });
    return { wrId, sgl, length: d.sgeTotal };
  }

  // ---- CompletionSink ----------------------------------------------------------------------

  sendCompleted(c: Completion): void {
    const sent = this.#sent;
    let i = 0;
    while (i < sent.length && sent[i]!.wrId !== c.wrId) i++;
    if (i === sent.length) return; // forgotten (flushed, reset)
    const e = sent[i]!;
    sent.splice(0, i + 1);
    // The driver flushes what is left of a QP in error on its own.
    if (c.status === WC_WR_FLUSH_ERR) return;
    const st = ionicStatusOf(c.status);
    e.entry.status = st;
    if (st === IonicStatus.OK) this.#countSent(e);
    else this.#logFailure(`send WQE failed (transport status ${c.status})`);
    const s = qpStateIfAny(this.qp);
    if (s) this.#host.executor.release(this.qp, s);
  }

  #countSent(e: SentWqe): void {
    const dc = this.#host.dev.counters;
    if (e.verb === SendVerb.RDMA_WRITE || e.verb === SendVerb.RDMA_WRITE_IMM) {
      dc.inc(DeviceCounter.rdma_write_bytes, e.bytes);
      this.qp.stats.inc(QpCounter.bytes_rdma_write, e.bytes);
    } else if (e.verb === SendVerb.RDMA_READ) dc.inc(DeviceCounter.rdma_read_bytes, e.bytes);
    else if (e.verb === SendVerb.SEND || e.verb === SendVerb.SEND_IMM || e.verb === SendVerb.SEND_INV) {
      dc.inc(DeviceCounter.send_msgs);
      dc.inc(DeviceCounter.tx_bytes, e.bytes);
      this.qp.stats.inc(QpCounter.bytes_sent, e.bytes);
    }
  }

  recvCompleted(c: Completion): void {
    const recvs = this.#recvs;
    let i = 0;
    while (i < recvs.length && recvs[i]!.wrId !== c.wrId) i++;
    if (i === recvs.length) return;
    const r = recvs[i]!;
    recvs.splice(0, i + 1);
    if (c.status === WC_WR_FLUSH_ERR) return;
    const qp = this.qp;
    const st = ionicStatusOf(c.status);
    const op =
      c.opcode === WC_RECV_RDMA_WITH_IMM
        ? RecvOp.RDMA_WRITE_IMM
        : c.hasInv
          ? RecvOp.SEND_INV
          : c.hasImm
            ? RecvOp.SEND_IMM
            : RecvOp.SEND;
    const dev = this.#host.dev;
    if (c.hasInv && st === IonicStatus.OK && dev.rm.invalidate(c.invRkey) === KeyStatus.OK)
      dev.counters.inc(DeviceCounter.remote_invalidates);
    const datagram = this.cfg.type === QPT_UD || this.cfg.type === QPT_GSI;
    const av = datagram ? (this.#host.rxAddress as unknown as AddressVector) : null;
    const imm = c.hasInv ? c.invRkey : c.hasImm ? c.imm : 0;
    this.#host.cqes.recv(
      qp,
      datagram ? c.srcQp : qp.attrs.destQpn,
      st,
      c.byteLen,
      r.idLo,
      r.idHi,
      op,
      imm,
      c.solicited,
      av,
    );
    dev.counters.inc(DeviceCounter.rx_wqes);
    if (st === IonicStatus.OK) {
      dev.counters.inc(DeviceCounter.recv_msgs);
      dev.counters.inc(DeviceCounter.rx_bytes, c.byteLen);
      qp.stats.inc(QpCounter.bytes_received, c.byteLen);
    }
  }

  // ---- EventSink ---------------------------------------------------------------------------

  qpEvent(_qpn: number, event: number): void {
    const qp = this.qp;
    const dev = this.#host.dev;
    if (dev.rm.qps.get(qp.id) !== qp) return;
    // The transport numbers its events as the ionic EQE codes.
    if (event === EVENT_COMM_EST) {
      dev.qpEvent(qp.id, event);
      return;
    }
    // The transport failed the QP as responder: the device QP goes to ERR too (flush hints), then the event.
    this.#logFailure(`failed as responder (event ${event})`);
    this.#host.executor.deviceError(qp);
    dev.qpEvent(qp.id, event);
  }

  /** Once per failure (a QP fails once, then is flushed): the transport's state, so the log says why. */
  #logFailure(what: string): void {
    this.#host.dev.log.info(
      `rocm-ernic: roce: QP ${this.qp.id} ${what}; ${this.roce?.describe() ?? 'no transport QP'}`,
    );
  }

  // ---- RoceMemory --------------------------------------------------------------------------

  /** Views of (key, addr, len) as this QP may reach them; false when the key, range or rights refuse. */
  #resolve(key: number, addr: number, len: number, remote: boolean, access: number, write: boolean): boolean {
    const qp = this.qp;
    const mem = this.#host.dev.memory();
    const v = this.#views;
    v.length = 0;
    if (!mem) return false;
    if (!Number.isSafeInteger(addr) || addr < 0 || !Number.isSafeInteger(len) || len < 0) return false;
    let st: number;
    if (remote) {
      // Key 0 from the wire is refused: locally it means bus addresses, all of guest memory.
      if (key === 0) return false;
      const qpBit =
        access & ACCESS_REMOTE_ATOMIC
          ? QpFlag.REMOTE_ATOMIC
          : access & ACCESS_REMOTE_WRITE
            ? QpFlag.REMOTE_WRITE
            : QpFlag.REMOTE_READ;
      if (!(qp.attrs.access & qpBit)) return false;
      const need =
        (access & ACCESS_REMOTE_WRITE ? MrFlag.REMOTE_WRITE : 0) |
        (access & ACCESS_REMOTE_READ ? MrFlag.REMOTE_READ : 0) |
        (access & ACCESS_REMOTE_ATOMIC ? MrFlag.REMOTE_ATOMIC : 0);
      st = this.#host.views.views(mem, key, addr, len, need, qp.remotePrivileged, qp.pdId, write, v);
    } else {
      const need = access & ACCESS_LOCAL_WRITE ? MrFlag.LOCAL_WRITE : 0;
      st = this.#host.views.views(mem, key, addr, len, need, qp.privileged, qp.pdId, write, v);
    }
    return st === KeyStatus.OK;
  }

  read(key: number, addr: number, len: number, remote: boolean, access: number, dst: Buffer, dstOff: number): boolean {
    if (len === 0) return true;
    if (dstOff < 0 || dstOff + len > dst.length) return false;
    if (!this.#resolve(key, addr, len, remote, access, false)) return false;
    let at = dstOff;
    for (const b of this.#views) at += b.copy(dst, at);
    this.#views.length = 0;
    return at === dstOff + len;
  }

  write(key: number, addr: number, len: number, remote: boolean, access: number, src: Buffer, srcOff: number): boolean {
    if (len === 0) return true;
    if (srcOff < 0 || srcOff + len > src.length) return false;
    if (!this.#resolve(key, addr, len, remote, access, true)) return false;
    let at = srcOff;
    for (const b of this.#views) at += src.copy(b, 0, at, at + b.length);
    this.#views.length = 0;
    return at === srcOff + len;
  }

  check(key: number, addr: number, len: number, remote: boolean, access: number): boolean {
    if (len === 0) return true;
    const ok = this.#resolve(key, addr, len, remote, access, false);
    this.#views.length = 0;
    return ok;
  }

  // ---- teardown ----------------------------------------------------------------------------

  /** The executor forgot this QP's outstanding completions (ERR or RESET): so do we; the transport follows to ERR. */
  flushed(): void {
    this.#forget();
    if (this.roce && this.qp.state === QpState.ERR) this.roce.toError(0);
  }

  #forget(): void {
    this.#sent.length = 0;
    this.#sendQueue.length = 0;
    this.#sendHead = 0;
    this.#recvs.length = 0;
  }
}
