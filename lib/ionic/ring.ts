// A descriptor ring and its completion ring in guest memory, as a queue of
// the device sees them: where they are, how deep, the device's consumer index
// on the descriptor ring, and its producer index and color on the CQ.

import type { GuestMemory } from '../vfio-user/guest-memory';
import { MemStatus } from '../vfio-user/guest-memory';
import { COLOR_BIT } from './layouts';

/** Addresses are 52 bits (IONIC_ADDR_LEN). */
const IONIC_ADDR_MASK = 2 ** 52 - 1;

/**
 * A guest-supplied u64 address (a number from getField) as a device address:
 * the device has 52 address bits (IONIC_ADDR_LEN), so an address at or past
 * 2^52 is refused (-1, which fails every memory access) rather than wrapped
 * onto some other guest page. getField's "past 2^53" marker is negative and
 * stays refused.
 */
export function ionicAddr(addr: number): number {
  return addr >= 0 && addr <= IONIC_ADDR_MASK ? addr : -1;
}

/** Whether [addr, addr + len) lies inside the 52-bit device address space. */
export function ionicRange(addr: number, len: number): boolean {
  return addr >= 0 && len >= 0 && addr <= IONIC_ADDR_MASK && len <= IONIC_ADDR_MASK + 1 - addr;
}

export class CompletionRing {
  /** Next CQ slot the device writes. */
  pi = 0;
  /** Color of the current pass: 1 after Q_INIT, flipped on every wrap. */
  color = 1;
  constructor(
    readonly base: number,
    readonly size: number,
    readonly entrySize: number,
  ) {}

  /**
   * Write one completion: `entry` holds every byte but the color, which is
   * set in byte 15 bit 7 as the entry is copied (one copy, as hardware does).
   */
  post(mem: GuestMemory, entry: Buffer): MemStatus {
    const last = this.entrySize - 1;
    entry[last] = (entry[last]! & ~COLOR_BIT) | (this.color ? COLOR_BIT : 0);
    const st = mem.write(this.base + this.pi * this.entrySize, entry);
    if (st !== MemStatus.OK) return st;
    this.pi++;
    if (this.pi === this.size) {
      this.pi = 0;
      this.color ^= 1;
    }
    return MemStatus.OK;
  }
}

export class DescriptorRing {
  /** Device's consumer index: next descriptor to take. */
  ci = 0;
  /** Driver's producer index from the last doorbell. */
  pi = 0;
  readonly mask: number;
  constructor(
    readonly base: number,
    readonly size: number,
    readonly descSize: number,
  ) {
    this.mask = size - 1;
  }

  get empty(): boolean {
    return this.ci === this.pi;
  }

  address(index: number): number {
    return this.base + (index & this.mask) * this.descSize;
  }

  advance(): void {
    this.ci = (this.ci + 1) & this.mask;
  }
}
