// The RDMA data path's vocabulary: WQE layouts and decoders, the CQE, the
// byte mover, the datagram rules. The executor that runs WQEs on them is
// lib/rdma/executor; keys are translated by the resource manager
// (lib/rdma/resources.ts).

export * from './wqe-layout';
export * from './wqe-decode';
export * from './cqe';
export * from './copy';
export * from './datagram';
