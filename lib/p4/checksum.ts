// The number path of csum16 calculations over fields (the IPv4 header
// checksum, the TCP/UDP checksums over a pseudo header and the payload),
// compiled once into segments so that a frame's checksum is a sum of
// numbers read from the packet state: no bit image of the inputs, no bigint.
//
// The ones'-complement sum of 16-bit words does not depend on the order of
// the words, so each input field is cut at word boundaries into pieces and
// each piece adds its bits, shifted to their place in their word. A field of
// a header that is not valid adds nothing, as in the general path (which
// leaves it out of the image): the inputs are grouped into runs of the same
// header, and a skipped run moves the later inputs by its width, so every
// run but the last must be a whole number of 16-bit words for the pieces to
// keep their place. Calculations that do not fit (other algorithms, wide
// fields, header inputs, odd runs) use the general path of ./externs.ts,
// whose results these equal bit for bit (spec/p4/fast-paths.spec.ts).

import { ExprContext } from './expr';
import { hexToBig, PacketState, POW2 } from './state';
import { TypeValue } from './schema';

/** A calculation's result as a number (csum16: 16 bits). */
export type NumCalc = (st: PacketState) => number;

interface Piece {
  /** Header whose validity gates the piece (-1: a constant, always there). */
  readonly header: number;
  /** Number slot of the field (-1: constant, see value). */
  readonly slot: number;
  readonly value: number;
  /** piece = floor(v / 2^shift) % 2^bits, added times mul. */
  readonly shift: number;
  readonly bits: number;
  readonly mul: number;
  /** The field is at most 32 bits: the piece by >>> and &, else by division. */
  readonly int: boolean;
}

/** Largest number-field width taken here (the pieces' sum stays far below 2^53). */
const MAX_WIDTH = 48;

/** The number form of a csum16 calculation, or undefined when it needs the general path. */
export function compileCsum16Num(c: { algo: string; input: TypeValue[] }, ctx: ExprContext): NumCalc | undefined {
  if (c.algo !== 'csum16') return undefined;
  const pieces: Piece[] = [];
  let pos = 0; // bit position in the concatenated inputs (all present)
  let runHeader = -2;
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
      if (typeof inp.value !== 'string' || !/^0x[0-9a-fA-F]+$/.test(inp.value) || !inp.bitwidth || inp.bitwidth > MAX_WIDTH) return undefined;
      header = -1;
      width = inp.bitwidth;
      value = Number(hexToBig(inp.value) & ((1n << BigInt(width)) - 1n));
    } else if (inp.type === 'payload') {
      header = -3;
      width = 0;
    } else return undefined;
    if (header !== runHeader) {
      if (runHeader >= 0 && (pos - runStart) % 16 !== 0) return undefined;
      runHeader = header;
      runStart = pos;
    }
    if (header === -3) {
      if (pos % 8 !== 0) return undefined;
      payloadPhase = pos % 16;
      continue;
    }
    // cut [pos, pos + width) at word boundaries
    const end = pos + width;
    for (let a = pos; a < end; ) {
      const b = Math.min(end, (Math.floor(a / 16) + 1) * 16);
      pieces.push({ header, slot, value, shift: end - b, bits: b - a, mul: POW2[(16 - (b % 16)) % 16]!, int: width <= 32 });
      a = b;
    }
    pos = end;
  }
  const n = pieces.length;
  const headers = Int32Array.from(pieces, (p) => p.header);
  const slots = Int32Array.from(pieces, (p) => p.slot);
  const values = Float64Array.from(pieces, (p) => p.value);
  const shifts = Int32Array.from(pieces, (p) => p.shift);
  const masks = Int32Array.from(pieces, (p) => (1 << p.bits) - 1); // bits <= 16
  const ints = Uint8Array.from(pieces, (p) => (p.int ? 1 : 0));
  const divs = Float64Array.from(pieces, (p) => POW2[p.shift]!);
  const mods = Float64Array.from(pieces, (p) => POW2[p.bits]!);
  const muls = Float64Array.from(pieces, (p) => p.mul);
  const phase = payloadPhase;
  return (st) => {
    const num = st.num;
    const valid = st.valid;
    let sum = 0;
    for (let i = 0; i < n; i++) {
      const h = headers[i]!;
      let v: number;
      if (h < 0) v = values[i]!;
      else if (valid[h] === 0) continue;
      else v = num[slots[i]!]!;
      if (ints[i] === 1) sum += ((v >>> shifts[i]!) & masks[i]!) * muls[i]!;
      else {
        const q = Math.floor(v / divs[i]!);
        const m = mods[i]!;
        sum += (q - Math.floor(q / m) * m) * muls[i]!;
      }
    }
    if (phase >= 0) sum += payloadSum(st.frame, st.offset, phase === 8);
    while (sum > 0xffff) sum = (sum % 0x10000) + Math.floor(sum / 0x10000);
    return ~sum & 0xffff;
  };
}

/** The 16-bit word sum of frame[from..]; `low` when the first byte is the low half of a word. */
function payloadSum(b: Buffer, from: number, low: boolean): number {
  let sum = 0;
  let i = from;
  const end = b.length;
  if (low && i < end) sum += b[i++]!;
  for (; i + 1 < end; i += 2) sum += (b[i]! << 8) | b[i + 1]!;
  if (i < end) sum += b[i]! << 8;
  return sum;
}
