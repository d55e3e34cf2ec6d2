// A TCP/IP host on the guest's Ethernet segment (the S3 store serves HTTP through one).
export { TcpStack, TCP_DEFAULT_LIMITS, DEFAULT_MAX_CONNECTIONS, parseIpv4Address } from './stack';
export type { TcpStackOptions, StackCounts } from './stack';
export { TcpConnection, TcpState, MIN_PEER_MSS } from './connection';
export type { ConnectionLimits } from './connection';
export * from './wire';
