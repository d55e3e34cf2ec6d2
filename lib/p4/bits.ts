// Moving header fields between wire bytes and the packet state. Each header
// gets one extract and one emit closure, built once; byte-aligned 8/16/32-bit
// fields use the Buffer's integer reads, other narrow fields go through a
// number window of at most 5 bytes (40 bits, exact in a double), wide fields
// through bigint.

import { FieldInfo, HeaderInfo, PacketState } from './state';

type FieldOp = (st: PacketState, buf: Buffer, base: number) => void;

function readerFor(f: FieldInfo): FieldOp {
  const first = f.bitOffset >> 3;
  const last = (f.bitOffset + f.width - 1) >> 3;
  const trailing = (last + 1) * 8 - (f.bitOffset + f.width);
  const slot = f.slot;
  if (!f.wide) {
    if (f.bitOffset % 8 === 0 && trailing === 0) {
      if (f.width === 8) return (st, b, o) => { st.num[slot] = b[o + first]!; };
      if (f.width === 16) return (st, b, o) => { st.num[slot] = b.readUInt16BE(o + first); };
      if (f.width === 32) return (st, b, o) => { st.num[slot] = b.readUInt32BE(o + first); };
    }
    const div = 2 ** trailing;
    // Integer masking instead of a floating-point %: the quotient is below 2^40, and ToInt32 keeps its low 32 bits.
    const mask = f.width >= 32 ? -1 : (1 << f.width) - 1;
    return (st, b, o) => {
      let v = 0;
      for (let i = first; i <= last; i++) v = v * 256 + b[o + i]!;
      st.num[slot] = (Math.floor(v / div) & mask) >>> 0;
    };
  }
  const sh = BigInt(trailing);
  const mask = f.mask;
  return (st, b, o) => {
    let v = 0n;
    let i = first;
    for (; i + 4 <= last + 1; i += 4) v = (v << 32n) | BigInt(b.readUInt32BE(o + i));
    for (; i <= last; i++) v = (v << 8n) | BigInt(b[o + i]!);
    st.big[slot] = (v >> sh) & mask;
  };
}

/** ORs the field into zeroed header bytes. */
function writerFor(f: FieldInfo): FieldOp {
  const first = f.bitOffset >> 3;
  const last = (f.bitOffset + f.width - 1) >> 3;
  const trailing = (last + 1) * 8 - (f.bitOffset + f.width);
  const slot = f.slot;
  if (!f.wide) {
    if (f.bitOffset % 8 === 0 && trailing === 0) {
      if (f.width === 8) return (st, b, o) => { b[o + first] = st.num[slot]!; };
      if (f.width === 16) return (st, b, o) => { b.writeUInt16BE(st.num[slot]!, o + first); };
      if (f.width === 32) return (st, b, o) => { b.writeUInt32BE(st.num[slot]!, o + first); };
    }
    const mul = 2 ** trailing;
    return (st, b, o) => {
      let v = st.num[slot]! * mul;
      for (let i = last; i >= first; i--) {
        b[o + i]! |= v & 0xff;
        v = Math.floor(v / 256);
      }
    };
  }
  const sh = BigInt(trailing);
  return (st, b, o) => {
    let v = st.big[slot]! << sh;
    for (let i = last; i >= first; i--) {
      b[o + i]! |= Number(v & 0xffn);
      v >>= 8n;
    }
  };
}

export type HeaderExtract = (st: PacketState, buf: Buffer, at: number) => void;
export type HeaderEmit = (st: PacketState, out: Buffer, at: number) => void;

export function compileExtract(h: HeaderInfo): HeaderExtract {
  const ops = h.fields.map(readerFor);
  return (st, buf, at) => {
    for (let i = 0; i < ops.length; i++) ops[i]!(st, buf, at);
  };
}

export function compileEmit(h: HeaderInfo): HeaderEmit {
  const ops = h.fields.map(writerFor);
  const n = h.bytes;
  return (st, out, at) => {
    out.fill(0, at, at + n);
    for (let i = 0; i < ops.length; i++) ops[i]!(st, out, at);
  };
}

/** Reads `width` bits at bit offset `bit` of `buf` as a bigint (lookahead); undefined past the end. */
export function peekBits(buf: Buffer, bit: number, width: number): bigint | undefined {
  const end = bit + width;
  if (end > buf.length * 8) return undefined;
  const first = bit >> 3;
  const last = (end - 1) >> 3;
  let v = 0n;
  for (let i = first; i <= last; i++) v = (v << 8n) | BigInt(buf[i]!);
  return (v >> BigInt((last + 1) * 8 - end)) & ((1n << BigInt(width)) - 1n);
}

/** Appends bits to a growing byte image (for checksum and hash inputs). */
/** 2^k for k = 0..64: `2 ** k` compiles to a pow() call, per field, per frame. */
const POW2 = Float64Array.from({ length: 65 }, (_, k) => 2 ** k);

export class BitWriter {
  buf = Buffer.alloc(256);
  bits = 0;
  reset(): void {
    // A loop, not buf.fill: the inputs are a few dozen bytes and fill() is a native call per frame.
    const buf = this.buf;
    for (let i = 0, n = (this.bits + 7) >> 3; i < n; i++) buf[i] = 0;
    this.bits = 0;
  }
  #room(width: number): void {
    const need = (this.bits + width + 7) >> 3;
    if (need > this.buf.length) {
      const nb = Buffer.alloc(Math.max(need, this.buf.length * 2));
      this.buf.copy(nb);
      this.buf = nb;
    }
  }
  /** Appends the low `width` (<= 32) bits of a non-negative number, most significant first. */
  putNum(n: number, width: number): void {
    this.#room(width);
    if ((this.bits & 7) === 0 && (width & 7) === 0) {
      // Byte-aligned whole bytes (most header fields): stored directly, most significant first.
      let at = this.bits >> 3;
      for (let k = width - 8; k >= 0; k -= 8) this.buf[at++] = Math.floor(n / POW2[k]!) & 0xff;
      this.bits += width;
      return;
    }
    let left = width;
    while (left > 0) {
      const free = 8 - (this.bits & 7);
      const take = Math.min(free, left);
      const chunk = Math.floor(n / POW2[left - take]!) & ((1 << take) - 1);
      this.buf[this.bits >> 3]! |= chunk << (free - take);
      this.bits += take;
      left -= take;
    }
  }
  put(v: bigint, width: number): void {
    let w = width;
    for (; w > 32; w -= 32) this.putNum(Number((v >> BigInt(w - 32)) & 0xffffffffn), 32);
    this.putNum(Number(v & ((1n << BigInt(w)) - 1n)), w);
  }
  putBytes(b: Buffer): void {
    if (this.bits % 8 !== 0) {
      for (const x of b) this.putNum(x, 8);
      return;
    }
    this.#room(b.length * 8);
    b.copy(this.buf, this.bits >> 3);
    this.bits += b.length * 8;
  }
  /** Bytes written so far (a partial last byte counts). */
  get length(): number {
    return (this.bits + 7) >> 3;
  }
  bytes(): Buffer {
    return this.buf.subarray(0, (this.bits + 7) >> 3);
  }
}
