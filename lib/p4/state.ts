// The packet state a compiled program works on, and the header layout that
// maps P4 fields onto it.
//
// Field values: a field of at most 32 bits lives in a Float64Array slot as a
// plain number; a wider one (48-bit MACs, 128-bit addresses) lives in a
// bigint slot. Expressions (./expr.ts) compute in bigint and truncate to the
// destination's width on assignment, so no value is ever silently rounded;
// straight copies between narrow fields and action data skip bigint.

import { HeaderType, Program } from './schema';
import { JsonPath, refuse } from './load';

/** Widths up to this many bits are stored as numbers. */
export const NARROW_BITS = 32;

export interface FieldInfo {
  readonly header: number; // header instance index
  readonly name: string;
  readonly width: number;
  readonly wide: boolean;
  readonly slot: number; // into num (narrow) or big (wide)
  readonly bitOffset: number; // from the header's first bit
  readonly mask: bigint;
}

export interface HeaderInfo {
  readonly index: number;
  readonly name: string;
  readonly metadata: boolean;
  readonly fields: FieldInfo[];
  readonly byName: Map<string, FieldInfo>;
  readonly bytes: number; // wire length (0 for metadata)
}

export interface StackInfo {
  readonly index: number;
  readonly name: string;
  readonly headers: number[];
}

/** Every header instance's fields mapped to slots. */
export class Layout {
  readonly headers: HeaderInfo[] = [];
  readonly headerByName = new Map<string, HeaderInfo>();
  readonly stacks: StackInfo[] = [];
  readonly stackByName = new Map<string, StackInfo>();
  numSlots = 0;
  bigSlots = 0;

  constructor(p: Program) {
    const types = new Map<string, HeaderType>();
    p.header_types.forEach((t) => types.set(t.name, t));
    p.headers.forEach((h, hi) => {
      const t = types.get(h.header_type);
      if (!t) refuse(['headers', hi, 'header_type'], 'no such header type', h.header_type);
      const ti = p.header_types.indexOf(t);
      const fields: FieldInfo[] = [];
      const byName = new Map<string, FieldInfo>();
      let bit = 0;
      t.fields.forEach((f, fi) => {
        const width = f[1];
        if (width === '*') refuse(['header_types', ti, 'fields', fi], 'variable-length fields are not supported', f);
        if (f[2] === true) refuse(['header_types', ti, 'fields', fi], 'signed fields are not supported', f);
        const wide = width > NARROW_BITS;
        const info: FieldInfo = {
          header: hi,
          name: f[0],
          width,
          wide,
          slot: wide ? this.bigSlots++ : this.numSlots++,
          bitOffset: bit,
          mask: (1n << BigInt(width)) - 1n,
        };
        bit += width;
        fields.push(info);
        byName.set(f[0], info);
      });
      if (!h.metadata && bit % 8 !== 0) refuse(['header_types', ti, 'fields'], `header is ${bit} bits, not whole bytes`, t.name);
      const info: HeaderInfo = { index: hi, name: h.name, metadata: h.metadata, fields, byName, bytes: h.metadata ? 0 : bit / 8 };
      if (this.headerByName.has(h.name)) refuse(['headers', hi, 'name'], 'duplicate header name', h.name);
      this.headers.push(info);
      this.headerByName.set(h.name, info);
    });
    p.header_stacks.forEach((s, si) => {
      const hs = s.header_ids.map((id, k) => {
        const h = p.headers.findIndex((x) => x.id === id);
        if (h < 0) refuse(['header_stacks', si, 'header_ids', k], 'no header with this id', id);
        return h;
      });
      const info: StackInfo = { index: si, name: s.name, headers: hs };
      this.stacks.push(info);
      this.stackByName.set(s.name, info);
    });
  }

  header(name: unknown, path: JsonPath): HeaderInfo {
    const h = typeof name === 'string' ? this.headerByName.get(name) : undefined;
    if (!h) refuse(path, 'no such header instance', name);
    return h;
  }

  field(ref: unknown, path: JsonPath): FieldInfo {
    if (!Array.isArray(ref) || ref.length !== 2 || typeof ref[0] !== 'string' || typeof ref[1] !== 'string') {
      refuse(path, 'a field reference must be [header, field]', ref);
    }
    const h = this.headerByName.get(ref[0]);
    if (!h) refuse(path, 'no such header instance', ref);
    if (ref[1] === '$valid$') refuse(path, 'the hidden $valid$ field is only readable (use valid())', ref);
    const f = h.byName.get(ref[1]);
    if (!f) refuse(path, 'no such field', ref);
    return f;
  }

  /** The header index of a hidden `[header, "$valid$"]` field reference, else undefined. */
  hiddenValid(ref: unknown): number | undefined {
    if (!Array.isArray(ref) || ref.length !== 2 || ref[1] !== '$valid$') return undefined;
    return this.headerByName.get(ref[0] as string)?.index;
  }

  stack(name: unknown, path: JsonPath): StackInfo {
    const s = typeof name === 'string' ? this.stackByName.get(name) : undefined;
    if (!s) refuse(path, 'no such header stack', name);
    return s;
  }
}

/** One frame's state while it goes through the program (reused across frames). */
export class PacketState {
  readonly num: Float64Array;
  readonly big: bigint[];
  readonly valid: Uint8Array;
  readonly stackNext: Uint16Array;
  frame: Buffer = Buffer.alloc(0);
  /** First byte not yet consumed by the parser (the payload starts here after parsing). */
  offset = 0;
  dropped = false;
  exited = false;
  parserError = 0; // 0 none, see ParserError
  checksumError = false;
  digests: { list: number; values: bigint[] }[] = [];

  constructor(readonly layout: Layout) {
    this.num = new Float64Array(layout.numSlots);
    this.big = new Array<bigint>(layout.bigSlots).fill(0n);
    this.valid = new Uint8Array(layout.headers.length);
    this.stackNext = new Uint16Array(layout.stacks.length);
  }

  /** Clears everything for a new frame; metadata headers are valid, others not. */
  reset(frame: Buffer): void {
    // Loops, not fill(): a few dozen slots, per frame.
    const num = this.num;
    for (let i = 0; i < num.length; i++) num[i] = 0;
    const big = this.big;
    for (let i = 0; i < big.length; i++) big[i] = 0n;
    const headers = this.layout.headers;
    for (let i = 0; i < headers.length; i++) { const h = headers[i]!; this.valid[h.index] = h.metadata ? 1 : 0; }
    const sn = this.stackNext;
    for (let i = 0; i < sn.length; i++) sn[i] = 0;
    this.frame = frame;
    this.offset = 0;
    this.dropped = false;
    this.exited = false;
    this.parserError = 0;
    this.checksumError = false;
    this.digests = [];
  }

  get(f: FieldInfo): bigint {
    return f.wide ? this.big[f.slot]! : BigInt(this.num[f.slot]!);
  }

  set(f: FieldInfo, v: bigint): void {
    if (f.wide) this.big[f.slot] = v & f.mask;
    else this.num[f.slot] = Number(v & f.mask);
  }
}

/** Parser error codes (bmv2's core errors that we can raise). */
export const enum ParserError {
  None = 0,
  PacketTooShort = 1,
  NoMatch = 2,
  StackOutOfBounds = 3,
  VerifyFailed = 4,
}

/** Parses a bmv2 hexstring (`0x..`, `-0x..`) into a bigint. */
export function hexToBig(s: string): bigint {
  return s.startsWith('-') ? -BigInt(s.slice(1)) : BigInt(s);
}
