// The loopback data path's own per-QP state (kept in QpRecord.dp, which the
// resource manager never looks inside), and the vocabulary its modules share.

import type { QpRecord } from '../resources';
import type { PageListLoader, PageTable } from '../page-table';

/** What a waiting QP waits for; the waiter set it sits in is keyed by that. */
export const enum WaitKind {
  NONE = 0,
  /** A receive on the destination QP (an RNR NAK); key: the destination QP id. */
  RNR = 1,
  /** Room on a CQ; key: the CQ id. */
  CQ = 2,
  /** Room toward a mesh peer (send queue or READ reply budget); key: the node id. */
  PEER = 3,
}

export interface QpDp {
  handle: number;
  /** Label of this QP's visits in contained-bug reports (built once). */
  readonly label: string;
  /** Remote WQEs completed (the MSN counter). */
  msn: number;
  /** On the ready queue (or being run). */
  scheduled: boolean;
  /** Waiting for a receive WQE on the destination, or for CQ room (then in one of the waiter sets). */
  waiting: boolean;
  /** What it waits for, and the key of its waiter set. */
  waitKind: WaitKind;
  waitKey: number;
  /** RNR retries left for the WQE at the head of the SQ (-1: it has not been NAKed). */
  rnrLeft: number;
  /** The pending RNR retry, if any. */
  rnrTimer: NodeJS.Timeout | null;
  /** A REG_MR at the head whose page list is being read over several turns. */
  regMr: PendingRegMr | null;
  /** Mesh: the node this connected QP sends to (-1: a QP of this device), set when its AV changes. */
  node: number;
  /**
   * Mesh: this QP's send WQEs sent to a peer and not yet answered, and the
   * completions queued behind them, in WQE order (completions leave in order).
   */
  inflight: InflightWqe[];
  /**
   * The SQ index whose WQE the send filter (hooks.sendFilter) let pass, and a
   * signature of its slot's bytes: it is not run through the filter again when
   * it waits and resumes, unless the guest rewrote the slot meanwhile.
   */
  filtered: number;
  filteredSig: number;
}

/** A send WQE whose completion waits for a peer's reply, or a finished one queued behind such a WQE. */
export interface InflightWqe {
  /** Pending (no answer yet) or the status to complete with. */
  status: number | 'pending';
  readonly remote: boolean;
  readonly wqeIdLo: number;
  readonly wqeIdHi: number;
}

/** A REG_MR WQE in progress: what it asked for, and its page list so far. */
export interface PendingRegMr {
  readonly generation: number;
  readonly loader: PageListLoader;
  readonly key: number;
  readonly newKey: number;
  readonly va: number;
  readonly length: number;
  readonly flags: number;
  readonly wqeIdLo: number;
  readonly wqeIdHi: number;
  /** The table, once read (kept while the WQE waits for CQ room). */
  table: PageTable | null;
}

/**
 * done: the head WQE completed; wait: it waits for an event (a receive, CQ
 * room, an RNR timer); stop: the QP stopped (error, no memory); yield: it is
 * part way through (a long page list) and continues on a later turn.
 */
export type StepResult = 'done' | 'wait' | 'stop' | 'yield';

/** The data path's state of `qp`, made fresh for a new QP (or a new QP holding a reused id). */
export function qpState(qp: QpRecord): QpDp {
  let s = qp.dp as QpDp | undefined;
  if (!s || s.handle !== qp.handle) {
    s = {
      handle: qp.handle,
      label: `RDMA data path (QP ${qp.id})`,
      msn: 0,
      scheduled: false,
      waiting: false,
      waitKind: WaitKind.NONE,
      waitKey: -1,
      rnrLeft: -1,
      rnrTimer: null,
      regMr: null,
      node: -1,
      inflight: [],
      filtered: -1,
      filteredSig: 0,
    };
    qp.dp = s;
  }
  return s;
}

/** The state of `qp` if the data path has seen it. */
export function qpStateIfAny(qp: QpRecord): QpDp | undefined {
  return qp.dp as QpDp | undefined;
}
