// NIC profiles: the numbers the emulated ionic function reports about itself.
//
// A profile sets what the stock driver sizes itself by: the MSI-X table
// (dev_identity.nintrs), the Ethernet queue pairs and RDMA event queues of the
// LIF (lif_identity queue_count[TXQ/RXQ] and rdma.eq_qtype.qid_count), the
// largest frame, the link speed and transceiver in port_info, the firmware
// version, serial, ASIC type and revision in dev_info, and how often the
// statistics blocks are rewritten.
//
// This folder, by job: model.ts (this file: the types, codes, ranges and
// errors), schema.ts (every value checked with zod, cross-field rules),
// ini.ts (the ini keys, parsing and formatting), builtins.ts (the built-in
// profiles), resolve.ts (layering a --nic-profile list over `compat`) and
// plan.ts (what the driver will make of a profile). index.ts is the API.

type TransceiverPhy = 'copper' | 'fiber' | 'none';

/** What port_info.status.xcvr reports. */
interface Transceiver {
  /** xcvr.phy: copper (1), fiber (2) or none (0). ethtool prints speed only for copper or fiber. */
  readonly phy: TransceiverPhy;
  /** xcvr.pid, an `enum ionic_xcvr_pid` code (u16); it selects the link modes ethtool lists. */
  readonly pid: number;
  /** Human-readable name of the module, for logs and `--nic-profile show`. */
  readonly description: string;
}

/** The Ethernet offloads a profile offers the driver (lif features); each can be withheld. */
export interface NicOffloads {
  /** TX scatter-gather (TX_SG). */
  readonly txSg: boolean;
  /** TX checksum, partial and full (TX_CSUM). */
  readonly txCsum: boolean;
  /** TCP segmentation, IPv4 and IPv6 (TSO, TSO_IPV6, TSO_ECN); offered only with txSg and txCsum. */
  readonly tso: boolean;
  /** RX checksum: CHECKSUM_COMPLETE sums (RX_CSUM). */
  readonly rxCsum: boolean;
  /** RX hash and packet type (RX_HASH; the driver asks for it only with more than one queue pair). */
  readonly rxHash: boolean;
  /** VLAN tag insert on TX and strip on RX (VLAN_TX_TAG, VLAN_RX_STRIP). */
  readonly vlan: boolean;
}

export interface NicProfile {
  /** Built-in name, or the resolved layer list ("compat+dsc-25+./x.ini"). */
  readonly name: string;
  readonly description: string;
  /** MSI-X table size and dev_identity.nintrs, 2..128. */
  readonly msixVectors: number;
  /** Ethernet TX/RX queue pairs the LIF offers, 1..64. */
  readonly ethQueues: number;
  /** RDMA event queues, 0 (no RDMA) or 4..64. */
  readonly rdmaEqs: number;
  /** Link speed in Mbps, one of LINK_SPEEDS_MBPS. */
  readonly linkSpeedMbps: number;
  readonly transceiver: Transceiver;
  /** Largest MTU, 1500..9194; lif max_frame_size = maxMtu + FRAME_OVERHEAD. */
  readonly maxMtu: number;
  /** dev_info.fw_version: printable ASCII, 1..31 characters. */
  readonly firmwareVersion: string;
  /** How often changed statistics blocks are rewritten, 100..60000 ms. */
  readonly statsIntervalMs: number;
  /** dev_info.asic_type: 1 CAPRI, 3 GIGLIO or 4 SALINA. */
  readonly asicType: number;
  /** dev_info.asic_rev, u8. */
  readonly asicRev: number;
  /** dev_info.serial_num: printable ASCII, at most 31 characters. */
  readonly serialNumber: string;
  readonly offloads: NicOffloads;
}

/** The ini keys, one per NicProfile field (ini.ts describes each). */
export type IniKey =
  | 'name'
  | 'description'
  | 'msix_vectors'
  | 'eth_queues'
  | 'rdma_eqs'
  | 'link_speed'
  | 'transceiver_phy'
  | 'transceiver_pid'
  | 'transceiver'
  | 'max_mtu'
  | 'firmware_version'
  | 'stats_interval_ms'
  | 'asic_type'
  | 'asic_rev'
  | 'serial_number'
  | 'offload_tx_sg'
  | 'offload_tx_csum'
  | 'offload_tso'
  | 'offload_rx_csum'
  | 'offload_rx_hash'
  | 'offload_vlan';

/** `enum ionic_xcvr_pid` codes (ionic_if.h) that the built-ins use or that are handy in an ini. */
export const IonicXcvrPid = {
  UNKNOWN: 0,
  QSFP_100G_CR4: 1,
  QSFP_40GBASE_CR4: 2,
  SFP_25GBASE_CR_S: 3,
  QSFP_200G_CR4: 8, // added upstream in Dec 2024, with the 200G/400G speeds
  QSFP_400G_CR4: 9,
  QSFP_100G_SR4: 52,
  SFP_25GBASE_SR: 59,
  QSFP_200G_SR4: 77,
  QSFP_400G_DR4: 80,
} as const;

/** `enum ionic_phy_type`: the byte written to port_info.status.xcvr.phy. */
export const IonicPhyType: Readonly<Record<TransceiverPhy, number>> = { none: 0, copper: 1, fiber: 2 };

/** `ionic_asic_type` values a profile may report. 0 (NONE) and 2 (ELBA) turn on the driver's doorbell-polling workaround. */
export const IonicAsicType = { CAPRI: 1, GIGLIO: 3, SALINA: 4 } as const;

/** Link speeds a profile may report, in Mbps (IONIC_SPEED_*). */
export const LINK_SPEEDS_MBPS: readonly number[] = [1000, 10000, 25000, 40000, 50000, 100000, 200000, 400000];

/** lif max_frame_size - max MTU: the driver computes max_mtu = max_frame_size - 18. */
const FRAME_OVERHEAD = 18;

/** Ranges checked for every profile. */
export const ProfileLimits = {
  MSIX_VECTORS_MIN: 2,
  MSIX_VECTORS_MAX: 128,
  ETH_QUEUES_MIN: 1,
  ETH_QUEUES_MAX: 64,
  /** ionic_rdma refuses to probe with fewer event queues than this. */
  RDMA_EQS_MIN: 4,
  RDMA_EQS_MAX: 64,
  MAX_MTU_MIN: 1500,
  MAX_MTU_MAX: 9194,
  STATS_INTERVAL_MIN_MS: 100,
  STATS_INTERVAL_MAX_MS: 60000,
  FIRMWARE_VERSION_MAX_CHARS: 31,
  SERIAL_NUMBER_MAX_CHARS: 31,
  DESCRIPTION_MAX_CHARS: 200,
  TRANSCEIVER_MAX_CHARS: 64,
  NAME_MAX_CHARS: 255,
  /** An ini file larger than this is refused before it is parsed. */
  FILE_MAX_BYTES: 64 * 1024,
} as const;

/** lif_identity eth.max_frame_size for a profile. */
export function maxFrameSize(p: NicProfile): number {
  return p.maxMtu + FRAME_OVERHEAD;
}

export type ProfileErrorCode =
  | 'EMPTY_SPEC' // no profile named, or an empty entry in the list
  | 'UNKNOWN_PROFILE' // not a built-in and not a path
  | 'READ_FAILED' // the file could not be read
  | 'TOO_LARGE' // the file is over FILE_MAX_BYTES
  | 'SYNTAX' // a line that is not a comment, header or key = value
  | 'BAD_SECTION' // a section other than [profile], or a second [profile]
  | 'UNKNOWN_KEY'
  | 'DUPLICATE_KEY'
  | 'BAD_VALUE' // a value outside its key's range or form
  | 'CROSS_FIELD'; // two values that cannot go together

/** A profile that cannot be used. The message is one line naming the file, line and key where relevant. */
export class ProfileError extends Error {
  override readonly name = 'ProfileError';
  constructor(
    message: string,
    readonly code: ProfileErrorCode,
  ) {
    super(message);
  }
}

/** "100G" for 100000; speeds not a whole number of Gb/s are written in Mbps. */
export function formatLinkSpeed(mbps: number): string {
  return mbps % 1000 === 0 && mbps > 0 ? `${mbps / 1000}G` : String(mbps);
}

/** Mbps for "100G", "25g" or "100000"; undefined when the text is neither form (the range is checked elsewhere). */
export function parseLinkSpeed(text: string): number | undefined {
  const t = text.trim();
  const g = /^(\d{1,6})\s*[gG]$/.exec(t);
  if (g) return Number(g[1]) * 1000;
  if (/^\d{1,9}$/.test(t)) return Number(t);
  return undefined;
}
