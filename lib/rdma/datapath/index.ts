// The RDMA data path: WQE layouts and decoders, the CQE, the byte mover, the datagram
// rules, and the loopback engine that executes WQEs between QPs of one device.
// Keys are translated by the resource manager (lib/rdma/resources.ts).

export * from './wqe-layout';
export * from './wqe-decode';
export * from './cqe';
export * from './copy';
export * from './datagram';
export * from './loopback';
