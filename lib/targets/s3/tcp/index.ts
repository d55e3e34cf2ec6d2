// The S3 store's TCP endpoint on Ethernet frames.
export { TcpStack, TCP_DEFAULT_LIMITS, DEFAULT_MAX_CONNECTIONS, parseIpv4Address } from './stack';
export type { TcpStackOptions, StackCounts } from './stack';
export { TcpConnection, TcpState, MIN_PEER_MSS } from './connection';
export type { ConnectionLimits } from './connection';
export * from './wire';
