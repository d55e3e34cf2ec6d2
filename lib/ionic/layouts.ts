// ionic structures as named-offset tables, one per driver struct (ionic_if.h,
// ionic_regs.h; 7.0 layout), so a reader can hold them against the driver.
// All little-endian (the Ethernet side). Offsets are from the start of each
// struct; BAR0 blocks are from the start of BAR0.

import { le as f, raw } from '../../protocol/field';

/** Bytes of a MAC address (ETH_ALEN). */
const ETH_ALEN = 6;

/** BAR0 map (ionic_regs.h). */
export const bar0 = {
  DEV_INFO: 0x0000,
  DEV_CMD: 0x0800,
  INTR_STATUS: 0x1000,
  INTR_CTRL: 0x2000,
  /** The register window the driver maps; the MSI-X table and PBA sit above it. */
  WINDOW: 0x8000,
  MSIX_TABLE: 0x8000,
  MSIX_PBA: 0xa000,
  SIZE: 0x10000,
} as const;

/** union ionic_dev_info_regs at BAR0 0x0000 (read-only to the driver). */
export const ionic_dev_info_regs = {
  signature: f(0x00, 4),
  version: f(0x04, 1),
  asic_type: f(0x05, 1),
  asic_rev: f(0x06, 1),
  fw_status: f(0x07, 1),
  fw_heartbeat: f(0x08, 4),
  FW_VERSION: 0x0c,
  SERIAL_NUM: 0x2c,
  STRING_SIZE: 32,
  SIZE: 0x800,
} as const;

/** union ionic_dev_cmd_regs at BAR0 0x0800 (offsets inside the block). */
export const ionic_dev_cmd_regs = {
  doorbell: f(0x00, 4),
  done: f(0x04, 4),
  CMD: 0x08,
  CMD_SIZE: 64,
  COMP: 0x48,
  COMP_SIZE: 16,
  DATA: 0x88,
  DATA_SIZE: 1912,
  SIZE: 0x800,
} as const;

/** struct ionic_intr (one per vector at BAR0 0x2000 + 32 * i). */
export const ionic_intr = {
  coal_init: f(0x00, 4),
  mask: f(0x04, 4),
  credits: f(0x08, 4),
  mask_assert: f(0x0c, 4),
  coal: f(0x10, 4),
  SIZE: 32,
} as const;

// ---- device commands (64 bytes) and completions (16 bytes) ----------------------

/** Fields common to every command and completion. */
export const ionic_cmd = { opcode: f(0, 1), SIZE: 64 } as const;
export const ionic_comp = { status: f(0, 1), comp_index: f(2, 2), color: f(15, 1), SIZE: 16 } as const;

export const ionic_dev_identify_cmd = { opcode: f(0, 1), ver: f(1, 1) } as const;
export const ionic_dev_identify_comp = { status: f(0, 1), ver: f(1, 1) } as const;
export const ionic_port_init_cmd = { opcode: f(0, 1), index: f(1, 1), info_pa: f(8, 8) } as const;
export const ionic_lif_identify_cmd = { opcode: f(0, 1), type: f(1, 1), ver: f(2, 1) } as const;
export const ionic_lif_identify_comp = { status: f(0, 1), ver: f(1, 1) } as const;
export const ionic_lif_init_cmd = { opcode: f(0, 1), type: f(1, 1), index: f(2, 2), info_pa: f(8, 8) } as const;
export const ionic_lif_init_comp = { status: f(0, 1), hw_index: f(2, 2) } as const;
export const ionic_q_identify_cmd = { opcode: f(0, 1), lif_type: f(2, 2), type: f(4, 1), ver: f(5, 1) } as const;
export const ionic_q_identify_comp = { status: f(0, 1), comp_index: f(2, 2), ver: f(4, 1) } as const;

/** struct ionic_q_init_cmd (packed: ring_base is unaligned). */
export const ionic_q_init_cmd = {
  opcode: f(0, 1),
  lif_index: f(2, 2),
  type: f(4, 1),
  ver: f(5, 1),
  index: f(8, 4),
  pid: f(12, 2),
  intr_index: f(14, 2),
  flags: f(16, 2),
  cos: f(18, 1),
  ring_size: f(19, 1),
  ring_base: f(20, 8),
  cq_ring_base: f(28, 8),
  sg_ring_base: f(36, 8),
  features: f(56, 8),
} as const;
export const ionic_q_init_comp = {
  status: f(0, 1),
  comp_index: f(2, 2),
  hw_index: f(4, 4),
  hw_type: f(8, 1),
  color: f(15, 1),
} as const;

export const ionic_q_control_cmd = {
  opcode: f(0, 1),
  type: f(1, 1),
  lif_index: f(2, 2),
  index: f(4, 4),
  oper: f(8, 1),
} as const;

export const ionic_lif_setattr_cmd = {
  opcode: f(0, 1),
  attr: f(1, 1),
  index: f(2, 2),
  state: f(4, 1),
  NAME: 4,
  mtu: f(4, 4),
  mac: raw(4, ETH_ALEN),
  features: f(4, 8),
  rss_types: f(4, 2),
  RSS_KEY: 6,
  rss_addr: f(52, 8),
} as const;
export const ionic_lif_setattr_comp = {
  status: f(0, 1),
  comp_index: f(2, 2),
  features: f(4, 8),
  color: f(15, 1),
} as const;
export const ionic_lif_getattr_cmd = { opcode: f(0, 1), attr: f(1, 1), index: f(2, 2) } as const;
export const ionic_lif_getattr_comp = {
  status: f(0, 1),
  comp_index: f(2, 2),
  state: f(4, 1),
  mtu: f(4, 4),
  mac: raw(4, ETH_ALEN),
  features: f(4, 8),
  color: f(15, 1),
} as const;

export const ionic_rx_mode_set_cmd = { opcode: f(0, 1), lif_index: f(2, 2), rx_mode: f(4, 2) } as const;
export const ionic_rx_filter_add_cmd = {
  opcode: f(0, 1),
  qtype: f(1, 1),
  lif_index: f(2, 2),
  qid: f(4, 4),
  match: f(8, 2),
  vlan: f(10, 2),
  mac: raw(10, ETH_ALEN),
  mac_vlan_vlan: f(10, 2),
  mac_vlan_mac: raw(12, ETH_ALEN),
} as const;
export const ionic_rx_filter_add_comp = {
  status: f(0, 1),
  comp_index: f(2, 2),
  filter_id: f(4, 4),
  color: f(15, 1),
} as const;
export const ionic_rx_filter_del_cmd = { opcode: f(0, 1), lif_index: f(2, 2), filter_id: f(4, 4) } as const;

// ---- identities (written into the 1912-byte data window) -----------------------

export const ionic_dev_identity = {
  version: f(0, 1),
  type: f(1, 1),
  nports: f(4, 1),
  nlifs: f(8, 4),
  nintrs: f(12, 4),
  ndbpgs_per_lif: f(16, 4),
  intr_coal_mult: f(20, 4),
  intr_coal_div: f(24, 4),
  eq_count: f(28, 4),
  capabilities: f(48, 8),
} as const;

/** union ionic_lif_identity: capabilities, eth @8, rdma @392 (packed). */
export const ionic_lif_identity = {
  capabilities: f(0, 8),
  eth_version: f(8, 1),
  max_ucast_filters: f(12, 4),
  max_mcast_filters: f(16, 4),
  rss_ind_tbl_sz: f(20, 2),
  min_frame_size: f(22, 4),
  max_frame_size: f(26, 4),
  /** eth.config (union ionic_lif_config) */
  CONFIG: 136,
  RDMA: 392,
} as const;

/** union ionic_lif_config (also lif_info's first 256 bytes). */
export const ionic_lif_config = {
  state: f(0, 1),
  NAME: 4,
  NAME_SIZE: 16,
  mtu: f(20, 4),
  mac: raw(24, ETH_ALEN),
  vlan: f(30, 2),
  features: f(32, 8),
  /** queue_count[IONIC_QTYPE_MAX]: element 0; element t is queue_count.size * t further on. */
  queue_count: f(40, 4),
  SIZE: 256,
} as const;

export const ionic_q_identity = {
  version: f(0, 1),
  supported: f(1, 1),
  features: f(8, 8),
  desc_sz: f(16, 2),
  comp_sz: f(18, 2),
  sg_desc_sz: f(20, 2),
  max_sg_elems: f(22, 2),
  sg_desc_stride: f(24, 2),
} as const;

export const ionic_port_identity = {
  version: f(0, 1),
  type: f(1, 1),
  num_lanes: f(2, 1),
  autoneg: f(3, 1),
  min_frame_size: f(4, 4),
  max_frame_size: f(8, 4),
  FEC_TYPE: 12,
  PAUSE_TYPE: 16,
  LOOPBACK_MODE: 18,
  /** speeds[IONIC_MAX_SPEEDS]: element 0. */
  speeds: f(20, 4),
  CONFIG: 128,
} as const;

/** union ionic_port_config (256 bytes). */
export const ionic_port_config = {
  speed: f(0, 4),
  mtu: f(4, 4),
  state: f(8, 1),
  an_enable: f(9, 1),
  fec_type: f(10, 1),
  pause_type: f(11, 1),
  loopback_mode: f(12, 1),
  SIZE: 256,
} as const;

/** struct ionic_port_info (written at PORT_INIT info_pa). */
export const ionic_port_info = {
  CONFIG: 0,
  status_id: f(256, 4),
  status_speed: f(260, 4),
  status_status: f(264, 1),
  link_down_count: f(265, 2),
  status_fec_type: f(267, 1),
  xcvr_state: f(316, 1),
  xcvr_phy: f(317, 1),
  xcvr_pid: f(318, 2),
  SPROM: 320,
  STATS: 576,
  SIZE: 2880,
} as const;

/** struct ionic_port_stats: offsets (relative to port_info STATS) of the counters we keep. */
export const ionic_port_stats = {
  frames_rx_ok: f(0, 8),
  frames_rx_all: f(8, 8),
  frames_rx_bad_fcs: f(16, 8),
  frames_rx_bad_all: f(24, 8),
  octets_rx_ok: f(32, 8),
  octets_rx_all: f(40, 8),
  frames_rx_unicast: f(48, 8),
  frames_rx_multicast: f(56, 8),
  frames_rx_broadcast: f(64, 8),
  frames_tx_ok: f(256, 8),
  frames_tx_all: f(264, 8),
  frames_tx_bad: f(272, 8),
  octets_tx_ok: f(280, 8),
  octets_tx_total: f(288, 8),
  frames_tx_unicast: f(296, 8),
  frames_tx_multicast: f(304, 8),
  frames_tx_broadcast: f(312, 8),
  SIZE: 712,
} as const;

/** struct ionic_lif_info (written at LIF_INIT info_pa): config, status, stats. */
export const ionic_lif_info = {
  CONFIG: 0,
  eid: f(256, 8),
  port_num: f(264, 1),
  link_status: f(266, 2),
  link_speed: f(268, 4),
  link_down_count: f(272, 2),
  STATS: 320,
  SIZE: 1344,
} as const;

/** struct ionic_lif_stats (relative to lif_info STATS). */
export const ionic_lif_stats = {
  rx_ucast_bytes: f(0x00, 8),
  rx_ucast_packets: f(0x08, 8),
  rx_mcast_bytes: f(0x10, 8),
  rx_mcast_packets: f(0x18, 8),
  rx_bcast_bytes: f(0x20, 8),
  rx_bcast_packets: f(0x28, 8),
  rx_ucast_drop_bytes: f(0x40, 8),
  rx_ucast_drop_packets: f(0x48, 8),
  rx_mcast_drop_bytes: f(0x50, 8),
  rx_mcast_drop_packets: f(0x58, 8),
  rx_bcast_drop_bytes: f(0x60, 8),
  rx_bcast_drop_packets: f(0x68, 8),
  rx_dma_error: f(0x70, 8),
  tx_ucast_bytes: f(0x80, 8),
  tx_ucast_packets: f(0x88, 8),
  tx_mcast_bytes: f(0x90, 8),
  tx_mcast_packets: f(0x98, 8),
  tx_bcast_bytes: f(0xa0, 8),
  tx_bcast_packets: f(0xa8, 8),
  tx_ucast_drop_bytes: f(0xc0, 8),
  tx_ucast_drop_packets: f(0xc8, 8),
  tx_mcast_drop_bytes: f(0xd0, 8),
  tx_mcast_drop_packets: f(0xd8, 8),
  tx_bcast_drop_bytes: f(0xe0, 8),
  tx_bcast_drop_packets: f(0xe8, 8),
  tx_dma_error: f(0xf0, 8),
  rx_queue_disabled: f(0x100, 8),
  rx_queue_empty: f(0x108, 8),
  rx_queue_error: f(0x110, 8),
  rx_desc_fetch_error: f(0x118, 8),
  rx_desc_data_error: f(0x120, 8),
  tx_queue_disabled: f(0x140, 8),
  tx_queue_error: f(0x148, 8),
  tx_desc_fetch_error: f(0x150, 8),
  tx_desc_data_error: f(0x158, 8),
  tx_queue_empty: f(0x160, 8),
  SIZE: 1024,
} as const;

// ---- rings ------------------------------------------------------------------------------

export const ionic_admin_comp = { status: f(0, 1), comp_index: f(2, 2), color: f(15, 1), SIZE: 16 } as const;

/**
 * struct ionic_txq_desc: cmd packs flags, opcode, nsge and the first address
 * (IONIC_TXQ_DESC_* below). The 52-bit address straddles cmd's two
 * little-endian words, so cmd is also named as those words (cmd_lo, cmd_hi).
 */
export const ionic_txq_desc = {
  cmd: f(0, 8),
  cmd_lo: f(0, 4),
  cmd_hi: f(4, 4),
  len: f(8, 2),
  vlan_tci: f(10, 2),
  csum_start: f(12, 2),
  csum_offset: f(14, 2),
  SIZE: 16,
} as const;
/** ionic_txq_desc.cmd bit fields (ionic_if.h IONIC_TXQ_DESC_*_SHIFT/_MASK), as read from cmd_lo. */
export const IONIC_TXQ_DESC_OPCODE_SHIFT = 4;
export const IONIC_TXQ_DESC_OPCODE_MASK = 0xf;
export const IONIC_TXQ_DESC_NSGE_SHIFT = 8;
export const IONIC_TXQ_DESC_NSGE_MASK = 0xf;
/** The address is cmd bits 12..63: the top 20 bits of cmd_lo, then all of cmd_hi. */
export const IONIC_TXQ_DESC_ADDR_SHIFT = 12;
export const ionic_txq_sg_elem = { addr: f(0, 8), len: f(8, 2), SIZE: 16 } as const;
export const ionic_txq_comp = { status: f(0, 1), comp_index: f(2, 2), color: f(15, 1), SIZE: 16 } as const;

export const ionic_rxq_desc = { opcode: f(0, 1), len: f(6, 2), addr: f(8, 8), SIZE: 16 } as const;
export const ionic_rxq_sg_elem = { addr: f(0, 8), len: f(8, 2), SIZE: 16 } as const;
/** RX SG descriptor: 8 elements. */
export const IONIC_RX_MAX_SG_ELEMS = 8;
export const ionic_rxq_comp = {
  status: f(0, 1),
  num_sg_elems: f(1, 1),
  comp_index: f(2, 2),
  rss_hash: f(4, 4),
  csum: f(8, 2),
  vlan_tci: f(10, 2),
  len: f(12, 2),
  csum_flags: f(14, 1),
  pkt_type_color: f(15, 1),
  SIZE: 16,
} as const;

/** struct ionic_notifyq_event / ionic_link_change_event (64 bytes, no color: eid says what is new). */
export const ionic_notifyq_event = {
  eid: f(0, 8),
  ecode: f(8, 2),
  link_status: f(10, 2),
  link_speed: f(12, 4),
  SIZE: 64,
} as const;

/** The doorbell value (64-bit write at dbpage + 8 * hw_type). */
export const ionic_doorbell = { p_index: f(0, 2), ring: f(2, 1), qid_lo: f(3, 1), qid_hi: f(4, 2), SIZE: 8 } as const;

/** Bit 7 of the last completion byte is the color. */
export const COLOR_BIT = 0x80;
