// lib/vfio-user: the vfio-user server and client library, published as
// 'rocm-ernic/vfio-user'. The wire codec itself is 'rocm-ernic/protocol'.

export { VfioUserServer, SocketInUseError, prepareSocketPath, socketIsLive } from './server';
export type { ServerOptions } from './server';
export { VfioUserClient, VfioUserError, GuestRam, QEMU_CAPABILITIES } from './client';
export type { ClientOptions } from './client';
export { Session, DEFAULT_SESSION_LIMITS } from './session';
export type { SessionLimits, SessionStats } from './session';
export { PciRegionIndex, PCI_NUM_REGIONS, IrqIndex, PCI_NUM_IRQS } from './device';
export type { VfioUserDevice, RegionHandler, DeviceContext, DmaRange, IrqEvent, ResetReason } from './device';
export { MemStatus, memStatusName } from './guest-memory';
export type { GuestMemory } from './guest-memory';
export { BufferMemory } from './buffer-memory';
export type { WarmUpPlan, WarmUpAccess, WarmUpResult } from './warm-up';
