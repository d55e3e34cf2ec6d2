// What the RoCE layer counts: packets and bytes each way, retransmits, NAKs
// by kind sent and received, duplicates, and every packet it drops, by reason.
// A drop is never silent and never an exception: the decoder and the
// transport return a reason and the caller adds it here. Plain numbers in
// typed arrays, bumped on the hot path without allocation; snapshot() is for
// the stats file and /metrics, off the hot path.

/** Why a packet was dropped. 0 is "not dropped". */
export const DROP_NONE = 0;
export const DROP_TOO_SHORT = 1;
export const DROP_NOT_IP = 2;
export const DROP_IP_HEADER = 3;
export const DROP_IP_LENGTH = 4;
export const DROP_IP_CHECKSUM = 5;
export const DROP_NOT_UDP = 6;
export const DROP_NOT_ROCE_PORT = 7;
export const DROP_UDP_LENGTH = 8;
export const DROP_TRUNCATED = 9;
export const DROP_BAD_OPCODE = 10;
export const DROP_BAD_TVER = 11;
export const DROP_BAD_PAD = 12;
export const DROP_ICRC = 13;
export const DROP_UNKNOWN_QPN = 14;
export const DROP_QP_STATE = 15;
export const DROP_WRONG_PEER = 16;
export const DROP_PSN_OUT_OF_WINDOW = 17;
export const DROP_BAD_PKEY = 18;
export const DROP_BAD_QKEY = 19;
export const DROP_OVERSIZED = 20;
export const DROP_OPCODE_SEQUENCE = 21;
export const DROP_UNEXPECTED_RESPONSE = 22;
export const DROP_NO_RECV = 23;
export const DROP_WRONG_TRANSPORT = 24;
export const DROP_NOT_OUR_GID = 25;

/** Names of the drop reasons, by number (stats keys). */
export const DROP_REASON_NAMES: readonly string[] = [
  'none',
  'too_short',
  'not_ip',
  'ip_header',
  'ip_length',
  'ip_checksum',
  'not_udp',
  'not_roce_port',
  'udp_length',
  'truncated',
  'bad_opcode',
  'bad_tver',
  'bad_pad',
  'icrc',
  'unknown_qpn',
  'qp_state',
  'wrong_peer',
  'psn_out_of_window',
  'bad_pkey',
  'bad_qkey',
  'oversized',
  'opcode_sequence',
  'unexpected_response',
  'no_recv',
  'wrong_transport',
  'not_our_gid',
];

/** Kinds of NAK, as counters index them: the four NAK codes we send and receive, then RNR. */
export const NAK_KIND_SEQUENCE = 0;
export const NAK_KIND_INVALID_REQUEST = 1;
export const NAK_KIND_REMOTE_ACCESS = 2;
export const NAK_KIND_REMOTE_OPERATIONAL = 3;
export const NAK_KIND_RNR = 4;
const NAK_KIND_NAMES: readonly string[] = [
  'psn_sequence',
  'invalid_request',
  'remote_access',
  'remote_operational',
  'rnr',
];

export class RoceCounters {
  txPackets = 0;
  rxPackets = 0;
  txBytes = 0;
  rxBytes = 0;
  /** Packets sent again (after a timeout, a sequence NAK or an RNR wait). */
  retransmits = 0;
  /** Times the retransmit (local ACK) timer fired. */
  timeouts = 0;
  /** Duplicate requests received (answered again or acknowledged, not executed again). */
  duplicates = 0;
  /** ACKs sent (coalesced: one for many packets) and received. */
  acksTx = 0;
  acksRx = 0;
  readonly naksTx = new Float64Array(NAK_KIND_NAMES.length);
  readonly naksRx = new Float64Array(NAK_KIND_NAMES.length);
  readonly drops = new Float64Array(DROP_REASON_NAMES.length);

  /** Count a dropped packet. */
  drop(reason: number): void {
    if (reason > 0 && reason < this.drops.length) this.drops[reason]!++;
  }

  /** ICRC errors: the drops for a bad ICRC. */
  get icrcErrors(): number {
    return this.drops[DROP_ICRC]!;
  }

  /** Every counter as a flat name -> value map (stats file, /metrics); zero drop reasons included, so the set of keys is fixed. */
  snapshot(): Record<string, number> {
    const out: Record<string, number> = {
      tx_packets: this.txPackets,
      rx_packets: this.rxPackets,
      tx_bytes: this.txBytes,
      rx_bytes: this.rxBytes,
      retransmits: this.retransmits,
      timeouts: this.timeouts,
      duplicates: this.duplicates,
      acks_tx: this.acksTx,
      acks_rx: this.acksRx,
      icrc_errors: this.icrcErrors,
    };
    for (let k = 0; k < NAK_KIND_NAMES.length; k++) {
      out[`naks_tx_${NAK_KIND_NAMES[k]}`] = this.naksTx[k]!;
      out[`naks_rx_${NAK_KIND_NAMES[k]}`] = this.naksRx[k]!;
    }
    for (let r = 1; r < DROP_REASON_NAMES.length; r++) out[`drops_${DROP_REASON_NAMES[r]}`] = this.drops[r]!;
    return out;
  }
}
