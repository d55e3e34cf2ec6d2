// rocm-ernic's public entry point for embedders ('rocm-ernic'). Subpaths:
// 'rocm-ernic/vfio-user' (server, client, session and guest-memory types) and
// 'rocm-ernic/protocol' (the vfio-user codec, also here as `protocol`).
// Only stable entry points are exported; everything else is internal.

export * as protocol from '../protocol';

// The vfio-user server and what a device sees of it.
export { VfioUserServer, SocketInUseError } from './vfio-user/server';
export type { ServerOptions } from './vfio-user/server';
export { DEFAULT_SESSION_LIMITS } from './vfio-user/session';
export type { SessionLimits } from './vfio-user/session';
export type { WarmUpPlan, WarmUpAccess } from './vfio-user/warm-up';
export type { VfioUserDevice, RegionHandler, DeviceContext, DmaRange, IrqEvent, ResetReason } from './vfio-user/device';
export { MemStatus, memStatusName } from './vfio-user/guest-memory';
export type { GuestMemory } from './vfio-user/guest-memory';

// A PCI function declared as data.
export { PciFunction, EMPTY_BAR_HANDLER } from './pci';
export type { PciFunctionSpec, BarHandler, BarIndex, BarKind, BarSpec, MsixSpec, PcieLinkSpec } from './pci';

// The ionic NIC and its profiles.
export { IonicDevice } from './ionic/device';
export type { IonicDeviceOptions, DeviceCounters } from './ionic/device';
export type { FrameEndpoint, HostLink } from './net/frame-endpoint';
export { FaultInjector } from './ionic/fault-injection';
export {
  resolveProfile,
  listProfiles,
  builtinProfile,
  validateProfile,
  ProfileError,
  COMPAT_PROFILE,
} from './ionic/profile';
export type { NicProfile, ResolveOptions } from './ionic/profile';

// Logging.
export { createLogger, nullLogger } from './log';
export type { Logger, LogLevel, LoggerOptions } from './log';
