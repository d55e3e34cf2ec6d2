// --backend roce: RDMA with the rest of the world as RoCEv2 on the wire. QPs
// whose peer is not in this VM run the RoCEv2 transport (lib/roce) over the
// host TAP the Ethernet function uses (--tap); QPs whose peer is in this VM
// run on the WQE executor alone, as with loopback. The data path is
// lib/backends/roce/ (docs/roce.md).

import type { GuestSegment, RdmaBackend } from '../rdma/backend';
import type { DataPathEngine } from '../rdma/executor';
import { RoceDataPath } from './roce/data-path';
import type { BackendKind } from './kind';

export class RoceBackend implements RdmaBackend {
  readonly name = 'roce';
  /** The RoCE data path, once attached to an engine. */
  dataPath: RoceDataPath | null = null;

  attach(engine: DataPathEngine | null, segment: GuestSegment): void {
    if (!engine) return;
    this.dataPath = new RoceDataPath(engine, segment);
  }

  /** The transport's counters by name (packets, retransmits, NAKs by kind, duplicates, ICRC errors, drops), or null before attach. */
  counters(): Record<string, number> | null {
    const dp = this.dataPath;
    if (!dp) return null;
    return { ...dp.counters.snapshot(), tx_link_errors: dp.txErrors };
  }
}

export const roceKind: BackendKind = {
  help: `  roce                      RDMA with other hosts as RoCEv2 (UDP 4791) on the --tap interface:
                              RC, UC and UD QPs whose peer GID is not this VM's; peers in this VM
                              stay local (docs/roce.md)`,
  grammar: 'roce',
  accepts: (spec) => spec === 'roce',
  prepare: () => ({ ok: true, value: { open: async () => ({ ok: true, value: new RoceBackend() }) } }),
};
