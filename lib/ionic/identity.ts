// The identity blobs the device writes into the 1912-byte data window:
// dev_identity (IDENTIFY), lif_identity (LIF_IDENTIFY), q_identity
// (Q_IDENTIFY), port_identity (PORT_IDENTIFY), and the port_info block
// (PORT_INIT). Everything not set stays zero: the window still holds the
// drv_identity the driver just wrote, and stale bytes would read as fields.

import { RDMA_NDBPGS_PER_LIF } from '../rdma/limits';
import { IONIC_DEV_CMD_DATA_SIZE, IONIC_LIF_CAP_ETH, IONIC_LIF_CAP_RDMA, PortState, QType } from './constants';
import {
  ionic_dev_identity,
  ionic_lif_config,
  ionic_lif_identity,
  ionic_port_config,
  ionic_port_identity,
  ionic_port_info,
  ionic_q_identity,
} from './layouts';
import { setField, setRawBytes } from '../../protocol/field';
import { IonicPhyType, maxFrameSize } from './profile';
import type { NicProfile } from './profile';
import { rdmaEnabled, writeRdmaIdentity } from './rdma/identity';
import { offeredFeatures } from './offload/features';

/**
 * Doorbell pages per LIF without RDMA: one (the kernel's). With RDMA every open
 * ibv_context needs a page of its own (dbid 1..n-1), so the device offers
 * RDMA_NDBPGS_PER_LIF. The kernel's page is hw_index * n + 0 = page 0 either
 * way, and doorbells decode only the offset within a page, so any page works.
 */
const NDBPGS_PER_LIF = 1;

/** dev_identity ndbpgs_per_lif for a profile. */
function doorbellPagesPerLif(p: NicProfile): number {
  return rdmaEnabled(p) ? RDMA_NDBPGS_PER_LIF : NDBPGS_PER_LIF;
}

/** MAC filters we accept; the driver turns promiscuous above it. */
export const MAX_UCAST_FILTERS = 32;
export const MAX_MCAST_FILTERS = 32;
const RSS_IND_TBL_SZ = 128;
const MIN_FRAME_SIZE = 64;

/** q_identity features (IONIC_QIDENT_F_*). */
const enum QIdentFeature {
  CQ = 0x1,
  SG = 0x2,
}

/** port_identity type (enum ionic_port_type). */
const IONIC_PORT_TYPE_ETH = 1;
/** port_info.status.status (enum ionic_port_oper_status). */
const IONIC_PORT_OPER_STATUS_UP = 1;
/** port_info.status.xcvr.state (enum ionic_xcvr_state). */
const enum XcvrState {
  REMOVED = 0,
  INSERTED = 1,
}
/** port_config.fec_type and port status fec_type (enum ionic_port_fec_type). */
const enum PortFecType {
  NONE = 0,
  FC = 1,
  RS = 2,
}
/** Links at and above this speed run RS FEC. */
const RS_FEC_MIN_MBPS = 25000;
/** Links at and above this speed have four lanes. */
const FOUR_LANES_MIN_MBPS = 100000;
/** Port MTU in port_identity's config (the driver sets its own with PORT_SETATTR). */
const PORT_IDENTITY_MTU = 1500;

function fecType(p: NicProfile): PortFecType {
  return p.linkSpeedMbps >= RS_FEC_MIN_MBPS ? PortFecType.RS : PortFecType.NONE;
}

export function writeDevIdentity(w: Buffer, p: NicProfile): void {
  w.fill(0, 0, IONIC_DEV_CMD_DATA_SIZE);
  setField(w, 0, ionic_dev_identity.version, 2);
  setField(w, 0, ionic_dev_identity.nports, 1);
  setField(w, 0, ionic_dev_identity.nlifs, 1);
  setField(w, 0, ionic_dev_identity.nintrs, p.msixVectors);
  setField(w, 0, ionic_dev_identity.ndbpgs_per_lif, doorbellPagesPerLif(p));
  // Coalescing: usecs * 1 / 3 device units (what the hardware reports); 0 would break ethtool -C.
  setField(w, 0, ionic_dev_identity.intr_coal_mult, 1);
  setField(w, 0, ionic_dev_identity.intr_coal_div, 3);
  setField(w, 0, ionic_dev_identity.eq_count, 0);
}

/** Queue counts the LIF offers, per logical type. */
export function queueCount(p: NicProfile, type: number): number {
  switch (type) {
    case QType.ADMINQ:
      return 1;
    case QType.NOTIFYQ:
      return 1;
    case QType.RXQ:
      return p.ethQueues;
    case QType.TXQ:
      return p.ethQueues;
    default:
      return 0;
  }
}

export function writeLifIdentity(w: Buffer, p: NicProfile, mac: Buffer, mtu: number): void {
  w.fill(0, 0, IONIC_DEV_CMD_DATA_SIZE);
  setField(w, 0, ionic_lif_identity.capabilities, IONIC_LIF_CAP_ETH | (rdmaEnabled(p) ? IONIC_LIF_CAP_RDMA : 0));
  setField(w, 0, ionic_lif_identity.eth_version, 1);
  setField(w, 0, ionic_lif_identity.max_ucast_filters, MAX_UCAST_FILTERS);
  setField(w, 0, ionic_lif_identity.max_mcast_filters, MAX_MCAST_FILTERS);
  setField(w, 0, ionic_lif_identity.rss_ind_tbl_sz, RSS_IND_TBL_SZ);
  setField(w, 0, ionic_lif_identity.min_frame_size, MIN_FRAME_SIZE);
  setField(w, 0, ionic_lif_identity.max_frame_size, maxFrameSize(p));
  // The identity's config shows what the device offers; the driver reads only TIMESTAMP from it.
  writeLifConfig(w, ionic_lif_identity.CONFIG, p, mac, mtu, offeredFeatures(p.offloads));
  // The RDMA section (ionic RDMA R1.4); its eq_qtype count also sizes the Ethernet driver's interrupt request.
  if (rdmaEnabled(p)) writeRdmaIdentity(w, ionic_lif_identity.RDMA, p);
}

/** union ionic_lif_config: in lif_identity and at the start of lif_info; `features` are EthHw bits. */
export function writeLifConfig(w: Buffer, at: number, p: NicProfile, mac: Buffer, mtu: number, features: number): void {
  w.fill(0, at, at + ionic_lif_config.SIZE);
  setField(w, at, ionic_lif_config.state, 1);
  setField(w, at, ionic_lif_config.mtu, mtu);
  setRawBytes(w, at, ionic_lif_config.mac, mac);
  setField(w, at, ionic_lif_config.features, features);
  for (const t of [QType.ADMINQ, QType.NOTIFYQ, QType.RXQ, QType.TXQ]) {
    setField(w, at + ionic_lif_config.queue_count.size * t, ionic_lif_config.queue_count, queueCount(p, t));
  }
}

/** q_identity per logical type, or false for a type we do not have (the driver skips it). */
export function writeQIdentity(w: Buffer, type: number): boolean {
  w.fill(0, 0, IONIC_DEV_CMD_DATA_SIZE);
  switch (type) {
    case QType.ADMINQ:
      setField(w, 0, ionic_q_identity.version, 0);
      setField(w, 0, ionic_q_identity.supported, 1);
      setField(w, 0, ionic_q_identity.features, QIdentFeature.CQ);
      setField(w, 0, ionic_q_identity.desc_sz, 64);
      setField(w, 0, ionic_q_identity.comp_sz, 16);
      return true;
    case QType.NOTIFYQ:
      setField(w, 0, ionic_q_identity.version, 0);
      setField(w, 0, ionic_q_identity.supported, 1);
      setField(w, 0, ionic_q_identity.desc_sz, 4);
      setField(w, 0, ionic_q_identity.comp_sz, 64);
      return true;
    case QType.RXQ:
      setField(w, 0, ionic_q_identity.version, 0);
      setField(w, 0, ionic_q_identity.supported, 1);
      setField(w, 0, ionic_q_identity.features, QIdentFeature.CQ | QIdentFeature.SG);
      setField(w, 0, ionic_q_identity.desc_sz, 16);
      setField(w, 0, ionic_q_identity.comp_sz, 16);
      setField(w, 0, ionic_q_identity.sg_desc_sz, 128);
      setField(w, 0, ionic_q_identity.max_sg_elems, 8);
      setField(w, 0, ionic_q_identity.sg_desc_stride, 8);
      return true;
    case QType.TXQ:
      // Version 1 with 256-byte SG descriptors: the 16-element stride (contract section 7, trap 7).
      setField(w, 0, ionic_q_identity.version, 1);
      setField(w, 0, ionic_q_identity.supported, 3);
      setField(w, 0, ionic_q_identity.features, QIdentFeature.CQ | QIdentFeature.SG);
      setField(w, 0, ionic_q_identity.desc_sz, 16);
      setField(w, 0, ionic_q_identity.comp_sz, 16);
      setField(w, 0, ionic_q_identity.sg_desc_sz, 256);
      setField(w, 0, ionic_q_identity.max_sg_elems, 15);
      setField(w, 0, ionic_q_identity.sg_desc_stride, 16);
      return true;
    default:
      return false;
  }
}

function writePortConfig(w: Buffer, at: number, p: NicProfile, mtu: number, up: boolean): void {
  w.fill(0, at, at + ionic_port_config.SIZE);
  setField(w, at, ionic_port_config.speed, p.linkSpeedMbps);
  setField(w, at, ionic_port_config.mtu, mtu);
  setField(w, at, ionic_port_config.state, up ? PortState.UP : PortState.DOWN);
  setField(w, at, ionic_port_config.an_enable, 0);
  // RS FEC at 25G and above, as those links run.
  setField(w, at, ionic_port_config.fec_type, fecType(p));
}

export function writePortIdentity(w: Buffer, p: NicProfile): void {
  w.fill(0, 0, IONIC_DEV_CMD_DATA_SIZE);
  setField(w, 0, ionic_port_identity.version, 0);
  setField(w, 0, ionic_port_identity.type, IONIC_PORT_TYPE_ETH);
  setField(w, 0, ionic_port_identity.num_lanes, p.linkSpeedMbps >= FOUR_LANES_MIN_MBPS ? 4 : 1);
  setField(w, 0, ionic_port_identity.autoneg, 0);
  setField(w, 0, ionic_port_identity.min_frame_size, MIN_FRAME_SIZE);
  setField(w, 0, ionic_port_identity.max_frame_size, maxFrameSize(p));
  // One speed: the profile's (speeds[0]; the rest stay 0).
  setField(w, 0, ionic_port_identity.speeds, p.linkSpeedMbps);
  writePortConfig(w, ionic_port_identity.CONFIG, p, PORT_IDENTITY_MTU, true);
}

/** The whole port_info block (config, status with the transceiver, zero stats). */
export function buildPortInfo(p: NicProfile, mtu: number): Buffer {
  const b = Buffer.alloc(ionic_port_info.SIZE);
  writePortConfig(b, ionic_port_info.CONFIG, p, mtu, true);
  setField(b, 0, ionic_port_info.status_id, 0);
  setField(b, 0, ionic_port_info.status_speed, p.linkSpeedMbps);
  setField(b, 0, ionic_port_info.status_status, IONIC_PORT_OPER_STATUS_UP);
  setField(b, 0, ionic_port_info.status_fec_type, fecType(p));
  // Transceiver: inserted, with its phy and pid so ethtool reports speed and port type.
  setField(b, 0, ionic_port_info.xcvr_state, p.transceiver.phy === 'none' ? XcvrState.REMOVED : XcvrState.INSERTED);
  setField(b, 0, ionic_port_info.xcvr_phy, IonicPhyType[p.transceiver.phy]);
  setField(b, 0, ionic_port_info.xcvr_pid, p.transceiver.pid);
  return b;
}
