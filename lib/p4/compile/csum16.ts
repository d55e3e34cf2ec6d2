// The number path of csum16 calculations over fields (the IPv4 header
// checksum, the TCP/UDP checksums over a pseudo header and the payload),
// compiled once so that a frame's checksum is a few multiply-adds over the
// packet state: no bit image of the inputs, no bigint.
//
// The ones'-complement sum of 16-bit words is the sum of the words modulo
// 65535 (folded, end-around carry), and 2^16 = 1 modulo 65535. So the
// stream of inputs, read as one big number whose base-65536 digits are the
// words, has the same sum as the words; and a field that ends `s` bits
// before the end of its word (s = 0..15) adds v * 2^s to that number,
// modulo 65535, wherever it is: every field is one multiply-add (a field
// over 32 bits as its high and low parts added first, since 2^32 = 1 too),
// and the fold at the end gives the same 16 bits as the word-by-word sum.
// A field of a header that is not valid adds nothing, as in the general
// path (which leaves it out of the image): the inputs are grouped into runs
// of the same header, and a skipped run moves the later inputs by its
// width, so every run but the last must be a whole number of 16-bit words
// for the others to keep their place. Calculations that do not fit (other
// algorithms, wide fields, header inputs, odd runs) use the general path of
// ./calculations.ts, whose results these equal (spec/p4/compile/fast-paths.spec.ts).

import { ExprContext } from './expr';
import { hexToBig, POW2 } from '../program/numbers';
import { PacketState } from '../frame/packet-state';
import { TypeValue } from '../program/schema';

/** A calculation's result as a number (csum16: 16 bits). */
export type NumCalc = (st: PacketState) => number;

/** Largest number-field width taken here (v * 2^15 stays below 2^53 after the split of wide ones). */
const MAX_WIDTH = 48;

interface Run {
  /** Header whose validity gates the run (-1: constants). */
  header: number;
  slots: number[];
  muls: number[];
  /** Fields over 32 bits: their high and low parts are added before the multiply. */
  split: boolean[];
  constant: number;
}

/** A csum16 calculation's number form: runs of one header's inputs, and the payload's bit phase mod 16 (-1: no payload). */
export interface Csum16Plan {
  readonly runs: Run[];
  readonly phase: number;
}

/** The runs of a csum16 calculation on the number path, or undefined when it needs the general path. */
export function csum16Plan(c: { algo: string; input: TypeValue[] }, ctx: ExprContext): Csum16Plan | undefined {
  if (c.algo !== 'csum16') return undefined;
  let pos = 0; // bit position in the concatenated inputs (all present)
  const runs: Run[] = [];
  let run: Run | undefined;
  let runStart = 0;
  let payloadPhase = -1; // bit position of the payload mod 16, if it is an input
  for (let i = 0; i < c.input.length; i++) {
    const inp = c.input[i]!;
    if (payloadPhase >= 0) return undefined; // the payload only as the last input
    let header: number;
    let slot = -1;
    let value = 0;
    let width: number;
    if (inp.type === 'field') {
      if (!Array.isArray(inp.value)) return undefined;
      const f = ctx.layout.headerByName.get(inp.value[0] as string)?.byName.get(inp.value[1] as string);
      if (!f || f.wide || f.width > MAX_WIDTH) return undefined;
      header = f.header;
      slot = f.slot;
      width = f.width;
    } else if (inp.type === 'hexstr') {
      if (
        typeof inp.value !== 'string' ||
        !/^0x[0-9a-fA-F]+$/.test(inp.value) ||
        !inp.bitwidth ||
        inp.bitwidth > MAX_WIDTH
      )
        return undefined;
      header = -1;
      width = inp.bitwidth;
      value = Number(hexToBig(inp.value) & ((1n << BigInt(width)) - 1n));
    } else if (inp.type === 'payload') {
      header = -3;
      width = 0;
    } else return undefined;
    if (!run || header !== run.header) {
      if (run && run.header >= 0 && (pos - runStart) % 16 !== 0) return undefined;
      if (header !== -3) runs.push((run = { header, slots: [], muls: [], split: [], constant: 0 }));
      runStart = pos;
    }
    if (header === -3) {
      if (pos % 8 !== 0) return undefined;
      payloadPhase = pos % 16;
      continue;
    }
    pos += width;
    const mul = POW2[(16 - (pos % 16)) % 16]!;
    if (header === -1) {
      const hi = Math.floor(value / 0x100000000);
      run!.constant += (hi + (value - hi * 0x100000000)) * mul;
    } else {
      run!.slots.push(slot);
      run!.muls.push(mul);
      run!.split.push(width > 32);
    }
  }
  return { runs, phase: payloadPhase };
}

/**
 * The run the one-closure form takes (one header's fields, none over 32
 * bits, no payload), else undefined: the generator (../codegen/checksums.ts) writes the same shapes.
 */
export function singleRun(plan: Csum16Plan): Run | undefined {
  const { runs, phase } = plan;
  return runs.length === 1 && phase < 0 && runs[0]!.header >= 0 && !runs[0]!.split.some((x) => x) ? runs[0] : undefined;
}

/** The number form of a csum16 calculation, or undefined when it needs the general path. */
export function compileCsum16Num(c: { algo: string; input: TypeValue[] }, ctx: ExprContext): NumCalc | undefined {
  const plan = csum16Plan(c, ctx);
  if (!plan) return undefined;
  const runs = plan.runs;
  const phase = plan.phase;
  const single = singleRun(plan);
  if (single) {
    // one header's fields (the IPv4 header checksum): one closure, the sum and the fold inline
    const h = single.header;
    const k = single.constant;
    const slots = Int32Array.from(single.slots);
    const muls = Float64Array.from(single.muls);
    const n = slots.length;
    if (
      n <= 12 &&
      Number.isSafeInteger(k) &&
      single.slots.every(Number.isSafeInteger) &&
      single.muls.every(Number.isSafeInteger)
    ) {
      // generated: the slots, multipliers and constant written in as integers (nothing else from the program)
      let sum = '';
      for (let i = 0; i < n; i++) sum += ` + m[${slots[i]!}] * ${muls[i]!}`;
      const src = `return function csum16(st) {
let s = ${k};
if (st.valid[${h}] !== 0) { const m = st.num; s = s${sum}; }
while (s > 0xffff) { const q = Math.floor(s / 0x10000); s = s - q * 0x10000 + q; }
return ~s & 0xffff;
};`;
      return new Function(src)() as NumCalc;
    }
    if (n <= 12) {
      // written out: up to 12 fields (IPv4 has 11), the rest padded with slot 0 times 0
      const [a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11] = Array.from({ length: 12 }, (_, i) =>
        i < n ? slots[i]! : 0,
      );
      const [b0, b1, b2, b3, b4, b5, b6, b7, b8, b9, b10, b11] = Array.from({ length: 12 }, (_, i) =>
        i < n ? muls[i]! : 0,
      );
      return (st) => {
        let s = k;
        if (st.valid[h] !== 0) {
          const m = st.num;
          s += m[a0!]! * b0! + m[a1!]! * b1! + m[a2!]! * b2! + m[a3!]! * b3! + m[a4!]! * b4! + m[a5!]! * b5!;
          s += m[a6!]! * b6! + m[a7!]! * b7! + m[a8!]! * b8! + m[a9!]! * b9! + m[a10!]! * b10! + m[a11!]! * b11!;
        }
        while (s > 0xffff) {
          const q = Math.floor(s / 0x10000);
          s = s - q * 0x10000 + q;
        }
        return ~s & 0xffff;
      };
    }
    return (st) => {
      let s = k;
      if (st.valid[h] !== 0) {
        const num = st.num;
        for (let i = 0; i < n; i++) s += num[slots[i]!]! * muls[i]!;
      }
      while (s > 0xffff) {
        const q = Math.floor(s / 0x10000);
        s = s - q * 0x10000 + q;
      }
      return ~s & 0xffff;
    };
  }
  const parts = runs.map(runSum);
  return (st) => {
    let sum = 0;
    for (let i = 0; i < parts.length; i++) sum += parts[i]!(st);
    if (phase >= 0) sum += payloadSum(st.frame, st.offset, phase === 8);
    return fold(sum);
  };
}

/** The end-around-carry fold of a sum below 2^53, complemented to 16 bits. */
function fold(s: number): number {
  while (s > 0xffff) {
    const q = Math.floor(s / 0x10000);
    s = s - q * 0x10000 + q;
  }
  return ~s & 0xffff;
}

/** One run's share of the sum (0 when its header is not valid). */
function runSum(r: Run): (st: PacketState) => number {
  const h = r.header;
  const k = r.constant;
  const slots = Int32Array.from(r.slots);
  const muls = Float64Array.from(r.muls);
  const n = slots.length;
  if (r.split.some((x) => x)) {
    const split = Uint8Array.from(r.split, (x) => (x ? 1 : 0));
    return (st) => {
      if (h >= 0 && st.valid[h] === 0) return 0;
      const num = st.num;
      let s = k;
      for (let i = 0; i < n; i++) {
        let v = num[slots[i]!]!;
        if (split[i] === 1) {
          const hi = Math.floor(v / 0x100000000);
          v = hi + (v - hi * 0x100000000);
        }
        s += v * muls[i]!;
      }
      return s;
    };
  }
  return (st) => {
    if (h >= 0 && st.valid[h] === 0) return 0;
    const num = st.num;
    let s = k;
    for (let i = 0; i < n; i++) s += num[slots[i]!]! * muls[i]!;
    return s;
  };
}

/** The 16-bit word sum of frame[from..]; `low` when the first byte is the low half of a word. */
export function payloadSum(b: Buffer, from: number, low: boolean): number {
  let sum = 0;
  let i = from;
  const end = b.length;
  if (low && i < end) sum += b[i++]!;
  for (; i + 1 < end; i += 2) sum += (b[i]! << 8) | b[i + 1]!;
  if (i < end) sum += b[i]! << 8;
  return sum;
}
