// The wire structures of connection setup for NVMe over RDMA, as named-offset
// tables: the MAD header and the IB CM messages (IBTA vol. 1 chapter 12; Linux
// include/rdma/ibta_vol1_c12.h names each field), the rdma_cm header at the
// start of a REQ's private data (drivers/infiniband/core/cma.c, struct
// cma_hdr), and NVMe/RDMA's own private data (include/linux/nvme-rdma.h).
//
// CM fields are big-endian and many are narrower than a byte or not
// byte-aligned. The IBTA tables place them as Byte[Bit], counting bits from
// the most significant one; `bits()` turns that notation into a big-endian
// container field with a shift and a mask, so the tables below read like the
// specification's. Offsets here are from the start of the 256-byte MAD (the
// IBTA tables count from the end of the 24-byte MAD header: add MAD_HDR).

import { be, Field, getField, le, raw, setField } from '../../../../protocol/field';

/** Every CM MAD is 256 bytes: the 24-byte header, then the message. */
export const MAD_SIZE = 256;
/** Where the CM message starts (the IBTA tables' byte 0). */
const MAD_HDR = 24;

/** A bit field as IBTA tables write it: `width` bits from bit `bit` (0 = most significant) of byte `byte`, inside a big-endian container. */
interface IbaBits {
  readonly word: Field;
  readonly shift: number;
  readonly mask: number;
}

/**
 * A Byte[Bit] field. One that fits in its byte reads that byte; a wider one
 * (24-bit QPNs and PSNs, the 20-bit flow label) reads the aligned big-endian
 * dword it sits in.
 */
export function bits(byte: number, bit: number, width: number): IbaBits {
  const size = bit + width <= 8 ? 1 : 4;
  const off = size === 1 ? byte : byte - (byte % 4);
  const start = (byte - off) * 8 + bit;
  if (start + width > size * 8)
    throw new RangeError(`IBA field at ${byte}[${bit}] width ${width} crosses its container`);
  return { word: be(off, size), shift: size * 8 - start - width, mask: width >= 32 ? 0xffffffff : 2 ** width - 1 };
}

export function getBits(buf: Buffer, base: number, f: IbaBits): number {
  return ((getField(buf, base, f.word) >>> f.shift) & f.mask) >>> 0;
}

/** Set a bit field, keeping the container's other bits. The value must fit (our bug otherwise). */
export function setBits(buf: Buffer, base: number, f: IbaBits, value: number): void {
  if (!(value >= 0 && value <= f.mask))
    throw new RangeError(`IBA field value ${value} does not fit ${f.mask.toString(16)}`);
  const word = getField(buf, base, f.word);
  const cleared = (word & ~(f.mask << f.shift)) >>> 0;
  setField(buf, base, f.word, (cleared | (value << f.shift)) >>> 0);
}

// ---------------------------------------------------------------------------
// MAD header (struct ib_mad_hdr)

export const ib_mad_hdr = {
  base_version: be(0, 1),
  mgmt_class: be(1, 1),
  class_version: be(2, 1),
  method: be(3, 1),
  status: be(4, 2),
  class_specific: be(6, 2),
  /** Transaction id: opaque to us, echoed in replies. */
  tid: raw(8, 8),
  attr_id: be(16, 2),
  resv: be(18, 2),
  attr_mod: be(20, 4),
  SIZE: MAD_HDR,
} as const;

export const IB_MGMT_BASE_VERSION = 1;
export const IB_MGMT_CLASS_CM = 0x07;
export const IB_CM_CLASS_VERSION = 2;
/** Every CM message goes with method Send (ClassPortInfo aside). */
export const IB_MGMT_METHOD_SEND = 0x03;

/** CM attribute ids (cm_msgs.h). */
export const CmAttr = {
  REQ: 0x0010,
  MRA: 0x0011,
  REJ: 0x0012,
  REP: 0x0013,
  RTU: 0x0014,
  DREQ: 0x0015,
  DREP: 0x0016,
} as const;

// ---------------------------------------------------------------------------
// CM messages (IBTA vol. 1 tables 106-113)

/** Table 106: REQ. */
export const cm_req_msg = {
  local_comm_id: be(MAD_HDR + 0, 4),
  service_id: be(MAD_HDR + 8, 8),
  local_ca_guid: raw(MAD_HDR + 16, 8),
  local_qkey: be(MAD_HDR + 28, 4),
  local_qpn: bits(MAD_HDR + 32, 0, 24),
  responder_resources: be(MAD_HDR + 35, 1),
  local_eecn: bits(MAD_HDR + 36, 0, 24),
  initiator_depth: be(MAD_HDR + 39, 1),
  remote_eecn: bits(MAD_HDR + 40, 0, 24),
  remote_cm_response_timeout: bits(MAD_HDR + 43, 0, 5),
  /** 0 RC, 1 UC, 3 XRC. */
  transport_service_type: bits(MAD_HDR + 43, 5, 2),
  end_to_end_flow_control: bits(MAD_HDR + 43, 7, 1),
  starting_psn: bits(MAD_HDR + 44, 0, 24),
  local_cm_response_timeout: bits(MAD_HDR + 47, 0, 5),
  retry_count: bits(MAD_HDR + 47, 5, 3),
  partition_key: be(MAD_HDR + 48, 2),
  path_packet_payload_mtu: bits(MAD_HDR + 50, 0, 4),
  rdc_exists: bits(MAD_HDR + 50, 4, 1),
  rnr_retry_count: bits(MAD_HDR + 50, 5, 3),
  max_cm_retries: bits(MAD_HDR + 51, 0, 4),
  srq: bits(MAD_HDR + 51, 4, 1),
  extended_transport_type: bits(MAD_HDR + 51, 5, 3),
  primary_local_port_lid: be(MAD_HDR + 52, 2),
  primary_remote_port_lid: be(MAD_HDR + 54, 2),
  primary_local_port_gid: raw(MAD_HDR + 56, 16),
  primary_remote_port_gid: raw(MAD_HDR + 72, 16),
  primary_flow_label: bits(MAD_HDR + 88, 0, 20),
  primary_packet_rate: bits(MAD_HDR + 91, 2, 6),
  primary_traffic_class: be(MAD_HDR + 92, 1),
  primary_hop_limit: be(MAD_HDR + 93, 1),
  primary_sl: bits(MAD_HDR + 94, 0, 4),
  primary_subnet_local: bits(MAD_HDR + 94, 4, 1),
  primary_local_ack_timeout: bits(MAD_HDR + 95, 0, 5),
  /** 92 bytes; rdma_cm puts its cma_hdr first, the consumer's data after it. */
  private_data: raw(MAD_HDR + 140, 92),
  SIZE: MAD_SIZE,
} as const;

/** Table 108: REJ. */
export const cm_rej_msg = {
  local_comm_id: be(MAD_HDR + 0, 4),
  remote_comm_id: be(MAD_HDR + 4, 4),
  /** CmMsgResponse: which message is rejected. */
  message_rejected: bits(MAD_HDR + 8, 0, 2),
  rejected_info_length: bits(MAD_HDR + 9, 0, 7),
  reason: be(MAD_HDR + 10, 2),
  ari: raw(MAD_HDR + 12, 72),
  private_data: raw(MAD_HDR + 84, 148),
  SIZE: MAD_SIZE,
} as const;

/** Table 110: REP. */
export const cm_rep_msg = {
  local_comm_id: be(MAD_HDR + 0, 4),
  remote_comm_id: be(MAD_HDR + 4, 4),
  local_qkey: be(MAD_HDR + 8, 4),
  local_qpn: bits(MAD_HDR + 12, 0, 24),
  local_ee_context_number: bits(MAD_HDR + 16, 0, 24),
  starting_psn: bits(MAD_HDR + 20, 0, 24),
  responder_resources: be(MAD_HDR + 24, 1),
  initiator_depth: be(MAD_HDR + 25, 1),
  target_ack_delay: bits(MAD_HDR + 26, 0, 5),
  failover_accepted: bits(MAD_HDR + 26, 5, 2),
  end_to_end_flow_control: bits(MAD_HDR + 26, 7, 1),
  rnr_retry_count: bits(MAD_HDR + 27, 0, 3),
  srq: bits(MAD_HDR + 27, 3, 1),
  local_ca_guid: raw(MAD_HDR + 28, 8),
  private_data: raw(MAD_HDR + 36, 196),
  SIZE: MAD_SIZE,
} as const;

/** Table 111: RTU. */
export const cm_rtu_msg = {
  local_comm_id: be(MAD_HDR + 0, 4),
  remote_comm_id: be(MAD_HDR + 4, 4),
  private_data: raw(MAD_HDR + 8, 224),
  SIZE: MAD_SIZE,
} as const;

/** Table 112: DREQ. */
export const cm_dreq_msg = {
  local_comm_id: be(MAD_HDR + 0, 4),
  remote_comm_id: be(MAD_HDR + 4, 4),
  remote_qpn_eecn: bits(MAD_HDR + 8, 0, 24),
  private_data: raw(MAD_HDR + 12, 220),
  SIZE: MAD_SIZE,
} as const;

/** Table 113: DREP. */
export const cm_drep_msg = {
  local_comm_id: be(MAD_HDR + 0, 4),
  remote_comm_id: be(MAD_HDR + 4, 4),
  private_data: raw(MAD_HDR + 8, 224),
  SIZE: MAD_SIZE,
} as const;

/** REJ message_rejected / MRA message_mraed values. */
export const CmMsgResponse = { REQ: 0, REP: 1, OTHER: 2 } as const;

/** REJ reasons we send (enum ib_cm_rej_reason). */
export const CmRejReason = {
  NO_RESOURCES: 3,
  INVALID_SERVICE_ID: 8,
  INVALID_TRANSPORT_TYPE: 9,
  CONSUMER_DEFINED: 28,
} as const;

/** REQ transport_service_type: reliable connected. */
export const CM_TRANSPORT_RC = 0;

// ---------------------------------------------------------------------------
// rdma_cm's header (struct cma_hdr), at the start of a REQ's private data

export const cma_hdr = {
  /** CMA_VERSION, 0. */
  cma_version: be(0, 1),
  /** IP version in bits 7:4. */
  ip_version: be(1, 1),
  /** The initiator's (source) port. */
  port: be(2, 2),
  /** union cma_ip_addr: an IPv6 address, or an IPv4 one in its last 4 bytes. */
  src_addr: raw(4, 16),
  dst_addr: raw(20, 16),
  SIZE: 36,
} as const;

export const CMA_VERSION = 0;
export const CMA_IP_VERSION_SHIFT = 4;
/** Where an IPv4 address sits in a union cma_ip_addr. */
export const CMA_IP4_OFFSET = 12;
/** rdma_cm's TCP port space: a REQ's service id is RDMA_PS_TCP << 16 | port. */
export const RDMA_PS_TCP = 0x0106;

// ---------------------------------------------------------------------------
// NVMe/RDMA private data (include/linux/nvme-rdma.h; little-endian)

/** struct nvme_rdma_cm_req: after the cma_hdr in the REQ. */
export const nvme_rdma_cm_req = {
  recfmt: le(0, 2),
  qid: le(2, 2),
  /** Host receive queue size (the controller's send queue). */
  hrqsize: le(4, 2),
  /** Host send queue size, 0's based (the controller's receive queue is hsqsize + 1). */
  hsqsize: le(6, 2),
  /** Newer hosts name the controller an I/O queue joins; 0 when not given. */
  cntlid: le(8, 2),
  SIZE: 32,
} as const;

/** struct nvme_rdma_cm_rep: the REP's private data. */
export const nvme_rdma_cm_rep = {
  recfmt: le(0, 2),
  /** Controller receive queue size. */
  crqsize: le(2, 2),
  SIZE: 32,
} as const;

/** struct nvme_rdma_cm_rej: the REJ's private data. */
export const nvme_rdma_cm_rej = {
  recfmt: le(0, 2),
  sts: le(2, 2),
  SIZE: 4,
} as const;

export const NVME_RDMA_CM_FMT_1_0 = 0;

/** enum nvme_rdma_cm_status. */
export const NvmeRdmaCmStatus = {
  INVALID_LEN: 0x01,
  INVALID_RECFMT: 0x02,
  INVALID_QID: 0x03,
  INVALID_HSQSIZE: 0x04,
  INVALID_HRQSIZE: 0x05,
  NO_RSC: 0x06,
  INVALID_IRD: 0x07,
  INVALID_ORD: 0x08,
  INVALID_CNTLID: 0x09,
} as const;

/** The Q_Key every GSI (QP1) datagram carries. */
export const IB_QP1_QKEY = 0x80010000;
