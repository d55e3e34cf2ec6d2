// The RoCEv2 transport in the stats file and /metrics (--backend roce): its
// counters as the transport keeps them (lib/roce/counters.ts snapshot(), a
// fixed set of names), shown as rows, and as a few labelled families:
// packets and bytes each way, ACKs and NAKs by direction and kind,
// retransmits, timeouts, duplicates, ICRC errors, drops by reason.

import type { StatRow } from './stats-format';
import type { Emit } from './metric-families';

/** What the ops tools read of the RoCE backend (lib/backends/roce.ts RoceBackend). */
export interface RoceStatsSource {
  /** The transport's counters by name, or null before the device attached it. */
  counters(): Readonly<Record<string, number>> | null;
}

/** Every counter, in the transport's order. */
export function roceRows(src: RoceStatsSource): StatRow[] {
  const c = src.counters();
  return c ? Object.entries(c).map(([k, v]): StatRow => [k, v]) : [];
}

type Add = (
  name: string,
  type: 'counter' | 'gauge',
  help: string,
  read: (emit: Emit) => void,
  labels?: readonly string[],
) => void;

const NAK_TX = 'naks_tx_';
const NAK_RX = 'naks_rx_';
const DROPS = 'drops_';

export function roceFamilies(src: RoceStatsSource, add: Add): void {
  const each = (read: (c: Readonly<Record<string, number>>, e: Emit) => void) => (e: Emit) => {
    const c = src.counters();
    if (c) read(c, e);
  };
  add(
    'roce_packets_total',
    'counter',
    'RoCEv2 packets sent and received (received: well-formed, ICRC good)',
    each((c, e) => {
      e(c['tx_packets'] ?? 0, { direction: 'tx' });
      e(c['rx_packets'] ?? 0, { direction: 'rx' });
    }),
    ['direction'],
  );
  add(
    'roce_bytes_total',
    'counter',
    'RoCEv2 frame bytes sent and received',
    each((c, e) => {
      e(c['tx_bytes'] ?? 0, { direction: 'tx' });
      e(c['rx_bytes'] ?? 0, { direction: 'rx' });
    }),
    ['direction'],
  );
  add(
    'roce_acks_total',
    'counter',
    'RoCEv2 ACKs sent and received',
    each((c, e) => {
      e(c['acks_tx'] ?? 0, { direction: 'tx' });
      e(c['acks_rx'] ?? 0, { direction: 'rx' });
    }),
    ['direction'],
  );
  add(
    'roce_naks_total',
    'counter',
    'RoCEv2 NAKs sent and received, by kind',
    each((c, e) => {
      for (const [k, v] of Object.entries(c)) {
        if (k.startsWith(NAK_TX)) e(v, { direction: 'tx', kind: k.slice(NAK_TX.length) });
        else if (k.startsWith(NAK_RX)) e(v, { direction: 'rx', kind: k.slice(NAK_RX.length) });
      }
    }),
    ['direction', 'kind'],
  );
  add(
    'roce_retransmits_total',
    'counter',
    'RoCEv2 request packets sent again',
    each((c, e) => e(c['retransmits'] ?? 0)),
  );
  add(
    'roce_timeouts_total',
    'counter',
    'RoCEv2 local ACK timeouts',
    each((c, e) => e(c['timeouts'] ?? 0)),
  );
  add(
    'roce_duplicates_total',
    'counter',
    'RoCEv2 duplicate packets received',
    each((c, e) => e(c['duplicates'] ?? 0)),
  );
  add(
    'roce_icrc_errors_total',
    'counter',
    'RoCEv2 frames dropped for a bad ICRC',
    each((c, e) => e(c['icrc_errors'] ?? 0)),
  );
  add(
    'roce_drops_total',
    'counter',
    'RoCEv2 frames from the wire dropped, by reason',
    each((c, e) => {
      for (const [k, v] of Object.entries(c)) if (k.startsWith(DROPS)) e(v, { reason: k.slice(DROPS.length) });
    }),
    ['reason'],
  );
}
