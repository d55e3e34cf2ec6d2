// struct ionic_wire_hdr as one reusable record: the single reader and writer
// of its layout (layouts.ts ionic_wire_hdr). The data path fills and reads
// one per message with no allocation (64-bit operands as 32-bit halves); the
// codec's encodeIonicWireHeader / decodeIonicWireHeader (bigint, checked) are
// built on these.

import { getField, le, setField } from '../../protocol/field';
import { ionic_wire_hdr, IONIC_WIRE_MAGIC } from './layouts';

export const IONIC_WIRE_HEADER_SIZE = ionic_wire_hdr.SIZE;

/** The fields of one header (reused: decode into it, encode from it). */
export interface WireHeader {
  op: number;
  atomicCs: boolean;
  flags: number;
  srcQp: number;
  dstQp: number;
  reqId: number;
  rkey: number;
  length: number;
  imm: number;
  status: number;
  remoteVa: number;
  /** 64-bit atomic operands as 32-bit halves. */
  swapAddLo: number;
  swapAddHi: number;
  compareLo: number;
  compareHi: number;
}

/** A zeroed record. */
export function newWireHeader(): WireHeader {
  return {
    op: 0,
    atomicCs: false,
    flags: 0,
    srcQp: 0,
    dstQp: 0,
    reqId: 0,
    rkey: 0,
    length: 0,
    imm: 0,
    status: 0,
    remoteVa: 0,
    swapAddLo: 0,
    swapAddHi: 0,
    compareLo: 0,
    compareHi: 0,
  };
}

/** The 64-bit little-endian operands as their 32-bit halves (no bigint per message). */
const half = (f: typeof ionic_wire_hdr.swap_add, hi: boolean) => le(f.off + (hi ? 4 : 0), 4);
const SWAP_LO = half(ionic_wire_hdr.swap_add, false);
const SWAP_HI = half(ionic_wire_hdr.swap_add, true);
const CMP_LO = half(ionic_wire_hdr.compare, false);
const CMP_HI = half(ionic_wire_hdr.compare, true);

/** Write `h` into buf[0, 60). */
export function writeWireHeader(buf: Buffer, h: WireHeader): void {
  setField(buf, 0, ionic_wire_hdr.magic, IONIC_WIRE_MAGIC);
  setField(buf, 0, ionic_wire_hdr.op, h.op);
  setField(buf, 0, ionic_wire_hdr.atomic_cs, h.atomicCs ? 1 : 0);
  setField(buf, 0, ionic_wire_hdr.rsvd, h.flags);
  setField(buf, 0, ionic_wire_hdr.src_qp_id, h.srcQp >>> 0);
  setField(buf, 0, ionic_wire_hdr.dst_qp_id, h.dstQp >>> 0);
  setField(buf, 0, ionic_wire_hdr.req_id, h.reqId >>> 0);
  setField(buf, 0, ionic_wire_hdr.rkey, h.rkey >>> 0);
  setField(buf, 0, ionic_wire_hdr.length, h.length >>> 0);
  setField(buf, 0, ionic_wire_hdr.imm_be, h.imm >>> 0);
  setField(buf, 0, ionic_wire_hdr.status, h.status >>> 0);
  setField(buf, 0, ionic_wire_hdr.remote_va, h.remoteVa);
  setField(buf, 0, SWAP_LO, h.swapAddLo >>> 0);
  setField(buf, 0, SWAP_HI, h.swapAddHi >>> 0);
  setField(buf, 0, CMP_LO, h.compareLo >>> 0);
  setField(buf, 0, CMP_HI, h.compareHi >>> 0);
}

/** Read a received header (the mesh checked its magic) into `out`. remoteVa above 2^53 reads as -1. */
export function readWireHeader(buf: Buffer, out: WireHeader): void {
  out.op = getField(buf, 0, ionic_wire_hdr.op);
  out.atomicCs = getField(buf, 0, ionic_wire_hdr.atomic_cs) === 1;
  out.flags = getField(buf, 0, ionic_wire_hdr.rsvd);
  out.srcQp = getField(buf, 0, ionic_wire_hdr.src_qp_id);
  out.dstQp = getField(buf, 0, ionic_wire_hdr.dst_qp_id);
  out.reqId = getField(buf, 0, ionic_wire_hdr.req_id);
  out.rkey = getField(buf, 0, ionic_wire_hdr.rkey);
  out.length = getField(buf, 0, ionic_wire_hdr.length);
  out.imm = getField(buf, 0, ionic_wire_hdr.imm_be);
  out.status = getField(buf, 0, ionic_wire_hdr.status);
  out.remoteVa = getField(buf, 0, ionic_wire_hdr.remote_va);
  out.swapAddLo = getField(buf, 0, SWAP_LO);
  out.swapAddHi = getField(buf, 0, SWAP_HI);
  out.compareLo = getField(buf, 0, CMP_LO);
  out.compareHi = getField(buf, 0, CMP_HI);
}
