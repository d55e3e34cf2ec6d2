// The vfio-user codec: the public API for embedders. Pure functions over
// Buffers; no sockets, fds or logging (those live in lib/vfio-user).
export * from './constants';
export * from './limits';
export * from './layouts';
export * from './messages';
export * from './errors';
export * from './parser';
export * from './serializer';
export * from './version';
