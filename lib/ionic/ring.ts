// A descriptor ring and its completion ring in guest memory, as a queue of
// the device sees them: where they are, how deep, the device's consumer index
// on the descriptor ring, and its producer index and color on the CQ.

import type { GuestMemory } from '../vfio-user/guest-memory';
import { MemStatus } from '../vfio-user/guest-memory';
import { COLOR_BIT } from './layouts';

/** Addresses are 52 bits (IONIC_ADDR_LEN). */
export const IONIC_ADDR_MASK = 2 ** 52 - 1;

/**
 * The 52-bit device address of a guest-supplied u64 (as a number from getField).
 * Fix: this replaces `addr & IONIC_ADDR_MASK`, which JavaScript evaluates on
 * 32-bit integers, so every address at or above 2 GiB came out truncated or
 * negative (a guest with RAM above 4 GiB could not be served). Negative inputs
 * (getField's "past 2^53" marker) stay negative and fail the memory access.
 */
export function ionicAddr(addr: number): number {
  return addr < 0 ? addr : addr % 2 ** 52;
}

export class CompletionRing {
  /** Next CQ slot the device writes. */
  pi = 0;
  /** Color of the current pass: 1 after Q_INIT, flipped on every wrap. */
  color = 1;
  constructor(readonly base: number, readonly size: number, readonly entrySize: number) {}

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
  constructor(readonly base: number, readonly size: number, readonly descSize: number) {
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
