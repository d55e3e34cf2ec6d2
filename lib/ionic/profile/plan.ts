// What the driver will make of a profile: ionic_lif_size replayed.

import { NicProfile, ProfileLimits } from './model';

interface VectorPlan {
  /** Ethernet queue pairs the driver brings up. */
  readonly nxqs: number;
  /** RDMA event-queue vectors the driver reserves. */
  readonly neqs: number;
  /** Vectors it requests: 1 (adminq + notifyq) + nxqs + neqs; 0 when probe fails. */
  readonly nintrs: number;
  /** Probe fails: not even the minimum fits in the table. */
  readonly probeFails: boolean;
  /** ionic_rdma gets the >= 4 event queues it needs. */
  readonly rdmaUsable: boolean;
}

/**
 * Replays ionic_lif_size for a guest with `onlineCpus` CPUs, assuming the OS
 * grants every vector the table holds: nxqs = min(eth, cpus), neqs = min(eqs,
 * cpus); while 1 + nxqs + neqs exceeds the table, halve neqs (down to 1), then
 * nxqs (down to 1).
 */
export function planVectors(p: NicProfile, onlineCpus: number): VectorPlan {
  const cpus = Math.max(1, Math.floor(onlineCpus));
  let nxqs = Math.min(p.ethQueues, cpus);
  let neqs = Math.min(p.rdmaEqs, cpus);
  for (;;) {
    const nintrs = 1 + nxqs + neqs;
    if (nintrs <= p.msixVectors) {
      return { nxqs, neqs, nintrs, probeFails: false, rdmaUsable: neqs >= ProfileLimits.RDMA_EQS_MIN };
    }
    if (neqs > 1) neqs >>= 1;
    else if (nxqs > 1) nxqs >>= 1;
    else return { nxqs: 0, neqs: 0, nintrs: 0, probeFails: true, rdmaUsable: false };
  }
}
