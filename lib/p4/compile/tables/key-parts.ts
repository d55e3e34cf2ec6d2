// A table's key as the program declares it, compiled once: each part's
// reader (bigint, and a number reader when the part is a number field or a
// validity bit), and the program's const entries read into MatchSpecs.

import { compileValue, ExprContext, Value } from '../expr';
import { JsonPath, refuse } from '../../program/load';
import { NARROW_BITS } from '../../program/layout';
import { hexToBig } from '../../program/numbers';
import { MatchKind, matchKinds, Table } from '../../program/schema';
import type { PacketState } from '../../frame/packet-state';
import { exactSpec, lpmSpec, MatchSpec, rangeSpec, ternarySpec, wildcardSpec } from './entries';

export interface KeyPart {
  readonly kind: MatchKind;
  readonly width: number;
  readonly read: Value;
  /** The part as a number (undefined: this table uses the bigint path). */
  readonly readNum: ((st: PacketState) => number) | undefined;
  /** The number slot when the part is a plain number field (no mask), else -1. */
  readonly slot: number;
  /** For the generator (../../codegen): the header whose validity the part is (-1: a field), the field's number slot (-1: none), its mask on the number path. */
  readonly validHeader: number;
  readonly fieldSlot: number;
  readonly numMask: number | undefined;
}

/** The key parts of table `t` (at `path` in the program); refuses an unknown match kind or target. */
export function compileKeyParts(t: Table, path: JsonPath, ctx: ExprContext): KeyPart[] {
  return t.key.map((k, ki) => {
    const kp: JsonPath = [...path, 'key', ki];
    if (!(matchKinds as readonly string[]).includes(k.match_type))
      refuse([...kp, 'match_type'], 'unsupported match type', k.match_type);
    const kind = k.match_type as MatchKind;
    const vh =
      kind === 'valid' ? ctx.layout.header(k.target, [...kp, 'target']).index : ctx.layout.hiddenValid(k.target);
    if (vh !== undefined) {
      return {
        kind,
        width: 1,
        read: (st: PacketState) => BigInt(st.valid[vh]!),
        readNum: (st: PacketState) => st.valid[vh]!,
        slot: -1,
        validHeader: vh,
        fieldSlot: -1,
        numMask: undefined,
      };
    }
    const f = ctx.layout.field(k.target, [...kp, 'target']);
    let read = compileValue({ type: 'field', value: k.target }, ctx, kp);
    const slot = f.slot;
    let readNum: ((st: PacketState) => number) | undefined =
      f.wide || (kind === 'ternary' && f.width > NARROW_BITS) ? undefined : (st) => st.num[slot]!;
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
    return {
      kind,
      width: f.width,
      read,
      readNum,
      slot: plain,
      validHeader: -1,
      fieldSlot: f.wide ? -1 : slot,
      numMask,
    };
  });
}

type ConstEntry = NonNullable<Table['entries']>[number];

/** A const entry's match_key as MatchSpecs for `keys` (at `ep` in the program). */
export function constEntryKey(e: ConstEntry, keys: readonly KeyPart[], ep: JsonPath): MatchSpec[] {
  if (e.match_key.length !== keys.length)
    refuse([...ep, 'match_key'], `the table has ${keys.length} key parts`, e.match_key.length);
  return e.match_key.map((mk, i) => {
    const kp = keys[i]!;
    if (mk.match_type !== kp.kind)
      refuse([...ep, 'match_key', i, 'match_type'], `the table's key part is ${kp.kind}`, mk.match_type);
    const hx = (s: unknown, n: string): bigint => {
      if (typeof s !== 'string' || !/^0x[0-9a-fA-F]+$/.test(s))
        refuse([...ep, 'match_key', i, n], 'not a hexstring', s);
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
}
