// What a table entry is: its key (one MatchSpec per key part, made by the
// constructors below from the control plane's or the program's values) and
// what it runs.

import type { CompiledAction } from '../actions';
import type { ActionArgs, RuntimeData } from '../expr';

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
  /** data as the action reads it (../expr.ts actionArgs). */
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

export function sameKey(a: MatchSpec[], b: MatchSpec[]): boolean {
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
