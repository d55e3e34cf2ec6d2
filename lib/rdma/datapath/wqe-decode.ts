// Decoders for the send and receive WQEs of the ionic data path (tables in
// wqe-layout.ts). Guest rings are untrusted: the decoders never throw on any
// input, they answer a record or a prebuilt error value carrying the CQE
// status hardware would report. Records are reused (pass `out`) so a hot
// loop allocates nothing but what it grows the first time.

import { getField, getRawWord, getSplitU64 } from '../../../protocol/field';
import { RDMA_MAX_MSG_BYTES } from '../limits';
import { IonicStatus } from './cqe';
import {
  ATOMIC_SIZE,
  ionic_sge,
  ionic_v1_atomic_bdy,
  ionic_v1_base_hdr,
  ionic_v1_bind_mw_bdy,
  ionic_v1_common_bdy,
  ionic_v1_reg_mr_bdy,
  ionic_v2_atomic_bdy,
  MIN_WQE_SIZE,
  SendVerb,
  SpecFormat,
  verbOf,
  WQE_PLD_OFFSET,
  WQE_SPEC_SGL_OFFSET,
  WqeFlag,
} from './wqe-layout';

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
  /** SGE lengths adding up to more than RDMA_MAX_MSG_BYTES. */
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
const WqeErrors = {
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

/** One decoded SGE. `va` is U64_UNSAFE (protocol/field.ts) when above 2^53 - 1 (no MR can contain it). */
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
  /** Sum of the first `sgeCount` SGE lengths (<= RDMA_MAX_MSG_BYTES). */
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
    swapAddHi: number;
    swapAddLo: number;
    compareHi: number;
    compareLo: number;
    localVa: number;
    localLkey: number;
    localLen: number;
  };
  /** REG_MR body. */
  regMr: {
    va: number;
    length: number;
    offset: number;
    dmaAddr: number;
    mapCount: number;
    flags: number;
    dirSizeLog2: number;
    pageSizeLog2: number;
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
    ok: true,
    verb: SendVerb.SEND,
    opcode: 0,
    wqeIdLo: 0,
    wqeIdHi: 0,
    flags: 0,
    fence: false,
    solicited: false,
    signaled: false,
    inline: false,
    numSgeKey: 0,
    immDataKey: 0,
    length: 0,
    inlineOffset: 0,
    inlineLength: 0,
    specFormat: SpecFormat.NONE,
    sgeCount: 0,
    sges: [],
    sgeTotal: 0,
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
    ok: true,
    wqeIdLo: 0,
    wqeIdHi: 0,
    op: 0,
    flags: 0,
    postedLength: 0,
    specFormat: SpecFormat.NONE,
    sgeCount: 0,
    sges: [],
    sgeTotal: 0,
  };
}

// ---------------------------------------------------------------------------
// Decoders

interface SendDecodeOptions {
  /** Identity RDMA version: < 2 selects v1 opcodes and the v1 atomic layout. */
  readonly version: number;
  /** The QP is UD or GSI: the common body is {ah_id, dest_qpn, dest_qkey} and only SEND/SEND_IMM are valid. */
  readonly datagram: boolean;
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
    sge.va = getField(buf, at, ionic_sge.va);
    sge.len = getField(buf, at, ionic_sge.len);
    sge.lkey = getField(buf, at, ionic_sge.lkey);
    total += sge.len;
  }
  rec.sgeCount = count;
  rec.sgeTotal = total;
  return total > RDMA_MAX_MSG_BYTES ? WqeErrors.MSG_TOO_LONG : null;
}

/**
 * Decode a send WQE. `buf` is the WQE slot (2^stride_log2 bytes): its length
 * bounds the SGL and inline data. Never throws; answers `out` filled in, or a
 * WqeError whose `status` is what the completion reports.
 */
export function decodeSendWqe(buf: Buffer, opts: SendDecodeOptions, out: SendWqe = newSendWqe()): SendWqe | WqeError {
  if (!Buffer.isBuffer(buf) || buf.length < MIN_WQE_SIZE) return WqeErrors.TRUNCATED;
  const op = getField(buf, 0, ionic_v1_base_hdr.op);
  const verb = verbOf(op, opts.version);
  if (verb === -1) return WqeErrors.BAD_OPCODE;
  if (opts.datagram && verb !== SendVerb.SEND && verb !== SendVerb.SEND_IMM) return WqeErrors.BAD_OPCODE;

  const flags = getField(buf, 0, ionic_v1_base_hdr.flags);
  out.verb = verb;
  out.opcode = op;
  out.wqeIdLo = getRawWord(buf, 0, ionic_v1_base_hdr.wqe_id, 0);
  out.wqeIdHi = getRawWord(buf, 0, ionic_v1_base_hdr.wqe_id, 1);
  out.flags = flags;
  out.fence = (flags & WqeFlag.FENCE) !== 0;
  out.solicited = (flags & WqeFlag.SOLICITED) !== 0;
  out.signaled = (flags & WqeFlag.SIGNALED) !== 0;
  out.inline = (flags & WqeFlag.INLINE) !== 0;
  out.numSgeKey = getField(buf, 0, ionic_v1_base_hdr.num_sge_key);
  out.immDataKey = getField(buf, 0, ionic_v1_base_hdr.imm_data_key);
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
      const r = out.regMr;
      r.va = getField(buf, 0, ionic_v1_reg_mr_bdy.va);
      r.length = getField(buf, 0, ionic_v1_reg_mr_bdy.length);
      r.offset = getField(buf, 0, ionic_v1_reg_mr_bdy.offset);
      r.dmaAddr = getField(buf, 0, ionic_v1_reg_mr_bdy.dma_addr);
      r.mapCount = getField(buf, 0, ionic_v1_reg_mr_bdy.map_count);
      r.flags = getField(buf, 0, ionic_v1_reg_mr_bdy.flags);
      r.dirSizeLog2 = getField(buf, 0, ionic_v1_reg_mr_bdy.dir_size_log2);
      r.pageSizeLog2 = getField(buf, 0, ionic_v1_reg_mr_bdy.page_size_log2);
      return out;
    }
    case SendVerb.BIND_MW: {
      if (out.inline) return WqeErrors.BAD_INLINE;
      const m = out.bindMw;
      m.va = getField(buf, 0, ionic_v1_bind_mw_bdy.va);
      m.length = getField(buf, 0, ionic_v1_bind_mw_bdy.length);
      m.lkey = getField(buf, 0, ionic_v1_bind_mw_bdy.lkey);
      m.flags = getField(buf, 0, ionic_v1_bind_mw_bdy.flags);
      return out;
    }
    case SendVerb.LOCAL_INV:
      return out.inline ? WqeErrors.BAD_INLINE : out;
  }
}

function decodeCommon(buf: Buffer, opts: SendDecodeOptions, out: SendWqe): SendWqe | WqeError {
  if (opts.datagram) {
    out.ud.ahId = getField(buf, 0, ionic_v1_common_bdy.ah_id);
    out.ud.destQpn = getField(buf, 0, ionic_v1_common_bdy.dest_qpn);
    out.ud.destQkey = getField(buf, 0, ionic_v1_common_bdy.dest_qkey);
  } else {
    out.rdma.remoteVa = getSplitU64(buf, 0, ionic_v1_common_bdy.remote_va_high, ionic_v1_common_bdy.remote_va_low);
    out.rdma.rkey = getField(buf, 0, ionic_v1_common_bdy.remote_rkey);
  }
  const length = getField(buf, 0, ionic_v1_common_bdy.length);
  out.length = length;
  if (out.inline) {
    if (out.verb === SendVerb.RDMA_READ) return WqeErrors.BAD_INLINE;
    if (length > buf.length - ionic_v1_common_bdy.PLD) return WqeErrors.INLINE_TOO_LONG;
    out.inlineOffset = ionic_v1_common_bdy.PLD;
    out.inlineLength = length;
    return out;
  }
  const err = decodeSgl(buf, out.numSgeKey, out.flags >>> WqeFlag.SPEC_SHIFT, out);
  if (err) return err;
  return out.sgeTotal === length ? out : WqeErrors.LENGTH_MISMATCH;
}

function decodeAtomic(buf: Buffer, opts: SendDecodeOptions, out: SendWqe): SendWqe | WqeError {
  const a = out.atomic;
  out.rdma.remoteVa = getSplitU64(buf, 0, ionic_v1_atomic_bdy.remote_va_high, ionic_v1_atomic_bdy.remote_va_low);
  out.rdma.rkey = getField(buf, 0, ionic_v1_atomic_bdy.remote_rkey);
  a.swapAddHi = getField(buf, 0, ionic_v1_atomic_bdy.swap_add_high);
  a.swapAddLo = getField(buf, 0, ionic_v1_atomic_bdy.swap_add_low);
  a.compareHi = getField(buf, 0, ionic_v1_atomic_bdy.compare_high);
  a.compareLo = getField(buf, 0, ionic_v1_atomic_bdy.compare_low);
  out.length = ATOMIC_SIZE;
  if (opts.version >= 2) {
    a.localLkey = getField(buf, 0, ionic_v2_atomic_bdy.lkey);
    a.localVa = getField(buf, 0, ionic_v2_atomic_bdy.local_va);
    a.localLen = ATOMIC_SIZE;
    return out;
  }
  a.localVa = getField(buf, ionic_v1_atomic_bdy.SGE, ionic_sge.va);
  a.localLen = getField(buf, ionic_v1_atomic_bdy.SGE, ionic_sge.len);
  a.localLkey = getField(buf, ionic_v1_atomic_bdy.SGE, ionic_sge.lkey);
  return a.localLen === ATOMIC_SIZE ? out : WqeErrors.ATOMIC_LENGTH;
}

/**
 * Decode a receive WQE (the RQ slot, 2^stride_log2 bytes). The device only
 * reads RQ WQEs, never writes them. Never throws.
 */
export function decodeRecvWqe(buf: Buffer, out: RecvWqe = newRecvWqe()): RecvWqe | WqeError {
  if (!Buffer.isBuffer(buf) || buf.length < MIN_WQE_SIZE) return WqeErrors.TRUNCATED;
  out.wqeIdLo = getRawWord(buf, 0, ionic_v1_base_hdr.wqe_id, 0);
  out.wqeIdHi = getRawWord(buf, 0, ionic_v1_base_hdr.wqe_id, 1);
  out.op = getField(buf, 0, ionic_v1_base_hdr.op);
  out.flags = getField(buf, 0, ionic_v1_base_hdr.flags);
  out.postedLength = getField(buf, 0, ionic_v1_base_hdr.imm_data_key);
  out.specFormat = SpecFormat.NONE;
  out.sgeCount = 0;
  out.sgeTotal = 0;
  const err = decodeSgl(buf, getField(buf, 0, ionic_v1_base_hdr.num_sge_key), out.flags >>> WqeFlag.SPEC_SHIFT, out);
  return err ?? out;
}
