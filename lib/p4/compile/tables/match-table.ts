// Match-action tables: the key readers are compiled once; entries are added
// by the control plane (./runtime.ts) or come from the program's const
// `entries`. Lookup:
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

import { CompiledAction } from '../actions';
import { ActionProfile } from '../action-profiles';
import { ActionArgs, actionArgs, compileValue, ExprContext, NO_ARGS, RuntimeData, Value } from '../expr';
import { JsonPath, refuse } from '../../program/load';
import { MatchKind, matchKinds, Table } from '../../program/schema';
import { FieldInfo, NARROW_BITS } from '../../program/layout';
import { hexToBig, POW2 } from '../../program/numbers';
import { PacketState } from '../../frame/packet-state';
import { MeterArray } from '../externs';

export interface KeyPart {
  readonly kind: MatchKind;
  readonly width: number;
  readonly read: Value;
  /** The part as a number (undefined: this table uses the bigint path). */
  readonly readNum: ((st: PacketState) => number) | undefined;
  /** The number slot when the part is a plain number field (no mask), else -1. */
  readonly slot: number;
  /** For ./codegen.ts: the header whose validity the part is (-1: a field), the field's number slot (-1: none), its mask on the number path. */
  readonly validHeader: number;
  readonly fieldSlot: number;
  readonly numMask: number | undefined;
}

/** A number-path table's lookup structures, for a lookup ./codegen.ts writes out (never replaced, only changed). */
export interface NumberView {
  readonly mode: 'exact' | 'lpm' | 'ordered';
  /** Packed keys are int32 (`| 0`). */
  readonly int32: boolean;
  /**
   * The short array: n = -1 when it is not in use. pre/msk: each entry's
   * value and (prefix) mask as int32, meaningful for int32 tables.
   */
  readonly small: { readonly n: number; readonly keys: Float64Array; readonly divs: Float64Array; readonly entries: (Entry | undefined)[]; readonly pre: Int32Array; readonly msk: Int32Array };
  readonly exact: Map<number | string, Entry>;
  readonly prefixes: readonly { readonly div: number; readonly map: Map<number | string, Entry> }[];
}

/** One key part of an entry. exact/valid: value; lpm: value + prefix; ternary: value + mask; range: lo..hi; optional: value or wildcard. */
export interface MatchSpec {
  value: bigint;
  mask: bigint; // ternary mask, or the lpm prefix mask; all-ones for exact
  lo: bigint;
  hi: bigint;
  prefix: number;
  wildcard: boolean;
}

export interface Entry {
  readonly handle: number;
  readonly key: MatchSpec[];
  /** Direct tables: the action and its data; indirect tables: undefined, see ref. */
  readonly action: CompiledAction | undefined;
  readonly data: RuntimeData;
  /** data as the action reads it (./expr.ts actionArgs). */
  readonly args: ActionArgs;
  /** Indirect tables: a member handle, or a group handle when `group`. */
  readonly ref: number;
  readonly group: boolean;
  readonly priority: number;
  /** Cell of the table's direct meter (-1 without one). */
  readonly slot: number;
  packets: number;
  bytes: number;
}

export interface ActionChoice {
  action: CompiledAction;
  data: RuntimeData;
  args: ActionArgs;
}

/** Bits a packed number key may hold (exact in a double). */
const PACKED_BITS = 53;

/**
 * Up to this many entries, a one-part exact or lpm table on the number path
 * is also kept as a short array (keys, prefix divisors, entries; lpm longest
 * prefix first) that a lookup scans instead of probing Maps: a few number
 * compares cost less than one Map probe.
 */
const SMALL = 8;

const enum Mode {
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

export class MatchTable {
  readonly keys: KeyPart[];
  readonly exactOnly: boolean;
  readonly hasLpm: boolean;
  readonly needsPriority: boolean;
  readonly actions: Map<string, CompiledAction>;
  readonly entries = new Map<number, Entry>();
  #mode: Mode = Mode.Exact;
  /** Number path: every part has readNum and the packed key fits. */
  #numeric = false;
  /**
   * Packed keys of at most 32 bits are used as int32 (`| 0`): small integers
   * to V8, so a probe boxes nothing even for keys of 2^31 and above.
   */
  #int32 = false;
  #lpm = -1;
  #exact = new Map<number | string, Entry>();
  /** Lpm mode: longest prefix first. */
  readonly #prefixes: PrefixMap[] = [];
  readonly #ordered: Ordered[] = [];
  /** lookup, specialised once for this table's shape (see #finder). */
  readonly find: (st: PacketState) => Entry | undefined;
  /** The short array (SMALL); n = -1 when the table does not use it (more entries, another shape). */
  readonly #small = {
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
  #nextHandle = 0;
  defaultEntry: ActionChoice | undefined;
  defaultConst = false;
  immutable = false;
  readonly withCounters: boolean;
  readonly maxSize: number;
  readonly name: string;
  readonly profile: ActionProfile | undefined;
  /** The direct meter and the field its color goes to. */
  readonly meter: { array: MeterArray; result: FieldInfo } | undefined;
  #freeSlots: number[] = [];

  constructor(
    t: Table,
    path: JsonPath,
    ctx: ExprContext,
    allActions: Map<string, CompiledAction>,
    profiles: Map<string, ActionProfile>,
    meters: Map<string, MeterArray> = new Map(),
  ) {
    this.name = t.name;
    this.maxSize = t.max_size;
    this.withCounters = t.with_counters === true;
    if (!(matchKinds as readonly string[]).includes(t.match_type) || t.match_type === 'valid' || t.match_type === 'optional') {
      refuse([...path, 'match_type'], 'unsupported match type', t.match_type);
    }
    if (t.type === 'indirect' || t.type === 'indirect_ws') {
      const ap = t.action_profile === undefined ? undefined : profiles.get(t.action_profile);
      if (!ap) refuse([...path, 'action_profile'], 'no such action profile in this pipeline', t.action_profile ?? null);
      if (t.type === 'indirect_ws' && !ap.selector) refuse([...path, 'action_profile'], 'an indirect_ws table needs a profile with a selector', t.action_profile);
      if (t.entries) refuse([...path, 'entries'], 'const entries of indirect tables are not supported', t.entries.length);
      this.profile = ap;
    } else if (t.type !== 'simple') refuse([...path, 'type'], 'unsupported table type', t.type);
    if (t.support_timeout) refuse([...path, 'support_timeout'], 'entry ageing is not supported', true);
    if (t.direct_meters) {
      const m = meters.get(t.direct_meters);
      if (!m || !m.direct) refuse([...path, 'direct_meters'], 'no such direct meter array', t.direct_meters);
      if (m.direct.binding !== t.name) refuse([...path, 'direct_meters'], `the meter is bound to ${m.direct.binding}`, t.direct_meters);
      const result = ctx.layout.field(m.direct.resultTarget, ['meter_arrays', m.direct.index, 'result_target']);
      this.meter = { array: m, result };
      for (let i = Math.min(m.size, t.max_size) - 1; i >= 0; i--) this.#freeSlots.push(i);
    }
    this.keys = t.key.map((k, ki) => {
      const kp: JsonPath = [...path, 'key', ki];
      if (!(matchKinds as readonly string[]).includes(k.match_type)) refuse([...kp, 'match_type'], 'unsupported match type', k.match_type);
      const kind = k.match_type as MatchKind;
      const vh = kind === 'valid' ? ctx.layout.header(k.target, [...kp, 'target']).index : ctx.layout.hiddenValid(k.target);
      if (vh !== undefined) {
        return { kind, width: 1, read: (st: PacketState) => BigInt(st.valid[vh]!), readNum: (st: PacketState) => st.valid[vh]!, slot: -1, validHeader: vh, fieldSlot: -1, numMask: undefined };
      }
      const f = ctx.layout.field(k.target, [...kp, 'target']);
      let read = compileValue({ type: 'field', value: k.target }, ctx, kp);
      const slot = f.slot;
      let readNum: ((st: PacketState) => number) | undefined = f.wide || (kind === 'ternary' && f.width > NARROW_BITS) ? undefined : (st) => st.num[slot]!;
      let plain = readNum ? slot : -1;
      let numMask: number | undefined;
      if (k.mask !== null && k.mask !== undefined) {
        plain = -1;
        if (!/^0x[0-9a-fA-F]+$/.test(k.mask)) refuse([...kp, 'mask'], 'not a hexstring', k.mask);
        const m = hexToBig(k.mask);
        const r0 = read;
        read = (st, rd) => r0(st, rd) & m;
        const nm = Number(m & 0xffffffffn) | 0;
        readNum = readNum && f.width <= NARROW_BITS ? (st) => (st.num[slot]! & nm) >>> 0 : undefined;
        numMask = nm;
      }
      return { kind, width: f.width, read, readNum, slot: plain, validHeader: -1, fieldSlot: f.wide ? -1 : slot, numMask };
    });
    const kinds = new Set(this.keys.map((k) => k.kind));
    if (this.keys.filter((k) => k.kind === 'lpm').length > 1) refuse([...path, 'key'], 'more than one lpm key', t.key);
    this.exactOnly = [...kinds].every((k) => k === 'exact' || k === 'valid');
    this.needsPriority = kinds.has('ternary') || kinds.has('range') || kinds.has('optional');
    this.hasLpm = kinds.has('lpm');
    this.#lpm = this.keys.findIndex((k) => k.kind === 'lpm');
    this.#mode = this.needsPriority ? Mode.Ordered : this.hasLpm ? Mode.Lpm : Mode.Exact;
    const packed = this.keys.reduce((n, k) => n + k.width, 0);
    this.#numeric = this.keys.every((k) => k.readNum !== undefined) && (this.#mode === Mode.Ordered || packed <= PACKED_BITS);
    this.#int32 = this.#numeric && packed <= 32;
    this.#vals = new Float64Array(this.keys.length);
    this.#bigVals = new Array<bigint>(this.keys.length).fill(0n);
    this.find = this.#finder();
    this.actions = new Map();
    t.actions.forEach((a, ai) => {
      const ca = allActions.get(a);
      if (!ca) refuse([...path, 'actions', ai], 'no such action', a);
      this.actions.set(a, ca);
      this.profile?.actions.set(a, ca);
    });
    if (t.default_entry) {
      const de = t.default_entry;
      const ca = [...allActions.values()].find((x) => x.id === de.action_id);
      if (!ca) refuse([...path, 'default_entry', 'action_id'], 'no action with this id', de.action_id);
      if (de.action_data.length !== ca.params.length) refuse([...path, 'default_entry', 'action_data'], `${ca.name} takes ${ca.params.length} parameters`, de.action_data);
      const data = de.action_data.map((h, i) => hexToBig(h) & ((1n << BigInt(ca.params[i]!.bitwidth)) - 1n));
      this.defaultEntry = { action: ca, data, args: actionArgs(data) };
      this.defaultConst = de.action_const === true;
    }
    if (t.entries) {
      t.entries.forEach((e, ei) => {
        const ep: JsonPath = [...path, 'entries', ei];
        const ca = [...this.actions.values()].find((x) => x.id === e.action_entry.action_id);
        if (!ca) refuse([...ep, 'action_entry', 'action_id'], 'not an action of this table', e.action_entry.action_id);
        if (e.match_key.length !== this.keys.length) refuse([...ep, 'match_key'], `the table has ${this.keys.length} key parts`, e.match_key.length);
        const key = e.match_key.map((mk, i) => {
          const kp = this.keys[i]!;
          if (mk.match_type !== kp.kind) refuse([...ep, 'match_key', i, 'match_type'], `the table's key part is ${kp.kind}`, mk.match_type);
          const hx = (s: unknown, n: string): bigint => {
            if (typeof s !== 'string' || !/^0x[0-9a-fA-F]+$/.test(s)) refuse([...ep, 'match_key', i, n], 'not a hexstring', s);
            return BigInt(s);
          };
          switch (kp.kind) {
            case 'valid':
              return exactSpec(mk.key === true ? 1n : 0n, 1);
            case 'exact':
              return exactSpec(hx(mk.key, 'key'), kp.width);
            case 'lpm':
              return lpmSpec(hx(mk.key, 'key'), mk.prefix_length ?? kp.width, kp.width);
            case 'ternary':
              return ternarySpec(hx(mk.key, 'key'), hx(mk.mask, 'mask'));
            case 'range':
              return rangeSpec(hx(mk.start, 'start'), hx(mk.end, 'end'));
            case 'optional':
              return mk.key === undefined ? wildcardSpec() : exactSpec(hx(mk.key, 'key'), kp.width);
          }
        });
        const data = e.action_entry.action_data.map((h, i) => hexToBig(h) & ((1n << BigInt(ca.params[i]?.bitwidth ?? 0)) - 1n));
        const r = this.add(key, ca, data, e.priority ?? 0);
        if (typeof r === 'string') refuse(ep, r);
      });
      this.immutable = true;
    }
  }

  /** Sets the default action (the control plane's table_set_default). */
  setDefault(action: CompiledAction, data: RuntimeData): void {
    this.defaultEntry = { action, data, args: actionArgs(data) };
  }

  /** Adds an entry; returns its handle or a reason it was refused. */
  add(key: MatchSpec[], action: CompiledAction | undefined, data: RuntimeData, priority: number, ref = -1, group = false): number | string {
    if (this.immutable) return `table ${this.name} has const entries`;
    if ((action === undefined) !== (this.profile !== undefined)) return `table ${this.name} is ${this.profile ? 'indirect' : 'direct'}`;
    if (this.entries.size >= this.maxSize) return `table ${this.name} is full (${this.maxSize})`;
    if (key.length !== this.keys.length) return `table ${this.name} has ${this.keys.length} key parts`;
    let slot = -1;
    if (this.meter) {
      if (this.#freeSlots.length === 0) return `direct meter ${this.meter.array.name} of ${this.name} is full`;
      slot = this.#freeSlots[this.#freeSlots.length - 1]!;
    }
    const args = data.length === 0 ? NO_ARGS : actionArgs(data);
    const e: Entry = { handle: this.#nextHandle, key, action, data, args, ref, group, priority, slot, packets: 0, bytes: 0 };
    if (this.#mode === Mode.Exact) {
      const k = this.#mapKey(key, -1);
      if (this.#exact.has(k)) return 'duplicate entry';
      this.#exact.set(k, e);
    } else if (this.#mode === Mode.Lpm) {
      const len = key[this.#lpm]!.prefix;
      let pm = this.#prefixes.find((x) => x.len === len);
      const k = this.#mapKey(key, len);
      if (pm?.map.has(k)) return 'duplicate entry';
      if (!pm) {
        pm = { len, div: POW2[this.keys[this.#lpm]!.width - len]!, map: new Map() };
        this.#prefixes.push(pm);
        this.#prefixes.sort((a, b) => b.len - a.len);
      }
      pm.map.set(k, e);
    } else {
      if (this.#ordered.some((o) => sameKey(o.e.key, key) && o.e.priority === priority)) return 'duplicate entry';
      this.#ordered.push(this.#orderedOf(e));
      this.#ordered.sort((a, b) => a.e.priority - b.e.priority || a.e.handle - b.e.handle);
    }
    this.entries.set(e.handle, e);
    this.#nextHandle++;
    this.#rebuildSmall();
    if (slot >= 0) {
      this.#freeSlots.pop();
      this.meter!.array.setRates(slot, NaN, 0, NaN, 0); // a new entry's meter starts unset (green)
    }
    return e.handle;
  }

  delete(handle: number): boolean {
    const e = this.entries.get(handle);
    if (!e || this.immutable) return false;
    this.entries.delete(handle);
    if (e.slot >= 0) this.#freeSlots.push(e.slot);
    if (this.#mode === Mode.Exact) this.#exact.delete(this.#mapKey(e.key, -1));
    else if (this.#mode === Mode.Lpm) {
      const len = e.key[this.#lpm]!.prefix;
      const i = this.#prefixes.findIndex((x) => x.len === len);
      const pm = this.#prefixes[i]!;
      pm.map.delete(this.#mapKey(e.key, len));
      if (pm.map.size === 0) this.#prefixes.splice(i, 1);
    } else this.#ordered.splice(this.#ordered.findIndex((o) => o.e === e), 1);
    this.#rebuildSmall();
    return true;
  }

  /** Refills the short array from the Maps after a change (control plane only). */
  #rebuildSmall(): void {
    const sm = this.#small;
    sm.n = -1;
    sm.entries.fill(undefined);
    if (!this.#numeric || this.keys.length !== 1 || this.#mode === Mode.Ordered || this.entries.size > SMALL) return;
    let n = 0;
    if (this.#mode === Mode.Exact) {
      for (const [k, e] of this.#exact) {
        sm.keys[n] = k as number;
        sm.divs[n] = 1;
        sm.pre[n] = Number(e.key[0]!.value & 0xffffffffn) | 0;
        sm.msk[n] = Number(e.key[0]!.mask & 0xffffffffn) | 0;
        sm.entries[n++] = e;
      }
    } else {
      for (const pm of this.#prefixes) {
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

  clear(): void {
    if (this.immutable) return;
    for (const e of this.entries.values()) if (e.slot >= 0) this.#freeSlots.push(e.slot);
    this.entries.clear();
    this.#exact.clear();
    this.#prefixes.length = 0;
    this.#ordered.length = 0;
    this.#rebuildSmall();
  }

  /**
   * An entry's Map key: exact and valid parts as they are, the lpm part
   * (len >= 0) reduced to its first len bits; packed into one number on the
   * number path, else the parts' hex joined.
   */
  #mapKey(key: readonly MatchSpec[], len: number): number | string {
    if (this.#numeric) {
      let k = 0;
      for (let i = 0; i < key.length; i++) {
        const w = this.keys[i]!.width;
        if (i === this.#lpm) k = k * POW2[len]! + Number(key[i]!.value >> BigInt(w - len));
        else k = k * POW2[w]! + Number(key[i]!.value);
      }
      return this.#int32 ? k | 0 : k;
    }
    let k = '';
    for (let i = 0; i < key.length; i++) {
      const v = i === this.#lpm ? key[i]!.value >> BigInt(this.keys[i]!.width - len) : key[i]!.value;
      k += (i === 0 ? '' : ',') + v.toString(16);
    }
    return k;
  }

  #orderedOf(e: Entry): Ordered {
    const n = this.keys.length;
    const codes = new Uint8Array(n);
    const a = new Float64Array(n);
    const b = new Float64Array(n);
    if (this.#numeric) {
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

  /**
   * The pipeline node of a common table (direct actions; no counters, meter
   * or __HIT__/__MISS__, checked by the caller) with the lookup written in:
   * for one-part exact or lpm tables on a number field (the others:
   * undefined, and the pipeline calls find). Runs the entry's action, or the
   * default's, and returns the next node by action index.
   */
  directNode(byAction: Int32Array, baseNext: number): ((st: PacketState) => number) | undefined {
    if (this.profile || this.keys.length !== 1 || !this.#numeric || this.#mode === Mode.Ordered || this.keys[0]!.slot < 0) return undefined;
    const slot = this.keys[0]!.slot;
    const sm = this.#small;
    const { keys: sk, divs: sd, entries: se } = sm;
    const i32 = this.#int32;
    if (this.#mode === Mode.Exact) {
      const map = this.#exact;
      return (st) => {
        const v = i32 ? st.num[slot]! | 0 : st.num[slot]!;
        const n = sm.n;
        let e: Entry | undefined;
        if (n < 0) e = map.get(v);
        else {
          for (let i = 0; i < n; i++) {
            if (sk[i] === v) {
              e = se[i];
              break;
            }
          }
        }
        const c = e ?? this.defaultEntry;
        if (c === undefined) return baseNext;
        const a = c.action!;
        a.run(st, c.args);
        return byAction[a.index]!;
      };
    }
    const ps = this.#prefixes;
    return (st) => {
      const v = st.num[slot]!;
      const n = sm.n;
      let e: Entry | undefined;
      if (n >= 0) {
        for (let i = 0; i < n; i++) {
          const q = Math.floor(v / sd[i]!);
          if ((i32 ? q | 0 : q) === sk[i]) {
            e = se[i];
            break;
          }
        }
      } else {
        for (let j = 0; j < ps.length; j++) {
          const pm = ps[j]!;
          const q = Math.floor(v / pm.div);
          e = pm.map.get(i32 ? q | 0 : q);
          if (e !== undefined) break;
        }
      }
      const c = e ?? this.defaultEntry;
      if (c === undefined) return baseNext;
      const a = c.action!;
      a.run(st, c.args);
      return byAction[a.index]!;
    };
  }

  /**
   * The lookup for the common shapes with one key part on the number path
   * (one number read, one Map probe or one per prefix length); the others
   * go through lookup(). The Maps and arrays it closes over are never
   * replaced, only changed.
   */
  #finder(): (st: PacketState) => Entry | undefined {
    if (this.keys.length !== 1 || !this.#numeric || this.#mode === Mode.Ordered) return (st) => this.lookup(st);
    const k = this.keys[0]!;
    const slot = k.slot;
    const read = k.readNum!;
    const sm = this.#small;
    const { keys: sk, divs: sd, entries: se } = sm;
    const i32 = this.#int32;
    if (slot >= 0 && this.#mode === Mode.Exact) {
      const map = this.#exact;
      return (st) => {
        const v = i32 ? st.num[slot]! | 0 : st.num[slot]!;
        const n = sm.n;
        if (n < 0) return map.get(v);
        for (let i = 0; i < n; i++) if (sk[i] === v) return se[i];
        return undefined;
      };
    }
    if (slot >= 0) {
      const ps = this.#prefixes;
      return (st) => {
        const v = st.num[slot]!;
        const n = sm.n;
        if (n >= 0) {
          for (let i = 0; i < n; i++) {
            const q = Math.floor(v / sd[i]!);
            if ((i32 ? q | 0 : q) === sk[i]) return se[i];
          }
          return undefined;
        }
        for (let j = 0; j < ps.length; j++) {
          const pm = ps[j]!;
          const q = Math.floor(v / pm.div);
          const e = pm.map.get(i32 ? q | 0 : q);
          if (e !== undefined) return e;
        }
        return undefined;
      };
    }
    if (this.#mode === Mode.Exact) {
      const map = this.#exact;
      if (this.#int32) return slot >= 0 ? (st) => map.get(st.num[slot]! | 0) : (st) => map.get(read(st) | 0);
      return slot >= 0 ? (st) => map.get(st.num[slot]!) : (st) => map.get(read(st));
    }
    const ps = this.#prefixes;
    if (this.#int32) {
      return (st) => {
        const v = slot >= 0 ? st.num[slot]! : read(st);
        for (let j = 0; j < ps.length; j++) {
          const pm = ps[j]!;
          const e = pm.map.get(Math.floor(v / pm.div) | 0);
          if (e !== undefined) return e;
        }
        return undefined;
      };
    }
    return (st) => {
      const v = slot >= 0 ? st.num[slot]! : read(st);
      for (let j = 0; j < ps.length; j++) {
        const pm = ps[j]!;
        const e = pm.map.get(Math.floor(v / pm.div));
        if (e !== undefined) return e;
      }
      return undefined;
    };
  }

  /** The lookup structures of a number-path table (undefined for the bigint path), for ./codegen.ts. */
  numberView(): NumberView | undefined {
    if (!this.#numeric) return undefined;
    const mode = this.#mode === Mode.Exact ? 'exact' : this.#mode === Mode.Lpm ? 'lpm' : 'ordered';
    return { mode, int32: this.#int32, small: this.#small, exact: this.#exact, prefixes: this.#prefixes };
  }

  /**
   * lookup() on the number path with the key parts already read (one number
   * per part, as KeyPart.readNum gives them); undefined on the bigint path.
   */
  lookupNumbers(vals: Float64Array): Entry | undefined {
    const keys = this.keys;
    const n = keys.length;
    if (n === 0 || !this.#numeric) return undefined;
    if (this.#mode === Mode.Exact) {
      let k = 0;
      for (let i = 0; i < n; i++) k = k * POW2[keys[i]!.width]! + vals[i]!;
      return this.#exact.get(this.#int32 ? k | 0 : k);
    }
    if (this.#mode === Mode.Lpm) return this.#lookupLpmNum(vals);
    return this.#lookupOrderedNum(vals);
  }

  /** The matching entry for the frame in `st`, or undefined (a miss). */
  lookup(st: PacketState): Entry | undefined {
    const keys = this.keys;
    const n = keys.length;
    if (n === 0) return undefined;
    if (this.#numeric) {
      if (this.#mode === Mode.Exact) {
        let k = 0;
        for (let i = 0; i < n; i++) k = k * POW2[keys[i]!.width]! + keys[i]!.readNum!(st);
        return this.#exact.get(this.#int32 ? k | 0 : k);
      }
      const vals = this.#vals;
      for (let i = 0; i < n; i++) vals[i] = keys[i]!.readNum!(st);
      if (this.#mode === Mode.Lpm) return this.#lookupLpmNum(vals);
      return this.#lookupOrderedNum(vals);
    }
    if (this.#mode === Mode.Exact) {
      if (n === 1) return this.#exact.get(keys[0]!.read(st, NO_ARGS).toString(16));
      let k = '';
      for (let i = 0; i < n; i++) k += (i === 0 ? '' : ',') + keys[i]!.read(st, NO_ARGS).toString(16);
      return this.#exact.get(k);
    }
    const vals = this.#bigVals;
    for (let i = 0; i < n; i++) vals[i] = keys[i]!.read(st, NO_ARGS);
    if (this.#mode === Mode.Lpm) {
      const lpm = this.#lpm;
      const w = BigInt(keys[lpm]!.width);
      for (let j = 0; j < this.#prefixes.length; j++) {
        const pm = this.#prefixes[j]!;
        let k = '';
        for (let i = 0; i < n; i++) k += (i === 0 ? '' : ',') + (i === lpm ? vals[i]! >> (w - BigInt(pm.len)) : vals[i]!).toString(16);
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
    const lpm = this.#lpm;
    const ps = this.#prefixes;
    if (n === 1) {
      const v = vals[0]!;
      for (let j = 0; j < ps.length; j++) {
        const pm = ps[j]!;
        const k = Math.floor(v / pm.div);
        const e = pm.map.get(this.#int32 ? k | 0 : k);
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
      const e = pm.map.get(this.#int32 ? k | 0 : k);
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
            if (((v & o.b[i]!) >>> 0) !== o.a[i]) continue outer;
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

function sameKey(a: MatchSpec[], b: MatchSpec[]): boolean {
  return a.every((x, i) => {
    const y = b[i]!;
    return x.value === y.value && x.mask === y.mask && x.lo === y.lo && x.hi === y.hi && x.wildcard === y.wildcard;
  });
}

function ones(width: number): bigint {
  return (1n << BigInt(width)) - 1n;
}

export function exactSpec(value: bigint, width: number): MatchSpec {
  return { value: value & ones(width), mask: ones(width), lo: 0n, hi: 0n, prefix: width, wildcard: false };
}

export function lpmSpec(value: bigint, prefix: number, width: number): MatchSpec {
  const p = Math.max(0, Math.min(prefix, width));
  const mask = ones(width) ^ ones(width - p);
  return { value: value & mask, mask, lo: 0n, hi: 0n, prefix: p, wildcard: false };
}

export function ternarySpec(value: bigint, mask: bigint): MatchSpec {
  return { value: value & mask, mask, lo: 0n, hi: 0n, prefix: 0, wildcard: false };
}

export function rangeSpec(lo: bigint, hi: bigint): MatchSpec {
  return { value: 0n, mask: 0n, lo, hi, prefix: 0, wildcard: false };
}

export function wildcardSpec(): MatchSpec {
  return { value: 0n, mask: 0n, lo: 0n, hi: 0n, prefix: 0, wildcard: true };
}
