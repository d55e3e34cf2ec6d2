// The header layout of a program: every header instance's fields mapped to
// slots of the packet state (../frame/packet-state.ts).
//
// Field values: a field of at most 48 bits (NUM_BITS: every port, length,
// IPv4 address and MAC address) lives in a Float64Array slot as a plain
// number, exact since it is below 2^53; a wider one (64-bit counters,
// 128-bit addresses) lives in a bigint slot. General expressions
// (../compile/expr.ts) compute in bigint and truncate to the destination's
// width on assignment, so no value is ever silently rounded; copies, table
// keys, action data, checksums and the common expressions over fields of at
// most 32 bits (compileNum) stay in numbers.

import { HeaderType, Program } from './schema';
import { JsonPath, refuse } from './load';

/** Widths up to this many bits are stored as numbers (exact: below 2^53, with room for a sum of a few). */
const NUM_BITS = 48;
/** Widths up to this many bits take part in number expressions (compileNum) and bitwise key matching. */
export const NARROW_BITS = 32;

export interface FieldInfo {
  readonly header: number; // header instance index
  readonly name: string;
  readonly width: number;
  /** Stored as a bigint (width > NUM_BITS); otherwise a number. */
  readonly wide: boolean;
  readonly slot: number; // into num (number-stored) or big (wide)
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

interface StackInfo {
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
  /** Validity of each header at the start of a frame (metadata 1, others 0). */
  readonly initialValid: Uint8Array;

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
        const wide = width > NUM_BITS;
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
      if (!h.metadata && bit % 8 !== 0)
        refuse(['header_types', ti, 'fields'], `header is ${bit} bits, not whole bytes`, t.name);
      const info: HeaderInfo = {
        index: hi,
        name: h.name,
        metadata: h.metadata,
        fields,
        byName,
        bytes: h.metadata ? 0 : bit / 8,
      };
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
    this.initialValid = Uint8Array.from(this.headers, (h) => (h.metadata ? 1 : 0));
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
