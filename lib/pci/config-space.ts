// PCI configuration space as bytes plus per-byte access masks.
//
// Every register is declared once with its reset value and which bits are RW
// or W1C; every other bit is read-only. A write is applied byte by byte as
// `(old & ~rw) | (new & rw)`, then W1C bits written as 1 are cleared, so any
// access size at any offset behaves as hardware would and a write to a
// read-only field is silently dropped (the PCI rule; QEMU only logs a failed
// config write, docs/vfio-user-protocol.md 3.5). Registers with side effects
// (command, MSI-X control, FLR, power state) register a hook that runs after
// the bytes are stored. The space is itself the region handler for vfio region 7.

import { Errno } from '../../protocol/constants';
import type { RegionHandler } from '../vfio-user/device';

/** How one register behaves. Bits in neither `rw` nor `w1c` are read-only. */
interface FieldSpec {
  readonly reset: number;
  /** Bits software may set and clear. */
  readonly rw?: number;
  /** Bits cleared by writing 1 (status bits). */
  readonly w1c?: number;
  /** Bits a function level reset leaves as they are (PCIe 6.6.2: link-related fields). */
  readonly keepOnFlr?: number;
}

/** Called after a write that touched the hooked register; values are little-endian. */
type ConfigWriteHook = (oldValue: number, newValue: number) => void;

/** What a restore puts back: everything, or everything but the FLR-preserved bits. */
type ConfigRestore = 'full' | 'flr';

interface HookEntry {
  readonly offset: number;
  readonly width: number;
  readonly hook: ConfigWriteHook;
}

/** True when [offset, offset + len) is a valid, non-empty range inside `size`. */
export function accessInRange(offset: number, len: number, size: number): boolean {
  return Number.isInteger(offset) && offset >= 0 && len > 0 && offset <= size - len;
}

export class ConfigSpace implements RegionHandler {
  readonly size: number;
  readonly readable = true;
  readonly writable = true;
  readonly #bytes: Buffer;
  readonly #resetImage: Buffer;
  readonly #rw: Buffer;
  readonly #w1c: Buffer;
  readonly #keepOnFlr: Buffer;
  /** Bytes already declared, to catch two fields claiming the same byte. */
  readonly #declared: Uint8Array;
  readonly #hooks: HookEntry[] = [];

  constructor(size: number) {
    if (size !== 256 && size !== 4096) throw new RangeError(`config space size ${size}: must be 256 or 4096`);
    this.size = size;
    this.#bytes = Buffer.alloc(size);
    this.#resetImage = Buffer.alloc(size);
    this.#rw = Buffer.alloc(size);
    this.#w1c = Buffer.alloc(size);
    this.#keepOnFlr = Buffer.alloc(size);
    this.#declared = new Uint8Array(size);
  }

  // ---- building (programmer errors throw) ----

  /** Declare a register of `width` bytes (1..4). Each byte may be declared once. */
  define(offset: number, width: number, field: FieldSpec): void {
    if (!Number.isInteger(width) || width < 1 || width > 4 || !accessInRange(offset, width, this.size)) {
      throw new RangeError(`config field at 0x${offset.toString(16)} width ${width} is outside the space`);
    }
    for (let i = 0; i < width; i++) {
      if (this.#declared[offset + i] !== 0) {
        throw new Error(`config byte 0x${(offset + i).toString(16)} declared twice`);
      }
      this.#declared[offset + i] = 1;
      const shift = 8 * i;
      this.#resetImage[offset + i] = byteOf(field.reset, shift);
      this.#bytes[offset + i] = byteOf(field.reset, shift);
      this.#rw[offset + i] = byteOf(field.rw ?? 0, shift);
      this.#w1c[offset + i] = byteOf(field.w1c ?? 0, shift);
      this.#keepOnFlr[offset + i] = byteOf(field.keepOnFlr ?? 0, shift);
    }
  }

  /** Run `hook` after any write overlapping [offset, offset + width). */
  onWrite(offset: number, width: number, hook: ConfigWriteHook): void {
    if (!Number.isInteger(width) || width < 1 || width > 4 || !accessInRange(offset, width, this.size)) {
      throw new RangeError(`config hook at 0x${offset.toString(16)} width ${width} is outside the space`);
    }
    this.#hooks.push({ offset, width, hook });
    this.#hooks.sort((a, b) => a.offset - b.offset);
  }

  /** True when some field claimed this byte (tests use it to check for overlaps). */
  isDeclared(offset: number): boolean {
    return this.#declared[offset] === 1;
  }

  // ---- bus side (untrusted: never throws) ----

  read(offset: number, dst: Buffer): number {
    if (!accessInRange(offset, dst.length, this.size)) {
      dst.fill(0);
      return Errno.EINVAL;
    }
    this.#bytes.copy(dst, 0, offset, offset + dst.length);
    return 0;
  }

  write(offset: number, src: Buffer): number {
    if (!accessInRange(offset, src.length, this.size)) return Errno.EINVAL;
    const end = offset + src.length;
    // Old values first, so each hook sees the change it is told about.
    const touched: HookEntry[] = [];
    const oldValues: number[] = [];
    for (const h of this.#hooks) {
      if (h.offset < end && h.offset + h.width > offset) {
        touched.push(h);
        oldValues.push(this.#value(h.offset, h.width));
      }
    }
    for (let i = 0; i < src.length; i++) {
      const at = offset + i;
      const rw = this.#rw[at];
      const value = src[i];
      const kept = (this.#bytes[at] & ~rw) | (value & rw);
      this.#bytes[at] = kept & ~(value & this.#w1c[at]);
    }
    for (let i = 0; i < touched.length; i++) {
      const h = touched[i];
      h.hook(oldValues[i], this.#value(h.offset, h.width));
    }
    return 0;
  }

  // ---- device side (trusted offsets; out of range reads 0 and writes nothing) ----

  u8(offset: number): number {
    return this.#value(offset, 1);
  }

  u16(offset: number): number {
    return this.#value(offset, 2);
  }

  u32(offset: number): number {
    return this.#value(offset, 4);
  }

  /** Store `value` regardless of the masks (device-owned state such as STATUS.INTERRUPT). */
  poke(offset: number, width: number, value: number): void {
    if (!accessInRange(offset, width, this.size) || width > 4) return;
    for (let i = 0; i < width; i++) this.#bytes[offset + i] = byteOf(value, 8 * i);
  }

  /** Set or clear `bits` of the `width`-byte register at `offset`, regardless of the masks. */
  setBits(offset: number, width: number, bits: number, on: boolean): void {
    const old = this.#value(offset, width);
    this.poke(offset, width, on ? old | bits : old & ~bits);
  }

  /** Back to reset values; 'flr' keeps the bits declared `keepOnFlr`. No hooks run. */
  restore(mode: ConfigRestore): void {
    if (mode === 'full') {
      this.#resetImage.copy(this.#bytes);
      return;
    }
    for (let i = 0; i < this.size; i++) {
      const keep = this.#keepOnFlr[i];
      this.#bytes[i] = (this.#resetImage[i] & ~keep) | (this.#bytes[i] & keep);
    }
  }

  #value(offset: number, width: number): number {
    if (!accessInRange(offset, width, this.size) || width > 4) return 0;
    let v = 0;
    for (let i = width - 1; i >= 0; i--) v = v * 256 + this.#bytes[offset + i];
    return v;
  }
}

function byteOf(value: number, shift: number): number {
  // `>>>` keeps 32-bit values such as 0xffff_fff0 unsigned.
  return (value >>> shift) & 0xff;
}
