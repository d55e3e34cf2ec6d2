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
//   s3        loopback, plus an S3 store at an address of the guest's segment
//             (lib/targets/s3): the CLI opens the store, the device puts the
//             endpoint on its frame hooks with the MR-table DMA callbacks

import { installWqeExecutor, DataPathEngine } from './executor';
import { installMeshDataPath, MeshDataPath, MeshDataPathOptions, MeshPort } from './datapath/mesh';
import type { NvmeofTarget } from '../targets/nvmeof/queue';
import { installNvmeofDataPath, NvmeofDataPath, NvmeofDataPathOptions } from '../targets/nvmeof/rdma';
import type { S3Options } from '../targets/s3/options';
import type { Credentials, ObjectStore } from '../targets/s3/store';

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

/** The S3 backend: an opened store (S3Endpoint.openStore), its options, and SigV4 credentials when requests must be signed. */
export interface S3Backend {
  readonly s3: { readonly options: S3Options; readonly store: ObjectStore; readonly credentials?: readonly Credentials[] };
}

export type RdmaBackend = RdmaBackendName | MeshBackend | NvmeofBackend | S3Backend;

export function isRdmaBackend(name: string): name is RdmaBackendName {
  return (RDMA_BACKENDS as readonly string[]).includes(name);
}

/** Plug backend `b` into an engine; the mesh or NVMe-oF data path when it is one. */
export function installRdmaBackend(b: RdmaBackend, engine: DataPathEngine): MeshDataPath | NvmeofDataPath | null {
  if (typeof b !== 'string') {
    if ('s3' in b) {
      // The store's resource handling is the loopback backend's; the device adds the endpoint.
      installWqeExecutor(engine);
      return null;
    }
    return 'nvmeof' in b ? installNvmeofDataPath(engine, b.nvmeof, b.options) : installMeshDataPath(engine, b.mesh, b.options);
  }
  switch (b) {
    case 'none':
      return null;
    case 'loopback':
      installWqeExecutor(engine);
      return null;
  }
}
