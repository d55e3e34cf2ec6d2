// RDMA data-path WQE structures of the ionic device as named-offset tables,
// one per driver struct (drivers/infiniband/hw/ionic/ionic_fw.h and
// rdma-core providers/ionic/ionic_fw_types.h), with the byte order of every
// field, and the codes a WQE carries (verbs, v1/v2 opcodes, flags, SGL
// formats). The decoders are in wqe-decode.ts, the CQE in cqe.ts.
//
// Byte order is mixed and matters: almost every WQE field is big-endian and
// the wqe_id words are opaque host-endian bytes (echoed verbatim in CQEs).
// Offsets are from the start of the WQE (the 16-byte base header is
// included), so a reader can hold them against
// docs/driver-contract.md (ionic RDMA) section 4 directly.

import { be, le, raw } from '../../../protocol/field';

// ---------------------------------------------------------------------------
// Tables (ionic_fw.h names)

/** struct ionic_sge: one scatter/gather element, 16 bytes. */
export const ionic_sge = {
  va: be(0, 8),
  len: be(8, 4),
  lkey: be(12, 4),
  SIZE: 16,
} as const;

/** struct ionic_v1_base_hdr: the first 16 bytes of every send and receive WQE. */
export const ionic_v1_base_hdr = {
  /** Opaque: the host's own cookie (slot index, native or LE). Echoed verbatim in CQEs. */
  wqe_id: raw(0, 8),
  op: be(8, 1),
  /** SGE count; 0 for inline; the new key tag for REG_MR/BIND_MW. */
  num_sge_key: be(9, 1),
  flags: be(10, 2),
  /** Immediate (wire order), rkey to invalidate, current MR/MW key, or (RQ) total SGE length. */
  imm_data_key: be(12, 4),
  SIZE: 16,
} as const;

/** struct ionic_v1_common_bdy (send, send-UD and RDMA read/write); offsets from the WQE start. */
export const ionic_v1_common_bdy = {
  /** UD/GSI variant. */
  ah_id: be(16, 4),
  dest_qpn: be(20, 4),
  dest_qkey: be(24, 4),
  /** RDMA variant (same bytes). */
  remote_va_high: be(16, 4),
  remote_va_low: be(20, 4),
  remote_rkey: be(24, 4),
  /** Total payload bytes: sum of the SGE lengths, or the inline byte count. */
  length: be(28, 4),
  /** union ionic_v1_pld: SGEs, spec lengths + SGEs, or inline data to the end of the stride. */
  PLD: 32,
} as const;

/** struct ionic_v1_atomic_bdy (version 1 atomics, as the provider builds them). */
export const ionic_v1_atomic_bdy = {
  remote_va_high: be(16, 4),
  remote_va_low: be(20, 4),
  remote_rkey: be(24, 4),
  /** CS: swap value; FA: value to add. */
  swap_add_high: be(28, 4),
  swap_add_low: be(32, 4),
  /** CS only. */
  compare_high: be(36, 4),
  compare_low: be(40, 4),
  rsvd: raw(44, 4),
  /** The local 8-byte result buffer as an ionic_sge (len 8). */
  SGE: 48,
  SIZE: 64,
} as const;

/** struct ionic_v2_atomic_bdy (version >= 2: the local buffer without a length). */
export const ionic_v2_atomic_bdy = {
  remote_va_high: be(16, 4),
  remote_va_low: be(20, 4),
  remote_rkey: be(24, 4),
  swap_add_high: be(28, 4),
  swap_add_low: be(32, 4),
  compare_high: be(36, 4),
  compare_low: be(40, 4),
  lkey: be(44, 4),
  local_va: be(48, 8),
  rsvd_expdb: raw(56, 8),
  SIZE: 64,
} as const;

/** struct ionic_v1_reg_mr_bdy (kernel fast registration). dma_addr is BE64 in the merged 6.18 driver. */
export const ionic_v1_reg_mr_bdy = {
  va: be(16, 8),
  length: be(24, 8),
  /** In-page offset of va when map_count > 1, else 0. */
  offset: be(32, 8),
  /** Page-list address (map_count > 1) or page + offset (map_count 1). */
  dma_addr: be(40, 8),
  map_count: be(48, 4),
  flags: be(52, 2),
  dir_size_log2: be(54, 1),
  page_size_log2: be(55, 1),
  rsvd: raw(56, 8),
  SIZE: 64,
} as const;

/** struct ionic_v1_bind_mw_bdy (provider only). */
export const ionic_v1_bind_mw_bdy = {
  va: be(16, 8),
  length: be(24, 8),
  /** The MR the window is bound to. */
  lkey: be(32, 4),
  /** MR access bits plus MW type bits (bit 13 UKEY_EN is ignored). */
  flags: be(36, 2),
  rsvd: raw(38, 26),
  SIZE: 64,
} as const;

/** struct ionic_v1_recv_bdy: receive WQE body. */
export const ionic_v1_recv_bdy = {
  rsvd: raw(16, 16),
  PLD: 32,
} as const;

/** union ionic_v1_pld: the 32-byte payload head, and the "spec" SGE-length formats. */
const ionic_v1_pld = {
  SIZE: 32,
  /** SPEC32: eight BE32 copies of the SGE lengths. */
  spec32: be(0, 4),
  SPEC32_COUNT: 8,
  /** SPEC16: sixteen BE16 copies of the SGE lengths. */
  spec16: be(0, 2),
  SPEC16_COUNT: 16,
  /** With a spec format the SGE array starts at sgl[2] (pld + 32). */
  SPEC_FIRST_SGE: 2,
} as const;

// ---------------------------------------------------------------------------
// Codes

/** The send verbs; numerically the version-1 opcodes (enum ionic_v1_op). */
export const enum SendVerb {
  SEND = 0,
  SEND_INV = 1,
  SEND_IMM = 2,
  RDMA_READ = 3,
  RDMA_WRITE = 4,
  RDMA_WRITE_IMM = 5,
  ATOMIC_CS = 6,
  ATOMIC_FA = 7,
  REG_MR = 8,
  LOCAL_INV = 9,
  BIND_MW = 10,
}

/** Number of send verbs (v1 opcodes 0..10). */
export const SEND_VERB_COUNT = 11;

/** enum ionic_v2_op, indexed by SendVerb. */
export const V2_OPCODES: readonly number[] = [0x20, 0xa0, 0x60, 0x02, 0x21, 0x61, 0x04, 0x05, 0x06, 0x07, 0x08];

const V2_TO_VERB: Int8Array = (() => {
  const t = new Int8Array(256).fill(-1);
  V2_OPCODES.forEach((op, verb) => {
    t[op] = verb;
  });
  return t;
})();

/** The verb of an `op` byte for an identity `version` (< 2: v1 numbering, else v2), or -1 if unknown. */
export function verbOf(op: number, version: number): SendVerb | -1 {
  if (!Number.isInteger(op) || op < 0 || op > 0xff) return -1;
  if (version < 2) return op < SEND_VERB_COUNT ? (op as SendVerb) : -1;
  const v = V2_TO_VERB[op]!;
  return v < 0 ? -1 : (v as SendVerb);
}

/** The `op` byte of a verb for an identity `version`. */
export function opcodeOf(verb: SendVerb, version: number): number {
  return version < 2 ? verb : V2_OPCODES[verb]!;
}

/** Base-header flags (BE16 at offset 10). */
export const WqeFlag = {
  FENCE: 1 << 0,
  SOLICITED: 1 << 1,
  INLINE: 1 << 2,
  SIGNALED: 1 << 3,
  /** Provider only (lap parity); the device ignores it. */
  COLOR: 1 << 4,
  SPEC_SHIFT: 12,
} as const;

/** SGL format in flags bits 12-15. */
export const enum SpecFormat {
  NONE = 0,
  SPEC32 = 1,
  SPEC16 = 2,
}

// ---------------------------------------------------------------------------
// Sizes

/** Smallest send/receive WQE (sizeof(struct ionic_v1_wqe)). */
export const MIN_WQE_SIZE = 64;
/** Offset of the payload (SGEs, spec header, inline data) in every WQE. */
export const WQE_PLD_OFFSET = ionic_v1_common_bdy.PLD;
/** Offset of the first SGE when a spec format is used (pld.sgl[2]). */
export const WQE_SPEC_SGL_OFFSET = WQE_PLD_OFFSET + ionic_v1_pld.SPEC_FIRST_SGE * ionic_sge.SIZE;
/**
 * The 8-byte target of ATOMIC_CS / ATOMIC_FA (and the original value returned
 * to the requester) in guest memory: a u64 in host (little-endian) order,
 * worked on as two u32 halves.
 */
export const atomic_operand = { lo: le(0, 4), hi: le(4, 4), SIZE: 8 } as const;
/** The fixed operand size of ATOMIC_CS / ATOMIC_FA. */
export const ATOMIC_SIZE = atomic_operand.SIZE;
