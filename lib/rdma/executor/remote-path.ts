// The seam between the loopback data path and a path to other nodes (the TCP
// mesh, lib/rdma/datapath/mesh). The loopback path runs every QP's send queue;
// a WQE whose destination lives on another node is handed to the remote path,
// which sends it and completes it later, when the peer answers. Completions
// of one QP still leave in WQE order: a WQE that finishes while earlier ones
// wait for their peer queues its completion behind them (QpDp.inflight).

import type { GuestMemory } from '../../vfio-user/guest-memory';
import type { QpChanges, QpRecord } from '../resources';
import type { SendWqe } from '../datapath/wqe-decode';
import type { QpDp } from './qp-state';

/** What execute() answers: a status now, 'pending' (the completion comes with the peer's answer), or 'wait' (no room toward the peer). */
export type RemoteResult = number | 'pending' | 'wait';

export interface RemotePath {
  /** MODIFY_QP veto: false refuses a connected QP whose destination no node owns. */
  modifyAllowed(qp: QpRecord, changes: QpChanges): boolean;
  /** The node a connected QP sends to now (its AV changed), or -1: a QP of this device. */
  nodeOf(qp: QpRecord): number;
  /** The node a datagram through AH `ahId` goes to, or -1: this device. */
  datagramNode(ahId: number): number;
  /** Send WQE `w` of `qp` to `node` (the scheduler's waitFor is set on 'wait'). */
  execute(
    mem: GuestMemory,
    qp: QpRecord,
    s: QpDp,
    w: SendWqe,
    buf: Buffer,
    node: number,
    datagram: boolean,
  ): RemoteResult;
  /** The QP went to ERR or RESET: take back what is still queued, forget the answers still due. */
  flushed(qp: QpRecord, s: QpDp): void;
  /** The QP is gone: its queued requests still go out, their answers are ignored. */
  destroyed(qp: QpRecord): void;
  /** Receives were posted on QP `qpId` (RQ or SRQ): held SENDs for it can be delivered. */
  receivesPosted(qpId: number): void;
  /** Device reset: nothing survives. */
  reset(): void;
}
