// Parse value sets: the values the control plane adds (parse_vset_add),
// bounded per set, and looked up by a frame's parser in O(1) whatever their
// number. A transition that names a set tests (key & mask) against the set's
// values under the same mask (JSON_format.md), so each distinct mask the
// program's transitions use gets its own view: a Set of the masked values,
// kept up to date as values are added (bigints for the bigint path, numbers
// for the number path). The masks per set are bounded, so one add costs at
// most MAX_VSET_MASKS + 1 Set inserts.

import { JsonPath, refuse } from '../program/load';
import { Program } from '../program/schema';

/** Most values a set may declare (max_size) and hold. */
export const MAX_VSET_SIZE = 1 << 16;
/** A set's limit when the program declares no max_size (or 0). */
export const MAX_VSET_DEFAULT = 4096;
/** Distinct transition masks one set may be tested under. */
export const MAX_VSET_MASKS = 8;

/** The values of one set under one mask (null: none). */
export class VsetView {
  readonly big = new Set<bigint>();
  /** The masked values that are safe integers (the number path's keys are below 2^48). */
  readonly num = new Set<number>();
  constructor(readonly mask: bigint | null) {}

  add(v: bigint): void {
    const m = this.mask === null ? v : v & this.mask;
    this.big.add(m);
    if (m <= BigInt(Number.MAX_SAFE_INTEGER)) this.num.add(Number(m));
  }
}

export class ValueSet {
  readonly #values = new Set<bigint>();
  readonly #views = new Map<bigint | null, VsetView>();

  constructor(
    readonly name: string,
    /** compressed_bitwidth: values are at most this wide. */
    readonly width: number,
    readonly maxSize: number,
  ) {}

  get size(): number {
    return this.#values.size;
  }

  has(v: bigint): boolean {
    return this.#values.has(v);
  }

  /** The view for a transition's mask (at load); undefined when the set already has MAX_VSET_MASKS others. */
  view(mask: bigint | null): VsetView | undefined {
    let v = this.#views.get(mask);
    if (v) return v;
    if (this.#views.size >= MAX_VSET_MASKS) return undefined;
    v = new VsetView(mask);
    for (const x of this.#values) v.add(x);
    this.#views.set(mask, v);
    return v;
  }

  /** Adds a value (a duplicate is taken once); an error line when the set is full. */
  add(v: bigint): string | undefined {
    if (this.#values.has(v)) return undefined;
    if (this.#values.size >= this.maxSize) return `parse value set ${this.name} is full (${this.maxSize})`;
    this.#values.add(v);
    for (const view of this.#views.values()) view.add(v);
    return undefined;
  }
}

/** A declared set's limit: its max_size, MAX_VSET_DEFAULT without one. */
export function vsetLimit(maxSize: number | undefined): number {
  return maxSize === undefined || maxSize === 0 ? MAX_VSET_DEFAULT : maxSize;
}

/** Every declared set, by name; refuses duplicate names and sizes over MAX_VSET_SIZE with their paths. */
export function declareVsets(p: Program): Map<string, ValueSet> {
  const sets = new Map<string, ValueSet>();
  p.parse_vsets.forEach((d, i) => {
    const path: JsonPath = ['parse_vsets', i];
    if (sets.has(d.name)) refuse([...path, 'name'], 'duplicate parse value set name', d.name);
    if (d.max_size !== undefined && d.max_size > MAX_VSET_SIZE)
      refuse([...path, 'max_size'], `larger than ${MAX_VSET_SIZE}`, d.max_size);
    sets.set(d.name, new ValueSet(d.name, d.compressed_bitwidth, vsetLimit(d.max_size)));
  });
  return sets;
}
