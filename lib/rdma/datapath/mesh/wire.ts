// The ionic wire header (lib/mesh ionic_wire_hdr, docs/mesh.md) as the mesh
// data path fills and reads it. One header per message, written into the
// first 60 bytes of the buffer that also carries the payload, so a request
// costs one allocation. Our uses of the C design's fields:
//   rsvd       flags: bit 0 = a datagram (UD/GSI) SEND, delivered without an ACK;
//              bit 1 = solicited
//   rkey       a datagram's effective Q_Key (checked by the responder)
//   remote_va  a datagram's source MAC (48 bits), for the receive CQE
//   swap_add   a datagram's IP version (bits 16..23) and VLAN (bit 24 set, TCI in 0..15)
//   status     the responder's answer: an IonicStatus code (0 = done)

import { getField, le, setField } from '../../../../protocol/field';
import { IONIC_WIRE_MAGIC, ionic_wire_hdr as H } from '../../../mesh';

export const WIRE_HEADER_SIZE = H.SIZE;
/** rsvd bit 0: a datagram SEND. */
export const WIRE_FLAG_DATAGRAM = 1;
/** rsvd bit 1: the WQE asked for a solicited event. */
export const WIRE_FLAG_SOLICITED = 2;

const VLAN_PRESENT = 1 << 24;

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

export function newWireHeader(): WireHeader {
  return {
    op: 0, atomicCs: false, flags: 0, srcQp: 0, dstQp: 0, reqId: 0, rkey: 0, length: 0, imm: 0, status: 0, remoteVa: 0,
    swapAddLo: 0, swapAddHi: 0, compareLo: 0, compareHi: 0,
  };
}

/** The 64-bit little-endian operands as their 32-bit halves (no bigint per message). */
const half = (f: typeof H.swap_add, hi: boolean) => le(f.off + (hi ? 4 : 0), 4);
const SWAP_LO = half(H.swap_add, false);
const SWAP_HI = half(H.swap_add, true);
const CMP_LO = half(H.compare, false);
const CMP_HI = half(H.compare, true);

/** Write `h` into buf[0, 60). */
export function writeWireHeader(buf: Buffer, h: WireHeader): void {
  setField(buf, 0, H.magic, IONIC_WIRE_MAGIC);
  setField(buf, 0, H.op, h.op);
  setField(buf, 0, H.atomic_cs, h.atomicCs ? 1 : 0);
  setField(buf, 0, H.rsvd, h.flags);
  setField(buf, 0, H.src_qp_id, h.srcQp >>> 0);
  setField(buf, 0, H.dst_qp_id, h.dstQp >>> 0);
  setField(buf, 0, H.req_id, h.reqId >>> 0);
  setField(buf, 0, H.rkey, h.rkey >>> 0);
  setField(buf, 0, H.length, h.length >>> 0);
  setField(buf, 0, H.imm_be, h.imm >>> 0);
  setField(buf, 0, H.status, h.status >>> 0);
  setField(buf, 0, H.remote_va, h.remoteVa);
  setField(buf, 0, SWAP_LO, h.swapAddLo >>> 0);
  setField(buf, 0, SWAP_HI, h.swapAddHi >>> 0);
  setField(buf, 0, CMP_LO, h.compareLo >>> 0);
  setField(buf, 0, CMP_HI, h.compareHi >>> 0);
}

/** Read a received header (the mesh checked its magic) into `out`. remoteVa above 2^53 reads as -1. */
export function readWireHeader(buf: Buffer, out: WireHeader): void {
  out.op = getField(buf, 0, H.op);
  out.atomicCs = getField(buf, 0, H.atomic_cs) === 1;
  out.flags = getField(buf, 0, H.rsvd);
  out.srcQp = getField(buf, 0, H.src_qp_id);
  out.dstQp = getField(buf, 0, H.dst_qp_id);
  out.reqId = getField(buf, 0, H.req_id);
  out.rkey = getField(buf, 0, H.rkey);
  out.length = getField(buf, 0, H.length);
  out.imm = getField(buf, 0, H.imm_be);
  out.status = getField(buf, 0, H.status);
  out.remoteVa = getField(buf, 0, H.remote_va);
  out.swapAddLo = getField(buf, 0, SWAP_LO);
  out.swapAddHi = getField(buf, 0, SWAP_HI);
  out.compareLo = getField(buf, 0, CMP_LO);
  out.compareHi = getField(buf, 0, CMP_HI);
}

/** A datagram's receive-side address facts, packed into remote_va / swap_add. */
export function packDatagramAv(h: WireHeader, smac: Buffer, ipVersion: number, vlanTci: number): void {
  h.remoteVa = smac.readUIntBE(0, 6);
  h.swapAddLo = ((ipVersion & 0xff) << 16) | (vlanTci >= 0 ? VLAN_PRESENT | (vlanTci & 0xffff) : 0);
  h.swapAddHi = 0;
}

/** The inverse of packDatagramAv: writes the MAC into `smac`, returns [ipVersion, vlanTci or -1]. */
export function unpackDatagramAv(h: WireHeader, smac: Buffer): [number, number] {
  smac.writeUIntBE(h.remoteVa >= 0 ? h.remoteVa % 2 ** 48 : 0, 0, 6);
  const ipVersion = (h.swapAddLo >>> 16) & 0xff;
  const vlan = h.swapAddLo & VLAN_PRESENT ? h.swapAddLo & 0xffff : -1;
  return [ipVersion, vlan];
}
