// NVMe and NVMe over Fabrics structures as named-offset tables (one per
// struct, named after include/linux/nvme.h), with the bit fields and values
// that belong to each. The codes they carry (opcodes, Identify CNS values,
// feature and log page identifiers, status codes) are in codes.ts,
// re-exported here. Offsets follow the NVMe Base and NVMe-oF
// specifications; every field is little-endian. Nothing here holds state.
//
// A u24 (the keyed SGL length) is split into a u16 and a u8, because the
// field codec (protocol/field.ts) has 1, 2, 4 and 8 byte numbers only.

import { le, raw } from '../../../protocol/field';

export * from './codes';

// ---------------------------------------------------------------------------
// Submission and completion queue entries

/** struct nvme_common_command: the 64-byte submission queue entry, as every command starts. */
export const nvme_sqe = {
  opcode: le(0, 1),
  /** Bits 1:0 FUSE, bits 7:6 PSDT (01b: SGL for data, MPTR a contiguous buffer). */
  flags: le(1, 1),
  command_id: le(2, 2),
  nsid: le(4, 4),
  cdw2: le(8, 4),
  cdw3: le(12, 4),
  metadata: le(16, 8),
  /** union nvme_data_ptr: one SGL descriptor over fabrics. */
  dptr: raw(24, 16),
  cdw10: le(40, 4),
  cdw11: le(44, 4),
  cdw12: le(48, 4),
  cdw13: le(52, 4),
  cdw14: le(56, 4),
  cdw15: le(60, 4),
  SIZE: 64,
} as const;

/** Flags byte: FUSE bits (not supported) and the PSDT value fabrics require. */
export const SQE_FLAGS = {
  FUSE_MASK: 0x03,
  PSDT_MASK: 0xc0,
  /** PSDT 01b: SGLs for data, MPTR to one contiguous buffer (the only value fabrics allow). */
  PSDT_SGL_METABUF: 0x40,
} as const;

/** struct nvme_completion: the 16-byte completion queue entry. */
export const nvme_cqe = {
  /** Command specific dword 0 (result.u32, or result.u16 for a Connect's cntlid). */
  result: le(0, 4),
  /** Command specific dword 1 (the high half of result.u64 for Property Get of CAP). */
  result_hi: le(4, 4),
  sq_head: le(8, 2),
  sq_id: le(10, 2),
  command_id: le(12, 2),
  /** Bit 0 phase (reserved over fabrics), bits 15:1 the status field (status << 1). */
  status: le(14, 2),
  SIZE: 16,
} as const;

/** struct nvme_keyed_sgl_desc (relative to dptr): a keyed data block, 16 bytes. */
export const nvme_keyed_sgl_desc = {
  addr: le(0, 8),
  /** Length bits 15:0 and 23:16 (a u24 on the wire). */
  length_lo: le(8, 2),
  length_hi: le(10, 1),
  key: le(11, 4),
  /** Bits 7:4 descriptor type, bits 3:0 subtype. */
  type: le(15, 1),
  SIZE: 16,
} as const;

/** struct nvme_sgl_desc (relative to dptr): an unkeyed data block (in-capsule data: addr is the offset). */
export const nvme_sgl_desc = {
  addr: le(0, 8),
  length: le(8, 4),
  rsvd: raw(12, 3),
  type: le(15, 1),
  SIZE: 16,
} as const;

/** SGL descriptor type (high nibble) and subtype (low nibble). */
export const SGL = {
  TYPE_SHIFT: 4,
  SUBTYPE_MASK: 0x0f,
  TYPE_DATA_BLOCK: 0x0,
  TYPE_KEYED_DATA_BLOCK: 0x4,
  SUBTYPE_ADDRESS: 0x0,
  SUBTYPE_OFFSET: 0x1,
  /** Keyed only: the host asks the target to invalidate the key when it responds (send with invalidate). */
  SUBTYPE_INVALIDATE: 0xf,
} as const;

// ---------------------------------------------------------------------------
// Fabrics commands

/** struct nvmf_connect_command. */
export const nvmf_connect_command = {
  opcode: le(0, 1),
  command_id: le(2, 2),
  fctype: le(4, 1),
  dptr: raw(24, 16),
  recfmt: le(40, 2),
  qid: le(42, 2),
  /** 0's based submission queue size. */
  sqsize: le(44, 2),
  /** Bit 2: disable SQ flow control (sq_head reads 0xffff). */
  cattr: le(46, 1),
  /** Keep Alive Timeout in milliseconds (0: none). */
  kato: le(48, 4),
  SIZE: 64,
} as const;

export const CONNECT_CATTR_DISABLE_SQFLOW = 0x04;

/** struct nvmf_connect_data: the 1024 bytes a Connect carries. */
export const nvmf_connect_data = {
  hostid: raw(0, 16),
  cntlid: le(16, 2),
  subsysnqn: raw(256, 256),
  hostnqn: raw(512, 256),
  SIZE: 1024,
} as const;

/** struct nvmf_property_get_command / nvmf_property_set_command. */
export const nvmf_property_command = {
  fctype: le(4, 1),
  /** Bits 2:0 size: 0 a 4-byte property, 1 an 8-byte one. */
  attrib: le(40, 1),
  offset: le(44, 4),
  /** Set only. */
  value: le(48, 8),
  SIZE: 64,
} as const;

export const PROPERTY_ATTRIB_SIZE_MASK = 0x07;
export const PROPERTY_ATTRIB_8_BYTES = 0x01;

/** Fabrics command types (fctype). */
export const FabricsType = {
  PROPERTY_SET: 0x00,
  CONNECT: 0x01,
  PROPERTY_GET: 0x04,
  DISCONNECT: 0x08,
} as const;

/** Connect Invalid Parameters: dword 0 says where (IATTR bit 16: in the data; IPO bits 15:0: byte offset). */
export const CONNECT_IATTR_DATA = 0x10000;

// ---------------------------------------------------------------------------
// Controller properties (what the PCIe BAR holds, reached by Property Get/Set)

/** Controller properties: offset, width in bytes, and who may write them. */
export const nvme_properties = {
  CAP: { off: 0x00, size: 8, access: 'ro' },
  VS: { off: 0x08, size: 4, access: 'ro' },
  CC: { off: 0x14, size: 4, access: 'rw' },
  CSTS: { off: 0x1c, size: 4, access: 'ro' },
} as const;

/** CAP bit fields (a 64-bit property: shifts up to 52, so plain multiplications, never 32-bit shifts). */
export const CAP = {
  MQES_MASK: 0xffff,
  TO_SHIFT: 24,
  /** Bit 37: NVM command set supported (CSS bit 0). */
  CSS_NVM: 2 ** 37,
  MPSMIN_SHIFT: 48,
} as const;

/** CC and CSTS bit fields. */
export const CC = {
  EN: 0x1,
  CSS_SHIFT: 4,
  CSS_MASK: 0x7,
  MPS_SHIFT: 7,
  MPS_MASK: 0xf,
  AMS_SHIFT: 11,
  AMS_MASK: 0x7,
  SHN_SHIFT: 14,
  SHN_MASK: 0x3,
  IOSQES_SHIFT: 16,
  IOSQES_MASK: 0xf,
  IOCQES_SHIFT: 20,
  IOCQES_MASK: 0xf,
} as const;

export const CSTS = {
  RDY: 0x1,
  CFS: 0x2,
  SHST_SHIFT: 2,
  SHST_MASK: 0xc,
  SHST_COMPLETE: 0x8,
} as const;

/** The entry sizes (log2) of the NVM command set. */
export const NVM_SQES_LOG2 = 6;
export const NVM_CQES_LOG2 = 4;

/** NVMe version 1.3.0. */
export const NVME_VS_1_3 = 0x00010300;

// ---------------------------------------------------------------------------
// Admin commands

/** struct nvme_identify (command dwords 10-11). */
export const nvme_identify = {
  cns: le(40, 1),
  cntid: le(42, 2),
  cnssid: le(44, 2),
  csi: le(47, 1),
} as const;

/** struct nvme_get_log_page_command. */
export const nvme_get_log_page = {
  lid: le(40, 1),
  /** Bits 6:0 log specific field, bit 7 RAE (retain asynchronous event). */
  lsp: le(41, 1),
  numdl: le(42, 2),
  numdu: le(44, 2),
  lsi: le(46, 2),
  /** Byte offset into the log (dword aligned). */
  lpo: le(48, 8),
  csi: le(55, 1),
} as const;

export const GET_LOG_RAE = 0x80;

/** struct nvme_features. */
export const nvme_features = {
  fid: le(40, 1),
  /** Get: bits 2:0 select (0 current); Set: ignored. */
  sel: le(41, 1),
  /** Set: bit 7 save (not supported). */
  sv_byte: le(43, 1),
  dword11: le(44, 4),
} as const;

export const FEATURE_SV = 0x80;
export const FEATURE_SEL_MASK = 0x07;

/** struct nvme_abort_cmd. */
export const nvme_abort = {
  sqid: le(40, 2),
  cid: le(42, 2),
} as const;

// ---------------------------------------------------------------------------
// I/O commands

/** struct nvme_rw_command (also Write Zeroes). */
export const nvme_rw = {
  slba: le(40, 8),
  /** Number of logical blocks, 0's based. */
  length: le(48, 2),
  /** Bit 14 FUA, bit 15 limited retry; Write Zeroes: bit 9 DEAC. */
  control: le(50, 2),
  dsmgmt: le(52, 4),
} as const;

export const RW_CONTROL_FUA = 0x4000;

/** struct nvme_dsm_cmd. */
export const nvme_dsm = {
  /** Number of ranges, 0's based (bits 7:0). */
  nr: le(40, 1),
  /** Bit 2 AD: deallocate. */
  attributes: le(44, 4),
} as const;

export const DSM_ATTR_DEALLOCATE = 0x4;

/** struct nvme_dsm_range: one of up to 256 in a Dataset Management's data. */
export const nvme_dsm_range = {
  cattr: le(0, 4),
  nlb: le(4, 4),
  slba: le(8, 8),
  SIZE: 16,
} as const;

// ---------------------------------------------------------------------------
// Identify data structures (4096 bytes each)

export const IDENTIFY_DATA_SIZE = 4096;

/** struct nvme_id_ctrl: the fields the Linux host reads, and those a fabrics controller must fill. */
export const nvme_id_ctrl = {
  vid: le(0, 2),
  ssvid: le(2, 2),
  /** ASCII, space padded. */
  sn: raw(4, 20),
  mn: raw(24, 40),
  fr: raw(64, 8),
  rab: le(72, 1),
  ieee: raw(73, 3),
  cmic: le(76, 1),
  mdts: le(77, 1),
  cntlid: le(78, 2),
  ver: le(80, 4),
  rtd3r: le(84, 4),
  rtd3e: le(88, 4),
  oaes: le(92, 4),
  ctratt: le(96, 4),
  /** 1: I/O controller, 2: discovery controller, 3: administrative. */
  cntrltype: le(111, 1),
  fguid: raw(112, 16),
  oacs: le(256, 2),
  acl: le(258, 1),
  aerl: le(259, 1),
  frmw: le(260, 1),
  lpa: le(261, 1),
  elpe: le(262, 1),
  npss: le(263, 1),
  avscc: le(264, 1),
  apsta: le(265, 1),
  wctemp: le(266, 2),
  cctemp: le(268, 2),
  /** Keep Alive Support: granularity in 100 ms units (0: not supported). */
  kas: le(320, 2),
  sqes: le(512, 1),
  cqes: le(513, 1),
  maxcmd: le(514, 2),
  nn: le(516, 4),
  oncs: le(520, 2),
  fuses: le(522, 2),
  fna: le(524, 1),
  vwc: le(525, 1),
  awun: le(526, 2),
  awupf: le(528, 2),
  acwu: le(532, 2),
  sgls: le(536, 4),
  mnan: le(540, 4),
  /** NUL padded. */
  subnqn: raw(768, 256),
  /** Fabrics: I/O command capsule size in 16-byte units (4: the SQE alone, no in-capsule data). */
  ioccsz: le(1792, 4),
  /** Fabrics: I/O response capsule size in 16-byte units. */
  iorcsz: le(1796, 4),
  icdoff: le(1800, 2),
  fcatt: le(1802, 1),
  msdbd: le(1803, 1),
  ofcs: le(1804, 2),
  dctype: le(1806, 1),
  psd0: raw(2048, 32),
  SIZE: IDENTIFY_DATA_SIZE,
} as const;

export const ID_CTRL = {
  CNTRLTYPE_IO: 1,
  CNTRLTYPE_DISCOVERY: 2,
  CMIC_MULTI_CTRL: 0x02,
  /** OAES bit 8: namespace attribute notices; bit 31: discovery log page change. */
  OAES_NS_ATTR: 0x100,
  OAES_DISC_CHANGE: 0x80000000,
  /** LPA bit 2: extended data (NUMDU, LPO) for Get Log Page. */
  LPA_EXTENDED: 0x04,
  ONCS_DSM: 0x04,
  ONCS_WRITE_ZEROES: 0x08,
  VWC_PRESENT: 0x01,
  /** SGLS bits 1:0 = 01b supported, bit 2 keyed data block, bit 20 in-capsule offsets. */
  SGLS_SUPPORTED: 0x1,
  SGLS_KEYED: 0x4,
  SGLS_OFFSET: 0x100000,
} as const;

/** struct nvme_id_ns. */
export const nvme_id_ns = {
  nsze: le(0, 8),
  ncap: le(8, 8),
  nuse: le(16, 8),
  nsfeat: le(24, 1),
  /** Number of LBA formats, 0's based. */
  nlbaf: le(25, 1),
  flbas: le(26, 1),
  mc: le(27, 1),
  dpc: le(28, 1),
  dps: le(29, 1),
  nmic: le(30, 1),
  rescap: le(31, 1),
  fpi: le(32, 1),
  /** Bits 2:0: what a read of deallocated blocks returns (001b zeroes). */
  dlfeat: le(33, 1),
  nawun: le(34, 2),
  nawupf: le(36, 2),
  nacwu: le(38, 2),
  noiob: le(46, 2),
  /** NVM capacity in bytes (a u128; the low half is enough here). */
  nvmcap_lo: le(48, 8),
  anagrpid: le(92, 4),
  nsattr: le(99, 1),
  nguid: raw(104, 16),
  eui64: raw(120, 8),
  /** struct nvme_lbaf lbaf[64] starts here. */
  LBAF: 128,
  SIZE: IDENTIFY_DATA_SIZE,
} as const;

export const NMIC_SHARED = 0x01;

/** struct nvme_lbaf: one LBA format (relative to LBAF + index * SIZE). */
export const nvme_lbaf = {
  ms: le(0, 2),
  /** log2 of the block size. */
  ds: le(2, 1),
  rp: le(3, 1),
  SIZE: 4,
} as const;

/** Active namespace list (CNS 02h): up to 1024 nsids, ascending, zero terminated. */
export const nvme_ns_list = {
  nsid: le(0, 4),
  ENTRY: 4,
  MAX: 1024,
} as const;

/** struct nvme_ns_id_desc: a namespace identification descriptor (CNS 03h), followed by NIDL bytes. */
export const nvme_ns_id_desc = {
  nidt: le(0, 1),
  nidl: le(1, 1),
  NID: 4,
} as const;

/** Namespace identifier types and their lengths. */
export const NsIdType = {
  EUI64: { nidt: 0x1, nidl: 8 },
  NGUID: { nidt: 0x2, nidl: 16 },
  UUID: { nidt: 0x3, nidl: 16 },
  CSI: { nidt: 0x4, nidl: 1 },
} as const;

/** Command set identifier of the NVM command set. */
export const CSI_NVM = 0;

// ---------------------------------------------------------------------------
// Log pages

/** struct nvme_error_slot: one 64-byte error information log entry. */
export const nvme_error_slot = {
  error_count: le(0, 8),
  sqid: le(8, 2),
  cmdid: le(10, 2),
  status_field: le(12, 2),
  param_error_location: le(14, 2),
  lba: le(16, 8),
  nsid: le(24, 4),
  vs: le(28, 1),
  trtype: le(29, 1),
  cs: le(32, 8),
  SIZE: 64,
} as const;

/** struct nvme_smart_log: 512 bytes; the 16-byte counters are u128 (the low u64 is written). */
export const nvme_smart_log = {
  critical_warning: le(0, 1),
  /** Composite temperature, kelvin. */
  temperature: le(1, 2),
  avail_spare: le(3, 1),
  spare_thresh: le(4, 1),
  percent_used: le(5, 1),
  /** Thousands of 512-byte units, rounded up. */
  data_units_read: le(32, 8),
  data_units_written: le(48, 8),
  host_reads: le(64, 8),
  host_writes: le(80, 8),
  ctrl_busy_time: le(96, 8),
  power_cycles: le(112, 8),
  power_on_hours: le(128, 8),
  unsafe_shutdowns: le(144, 8),
  media_errors: le(160, 8),
  num_err_log_entries: le(176, 8),
  SIZE: 512,
} as const;

/** Firmware slot information log: 512 bytes. */
export const nvme_fw_slot_info_log = {
  afi: le(0, 1),
  frs1: raw(8, 8),
  SIZE: 512,
} as const;

/** Changed namespace list log: 1024 nsids (0xffffffff in the first: more than 1024 changed). */
export const nvme_changed_ns_log = {
  nsid: le(0, 4),
  ENTRY: 4,
  MAX: 1024,
  SIZE: 4096,
} as const;

/** struct nvmf_disc_rsp_page_hdr: the discovery log's 1024-byte header. */
export const nvmf_disc_rsp_page_hdr = {
  genctr: le(0, 8),
  numrec: le(8, 8),
  recfmt: le(16, 2),
  SIZE: 1024,
} as const;

/** struct nvmf_disc_rsp_page_entry: 1024 bytes, with the RDMA transport specific address subtype. */
export const nvmf_disc_rsp_page_entry = {
  trtype: le(0, 1),
  adrfam: le(1, 1),
  subtype: le(2, 1),
  treq: le(3, 1),
  portid: le(4, 2),
  cntlid: le(6, 2),
  asqsz: le(8, 2),
  /** ASCII, NUL padded. */
  trsvcid: raw(32, 32),
  subnqn: raw(256, 256),
  traddr: raw(512, 256),
  /** tsas.rdma */
  rdma_qptype: le(768, 1),
  rdma_prtype: le(769, 1),
  rdma_cms: le(770, 1),
  rdma_pkey: le(776, 2),
  SIZE: 1024,
} as const;

export const Discovery = {
  TRTYPE_RDMA: 1,
  ADRFAM_IPV4: 1,
  SUBTYPE_DISCOVERY_REFERRAL: 1,
  SUBTYPE_NVME: 2,
  TREQ_NOT_SPECIFIED: 0,
  RDMA_QPTYPE_CONNECTED: 1,
  RDMA_PRTYPE_NOT_SPECIFIED: 1,
  RDMA_CMS_RDMA_CM: 1,
  CNTLID_DYNAMIC: 0xffff,
} as const;

/** Asynchronous event completion dword 0: type bits 2:0, info bits 15:8, log page bits 23:16. */
export const AER_RESULT = { INFO_SHIFT: 8, LOG_PAGE_SHIFT: 16 } as const;
export const AerType = { ERROR: 0, SMART: 1, NOTICE: 2 } as const;
export const AerNotice = { NS_CHANGED: 0x00, DISC_CHANGED: 0xf0 } as const;
