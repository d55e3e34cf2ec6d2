// struct ionic_v1_cqe, the one definition for admin and data CQs alike
// (drivers/infiniband/hw/ionic/ionic_fw.h; docs/driver-contract.md (ionic RDMA)
// 2.2, 4.6): its named-offset table, the qid_type_flags / src_qpn_op bits, the
// status and type codes, and the CQE as a record.
//
// Producers (the admin queue, the data path) fill a reused CqeRecord and hand
// it to the CQ (./cq-ring.ts `postCqe`, `postDataCqe`), which alone
// sets the color and encodes it into the guest's ring with encodeCqe. Byte
// order is mixed: the heads and the tail are big-endian, the wqe_id words are
// opaque bytes echoed verbatim, the admin cindex words are little-endian.

import { be, getField, getRawWord, le, raw, setField, setRawBytes, setRawWord, viewRaw } from '../../../protocol/field';

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
  'ok',
  'local-len',
  'local-qp-oper',
  'local-prot',
  'wqe-flushed',
  'mem-mgmt-oper',
  'bad-resp',
  'local-acc',
  'remote-inv-req',
  'remote-acc',
  'remote-oper',
  'retry-exceeded',
  'rnr-retry-exceeded',
  'xrc-vio',
  'local-sgl-inv',
] as const;

/**
 * A requester status that is the responder's error (remote access, invalid
 * request, remote operational): an RC responder that answers with one of
 * these NAKs goes to ERR itself, as an HCA's does, so a key cannot be
 * guessed over one connection.
 */
export function isResponderError(status: number): boolean {
  return (
    status === IonicStatus.REMOTE_ACC || status === IonicStatus.REMOTE_INV_REQ || status === IonicStatus.REMOTE_OPER
  );
}

/** Name of an IonicStatus, for logs and test messages. */
export function ionicStatusName(s: number): string {
  return STATUS_NAMES[s] ?? `status-${s}`;
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

/**
 * Everything a CQE can carry, flat; `type` selects which head fields are
 * written. Reuse one record; values are masked to their field widths.
 */
export interface CqeRecord {
  type: CqeType;
  /** QP id (AQ id for admin CQEs), 24 bits. */
  qid: number;
  /** Set by the CQ when it writes the entry (its current lap); read back by decodeCqe. */
  color: boolean;
  error: boolean;
  /** Success: byte count (admin: the output length). Error bit set: the IonicStatus (admin: the admin status). */
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
  /** ADMIN head: the ring index of the command's first stride, and its opcode. */
  cmdIdx: number;
  cmdOp: number;
}

/** A fresh zeroed CQE record. */
export function newCqeRecord(): CqeRecord {
  return {
    type: CqeType.RECV,
    qid: 0,
    color: false,
    error: false,
    statusLength: 0,
    wqeIdLo: 0,
    wqeIdHi: 0,
    srcQpn: 0,
    recvOp: RecvOp.SEND,
    ipv4: false,
    vlan: false,
    srcMac: null,
    vlanTag: 0,
    immDataRkey: 0,
    msn: 0,
    cmdIdx: 0,
    cmdOp: 0,
  };
}

/** The qid_type_flags word of a record (color included). */
export function cqeQtf(rec: CqeRecord): number {
  return (
    (((rec.qid & CqeBits.QID_MASK) << CqeBits.QID_SHIFT) |
      ((rec.type & CqeBits.TYPE_MASK) << CqeBits.TYPE_SHIFT) |
      (rec.error ? CqeBits.ERROR : 0) |
      (rec.color ? CqeBits.COLOR : 0)) >>>
    0
  );
}

/** The src_qpn_op word of a RECV record. */
export function cqeSrcQpnOp(rec: CqeRecord): number {
  return (
    ((rec.srcQpn & CqeBits.RECV_QPN_MASK) |
      ((rec.recvOp & CqeBits.RECV_OP_MASK) << CqeBits.RECV_OP_SHIFT) |
      (rec.vlan ? 1 << CqeBits.RECV_IS_VLAN_BIT : 0) |
      (rec.ipv4 ? 1 << CqeBits.RECV_IS_IPV4_BIT : 0)) >>>
    0
  );
}

/**
 * Encode a 32-byte CQE at `out[off]`, qid_type_flags (whose low byte holds the
 * color) last, so a guest polling a shared mapping never sees the new color on
 * a half-written entry. Returns false (writing nothing) if `out` has no room.
 * Never throws on the record's values. Only the CQ calls this for guest
 * memory (cq-ring.ts).
 */
export function encodeCqe(rec: CqeRecord, out: Buffer, off = 0): boolean {
  const c = ionic_v1_cqe;
  if (!Number.isInteger(off) || off < 0 || off + c.SIZE > out.length) return false;
  out.fill(0, off, off + c.status_length.off);
  switch (rec.type) {
    case CqeType.RECV:
      setRawWord(out, off, c.recv_wqe_id, 0, rec.wqeIdLo);
      setRawWord(out, off, c.recv_wqe_id, 1, rec.wqeIdHi);
      setField(out, off, c.recv_src_qpn_op, cqeSrcQpnOp(rec));
      setRawBytes(out, off, c.recv_src_mac, rec.srcMac);
      setField(out, off, c.recv_vlan_tag, rec.vlanTag & 0xffff);
      setField(out, off, c.recv_imm_data_rkey, rec.immDataRkey >>> 0);
      break;
    case CqeType.SEND_MSN:
    case CqeType.SEND_NPG:
      setField(out, off, c.send_msg_msn, rec.msn >>> 0);
      setRawWord(out, off, c.send_npg_wqe_id, 0, rec.wqeIdLo);
      setRawWord(out, off, c.send_npg_wqe_id, 1, rec.wqeIdHi);
      break;
    case CqeType.ADMIN:
      setField(out, off, c.admin_cmd_idx, rec.cmdIdx & 0xffff);
      setField(out, off, c.admin_cmd_op, rec.cmdOp & 0xff);
      break;
    default:
      break;
  }
  setField(out, off, c.status_length, rec.statusLength >>> 0);
  setField(out, off, c.qid_type_flags, cqeQtf(rec));
  return true;
}

/** Decode a CQE (the guest's view; used by tests and guest models). Returns false if `buf` is too short. */
export function decodeCqe(buf: Buffer, off: number, out: CqeRecord): boolean {
  const c = ionic_v1_cqe;
  if (!Number.isInteger(off) || off < 0 || off + c.SIZE > buf.length) return false;
  const qtf = getField(buf, off, c.qid_type_flags);
  out.type = ((qtf >>> CqeBits.TYPE_SHIFT) & CqeBits.TYPE_MASK) as CqeType;
  out.qid = qtf >>> CqeBits.QID_SHIFT;
  out.color = (qtf & CqeBits.COLOR) !== 0;
  out.error = (qtf & CqeBits.ERROR) !== 0;
  out.statusLength = getField(buf, off, c.status_length);
  const sqo = getField(buf, off, c.recv_src_qpn_op);
  out.srcQpn = sqo & CqeBits.RECV_QPN_MASK;
  out.recvOp = ((sqo >>> CqeBits.RECV_OP_SHIFT) & CqeBits.RECV_OP_MASK) as RecvOp;
  out.vlan = ((sqo >>> CqeBits.RECV_IS_VLAN_BIT) & 1) === 1;
  out.ipv4 = ((sqo >>> CqeBits.RECV_IS_IPV4_BIT) & 1) === 1;
  out.srcMac = Buffer.from(viewRaw(buf, off, c.recv_src_mac));
  out.vlanTag = getField(buf, off, c.recv_vlan_tag);
  out.immDataRkey = getField(buf, off, c.recv_imm_data_rkey);
  out.msn = getField(buf, off, c.send_msg_msn);
  const id = out.type === CqeType.RECV ? c.recv_wqe_id : c.send_npg_wqe_id;
  out.wqeIdLo = getRawWord(buf, off, id, 0);
  out.wqeIdHi = getRawWord(buf, off, id, 1);
  out.cmdIdx = getField(buf, off, c.admin_cmd_idx);
  out.cmdOp = getField(buf, off, c.admin_cmd_op);
  return true;
}
