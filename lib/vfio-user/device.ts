// The contract between the vfio-user server and a device it serves.
//
// The server knows the protocol; the device knows its registers. A device states
// its regions and interrupt counts, answers region accesses, and is told about
// resets, guest memory and interrupt wiring. It never sees a socket or a message.
// Everything here is synchronous: a region access is answered inside the call,
// because QEMU holds its big lock while it waits (docs/vfio-user-protocol.md 3.2).

import type { GuestMemory } from './guest-memory';

/** vfio region indices of a PCI device (linux/vfio.h VFIO_PCI_*_REGION_INDEX). */
export const enum PciRegionIndex {
  BAR0 = 0,
  BAR1 = 1,
  BAR2 = 2,
  BAR3 = 3,
  BAR4 = 4,
  BAR5 = 5,
  ROM = 6,
  CONFIG = 7,
  VGA = 8,
}
export const PCI_NUM_REGIONS = 9;

/** vfio irq indices of a PCI device (linux/vfio.h VFIO_PCI_*_IRQ_INDEX). */
export const enum IrqIndex {
  INTX = 0,
  MSI = 1,
  MSIX = 2,
  ERR = 3,
  REQ = 4,
}
export const PCI_NUM_IRQS = 5;

/** Why a device is being reset. */
export type ResetReason = 'device-reset' | 'lost-connection' | 'flr';

/**
 * One region as the device presents it. Accesses arrive with the offset already
 * bounds checked against `size` (offset + length <= size), so a handler only
 * decodes registers. A handler returns 0 on success or a positive errno, which the
 * server sends back as an error reply; it must not throw for any guest value.
 */
export interface RegionHandler {
  readonly size: number;
  readonly readable: boolean;
  readonly writable: boolean;
  /** Fill `dst` (length = access size) with the bytes at `offset`. */
  read(offset: number, dst: Buffer): number;
  /** Apply `src` (length = access size) at `offset`. `src` is only valid during the call. */
  write(offset: number, src: Buffer): number;
}

/** A contiguous range of guest memory that the client shared with DMA_MAP. */
export interface DmaRange {
  readonly iova: number;
  readonly size: number;
  readonly readable: boolean;
  readonly writable: boolean;
  /** True when the range came with an fd and is mapped into this process. */
  readonly mapped: boolean;
}

/**
 * What the server hands a device when a client attaches. It stays valid until
 * `detach`: after that the memory and interrupt objects refuse every access.
 */
export interface DeviceContext {
  /** Bounds-checked access to guest memory (the DMA table). */
  readonly memory: GuestMemory;
  /** Signal interrupt `subindex` of `index`. Returns false when the client gave no eventfd for it. */
  signalIrq(index: IrqIndex, subindex: number): boolean;
  /** True when the client has wired an eventfd to that interrupt. */
  irqWired(index: IrqIndex, subindex: number): boolean;
}

/** Changes to interrupt wiring that a device may care about (an eventfd arrived, INTx unmasked). */
export interface IrqEvent {
  readonly index: IrqIndex;
  readonly start: number;
  readonly count: number;
  /**
   * 'wired': eventfds assigned; 'unwired': removed; 'mask'/'unmask': SET_IRQS MASK/UNMASK;
   * 'trigger': the client asked for these vectors to fire, and the server has already
   * signalled their eventfds (informational: a device must not fire them again).
   */
  readonly kind: 'wired' | 'unwired' | 'mask' | 'unmask' | 'trigger';
}

export interface VfioUserDevice {
  /** DEVICE_GET_INFO flags: reset supported (DEVICE_RESET will be sent) and PCI. */
  readonly resetSupported: boolean;
  /** Region handler for an index, or undefined for an absent region (answered as size 0). */
  region(index: number): RegionHandler | undefined;
  /** Number of interrupts of a type (0 when the type is unused). */
  irqCount(index: number): number;
  /** A client attached: keep the context for DMA and interrupts. */
  attach(ctx: DeviceContext): void;
  /** The client went away. Device state is kept for the next client. */
  detach(): void;
  /** DEVICE_RESET, FLR, or a lost connection. */
  reset(reason: ResetReason): void;
  /** Optional: a range of guest memory appeared or went away. */
  dmaMapped?(range: DmaRange): void;
  dmaUnmapped?(range: DmaRange): void;
  /** Optional: interrupt wiring changed. */
  irqChanged?(event: IrqEvent): void;
}
