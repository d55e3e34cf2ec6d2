// Completions of the loopback data path (ionic RDMA R4.7). One CQE per WQE
// (always safe), wqe_id echoed verbatim:
//   remote WQEs (RC/UC, not a local op)  SEND_MSN CQE, msn = sequence + 1
//   everything else (UD/GSI, local ops)  SEND_NPG CQE with the wqe_id
//   a consumed receive                   RECV CQE on the receiver's CQ
// Moving a QP to ERR posts the flush hints (an NPG and a RECV with
// WQE_FLUSHED) for each non-empty queue. The CQE is one reused record handed
// to its CQ (datapath/cq-ring.ts postDataCqe): the CQ encodes it and sets its color.

import type { AddressVector } from '../address';
import { DeviceCounter, QpCounter } from '../counters';
import type { DataPathDevice } from '../hooks';
import { RDMA_MSN_MASK } from '../limits';
import type { QpRecord, QueueRing } from '../resources';
import { CqeType, IonicStatus, newCqeRecord, RecvOp } from '../datapath/cqe';
import { postDataCqe } from '../datapath/cq-ring';
import type { QpDp } from './qp-state';

export class Completions {
  readonly #dev: DataPathDevice;
  readonly #cqe = newCqeRecord();

  constructor(dev: DataPathDevice) {
    this.#dev = dev;
  }

  /** Hand the CQE in #cqe to CQ `cqId` (the CQ sets its color and writes it). */
  #post(cqId: number, solicited: boolean): void {
    postDataCqe(this.#dev, cqId, this.#cqe, solicited);
  }

  /** The requester's completion of a send-queue WQE: SEND_MSN for a remote WQE, else SEND_NPG with its wqe_id. */
  send(qp: QpRecord, s: QpDp, remote: boolean, idLo: number, idHi: number, status: number): void {
    const c = this.#cqe;
    c.qid = qp.id;
    c.error = status !== IonicStatus.OK;
    c.statusLength = status;
    c.srcMac = null;
    if (remote) {
      s.msn = (s.msn + 1) >>> 0;
      c.type = CqeType.SEND_MSN;
      c.msn = s.msn & RDMA_MSN_MASK;
      c.wqeIdLo = 0;
      c.wqeIdHi = 0;
    } else {
      c.type = CqeType.SEND_NPG;
      c.msn = 0;
      c.wqeIdLo = idLo;
      c.wqeIdHi = idHi;
    }
    this.#post(qp.sqCqId, c.error);
    qp.stats.inc(QpCounter.cqes_posted);
  }

  /**
   * The responder's RECV completion on `dest`: the byte count (or, with an
   * error status, the status), who sent it, and for datagrams what the
   * address vector says (IPv4, source MAC, VLAN).
   */
  recv(
    dest: QpRecord,
    srcQpn: number,
    status: number,
    total: number,
    idLo: number,
    idHi: number,
    op: RecvOp,
    imm: number,
    solicited: boolean,
    av: AddressVector | null,
  ): void {
    const c = this.#cqe;
    c.type = CqeType.RECV;
    c.qid = dest.id;
    c.error = status !== IonicStatus.OK;
    c.statusLength = c.error ? status : total;
    c.wqeIdLo = idLo;
    c.wqeIdHi = idHi;
    c.srcQpn = srcQpn;
    c.recvOp = op;
    c.immDataRkey = imm;
    c.ipv4 = av ? av.ipVersion === 4 : false;
    c.vlan = av ? av.vlanTci >= 0 : false;
    c.vlanTag = av && av.vlanTci >= 0 ? av.vlanTci : 0;
    c.srcMac = av ? av.smac : null;
    this.#post(dest.rqCqId, solicited || c.error);
    dest.stats.inc(QpCounter.cqes_posted);
  }

  /** A RECV completion in error on `qp`'s receive CQ that carries nothing but its status and wqe_id. */
  recvError(qp: QpRecord, status: number, idLo: number, idHi: number): void {
    const c = this.#cqe;
    c.type = CqeType.RECV;
    c.qid = qp.id;
    c.error = true;
    c.statusLength = status;
    c.wqeIdLo = idLo;
    c.wqeIdHi = idHi;
    c.srcQpn = 0;
    c.recvOp = RecvOp.SEND;
    c.immDataRkey = 0;
    c.ipv4 = false;
    c.vlan = false;
    c.vlanTag = 0;
    c.srcMac = null;
    this.#post(qp.rqCqId, true);
  }

  /** A QP went to ERR: one flush hint per non-empty queue (the host completes the rest itself), rings emptied. */
  flush(qp: QpRecord): void {
    if (qp.sq.ci !== qp.sq.pi) {
      const c = this.#cqe;
      c.type = CqeType.SEND_NPG;
      c.qid = qp.id;
      c.error = true;
      c.statusLength = IonicStatus.WQE_FLUSHED;
      c.srcMac = null;
      c.wqeIdLo = 0;
      c.wqeIdHi = 0;
      c.msn = 0;
      this.#post(qp.sqCqId, true);
      this.#flushed(qp, qp.sq);
      qp.sq.ci = qp.sq.pi;
    }
    if (qp.rq && qp.rq.ci !== qp.rq.pi) {
      this.recvError(qp, IonicStatus.WQE_FLUSHED, 0, 0);
      this.#flushed(qp, qp.rq);
      qp.rq.ci = qp.rq.pi;
    }
  }

  /** Count the WQEs a flush hint stands for. */
  #flushed(qp: QpRecord, ring: QueueRing): void {
    const n = (ring.pi - ring.ci) & ((1 << ring.depthLog2) - 1);
    this.#dev.counters.inc(DeviceCounter.flushed_wqes, n);
    qp.stats.inc(QpCounter.flushed_wqes, n);
    qp.stats.inc(QpCounter.cqes_posted);
  }

  /** Error counters for a requester completion. */
  count(qp: QpRecord, status: number): void {
    if (status === IonicStatus.OK) return;
    const c = this.#dev.counters;
    qp.stats.inc(QpCounter.errors);
    switch (status) {
      case IonicStatus.LOCAL_LEN:
        c.inc(DeviceCounter.local_length_errors);
        break;
      case IonicStatus.LOCAL_PROT:
        c.inc(DeviceCounter.local_prot_errors);
        break;
      case IonicStatus.LOCAL_QP_OPER:
        c.inc(DeviceCounter.local_qp_errors);
        break;
      case IonicStatus.REMOTE_ACC:
        c.inc(DeviceCounter.remote_access_errors);
        break;
      case IonicStatus.REMOTE_INV_REQ:
        c.inc(DeviceCounter.remote_inv_req_errors);
        break;
      case IonicStatus.RNR_RETRY_EXCEEDED:
        c.inc(DeviceCounter.rnr_retry_exceeded);
        break;
      case IonicStatus.RETRY_EXCEEDED:
        c.inc(DeviceCounter.retry_exceeded);
        break;
      case IonicStatus.MEM_MGMT_OPER:
        c.inc(DeviceCounter.mem_mgmt_errors);
        break;
      default:
        break;
    }
  }
}
