// Numbers of the ionic device interface (the driver's ionic_if.h, 7.0 layout;
// docs/driver-contract.md (ionic Ethernet)). Values only.

/** PCI identity of the emulated PF. */
export const IONIC_VENDOR_ID = 0x1dd8;
export const IONIC_DEVICE_ID_ETH_PF = 0x1002;
export const IONIC_SUBSYSTEM_ID = 0x5400;
export const IONIC_CLASS_ETHERNET = 0x020000;

/** dev_info signature "DEVI". */
export const IONIC_DEV_INFO_SIGNATURE = 0x44455649;

/** fw_status bits: RUNNING, and a generation we keep constant (a change means "firmware restarted"). */
export const IONIC_FW_STS_RUNNING = 0x01;

/** Device command opcodes (enum ionic_cmd_opcode). */
export const enum Opcode {
  NOP = 0,
  IDENTIFY = 1,
  INIT = 2,
  RESET = 3,
  GETATTR = 4,
  SETATTR = 5,
  PORT_IDENTIFY = 10,
  PORT_INIT = 11,
  PORT_RESET = 12,
  PORT_GETATTR = 13,
  PORT_SETATTR = 14,
  LIF_IDENTIFY = 20,
  LIF_INIT = 21,
  LIF_RESET = 22,
  LIF_GETATTR = 23,
  LIF_SETATTR = 24,
  LIF_SETPHC = 25,
  RX_MODE_SET = 30,
  RX_FILTER_ADD = 31,
  RX_FILTER_DEL = 32,
  Q_IDENTIFY = 39,
  Q_INIT = 40,
  Q_CONTROL = 41,
  RDMA_RESET_LIF = 50,
  RDMA_CREATE_EQ = 51,
  RDMA_CREATE_CQ = 52,
  RDMA_CREATE_ADMINQ = 53,
  P4_FIRST = 70,
  P4_LAST = 72,
}

/** Completion status codes (enum ionic_status_code). */
export const enum Status {
  SUCCESS = 0,
  EVERSION = 1,
  EOPCODE = 2,
  EIO = 3,
  EPERM = 4,
  EQID = 5,
  EQTYPE = 6,
  ENOENT = 7,
  EINTR = 8,
  EAGAIN = 9,
  ENOMEM = 10,
  EFAULT = 11,
  EBUSY = 12,
  EEXIST = 13,
  EINVAL = 14,
  ENOSPC = 15,
  ERANGE = 16,
  BAD_ADDR = 17,
  DEV_CMD = 18,
  ENOSUPP = 19,
  ERROR = 29,
  ERDMA = 30,
  EBAD_FW = 31,
}

/** Logical queue types (enum ionic_logical_qtype). */
export const enum QType {
  ADMINQ = 0,
  NOTIFYQ = 1,
  RXQ = 2,
  TXQ = 3,
  EQ = 4,
}

/** Q_INIT flags. */
export const enum QInitFlag {
  IRQ = 0x01,
  ENA = 0x02,
  SG = 0x04,
  EQ = 0x08,
  CMB = 0x10,
  DEBUG = 0x80,
}

/** Q_CONTROL operations. */
export const enum QControlOp {
  DISABLE = 0,
  ENABLE = 1,
  HANG_RESET = 2,
}

/** LIF_SETATTR / LIF_GETATTR attributes. */
export const enum LifAttr {
  STATE = 0,
  NAME = 1,
  MTU = 2,
  MAC = 3,
  FEATURES = 4,
  RSS = 5,
  STATS_CTRL = 6,
  TXSTAMP = 7,
}

/** RX_MODE_SET bits. */
export const enum RxMode {
  UNICAST = 0x01,
  MULTICAST = 0x02,
  BROADCAST = 0x04,
  PROMISC = 0x08,
  ALLMULTI = 0x10,
  RDMA_SNIFFER = 0x20,
}

/** RX_FILTER_ADD match types. */
export const enum RxFilterMatch {
  VLAN = 0,
  MAC = 1,
  MAC_VLAN = 2,
  STEER_PKTCLASS = 0x10,
}

/** Port states in port_config / PORT_SETATTR. */
export const enum PortState {
  NONE = 0,
  DOWN = 1,
  UP = 2,
}

/** lif_info.status link_status values. */
export const enum LinkStatus {
  UP = 1,
  DOWN = 2,
}

/** NotifyQ event codes. */
export const enum EventCode {
  LINK_CHANGE = 1,
  RESET = 2,
}

/** lif_identity capabilities. */
export const IONIC_LIF_CAP_ETH = 0x1;
export const IONIC_LIF_CAP_RDMA = 0x2;
/** Ours (no driver defines it): the guest may use the P4 engine's device commands 70-72 (--p4-guest-scope other than none). */
export const IONIC_LIF_CAP_P4 = 0x4;

/** Interrupt credits register bits (the driver's RESET_COALESCE, 0x20000, is ignored: no coalescing timer runs). */
export const IONIC_INTR_CRED_COUNT_MASK = 0x7fff;
export const IONIC_INTR_CRED_UNMASK = 0x10000;

/** TX descriptor opcodes (cmd bits 4..7). */
export const enum TxOpcode {
  CSUM_NONE = 0,
  CSUM_PARTIAL = 1,
  CSUM_HW = 2,
  TSO = 3,
}

/** RX descriptor opcodes. */
export const enum RxOpcode {
  SIMPLE = 0,
  SG = 1,
}

/** Size of the identity data window (and of every identity union). */
export const IONIC_DEV_CMD_DATA_SIZE = 1912;

/** Largest ring we accept: 2^15 descriptors (the driver's own bound is 2^16 for some queues). */
export const IONIC_MAX_RING_LOG2 = 15;
export const IONIC_MIN_RING_LOG2 = 2;

/** Guest page size assumed for the NotifyQ event ring offset and doorbell pages. */
export const GUEST_PAGE_SIZE = 4096;
