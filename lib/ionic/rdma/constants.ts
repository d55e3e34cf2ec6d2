// Numbers of the ionic RDMA device interface (docs/driver-contract.md (ionic RDMA);
// the driver's ionic_fw.h). Values only.

/**
 * Doorbell queue types of the RDMA queues (lif_identity rdma.*_qtype). They
 * sit above the Ethernet types 0..3 (and 4, the Ethernet EQ type), so one
 * doorbell page serves both halves: device.ts routes 0..3 to the LIF and
 * these to the RDMA engine.
 */
export const enum RdmaQType {
  AQ = 5,
  SQ = 6,
  RQ = 7,
  CQ = 8,
  EQ = 9,
}

/** RDMA admin queue opcodes (enum ionic_v1_admin_op; 26-29 from the out-of-tree SRQ series). */
export const enum AdminOp {
  NOOP = 0,
  CREATE_CQ = 1,
  CREATE_QP = 2,
  CREATE_MR = 3,
  STATS_HDRS = 4,
  STATS_VALS = 5,
  DESTROY_MR = 6,
  RSVD_7 = 7,
  DESTROY_CQ = 8,
  MODIFY_QP = 9,
  QUERY_QP = 10,
  DESTROY_QP = 11,
  DEBUG = 12,
  CREATE_AH = 13,
  QUERY_AH = 14,
  MODIFY_DCQCN = 15,
  DESTROY_AH = 16,
  QP_STATS_HDRS = 17,
  QP_STATS_VALS = 18,
  CREATE_SRQ = 26,
  MODIFY_SRQ = 27,
  QUERY_SRQ = 28,
  DESTROY_SRQ = 29,
}

/** lif_identity rdma.admin_opcodes: the kernel refuses op N unless N < this (19 = every upstream op). */
export const RDMA_ADMIN_OPCODES = 19;

/** Admin completion status (enum ionic_v1_admin_status), carried in status_length with the error bit. */
export const enum AdminStatus {
  OK = 0,
  BAD_CMD = 1,
  BAD_INDEX = 2,
  BAD_STATE = 3,
  BAD_TYPE = 4,
  BAD_ATTR = 5,
  MSG_TOO_BIG = 6,
}

// The CQE (its table, types and qid_type_flags bits) is defined once, in lib/rdma/datapath/cqe.ts.

/** EQE: BE32 evt = qid << 8 | code << 4 | type << 1 | color. */
export const enum EqeType {
  CQ = 0,
  QP = 1,
}

/** The EQE's code, read with its type: CQ_* for a CQ event, the rest for a QP event (so the values repeat). */
export const EqeCode = {
  CQ_NOTIFY: 0,
  CQ_ERR: 8,
  SRQ_LEVEL: 0,
  SQ_DRAIN: 1,
  QP_COMM_EST: 2,
  QP_LAST_WQE: 3,
  QP_ERR: 8,
  QP_ERR_REQUEST: 9,
  QP_ERR_ACCESS: 10,
} as const;

/** The stride of an admin WQE and its header size (ADMIN_WQE_STRIDE, ADMIN_WQE_HDR_LEN). */
export const ADMIN_WQE_STRIDE = 64;
export const ADMIN_WQE_HDR_LEN = 4;
/** Longest admin command body accepted: four strides (the longest upstream body is 64). */
export const ADMIN_MAX_BODY = 4 * ADMIN_WQE_STRIDE - ADMIN_WQE_HDR_LEN;

/** Admin WQEs one doorbell pass executes before yielding to the event loop (the rest run on setImmediate). */
export const ADMIN_BUDGET = 64;

/** lif_identity rdma.stats_type bits. */
export const RDMA_STAT_GLOBAL = 1 << 0;
export const RDMA_STAT_QP = 1 << 1;

/** hw_counters header value types (ionic_v1_stat_bits). */
export const enum StatType {
  NONE = 0,
  U8 = 1,
  LE16 = 2,
  LE32 = 3,
  LE64 = 4,
  BE16 = 5,
  BE32 = 6,
  BE64 = 7,
}
export const STAT_TYPE_SHIFT = 28;
/** The driver's stats buffers are one page; we never write more than this. */
export const STATS_BUF_MAX = 4096;

/** MODIFY_QP / CREATE_AH tfp_csum_profile values the driver uses (ETH[/VLAN]/IPv4|IPv6/UDP). */
export const CSUM_PROFILE_MAX = 3;
