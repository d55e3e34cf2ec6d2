// A match-action table of a loaded program: its key (./key-parts.ts), its
// actions, default and direct resources (counters, meter, action profile),
// and its entries, added by the control plane (../../engine/commands.ts) or
// from the program's const `entries`, filed in an EntryIndex
// (./entry-index.ts) that the lookups (./lookups.ts) probe.

import type { CompiledAction } from '../actions';
import { ActionProfile } from '../action-profiles';
import { actionArgs, ExprContext, NO_ARGS, RuntimeData } from '../expr';
import { MeterArray } from '../externs';
import { JsonPath, refuse } from '../../program/load';
import type { FieldInfo } from '../../program/layout';
import { hexToBig } from '../../program/numbers';
import { matchKinds, Table } from '../../program/schema';
import type { PacketState } from '../../frame/packet-state';
import { ActionChoice, Entry, MatchSpec } from './entries';
import { EntryIndex, NumberView } from './entry-index';
import { compileKeyParts, constEntryKey, KeyPart } from './key-parts';
import { directNode, finder } from './lookups';

export class MatchTable {
  readonly keys: KeyPart[];
  readonly exactOnly: boolean;
  readonly hasLpm: boolean;
  readonly needsPriority: boolean;
  readonly actions: Map<string, CompiledAction>;
  readonly entries = new Map<number, Entry>();
  readonly #index: EntryIndex;
  /** lookup, specialised once for this table's shape (./lookups.ts). */
  readonly find: (st: PacketState) => Entry | undefined;
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
    if (
      !(matchKinds as readonly string[]).includes(t.match_type) ||
      t.match_type === 'valid' ||
      t.match_type === 'optional'
    ) {
      refuse([...path, 'match_type'], 'unsupported match type', t.match_type);
    }
    if (t.type === 'indirect' || t.type === 'indirect_ws') {
      const ap = t.action_profile === undefined ? undefined : profiles.get(t.action_profile);
      if (!ap) refuse([...path, 'action_profile'], 'no such action profile in this pipeline', t.action_profile ?? null);
      if (t.type === 'indirect_ws' && !ap.selector)
        refuse([...path, 'action_profile'], 'an indirect_ws table needs a profile with a selector', t.action_profile);
      if (t.entries)
        refuse([...path, 'entries'], 'const entries of indirect tables are not supported', t.entries.length);
      this.profile = ap;
    } else if (t.type !== 'simple') refuse([...path, 'type'], 'unsupported table type', t.type);
    if (t.support_timeout) refuse([...path, 'support_timeout'], 'entry ageing is not supported', true);
    if (t.direct_meters) {
      const m = meters.get(t.direct_meters);
      if (!m || !m.direct) refuse([...path, 'direct_meters'], 'no such direct meter array', t.direct_meters);
      if (m.direct.binding !== t.name)
        refuse([...path, 'direct_meters'], `the meter is bound to ${m.direct.binding}`, t.direct_meters);
      const result = ctx.layout.field(m.direct.resultTarget, ['meter_arrays', m.direct.index, 'result_target']);
      this.meter = { array: m, result };
      for (let i = Math.min(m.size, t.max_size) - 1; i >= 0; i--) this.#freeSlots.push(i);
    }
    this.keys = compileKeyParts(t, path, ctx);
    const kinds = new Set(this.keys.map((k) => k.kind));
    if (this.keys.filter((k) => k.kind === 'lpm').length > 1) refuse([...path, 'key'], 'more than one lpm key', t.key);
    this.exactOnly = [...kinds].every((k) => k === 'exact' || k === 'valid');
    this.needsPriority = kinds.has('ternary') || kinds.has('range') || kinds.has('optional');
    this.hasLpm = kinds.has('lpm');
    this.#index = new EntryIndex(this.keys, this.needsPriority, this.hasLpm);
    this.find = finder(this.#index);
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
      if (de.action_data.length !== ca.params.length)
        refuse(
          [...path, 'default_entry', 'action_data'],
          `${ca.name} takes ${ca.params.length} parameters`,
          de.action_data,
        );
      const data = de.action_data.map((h, i) => hexToBig(h) & ((1n << BigInt(ca.params[i]!.bitwidth)) - 1n));
      this.defaultEntry = { action: ca, data, args: actionArgs(data) };
      this.defaultConst = de.action_const === true;
    }
    if (t.entries) {
      t.entries.forEach((e, ei) => {
        const ep: JsonPath = [...path, 'entries', ei];
        const ca = [...this.actions.values()].find((x) => x.id === e.action_entry.action_id);
        if (!ca) refuse([...ep, 'action_entry', 'action_id'], 'not an action of this table', e.action_entry.action_id);
        const key = constEntryKey(e, this.keys, ep);
        const data = e.action_entry.action_data.map(
          (h, i) => hexToBig(h) & ((1n << BigInt(ca.params[i]?.bitwidth ?? 0)) - 1n),
        );
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
  add(
    key: MatchSpec[],
    action: CompiledAction | undefined,
    data: RuntimeData,
    priority: number,
    ref = -1,
    group = false,
  ): number | string {
    if (this.immutable) return `table ${this.name} has const entries`;
    if ((action === undefined) !== (this.profile !== undefined))
      return `table ${this.name} is ${this.profile ? 'indirect' : 'direct'}`;
    if (this.entries.size >= this.maxSize) return `table ${this.name} is full (${this.maxSize})`;
    if (key.length !== this.keys.length) return `table ${this.name} has ${this.keys.length} key parts`;
    let slot = -1;
    if (this.meter) {
      if (this.#freeSlots.length === 0) return `direct meter ${this.meter.array.name} of ${this.name} is full`;
      slot = this.#freeSlots[this.#freeSlots.length - 1]!;
    }
    const args = data.length === 0 ? NO_ARGS : actionArgs(data);
    const e: Entry = {
      handle: this.#nextHandle,
      key,
      action,
      data,
      args,
      ref,
      group,
      priority,
      slot,
      packets: 0,
      bytes: 0,
    };
    const refused = this.#index.add(e);
    if (refused !== undefined) return refused;
    this.entries.set(e.handle, e);
    this.#nextHandle++;
    this.#index.rebuildSmall(this.entries.size);
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
    this.#index.delete(e);
    this.#index.rebuildSmall(this.entries.size);
    return true;
  }

  clear(): void {
    if (this.immutable) return;
    for (const e of this.entries.values()) if (e.slot >= 0) this.#freeSlots.push(e.slot);
    this.entries.clear();
    this.#index.clear();
    this.#index.rebuildSmall(this.entries.size);
  }

  /** The pipeline node of a common direct table with its lookup written in, or undefined (./lookups.ts directNode). */
  directNode(byAction: Int32Array, baseNext: number): ((st: PacketState) => number) | undefined {
    if (this.profile) return undefined;
    return directNode(this.#index, this, byAction, baseNext);
  }

  /** The lookup structures of a number-path table (undefined for the bigint path), for the generator (../../codegen). */
  numberView(): NumberView | undefined {
    return this.#index.numberView();
  }

  /** lookup() with the key parts already read as numbers (KeyPart.readNum); undefined on the bigint path. */
  lookupNumbers(vals: Float64Array): Entry | undefined {
    return this.#index.lookupNumbers(vals);
  }

  /** The matching entry for the frame in `st`, or undefined (a miss). */
  lookup(st: PacketState): Entry | undefined {
    return this.#index.lookup(st);
  }
}
