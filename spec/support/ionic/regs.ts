// The ionic device interface as the guest model sees it: byte offsets and
// numbers taken from docs/driver-contract.md, part E (the driver's view), not
// from lib/ionic. Keeping our own copy means a misreading in lib/ionic shows up
// as a failing test instead of being mirrored here.

/** vfio region and irq indices of a PCI device (linux/vfio.h). */
export const Region = { BAR0: 0, BAR2: 2, BAR4: 4, CONFIG: 7 } as const;
export const IRQ_INDEX_MSIX = 2;

/** Config space (PCI spec). */
export const Cfg = {
  VENDOR: 0x00,
  DEVICE: 0x02,
  COMMAND: 0x04,
  STATUS: 0x06,
  CLASS_REV: 0x08,
  BAR0: 0x10,
  SUBSYS_VENDOR: 0x2c,
  SUBSYS: 0x2e,
  CAP_PTR: 0x34,
  CMD_MEMORY: 0x0002,
  CMD_MASTER: 0x0004,
  STATUS_CAP_LIST: 0x0010,
  CAP_ID_MSIX: 0x11,
  CAP_ID_EXP: 0x10,
  CAP_ID_PM: 0x01,
  /** MSI-X capability: message control at +2 (table size - 1 in bits 0..10, function mask 0x4000, enable 0x8000). */
  MSIX_FLAGS: 2,
  MSIX_TABLE: 4,
  MSIX_PBA: 8,
  MSIX_QSIZE: 0x07ff,
  MSIX_MASKALL: 0x4000,
  MSIX_ENABLE: 0x8000,
} as const;

/** BAR0 (ionic Ethernet E1.3). */
export const Bar0 = {
  /** The driver refuses a smaller BAR0. */
  MIN_SIZE: 0x8000,
  SIGNATURE: 0x00,
  VERSION: 0x04,
  ASIC_TYPE: 0x05,
  ASIC_REV: 0x06,
  FW_STATUS: 0x07,
  FW_HEARTBEAT: 0x08,
  FW_VERSION: 0x0c,
  SERIAL: 0x2c,
  STRING_LEN: 32,
  DB: 0x800,
  DONE: 0x804,
  CMD: 0x808,
  COMP: 0x848,
  DATA: 0x888,
  CMD_LEN: 64,
  COMP_LEN: 16,
  DATA_LEN: 1912,
  INTR_STATUS: 0x1000,
  INTR: 0x2000,
  INTR_LEN: 32,
  COAL_INIT: 0x00,
  MASK: 0x04,
  CREDITS: 0x08,
  MASK_ASSERT: 0x0c,
  COAL: 0x10,
} as const;

export const SIGNATURE_DEVI = 0x44455649;
export const FW_RUNNING = 0x01;

/** Interrupt credits register bits. */
export const CRED_UNMASK = 0x10000;
export const CRED_RESET_COALESCE = 0x20000;

export const Op = {
  NOP: 0,
  IDENTIFY: 1,
  INIT: 2,
  RESET: 3,
  PORT_IDENTIFY: 10,
  PORT_INIT: 11,
  PORT_RESET: 12,
  PORT_SETATTR: 14,
  LIF_IDENTIFY: 20,
  LIF_INIT: 21,
  LIF_RESET: 22,
  LIF_GETATTR: 23,
  LIF_SETATTR: 24,
  RX_MODE_SET: 30,
  RX_FILTER_ADD: 31,
  RX_FILTER_DEL: 32,
  Q_IDENTIFY: 39,
  Q_INIT: 40,
  Q_CONTROL: 41,
  RDMA_RESET_LIF: 50,
  RDMA_CREATE_EQ: 51,
  RDMA_CREATE_CQ: 52,
  RDMA_CREATE_ADMINQ: 53,
} as const;

/** Status codes (contract appendix). */
export const St = {
  SUCCESS: 0,
  EVERSION: 1,
  EOPCODE: 2,
  EIO: 3,
  EPERM: 4,
  EQID: 5,
  EQTYPE: 6,
  ENOENT: 7,
  EAGAIN: 9,
  EINVAL: 14,
  ENOSPC: 15,
  BAD_ADDR: 17,
} as const;

export const QT = { ADMINQ: 0, NOTIFYQ: 1, RXQ: 2, TXQ: 3 } as const;
export const QF = { IRQ: 0x01, ENA: 0x02, SG: 0x04 } as const;
export const QCtl = { DISABLE: 0, ENABLE: 1 } as const;
export const Attr = { STATE: 0, NAME: 1, MTU: 2, MAC: 3, FEATURES: 4, RSS: 5 } as const;
export const RxMode = { UNICAST: 0x1, MULTICAST: 0x2, BROADCAST: 0x4, PROMISC: 0x8, ALLMULTI: 0x10 } as const;
export const Match = { VLAN: 0, MAC: 1 } as const;

/** LIF_SETATTR FEATURES bits (ionic Ethernet E4.6). */
export const Feature = {
  VLAN_TX_TAG: 1 << 0,
  VLAN_RX_STRIP: 1 << 1,
  VLAN_RX_FILTER: 1 << 2,
  RX_HASH: 1 << 3,
  RX_CSUM: 1 << 4,
  TX_SG: 1 << 5,
  TX_CSUM: 1 << 7,
  TSO: 1 << 8,
  TSO_IPV6: 1 << 9,
  TSO_ECN: 1 << 10,
  TSO_GRE: 1 << 11,
  TSO_GRE_CSUM: 1 << 12,
  TSO_IPXIP4: 1 << 13,
  TSO_IPXIP6: 1 << 14,
  TSO_UDP: 1 << 15,
  TSO_UDP_CSUM: 1 << 16,
} as const;

/** What ionic.ko asks for at LIF init (without RX_HASH, which needs more than one queue pair). */
export const DRIVER_FEATURES =
  Feature.VLAN_TX_TAG |
  Feature.VLAN_RX_STRIP |
  Feature.VLAN_RX_FILTER |
  Feature.RX_CSUM |
  Feature.TX_SG |
  Feature.TX_CSUM |
  Feature.TSO |
  Feature.TSO_IPV6 |
  Feature.TSO_ECN |
  Feature.TSO_GRE |
  Feature.TSO_GRE_CSUM |
  Feature.TSO_IPXIP4 |
  Feature.TSO_IPXIP6 |
  Feature.TSO_UDP |
  Feature.TSO_UDP_CSUM;

/** dev_identity offsets (ionic Ethernet E2.4). */
export const DevId = {
  version: 0,
  type: 1,
  nports: 4,
  nlifs: 8,
  nintrs: 12,
  ndbpgs_per_lif: 16,
  intr_coal_mult: 20,
  intr_coal_div: 24,
  eq_count: 28,
  capabilities: 48,
} as const;

/** lif_identity offsets (ionic Ethernet E2.5). */
export const LifId = {
  capabilities: 0,
  eth_version: 8,
  max_ucast_filters: 12,
  max_mcast_filters: 16,
  rss_ind_tbl_sz: 20,
  min_frame_size: 22,
  max_frame_size: 26,
  config: 136,
  config_features: 168,
  qcount_adminq: 176,
  qcount_notifyq: 180,
  qcount_rxq: 184,
  qcount_txq: 188,
  qcount_eq: 192,
  rdma: 392,
  rdma_eq_count: 476,
  SIZE: 648,
} as const;

/** q_identity offsets (ionic Ethernet E2.6). */
export const QId = {
  version: 0,
  supported: 1,
  features: 8,
  desc_sz: 16,
  comp_sz: 18,
  sg_desc_sz: 20,
  max_sg_elems: 22,
  sg_desc_stride: 24,
  SIZE: 26,
} as const;

/** port_identity and port_config offsets (ionic Ethernet E2.7). */
export const PortId = {
  version: 0,
  type: 1,
  num_lanes: 2,
  autoneg: 3,
  min_frame_size: 4,
  max_frame_size: 8,
  speeds: 20,
  config: 128,
  SIZE: 384,
} as const;
export const PortCfg = {
  speed: 0,
  mtu: 4,
  state: 8,
  an_enable: 9,
  fec_type: 10,
  pause_type: 11,
  loopback_mode: 12,
  SIZE: 256,
} as const;

/** port_info (written by the device at PORT_INIT info_pa). */
export const PortInfo = {
  config: 0,
  status_id: 256,
  status_speed: 260,
  status_status: 264,
  link_down_count: 265,
  status_fec: 267,
  xcvr_state: 316,
  xcvr_phy: 317,
  xcvr_pid: 318,
  stats: 576,
  frames_rx_ok: 576,
  octets_rx_ok: 608,
  frames_tx_ok: 832,
  octets_tx_ok: 856,
  SIZE: 2880,
} as const;

/** lif_info (written by the device at LIF_INIT info_pa; ionic Ethernet E5). */
export const LifInfo = {
  config: 0,
  eid: 256,
  port_num: 264,
  link_status: 266,
  link_speed: 268,
  link_down_count: 272,
  stats: 320,
  SIZE: 1344,
} as const;

/** ionic_lif_stats offsets relative to lif_info.stats (ionic Ethernet E5). */
export const LifStats = {
  rx_ucast_bytes: 0x00,
  rx_ucast_packets: 0x08,
  rx_mcast_bytes: 0x10,
  rx_mcast_packets: 0x18,
  rx_bcast_bytes: 0x20,
  rx_bcast_packets: 0x28,
  rx_ucast_drop_bytes: 0x40,
  rx_ucast_drop_packets: 0x48,
  rx_mcast_drop_bytes: 0x50,
  rx_mcast_drop_packets: 0x58,
  rx_bcast_drop_bytes: 0x60,
  rx_bcast_drop_packets: 0x68,
  rx_dma_error: 0x70,
  tx_ucast_bytes: 0x80,
  tx_ucast_packets: 0x88,
  tx_mcast_bytes: 0x90,
  tx_mcast_packets: 0x98,
  tx_bcast_bytes: 0xa0,
  tx_bcast_packets: 0xa8,
  tx_ucast_drop_bytes: 0xc0,
  tx_ucast_drop_packets: 0xc8,
  tx_mcast_drop_bytes: 0xd0,
  tx_mcast_drop_packets: 0xd8,
  tx_bcast_drop_bytes: 0xe0,
  tx_bcast_drop_packets: 0xe8,
  tx_dma_error: 0xf0,
  rx_queue_disabled: 0x100,
  rx_queue_empty: 0x108,
  rx_queue_error: 0x110,
  rx_desc_fetch_error: 0x118,
  rx_desc_data_error: 0x120,
  tx_queue_disabled: 0x140,
  tx_queue_error: 0x148,
  tx_desc_fetch_error: 0x150,
  tx_desc_data_error: 0x158,
  tx_queue_empty: 0x160,
  SIZE: 1024,
} as const;
export type LifStatName = Exclude<keyof typeof LifStats, 'SIZE'>;

/** TX descriptor opcodes (cmd bits 4..7). */
export const TxOp = { CSUM_NONE: 0, CSUM_PARTIAL: 1, CSUM_HW: 2, TSO: 3 } as const;

export const PAGE = 4096;
export const ADMINQ_LENGTH = 16;
export const NOTIFYQ_LENGTH = 64;
export const COLOR = 0x80;
