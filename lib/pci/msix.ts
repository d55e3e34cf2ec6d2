// The MSI-X table and pending bit array, and interrupt delivery.
//
// A vector is delivered through DeviceContext.signalIrq(MSIX, vector), which
// writes the eventfd the client wired for it. When it cannot be delivered now
// (MSI-X disabled, function masked, vector masked, no eventfd yet) its pending
// bit is latched and it fires once as soon as it can.
//
// Who owns the table matters. QEMU's vfio-user-pci emulates the table itself:
// table accesses never reach us (only PBA reads and config writes do), and it
// masks a vector by swapping that vector's eventfd (docs/vfio-user-protocol.md 3.6).
// Our copy then keeps its reset value, every vector masked, and must not gate
// delivery. So the table starts owned by the 'client' and our per-vector mask
// bits are ignored; the first table write that reaches us shows a client that
// does not emulate the table, and from then on ('device') the mask bits count.
// Enable and function mask always come from our config space, because QEMU
// forwards every config write.

import { Errno } from '../../protocol/constants';
import { IrqIndex } from '../vfio-user/device';
import type { DeviceContext } from '../vfio-user/device';
import type { BarHandler } from './bars';
import { accessInRange } from './config-space';
import { PCI_MSIX_MAX_VECTORS, PciMsixEntry, PciMsixEntryCtrl, PciMsixFlags } from '../vfio-user/pci-registers';

export interface MsixSpec {
  /** Number of vectors, 1..2048. */
  readonly vectors: number;
  /** BAR holding the table, and its offset in that BAR (8-byte aligned). */
  readonly tableBar: number;
  readonly tableOffset: number;
  /** BAR holding the PBA, and its offset in that BAR (8-byte aligned). */
  readonly pbaBar: number;
  readonly pbaOffset: number;
}

/** 'client': the client emulates the table, our mask bits are ignored; 'device': we see the guest's table writes. */
type MsixTableOwner = 'client' | 'device';

/** Bytes of the table for `vectors` vectors. */
export function msixTableSize(vectors: number): number {
  return vectors * PciMsixEntry.SIZE;
}

/** Bytes of the PBA: one bit per vector, in whole QWORDs. */
export function msixPbaSize(vectors: number): number {
  return Math.ceil(vectors / 64) * 8;
}

/** Writable bits of each byte of a table entry: address and data, and the mask bit. */
const ENTRY_WRITE_MASK: readonly number[] = [
  0xff,
  0xff,
  0xff,
  0xff,
  0xff,
  0xff,
  0xff,
  0xff,
  0xff,
  0xff,
  0xff,
  0xff,
  PciMsixEntryCtrl.MASKBIT,
  0x00,
  0x00,
  0x00,
];

export class MsixState {
  readonly vectors: number;
  readonly #table: Buffer;
  readonly #pba: Buffer;
  #owner: MsixTableOwner = 'client';
  #enabled = false;
  #functionMasked = false;
  #ctx: DeviceContext | undefined;
  /** BAR window handlers for the table and the PBA. */
  readonly tableHandler: BarHandler;
  readonly pbaHandler: BarHandler;

  constructor(vectors: number) {
    if (!Number.isInteger(vectors) || vectors < 1 || vectors > PCI_MSIX_MAX_VECTORS) {
      throw new RangeError(`MSI-X vectors ${vectors}: must be 1..${PCI_MSIX_MAX_VECTORS}`);
    }
    this.vectors = vectors;
    this.#table = Buffer.alloc(msixTableSize(vectors));
    this.#pba = Buffer.alloc(msixPbaSize(vectors));
    this.#resetTable();
    this.tableHandler = {
      read: (offset, dst) => this.readTable(offset, dst),
      write: (offset, src) => this.writeTable(offset, src),
    };
    this.pbaHandler = {
      read: (offset, dst) => this.readPba(offset, dst),
      write: () => 0, // PBA is read-only from the bus; QEMU drops PBA writes anyway
    };
  }

  get enabled(): boolean {
    return this.#enabled;
  }

  get functionMasked(): boolean {
    return this.#functionMasked;
  }

  get tableOwner(): MsixTableOwner {
    return this.#owner;
  }

  attach(ctx: DeviceContext): void {
    this.#ctx = ctx;
    // A new client has not written our table yet: assume it emulates it, as QEMU does.
    this.#owner = 'client';
  }

  detach(): void {
    this.#ctx = undefined;
  }

  /** Message control changed in config space (enable, function mask). */
  setControl(control: number): void {
    this.#enabled = (control & PciMsixFlags.ENABLE) !== 0;
    this.#functionMasked = (control & PciMsixFlags.MASKALL) !== 0;
    this.flushPending(0, this.vectors);
  }

  /**
   * Ask for `vector`. Returns true when it was signalled now, false when it was
   * latched as pending (or the vector does not exist).
   */
  raise(vector: number): boolean {
    if (!this.#validVector(vector)) return false;
    if (this.#deliverable(vector) && this.#signal(vector)) {
      this.#setPending(vector, false);
      return true;
    }
    this.#setPending(vector, true);
    return false;
  }

  /** Fire, once each, the pending vectors in [start, start + count) that can now be delivered. */
  flushPending(start: number, count: number): void {
    if (!this.#enabled || this.#functionMasked) return;
    const first = Math.max(0, Math.floor(start));
    const last = Math.min(this.vectors, first + Math.max(0, Math.floor(count)));
    for (let v = first; v < last; v++) {
      if (this.#pba[v >> 3] === 0) {
        v |= 7; // nothing pending in this byte: skip to the next
        continue;
      }
      if (this.isPending(v) && this.#deliverable(v) && this.#signal(v)) this.#setPending(v, false);
    }
  }

  isPending(vector: number): boolean {
    return this.#validVector(vector) && (this.#pba[vector >> 3] & (1 << (vector & 7))) !== 0;
  }

  /** The mask bit in our copy of the table (meaningful when the table owner is 'device'). */
  isVectorMasked(vector: number): boolean {
    if (!this.#validVector(vector)) return true;
    return (this.#table[vector * PciMsixEntry.SIZE + PciMsixEntry.VECTOR_CTRL] & PciMsixEntryCtrl.MASKBIT) !== 0;
  }

  /** Device reset: table to reset values (all vectors masked), nothing pending. The owner stays. */
  reset(): void {
    this.#resetTable();
    this.#pba.fill(0);
    this.#enabled = false;
    this.#functionMasked = false;
  }

  /** BAR window: offsets are relative to the table start. */
  readTable(offset: number, dst: Buffer): number {
    if (!accessInRange(offset, dst.length, this.#table.length)) return Errno.EINVAL;
    this.#table.copy(dst, 0, offset, offset + dst.length);
    return 0;
  }

  writeTable(offset: number, src: Buffer): number {
    if (!accessInRange(offset, src.length, this.#table.length)) return Errno.EINVAL;
    const end = offset + src.length;
    const firstVector = Math.floor(offset / PciMsixEntry.SIZE);
    const lastVector = Math.floor((end - 1) / PciMsixEntry.SIZE);
    const wasMasked: boolean[] = [];
    for (let v = firstVector; v <= lastVector; v++) wasMasked.push(this.#vectorMaskBit(v));
    this.#owner = 'device';
    for (let at = offset; at < end; at++) {
      const mask = ENTRY_WRITE_MASK[at % PciMsixEntry.SIZE] ?? 0;
      this.#table[at] = (this.#table[at] & ~mask) | (src[at - offset] & mask);
    }
    // Unmasking a vector releases its latched message (PCI 6.8.2.9).
    for (let v = firstVector; v <= lastVector; v++) {
      if (wasMasked[v - firstVector] === true && !this.#vectorMaskBit(v)) this.flushPending(v, 1);
    }
    return 0;
  }

  readPba(offset: number, dst: Buffer): number {
    if (!accessInRange(offset, dst.length, this.#pba.length)) return Errno.EINVAL;
    this.#pba.copy(dst, 0, offset, offset + dst.length);
    return 0;
  }

  #deliverable(vector: number): boolean {
    if (!this.#enabled || this.#functionMasked) return false;
    return this.#owner === 'client' || !this.#vectorMaskBit(vector);
  }

  #signal(vector: number): boolean {
    return this.#ctx?.signalIrq(IrqIndex.MSIX, vector) ?? false;
  }

  #vectorMaskBit(vector: number): boolean {
    return (this.#table[vector * PciMsixEntry.SIZE + PciMsixEntry.VECTOR_CTRL] & PciMsixEntryCtrl.MASKBIT) !== 0;
  }

  #setPending(vector: number, on: boolean): void {
    const bit = 1 << (vector & 7);
    const i = vector >> 3;
    this.#pba[i] = on ? this.#pba[i] | bit : this.#pba[i] & ~bit;
  }

  #validVector(vector: number): boolean {
    return Number.isInteger(vector) && vector >= 0 && vector < this.vectors;
  }

  #resetTable(): void {
    this.#table.fill(0);
    for (let v = 0; v < this.vectors; v++) {
      this.#table[v * PciMsixEntry.SIZE + PciMsixEntry.VECTOR_CTRL] = PciMsixEntryCtrl.MASKBIT;
    }
  }
}
