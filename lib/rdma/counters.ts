// RDMA counters: one set for the device, one per QP. They are what the guest
// reads as hw_counters (the admin queue's STATS_* and QP_STATS_* commands
// write the names and the values into the driver's buffers; ionic RDMA R7), so a
// name is at most 27 characters (the 28-byte field keeps its NUL).
//
// The control path counts what it does (admin commands, doorbells, events);
// the data path counts traffic and errors through the same arrays, by index:
//   counters.inc(DeviceCounter.tx_bytes, n)    qp.stats.inc(QpCounter.bytes_sent, n)
// Values are doubles: exact up to 2^53, plenty for a counter.
//
// Beside them, each QP counts the WQEs it ran by opcode (qp.opcodes, indexed
// by SendVerb): the stats file's "WQEs by opcode" histogram, never shown to
// the guest.

import { SEND_VERB_COUNT } from './datapath/wqe-layout';

export const DEVICE_COUNTER_NAMES = [
  // control path
  'admin_commands',
  'admin_errors',
  'admin_cqes',
  'eq_events',
  'cq_arms',
  'doorbells_aq',
  'doorbells_sq',
  'doorbells_rq',
  'doorbells_cq',
  'doorbells_bad',
  // objects alive when read
  'qps_active',
  'cqs_active',
  'mrs_active',
  'ahs_active',
  'srqs_active',
  // data path
  'tx_wqes',
  'rx_wqes',
  'cqes',
  'send_msgs',
  'recv_msgs',
  'tx_bytes',
  'rx_bytes',
  'rdma_write_bytes',
  'rdma_read_bytes',
  'atomic_ops',
  'flushed_wqes',
  'local_length_errors',
  'local_prot_errors',
  'local_qp_errors',
  'remote_access_errors',
  'remote_inv_req_errors',
  'rnr_retry_exceeded',
  'retry_exceeded',
  'mem_mgmt_errors',
  'rnr_naks',
  'cq_full_waits',
  'reg_mr_wqes',
  'local_inv_wqes',
  'remote_invalidates',
  // mesh: requests from a node that is not the QP's peer, or of another wire version
  'mesh_refused_requests',
  // RoCEv2 on the wire (--backend roce), copied from the transport's counters when read
  'roce_tx_packets',
  'roce_rx_packets',
  'roce_retransmits',
  'roce_timeouts',
  'roce_duplicates',
  'roce_naks_tx',
  'roce_naks_rx',
  'roce_icrc_errors',
  'roce_rx_drops',
] as const;

export const QP_COUNTER_NAMES = [
  'doorbell_send',
  'doorbell_recv',
  'wqes_processed',
  'cqes_posted',
  'bytes_sent',
  'bytes_received',
  'bytes_rdma_read',
  'bytes_rdma_write',
  'errors',
  'rnr_naks',
  'flushed_wqes',
] as const;

function indexOf<N extends string>(names: readonly N[]): Readonly<Record<N, number>> {
  const o = {} as Record<N, number>;
  names.forEach((n, i) => {
    o[n] = i;
  });
  return o;
}

/** Index of each device counter: counters.inc(DeviceCounter.admin_commands). */
export const DeviceCounter = indexOf(DEVICE_COUNTER_NAMES);
/** Index of each per-QP counter: qp.stats.inc(QpCounter.bytes_sent, n). */
export const QpCounter = indexOf(QP_COUNTER_NAMES);

/** Longest counter name the hw_counters header has room for. */
export const COUNTER_NAME_MAX = 27;

export class CounterSet {
  readonly values: Float64Array;
  constructor(readonly names: readonly string[]) {
    this.values = new Float64Array(names.length);
  }

  inc(index: number, by = 1): void {
    this.values[index] += by;
  }

  set(index: number, value: number): void {
    this.values[index] = value;
  }

  get(index: number): number {
    return this.values[index] ?? 0;
  }

  clear(): void {
    this.values.fill(0);
  }

  /** name -> value, for logs, the stats file and tests. */
  snapshot(): Record<string, number> {
    const o: Record<string, number> = {};
    this.names.forEach((n, i) => {
      o[n] = this.values[i]!;
    });
    return o;
  }
}

export function deviceCounters(): CounterSet {
  return new CounterSet(DEVICE_COUNTER_NAMES);
}

export function qpCounters(): CounterSet {
  return new CounterSet(QP_COUNTER_NAMES);
}

/** WQEs run by opcode: one slot per send verb (the index is the SendVerb, i.e. the v1 opcode). */
export function opcodeCounts(): Float64Array {
  return new Float64Array(SEND_VERB_COUNT);
}
