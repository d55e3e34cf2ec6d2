// The RDMA data path: ring layouts and codecs, the byte mover, the datagram
// rules, and the loopback engine that executes WQEs between QPs of one device.
// Keys are translated by the resource manager (lib/rdma/resources.ts).

export * from './layouts';
export * from './copy';
export * from './datagram';
export * from './engine-glue';
