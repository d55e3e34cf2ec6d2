// A plain Buffer standing in for guest RAM: for unit tests and for in-process
// targets that want GuestMemory semantics without a client. Addresses start at
// `base`; everything outside [base, base + buf.length) is UNMAPPED.

import { GuestMemory, MemStatus } from './guest-memory';

export class BufferMemory implements GuestMemory {
  constructor(
    readonly buffer: Buffer,
    readonly base = 0,
    readonly readOnly = false,
  ) {}

  view(iova: number, len: number, write: boolean): Buffer | null {
    const at = this.#offset(iova, len);
    if (at < 0 || (write && this.readOnly)) return null;
    return this.buffer.subarray(at, at + len);
  }

  slices(iova: number, len: number, write: boolean, out: Buffer[]): MemStatus {
    const st = this.#check(iova, len, write);
    if (st === MemStatus.OK) out.push(this.buffer.subarray(iova - this.base, iova - this.base + len));
    return st;
  }

  read(iova: number, dst: Buffer): MemStatus {
    const st = this.#check(iova, dst.length, false);
    if (st === MemStatus.OK) this.buffer.copy(dst, 0, iova - this.base, iova - this.base + dst.length);
    return st;
  }

  write(iova: number, src: Buffer): MemStatus {
    const st = this.#check(iova, src.length, true);
    if (st === MemStatus.OK) src.copy(this.buffer, iova - this.base);
    return st;
  }

  copy(dst: number, src: number, len: number): MemStatus {
    let st = this.#check(src, len, false);
    if (st === MemStatus.OK) st = this.#check(dst, len, true);
    if (st === MemStatus.OK) this.buffer.copy(this.buffer, dst - this.base, src - this.base, src - this.base + len);
    return st;
  }

  #check(iova: number, len: number, write: boolean): MemStatus {
    if (
      !Number.isInteger(iova) ||
      !Number.isInteger(len) ||
      iova < 0 ||
      len < 0 ||
      iova > Number.MAX_SAFE_INTEGER - len
    )
      return MemStatus.BAD_RANGE;
    if (this.#offset(iova, len) < 0) return MemStatus.UNMAPPED;
    if (write && this.readOnly) return MemStatus.READ_ONLY;
    return MemStatus.OK;
  }

  #offset(iova: number, len: number): number {
    if (!Number.isInteger(iova) || !Number.isInteger(len) || len < 0) return -1;
    const at = iova - this.base;
    return at >= 0 && at + len <= this.buffer.length ? at : -1;
  }
}
