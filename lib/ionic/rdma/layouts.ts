// The RDMA structures of the ionic interface as named-offset tables, one per
// driver struct (ionic_fw.h, ionic_if.h), with each field's byte order: the
// RDMA side mixes little-endian admin fields with big-endian words
// (priv_flags, attr_mask, access_flags, the EQE word, the QUERY_QP records).
// Offsets of admin command bodies are relative to the body, which starts 4
// bytes into the first 64-byte stride (after op, rsvd, len). The data-path
// WQEs are in lib/rdma/datapath/wqe-layout.ts, the CQE in .../cqe.ts.

import { be, le, raw } from '../../../protocol/field';

// ---- bootstrap commands on the Ethernet admin queue / dev cmd (64 bytes) -------------------

/** struct ionic_rdma_reset_cmd (opcode 50). */
export const ionic_rdma_reset_cmd = { opcode: le(0, 1), lif_index: le(2, 2), SIZE: 64 } as const;

/** struct ionic_rdma_queue_cmd (opcodes 51 CREATE_EQ, 52 CREATE_CQ, 53 CREATE_ADMINQ). */
export const ionic_rdma_queue_cmd = {
  opcode: le(0, 1),
  lif_index: le(2, 2),
  qid_ver: le(4, 4),
  cid: le(8, 4),
  dbid: le(12, 2),
  depth_log2: le(14, 1),
  stride_log2: le(15, 1),
  dma_addr: le(16, 8),
  SIZE: 64,
} as const;

// ---- LIF identity, RDMA section (at lif_identity + 392) -----------------------------------

/** struct ionic_lif_logical_qtype inside the RDMA identity. */
export const ionic_lif_logical_qtype = { qtype: le(0, 1), qid_count: le(4, 4), qid_base: le(8, 4), SIZE: 12 } as const;

/** lif_identity.rdma (offsets relative to the section; it starts at lif_identity + 392). */
export const ionic_lif_rdma_identity = {
  version: le(0, 1),
  qp_opcodes: le(1, 1),
  admin_opcodes: le(2, 1),
  minor_version: le(3, 1),
  npts_per_lif: le(4, 4),
  nmrs_per_lif: le(8, 4),
  nahs_per_lif: le(12, 4),
  max_stride: le(16, 1),
  cl_stride: le(17, 1),
  pte_stride: le(18, 1),
  rrq_stride: le(19, 1),
  rsq_stride: le(20, 1),
  dcqcn_profiles: le(21, 1),
  udma_shift: le(22, 1),
  page_size_cap: le(24, 8),
  AQ_QTYPE: 32,
  SQ_QTYPE: 44,
  RQ_QTYPE: 56,
  CQ_QTYPE: 68,
  EQ_QTYPE: 80,
  stats_type: le(92, 2),
  SIZE: 256,
} as const;

// ---- the RDMA admin queue ----------------------------------------------------------------------

/** struct ionic_v1_admin_wqe: header; the body follows at BODY (and runs on into later strides). */
export const ionic_v1_admin_wqe = { op: le(0, 1), len: le(2, 2), BODY: 4 } as const;

export const ionic_admin_create_cq = {
  eq_id: le(0, 4),
  depth_log2: le(4, 1),
  stride_log2: le(5, 1),
  dir_size_log2_rsvd: le(6, 1),
  page_size_log2: le(7, 1),
  cq_flags: le(8, 4),
  id_ver: le(12, 4),
  tbl_index: le(16, 4),
  map_count: le(20, 4),
  dma_addr: le(24, 8),
  dbid_flags: le(32, 2),
  SIZE: 34,
} as const;

export const ionic_admin_create_qp = {
  pd_id: le(0, 4),
  priv_flags: be(4, 4),
  sq_cq_id: le(8, 4),
  sq_depth_log2: le(12, 1),
  sq_stride_log2: le(13, 1),
  sq_dir_size_log2_rsvd: le(14, 1),
  sq_page_size_log2: le(15, 1),
  sq_tbl_index_xrcd_id: le(16, 4),
  sq_map_count: le(20, 4),
  sq_dma_addr: le(24, 8),
  rq_cq_id: le(32, 4),
  rq_depth_log2: le(36, 1),
  rq_stride_log2: le(37, 1),
  rq_dir_size_log2_rsvd: le(38, 1),
  rq_page_size_log2: le(39, 1),
  rq_tbl_index_srq_id: le(40, 4),
  rq_map_count: le(44, 4),
  rq_dma_addr: le(48, 8),
  id_ver: le(56, 4),
  dbid_flags: le(60, 2),
  type_state: le(62, 1),
  SIZE: 64,
} as const;

export const ionic_admin_create_mr = {
  va: le(0, 8),
  length: le(8, 8),
  pd_id: le(16, 4),
  id_ver: le(20, 4),
  tbl_index: le(24, 4),
  map_count: le(28, 4),
  dma_addr: le(32, 8),
  dbid_flags: le(40, 2),
  pt_type: le(42, 1),
  dir_size_log2: le(43, 1),
  page_size_log2: le(44, 1),
  SIZE: 45,
} as const;

/** DESTROY_MR / DESTROY_CQ / DESTROY_QP / DESTROY_AH / DESTROY_SRQ: one id. */
export const ionic_admin_destroy = { id: le(0, 4), SIZE: 4 } as const;

export const ionic_admin_mod_qp = {
  attr_mask: be(0, 4),
  dcqcn_profile: le(4, 1),
  tfp_csum_profile: le(5, 1),
  access_flags: be(6, 2),
  rq_psn: le(8, 4),
  sq_psn: le(12, 4),
  qkey_dest_qpn: le(16, 4),
  rate_limit_kbps: le(20, 4),
  pmtu: le(24, 1),
  retry: le(25, 1),
  rnr_timer: le(26, 1),
  retry_timeout: le(27, 1),
  rsq_depth: le(28, 1),
  rrq_depth: le(29, 1),
  pkey_id: le(30, 2),
  ah_id_len: le(32, 4),
  en_pcp: le(36, 1),
  ip_dscp: le(37, 1),
  rsvd2: le(38, 1),
  type_state: le(39, 1),
  rrq_index: le(40, 4),
  rsq_index: le(44, 4),
  dma_addr: le(48, 8),
  id_ver: le(56, 4),
  SIZE: 60,
} as const;

export const ionic_admin_query_qp = {
  hdr_dma_addr: le(0, 8),
  sq_dma_addr: le(8, 8),
  rq_dma_addr: le(16, 8),
  ah_id: le(24, 4),
  id_ver: le(28, 4),
  dbid_flags: le(32, 2),
  SIZE: 34,
} as const;

/** struct ionic_v1_admin_query_qp_sq: written by the device at QUERY_QP sq_dma_addr. */
export const ionic_v1_admin_query_qp_sq = {
  rnr_timer: le(0, 1),
  retry_timeout: le(1, 1),
  access_perms_flags: be(2, 2),
  rsvd: be(4, 2),
  pkey_id: be(6, 2),
  qkey_dest_qpn: be(8, 4),
  rate_limit_kbps: be(12, 4),
  rq_psn: be(16, 4),
  SIZE: 20,
} as const;

/** struct ionic_v1_admin_query_qp_rq: written by the device at QUERY_QP rq_dma_addr. */
export const ionic_v1_admin_query_qp_rq = {
  state_pmtu: le(0, 1),
  retry_rnrtry: le(1, 1),
  rrq_depth: le(2, 1),
  rsq_depth: le(3, 1),
  sq_psn: be(4, 4),
  access_perms_flags: be(8, 2),
  rsvd: be(10, 2),
  SIZE: 12,
} as const;

export const ionic_admin_create_ah = {
  dma_addr: le(0, 8),
  length: le(8, 4),
  pd_id: le(12, 4),
  id_ver: le(16, 4),
  dbid_flags: le(20, 2),
  csum_profile: le(22, 1),
  crypto: le(23, 1),
  SIZE: 24,
} as const;

/** struct ionic_admin_stats_hdr: STATS_HDRS, STATS_VALS, QP_STATS_HDRS, QP_STATS_VALS. */
export const ionic_admin_stats_hdr = {
  dma_addr: le(0, 8),
  length: le(8, 4),
  id_ver: le(12, 4),
  type_state: le(16, 1),
  SIZE: 17,
} as const;

/** Out-of-tree SRQ series (opcodes 26-29). */
export const ionic_admin_create_srq = {
  dma_addr: le(0, 8),
  map_count: le(8, 4),
  pd_id: le(12, 4),
  qid: le(16, 4),
  dbid: le(20, 2),
  low_wqes_limit: le(22, 2),
  flags: le(24, 2),
  depth_log2: le(26, 1),
  stride_log2: le(27, 1),
  page_size_log2: le(28, 1),
  udma_mask: le(29, 1),
  resp_buf_len: le(30, 4),
  resp_dma_addr: le(34, 8),
  SIZE: 42,
} as const;
export const ionic_admin_create_srq_resp = { id: le(0, 4), udma_idx: le(4, 1), SIZE: 5 } as const;
export const ionic_admin_modify_srq = { qid: le(0, 4), low_wqes_limit: le(4, 2), SIZE: 6 } as const;
/** QUERY_SRQ has no upstream layout; ours: the SRQ id. The limit comes back in status_length. */
export const ionic_admin_query_srq = { qid: le(0, 4), SIZE: 4 } as const;

// ---- completions and events ----------------------------------------------------------------

// struct ionic_v1_cqe: lib/rdma/datapath/cqe.ts (one definition for admin and data CQs).

/** struct ionic_v1_eqe: one BE32 word. */
export const ionic_v1_eqe = { evt: be(0, 4), SIZE: 4 } as const;

/** struct ionic_v1_stat: a hw_counters header record (type << STAT_TYPE_SHIFT | value offset, then a NUL-terminated name). */
export const ionic_v1_stat = { type_off: be(0, 4), name: raw(4, 28), SIZE: 32 } as const;
/** One hw_counters value: the values buffer is an array of these (__le64), counter i at i * SIZE. */
export const ionic_v1_stat_value = { value: le(0, 8), SIZE: 8 } as const;
