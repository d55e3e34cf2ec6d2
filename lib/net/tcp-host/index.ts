// A TCP/IP host on the guest's Ethernet segment (the S3 store serves HTTP through one).
export { TcpStack } from './stack';
export { TcpConnection } from './connection';
export * from './wire';
