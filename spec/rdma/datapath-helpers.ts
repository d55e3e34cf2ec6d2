// Test-only helpers for the RDMA data-path specs. The byte poker writes values
// at offsets the tests spell out from reference/ionic-rdma-contract.md; it
// shares no code with the codecs under test.

import { GuestMemory, MemStatus } from '../../lib/vfio-user/guest-memory';
import type { KeyContext, MemoryRegion, MrTable } from '../../lib/rdma/datapath/translate';

/** A zeroed buffer with explicit-offset big/little-endian writers. */
export class Poke {
  readonly buf: Buffer;
  constructor(size: number) { this.buf = Buffer.alloc(size); }
  u8(off: number, v: number): this { this.buf[off] = v & 0xff; return this; }
  be16(off: number, v: number): this { return this.u8(off, v >>> 8).u8(off + 1, v); }
  be32(off: number, v: number): this { return this.be16(off, v >>> 16).be16(off + 2, v & 0xffff); }
  be64(off: number, v: bigint | number): this {
    const b = BigInt(v);
    return this.be32(off, Number(b >> 32n)).be32(off + 4, Number(b & 0xffffffffn));
  }
  le16(off: number, v: number): this { return this.u8(off, v).u8(off + 1, v >>> 8); }
  le32(off: number, v: number): this { return this.le16(off, v & 0xffff).le16(off + 2, v >>> 16); }
  le64(off: number, v: bigint | number): this {
    const b = BigInt(v);
    return this.le32(off, Number(b & 0xffffffffn)).le32(off + 4, Number(b >> 32n));
  }
  bytes(off: number, data: Iterable<number>): this { let i = off; for (const x of data) this.u8(i++, x); return this; }
  /** An ionic_sge: va BE64 @0, len BE32 @8, lkey BE32 @12. */
  sge(off: number, va: bigint | number, len: number, lkey: number): this { return this.be64(off, va).be32(off + 8, len).be32(off + 12, lkey); }
}

/** Hex string (spaces allowed) to bytes. */
export function hex(s: string): Buffer {
  return Buffer.from(s.replace(/\s+/g, ''), 'hex');
}

/** An MrTable over a Map keyed by index. */
export class FakeMrs implements MrTable {
  readonly byIndex = new Map<number, MemoryRegion>();
  add(mr: MemoryRegion): MemoryRegion { this.byIndex.set(mr.key >>> 8, mr); return mr; }
  mrByIndex(index: number): MemoryRegion | undefined { return this.byIndex.get(index); }
}

export function kctx(pd: number, qpFlags = 0): KeyContext {
  return { pd, qpFlags };
}

/** Deterministic PRNG (mulberry32). */
export function rng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

export function randInt(r: () => number, n: number): number {
  return Math.floor(r() * n);
}

/** A GuestMemory wrapper that has no single views (forcing write paths) and logs writes. */
export class LoggingMemory implements GuestMemory {
  readonly writes: { iova: number; len: number }[] = [];
  constructor(readonly inner: GuestMemory) {}
  view(): Buffer | null { return null; }
  read(iova: number, dst: Buffer): MemStatus { return this.inner.read(iova, dst); }
  write(iova: number, src: Buffer): MemStatus { this.writes.push({ iova, len: src.length }); return this.inner.write(iova, src); }
  slices(iova: number, len: number, write: boolean, out: Buffer[]): MemStatus { return this.inner.slices(iova, len, write, out); }
  copy(dst: number, src: number, len: number): MemStatus { return this.inner.copy(dst, src, len); }
}

/** A GuestMemory made of several disjoint BufferMemory-like windows, so ranges split into several views. */
export class SplitMemory implements GuestMemory {
  constructor(readonly base: number, readonly buffer: Buffer, readonly window: number) {}
  #ok(iova: number, len: number): boolean {
    return Number.isSafeInteger(iova) && Number.isSafeInteger(len) && len >= 0 && iova >= this.base && iova + len <= this.base + this.buffer.length;
  }
  view(iova: number, len: number): Buffer | null {
    if (!this.#ok(iova, len)) return null;
    const at = iova - this.base;
    if (Math.floor(at / this.window) !== Math.floor((at + Math.max(len, 1) - 1) / this.window)) return null;
    return this.buffer.subarray(at, at + len);
  }
  read(iova: number, dst: Buffer): MemStatus {
    if (!this.#ok(iova, dst.length)) return MemStatus.UNMAPPED;
    this.buffer.copy(dst, 0, iova - this.base, iova - this.base + dst.length);
    return MemStatus.OK;
  }
  write(iova: number, src: Buffer): MemStatus {
    if (!this.#ok(iova, src.length)) return MemStatus.UNMAPPED;
    src.copy(this.buffer, iova - this.base);
    return MemStatus.OK;
  }
  slices(iova: number, len: number, _write: boolean, out: Buffer[]): MemStatus {
    if (!this.#ok(iova, len)) return MemStatus.UNMAPPED;
    let at = iova - this.base;
    let left = len;
    while (left > 0) {
      const n = Math.min(left, this.window - (at % this.window));
      out.push(this.buffer.subarray(at, at + n));
      at += n;
      left -= n;
    }
    return MemStatus.OK;
  }
  copy(dst: number, src: number, len: number): MemStatus {
    if (!this.#ok(dst, len) || !this.#ok(src, len)) return MemStatus.UNMAPPED;
    this.buffer.copy(this.buffer, dst - this.base, src - this.base, src - this.base + len);
    return MemStatus.OK;
  }
}
