// Moving header fields between wire bytes and the packet state. Each header
// is cut once into byte windows (planOf), each of one kind:
// - WORD: up to 4 bytes holding whole number fields (IPv4's version, ihl,
//   diffserv and totalLen; an EtherType; a 32-bit address): the bytes read
//   once as one 32-bit word and split by shifts and masks, or the fields
//   combined by shifts and the word written once;
// - BYTES: one byte-aligned number field of 5 or 6 bytes (MAC addresses):
//   the low 32 bits by shifts, the rest above them;
// - GENERAL: anything else (wide fields, unaligned fields over 32 bits):
//   bigint for wide fields, byte chunks for number fields.
// Each window becomes one closure specialised for its shape (a whole 8, 16
// or 32-bit field, a MAC, two to four packed fields written out), and a
// header's closures are called in sequence, written out for the common
// counts; the parser's extract (compileParseExtract) also checks the length,
// moves the offset and marks the header valid in the same closure. Measured
// on this project's machine, this is about 3x faster than one loop over the
// plan's typed arrays with a switch on the kind, and no zero-fill call is
// made per header.

import { FieldInfo, HeaderInfo } from '../program/layout';
import { PacketState, ParserError } from './packet-state';
import { POW2 } from '../program/numbers';

/** A window's kind (exported for the generator, ../codegen/windows.ts, which writes the same shapes out). */
export const enum W {
  WORD = 0,
  BYTES = 1,
  GENERAL = 2,
}

/** A header's windows; window i is kind[i], bytes at[i]..at[i]+len[i]-1, fields first[i]..first[i]+count[i]-1. */
export interface Plan {
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

/** Plans by header (a header's plan never changes; extract, emit and codegen each ask for it). */
const plans = new WeakMap<HeaderInfo, Plan>();

export function planOf(h: HeaderInfo): Plan {
  let p = plans.get(h);
  if (p === undefined) plans.set(h, (p = makePlan(h)));
  return p;
}

function makePlan(h: HeaderInfo): Plan {
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

export type HeaderEmit = (st: PacketState, out: Buffer, at: number) => void;

type WinOp = (num: Float64Array, b: Buffer, p: number, st: PacketState, o: number) => void;

/** Runs a header's window closures in order (calls written out for the common counts). */
function sequence(ops: WinOp[], at: Int32Array): (st: PacketState, b: Buffer, o: number) => void {
  const [o0, o1, o2, o3, o4, o5] = ops;
  const [a0, a1, a2, a3, a4, a5] = at;
  switch (ops.length) {
    case 0:
      return () => {};
    case 1:
      return (st, b, o) => o0!(st.num, b, o + a0!, st, o);
    case 2:
      return (st, b, o) => {
        const n = st.num;
        o0!(n, b, o + a0!, st, o);
        o1!(n, b, o + a1!, st, o);
      };
    case 3:
      return (st, b, o) => {
        const n = st.num;
        o0!(n, b, o + a0!, st, o);
        o1!(n, b, o + a1!, st, o);
        o2!(n, b, o + a2!, st, o);
      };
    case 4:
      return (st, b, o) => {
        const n = st.num;
        o0!(n, b, o + a0!, st, o);
        o1!(n, b, o + a1!, st, o);
        o2!(n, b, o + a2!, st, o);
        o3!(n, b, o + a3!, st, o);
      };
    case 5:
      return (st, b, o) => {
        const n = st.num;
        o0!(n, b, o + a0!, st, o);
        o1!(n, b, o + a1!, st, o);
        o2!(n, b, o + a2!, st, o);
        o3!(n, b, o + a3!, st, o);
        o4!(n, b, o + a4!, st, o);
      };
    case 6:
      return (st, b, o) => {
        const n = st.num;
        o0!(n, b, o + a0!, st, o);
        o1!(n, b, o + a1!, st, o);
        o2!(n, b, o + a2!, st, o);
        o3!(n, b, o + a3!, st, o);
        o4!(n, b, o + a4!, st, o);
        o5!(n, b, o + a5!, st, o);
      };
    default:
      return (st, b, o) => {
        const n = st.num;
        for (let i = 0; i < ops.length; i++) ops[i]!(n, b, o + at[i]!, st, o);
      };
  }
}

function readWord(b: Buffer, p: number, len: number): number {
  switch (len) {
    case 1:
      return b[p]!;
    case 2:
      return (b[p]! << 8) | b[p + 1]!;
    case 3:
      return (b[p]! << 16) | (b[p + 1]! << 8) | b[p + 2]!;
    default:
      return ((b[p]! << 24) | (b[p + 1]! << 16) | (b[p + 2]! << 8) | b[p + 3]!) >>> 0;
  }
}

function writeWord(b: Buffer, p: number, len: number, w: number): void {
  switch (len) {
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
}

/**
 * The parser's extract of a header: the length check, the fields, the
 * offset moved past the header and the header made valid, in one closure
 * (false: the frame is too short, parserError set).
 */
export function compileParseExtract(h: HeaderInfo): (st: PacketState) => boolean {
  const { ops, at } = extractOps(h);
  const hdr = h.index;
  const bytes = h.bytes;
  const short = (st: PacketState): boolean => {
    st.parserError = ParserError.PacketTooShort;
    return false;
  };
  const [o0, o1, o2, o3, o4] = ops;
  const [a0, a1, a2, a3, a4] = at;
  switch (ops.length) {
    case 3:
      return (st) => {
        const o = st.offset;
        const b = st.frame;
        if (o + bytes > b.length) return short(st);
        const n = st.num;
        o0!(n, b, o + a0!, st, o);
        o1!(n, b, o + a1!, st, o);
        o2!(n, b, o + a2!, st, o);
        st.offset = o + bytes;
        st.valid[hdr] = 1;
        st.hdrOffset[hdr] = o;
        return true;
      };
    case 5:
      return (st) => {
        const o = st.offset;
        const b = st.frame;
        if (o + bytes > b.length) return short(st);
        const n = st.num;
        o0!(n, b, o + a0!, st, o);
        o1!(n, b, o + a1!, st, o);
        o2!(n, b, o + a2!, st, o);
        o3!(n, b, o + a3!, st, o);
        o4!(n, b, o + a4!, st, o);
        st.offset = o + bytes;
        st.valid[hdr] = 1;
        st.hdrOffset[hdr] = o;
        return true;
      };
    default: {
      const all = sequence(ops, at);
      return (st) => {
        const o = st.offset;
        if (o + bytes > st.frame.length) return short(st);
        all(st, st.frame, o);
        st.offset = o + bytes;
        st.valid[hdr] = 1;
        st.hdrOffset[hdr] = o;
        return true;
      };
    }
  }
}

function extractOps(h: HeaderInfo): { ops: WinOp[]; at: Int32Array } {
  const { n, kind, at, len, first, count, slot, shift, mask, fields } = planOf(h);
  const ops: WinOp[] = [];
  for (let g = 0; g < n; g++) {
    const l = len[g]!;
    const f0 = first[g]!;
    const c = count[g]!;
    const s0 = slot[f0]!;
    if (kind[g] === W.WORD && c === 1 && shift[f0] === 0) {
      // one whole field of 1 to 4 bytes
      if (l === 1)
        ops.push((num, b, p) => {
          num[s0] = b[p]!;
        });
      else if (l === 2)
        ops.push((num, b, p) => {
          num[s0] = (b[p]! << 8) | b[p + 1]!;
        });
      else if (l === 4)
        ops.push((num, b, p) => {
          num[s0] = ((b[p]! << 24) | (b[p + 1]! << 16) | (b[p + 2]! << 8) | b[p + 3]!) >>> 0;
        });
      else
        ops.push((num, b, p) => {
          num[s0] = readWord(b, p, l);
        });
    } else if (kind[g] === W.WORD) {
      const sl = slot.subarray(f0, f0 + c);
      const sh = shift.subarray(f0, f0 + c);
      const mk = mask.subarray(f0, f0 + c);
      const [t0, t1, t2, t3] = sl;
      const [h0, h1, h2, h3] = sh;
      const [m0, m1, m2, m3] = mk;
      // two to four fields written out (IPv4 has windows of 2, 3 and 4), more by a loop
      if (c === 2) {
        ops.push((num, b, p) => {
          const w = readWord(b, p, l);
          num[t0!] = ((w >>> h0!) & m0!) >>> 0;
          num[t1!] = ((w >>> h1!) & m1!) >>> 0;
        });
      } else if (c === 3) {
        ops.push((num, b, p) => {
          const w = readWord(b, p, l);
          num[t0!] = ((w >>> h0!) & m0!) >>> 0;
          num[t1!] = ((w >>> h1!) & m1!) >>> 0;
          num[t2!] = ((w >>> h2!) & m2!) >>> 0;
        });
      } else if (c === 4) {
        ops.push((num, b, p) => {
          const w = readWord(b, p, l);
          num[t0!] = ((w >>> h0!) & m0!) >>> 0;
          num[t1!] = ((w >>> h1!) & m1!) >>> 0;
          num[t2!] = ((w >>> h2!) & m2!) >>> 0;
          num[t3!] = ((w >>> h3!) & m3!) >>> 0;
        });
      } else {
        ops.push((num, b, p) => {
          const w = readWord(b, p, l);
          for (let i = 0; i < sl.length; i++) num[sl[i]!] = ((w >>> sh[i]!) & mk[i]!) >>> 0;
        });
      }
    } else if (kind[g] === W.BYTES && l === 6) {
      ops.push((num, b, p) => {
        num[s0] =
          ((b[p]! << 8) | b[p + 1]!) * 0x100000000 +
          (((b[p + 2]! << 24) | (b[p + 3]! << 16) | (b[p + 4]! << 8) | b[p + 5]!) >>> 0);
      });
    } else if (kind[g] === W.BYTES) {
      ops.push((num, b, p) => {
        let v = 0;
        for (let i = 0; i < l; i++) v = v * 256 + b[p + i]!;
        num[s0] = v;
      });
    } else {
      const fs = fields.slice(f0, f0 + c);
      ops.push((num, b, _p, st, o) => {
        for (let i = 0; i < fs.length; i++) {
          const fi = fs[i]!;
          if (fi.wide) st.big[fi.slot] = readBig(fi, b, o);
          else num[fi.slot] = readNum(fi, b, o);
        }
      });
    }
  }
  return { ops, at };
}

/**
 * Writes the header's fields. Number slots hold values within their field's
 * width (every store truncates), so fields are combined without masks.
 */
export function compileEmit(h: HeaderInfo, only?: ReadonlySet<FieldInfo>): HeaderEmit {
  const { n, kind, at, len, first, count, slot, shift, fields } = planOf(h);
  const ops: WinOp[] = [];
  const ats: number[] = [];
  for (let g = 0; g < n; g++) {
    // `only`: the windows holding at least one of these fields (the others are left as they are)
    if (only && !fields.slice(first[g]!, first[g]! + count[g]!).some((f) => only.has(f))) continue;
    ats.push(at[g]!);
    const l = len[g]!;
    const f0 = first[g]!;
    const c = count[g]!;
    const s0 = slot[f0]!;
    if (kind[g] === W.WORD && c === 1 && shift[f0] === 0) {
      if (l === 1)
        ops.push((num, b, p) => {
          b[p] = num[s0]!;
        });
      else if (l === 2) {
        ops.push((num, b, p) => {
          const v = num[s0]!;
          b[p] = v >>> 8;
          b[p + 1] = v;
        });
      } else if (l === 4) {
        ops.push((num, b, p) => {
          const v = num[s0]!;
          b[p] = v >>> 24;
          b[p + 1] = v >>> 16;
          b[p + 2] = v >>> 8;
          b[p + 3] = v;
        });
      } else ops.push((num, b, p) => writeWord(b, p, l, num[s0]!));
    } else if (kind[g] === W.WORD) {
      const sl = slot.subarray(f0, f0 + c);
      const sh = shift.subarray(f0, f0 + c);
      const [t0, t1, t2, t3] = sl;
      const [h0, h1, h2, h3] = sh;
      if (c === 2) ops.push((num, b, p) => writeWord(b, p, l, (num[t0!]! << h0!) | (num[t1!]! << h1!)));
      else if (c === 3)
        ops.push((num, b, p) => writeWord(b, p, l, (num[t0!]! << h0!) | (num[t1!]! << h1!) | (num[t2!]! << h2!)));
      else if (c === 4)
        ops.push((num, b, p) =>
          writeWord(b, p, l, (num[t0!]! << h0!) | (num[t1!]! << h1!) | (num[t2!]! << h2!) | (num[t3!]! << h3!)),
        );
      else {
        ops.push((num, b, p) => {
          let w = 0;
          for (let i = 0; i < sl.length; i++) w |= num[sl[i]!]! << sh[i]!;
          writeWord(b, p, l, w);
        });
      }
    } else if (kind[g] === W.BYTES && l === 6) {
      ops.push((num, b, p) => {
        const v = num[s0]!;
        const hi = Math.floor(v / 0x100000000);
        const lo = v - hi * 0x100000000;
        b[p] = hi >>> 8;
        b[p + 1] = hi;
        b[p + 2] = lo >>> 24;
        b[p + 3] = lo >>> 16;
        b[p + 4] = lo >>> 8;
        b[p + 5] = lo;
      });
    } else if (kind[g] === W.BYTES) {
      ops.push((num, b, p) => {
        // up to 48 bits: the low 32 by shifts, the rest above them
        const v = num[s0]!;
        const hi = Math.floor(v / 0x100000000);
        const lo = v - hi * 0x100000000;
        let i = l - 1;
        for (let s = 0; s < 32 && i >= 0; s += 8, i--) b[p + i] = lo >>> s;
        for (let s = 0; i >= 0; s += 8, i--) b[p + i] = hi >>> s;
      });
    } else {
      const fs = fields.slice(f0, f0 + c);
      ops.push((num, b, p, st, o) => {
        for (let i = 0; i < l; i++) b[p + i] = 0;
        for (let i = 0; i < fs.length; i++) {
          const fi = fs[i]!;
          if (fi.wide) writeBig(fi, st.big[fi.slot]!, b, o);
          else writeNum(fi, num[fi.slot]!, b, o);
        }
      });
    }
  }
  return sequence(ops, Int32Array.from(ats));
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
  /** Appends the low `width` (<= 48) bits of a non-negative number below 2^53, most significant first. */
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
