// NVMe and NVMe over Fabrics codes: admin and I/O opcodes, Identify CNS
// values, feature and log page identifiers, and status codes (generic,
// command specific, Fabrics, media) with the DNR and More flags. Values from
// the NVMe Base and NVMe-oF specifications (as include/linux/nvme.h names
// them). layouts.ts re-exports everything here.

export const AdminOpcode = {
  GET_LOG_PAGE: 0x02,
  IDENTIFY: 0x06,
  ABORT: 0x08,
  SET_FEATURES: 0x09,
  GET_FEATURES: 0x0a,
  ASYNC_EVENT: 0x0c,
  KEEP_ALIVE: 0x18,
  FABRICS: 0x7f,
} as const;

export const IoOpcode = {
  FLUSH: 0x00,
  WRITE: 0x01,
  READ: 0x02,
  WRITE_ZEROES: 0x08,
  DSM: 0x09,
  FABRICS: 0x7f,
} as const;

export const Cns = {
  NS: 0x00,
  CTRL: 0x01,
  NS_ACTIVE_LIST: 0x02,
  NS_DESC_LIST: 0x03,
  CS_CTRL: 0x06,
} as const;

export const FeatureId = {
  ARBITRATION: 0x01,
  POWER_MGMT: 0x02,
  LBA_RANGE: 0x03,
  TEMP_THRESH: 0x04,
  ERR_RECOVERY: 0x05,
  VOLATILE_WC: 0x06,
  NUM_QUEUES: 0x07,
  IRQ_COALESCE: 0x08,
  IRQ_CONFIG: 0x09,
  WRITE_ATOMIC: 0x0a,
  ASYNC_EVENT: 0x0b,
  AUTO_PST: 0x0c,
  TIMESTAMP: 0x0e,
  KATO: 0x0f,
  HOST_BEHAVIOR: 0x16,
  HOST_ID: 0x81,
} as const;

export const LogPageId = {
  ERROR: 0x01,
  SMART: 0x02,
  FW_SLOT: 0x03,
  CHANGED_NS: 0x04,
  DISCOVERY: 0x70,
} as const;

export const NSID_ALL = 0xffffffff;

/**
 * Status values as (SCT << 8) | SC, the way Linux writes them; the CQE holds
 * (status << 1). DNR and MORE are flags to OR in.
 */
export const NvmeStatus = {
  SUCCESS: 0x000,
  // Generic command status (SCT 0)
  INVALID_OPCODE: 0x001,
  INVALID_FIELD: 0x002,
  CMDID_CONFLICT: 0x003,
  DATA_XFER_ERROR: 0x004,
  INTERNAL: 0x006,
  ABORT_REQ: 0x007,
  ABORT_QUEUE: 0x008,
  INVALID_NS: 0x00b,
  CMD_SEQ_ERROR: 0x00c,
  SGL_INVALID_LAST: 0x00d,
  SGL_INVALID_COUNT: 0x00e,
  SGL_INVALID_DATA: 0x00f,
  SGL_INVALID_METADATA: 0x010,
  SGL_INVALID_TYPE: 0x011,
  SGL_INVALID_OFFSET: 0x016,
  HOST_ID_INCONSIST: 0x018,
  KA_TIMEOUT_EXPIRED: 0x019,
  KA_TIMEOUT_INVALID: 0x01a,
  CMD_INTERRUPTED: 0x021,
  LBA_RANGE: 0x080,
  CAP_EXCEEDED: 0x081,
  NS_NOT_READY: 0x082,
  // Command specific status (SCT 1)
  CQ_INVALID: 0x100,
  QID_INVALID: 0x101,
  QUEUE_SIZE: 0x102,
  ABORT_LIMIT: 0x103,
  ASYNC_LIMIT: 0x105,
  INVALID_LOG_PAGE: 0x109,
  FEATURE_NOT_SAVEABLE: 0x10d,
  FEATURE_NOT_CHANGEABLE: 0x10e,
  FEATURE_NOT_PER_NS: 0x10f,
  /** NVM command set specific (Dataset Management). */
  BAD_ATTRIBUTES: 0x180,
  ONCS_NOT_SUPPORTED: 0x183,
  // Fabrics command specific (SCT 1; the same SC values as the NVM ones above, in another command set)
  CONNECT_FORMAT: 0x180,
  CONNECT_CTRL_BUSY: 0x181,
  CONNECT_INVALID_PARAM: 0x182,
  CONNECT_RESTART_DISC: 0x183,
  CONNECT_INVALID_HOST: 0x184,
  // Media and data integrity errors (SCT 2)
  WRITE_FAULT: 0x280,
  READ_ERROR: 0x281,
  ACCESS_DENIED: 0x286,
  // Flags
  MORE: 0x2000,
  DNR: 0x4000,
} as const;
