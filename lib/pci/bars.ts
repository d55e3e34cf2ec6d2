// BAR declarations and their registers in config space.
//
// A BAR register holds an address the OS assigns plus read-only type bits.
// Only the address bits above the BAR's size are writable, so the OS's sizing
// probe (write all ones, read back) yields ~(size - 1) with the type bits. QEMU
// takes the type bits from these registers and the size from the region info
// (docs/vfio-user-protocol.md 3.4 step 8), so both must agree with the declaration.

import {
  PCI_BAR_MAX_IO_SIZE,
  PCI_BAR_MAX_MEM32_SIZE,
  PCI_BAR_MIN_IO_SIZE,
  PCI_BAR_MIN_MEM_SIZE,
  PCI_NUM_BARS,
  PciBar,
  barOffset,
} from '../vfio-user/pci-registers';
import type { ConfigSpace } from './config-space';

export type BarKind = 'mem32' | 'mem64' | 'io';
export type BarIndex = 0 | 1 | 2 | 3 | 4 | 5;

/** The device's side of a BAR. Returns 0 or a positive errno; must not throw for guest values. */
export interface BarHandler {
  read(offset: number, dst: Buffer): number;
  write(offset: number, src: Buffer): number;
}

export interface BarSpec {
  readonly index: BarIndex;
  /** Bytes; a power of two, >= 16 for memory and 4..256 for I/O. */
  readonly size: number;
  readonly kind: BarKind;
  readonly prefetchable?: boolean;
  /** Register accesses outside the MSI-X structures; default reads 0 and drops writes. */
  readonly handler?: BarHandler;
}

/** Largest BAR we accept: sizes stay exact JavaScript integers. */
const PCI_BAR_MAX_MEM64_SIZE = 2 ** 52;

const TWO_32 = 2 ** 32;

/**
 * Check a BAR list; throws on the first bad entry (a declaration is code, not
 * input). Returns the BARs indexed by slot, with undefined for free slots and
 * the upper halves of 64-bit BARs.
 */
export function validateBars(bars: readonly BarSpec[]): Array<BarSpec | undefined> {
  const slots: Array<BarSpec | undefined> = new Array<BarSpec | undefined>(PCI_NUM_BARS).fill(undefined);
  const taken = new Array<boolean>(PCI_NUM_BARS).fill(false);
  for (const bar of bars) {
    const where = `BAR ${String(bar.index)}`;
    if (!Number.isInteger(bar.index) || bar.index < 0 || bar.index >= PCI_NUM_BARS) {
      throw new RangeError(`${where}: index must be 0..5`);
    }
    if (bar.kind !== 'mem32' && bar.kind !== 'mem64' && bar.kind !== 'io') {
      throw new RangeError(`${where}: unknown kind ${String(bar.kind)}`);
    }
    if (!isPowerOfTwo(bar.size)) throw new RangeError(`${where}: size ${bar.size} is not a power of two`);
    const [min, max] = sizeLimits(bar.kind);
    if (bar.size < min || bar.size > max) {
      throw new RangeError(`${where}: ${bar.kind} size ${bar.size} outside ${min}..${max}`);
    }
    if (bar.kind === 'io' && bar.prefetchable === true)
      throw new RangeError(`${where}: I/O BARs cannot be prefetchable`);
    const width = bar.kind === 'mem64' ? 2 : 1;
    if (bar.index + width > PCI_NUM_BARS) throw new RangeError(`${where}: a 64-bit BAR needs the next slot`);
    for (let i = bar.index; i < bar.index + width; i++) {
      if (taken[i]) throw new RangeError(`${where}: slot ${i} already used`);
      taken[i] = true;
    }
    slots[bar.index] = bar;
  }
  return slots;
}

/** Declare the six BAR registers and the (absent) expansion ROM BAR. */
export function defineBarRegisters(space: ConfigSpace, slots: ReadonlyArray<BarSpec | undefined>): void {
  for (let i = 0; i < PCI_NUM_BARS; i++) {
    const bar = slots[i];
    if (bar === undefined) {
      // Unused slot or the upper half of a 64-bit BAR declared below.
      if (i > 0 && slots[i - 1]?.kind === 'mem64') continue;
      space.define(barOffset(i), 4, { reset: 0 });
      continue;
    }
    const flags = barTypeBits(bar);
    const flagsMask = bar.kind === 'io' ? PciBar.IO_FLAGS_MASK : PciBar.MEM_FLAGS_MASK;
    space.define(barOffset(i), 4, { reset: flags, rw: (lowAddressMask(bar.size) & ~flagsMask) >>> 0 });
    if (bar.kind === 'mem64') {
      space.define(barOffset(i + 1), 4, { reset: 0, rw: highAddressMask(bar.size) });
    }
  }
}

/** The read-only low bits of a BAR register: space, type and prefetch. */
function barTypeBits(bar: BarSpec): number {
  if (bar.kind === 'io') return PciBar.SPACE_IO;
  const type = bar.kind === 'mem64' ? PciBar.MEM_TYPE_64 : PciBar.MEM_TYPE_32;
  return type | (bar.prefetchable === true ? PciBar.MEM_PREFETCH : 0);
}

/** The address the OS assigned to a BAR (both halves for 64-bit), or 0 when unassigned. */
export function barAddress(space: ConfigSpace, bar: BarSpec): number {
  const flagsMask = bar.kind === 'io' ? PciBar.IO_FLAGS_MASK : PciBar.MEM_FLAGS_MASK;
  const low = (space.u32(barOffset(bar.index)) & ~flagsMask) >>> 0;
  if (bar.kind !== 'mem64') return low;
  return space.u32(barOffset(bar.index + 1)) * TWO_32 + low;
}

function sizeLimits(kind: BarKind): [number, number] {
  switch (kind) {
    case 'io':
      return [PCI_BAR_MIN_IO_SIZE, PCI_BAR_MAX_IO_SIZE];
    case 'mem32':
      return [PCI_BAR_MIN_MEM_SIZE, PCI_BAR_MAX_MEM32_SIZE];
    case 'mem64':
      return [PCI_BAR_MIN_MEM_SIZE, PCI_BAR_MAX_MEM64_SIZE];
  }
}

function isPowerOfTwo(n: number): boolean {
  return Number.isSafeInteger(n) && n > 0 && Number.isInteger(Math.log2(n));
}

/** Writable bits of the low dword: address bits at and above the size. */
function lowAddressMask(size: number): number {
  return size >= TWO_32 ? 0 : ~(size - 1) >>> 0;
}

/** Writable bits of a 64-bit BAR's upper dword. */
function highAddressMask(size: number): number {
  return size <= TWO_32 ? 0xffff_ffff : ~(size / TWO_32 - 1) >>> 0;
}
