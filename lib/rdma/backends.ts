// RDMA backends: what executes the work the guest posts. Each one plugs into
// the engine through the data-path hooks (lib/rdma/hooks.ts), the interface
// the in-process NVMe-oF and S3 targets will use too.
//
//   none      the control path only: QPs, MRs, CQs are created and doorbells
//             recorded, but no WQE runs and nothing completes (PCI
//             enumeration and driver bring-up, as the C project's stub)
//   loopback  WQEs run between QPs of this device (datapath/loopback/)
//   tcp:...   loopback, plus QPs of other servers over the TCP mesh
//             (datapath/mesh/, lib/mesh): the CLI starts the Mesh and hands it here

import { installLoopbackDataPath, DataPathEngine } from './datapath/loopback';
import { installMeshDataPath, MeshDataPath, MeshDataPathOptions, MeshPort } from './datapath/mesh';

export const RDMA_BACKENDS = ['none', 'loopback'] as const;
export type RdmaBackendName = (typeof RDMA_BACKENDS)[number];

/** The mesh backend: a started Mesh (lib/mesh) and the data path's options. */
export interface MeshBackend {
  readonly mesh: MeshPort;
  readonly options?: MeshDataPathOptions;
}

export type RdmaBackend = RdmaBackendName | MeshBackend;

export function isRdmaBackend(name: string): name is RdmaBackendName {
  return (RDMA_BACKENDS as readonly string[]).includes(name);
}

/** Plug backend `b` into an engine; the mesh data path when it is one. */
export function installRdmaBackend(b: RdmaBackend, engine: DataPathEngine): MeshDataPath | null {
  if (typeof b !== 'string') return installMeshDataPath(engine, b.mesh, b.options);
  switch (b) {
    case 'none':
      return null;
    case 'loopback':
      installLoopbackDataPath(engine);
      return null;
  }
}
