// Reading and writing the transport part of a RoCEv2 packet: the BTH and the
// extended headers its opcode calls for (opcodes.ts), and where the payload
// lies. One reused TransportHeaders object holds a decoded packet or the
// packet about to be written, so neither direction allocates. Decoding never
// throws: bytes from the wire that do not make a packet give a drop reason.

import { getField, getSplitU64, setField } from '../../protocol/field';
import { DROP_BAD_OPCODE, DROP_BAD_PAD, DROP_BAD_TVER, DROP_NONE, DROP_TRUNCATED } from './counters';
import {
  aeth,
  AETH_SYNDROME_SHIFT,
  atomicacketh,
  atomiceth,
  bth,
  BTH_ACK_REQ,
  BTH_BECN,
  BTH_FECN,
  BTH_MIG_REQ,
  BTH_PAD_MASK,
  BTH_PAD_SHIFT,
  BTH_SE,
  BTH_TVER_MASK,
  DEFAULT_PKEY,
  deth,
  ieth,
  immdt,
  MASK_24,
  reth,
} from './headers';
import {
  F_AETH,
  F_ATOMICACKETH,
  F_ATOMICETH,
  F_DETH,
  F_IETH,
  F_IMMDT,
  F_PAYLOAD,
  F_RETH,
  OPCODE_FLAGS,
  OPCODE_HEADER_BYTES,
} from './opcodes';

/** The transport headers of one packet, field by field; fields its opcode does not carry are left as they were. */
export class TransportHeaders {
  opcode = 0;
  solicited = false;
  migReq = false;
  padCount = 0;
  tver = 0;
  pkey = DEFAULT_PKEY;
  fecn = false;
  becn = false;
  destQp = 0;
  ackReq = false;
  psn = 0;
  /** RETH or AtomicETH: remote virtual address (U64_UNSAFE above 2^53-1) and R_Key. */
  va = 0;
  rkey = 0;
  /** RETH: DMA length. */
  dmaLen = 0;
  /** AETH. */
  syndrome = 0;
  msn = 0;
  /** DETH. */
  qkey = 0;
  srcQp = 0;
  /** ImmDt (opaque, as a big-endian word). */
  imm = 0;
  /** IETH: the R_Key to invalidate. */
  invRkey = 0;
  /** AtomicETH operands: swap (or add) and compare, high and low words. */
  swapHi = 0;
  swapLo = 0;
  cmpHi = 0;
  cmpLo = 0;
  /** AtomicAckETH: the original remote data. */
  origHi = 0;
  origLo = 0;
  /** Where the payload starts (absolute offset in the buffer) and its length without pad. */
  payloadOff = 0;
  payloadLen = 0;
}

/**
 * Decode the transport headers in buf[off, end) (end: where the ICRC starts)
 * into h. Returns DROP_NONE, or why these bytes are not a packet we take.
 */
export function decodeTransport(buf: Buffer, off: number, end: number, h: TransportHeaders): number {
  if (off < 0 || end > buf.length || end - off < bth.SIZE) return DROP_TRUNCATED;
  const opcode = getField(buf, off, bth.opcode);
  const flags = OPCODE_FLAGS[opcode]!;
  if (!flags) return DROP_BAD_OPCODE;
  const hdrBytes = OPCODE_HEADER_BYTES[opcode]!;
  if (end - off < hdrBytes) return DROP_TRUNCATED;
  const f1 = getField(buf, off, bth.flags);
  if ((f1 & BTH_TVER_MASK) !== 0) return DROP_BAD_TVER;
  const pad = (f1 >>> BTH_PAD_SHIFT) & BTH_PAD_MASK;
  const rest = end - off - hdrBytes;
  // Pad only rounds payload up to four bytes; an opcode without payload carries neither.
  if (pad > rest || (!(flags & F_PAYLOAD) && rest !== 0) || (rest & 3) !== 0) return DROP_BAD_PAD;
  h.opcode = opcode;
  h.solicited = (f1 & BTH_SE) !== 0;
  h.migReq = (f1 & BTH_MIG_REQ) !== 0;
  h.padCount = pad;
  h.tver = 0;
  h.pkey = getField(buf, off, bth.pkey);
  const w1 = getField(buf, off, bth.ecn_dest_qp);
  h.fecn = (w1 & BTH_FECN) !== 0;
  h.becn = (w1 & BTH_BECN) !== 0;
  h.destQp = w1 & MASK_24;
  const w2 = getField(buf, off, bth.ack_psn);
  h.ackReq = (w2 & BTH_ACK_REQ) !== 0;
  h.psn = w2 & MASK_24;
  let at = off + bth.SIZE;
  // The order of extended headers is fixed by the IBTA: RETH/AtomicETH/DETH, AETH, AtomicAckETH, ImmDt/IETH.
  if (flags & F_DETH) {
    h.qkey = getField(buf, at, deth.qkey);
    h.srcQp = getField(buf, at, deth.src_qp) & MASK_24;
    at += deth.SIZE;
  }
  if (flags & F_RETH) {
    h.va = getSplitU64(buf, at, reth.va_hi, reth.va_lo);
    h.rkey = getField(buf, at, reth.rkey);
    h.dmaLen = getField(buf, at, reth.dma_len);
    at += reth.SIZE;
  }
  if (flags & F_ATOMICETH) {
    h.va = getSplitU64(buf, at, atomiceth.va_hi, atomiceth.va_lo);
    h.rkey = getField(buf, at, atomiceth.rkey);
    h.swapHi = getField(buf, at, atomiceth.swap_add_hi);
    h.swapLo = getField(buf, at, atomiceth.swap_add_lo);
    h.cmpHi = getField(buf, at, atomiceth.compare_hi);
    h.cmpLo = getField(buf, at, atomiceth.compare_lo);
    at += atomiceth.SIZE;
  }
  if (flags & F_AETH) {
    const w = getField(buf, at, aeth.syn_msn);
    h.syndrome = w >>> AETH_SYNDROME_SHIFT;
    h.msn = w & MASK_24;
    at += aeth.SIZE;
  }
  if (flags & F_ATOMICACKETH) {
    h.origHi = getField(buf, at, atomicacketh.orig_hi);
    h.origLo = getField(buf, at, atomicacketh.orig_lo);
    at += atomicacketh.SIZE;
  }
  if (flags & F_IMMDT) {
    h.imm = getField(buf, at, immdt.imm);
    at += immdt.SIZE;
  }
  if (flags & F_IETH) {
    h.invRkey = getField(buf, at, ieth.rkey);
    at += ieth.SIZE;
  }
  h.payloadOff = at;
  h.payloadLen = rest - pad;
  return DROP_NONE;
}

/**
 * Write the BTH and the extended headers of h.opcode at buf[off]; returns
 * their length. The pad count comes from h.payloadLen. Values must fit their
 * fields (our own state, never peer input), or setField throws.
 */
export function encodeTransport(buf: Buffer, off: number, h: TransportHeaders): number {
  const flags = OPCODE_FLAGS[h.opcode & 0xff]!;
  if (!flags) throw new RangeError(`opcode 0x${h.opcode.toString(16)} is not one we send`);
  const pad = (4 - (h.payloadLen & 3)) & 3;
  h.padCount = pad;
  setField(buf, off, bth.opcode, h.opcode);
  setField(buf, off, bth.flags, (h.solicited ? BTH_SE : 0) | (h.migReq ? BTH_MIG_REQ : 0) | (pad << BTH_PAD_SHIFT));
  setField(buf, off, bth.pkey, h.pkey);
  setField(buf, off, bth.ecn_dest_qp, ((h.fecn ? BTH_FECN : 0) | (h.becn ? BTH_BECN : 0) | (h.destQp & MASK_24)) >>> 0);
  setField(buf, off, bth.ack_psn, ((h.ackReq ? BTH_ACK_REQ : 0) | (h.psn & MASK_24)) >>> 0);
  let at = off + bth.SIZE;
  if (flags & F_DETH) {
    setField(buf, at, deth.qkey, h.qkey >>> 0);
    setField(buf, at, deth.src_qp, h.srcQp & MASK_24);
    at += deth.SIZE;
  }
  if (flags & F_RETH) {
    setField(buf, at, reth.va, h.va);
    setField(buf, at, reth.rkey, h.rkey >>> 0);
    setField(buf, at, reth.dma_len, h.dmaLen >>> 0);
    at += reth.SIZE;
  }
  if (flags & F_ATOMICETH) {
    setField(buf, at, atomiceth.va, h.va);
    setField(buf, at, atomiceth.rkey, h.rkey >>> 0);
    setField(buf, at, atomiceth.swap_add_hi, h.swapHi >>> 0);
    setField(buf, at, atomiceth.swap_add_lo, h.swapLo >>> 0);
    setField(buf, at, atomiceth.compare_hi, h.cmpHi >>> 0);
    setField(buf, at, atomiceth.compare_lo, h.cmpLo >>> 0);
    at += atomiceth.SIZE;
  }
  if (flags & F_AETH) {
    setField(buf, at, aeth.syn_msn, (((h.syndrome & 0xff) << AETH_SYNDROME_SHIFT) | (h.msn & MASK_24)) >>> 0);
    at += aeth.SIZE;
  }
  if (flags & F_ATOMICACKETH) {
    setField(buf, at, atomicacketh.orig_hi, h.origHi >>> 0);
    setField(buf, at, atomicacketh.orig_lo, h.origLo >>> 0);
    at += atomicacketh.SIZE;
  }
  if (flags & F_IMMDT) {
    setField(buf, at, immdt.imm, h.imm >>> 0);
    at += immdt.SIZE;
  }
  if (flags & F_IETH) {
    setField(buf, at, ieth.rkey, h.invRkey >>> 0);
    at += ieth.SIZE;
  }
  return at - off;
}
