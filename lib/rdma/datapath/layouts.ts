// RDMA data-path ring structures of the ionic device as named-offset tables,
// one per driver struct (drivers/infiniband/hw/ionic/ionic_fw.h and
// rdma-core providers/ionic/ionic_fw_types.h), with the byte order of every
// field, plus the decoders for send and receive WQEs and the CQE encoder.
//
// Byte order is mixed and matters: almost every WQE/CQE field is big-endian,
// the wqe_id words are opaque host-endian bytes (echoed verbatim), and the
// admin-CQE cindex words are little-endian. Offsets in the WQE tables are from
// the start of the WQE (the 16-byte base header is included), so a reader can
// hold them against reference/ionic-rdma-contract.md section 4 directly.
//
// Guest rings are untrusted: the decoders never throw on any input, they
// answer a record or a prebuilt error value carrying the CQE status hardware
// would report. Records are reused (pass `out`) so a hot loop allocates
// nothing but what it grows the first time.

// ---------------------------------------------------------------------------
// Fields

/** Byte order of a field: big-endian, little-endian, or opaque bytes copied verbatim. */
export type ByteOrder = 'be' | 'le' | 'raw';

export interface WireField {
  /** Byte offset from the start of the structure. */
  readonly off: number;
  /** Size in bytes. Numeric access supports 1, 2, 4 and 8. */
  readonly size: number;
  readonly order: ByteOrder;
}

function be(off: number, size: number): WireField {
  return { off, size, order: 'be' };
}

function le(off: number, size: number): WireField {
  return { off, size, order: 'le' };
}

function raw(off: number, size: number): WireField {
  return { off, size, order: 'raw' };
}

/** A u64 that does not fit a JS number exactly (above 2^53 - 1) decodes as this. */
export const U64_UNSAFE = -1;

const TWO_32 = 0x100000000;

/** Big-endian u64 at `at`; values above 2^53 - 1 come back as U64_UNSAFE. */
export function readU64BE(buf: Buffer, at: number): number {
  const hi = buf.readUInt32BE(at);
  if (hi > 0x1fffff) return U64_UNSAFE;
  return hi * TWO_32 + buf.readUInt32BE(at + 4);
}

/** Little-endian u64 at `at`; values above 2^53 - 1 come back as U64_UNSAFE. */
export function readU64LE(buf: Buffer, at: number): number {
  const hi = buf.readUInt32LE(at + 4);
  if (hi > 0x1fffff) return U64_UNSAFE;
  return hi * TWO_32 + buf.readUInt32LE(at);
}

/** Split a non-negative integer into its high 32 bits (garbage becomes 0). */
function hi32(v: number): number {
  return Number.isFinite(v) && v > 0 ? Math.floor(v / TWO_32) >>> 0 : 0;
}

/** Low 32 bits of a non-negative integer (garbage becomes 0). */
function lo32(v: number): number {
  return Number.isFinite(v) && v > 0 ? (v % TWO_32) >>> 0 : 0;
}

/** Write a big-endian u64. Values must be safe non-negative integers; anything else writes its clamp without throwing. */
export function writeU64BE(buf: Buffer, at: number, v: number): void {
  buf.writeUInt32BE(hi32(v), at);
  buf.writeUInt32BE(lo32(v), at + 4);
}

/** Read a numeric field (`be` or `le`, size 1/2/4/8; u64 above 2^53-1 gives U64_UNSAFE). The caller checks the buffer length. */
export function getWire(buf: Buffer, base: number, f: WireField): number {
  const at = base + f.off;
  const bigEndian = f.order === 'be';
  if (f.order === 'raw') throw new Error(`field at ${f.off} is opaque bytes, not a number`);
  switch (f.size) {
    case 1: return buf.readUInt8(at);
    case 2: return bigEndian ? buf.readUInt16BE(at) : buf.readUInt16LE(at);
    case 4: return bigEndian ? buf.readUInt32BE(at) : buf.readUInt32LE(at);
    case 8: return bigEndian ? readU64BE(buf, at) : readU64LE(buf, at);
    default: throw new Error(`field at ${f.off} has no numeric size (${f.size})`);
  }
}

/** Write a numeric field, truncating the value to the field width (never throws on the value). */
export function setWire(buf: Buffer, base: number, f: WireField, value: number): void {
  const at = base + f.off;
  const bigEndian = f.order === 'be';
  const v = Number.isFinite(value) ? value : 0;
  if (f.order === 'raw') throw new Error(`field at ${f.off} is opaque bytes, not a number`);
  switch (f.size) {
    case 1: buf.writeUInt8(v & 0xff, at); return;
    case 2: if (bigEndian) buf.writeUInt16BE(v & 0xffff, at); else buf.writeUInt16LE(v & 0xffff, at); return;
    case 4: if (bigEndian) buf.writeUInt32BE(v >>> 0, at); else buf.writeUInt32LE(v >>> 0, at); return;
    case 8:
      if (bigEndian) writeU64BE(buf, at, v);
      else { buf.writeUInt32LE(lo32(v), at); buf.writeUInt32LE(hi32(v), at + 4); }
      return;
    default: throw new Error(`field at ${f.off} has no numeric size (${f.size})`);
  }
}

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
export const ionic_v1_pld = {
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

/** struct ionic_v1_cqe: 32 bytes, all CQs; the head is a union by CQE type. */
export const ionic_v1_cqe = {
  // admin head
  admin_cmd_idx: be(0, 2),
  admin_cmd_op: be(2, 1),
  admin_old_sq_cindex: le(20, 2),
  admin_old_rq_cq_cindex: le(22, 2),
  // recv head
  recv_wqe_id: raw(0, 8),
  recv_src_qpn_op: be(8, 4),
  recv_src_mac: raw(12, 6),
  recv_vlan_tag: be(18, 2),
  recv_imm_data_rkey: be(20, 4),
  // send head (MSN and NPG types)
  send_rsvd: raw(0, 4),
  send_msg_msn: be(4, 4),
  send_rsvd2: raw(8, 8),
  send_npg_wqe_id: raw(16, 8),
  // common tail
  status_length: be(24, 4),
  /** Written last: its low byte (offset 31) holds the color bit. */
  qid_type_flags: be(28, 4),
  SIZE: 32,
} as const;

// ---------------------------------------------------------------------------
// Codes

/** enum ionic_status: CQE status (status_length when the error bit is set). */
export const enum IonicStatus {
  OK = 0,
  LOCAL_LEN = 1,
  LOCAL_QP_OPER = 2,
  LOCAL_PROT = 3,
  WQE_FLUSHED = 4,
  MEM_MGMT_OPER = 5,
  BAD_RESP = 6,
  LOCAL_ACC = 7,
  REMOTE_INV_REQ = 8,
  REMOTE_ACC = 9,
  REMOTE_OPER = 10,
  RETRY_EXCEEDED = 11,
  RNR_RETRY_EXCEEDED = 12,
  XRC_VIO = 13,
  LOCAL_SGL_INV = 14,
}

const STATUS_NAMES = [
  'ok', 'local-len', 'local-qp-oper', 'local-prot', 'wqe-flushed', 'mem-mgmt-oper', 'bad-resp', 'local-acc',
  'remote-inv-req', 'remote-acc', 'remote-oper', 'retry-exceeded', 'rnr-retry-exceeded', 'xrc-vio', 'local-sgl-inv',
] as const;

/** Name of an IonicStatus, for logs and test messages. */
export function ionicStatusName(s: number): string {
  return STATUS_NAMES[s] ?? `status-${s}`;
}

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

/** v2 opcode bits: carries outbound payload / immediate / invalidate. */
export const V2_OPSL = { OUT: 0x20, IMM: 0x40, INV: 0x80 } as const;

const V2_TO_VERB: Int8Array = (() => {
  const t = new Int8Array(256).fill(-1);
  V2_OPCODES.forEach((op, verb) => { t[op] = verb; });
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

/** CQE types (qid_type_flags bits 5-7). */
export const enum CqeType {
  ADMIN = 0,
  RECV = 1,
  SEND_MSN = 2,
  SEND_NPG = 3,
}

/** Receive-CQE op codes (src_qpn_op bits 24-28). */
export const enum RecvOp {
  SEND = 0,
  SEND_INV = 1,
  SEND_IMM = 2,
  RDMA_WRITE_IMM = 3,
}

/** Bits of qid_type_flags and src_qpn_op. */
export const CqeBits = {
  COLOR: 1 << 0,
  ERROR: 1 << 1,
  TYPE_SHIFT: 5,
  TYPE_MASK: 0x7,
  QID_SHIFT: 8,
  QID_MASK: 0xffffff,
  RECV_QPN_MASK: 0xffffff,
  RECV_OP_SHIFT: 24,
  RECV_OP_MASK: 0x1f,
  RECV_IS_VLAN_BIT: 30,
  RECV_IS_IPV4_BIT: 31,
} as const;

// MR and QP flags (contract 3.3, 5.4) are the resource manager's: one definition.
export { MrFlag, QpFlag } from '../types';

// ---------------------------------------------------------------------------
// Limits

/** Smallest send/receive WQE (sizeof(struct ionic_v1_wqe)). */
export const MIN_WQE_SIZE = 64;
/** Offset of the payload (SGEs, spec header, inline data) in every WQE. */
export const WQE_PLD_OFFSET = 32;
/** Offset of the first SGE when a spec format is used (pld.sgl[2]). */
export const WQE_SPEC_SGL_OFFSET = 64;
/**
 * Largest message: both host stacks refuse a work request whose SGE lengths add
 * up to more than 2^31 (IB's maximum message size), so anything larger is
 * garbage and fails with a length error instead of being truncated.
 */
export const MAX_MSG_BYTES = 0x80000000;
/** The fixed operand size of ATOMIC_CS / ATOMIC_FA. */
export const ATOMIC_SIZE = 8;

// ---------------------------------------------------------------------------
// Decode errors

export const enum WqeErrorCode {
  /** Buffer shorter than a WQE or than the part the opcode needs. */
  TRUNCATED = 'WQE_TRUNCATED',
  /** Unknown opcode for the identity version, or not allowed on a datagram QP. */
  BAD_OPCODE = 'WQE_BAD_OPCODE',
  /** Spec format other than 0, 1, 2. */
  BAD_SPEC = 'WQE_BAD_SPEC',
  /** More SGEs than fit in the stride. */
  TOO_MANY_SGES = 'WQE_TOO_MANY_SGES',
  /** Inline data claiming more than the WQE's payload area. */
  INLINE_TOO_LONG = 'WQE_INLINE_TOO_LONG',
  /** INLINE on an op that carries no outbound payload (read, atomic, local ops). */
  BAD_INLINE = 'WQE_BAD_INLINE',
  /** SGE lengths adding up to more than MAX_MSG_BYTES. */
  MSG_TOO_LONG = 'WQE_MSG_TOO_LONG',
  /** The length field disagrees with the sum of the SGE lengths. */
  LENGTH_MISMATCH = 'WQE_LENGTH_MISMATCH',
  /** A v1 atomic whose local SGE is not 8 bytes. */
  ATOMIC_LENGTH = 'WQE_ATOMIC_LENGTH',
}

/** A WQE that cannot be executed, with the status its completion carries. */
export interface WqeError {
  readonly ok: false;
  readonly code: WqeErrorCode;
  readonly status: IonicStatus;
}

function wqeError(code: WqeErrorCode, status: IonicStatus): WqeError {
  return Object.freeze({ ok: false as const, code, status });
}

/** Prebuilt decode errors (decoding allocates nothing on failure). */
export const WqeErrors = {
  TRUNCATED: wqeError(WqeErrorCode.TRUNCATED, IonicStatus.LOCAL_QP_OPER),
  BAD_OPCODE: wqeError(WqeErrorCode.BAD_OPCODE, IonicStatus.LOCAL_QP_OPER),
  BAD_SPEC: wqeError(WqeErrorCode.BAD_SPEC, IonicStatus.LOCAL_QP_OPER),
  TOO_MANY_SGES: wqeError(WqeErrorCode.TOO_MANY_SGES, IonicStatus.LOCAL_QP_OPER),
  INLINE_TOO_LONG: wqeError(WqeErrorCode.INLINE_TOO_LONG, IonicStatus.LOCAL_LEN),
  BAD_INLINE: wqeError(WqeErrorCode.BAD_INLINE, IonicStatus.LOCAL_QP_OPER),
  MSG_TOO_LONG: wqeError(WqeErrorCode.MSG_TOO_LONG, IonicStatus.LOCAL_LEN),
  LENGTH_MISMATCH: wqeError(WqeErrorCode.LENGTH_MISMATCH, IonicStatus.LOCAL_LEN),
  ATOMIC_LENGTH: wqeError(WqeErrorCode.ATOMIC_LENGTH, IonicStatus.LOCAL_LEN),
} as const;

// ---------------------------------------------------------------------------
// Records

/** One decoded SGE. `va` is U64_UNSAFE when above 2^53 - 1 (no MR can contain it). */
export interface Sge {
  va: number;
  len: number;
  lkey: number;
}

/** Shared SGL part of send and receive records. `sges` may hold stale entries past `sgeCount`. */
interface SglRecord {
  /** Spec format from flags bits 12-15. */
  specFormat: SpecFormat;
  sgeCount: number;
  sges: Sge[];
  /** Sum of the first `sgeCount` SGE lengths (<= MAX_MSG_BYTES). */
  sgeTotal: number;
}

/** A decoded send WQE. One record is reused across decodes; fields not used by `verb` hold leftovers. */
export interface SendWqe extends SglRecord {
  readonly ok: true;
  verb: SendVerb;
  /** The raw op byte. */
  opcode: number;
  /** wqe_id bytes 0-3 and 4-7 read little-endian: writing them back the same way echoes the bytes verbatim. */
  wqeIdLo: number;
  wqeIdHi: number;
  /** Raw flags (BE16). */
  flags: number;
  fence: boolean;
  solicited: boolean;
  signaled: boolean;
  inline: boolean;
  /** num_sge_key: SGE count, or the new key tag for REG_MR / BIND_MW. */
  numSgeKey: number;
  /** imm_data_key as a BE32 number: immediate (write it back BE32 to keep wire order), rkey to invalidate, or current key. */
  immDataKey: number;
  /** The length field (BE32 at 28) for SEND/WRITE/READ; the message length. */
  length: number;
  /** Inline payload location inside the WQE buffer (valid when `inline`). */
  inlineOffset: number;
  inlineLength: number;
  /** UD/GSI sends. */
  ud: { ahId: number; destQpn: number; destQkey: number };
  /** RDMA read/write and atomics: remote address (U64_UNSAFE above 2^53-1) and rkey. */
  rdma: { remoteVa: number; rkey: number };
  /** Atomics: operands as 32-bit halves, and the local 8-byte result buffer. */
  atomic: {
    swapAddHi: number; swapAddLo: number; compareHi: number; compareLo: number;
    localVa: number; localLkey: number; localLen: number;
  };
  /** REG_MR body. */
  regMr: {
    va: number; length: number; offset: number; dmaAddr: number; mapCount: number;
    flags: number; dirSizeLog2: number; pageSizeLog2: number;
  };
  /** BIND_MW body. */
  bindMw: { va: number; length: number; lkey: number; flags: number };
}

/** A decoded receive WQE. */
export interface RecvWqe extends SglRecord {
  readonly ok: true;
  wqeIdLo: number;
  wqeIdHi: number;
  op: number;
  flags: number;
  /** imm_data_key: the total length the host computed (informational; sgeTotal is authoritative). */
  postedLength: number;
}

/** A fresh reusable send-WQE record. */
export function newSendWqe(): SendWqe {
  return {
    ok: true, verb: SendVerb.SEND, opcode: 0, wqeIdLo: 0, wqeIdHi: 0, flags: 0,
    fence: false, solicited: false, signaled: false, inline: false,
    numSgeKey: 0, immDataKey: 0, length: 0, inlineOffset: 0, inlineLength: 0,
    specFormat: SpecFormat.NONE, sgeCount: 0, sges: [], sgeTotal: 0,
    ud: { ahId: 0, destQpn: 0, destQkey: 0 },
    rdma: { remoteVa: 0, rkey: 0 },
    atomic: { swapAddHi: 0, swapAddLo: 0, compareHi: 0, compareLo: 0, localVa: 0, localLkey: 0, localLen: 0 },
    regMr: { va: 0, length: 0, offset: 0, dmaAddr: 0, mapCount: 0, flags: 0, dirSizeLog2: 0, pageSizeLog2: 0 },
    bindMw: { va: 0, length: 0, lkey: 0, flags: 0 },
  };
}

/** A fresh reusable receive-WQE record. */
export function newRecvWqe(): RecvWqe {
  return {
    ok: true, wqeIdLo: 0, wqeIdHi: 0, op: 0, flags: 0, postedLength: 0,
    specFormat: SpecFormat.NONE, sgeCount: 0, sges: [], sgeTotal: 0,
  };
}

// ---------------------------------------------------------------------------
// Decoders

export interface SendDecodeOptions {
  /** Identity RDMA version: < 2 selects v1 opcodes and the v1 atomic layout. */
  readonly version: number;
  /** The QP is UD or GSI: the common body is {ah_id, dest_qpn, dest_qkey} and only SEND/SEND_IMM are valid. */
  readonly datagram: boolean;
}

/** Read a 64-bit address split into BE32 high and low words. */
function readSplitVa(buf: Buffer, hiAt: number, loAt: number): number {
  const hi = buf.readUInt32BE(hiAt);
  if (hi > 0x1fffff) return U64_UNSAFE;
  return hi * TWO_32 + buf.readUInt32BE(loAt);
}

/** Decode the SGL at the position the spec format selects. */
function decodeSgl(buf: Buffer, count: number, spec: number, rec: SglRecord): WqeError | null {
  if (spec > SpecFormat.SPEC16) return WqeErrors.BAD_SPEC;
  rec.specFormat = spec as SpecFormat;
  const first = spec === SpecFormat.NONE ? WQE_PLD_OFFSET : WQE_SPEC_SGL_OFFSET;
  if (first + count * ionic_sge.SIZE > buf.length) return WqeErrors.TOO_MANY_SGES;
  const sges = rec.sges;
  while (sges.length < count) sges.push({ va: 0, len: 0, lkey: 0 });
  let total = 0;
  for (let i = 0; i < count; i++) {
    const at = first + i * ionic_sge.SIZE;
    const sge = sges[i]!;
    sge.va = readU64BE(buf, at + ionic_sge.va.off);
    sge.len = buf.readUInt32BE(at + ionic_sge.len.off);
    sge.lkey = buf.readUInt32BE(at + ionic_sge.lkey.off);
    total += sge.len;
  }
  rec.sgeCount = count;
  rec.sgeTotal = total;
  return total > MAX_MSG_BYTES ? WqeErrors.MSG_TOO_LONG : null;
}

/**
 * Decode a send WQE. `buf` is the WQE slot (2^stride_log2 bytes): its length
 * bounds the SGL and inline data. Never throws; answers `out` filled in, or a
 * WqeError whose `status` is what the completion reports.
 */
export function decodeSendWqe(buf: Buffer, opts: SendDecodeOptions, out: SendWqe = newSendWqe()): SendWqe | WqeError {
  if (!Buffer.isBuffer(buf) || buf.length < MIN_WQE_SIZE) return WqeErrors.TRUNCATED;
  const op = buf.readUInt8(ionic_v1_base_hdr.op.off);
  const verb = verbOf(op, opts.version);
  if (verb === -1) return WqeErrors.BAD_OPCODE;
  if (opts.datagram && verb !== SendVerb.SEND && verb !== SendVerb.SEND_IMM) return WqeErrors.BAD_OPCODE;

  const flags = buf.readUInt16BE(ionic_v1_base_hdr.flags.off);
  out.verb = verb;
  out.opcode = op;
  out.wqeIdLo = buf.readUInt32LE(ionic_v1_base_hdr.wqe_id.off);
  out.wqeIdHi = buf.readUInt32LE(ionic_v1_base_hdr.wqe_id.off + 4);
  out.flags = flags;
  out.fence = (flags & WqeFlag.FENCE) !== 0;
  out.solicited = (flags & WqeFlag.SOLICITED) !== 0;
  out.signaled = (flags & WqeFlag.SIGNALED) !== 0;
  out.inline = (flags & WqeFlag.INLINE) !== 0;
  out.numSgeKey = buf.readUInt8(ionic_v1_base_hdr.num_sge_key.off);
  out.immDataKey = buf.readUInt32BE(ionic_v1_base_hdr.imm_data_key.off);
  out.specFormat = SpecFormat.NONE;
  out.sgeCount = 0;
  out.sgeTotal = 0;
  out.length = 0;
  out.inlineOffset = 0;
  out.inlineLength = 0;

  switch (verb) {
    case SendVerb.SEND:
    case SendVerb.SEND_INV:
    case SendVerb.SEND_IMM:
    case SendVerb.RDMA_WRITE:
    case SendVerb.RDMA_WRITE_IMM:
    case SendVerb.RDMA_READ:
      return decodeCommon(buf, opts, out);
    case SendVerb.ATOMIC_CS:
    case SendVerb.ATOMIC_FA:
      return out.inline ? WqeErrors.BAD_INLINE : decodeAtomic(buf, opts, out);
    case SendVerb.REG_MR: {
      if (out.inline) return WqeErrors.BAD_INLINE;
      const b = ionic_v1_reg_mr_bdy;
      const r = out.regMr;
      r.va = readU64BE(buf, b.va.off);
      r.length = readU64BE(buf, b.length.off);
      r.offset = readU64BE(buf, b.offset.off);
      r.dmaAddr = readU64BE(buf, b.dma_addr.off);
      r.mapCount = buf.readUInt32BE(b.map_count.off);
      r.flags = buf.readUInt16BE(b.flags.off);
      r.dirSizeLog2 = buf.readUInt8(b.dir_size_log2.off);
      r.pageSizeLog2 = buf.readUInt8(b.page_size_log2.off);
      return out;
    }
    case SendVerb.BIND_MW: {
      if (out.inline) return WqeErrors.BAD_INLINE;
      const b = ionic_v1_bind_mw_bdy;
      const m = out.bindMw;
      m.va = readU64BE(buf, b.va.off);
      m.length = readU64BE(buf, b.length.off);
      m.lkey = buf.readUInt32BE(b.lkey.off);
      m.flags = buf.readUInt16BE(b.flags.off);
      return out;
    }
    case SendVerb.LOCAL_INV:
      return out.inline ? WqeErrors.BAD_INLINE : out;
  }
}

function decodeCommon(buf: Buffer, opts: SendDecodeOptions, out: SendWqe): SendWqe | WqeError {
  const b = ionic_v1_common_bdy;
  if (opts.datagram) {
    out.ud.ahId = buf.readUInt32BE(b.ah_id.off);
    out.ud.destQpn = buf.readUInt32BE(b.dest_qpn.off);
    out.ud.destQkey = buf.readUInt32BE(b.dest_qkey.off);
  } else {
    out.rdma.remoteVa = readSplitVa(buf, b.remote_va_high.off, b.remote_va_low.off);
    out.rdma.rkey = buf.readUInt32BE(b.remote_rkey.off);
  }
  const length = buf.readUInt32BE(b.length.off);
  out.length = length;
  if (out.inline) {
    if (out.verb === SendVerb.RDMA_READ) return WqeErrors.BAD_INLINE;
    if (length > buf.length - b.PLD) return WqeErrors.INLINE_TOO_LONG;
    out.inlineOffset = b.PLD;
    out.inlineLength = length;
    return out;
  }
  const err = decodeSgl(buf, out.numSgeKey, out.flags >>> WqeFlag.SPEC_SHIFT, out);
  if (err) return err;
  return out.sgeTotal === length ? out : WqeErrors.LENGTH_MISMATCH;
}

function decodeAtomic(buf: Buffer, opts: SendDecodeOptions, out: SendWqe): SendWqe | WqeError {
  const b = ionic_v1_atomic_bdy;
  const a = out.atomic;
  out.rdma.remoteVa = readSplitVa(buf, b.remote_va_high.off, b.remote_va_low.off);
  out.rdma.rkey = buf.readUInt32BE(b.remote_rkey.off);
  a.swapAddHi = buf.readUInt32BE(b.swap_add_high.off);
  a.swapAddLo = buf.readUInt32BE(b.swap_add_low.off);
  a.compareHi = buf.readUInt32BE(b.compare_high.off);
  a.compareLo = buf.readUInt32BE(b.compare_low.off);
  out.length = ATOMIC_SIZE;
  if (opts.version >= 2) {
    a.localLkey = buf.readUInt32BE(ionic_v2_atomic_bdy.lkey.off);
    a.localVa = readU64BE(buf, ionic_v2_atomic_bdy.local_va.off);
    a.localLen = ATOMIC_SIZE;
    return out;
  }
  a.localVa = readU64BE(buf, b.SGE + ionic_sge.va.off);
  a.localLen = buf.readUInt32BE(b.SGE + ionic_sge.len.off);
  a.localLkey = buf.readUInt32BE(b.SGE + ionic_sge.lkey.off);
  return a.localLen === ATOMIC_SIZE ? out : WqeErrors.ATOMIC_LENGTH;
}

/**
 * Decode a receive WQE (the RQ slot, 2^stride_log2 bytes). The device only
 * reads RQ WQEs, never writes them. Never throws.
 */
export function decodeRecvWqe(buf: Buffer, out: RecvWqe = newRecvWqe()): RecvWqe | WqeError {
  if (!Buffer.isBuffer(buf) || buf.length < MIN_WQE_SIZE) return WqeErrors.TRUNCATED;
  const h = ionic_v1_base_hdr;
  out.wqeIdLo = buf.readUInt32LE(h.wqe_id.off);
  out.wqeIdHi = buf.readUInt32LE(h.wqe_id.off + 4);
  out.op = buf.readUInt8(h.op.off);
  out.flags = buf.readUInt16BE(h.flags.off);
  out.postedLength = buf.readUInt32BE(h.imm_data_key.off);
  out.specFormat = SpecFormat.NONE;
  out.sgeCount = 0;
  out.sgeTotal = 0;
  const err = decodeSgl(buf, buf.readUInt8(h.num_sge_key.off), out.flags >>> WqeFlag.SPEC_SHIFT, out);
  return err ?? out;
}

// ---------------------------------------------------------------------------
// CQE

/**
 * Everything a CQE can carry, flat; `type` selects which head fields are
 * written. Reuse one record; garbage values are truncated to field widths.
 */
export interface CqeRecord {
  type: CqeType;
  /** QP id (AQ id for admin CQEs), 24 bits. */
  qid: number;
  color: boolean;
  error: boolean;
  /** RECV success: byte count. Error bit set: the IonicStatus (admin: admin status). */
  statusLength: number;
  /** RECV wqe_id / SEND npg_wqe_id, as read from the WQE (wqeIdLo/Hi): echoed verbatim. */
  wqeIdLo: number;
  wqeIdHi: number;
  /** RECV head. */
  srcQpn: number;
  recvOp: RecvOp;
  ipv4: boolean;
  vlan: boolean;
  /** 6 bytes, or null for zeros. */
  srcMac: Buffer | null;
  /** Full 802.1Q TCI (PCP << 13 | VID), 0 when untagged. */
  vlanTag: number;
  /** Immediate as a BE32 number taken from the WQE's imm_data_key (keeps wire order), or the invalidated rkey. */
  immDataRkey: number;
  /** SEND_MSN head. */
  msn: number;
  /** ADMIN head. */
  cmdIdx: number;
  cmdOp: number;
}

/** A fresh zeroed CQE record. */
export function newCqeRecord(): CqeRecord {
  return {
    type: CqeType.RECV, qid: 0, color: false, error: false, statusLength: 0, wqeIdLo: 0, wqeIdHi: 0,
    srcQpn: 0, recvOp: RecvOp.SEND, ipv4: false, vlan: false, srcMac: null, vlanTag: 0, immDataRkey: 0,
    msn: 0, cmdIdx: 0, cmdOp: 0,
  };
}

/** The qid_type_flags word of a record. */
export function cqeQtf(rec: CqeRecord): number {
  return (((rec.qid & CqeBits.QID_MASK) << CqeBits.QID_SHIFT)
    | ((rec.type & CqeBits.TYPE_MASK) << CqeBits.TYPE_SHIFT)
    | (rec.error ? CqeBits.ERROR : 0)
    | (rec.color ? CqeBits.COLOR : 0)) >>> 0;
}

/** The src_qpn_op word of a RECV record. */
export function cqeSrcQpnOp(rec: CqeRecord): number {
  return ((rec.srcQpn & CqeBits.RECV_QPN_MASK)
    | ((rec.recvOp & CqeBits.RECV_OP_MASK) << CqeBits.RECV_OP_SHIFT)
    | (rec.vlan ? 1 << CqeBits.RECV_IS_VLAN_BIT : 0)
    | (rec.ipv4 ? 1 << CqeBits.RECV_IS_IPV4_BIT : 0)) >>> 0;
}

/**
 * Write bytes 0..30 of the CQE: the whole entry except the byte holding the
 * color bit (offset 31). Split out so the guest-memory writer can publish the
 * color byte separately, last.
 */
export function encodeCqeBody(rec: CqeRecord, out: Buffer, off: number): void {
  const c = ionic_v1_cqe;
  out.fill(0, off, off + c.qid_type_flags.off);
  switch (rec.type) {
    case CqeType.RECV:
      out.writeUInt32LE(rec.wqeIdLo >>> 0, off + c.recv_wqe_id.off);
      out.writeUInt32LE(rec.wqeIdHi >>> 0, off + c.recv_wqe_id.off + 4);
      out.writeUInt32BE(cqeSrcQpnOp(rec), off + c.recv_src_qpn_op.off);
      if (rec.srcMac) rec.srcMac.copy(out, off + c.recv_src_mac.off, 0, Math.min(rec.srcMac.length, c.recv_src_mac.size));
      out.writeUInt16BE(rec.vlanTag & 0xffff, off + c.recv_vlan_tag.off);
      out.writeUInt32BE(rec.immDataRkey >>> 0, off + c.recv_imm_data_rkey.off);
      break;
    case CqeType.SEND_MSN:
    case CqeType.SEND_NPG:
      out.writeUInt32BE(rec.msn >>> 0, off + c.send_msg_msn.off);
      out.writeUInt32LE(rec.wqeIdLo >>> 0, off + c.send_npg_wqe_id.off);
      out.writeUInt32LE(rec.wqeIdHi >>> 0, off + c.send_npg_wqe_id.off + 4);
      break;
    case CqeType.ADMIN:
      out.writeUInt16BE(rec.cmdIdx & 0xffff, off + c.admin_cmd_idx.off);
      out.writeUInt8(rec.cmdOp & 0xff, off + c.admin_cmd_op.off);
      break;
    default:
      break;
  }
  out.writeUInt32BE(rec.statusLength >>> 0, off + c.status_length.off);
  const qtf = cqeQtf(rec);
  const q = off + c.qid_type_flags.off;
  out[q] = qtf >>> 24;
  out[q + 1] = (qtf >>> 16) & 0xff;
  out[q + 2] = (qtf >>> 8) & 0xff;
}

/** Offset of the byte that carries the color bit (low byte of the BE32 qid_type_flags). */
export const CQE_COLOR_BYTE = ionic_v1_cqe.qid_type_flags.off + 3;

/**
 * Encode a 32-byte CQE at `out[off]`, writing the color byte (offset 31) last
 * so a guest polling a shared mapping never sees a new color on a half-written
 * entry. Returns false (writing nothing) if `out` has no room. Never throws on
 * the record's values.
 */
export function encodeCqe(rec: CqeRecord, out: Buffer, off = 0): boolean {
  if (!Number.isInteger(off) || off < 0 || off + ionic_v1_cqe.SIZE > out.length) return false;
  encodeCqeBody(rec, out, off);
  out[off + CQE_COLOR_BYTE] = cqeQtf(rec) & 0xff;
  return true;
}

/** Decode a CQE (the guest's view; used by tests and guest models). Returns false if `buf` is too short. */
export function decodeCqe(buf: Buffer, off: number, out: CqeRecord): boolean {
  const c = ionic_v1_cqe;
  if (!Number.isInteger(off) || off < 0 || off + c.SIZE > buf.length) return false;
  const qtf = buf.readUInt32BE(off + c.qid_type_flags.off);
  out.type = ((qtf >>> CqeBits.TYPE_SHIFT) & CqeBits.TYPE_MASK) as CqeType;
  out.qid = qtf >>> CqeBits.QID_SHIFT;
  out.color = (qtf & CqeBits.COLOR) !== 0;
  out.error = (qtf & CqeBits.ERROR) !== 0;
  out.statusLength = buf.readUInt32BE(off + c.status_length.off);
  const sqo = buf.readUInt32BE(off + c.recv_src_qpn_op.off);
  out.srcQpn = sqo & CqeBits.RECV_QPN_MASK;
  out.recvOp = ((sqo >>> CqeBits.RECV_OP_SHIFT) & CqeBits.RECV_OP_MASK) as RecvOp;
  out.vlan = ((sqo >>> CqeBits.RECV_IS_VLAN_BIT) & 1) === 1;
  out.ipv4 = ((sqo >>> CqeBits.RECV_IS_IPV4_BIT) & 1) === 1;
  out.srcMac = Buffer.from(buf.subarray(off + c.recv_src_mac.off, off + c.recv_src_mac.off + c.recv_src_mac.size));
  out.vlanTag = buf.readUInt16BE(off + c.recv_vlan_tag.off);
  out.immDataRkey = buf.readUInt32BE(off + c.recv_imm_data_rkey.off);
  out.msn = buf.readUInt32BE(off + c.send_msg_msn.off);
  const idAt = out.type === CqeType.RECV ? c.recv_wqe_id.off : c.send_npg_wqe_id.off;
  out.wqeIdLo = buf.readUInt32LE(off + idAt);
  out.wqeIdHi = buf.readUInt32LE(off + idAt + 4);
  out.cmdIdx = buf.readUInt16BE(off + c.admin_cmd_idx.off);
  out.cmdOp = buf.readUInt8(off + c.admin_cmd_op.off);
  return true;
}
