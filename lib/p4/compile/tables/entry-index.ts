// A table's entries in the structures its lookup probes, by the shape of
// its key:
// - only exact/valid keys: one Map probe;
// - an lpm key (with exact/valid parts or not): one Map per prefix length
//   present, probed longest first (the lpm part reduced to its prefix);
// - ternary/range/optional keys: an array sorted by priority (lower number
//   wins, as in bmv2), ties by insertion order; the first match is the hit.
// The number path: when every key part is a number-stored field or a
// validity bit (and ternary parts and masked parts are at most 32 bits),
// the parts are read as numbers and, for the Maps, packed into one number
// (all the exact and lpm parts together at most 53 bits): a lookup reads
// numbers and probes Maps, with no bigint and no allocation. Other tables
// (IPv6 addresses, 64-bit keys) use bigint values and string Map keys.
// The structures are never replaced, only changed: the lookups of
// ./lookups.ts and the generated function close over them.

import { NO_ARGS } from '../expr';
import { POW2 } from '../../program/numbers';
import type { PacketState } from '../../frame/packet-state';
import { Entry, MatchSpec, sameKey } from './entries';
import type { KeyPart } from './key-parts';

/** Bits a packed number key may hold (exact in a double). */
const PACKED_BITS = 53;

/**
 * Up to this many entries, a one-part exact or lpm table on the number path
 * is also kept as a short array (keys, prefix divisors, entries; lpm longest
 * prefix first) that a lookup scans instead of probing Maps: a few number
 * compares cost less than one Map probe.
 */
const SMALL = 8;

export const enum Mode {
  Exact,
  Lpm,
  Ordered,
}

/** Per entry part of an ordered table, the number path's match: */
const enum Code {
  Equal, // v === a
  Ternary, // (v & b) >>> 0 === a (at most 32 bits)
  Prefix, // floor(v / b) === a
  Range, // a <= v <= b
  Any, // optional wildcard
}

interface Ordered {
  readonly e: Entry;
  /** Number path: per part a code and two operands. */
  readonly codes: Uint8Array;
  readonly a: Float64Array;
  readonly b: Float64Array;
}

interface PrefixMap {
  readonly len: number;
  /** 2^(width - len): the lpm part's value divided by it, floored, is its prefix. */
  readonly div: number;
  readonly map: Map<number | string, Entry>;
}

/** The short array: n = -1 when it is not in use. pre/msk: each entry's value and (prefix) mask as int32, meaningful for int32 tables. */
interface SmallArray {
  readonly n: number;
  readonly keys: Float64Array;
  readonly divs: Float64Array;
  readonly entries: (Entry | undefined)[];
  readonly pre: Int32Array;
  readonly msk: Int32Array;
}

/** A number-path table's lookup structures, for a lookup the generator (../../codegen) writes out. */
export interface NumberView {
  readonly mode: 'exact' | 'lpm' | 'ordered';
  /** Packed keys are int32 (`| 0`). */
  readonly int32: boolean;
  readonly small: SmallArray;
  readonly exact: Map<number | string, Entry>;
  readonly prefixes: readonly { readonly div: number; readonly map: Map<number | string, Entry> }[];
}

export class EntryIndex {
  readonly keys: readonly KeyPart[];
  readonly mode: Mode;
  /** Number path: every part has readNum and the packed key fits. */
  readonly numeric: boolean;
  /**
   * Packed keys of at most 32 bits are used as int32 (`| 0`): small integers
   * to V8, so a probe boxes nothing even for keys of 2^31 and above.
   */
  readonly int32: boolean;
  /** The lpm part's index (-1: none). */
  readonly lpm: number;
  readonly exact = new Map<number | string, Entry>();
  /** Lpm mode: longest prefix first. */
  readonly prefixes: PrefixMap[] = [];
  readonly #ordered: Ordered[] = [];
  /** The short array (SMALL); n = -1 when the table does not use it (more entries, another shape). */
  readonly small = {
    n: -1,
    keys: new Float64Array(SMALL),
    divs: new Float64Array(SMALL),
    entries: new Array<Entry | undefined>(SMALL).fill(undefined),
    // int32 tables: each entry's value and mask as int32 (a generated lpm lookup compares (v ^ pre) & msk with 0)
    pre: new Int32Array(SMALL),
    msk: new Int32Array(SMALL),
  };
  readonly #vals: Float64Array;
  readonly #bigVals: bigint[];

  constructor(keys: readonly KeyPart[], needsPriority: boolean, hasLpm: boolean) {
    this.keys = keys;
    this.lpm = keys.findIndex((k) => k.kind === 'lpm');
    this.mode = needsPriority ? Mode.Ordered : hasLpm ? Mode.Lpm : Mode.Exact;
    const packed = keys.reduce((n, k) => n + k.width, 0);
    this.numeric = keys.every((k) => k.readNum !== undefined) && (this.mode === Mode.Ordered || packed <= PACKED_BITS);
    this.int32 = this.numeric && packed <= 32;
    this.#vals = new Float64Array(keys.length);
    this.#bigVals = new Array<bigint>(keys.length).fill(0n);
  }

  /** Files entry `e` under its key; 'duplicate entry' when one with the same key (and priority) is there. */
  add(e: Entry): string | undefined {
    const key = e.key;
    if (this.mode === Mode.Exact) {
      const k = this.#mapKey(key, -1);
      if (this.exact.has(k)) return 'duplicate entry';
      this.exact.set(k, e);
    } else if (this.mode === Mode.Lpm) {
      const len = key[this.lpm]!.prefix;
      let pm = this.prefixes.find((x) => x.len === len);
      const k = this.#mapKey(key, len);
      if (pm?.map.has(k)) return 'duplicate entry';
      if (!pm) {
        pm = { len, div: POW2[this.keys[this.lpm]!.width - len]!, map: new Map() };
        this.prefixes.push(pm);
        this.prefixes.sort((a, b) => b.len - a.len);
      }
      pm.map.set(k, e);
    } else {
      if (this.#ordered.some((o) => sameKey(o.e.key, key) && o.e.priority === e.priority)) return 'duplicate entry';
      this.#ordered.push(this.#orderedOf(e));
      this.#ordered.sort((a, b) => a.e.priority - b.e.priority || a.e.handle - b.e.handle);
    }
    return undefined;
  }

  delete(e: Entry): void {
    if (this.mode === Mode.Exact) this.exact.delete(this.#mapKey(e.key, -1));
    else if (this.mode === Mode.Lpm) {
      const len = e.key[this.lpm]!.prefix;
      const i = this.prefixes.findIndex((x) => x.len === len);
      const pm = this.prefixes[i]!;
      pm.map.delete(this.#mapKey(e.key, len));
      if (pm.map.size === 0) this.prefixes.splice(i, 1);
    } else
      this.#ordered.splice(
        this.#ordered.findIndex((o) => o.e === e),
        1,
      );
  }

  clear(): void {
    this.exact.clear();
    this.prefixes.length = 0;
    this.#ordered.length = 0;
  }

  /** Refills the short array from the Maps after a change (control plane only); `count`: the table's entries. */
  rebuildSmall(count: number): void {
    const sm = this.small;
    sm.n = -1;
    sm.entries.fill(undefined);
    if (!this.numeric || this.keys.length !== 1 || this.mode === Mode.Ordered || count > SMALL) return;
    let n = 0;
    if (this.mode === Mode.Exact) {
      for (const [k, e] of this.exact) {
        sm.keys[n] = k as number;
        sm.divs[n] = 1;
        sm.pre[n] = Number(e.key[0]!.value & 0xffffffffn) | 0;
        sm.msk[n] = Number(e.key[0]!.mask & 0xffffffffn) | 0;
        sm.entries[n++] = e;
      }
    } else {
      for (const pm of this.prefixes) {
        for (const [k, e] of pm.map) {
          sm.keys[n] = k as number;
          sm.divs[n] = pm.div;
          sm.pre[n] = Number(e.key[0]!.value & 0xffffffffn) | 0;
          sm.msk[n] = Number(e.key[0]!.mask & 0xffffffffn) | 0;
          sm.entries[n++] = e;
        }
      }
    }
    sm.n = n;
  }

  /**
   * An entry's Map key: exact and valid parts as they are, the lpm part
   * (len >= 0) reduced to its first len bits; packed into one number on the
   * number path, else the parts' hex joined.
   */
  #mapKey(key: readonly MatchSpec[], len: number): number | string {
    if (this.numeric) {
      let k = 0;
      for (let i = 0; i < key.length; i++) {
        const w = this.keys[i]!.width;
        if (i === this.lpm) k = k * POW2[len]! + Number(key[i]!.value >> BigInt(w - len));
        else k = k * POW2[w]! + Number(key[i]!.value);
      }
      return this.int32 ? k | 0 : k;
    }
    let k = '';
    for (let i = 0; i < key.length; i++) {
      const v = i === this.lpm ? key[i]!.value >> BigInt(this.keys[i]!.width - len) : key[i]!.value;
      k += (i === 0 ? '' : ',') + v.toString(16);
    }
    return k;
  }

  #orderedOf(e: Entry): Ordered {
    const n = this.keys.length;
    const codes = new Uint8Array(n);
    const a = new Float64Array(n);
    const b = new Float64Array(n);
    if (this.numeric) {
      for (let i = 0; i < n; i++) {
        const m = e.key[i]!;
        const kp = this.keys[i]!;
        if (m.wildcard) codes[i] = Code.Any;
        else if (kp.kind === 'range') [codes[i], a[i], b[i]] = [Code.Range, Number(m.lo), Number(m.hi)];
        else if (kp.kind === 'ternary') [codes[i], a[i], b[i]] = [Code.Ternary, Number(m.value), Number(m.mask) | 0];
        else if (kp.kind === 'lpm') {
          const d = POW2[kp.width - m.prefix]!;
          [codes[i], a[i], b[i]] = [Code.Prefix, Math.floor(Number(m.value) / d), d];
        } else [codes[i], a[i]] = [Code.Equal, Number(m.value)];
      }
    }
    return { e, codes, a, b };
  }

  /** The lookup structures of a number-path table (undefined for the bigint path). */
  numberView(): NumberView | undefined {
    if (!this.numeric) return undefined;
    const mode = this.mode === Mode.Exact ? 'exact' : this.mode === Mode.Lpm ? 'lpm' : 'ordered';
    return { mode, int32: this.int32, small: this.small, exact: this.exact, prefixes: this.prefixes };
  }

  /**
   * lookup() on the number path with the key parts already read (one number
   * per part, as KeyPart.readNum gives them); undefined on the bigint path.
   */
  lookupNumbers(vals: Float64Array): Entry | undefined {
    const keys = this.keys;
    const n = keys.length;
    if (n === 0 || !this.numeric) return undefined;
    if (this.mode === Mode.Exact) {
      let k = 0;
      for (let i = 0; i < n; i++) k = k * POW2[keys[i]!.width]! + vals[i]!;
      return this.exact.get(this.int32 ? k | 0 : k);
    }
    if (this.mode === Mode.Lpm) return this.#lookupLpmNum(vals);
    return this.#lookupOrderedNum(vals);
  }

  /** The matching entry for the frame in `st`, or undefined (a miss). */
  lookup(st: PacketState): Entry | undefined {
    const keys = this.keys;
    const n = keys.length;
    if (n === 0) return undefined;
    if (this.numeric) {
      if (this.mode === Mode.Exact) {
        let k = 0;
        for (let i = 0; i < n; i++) k = k * POW2[keys[i]!.width]! + keys[i]!.readNum!(st);
        return this.exact.get(this.int32 ? k | 0 : k);
      }
      const vals = this.#vals;
      for (let i = 0; i < n; i++) vals[i] = keys[i]!.readNum!(st);
      if (this.mode === Mode.Lpm) return this.#lookupLpmNum(vals);
      return this.#lookupOrderedNum(vals);
    }
    if (this.mode === Mode.Exact) {
      if (n === 1) return this.exact.get(keys[0]!.read(st, NO_ARGS).toString(16));
      let k = '';
      for (let i = 0; i < n; i++) k += (i === 0 ? '' : ',') + keys[i]!.read(st, NO_ARGS).toString(16);
      return this.exact.get(k);
    }
    const vals = this.#bigVals;
    for (let i = 0; i < n; i++) vals[i] = keys[i]!.read(st, NO_ARGS);
    if (this.mode === Mode.Lpm) {
      const lpm = this.lpm;
      const w = BigInt(keys[lpm]!.width);
      for (let j = 0; j < this.prefixes.length; j++) {
        const pm = this.prefixes[j]!;
        let k = '';
        for (let i = 0; i < n; i++)
          k += (i === 0 ? '' : ',') + (i === lpm ? vals[i]! >> (w - BigInt(pm.len)) : vals[i]!).toString(16);
        const e = pm.map.get(k);
        if (e) return e;
      }
      return undefined;
    }
    const list = this.#ordered;
    outer: for (let j = 0; j < list.length; j++) {
      const e = list[j]!.e;
      for (let i = 0; i < n; i++) {
        const m = e.key[i]!;
        const v = vals[i]!;
        if (m.wildcard) continue;
        if (keys[i]!.kind === 'range') {
          if (v < m.lo || v > m.hi) continue outer;
        } else if ((v & m.mask) !== m.value) continue outer;
      }
      return e;
    }
    return undefined;
  }

  #lookupLpmNum(vals: Float64Array): Entry | undefined {
    const n = vals.length;
    const lpm = this.lpm;
    const ps = this.prefixes;
    if (n === 1) {
      const v = vals[0]!;
      for (let j = 0; j < ps.length; j++) {
        const pm = ps[j]!;
        const k = Math.floor(v / pm.div);
        const e = pm.map.get(this.int32 ? k | 0 : k);
        if (e !== undefined) return e;
      }
      return undefined;
    }
    const keys = this.keys;
    for (let j = 0; j < ps.length; j++) {
      const pm = ps[j]!;
      let k = 0;
      for (let i = 0; i < n; i++) {
        if (i === lpm) k = k * POW2[pm.len]! + Math.floor(vals[i]! / pm.div);
        else k = k * POW2[keys[i]!.width]! + vals[i]!;
      }
      const e = pm.map.get(this.int32 ? k | 0 : k);
      if (e !== undefined) return e;
    }
    return undefined;
  }

  #lookupOrderedNum(vals: Float64Array): Entry | undefined {
    const list = this.#ordered;
    const n = vals.length;
    outer: for (let j = 0; j < list.length; j++) {
      const o = list[j]!;
      const codes = o.codes;
      for (let i = 0; i < n; i++) {
        const v = vals[i]!;
        switch (codes[i]) {
          case Code.Equal:
            if (v !== o.a[i]) continue outer;
            break;
          case Code.Ternary:
            if ((v & o.b[i]!) >>> 0 !== o.a[i]) continue outer;
            break;
          case Code.Prefix:
            if (Math.floor(v / o.b[i]!) !== o.a[i]) continue outer;
            break;
          case Code.Range:
            if (v < o.a[i]! || v > o.b[i]!) continue outer;
            break;
          default:
            break;
        }
      }
      return o.e;
    }
    return undefined;
  }
}
