// RDMA backends: what executes the work the guest posts. Each one plugs into
// the engine through the data-path hooks (lib/rdma/hooks.ts), the interface
// the TCP mesh and the in-process NVMe-oF and S3 targets will use too.
//
//   none      the control path only: QPs, MRs, CQs are created and doorbells
//             recorded, but no WQE runs and nothing completes (PCI
//             enumeration and driver bring-up, as the C project's stub)
//   loopback  WQEs run between QPs of this device (datapath/loopback/)

import { installLoopbackDataPath, DataPathEngine } from './datapath/loopback';

export const RDMA_BACKENDS = ['none', 'loopback'] as const;
export type RdmaBackendName = (typeof RDMA_BACKENDS)[number];

export function isRdmaBackend(name: string): name is RdmaBackendName {
  return (RDMA_BACKENDS as readonly string[]).includes(name);
}

/** Plug backend `name` into an engine. */
export function installRdmaBackend(name: RdmaBackendName, engine: DataPathEngine): void {
  switch (name) {
    case 'none':
      return;
    case 'loopback':
      installLoopbackDataPath(engine);
      return;
  }
}
