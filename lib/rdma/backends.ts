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
//   nvmeof    loopback, plus an NVMe-oF target at an address of the guest's
//             segment (lib/targets/nvmeof/rdma): the CLI builds the target

import { installLoopbackDataPath, DataPathEngine } from './datapath/loopback';
import { installMeshDataPath, MeshDataPath, MeshDataPathOptions, MeshPort } from './datapath/mesh';
import type { NvmeofTarget } from '../targets/nvmeof/queue';
import { installNvmeofDataPath, NvmeofDataPath, NvmeofDataPathOptions } from '../targets/nvmeof/rdma';

export const RDMA_BACKENDS = ['none', 'loopback'] as const;
export type RdmaBackendName = (typeof RDMA_BACKENDS)[number];

/** The mesh backend: a started Mesh (lib/mesh) and the data path's options. */
export interface MeshBackend {
  readonly mesh: MeshPort;
  readonly options?: MeshDataPathOptions;
}

/** The NVMe-oF backend: a built target (createNvmeofTarget) and the data path's options. */
export interface NvmeofBackend {
  readonly nvmeof: NvmeofTarget;
  readonly options?: NvmeofDataPathOptions;
}

export type RdmaBackend = RdmaBackendName | MeshBackend | NvmeofBackend;

export function isRdmaBackend(name: string): name is RdmaBackendName {
  return (RDMA_BACKENDS as readonly string[]).includes(name);
}

/** Plug backend `b` into an engine; the mesh or NVMe-oF data path when it is one. */
export function installRdmaBackend(b: RdmaBackend, engine: DataPathEngine): MeshDataPath | NvmeofDataPath | null {
  if (typeof b !== 'string') return 'nvmeof' in b ? installNvmeofDataPath(engine, b.nvmeof, b.options) : installMeshDataPath(engine, b.mesh, b.options);
  switch (b) {
    case 'none':
      return null;
    case 'loopback':
      installLoopbackDataPath(engine);
      return null;
  }
}
