// Moving header fields between wire bytes and the packet state. Each header
// gets one extract and one emit closure, built once from a plan: the header's
// fields cut into byte windows, each of one kind:
// - WORD: up to 4 bytes holding whole number fields (IPv4's version, ihl,
//   diffserv and totalLen; an EtherType; a 32-bit address): the bytes read
//   once as one 32-bit word and split by shifts and masks, or the fields
//   combined by shifts and the word written once;
// - BYTES: one byte-aligned number field of 5 or 6 bytes (MAC addresses):
//   the low 32 bits by shifts, the rest above them;
// - GENERAL: anything else (wide fields, unaligned fields over 32 bits):
//   bigint for wide fields, byte chunks for number fields.
// The plan is typed arrays and the closure one loop with a switch on the
// window kind: no per-field closure calls, no object loads, no zero-fill
// call per header.

import { FieldInfo, HeaderInfo, PacketState, POW2 } from './state';

const enum W {
  WORD = 0,
  BYTES = 1,
  GENERAL = 2,
}

/** A header's windows; window i is kind[i], bytes at[i]..at[i]+len[i]-1, fields first[i]..first[i]+count[i]-1. */
interface Plan {
  readonly n: number;
  readonly kind: Uint8Array;
  readonly at: Int32Array;
  readonly len: Int32Array;
  readonly first: Int32Array;
  readonly count: Int32Array;
  /** Per field (in header order): slot, right shift inside its WORD window, mask. */
  readonly slot: Int32Array;
  readonly shift: Int32Array;
  readonly mask: Int32Array;
  readonly fields: readonly FieldInfo[];
}

function planOf(h: HeaderInfo): Plan {
  const fs = h.fields;
  const wins: { kind: W; at: number; len: number; first: number; count: number }[] = [];
  const shift = new Int32Array(fs.length);
  let i = 0;
  while (i < fs.length) {
    // the smallest run of fields from i that ends on a byte boundary
    const start = i;
    const at = fs[i]!.bitOffset >> 3;
    let end = fs[i]!.bitOffset + fs[i]!.width;
    i++;
    while (end % 8 !== 0 && i < fs.length) end += fs[i++]!.width;
    const run = fs.slice(start, i);
    const len = Math.ceil(end / 8) - at;
    if (len <= 4 && run.every((f) => !f.wide)) {
      // a WORD window: grow it with the next whole-byte runs while it stays within 4 bytes
      let wEnd = end;
      let j = i;
      while (j < fs.length) {
        let e = fs[j]!.bitOffset + fs[j]!.width;
        let k = j + 1;
        while (e % 8 !== 0 && k < fs.length) e += fs[k++]!.width;
        if (e / 8 - at > 4 || fs.slice(j, k).some((f) => f.wide) || e % 8 !== 0) break;
        wEnd = e;
        j = k;
      }
      i = j;
      const wLen = wEnd / 8 - at;
      for (let k = start; k < i; k++) shift[k] = (at + wLen) * 8 - (fs[k]!.bitOffset + fs[k]!.width);
      wins.push({ kind: W.WORD, at, len: wLen, first: start, count: i - start });
    } else if (run.length === 1 && !run[0]!.wide && run[0]!.bitOffset % 8 === 0) {
      wins.push({ kind: W.BYTES, at, len, first: start, count: 1 });
    } else {
      wins.push({ kind: W.GENERAL, at, len, first: start, count: run.length });
    }
  }
  return {
    n: wins.length,
    kind: Uint8Array.from(wins, (w) => w.kind),
    at: Int32Array.from(wins, (w) => w.at),
    len: Int32Array.from(wins, (w) => w.len),
    first: Int32Array.from(wins, (w) => w.first),
    count: Int32Array.from(wins, (w) => w.count),
    slot: Int32Array.from(fs, (f) => f.slot),
    shift,
    mask: Int32Array.from(fs, (f) => (f.width >= 32 ? -1 : (1 << f.width) - 1)),
    fields: fs,
  };
}

/** A number field of any position and width up to 48 bits, read in byte chunks (exact: every partial value is below 2^48). */
function readNum(f: FieldInfo, b: Buffer, o: number): number {
  let bit = f.bitOffset;
  let left = f.width;
  let v = 0;
  while (left > 0) {
    const inByte = bit & 7;
    const take = Math.min(8 - inByte, left);
    const chunk = (b[o + (bit >> 3)]! >> (8 - inByte - take)) & ((1 << take) - 1);
    v = v * POW2[take]! + chunk;
    bit += take;
    left -= take;
  }
  return v;
}

/** ORs a number field (up to 48 bits) into zeroed bytes, least significant chunk first. */
function writeNum(f: FieldInfo, v: number, b: Buffer, o: number): void {
  let end = f.bitOffset + f.width;
  let left = f.width;
  while (left > 0) {
    const lowBit = 7 - ((end - 1) & 7); // position of the chunk's lowest bit in its byte
    const take = Math.min(8 - lowBit, left);
    const p = POW2[take]!;
    const q = Math.floor(v / p);
    b[o + ((end - 1) >> 3)]! |= (v - q * p) << lowBit;
    v = q;
    end -= take;
    left -= take;
  }
}

function readBig(f: FieldInfo, b: Buffer, o: number): bigint {
  const first = f.bitOffset >> 3;
  const last = (f.bitOffset + f.width - 1) >> 3;
  let v = 0n;
  let i = first;
  for (; i + 4 <= last + 1; i += 4) v = (v << 32n) | BigInt(b.readUInt32BE(o + i));
  for (; i <= last; i++) v = (v << 8n) | BigInt(b[o + i]!);
  return (v >> BigInt((last + 1) * 8 - (f.bitOffset + f.width))) & f.mask;
}

function writeBig(f: FieldInfo, v0: bigint, b: Buffer, o: number): void {
  const first = f.bitOffset >> 3;
  const last = (f.bitOffset + f.width - 1) >> 3;
  let v = (v0 & f.mask) << BigInt((last + 1) * 8 - (f.bitOffset + f.width));
  for (let i = last; i >= first; i--) {
    b[o + i]! |= Number(v & 0xffn);
    v >>= 8n;
  }
}

export type HeaderExtract = (st: PacketState, buf: Buffer, at: number) => void;
export type HeaderEmit = (st: PacketState, out: Buffer, at: number) => void;

export function compileExtract(h: HeaderInfo): HeaderExtract {
  const { n, kind, at, len, first, count, slot, shift, mask, fields } = planOf(h);
  return (st, b, o) => {
    const num = st.num;
    for (let g = 0; g < n; g++) {
      const p = o + at[g]!;
      const k = kind[g]!;
      if (k === W.WORD) {
        let w: number;
        switch (len[g]) {
          case 1:
            w = b[p]!;
            break;
          case 2:
            w = (b[p]! << 8) | b[p + 1]!;
            break;
          case 3:
            w = (b[p]! << 16) | (b[p + 1]! << 8) | b[p + 2]!;
            break;
          default:
            w = ((b[p]! << 24) | (b[p + 1]! << 16) | (b[p + 2]! << 8) | b[p + 3]!) >>> 0;
        }
        for (let f = first[g]!, e = f + count[g]!; f < e; f++) num[slot[f]!] = ((w >>> shift[f]!) & mask[f]!) >>> 0;
      } else if (k === W.BYTES) {
        let v = 0;
        for (let i = 0, l = len[g]!; i < l; i++) v = v * 256 + b[p + i]!;
        num[slot[first[g]!]!] = v;
      } else {
        for (let f = first[g]!, e = f + count[g]!; f < e; f++) {
          const fi = fields[f]!;
          if (fi.wide) st.big[fi.slot] = readBig(fi, b, o);
          else num[fi.slot] = readNum(fi, b, o);
        }
      }
    }
  };
}

/**
 * Writes the header's fields. Number slots hold values within their field's
 * width (every store truncates), so fields are combined without masks.
 */
export function compileEmit(h: HeaderInfo): HeaderEmit {
  const { n, kind, at, len, first, count, slot, shift, fields } = planOf(h);
  return (st, b, o) => {
    const num = st.num;
    for (let g = 0; g < n; g++) {
      const p = o + at[g]!;
      const k = kind[g]!;
      if (k === W.WORD) {
        let w = 0;
        for (let f = first[g]!, e = f + count[g]!; f < e; f++) w |= num[slot[f]!]! << shift[f]!;
        switch (len[g]) {
          case 1:
            b[p] = w;
            break;
          case 2:
            b[p] = w >>> 8;
            b[p + 1] = w;
            break;
          case 3:
            b[p] = w >>> 16;
            b[p + 1] = w >>> 8;
            b[p + 2] = w;
            break;
          default:
            b[p] = w >>> 24;
            b[p + 1] = w >>> 16;
            b[p + 2] = w >>> 8;
            b[p + 3] = w;
        }
      } else if (k === W.BYTES) {
        const v = num[slot[first[g]!]!]!;
        const hi = Math.floor(v / 0x100000000);
        const lo = v - hi * 0x100000000;
        let i = len[g]! - 1;
        for (let s = 0; s < 32 && i >= 0; s += 8, i--) b[p + i] = lo >>> s;
        for (let s = 0; i >= 0; s += 8, i--) b[p + i] = hi >>> s;
      } else {
        for (let i = 0, l = len[g]!; i < l; i++) b[p + i] = 0;
        for (let f = first[g]!, e = f + count[g]!; f < e; f++) {
          const fi = fields[f]!;
          if (fi.wide) writeBig(fi, st.big[fi.slot]!, b, o);
          else writeNum(fi, num[fi.slot]!, b, o);
        }
      }
    }
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
