// lib/pci: a PCI function declared as data, served as a VfioUserDevice.

export { PciFunction } from './function';
export type { PciFunctionSpec } from './declaration';
export type { BarHandler, BarIndex, BarKind, BarSpec } from './bars';
export { EMPTY_BAR_HANDLER } from './bar-region';
export { supportedSpeedsVector } from './capabilities';
export type { PcieLinkSpec } from './capabilities';
export { ConfigSpace } from './config-space';
export type { MsixSpec } from './msix';
export * from '../vfio-user/pci-registers';
