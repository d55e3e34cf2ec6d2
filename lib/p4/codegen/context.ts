// What the generator's parts share while they write one program's source
// (./generate.ts puts the parts together): the locals' names, the values
// passed in as parameters, and what the code written so far reads and
// writes. Every integer goes through int() and every refusal through no().

import type { CompiledAction } from '../compile/actions';
import type { MatchTable } from '../compile/tables/match-table';
import { planOf, Plan, W } from '../frame/header-bits';
import type { EngineStats, P4Result } from '../frame/result';
import type { FieldInfo, HeaderInfo, Layout } from '../program/layout';
import type { Program } from '../program/schema';

/** The third argument of a generated run: where the output goes (OutputMode's two, and process()'s). */
export const enum GenMode {
  ENGINE_BUFFER = 0,
  IN_PLACE = 1,
  NEW_BUFFER = 2,
}

/** Runs one frame and writes every field of `r` (r.frame: see GenMode). */
export type GeneratedRun = (frame: Buffer, port: number, mode: GenMode, r: P4Result) => void;

export interface CodegenInput {
  readonly program: Program;
  readonly layout: Layout;
  readonly tables: ReadonlyMap<string, MatchTable>;
  readonly actions: ReadonlyMap<string, CompiledAction>;
  /** Indices into program.pipelines (-1: none), as the engine picked them. */
  readonly ingress: number;
  readonly egress: number;
  /** Number slots of the standard fields the engine sets and reads (-1: none). */
  readonly slots: {
    readonly ingressPort: number;
    readonly packetLength: number;
    readonly egressSpec: number;
    readonly egressPort: number;
    readonly mgid: number;
    readonly mcastGrp: number;
  };
  /** Some action writes egress_spec (egress_port := egress_spec after ingress). */
  readonly specWritten: boolean;
  readonly maxFrame: number;
  /** The fields the program may write (deparse in place writes only their windows); undefined: every field. */
  readonly written: ReadonlySet<FieldInfo> | undefined;
  readonly stats: EngineStats;
  /** A view of the engine's output buffer of this length (GenMode.ENGINE_BUFFER). */
  readonly view: (len: number) => Buffer;
}

/** Limits of the subset: past them the interpreter runs the program (the source stays small). */
export const CODEGEN_LIMITS = {
  slots: 256,
  headers: 64,
  states: 64,
  nodes: 64,
  actionsPerTable: 64,
  source: 1 << 19,
} as const;

/** Thrown (and caught in generateProgram) for a program outside the subset. */
export class Unsupported extends Error {}

export function no(why: string): never {
  throw new Unsupported(why);
}

/** An integer for the source text; anything else refuses the program. */
export function int(n: unknown): string {
  if (typeof n !== 'number' || !Number.isSafeInteger(n)) no('a value that is not a safe integer');
  return n < 0 ? `(${n})` : String(n);
}

/** Header validity, field and header-offset locals (named by index only). */
export const f = (slot: number): string => `f${int(slot)}`;
export const v = (header: number): string => `v${int(header)}`;
export const o = (header: number): string => `o${int(header)}`;

/** What an expression may read: action data of these widths through `args` (a local name of ours). */
export interface NumCtx {
  readonly widths: readonly number[] | undefined;
  readonly args: string;
}

/** The ExprContext-free lookups of a field reference (the load already resolved it). */
export function fieldOf(layout: Layout, ref: unknown): FieldInfo | undefined {
  if (!Array.isArray(ref) || ref.length !== 2) return undefined;
  return layout.headerByName.get(ref[0] as string)?.byName.get(ref[1] as string);
}

/** One program's generation: the generator's parts (./parser.ts, ./pipeline.ts, ...) write through it. */
export class GenContext {
  readonly #capIndex = new Map<unknown, string>();
  /** The values the source reads as parameters c0, c1, ... (in order). */
  readonly caps: unknown[] = [];
  readonly input: CodegenInput;
  readonly layout: Layout;
  readonly #plans = new Map<number, Plan>();
  /** Each number slot's field width. */
  readonly widths: number[] = [];
  /**
   * Every field's value stays below 2^width: true unless the standard fields
   * the engine writes regardless of their declared width (ingress_port =
   * port & 0x1ff, packet_length, egress_spec = 511 on drop, egress_port =
   * egress_spec) are declared narrower than those values, and so may carry
   * them into other fields.
   */
  readonly withinWidths: boolean;
  /**
   * Wire fields read only by the deparse (never by an expression, key,
   * checksum, digest or copy): they are not extracted; their bytes stay in
   * the frame until an action writes the field (its `m` local then says the
   * local holds the value). Found by a first build (reads below).
   */
  readonly lazy: ReadonlySet<number>;
  /** The number slots the code reads outside extract and deparse. */
  readonly reads = new Set<number>();

  constructor(input: CodegenInput, lazy: ReadonlySet<number> = new Set()) {
    this.input = input;
    this.layout = input.layout;
    this.lazy = lazy;
    for (const h of input.layout.headers) for (const fi of h.fields) this.widths[fi.slot] = fi.width;
    const sl = input.slots;
    const wide = (slot: number, bits: number) => slot < 0 || this.widths[slot]! >= bits;
    const spec = sl.egressSpec < 0 ? 0 : Math.max(9, this.widths[sl.egressSpec]!);
    this.withinWidths =
      wide(sl.ingressPort, 9) &&
      wide(sl.packetLength, 32) &&
      wide(sl.egressSpec, 9) &&
      (!input.specWritten || wide(sl.egressPort, spec));
  }

  /** A field's local, read. */
  r(slot: number): string {
    this.reads.add(slot);
    return f(slot);
  }

  /** The number slots the code may write, and the headers whose validity it may change (after the parser). */
  readonly writes = new Set<number>();
  readonly validWrites = new Set<number>();

  /** After a write of a field (recorded): a lazy field's local now holds its value. */
  m(slot: number): string {
    this.writes.add(slot);
    return this.lazy.has(slot) ? ` m${int(slot)} = true;` : '';
  }

  /** A parameter name for a value the code needs (a table, a bigint, a helper). */
  cap(x: unknown): string {
    let name = this.#capIndex.get(x);
    if (name === undefined) {
      name = `c${this.caps.length}`;
      this.caps.push(x);
      this.#capIndex.set(x, name);
    }
    return name;
  }

  /** Refuses a layout outside the subset; keeps each wire header's window plan. */
  checkLayout(): void {
    const { layout, program: p } = this.input;
    if (layout.numSlots > CODEGEN_LIMITS.slots) no('too many fields');
    if (layout.headers.length > CODEGEN_LIMITS.headers) no('too many headers');
    if (layout.bigSlots > 0) no('fields over 48 bits');
    if (p.header_stacks.length > 0) no('header stacks');
    for (const h of layout.headers) {
      if (h.metadata) continue;
      const plan = planOf(h);
      for (let g = 0; g < plan.n; g++) if (plan.kind[g] === W.GENERAL) no('a field window outside the number shapes');
      this.#plans.set(h.index, plan);
    }
  }

  /** A wire header's window plan. */
  plan(h: HeaderInfo): Plan {
    const plan = this.#plans.get(h.index);
    if (!plan) no('a header without a wire layout');
    return plan;
  }
}
