// The mesh data path: RDMA between QPs of different servers over lib/mesh.
export { installMeshDataPath, MeshDataPath } from './mesh-data-path';
export type { MeshDataPathOptions, MeshPort } from './mesh-data-path';
export { gidsFromFrame, linkLocalGid } from './gid-learning';
