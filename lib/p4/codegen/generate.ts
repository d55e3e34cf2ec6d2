// The whole program per frame as one generated function: the parser's
// states, checksum verify and update, the pipelines' tables, conditions and
// actions, and the deparse written out in one function, with every header
// field in a JS local instead of a typed-array slot (P4Engine runs it for
// process() and processReused() when the program is in the subset below;
// the closures of the other modules stay the reference, and run the rest).
//
// What it does is the closures' behaviour, shape for shape: the same
// window reads and writes as ./bits.ts, the number path of ./expr.ts
// (compileNum) for conditions and assignments, ./checksum.ts's runs, the
// tables' own lookup structures (read, never copied), the same bounded
// loops (MAX_PARSE_STEPS states, a pipeline's node count + 1 nodes).
// spec/p4/codegen.spec.ts runs both over the same frames and compares.
//
// The source is made of fixed code shapes and integers only: slot, header,
// state, node and action indices, widths, byte offsets, shifts, masks and
// constants, each checked with Number.isSafeInteger before it is written.
// No string from the program (a name, a hexstring) ever reaches the source;
// the tables, bigint masks and constants the code needs are passed in as
// parameters (c0, c1, ...). Anything outside the subset (wide fields,
// stacks, lookahead, value sets, bigint expressions, counters/meters/
// registers in actions, profiles, ...) refuses, and the interpreter runs
// the program as before.

import type { CompiledAction } from '../compile/actions';
import { DROP_PORT } from '../compile/actions';
import { planOf, Plan, W } from '../frame/header-bits';
import { csum16Plan, Csum16Plan, payloadSum, singleRun } from '../compile/csum16';
import type { EngineStats, P4Result } from '../frame/result';
import { ExprContext, NO_ARGS } from '../compile/expr';
import { topoOrder } from '../program/graph';
import { ACCEPT, BUDGET, MAX_PARSE_STEPS, REJECT } from '../compile/parser';
import { END } from '../compile/pipeline';
import { Program, TypeValue, ExpressionValue } from '../program/schema';
import { FieldInfo, HeaderInfo, Layout, NARROW_BITS } from '../program/layout';
import { hexToBig, POW2 } from '../program/numbers';
import { NO_DIGESTS, ParserError } from '../frame/packet-state';
import type { MatchTable } from '../compile/tables/match-table';

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
  readonly slots: { readonly ingressPort: number; readonly packetLength: number; readonly egressSpec: number; readonly egressPort: number; readonly mgid: number; readonly mcastGrp: number };
  /** Some action writes egress_spec (egress_port := egress_spec after ingress). */
  readonly specWritten: boolean;
  readonly maxFrame: number;
  /** The fields the program may write (deparse in place writes only their windows); undefined: every field. */
  readonly written: ReadonlySet<FieldInfo> | undefined;
  readonly stats: EngineStats;
  /** A view of the engine's output buffer of this length (GenMode.ENGINE_BUFFER). */
  readonly view: (len: number) => Buffer;
}

export type Generated = { readonly run: GeneratedRun; readonly source: string } | { readonly refused: string };

/** Limits of the subset: past them the interpreter runs the program (the source stays small). */
export const CODEGEN_LIMITS = { slots: 256, headers: 64, states: 64, nodes: 64, actionsPerTable: 64, source: 1 << 19 } as const;

/** Thrown (and caught in generateProgram) for a program outside the subset. */
class Unsupported extends Error {}

function no(why: string): never {
  throw new Unsupported(why);
}

/** An integer for the source text; anything else refuses the program. */
function int(n: unknown): string {
  if (typeof n !== 'number' || !Number.isSafeInteger(n)) no('a value that is not a safe integer');
  return n < 0 ? `(${n})` : String(n);
}

/** Header validity, field and header-offset locals (named by index only). */
const f = (slot: number): string => `f${int(slot)}`;
const v = (header: number): string => `v${int(header)}`;
const o = (header: number): string => `o${int(header)}`;

/**
 * Window g of a header's plan as the read and the write both take it: its
 * length, first field, field count and first field's slot, and `by(k)`, the
 * source text of its k-th byte in `b` at `base`.
 */
function windowOf(plan: Plan, g: number, b: string, base: string): { l: number; f0: number; c: number; s0: number; by: (k: number) => string } {
  const f0 = plan.first[g]!;
  const at = plan.at[g]!;
  return { l: plan.len[g]!, f0, c: plan.count[g]!, s0: plan.slot[f0]!, by: (k) => `${b}[${base} + ${int(at + k)}]` };
}

/** What an expression may read: action data of these widths through `args` (a local name of ours). */
interface NumCtx {
  readonly widths: readonly number[] | undefined;
  readonly args: string;
}

/** The ExprContext-free lookups of a field reference (the load already resolved it). */
function fieldOf(layout: Layout, ref: unknown): FieldInfo | undefined {
  if (!Array.isArray(ref) || ref.length !== 2) return undefined;
  return layout.headerByName.get(ref[0] as string)?.byName.get(ref[1] as string);
}

class Gen {
  readonly #caps: unknown[] = [];
  readonly #capIndex = new Map<unknown, string>();
  readonly #in: CodegenInput;
  readonly #layout: Layout;
  readonly #plans = new Map<number, Plan>();
  /** Each number slot's field width. */
  readonly #widths: number[] = [];
  /**
   * Every field's value stays below 2^width: true unless the standard fields
   * the engine writes regardless of their declared width (ingress_port =
   * port & 0x1ff, packet_length, egress_spec = 511 on drop, egress_port =
   * egress_spec) are declared narrower than those values, and so may carry
   * them into other fields.
   */
  readonly #withinWidths: boolean;
  /**
   * Wire fields read only by the deparse (never by an expression, key,
   * checksum, digest or copy): they are not extracted; their bytes stay in
   * the frame until an action writes the field (its `m` local then says the
   * local holds the value). Found by a first build (reads below).
   */
  readonly #lazy: ReadonlySet<number>;
  /** The number slots the code reads outside extract and deparse. */
  readonly reads = new Set<number>();

  constructor(input: CodegenInput, lazy: ReadonlySet<number> = new Set()) {
    this.#in = input;
    this.#layout = input.layout;
    this.#lazy = lazy;
    for (const h of input.layout.headers) for (const fi of h.fields) this.#widths[fi.slot] = fi.width;
    const sl = input.slots;
    const wide = (slot: number, bits: number) => slot < 0 || this.#widths[slot]! >= bits;
    const spec = sl.egressSpec < 0 ? 0 : Math.max(9, this.#widths[sl.egressSpec]!);
    this.#withinWidths = wide(sl.ingressPort, 9) && wide(sl.packetLength, 32) && wide(sl.egressSpec, 9) && (!input.specWritten || wide(sl.egressPort, spec));
  }

  /** A field's local, read. */
  #r(slot: number): string {
    this.reads.add(slot);
    return f(slot);
  }

  /** The number slots the code may write, and the headers whose validity it may change (after the parser). */
  readonly #writes = new Set<number>();
  readonly #validWrites = new Set<number>();

  /** After a write of a field (recorded): a lazy field's local now holds its value. */
  #m(slot: number): string {
    this.#writes.add(slot);
    return this.#lazy.has(slot) ? ` m${int(slot)} = true;` : '';
  }

  /** A parameter name for a value the code needs (a table, a bigint, a helper). */
  cap(x: unknown): string {
    let name = this.#capIndex.get(x);
    if (name === undefined) {
      name = `c${this.#caps.length}`;
      this.#caps.push(x);
      this.#capIndex.set(x, name);
    }
    return name;
  }

  build(): { run: GeneratedRun; source: string } {
    const { program: p, layout, slots: sl } = this.#in;
    this.#checkLayout();
    let src = 'return function run(frame, port, mode, r) {\n';
    src += `${this.cap(this.#in.stats)}.frames++;\nconst len = frame.length;\n`;
    src += `if (len > ${int(this.#in.maxFrame)}) { ${this.#drop('too-long', '0')} }\n`;
    const decl: string[] = [];
    for (let i = 0; i < layout.numSlots; i++) decl.push(`${f(i)} = 0`);
    layout.headers.forEach((h) => decl.push(`${v(h.index)} = ${h.metadata ? 1 : 0}`, `${o(h.index)} = -1`));
    for (const slot of this.#lazy) decl.push(`m${int(slot)} = false`);
    src += `let ${decl.join(', ')};\n`;
    src += `let off = 0, perr = 0, dropped = false, ex = false, cerr = false, dg = ${this.cap(NO_DIGESTS)};\n`;
    if (sl.ingressPort >= 0) src += `${f(sl.ingressPort)} = port & 0x1ff;\n`;
    if (sl.packetLength >= 0) src += `${f(sl.packetLength)} = len;\n`;
    src += this.#parser();
    src += `if (pr === ${int(BUDGET)}) { ${this.cap(this.#in.stats)}.budgetDrops++; ${this.#drop('parser-budget', 'perr')} }\n`;
    src += `if (pr !== ${int(ACCEPT)}) ${this.cap(this.#in.stats)}.parserErrors++;\n`;
    // the pipelines first (what they may write is known then), the checksums around them
    let mid = this.#in.ingress >= 0 ? this.#pipeline(this.#in.ingress) : '';
    const es = sl.egressSpec >= 0 ? ` || ${this.#r(sl.egressSpec)} === ${int(DROP_PORT)}` : '';
    mid += `if (dropped${es}) { ${this.#drop('program', 'perr')} }\n`;
    if (sl.egressPort >= 0 && sl.egressSpec >= 0 && this.#in.specWritten) mid += `${f(sl.egressPort)} = ${this.#r(sl.egressSpec)};${this.#m(sl.egressPort)}\n`;
    mid += 'ex = false;\n';
    if (this.#in.egress >= 0) mid += this.#pipeline(this.#in.egress);
    mid += `if (dropped) { ${this.#drop('program', 'perr')} }\n`;
    const { verify, update, decl: sums } = this.#checksums();
    src += sums + verify + mid + update;
    src += this.#deparse(p);
    const ep = sl.egressPort >= 0 ? this.#r(sl.egressPort) : '0';
    const mg = `(${sl.mgid >= 0 ? this.#r(sl.mgid) : '0'} || ${sl.mcastGrp >= 0 ? this.#r(sl.mcastGrp) : '0'})`;
    src += `r.dropped = false; r.reason = undefined; r.egressPort = ${ep}; r.multicastGroup = ${mg}; r.parserError = perr; r.checksumError = cerr; r.digests = dg;\n};`;
    if (src.length > CODEGEN_LIMITS.source) no('the generated source is too long');
    const names = this.#caps.map((_, i) => `c${i}`);
    const run = new Function(...names, src)(...this.#caps) as GeneratedRun;
    return { run, source: src };
  }

  /** The drop of the interpreter's processReused (stats.dropped counted; digests so far kept). */
  #drop(reason: 'too-long' | 'parser-budget' | 'program', parserError: string): string {
    const dg = reason === 'too-long' ? this.cap(NO_DIGESTS) : 'dg';
    return `${this.cap(this.#in.stats)}.dropped++; r.frame = undefined; r.dropped = true; r.reason = '${reason}'; r.egressPort = 0; r.multicastGroup = 0; r.parserError = ${parserError}; r.checksumError = false; r.digests = ${dg}; return;`;
  }

  #checkLayout(): void {
    const { layout, program: p } = this.#in;
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

  // ---- expressions: compileNum's subset, as source ----

  /** The number form of a value, as compileNum (./expr.ts) computes it; refuses where compileNum has none. */
  num(tv: unknown, ctx: NumCtx, depth = 0): string {
    if (depth > 16 || tv === null || typeof tv !== 'object') no('an expression off the number path');
    const { type, value } = tv as TypeValue;
    const layout = this.#layout;
    if (type === 'field') {
      const hv = layout.hiddenValid(value);
      if (hv !== undefined) return v(hv);
      const fi = fieldOf(layout, value);
      if (!fi || fi.width > NARROW_BITS) no('a field over 32 bits in an expression');
      return this.#r(fi.slot);
    }
    if (type === 'runtime_data' || type === 'local') {
      const w = typeof value === 'number' ? ctx.widths?.[value] : undefined;
      if (w === undefined || w > NARROW_BITS) no('action data over 32 bits in an expression');
      return `${ctx.args}.num[${int(value)}]`;
    }
    if (type === 'hexstr' && typeof value === 'string' && /^-?0x[0-9a-fA-F]+$/.test(value)) {
      const c = hexToBig(value);
      if (c >= 1n << 32n || c <= -(1n << 32n)) no('a constant of 2^32 or more in an expression');
      return int(Number(c));
    }
    if (type === 'bool' && typeof value === 'boolean') return value ? '1' : '0';
    if (type !== 'expression' || value === null || typeof value !== 'object') no('an operand off the number path');
    const e = value as ExpressionValue;
    if (e.op === 'valid') {
      const rr = e.right as TypeValue | null;
      const h = rr && rr.type === 'header' && typeof rr.value === 'string' ? layout.headerByName.get(rr.value) : undefined;
      if (!h) no('valid() of no header');
      return v(h.index);
    }
    if (e.op === 'not' || e.op === 'd2b' || e.op === 'b2d') {
      const x = this.num(e.right, ctx, depth + 1);
      if (e.op === 'b2d') return x;
      return e.op === 'not' ? `(${x} === 0 ? 1 : 0)` : `(${x} !== 0 ? 1 : 0)`;
    }
    const op = NUM_OPS.get(e.op);
    if (op === undefined) no('an operator off the number path');
    const l = this.num(e.left, ctx, depth + 1);
    const r = this.num(e.right, ctx, depth + 1);
    switch (e.op) {
      case '+':
      case '-':
        return `(${l} ${op} ${r})`;
      case 'and':
        return `(${l} !== 0 && ${r} !== 0 ? 1 : 0)`;
      case 'or':
        return `(${l} !== 0 || ${r} !== 0 ? 1 : 0)`;
      default:
        return `(${l} ${op} ${r} ? 1 : 0)`;
    }
  }

  // ---- header windows (./bits.ts's shapes) ----

  #plan(h: HeaderInfo): Plan {
    const plan = this.#plans.get(h.index);
    if (!plan) no('a header without a wire layout');
    return plan;
  }

  /** Reads window g of a header at `b[base + at]` into the field locals. */
  #readWindow(plan: Plan, g: number, b: string, base: string): string {
    const { l, f0, c, s0, by } = windowOf(plan, g, b, base);
    const word = (n: number): string => {
      switch (n) {
        case 1:
          return by(0);
        case 2:
          return `((${by(0)} << 8) | ${by(1)})`;
        case 3:
          return `((${by(0)} << 16) | (${by(1)} << 8) | ${by(2)})`;
        case 4:
          return `(((${by(0)} << 24) | (${by(1)} << 16) | (${by(2)} << 8) | ${by(3)}) >>> 0)`;
        default:
          return no('a window of more than 4 bytes');
      }
    };
    if (c === 1 && this.#lazy.has(s0)) return `m${int(s0)} = false;\n`; // its bytes stay in the frame
    if (plan.kind[g] === W.WORD && c === 1 && plan.shift[f0] === 0) return `${f(s0)} = ${word(l)};\n`;
    if (plan.kind[g] === W.WORD) {
      let s = `{ const w = ${word(l)};`;
      for (let i = f0; i < f0 + c; i++) s += ` ${f(plan.slot[i]!)} = ((w >>> ${int(plan.shift[i])}) & ${int(plan.mask[i])}) >>> 0;`;
      return `${s} }\n`;
    }
    if (plan.kind[g] === W.BYTES && l === 6) {
      return `${f(s0)} = ((${by(0)} << 8) | ${by(1)}) * 0x100000000 + (((${by(2)} << 24) | (${by(3)} << 16) | (${by(4)} << 8) | ${by(5)}) >>> 0);\n`;
    }
    if (plan.kind[g] === W.BYTES) {
      let x = by(0);
      for (let i = 1; i < l; i++) x = `(${x} * 256 + ${by(i)})`;
      return `${f(s0)} = ${x};\n`;
    }
    return no('a field window outside the number shapes');
  }

  /** Writes window g of a header from the field locals to `b[base + at]`. */
  #writeWindow(plan: Plan, g: number, b: string, base: string): string {
    const { l, f0, c, s0, by } = windowOf(plan, g, b, base);
    const word = (n: number, w: string): string => {
      switch (n) {
        case 1:
          return `${by(0)} = ${w};`;
        case 2:
          return `${by(0)} = ${w} >>> 8; ${by(1)} = ${w};`;
        case 3:
          return `${by(0)} = ${w} >>> 16; ${by(1)} = ${w} >>> 8; ${by(2)} = ${w};`;
        case 4:
          return `${by(0)} = ${w} >>> 24; ${by(1)} = ${w} >>> 16; ${by(2)} = ${w} >>> 8; ${by(3)} = ${w};`;
        default:
          return no('a window of more than 4 bytes');
      }
    };
    if (plan.kind[g] === W.WORD && c === 1 && plan.shift[f0] === 0) return `{ const w = ${f(s0)}; ${word(l, 'w')} }\n`;
    if (plan.kind[g] === W.WORD) {
      const parts: string[] = [];
      for (let i = f0; i < f0 + c; i++) parts.push(`(${f(plan.slot[i]!)} << ${int(plan.shift[i])})`);
      return `{ const w = ${parts.join(' | ')}; ${word(l, 'w')} }\n`;
    }
    if (plan.kind[g] === W.BYTES) {
      // ./bits.ts's bytes (the low 32 bits by shifts from the last byte back, the rest above them):
      // for a value 0 <= x < 2^48, x >>> 0 is x mod 2^32 and (x / 2^32) >>> 0 its floor above
      let s = `{ const x = ${f(s0)}; const lo = x >>> 0; const hi = (x / 4294967296) >>> 0;`;
      let i = l - 1;
      for (let sh = 0; sh < 32 && i >= 0; sh += 8, i--) s += ` ${by(i)} = lo >>> ${int(sh)};`;
      for (let sh = 0; i >= 0; sh += 8, i--) s += ` ${by(i)} = hi >>> ${int(sh)};`;
      return `${s} }\n`;
    }
    return no('a field window outside the number shapes');
  }

  // ---- the parser (./parser.ts's number path) ----

  #parser(): string {
    const { program: p, layout } = this.#in;
    const parser = p.parsers[0];
    if (!parser || p.parsers.length !== 1) no('not one parser');
    if (parser.parse_states.length > CODEGEN_LIMITS.states) no('too many parse states');
    const index = new Map<string, number>();
    parser.parse_states.forEach((s, i) => index.set(s.name, i));
    const init = index.get(parser.init_state);
    if (init === undefined) no('no initial parse state');
    const bodies: string[] = [];
    const edges: number[][] = [];
    parser.parse_states.forEach((s, si) => {
      // `brk` leaves the state's code: the loop form's switch, or the straight-line form's labelled block
      const brk = `BRK${si}`;
      let body = '';
      for (const op of s.parser_ops) {
        const params = op.parameters as { type?: string; value?: unknown }[];
        switch (op.op) {
          case 'extract': {
            const prm = params[0];
            if (params.length !== 1 || !prm || prm.type !== 'regular') no('an extract other than of a regular header');
            const h = layout.headerByName.get(prm.value as string);
            if (!h || h.metadata) no('an extract of no wire header');
            const plan = this.#plan(h);
            body += `if (off + ${int(h.bytes)} > len) { perr = ${int(ParserError.PacketTooShort)}; s = ${int(REJECT)}; ${brk} }\n`;
            body += '{ const p = off;\n';
            for (let g = 0; g < plan.n; g++) body += this.#readWindow(plan, g, 'frame', 'p');
            body += `${v(h.index)} = 1; ${o(h.index)} = p; off = p + ${int(h.bytes)}; }\n`;
            break;
          }
          case 'set': {
            if (params.length !== 2) no('a malformed set');
            const dst = fieldOf(layout, params[0]!.value);
            if (!dst || dst.wide) no('a set of no number field');
            // compileValue's bigint, stored with & mask: the same as the number wrapped to the width
            const m = int(POW2[dst.width]);
            body += `{ const x = ${this.num(params[1], { widths: undefined, args: 'NO' })} % ${m}; ${f(dst.slot)} = x < 0 ? x + ${m} : x;${this.#m(dst.slot)} }\n`;
            break;
          }
          case 'verify': {
            if (params.length !== 2) no('a malformed verify');
            body += `if (${this.num(params[0], { widths: undefined, args: 'NO' })} === 0) { perr = ${int(ParserError.VerifyFailed)}; s = ${int(REJECT)}; ${brk} }\n`;
            break;
          }
          default:
            no('a parser operation outside the subset');
        }
      }
      const t = this.#transition(s, index);
      bodies.push(body + t.src);
      edges.push(t.next);
    });
    const order = topoOrder(init, edges);
    if (order) {
      // acyclic: each reachable state once, in an order where every transition goes forward, so a
      // frame visits at most all of them (<= MAX_PARSE_STEPS: the budget cannot run out)
      let src = `let s = ${int(init)};\n`;
      for (const si of order) src += `st${int(si)}: if (s === ${int(si)}) {\n${bodies[si]!.split(`BRK${si}`).join(`break st${int(si)};`)}}\n`;
      return `${src}const pr = s;\n`;
    }
    let cases = '';
    bodies.forEach((b, si) => {
      cases += `case ${int(si)}: {\n${b.split(`BRK${si}`).join('break;')}break; }\n`;
    });
    return `let pr = ${int(BUDGET)};
parse: for (let s = ${int(init)}, steps = 0; steps < ${int(MAX_PARSE_STEPS)}; steps++) {
switch (s) {
${cases}default: pr = s; break parse;
}
if (s < 0) { pr = s; break; }
}
`;
  }

  /** A state's transition on the number path (fields only: a key of <= 32 bits, or <= 48 without masks). */
  #transition(s: Program['parsers'][number]['parse_states'][number], index: Map<string, number>): { src: string; next: number[] } {
    const layout = this.#layout;
    let key = '';
    let keyBits = 0;
    for (const k of s.transition_key) {
      if (k.type !== 'field') no('a transition key other than fields');
      const fi = fieldOf(layout, k.value);
      if (!fi || fi.wide) no('a transition key of no number field');
      const bytes = Math.ceil(fi.width / 8);
      key = key === '' ? this.#r(fi.slot) : `(${key} * ${int(POW2[bytes * 8])} + ${this.#r(fi.slot)})`;
      keyBits += bytes * 8;
    }
    const arms = s.transitions.map((t) => {
      const kind = t.type ?? (t.value === 'default' ? 'default' : 'hexstr');
      const next = t.next_state === null ? ACCEPT : index.get(t.next_state);
      if (next === undefined) no('no such parse state');
      const mask = t.mask === null || t.mask === undefined ? null : hexToBig(t.mask);
      if (kind === 'default') return { kind: 0, value: 0n, mask: null, next };
      if (kind !== 'hexstr' || t.value === null || !/^0x[0-9a-fA-F]+$/.test(t.value)) no('a transition outside the subset');
      return { kind: 1, value: BigInt(t.value), mask, next };
    });
    if (!(keyBits <= NARROW_BITS || (keyBits <= 48 && arms.every((a) => a.mask === null)))) no('a transition key off the number path');
    const next = arms.map((a) => a.next).filter((n) => n >= 0);
    if (arms.length === 0) return { src: `s = ${int(ACCEPT)};\n`, next };
    let src = key === '' ? '' : `{ const key = ${key};\n`;
    let closed = false;
    let n = 0;
    for (const a of arms) {
      if (a.kind === 0) {
        src += `${n > 0 ? 'else ' : ''}s = ${int(a.next)};\n`;
        closed = true;
        break;
      }
      if (key === '') no('a value transition without a key');
      if (a.mask === null) src += `${n > 0 ? 'else ' : ''}if (key === ${int(Number(a.value))}) s = ${int(a.next)};\n`;
      else {
        if ((a.value & a.mask) >> 32n !== 0n) continue; // never matches (./parser.ts kind 3)
        src += `${n > 0 ? 'else ' : ''}if (((key & ${int(Number(a.mask & 0xffffffffn) | 0)}) >>> 0) === ${int(Number(a.value & a.mask))}) s = ${int(a.next)};\n`;
      }
      n++;
    }
    if (!closed) src += `${n > 0 ? 'else ' : ''}{ perr = ${int(ParserError.NoMatch)}; s = ${int(REJECT)}; }\n`;
    return { src: key === '' ? src : `${src}}\n`, next };
  }

  // ---- checksums (./checksum.ts's runs, as compile.ts applies them) ----

  #checksums(): { verify: string; update: string; decl: string } {
    const { program: p, layout } = this.#in;
    const names = new Set<string>();
    for (const c of p.calculations) {
      if (names.has(c.name)) no('two calculations of one name');
      names.add(c.name);
    }
    const ctx: ExprContext = { layout, runtimeData: 0, parser: false };
    let verify = '';
    let update = '';
    let decl = '';
    for (const c of p.checksums) {
      const target = fieldOf(layout, c.target);
      if (c.update !== false && target) this.#m(target.slot); // an update writes it before later checksums read it
    }
    for (const [ci, c] of p.checksums.entries()) {
      const calc = p.calculations.find((x) => x.name === c.calculation);
      if (!calc || c.type !== 'generic') no('a checksum outside the subset');
      const plan = csum16Plan(calc, ctx);
      if (!plan) no('a checksum off the number path');
      const target = fieldOf(layout, c.target);
      if (!target || target.wide) no('a checksum into no number field');
      const h = target.header;
      const sum = this.#csum(plan);
      const t = f(target.slot);
      const tr = c.verify !== false ? this.#r(target.slot) : t;
      const mt = this.#m(target.slot);
      if (target.width >= 16 && !c.if_cond && c.verify !== false && c.update !== false && this.#splits(plan, h)) {
        // verify sums the inputs nothing after the parser writes once; update adds the others to it
        const ss = `ss${int(ci)}`;
        decl += `let ${ss} = 0;\n`;
        verify += `if (${v(h)} === 1) { let s = 0;${this.#intTerms(plan, false)} ${ss} = s;${this.#intTerms(plan, true)}${INT_FOLD} if (x !== ${tr}) cerr = true; }\n`;
        update += `if (${v(h)} === 1) { let s = ${ss};${this.#intTerms(plan, true)}${INT_FOLD} ${t} = x;${mt} }\n`;
        continue;
      }
      if (target.width >= 16 && !c.if_cond) {
        if (c.verify !== false) verify += `if (${v(h)} === 1) { ${sum} if (x !== ${tr}) cerr = true; }\n`;
        if (c.update !== false) update += `if (${v(h)} === 1) { ${sum} ${t} = x;${mt} }\n`;
        continue;
      }
      const m = int(2 ** Math.min(target.width, 16));
      const cond = c.if_cond ? ` && ${this.num(c.if_cond, { widths: undefined, args: 'NO' })} !== 0` : '';
      if (c.verify !== false) verify += `if (${v(h)} === 1${cond}) { ${sum} if (x % ${m} !== ${tr}) cerr = true; }\n`;
      if (c.update !== false) update += `if (${v(h)} === 1${cond}) { ${sum} ${t} = x % ${m};${mt} }\n`;
    }
    return { verify, update, decl };
  }

  /**
   * Whether verify's sum can be kept for update: the int32 form, the target's
   * and every run's header validity unchanged after the parser (so both sums
   * cover the same runs), and only some inputs writable in between.
   */
  #splits(plan: Csum16Plan, target: number): boolean {
    if (!this.#intForm(plan) || this.#validWrites.has(target)) return false;
    return plan.runs.every((r) => r.header < 0 || !this.#validWrites.has(r.header));
  }

  /** The int32 form's terms (see #csum): those of inputs nothing writes after the parser (with the constants), or the others. */
  #intTerms(plan: Csum16Plan, written: boolean): string {
    const residue = (k: number) => (k === 0 ? 0 : k % 65535 === 0 ? 65535 : k % 65535);
    let src = '';
    for (const run of plan.runs) {
      const terms = run.slots.flatMap((sl, i) => (this.#writes.has(sl) === written ? [` + ${this.#intTerm(sl, run.muls[i]!)}`] : [])).join('');
      const k = written ? '' : int(residue(run.constant));
      if (terms === '' && (written || run.constant === 0)) continue;
      if (run.header < 0) src += ` s += ${k || '0'};`;
      else src += ` if (${v(run.header)} !== 0) s += ${k || '0'}${terms};`;
    }
    return src;
  }

  /** One input's int32 term: v * 2^s, or its two 16-bit halves added when it needs more than 16 bits. */
  #intTerm(slot: number, mul: number): string {
    const sh = Math.round(Math.log2(mul));
    const x = sh === 0 ? this.#r(slot) : `(${this.#r(slot)} << ${int(sh)})`;
    return this.#widths[slot]! + sh <= 16 ? x : `((${x} >>> 16) + (${x} & 0xffff))`;
  }

  /** The int32 form applies: every field within its width, no payload, every term within 32 bits. */
  #intForm(plan: Csum16Plan): boolean {
    const bits = (mul: number) => Math.round(Math.log2(mul));
    return (
      this.#withinWidths &&
      plan.phase < 0 &&
      plan.runs.length <= 64 &&
      plan.runs.every((r) => r.slots.length <= 64 && r.split.every((x) => !x) && r.slots.every((sl, i) => this.#widths[sl]! + bits(r.muls[i]!) <= 32))
    );
  }

  /**
   * Statements leaving the folded, complemented sum in a const `x`: the
   * value ./checksum.ts computes. In int32 arithmetic when it can: the
   * folded result depends only on the sum modulo 65535 and on whether the
   * sum is 0 (the fold keeps the residue and ends in 1..0xffff for a
   * positive sum), so each term v * 2^s may be replaced by its two 16-bit
   * halves added (2^16 = 1 modulo 65535; zero only when v is), and the
   * constant by its residue (kept non-zero), when every term fits 32 bits;
   * the sum then stays below 2^31 and two folds finish it.
   */
  #csum(plan: Csum16Plan): string {
    const fold = ' while (s > 0xffff) { const q = Math.floor(s / 0x10000); s = s - q * 0x10000 + q; } const x = ~s & 0xffff;';
    if (this.#intForm(plan)) return `let s = 0;${this.#intTerms(plan, false)}${this.#intTerms(plan, true)}${INT_FOLD}`;
    const term = (slot: number, mul: number, split: boolean): string =>
      split
        ? `(Math.floor(${this.#r(slot)} / 4294967296) + (${f(slot)} - Math.floor(${f(slot)} / 4294967296) * 4294967296)) * ${int(mul)}`
        : `${this.#r(slot)} * ${int(mul)}`;
    let s: string;
    const single = singleRun(plan);
    if (single) {
      const terms = single.slots.map((sl, i) => term(sl, single.muls[i]!, false)).join(' + ');
      s = `let s = ${int(single.constant)}; if (${v(single.header)} !== 0) s = s + ${terms};`;
    } else {
      s = 'let s = 0;';
      for (const run of plan.runs) {
        const terms = run.slots.map((sl, i) => ` + ${term(sl, run.muls[i]!, run.split[i]!)}`).join('');
        s += run.header < 0 ? ` s += ${int(run.constant)};` : ` if (${v(run.header)} !== 0) s += ${int(run.constant)}${terms};`;
      }
      if (plan.phase >= 0) s += ` s += ${this.cap(payloadSum)}(frame, off, ${plan.phase === 8 ? 'true' : 'false'});`;
    }
    return `${s}${fold}`;
  }

  // ---- pipelines (./pipeline.ts's nodes) ----

  #pipeline(pi: number): string {
    const pl = this.#in.program.pipelines[pi]!;
    const index = new Map<string, number>();
    const names = [...pl.tables.map((t) => t.name), ...pl.conditionals.map((c) => c.name), ...(pl.action_calls ?? []).map((c) => c.name)];
    names.forEach((n, i) => index.set(n, i));
    if (names.length > CODEGEN_LIMITS.nodes) no('too many control nodes');
    if ((pl.action_profiles ?? []).length > 0) no('action profiles');
    const next = (n: string | null | undefined): number => {
      if (n === null || n === undefined) return END;
      const i = index.get(n);
      if (i === undefined) no('no such control node');
      return i;
    };
    const bodies: string[] = [];
    const edges: number[][] = [];
    pl.tables.forEach((t) => {
      const tb = this.#table(t, next);
      bodies.push(tb.src);
      edges.push(tb.next);
    });
    pl.conditionals.forEach((c) => {
      const cond = this.num(c.expression, { widths: undefined, args: 'NO' });
      const [tn, fn] = [next(c.true_next), next(c.false_next)];
      bodies.push(`nd = ${cond} !== 0 ? ${int(tn)} : ${int(fn)};\n`);
      edges.push([tn, fn]);
    });
    (pl.action_calls ?? []).forEach((c) => {
      const ca = [...this.#in.actions.values()].find((a) => a.id === c.action_id);
      if (!ca || ca.params.length > 0) no('an action call outside the subset');
      const n = next(c.next_node);
      const act = this.#action(ca, this.cap(NO_ARGS));
      bodies.push(`${act.src}nd = ${int(n)};\n${act.exits ? `if (ex) nd = ${int(END)};\n` : ''}`);
      edges.push([n]);
    });
    const init = next(pl.init_table);
    const order = init === END ? [] : topoOrder(init, edges.map((e) => e.filter((n) => n !== END)));
    if (order) {
      // acyclic (every well-formed pipeline): each node once, in an order where every edge goes forward,
      // so at most all of them run (the budget, the node count + 1, cannot run out); an exit ends it
      let src = `let nd = ${int(init)};\n`;
      for (const ni of order) src += `if (nd === ${int(ni)}) {\n${bodies[ni]!}}\n`;
      return `{ ${src}}\n`;
    }
    let cases = '';
    bodies.forEach((b, ni) => {
      cases += `case ${int(ni)}: {\n${b}break; }\n`;
    });
    return `for (let nd = ${int(init)}, steps = 0; nd !== ${int(END)} && steps < ${int(names.length + 1)} && !ex; steps++) {
switch (nd) {
${cases}default: nd = ${int(END)};
}
}
`;
  }

  /** A table node: the lookup, the direct counter, the entry's or the default's action by index, the next node. */
  #table(t: Program['pipelines'][number]['tables'][number], next: (n: string | null | undefined) => number): { src: string; next: number[] } {
    const mt = this.#in.tables.get(t.name);
    if (!mt || mt.profile || mt.meter) no('a table outside the subset');
    const view = mt.numberView();
    if (!view) no('a table off the number path');
    const T = this.cap(mt);
    const nt = t.next_tables;
    const hitMiss = nt.has('__HIT__') || nt.has('__MISS__');
    const onHit = hitMiss ? next(nt.get('__HIT__')) : END;
    const onMiss = hitMiss ? next(nt.get('__MISS__')) : END;
    const baseNext = next(t.base_default_next);
    const byAction = new Map<CompiledAction, number>();
    const possible = new Set<CompiledAction>(mt.actions.values());
    if (mt.defaultEntry) possible.add(mt.defaultEntry.action); // the JSON's default may name any action
    if (possible.size > CODEGEN_LIMITS.actionsPerTable) no('too many actions in a table');
    for (const a of possible) byAction.set(a, baseNext);
    if (!hitMiss) {
      for (const [a, n] of nt) {
        const ca = mt.actions.get(a);
        if (!ca) no('next_tables names no action of the table');
        byAction.set(ca, next(n));
      }
    }
    let src = `let e;\n${this.#lookup(mt, view, T)}`;
    if (mt.withCounters) src += 'if (e !== undefined) { e.packets++; e.bytes += len; }\n';
    src += `const c = e !== undefined ? e : ${T}.defaultEntry;\n`;
    src += `if (c === undefined) nd = ${int(hitMiss ? onMiss : baseNext)};\nelse {\nconst a = c.args;\nswitch (c.action.index) {\n`;
    let exits = false;
    for (const ca of possible) {
      const to = hitMiss ? `e !== undefined ? ${int(onHit)} : ${int(onMiss)}` : int(byAction.get(ca));
      const act = this.#action(ca, 'a');
      exits ||= act.exits;
      src += `case ${int(ca.index)}: {\n${act.src}nd = ${to}; break; }\n`;
    }
    src += `default: throw new Error('p4: an action this table cannot run');\n}\n}\n`;
    if (exits) src += `if (ex) nd = ${int(END)};\n`;
    const nexts = hitMiss ? [onHit, onMiss] : [baseNext, ...byAction.values()];
    return { src, next: nexts };
  }

  /** The lookup into `e`: one-part number tables written out as MatchTable.directNode does, the others through lookupNumbers. */
  #lookup(mt: MatchTable, view: NonNullable<ReturnType<MatchTable['numberView']>>, T: string): string {
    const keys = mt.keys;
    if (keys.length === 0) return '';
    const k0 = keys[0]!;
    if (keys.length === 1 && k0.slot >= 0 && view.mode !== 'ordered') {
      const sm = this.cap(view.small);
      const sk = this.cap(view.small.keys);
      const se = this.cap(view.small.entries);
      const i32 = view.int32;
      // the short array's scan written out (it holds at most small.keys.length entries): no loop, so
      // no interrupt check per entry, and the first match wins as in the loop
      const scan = (match: (i: string) => string): string =>
        Array.from({ length: view.small.keys.length }, (_, i) => `if (n0 > ${int(i)} && ${match(int(i))}) e = ${se}[${int(i)}];`).join('\nelse ');
      const x = this.#r(k0.slot);
      if (view.mode === 'exact') {
        return `{ const k = ${i32 ? `${x} | 0` : x}; const n0 = ${sm}.n;
if (n0 < 0) e = ${this.cap(view.exact)}.get(k);
else {\n${scan((i) => `${i32 ? this.cap(view.small.pre) : sk}[${i}] === k`)} } }
`;
      }
      const ps = this.cap(view.prefixes);
      const q = (x: string) => (i32 ? `${x} | 0` : x);
      // the short array's entries: for an int32 table (the key below 2^32) the prefix test is
      // ((k ^ value) & mask) === 0 on int32s, the same match as floor(k / 2^(w - len)) === prefix
      const prefix = i32 && this.#withinWidths
        ? `{ const pre = ${this.cap(view.small.pre)}; const msk = ${this.cap(view.small.msk)};\n${scan((i) => `((k ^ pre[${i}]) & msk[${i}]) === 0`)} }`
        : `{ const dv = ${this.cap(view.small.divs)};\n${scan((i) => `(${q(`Math.floor(k / dv[${i}])`)}) === ${sk}[${i}]`)} }`;
      return `{ const k = ${x}; const n0 = ${sm}.n;
if (n0 >= 0) ${prefix}
else for (let j = 0; j < ${ps}.length; j++) { const pm = ${ps}[j]; const q = Math.floor(k / pm.div); e = pm.map.get(${q('q')}); if (e !== undefined) break; } }
`;
    }
    const kv = this.cap(new Float64Array(keys.length));
    let src = '';
    keys.forEach((k, i) => {
      let x: string;
      if (k.validHeader >= 0) x = v(k.validHeader);
      else if (k.fieldSlot < 0) no('a key part of no number field');
      else if (k.numMask !== undefined) x = `((${this.#r(k.fieldSlot)} & ${int(k.numMask)}) >>> 0)`;
      else x = this.#r(k.fieldSlot);
      src += `${kv}[${int(i)}] = ${x};\n`;
    });
    return `${src}e = ${T}.lookupNumbers(${kv});\n`;
  }

  // ---- actions (./actions.ts's primitives on the number path) ----

  /** An action's primitives on the locals, its data read through `args`; an exit ends it (nothing after runs). */
  #action(ca: CompiledAction, args: string): { src: string; exits: boolean } {
    const layout = this.#layout;
    const a = this.#in.program.actions[ca.index];
    if (!a) no('an action of no index');
    const widths = a.runtime_data.map((r) => r.bitwidth);
    const ctx: NumCtx = { widths, args };
    let src = '';
    for (const pr of a.primitives) {
      const ps = pr.parameters;
      const dest = (i: number): FieldInfo => {
        const tv = ps[i];
        const fi = tv && tv.type === 'field' ? fieldOf(layout, tv.value) : undefined;
        if (!fi || fi.wide) no('a destination of no number field');
        return fi;
      };
      const header = (i: number): HeaderInfo => {
        const tv = ps[i];
        const h = tv && tv.type === 'header' ? layout.headerByName.get(tv.value as string) : undefined;
        if (!h) no('no such header');
        return h;
      };
      switch (pr.op) {
        case 'modify_field':
        case 'assign': {
          if (ps.length !== 2) no('a masked modify_field');
          src += this.#assign(dest(0), ps[1]!, ctx);
          break;
        }
        case 'add_to_field':
        case 'subtract_from_field': {
          if (ps.length !== 2) no('a malformed add_to_field');
          const dst = dest(0);
          const x = this.num(ps[1], ctx); // refuses where compileNum has no number form (the bigint path)
          const sg = pr.op === 'add_to_field' ? 1 : -1;
          const m = POW2[dst.width]!;
          const t = this.#r(dst.slot);
          const c = ps[1]!.type === 'hexstr' ? sg * Number(hexToBig(ps[1]!.value as string)) : NaN;
          if (Math.abs(c) < m) src += `{ const r = ${t} + ${int(c)}; ${t} = r < 0 ? r + ${int(m)} : r >= ${int(m)} ? r - ${int(m)} : r;${this.#m(dst.slot)} }\n`;
          else src += `{ const r = (${t} + ${int(sg)} * ${x}) % ${int(m)}; ${t} = r < 0 ? r + ${int(m)} : r;${this.#m(dst.slot)} }\n`;
          break;
        }
        case 'drop':
        case 'mark_to_drop':
        case 'mark_for_drop': {
          const es = this.#in.slots.egressSpec;
          src += `dropped = true;${es >= 0 ? ` ${f(es)} = ${int(DROP_PORT)};${this.#m(es)}` : ''}\n`;
          break;
        }
        case 'exit':
          return { src: `${src}ex = true;\n`, exits: true };
        case 'no_op':
        case 'log_msg':
          break;
        case 'add_header': {
          const h = header(0);
          this.#validWrites.add(h.index);
          src += `if (${v(h.index)} === 0) { ${v(h.index)} = 1;${h.fields.map((fi) => ` ${f(fi.slot)} = 0;${this.#m(fi.slot)}`).join('')} }\n`;
          break;
        }
        case 'remove_header':
          this.#validWrites.add(header(0).index);
          src += `${v(header(0).index)} = 0;\n`;
          break;
        case 'copy_header':
        case 'assign_header': {
          const hd = header(0);
          const hs = header(1);
          if (hd.fields.length !== hs.fields.length) no('headers of different types');
          this.#validWrites.add(hd.index);
          // st.set(d, st.get(s)): the value masked to the destination's width
          src += `${v(hd.index)} = ${v(hs.index)};${hd.fields.map((fi, i) => ` ${f(fi.slot)} = ${this.#r(hs.fields[i]!.slot)} % ${int(POW2[fi.width])};${this.#m(fi.slot)}`).join('')}\n`;
          break;
        }
        case 'generate_digest': {
          const id = ps[1]?.type === 'hexstr' ? Number(BigInt(ps[1].value as string)) : NaN;
          const list = [...this.#in.program.learn_lists].reverse().find((l) => l.id === id);
          if (!list) no('no such learn list');
          const values = list.elements.map((el) => this.#bigValue(el));
          src += `if (dg === ${this.cap(NO_DIGESTS)}) dg = [];\ndg.push({ list: ${int(id)}, values: [${values.join(', ')}] });\n`;
          break;
        }
        default:
          no('a primitive outside the subset');
      }
    }
    return { src, exits: false };
  }

  /** assign() of ./actions.ts into a number field. */
  #assign(dst: FieldInfo, src: TypeValue, ctx: NumCtx): string {
    return `${this.#assignValue(dst, src, ctx)}${this.#m(dst.slot)}\n`;
  }

  /** The statement of assign() (no newline). */
  #assignValue(dst: FieldInfo, src: TypeValue, ctx: NumCtx): string {
    const t = f(dst.slot);
    const m = int(POW2[dst.width]);
    if (src.type === 'runtime_data' || src.type === 'local') {
      const i = src.value as number;
      const w = ctx.widths?.[i] ?? Infinity;
      if (w <= dst.width) return `${t} = ${ctx.args}.num[${int(i)}];`;
      return `${t} = Number(${ctx.args}.big[${int(i)}] & ${this.cap(dst.mask)});`;
    }
    if (src.type === 'field' && this.#layout.hiddenValid(src.value) === undefined) {
      const fi = fieldOf(this.#layout, src.value);
      if (!fi || fi.wide) no('a copy of no number field');
      return fi.width <= dst.width ? `${t} = ${this.#r(fi.slot)};` : `${t} = ${this.#r(fi.slot)} % ${m};`;
    }
    return `{ const r = ${this.num(src, ctx)} % ${m}; ${t} = r < 0 ? r + ${m} : r; }`;
  }

  /** A learn list element as compileValue gives it (bigint): a field or a constant. */
  #bigValue(tv: TypeValue): string {
    if (tv.type === 'field') {
      const hv = this.#layout.hiddenValid(tv.value);
      if (hv !== undefined) return `BigInt(${v(hv)})`;
      const fi = fieldOf(this.#layout, tv.value);
      if (!fi || fi.wide) no('a learn list field of no number field');
      return `BigInt(${this.#r(fi.slot)})`;
    }
    if (tv.type === 'hexstr' && typeof tv.value === 'string' && /^-?0x[0-9a-fA-F]+$/.test(tv.value)) return this.cap(hexToBig(tv.value));
    if (tv.type === 'bool' && typeof tv.value === 'boolean') return tv.value ? '1n' : '0n';
    return no('a learn list element outside the subset');
  }

  // ---- the deparse (compile.ts's #deparse and #inPlace) ----

  #deparse(p: Program): string {
    const layout = this.#layout;
    const written = this.#in.written;
    const order = (p.deparsers[0]?.order ?? []).map((n) => {
      const h = layout.headerByName.get(n);
      if (!h || h.metadata) no('a deparser entry of no wire header');
      const plan = this.#plan(h);
      const all: number[] = [];
      const only: number[] = [];
      for (let g = 0; g < plan.n; g++) {
        all.push(g);
        const fs = plan.fields.slice(plan.first[g]!, plan.first[g]! + plan.count[g]!);
        if (!written || fs.some((x) => written.has(x))) only.push(g);
      }
      return { h, plan, all, only };
    });
    // A window no code writes after the parser holds the bytes it was extracted from: nothing to write
    // where the header did not move, a copy from where it was extracted where it did (so its fields'
    // locals are dead after their last read). A lazy field's window: written from its local once an
    // action wrote it, else the same as an unwritten one.
    const windows = (e: (typeof order)[number], gs: number[], b: string, base: string, moved: boolean) =>
      gs
        .map((g) => {
          const first = e.plan.first[g]!;
          const slot = e.plan.slot[first]!;
          let copy = '';
          for (let k = 0; k < e.plan.len[g]!; k++) copy += ` ${b}[${base} + ${int(e.plan.at[g]! + k)}] = frame[${o(e.h.index)} + ${int(e.plan.at[g]! + k)}];`;
          if (e.plan.fields.slice(first, first + e.plan.count[g]!).every((fi) => !this.#writes.has(fi.slot))) return moved ? `{${copy} }\n` : '';
          const w = this.#writeWindow(e.plan, g, b, base);
          if (e.plan.count[g] !== 1 || !this.#lazy.has(slot)) return w;
          return moved ? `if (m${int(slot)}) ${w}else {${copy} }\n` : `if (m${int(slot)}) ${w}`;
        })
        .join('');
    let src = 'let hb = 0;\n';
    for (const e of order) src += `if (${v(e.h.index)} !== 0) hb += ${int(e.h.bytes)};\n`;
    src += 'const olen = len - off + hb;\nlet ip = false;\n';
    // in place: every valid header where it was extracted, the lengths equal; only the windows the program may write
    let check = 'let at = 0; ip = true;\n';
    for (const e of order) check += `if (${v(e.h.index)} !== 0) { if (${o(e.h.index)} !== at) ip = false; at += ${int(e.h.bytes)}; }\n`;
    check += 'if (at !== off) ip = false;\n';
    let inPlace = '';
    for (const e of order) inPlace += `if (${v(e.h.index)} !== 0) { const q = ${o(e.h.index)};\n${windows(e, e.only, 'frame', 'q', false)}}\n`;
    src += `if (mode === ${int(GenMode.IN_PLACE)}) { ${check}if (ip) {\n${inPlace}r.frame = frame; } }\n`;
    let emit = '';
    for (const e of order) {
      emit += `if (${v(e.h.index)} !== 0) {
if (same && ${o(e.h.index)} === at) { const q = at;
${windows(e, e.only, 'out', 'q', false)}} else { const q = at;
${windows(e, e.all, 'out', 'q', true)}}
at += ${int(e.h.bytes)}; }
`;
    }
    src += `if (!ip) {
const out = mode === ${int(GenMode.NEW_BUFFER)} ? ${this.cap(Buffer)}.allocUnsafe(olen) : ${this.cap(this.#in.view)}(olen);
const same = hb === off;
if (same) frame.copy(out, 0);
let at = 0;
${emit}if (!same) frame.copy(out, at, off);
r.frame = out;
}
`;
    return src;
  }
}

/** The int32 form's end: two folds take a sum below 2^31 to 16 bits (the loop's result), then the complement. */
const INT_FOLD = ' s = (s & 0xffff) + (s >>> 16); s = (s & 0xffff) + (s >>> 16); const x = ~s & 0xffff;';

/** + - and comparisons/logic of compileNum (./expr.ts numBinary), as source operators (a Map: the op comes from the program). */
const NUM_OPS = new Map<string, string>([
  ['+', '+'],
  ['-', '-'],
  ['==', '==='],
  ['!=', '!=='],
  ['>', '>'],
  ['>=', '>='],
  ['<', '<'],
  ['<=', '<='],
  ['and', '&&'],
  ['or', '||'],
]);

/** Wire fields alone in their window that the code never reads (see Gen's lazy). */
function lazyFields(layout: Layout, reads: ReadonlySet<number>): Set<number> {
  const lazy = new Set<number>();
  for (const h of layout.headers) {
    if (h.metadata) continue;
    const plan = planOf(h);
    for (let g = 0; g < plan.n; g++) {
      const slot = plan.slot[plan.first[g]!]!;
      if (plan.count[g] === 1 && plan.kind[g] !== W.GENERAL && !reads.has(slot)) lazy.add(slot);
    }
  }
  return lazy;
}

/** The program as one generated function, or why not (the interpreter then runs it). */
export function generateProgram(input: CodegenInput): Generated {
  try {
    const first = new Gen(input);
    const built = first.build();
    const lazy = lazyFields(input.layout, first.reads);
    return lazy.size === 0 ? built : new Gen(input, lazy).build();
  } catch (e) {
    if (e instanceof Unsupported) return { refused: e.message };
    // anything else is a generator bug: the closures, the reference, run the program instead
    return { refused: `the generator failed: ${(e as Error)?.message ?? String(e)}` };
  }
}
