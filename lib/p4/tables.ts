// Match-action tables: the key readers are compiled once; entries are added
// by the control plane (./runtime.ts) or come from the program's const
// `entries`. Lookup:
// - only exact/valid keys: a Map on the key's string form (one probe);
// - an lpm key: entries kept sorted by prefix length, longest first;
// - ternary/range/optional keys: sorted by priority (lower number wins, as
//   in bmv2), ties by insertion order.
// The first matching entry in that order is the hit.

import { CompiledAction } from './actions';
import { ActionProfile } from './profiles';
import { compileValue, ExprContext, RuntimeData, Value } from './expr';
import { JsonPath, refuse } from './load';
import { MatchKind, matchKinds, Table } from './schema';
import { FieldInfo, hexToBig, PacketState } from './state';
import { MeterArray } from './externs';

export interface KeyPart {
  readonly kind: MatchKind;
  readonly width: number;
  readonly read: Value;
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
}

export class MatchTable {
  readonly keys: KeyPart[];
  readonly exactOnly: boolean;
  readonly hasLpm: boolean;
  readonly needsPriority: boolean;
  readonly actions: Map<string, CompiledAction>;
  readonly entries = new Map<number, Entry>();
  #exact = new Map<string, Entry>();
  #ordered: Entry[] = [];
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
      if (kind === 'valid') {
        const h = ctx.layout.header(k.target, [...kp, 'target']).index;
        return { kind, width: 1, read: (st: PacketState) => BigInt(st.valid[h]!) };
      }
      const hv = ctx.layout.hiddenValid(k.target);
      if (hv !== undefined) return { kind, width: 1, read: (st: PacketState) => BigInt(st.valid[hv]!) };
      const f = ctx.layout.field(k.target, [...kp, 'target']);
      let read = compileValue({ type: 'field', value: k.target }, ctx, kp);
      if (k.mask !== null && k.mask !== undefined) {
        if (!/^0x[0-9a-fA-F]+$/.test(k.mask)) refuse([...kp, 'mask'], 'not a hexstring', k.mask);
        const m = hexToBig(k.mask);
        const r0 = read;
        read = (st, rd) => r0(st, rd) & m;
      }
      return { kind, width: f.width, read };
    });
    const kinds = new Set(this.keys.map((k) => k.kind));
    if (this.keys.filter((k) => k.kind === 'lpm').length > 1) refuse([...path, 'key'], 'more than one lpm key', t.key);
    this.exactOnly = [...kinds].every((k) => k === 'exact' || k === 'valid');
    this.needsPriority = kinds.has('ternary') || kinds.has('range') || kinds.has('optional');
    this.hasLpm = kinds.has('lpm');
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
      this.defaultEntry = { action: ca, data: de.action_data.map((h, i) => hexToBig(h) & ((1n << BigInt(ca.params[i]!.bitwidth)) - 1n)) };
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
    const e: Entry = { handle: this.#nextHandle, key, action, data, ref, group, priority, slot, packets: 0, bytes: 0 };
    if (this.exactOnly) {
      const s = exactString(key.map((k) => k.value));
      if (this.#exact.has(s)) return 'duplicate entry';
      this.#exact.set(s, e);
    } else {
      if (this.#ordered.some((o) => sameKey(o.key, key) && (!this.needsPriority || o.priority === priority))) return 'duplicate entry';
      this.#ordered.push(e);
      const lpm = this.keys.findIndex((k) => k.kind === 'lpm');
      if (this.needsPriority) this.#ordered.sort((a, b) => a.priority - b.priority || a.handle - b.handle);
      else if (lpm >= 0) this.#ordered.sort((a, b) => b.key[lpm]!.prefix - a.key[lpm]!.prefix || a.handle - b.handle);
    }
    this.entries.set(e.handle, e);
    this.#nextHandle++;
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
    if (this.exactOnly) this.#exact.delete(exactString(e.key.map((k) => k.value)));
    else this.#ordered.splice(this.#ordered.indexOf(e), 1);
    return true;
  }

  clear(): void {
    if (this.immutable) return;
    for (const e of this.entries.values()) if (e.slot >= 0) this.#freeSlots.push(e.slot);
    this.entries.clear();
    this.#exact.clear();
    this.#ordered = [];
  }

  /** The matching entry for the frame in `st`, or undefined (a miss). */
  lookup(st: PacketState): Entry | undefined {
    const n = this.keys.length;
    if (n === 0) return undefined;
    if (this.exactOnly) {
      if (n === 1) return this.#exact.get(this.keys[0]!.read(st, []).toString(16));
      const vals: bigint[] = new Array(n);
      for (let i = 0; i < n; i++) vals[i] = this.keys[i]!.read(st, []);
      return this.#exact.get(exactString(vals));
    }
    const vals: bigint[] = new Array(n);
    for (let i = 0; i < n; i++) vals[i] = this.keys[i]!.read(st, []);
    const list = this.#ordered;
    outer: for (let j = 0; j < list.length; j++) {
      const e = list[j]!;
      for (let i = 0; i < n; i++) {
        const m = e.key[i]!;
        const v = vals[i]!;
        if (m.wildcard) continue;
        if (this.keys[i]!.kind === 'range') {
          if (v < m.lo || v > m.hi) continue outer;
        } else if ((v & m.mask) !== m.value) continue outer;
      }
      return e;
    }
    return undefined;
  }
}

function exactString(vals: readonly bigint[]): string {
  return vals.length === 1 ? vals[0]!.toString(16) : vals.map((v) => v.toString(16)).join(',');
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
