// The seams between the RDMA control path (the ionic RDMA engine: doorbells,
// admin queue, resource manager) and the data path (WQE execution, copies,
// CQEs), which plugs in later.
//
// The engine calls a DataPathHooks object for every event the data path must
// act on; every hook is optional and the default is to do nothing (SQ/RQ
// doorbells then only record the producer index). Hooks run on the main
// thread inside the doorbell or admin command that caused them; they must
// not throw (the engine catches and logs if one does, as a bug).
//
// The data path in turn reaches the device through DataPathDevice (the
// engine implements it): guest memory, the resource manager for QPs, CQs and
// key translation, and the events it raises (a QP's; a CQ's when armed).
// The CQ rings are the data path's own (datapath/cq-ring.ts): it posts its
// completions without going back up to the engine.

import type { SendWqe } from './datapath/wqe-decode';
import type { CqRecord, MrRecord, QpChanges, QpRecord, SrqRecord } from './resources';
import type { CqDevice } from './datapath/cq-ring';
import type { QpState } from './types';
import type { Logger } from '../log';

export interface DataPathHooks {
  /**
   * Asked before a MODIFY_QP is applied (after its fields were validated):
   * false refuses it with BAD_ATTR and nothing changes. The TCP mesh uses it
   * to refuse a connected QP whose destination GID no node owns.
   */
  modifyAllowed?(qp: QpRecord, changes: QpChanges): boolean;
  /** A send-queue doorbell moved qp.sq.pi: execute [qp.sq.ci, qp.sq.pi). */
  sqDoorbell?(qp: QpRecord): void;
  /** A receive-queue doorbell moved qp.rq.pi (receives only wait for SENDs). */
  rqDoorbell?(qp: QpRecord): void;
  /** An SRQ doorbell moved srq.ring.pi. */
  srqDoorbell?(srq: SrqRecord): void;
  /** The host reported its read position on a CQ (ring 0): room may have appeared. */
  cqConsumed?(cq: CqRecord): void;
  /**
   * MODIFY_QP applied `changes` (state included when it changed); `from` is
   * the state before. RESET has already zeroed the ring indices; ERR means
   * outstanding work must be flushed (ionic RDMA R4.7).
   */
  qpModified?(qp: QpRecord, from: QpState, changes: QpChanges): void;
  /** The QP is gone: stop all DMA to its rings before returning (the host frees them next). */
  qpDestroyed?(qp: QpRecord): void;
  cqDestroyed?(cq: CqRecord): void;
  mrDestroyed?(mr: MrRecord): void;
  srqDestroyed?(srq: SrqRecord): void;
  /** RDMA_RESET_LIF, device reset or disconnect: every object is gone. */
  reset?(): void;
  /**
   * The device counters are about to be read (hw_counters, the stats file,
   * /metrics): copy in the ones the data path keeps elsewhere (the RoCE
   * transport's). Off the hot path.
   */
  refreshCounters?(): void;
  /**
   * Runs on every send WQE that is not a local operation (LOCAL_INV, REG_MR,
   * BIND_MW), once, after the WQE's own memory checks (the P4 engine,
   * lib/p4/wqe.ts). A WQE whose own buffers fail their checks never reaches it.
   */
  sendFilter?: SendFilter;
}

/** SendFilter.filter: run the WQE as posted. */
export const SEND_FILTER_PASS = -1;
/** SendFilter.filter: the operation is lost, as on a wire (RC: RETRY_EXCEEDED; UC, UD: completes OK). */
export const SEND_FILTER_DROP = -2;

/** What a send filter sees of one WQE; one object, refilled per WQE (keep nothing past the call). */
export interface SendFilterInput {
  readonly qp: QpRecord;
  readonly wqe: SendWqe;
  readonly datagram: boolean;
  /** The destination QP when it is on this device (a connected QP's peer, or the QP a datagram names). */
  readonly dest: QpRecord | undefined;
  /** The destination is on another node (the mesh): its keys cannot be resolved here. */
  readonly remoteNode: boolean;
  /** The message's local bytes, already checked: views of the SGL, or of the inline bytes (SEND / WRITE only). */
  readonly src: readonly Buffer[];
  /**
   * Resolves `len` bytes at the WQE's remote address and rkey on `dest` for
   * writing, with the responder's checks (state, QP access, MR, bounds), into
   * `dst`; an IonicStatus. Refused (REMOTE_ACC) for rkey 0 and for a
   * destination on another node.
   */
  resolveRemoteWrite(len: number): number;
  /** The views resolveRemoteWrite filled. */
  readonly dst: readonly Buffer[];
  /** Count `len` bytes written to the destination as an RDMA WRITE's. */
  written(len: number): void;
}

export interface SendFilter {
  /** SEND_FILTER_PASS, SEND_FILTER_DROP, or the IonicStatus the WQE completes with (the filter executed it). Must not throw. */
  filter(input: SendFilterInput): number;
}

export interface DataPathDevice extends CqDevice {
  /** Where the data path reports its own bugs (contained as device errors, lib/guard.ts). */
  readonly log: Logger;
  /** Raise an asynchronous QP event (EQE type QP, ionic RDMA R4.8 codes: QpEventCode). */
  qpEvent(qpId: number, code: number): void;
}

/**
 * The asynchronous QP event codes a responder error raises (ionic RDMA R4.8;
 * the ionic driver reports them as IB_EVENT_QP_FATAL, IB_EVENT_QP_REQ_ERR
 * and IB_EVENT_QP_ACCESS_ERR).
 */
export const QpEventCode = {
  QP_ERR: 8,
  ERR_REQUEST: 9,
  ERR_ACCESS: 10,
} as const;
