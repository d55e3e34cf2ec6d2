// The ionic RDMA interface as the guest model sees it: byte offsets and
// numbers copied from docs/driver-contract.md, part R (the driver's view),
// not from lib/ionic/rdma, so a misreading there fails a test instead of
// being mirrored here.

/** lif_identity RDMA fields, absolute offsets (ionic RDMA R1.4). */
export const RdmaId = {
  capabilities: 0,
  version: 392,
  qp_opcodes: 393,
  admin_opcodes: 394,
  minor_version: 395,
  npts_per_lif: 396,
  nmrs_per_lif: 400,
  nahs_per_lif: 404,
  max_stride: 408,
  cl_stride: 409,
  pte_stride: 410,
  rrq_stride: 411,
  rsq_stride: 412,
  dcqcn_profiles: 413,
  udma_shift: 414,
  page_size_cap: 416,
  aq_qtype: 424,
  aq_count: 428,
  aq_base: 432,
  sq_qtype: 436,
  sq_count: 440,
  sq_base: 444,
  rq_qtype: 448,
  rq_count: 452,
  rq_base: 456,
  cq_qtype: 460,
  cq_count: 464,
  cq_base: 468,
  eq_qtype: 472,
  eq_count: 476,
  eq_base: 480,
  stats_type: 484,
  END: 648,
} as const;

/** Bootstrap opcodes on the Ethernet admin queue (ionic RDMA R1). */
export const BootOp = { RESET_LIF: 50, CREATE_EQ: 51, CREATE_CQ: 52, CREATE_ADMINQ: 53 } as const;

/** The 64-byte rdma_queue command (ionic RDMA R1.2). */
export const QCmd = {
  lif_index: 2,
  qid_ver: 4,
  cid: 8,
  dbid: 12,
  depth_log2: 14,
  stride_log2: 15,
  dma_addr: 16,
} as const;

/** Admin opcodes (ionic RDMA R2.4). */
export const AOp = {
  NOOP: 0,
  CREATE_CQ: 1,
  CREATE_QP: 2,
  CREATE_MR: 3,
  STATS_HDRS: 4,
  STATS_VALS: 5,
  DESTROY_MR: 6,
  RSVD_7: 7,
  DESTROY_CQ: 8,
  MODIFY_QP: 9,
  QUERY_QP: 10,
  DESTROY_QP: 11,
  DEBUG: 12,
  CREATE_AH: 13,
  QUERY_AH: 14,
  MODIFY_DCQCN: 15,
  DESTROY_AH: 16,
  QP_STATS_HDRS: 17,
  QP_STATS_VALS: 18,
  CREATE_SRQ: 26,
  MODIFY_SRQ: 27,
  QUERY_SRQ: 28,
  DESTROY_SRQ: 29,
} as const;

/** Body lengths the 6.18 driver sends (ionic RDMA R2.4). */
export const ALen = {
  CREATE_CQ: 34,
  CREATE_QP: 64,
  CREATE_MR: 45,
  STATS: 17,
  DESTROY: 4,
  MODIFY_QP: 60,
  QUERY_QP: 34,
  CREATE_AH: 24,
  QUERY_AH: 8,
  CREATE_SRQ: 42,
  MODIFY_SRQ: 6,
} as const;

/** Admin completion status (ionic RDMA R2.2). */
export const ASt = { OK: 0, BAD_CMD: 1, BAD_INDEX: 2, BAD_STATE: 3, BAD_TYPE: 4, BAD_ATTR: 5, MSG_TOO_BIG: 6 } as const;

/** Doorbell ring field (ionic RDMA R0.2 / R4.8). */
export const Ring = { INDEX: 0, ARM: 1, ARM_SOL: 2 } as const;

/** QP types, states, masks, flags (ionic RDMA R5). */
export const QpT = { RC: 0, UC: 1, RD: 2, UD: 3, SRQ: 4, XRC_INI: 5, XRC_TGT: 6 } as const;
export const QpS = { RESET: 0, INIT: 1, RTR: 2, RTS: 3, SQD: 4, SQE: 5, ERR: 6 } as const;
export const Mask = {
  STATE: 1 << 0,
  CUR_STATE: 1 << 1,
  EN_SQD_ASYNC_NOTIFY: 1 << 2,
  ACCESS_FLAGS: 1 << 3,
  PKEY_INDEX: 1 << 4,
  PORT: 1 << 5,
  QKEY: 1 << 6,
  AV: 1 << 7,
  PATH_MTU: 1 << 8,
  TIMEOUT: 1 << 9,
  RETRY_CNT: 1 << 10,
  RNR_RETRY: 1 << 11,
  RQ_PSN: 1 << 12,
  MAX_QP_RD_ATOMIC: 1 << 13,
  ALT_PATH: 1 << 14,
  MIN_RNR_TIMER: 1 << 15,
  SQ_PSN: 1 << 16,
  MAX_DEST_RD_ATOMIC: 1 << 17,
  PATH_MIG_STATE: 1 << 18,
  CAP: 1 << 19,
  DEST_QPN: 1 << 20,
  RATE_LIMIT: 1 << 25,
} as const;
export const QpF = {
  REMOTE_WRITE: 1 << 0,
  REMOTE_READ: 1 << 1,
  REMOTE_ATOMIC: 1 << 2,
  SQ_SPEC: 1 << 8,
  RQ_SPEC: 1 << 9,
  REMOTE_PRIVILEGED: 1 << 10,
  SQ_DRAINING: 1 << 11,
  SQD_NOTIFY: 1 << 12,
  SQ_CMB: 1 << 13,
  PRIVILEGED: 1 << 15,
} as const;
export const MrF = {
  LOCAL_WRITE: 1 << 0,
  REMOTE_WRITE: 1 << 1,
  REMOTE_READ: 1 << 2,
  REMOTE_ATOMIC: 1 << 3,
  MW_BIND: 1 << 4,
  ZERO_BASED: 1 << 5,
  ON_DEMAND: 1 << 6,
  PHYS: 0xa000,
  MW_1: 0x6000,
  MW_2: 0xe000,
} as const;

/** EQE / CQE bit fields (ionic RDMA R2.2, R4.6, R4.8). */
export const Eqe = { TYPE_CQ: 0, TYPE_QP: 1, CODE_NOTIFY: 0, CODE_CQ_ERR: 8 } as const;

// ---- data path (ionic RDMA R4.2 - R4.6) ----------------------------------------------------------

/** Send WQE opcodes, identity version 1 (ionic RDMA R4.2). */
export const WOp = {
  SEND: 0,
  SEND_INV: 1,
  SEND_IMM: 2,
  RDMA_READ: 3,
  RDMA_WRITE: 4,
  RDMA_WRITE_IMM: 5,
  ATOMIC_CS: 6,
  ATOMIC_FA: 7,
  REG_MR: 8,
  LOCAL_INV: 9,
  BIND_MW: 10,
} as const;

/** Send/receive WQE base-header flags (BE16 at 10); SGL format in bits 12-15. */
export const WqeF = {
  FENCE: 1 << 0,
  SOLICITED: 1 << 1,
  INLINE: 1 << 2,
  SIGNALED: 1 << 3,
  SPEC32: 1 << 12,
  SPEC16: 2 << 12,
} as const;

/** CQE types (qid_type_flags bits 5-7) and receive ops (src_qpn_op bits 24-28). */
export const CqeT = { ADMIN: 0, RECV: 1, SEND_MSN: 2, SEND_NPG: 3 } as const;
export const ROp = { SEND: 0, SEND_INV: 1, SEND_IMM: 2, RDMA_WRITE_IMM: 3 } as const;

/** CQE status codes (status_length with the error bit). */
export const WSt = {
  OK: 0,
  LOCAL_LEN: 1,
  LOCAL_QP_OPER: 2,
  LOCAL_PROT: 3,
  WQE_FLUSHED: 4,
  MEM_MGMT_OPER: 5,
  BAD_RESP: 6,
  LOCAL_ACC: 7,
  REMOTE_INV_REQ: 8,
  REMOTE_ACC: 9,
  REMOTE_OPER: 10,
  RETRY_EXCEEDED: 11,
  RNR_RETRY_EXCEEDED: 12,
  XRC_VIO: 13,
  LOCAL_SGL_INV: 14,
} as const;
