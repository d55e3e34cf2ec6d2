// Type-value objects and expressions compiled to closures over the packet
// state. Values are bigint (booleans are 1n/0n); truncation happens when a
// value is stored into a field. compileNum gives the number form of the
// common expressions (see "the number path" below). No closure walks JSON
// at run time and none recurses on packet data (the recursion here is over
// the program, once).

import { peekBits } from '../frame/header-bits';
import { JsonPath, refuse } from '../program/load';
import { ExpressionValue, MAX_FIELD_BITS, TypeValue } from '../program/schema';
import { hexToBig } from '../program/numbers';
import { Layout, NARROW_BITS } from '../program/layout';
import { PacketState } from '../frame/packet-state';

/** Action data as the control plane gives it (one bigint per parameter). */
export type RuntimeData = readonly bigint[];

/**
 * Action data of the running entry as the compiled actions read it, built
 * once per entry/member/default (actionArgs): the bigints, and each value as
 * a number for the number paths (exact up to 2^53; NaN above, never read
 * there since those paths are chosen by the parameter's width).
 */
export interface ActionArgs {
  readonly big: RuntimeData;
  readonly num: Float64Array;
}

export function actionArgs(data: RuntimeData): ActionArgs {
  const num = new Float64Array(data.length);
  for (let i = 0; i < data.length; i++) {
    const v = data[i]!;
    num[i] = v >= 0n && v <= BigInt(Number.MAX_SAFE_INTEGER) ? Number(v) : NaN;
  }
  return { big: data, num };
}

/** No action data (outside actions, parameterless action calls). */
export const NO_ARGS: ActionArgs = actionArgs([]);

export type Value = (st: PacketState, rd: ActionArgs) => bigint;

export interface ExprContext {
  readonly layout: Layout;
  /** Number of runtime_data items available (actions), 0 elsewhere. */
  readonly runtimeData: number;
  /** Bitwidth of each runtime_data item (actions), for the number paths. */
  readonly runtimeWidths?: readonly number[];
  /** Lookahead is allowed (parser transition keys and set ops). */
  readonly parser: boolean;
  /** Register arrays for the `register` operand. */
  readonly registers?: Map<string, { cells: bigint[]; mask: bigint }>;
}

function b(x: boolean): bigint {
  return x ? 1n : 0n;
}

/** Farthest bit offset a lookahead may read from (a frame of the largest size is shorter). */
const MAX_LOOKAHEAD_BITS = 1 << 20;

/** Deepest expression nesting accepted (in JSON path elements; each level adds two or three). */
const MAX_EXPRESSION_PATH = 256;

export function compileValue(tv: unknown, ctx: ExprContext, path: JsonPath): Value {
  if (path.length > MAX_EXPRESSION_PATH)
    refuse(path.slice(0, 8), `expression nested deeper than ${MAX_EXPRESSION_PATH} path elements`);
  if (tv === null || typeof tv !== 'object' || typeof (tv as TypeValue).type !== 'string') {
    refuse(path, 'expected a {type, value} object', tv);
  }
  const { type, value } = tv as TypeValue;
  switch (type) {
    case 'field': {
      const hv = ctx.layout.hiddenValid(value);
      if (hv !== undefined) return (st) => BigInt(st.valid[hv]!);
      const f = ctx.layout.field(value, [...path, 'value']);
      const slot = f.slot;
      return f.wide ? (st) => st.big[slot]! : (st) => BigInt(st.num[slot]!);
    }
    case 'hexstr': {
      if (typeof value !== 'string' || !/^-?0x[0-9a-fA-F]+$/.test(value))
        refuse([...path, 'value'], 'not a hexstring', value);
      if (value.replace(/^-?0x0*/, '').length * 4 > MAX_VALUE_BITS)
        refuse([...path, 'value'], `a constant wider than ${MAX_VALUE_BITS} bits`, value);
      const c = hexToBig(value);
      return () => c;
    }
    case 'bool': {
      if (typeof value !== 'boolean') refuse([...path, 'value'], 'not a boolean', value);
      const c = b(value);
      return () => c;
    }
    case 'runtime_data':
    case 'local': {
      if (typeof value !== 'number' || !Number.isInteger(value) || value < 0 || value >= ctx.runtimeData) {
        refuse([...path, 'value'], `runtime data index out of range (${ctx.runtimeData} items)`, value);
      }
      const i = value;
      return (_st, rd) => rd.big[i]!;
    }
    case 'lookahead': {
      if (!ctx.parser) refuse(path, 'lookahead outside a parser', tv);
      if (
        !Array.isArray(value) ||
        value.length !== 2 ||
        !value.every((x) => Number.isInteger(x) && x >= 0) ||
        value[1] === 0
      ) {
        refuse([...path, 'value'], 'lookahead must be [bit offset, bitwidth]', value);
      }
      if (value[0] > MAX_LOOKAHEAD_BITS || value[1] > MAX_FIELD_BITS)
        refuse([...path, 'value'], `lookahead past ${MAX_LOOKAHEAD_BITS} bits or wider than ${MAX_FIELD_BITS}`, value);
      const [off, width] = value as [number, number];
      // a lookahead past the end reads as 0 here; the parser checks lengths before it uses one (see parser.ts)
      return (st) => peekBits(st.frame, st.offset * 8 + off, width) ?? 0n;
    }
    case 'register': {
      if (!Array.isArray(value) || value.length !== 2)
        refuse([...path, 'value'], 'register must be [array, index expression]', value);
      const reg = ctx.registers?.get(value[0] as string);
      if (!reg) refuse([...path, 'value', 0], 'no such register array', value[0]);
      const idx = compileValue(value[1], ctx, [...path, 'value', 1]);
      const cells = reg.cells;
      return (st, rd) => {
        const i = Number(idx(st, rd));
        return i >= 0 && i < cells.length ? cells[i]! : 0n;
      };
    }
    case 'expression':
      return compileExpression(value, ctx, [...path, 'value']);
    default:
      return refuse([...path, 'type'], 'unsupported operand type', type);
  }
}

function operand(x: unknown, ctx: ExprContext, path: JsonPath): Value {
  if (x === null || x === undefined) refuse(path, 'missing operand');
  return compileValue(x, ctx, path);
}

/**
 * Widest value an expression keeps: a product or a left shift past it is
 * reduced modulo 2^MAX_VALUE_BITS (two's complement), so a program cannot
 * grow a bigint per operation until a frame stalls the loop or throws.
 * Wider than any field (MAX_FIELD_BITS), so what is stored into a field,
 * its low bits, is the same as without the reduction.
 */
export const MAX_VALUE_BITS = 2 * MAX_FIELD_BITS;
const VALUE_LIMIT = 1n << BigInt(MAX_VALUE_BITS);

/** `r` reduced to MAX_VALUE_BITS when it is wider (rare: only products and shifts can be). */
function bounded(r: bigint): bigint {
  return r < VALUE_LIMIT && r > -VALUE_LIMIT ? r : BigInt.asIntN(MAX_VALUE_BITS, r);
}

/** A shift by a negative amount or by more than 4096 bits shifts everything out. */
export function shiftLeft(a: bigint, c: bigint): bigint {
  return c < 0n || c > 4096n ? 0n : bounded(a << c);
}

function shiftRight(a: bigint, c: bigint): bigint {
  return c < 0n || c > 4096n ? (a < 0n ? -1n : 0n) : a >> c;
}

// Maps, not object literals: an operator from the program ("valueOf",
// "__proto__") must find nothing here rather than Object.prototype's members.
const binary = new Map<string, (a: bigint, c: bigint) => bigint>([
  ['+', (a, c) => a + c],
  ['-', (a, c) => a - c],
  ['*', (a, c) => bounded(a * c)],
  ['<<', shiftLeft],
  ['>>', shiftRight],
  ['&', (a, c) => a & c],
  ['|', (a, c) => a | c],
  ['^', (a, c) => a ^ c],
  ['==', (a, c) => b(a === c)],
  ['!=', (a, c) => b(a !== c)],
  ['>', (a, c) => b(a > c)],
  ['>=', (a, c) => b(a >= c)],
  ['<', (a, c) => b(a < c)],
  ['<=', (a, c) => b(a <= c)],
  ['/', (a, c) => (c === 0n ? 0n : a / c)],
  ['%', (a, c) => (c === 0n ? 0n : a % c)],
  [
    'two_comp_mod',
    (a, c) => {
      if (c <= 0n || c > 4096n) return 0n;
      const m = 1n << c;
      let r = ((a % m) + m) % m;
      if (r >= m >> 1n) r -= m;
      return r;
    },
  ],
]);

function compileExpression(ev: unknown, ctx: ExprContext, path: JsonPath): Value {
  if (ev === null || typeof ev !== 'object' || typeof (ev as ExpressionValue).op !== 'string') {
    refuse(path, 'expected an expression {op, left, right}', ev);
  }
  const e = ev as ExpressionValue;
  const op = e.op;
  switch (op) {
    case 'and': {
      const l = operand(e.left, ctx, [...path, 'left']);
      const r = operand(e.right, ctx, [...path, 'right']);
      return (st, rd) => b(l(st, rd) !== 0n && r(st, rd) !== 0n);
    }
    case 'or': {
      const l = operand(e.left, ctx, [...path, 'left']);
      const r = operand(e.right, ctx, [...path, 'right']);
      return (st, rd) => b(l(st, rd) !== 0n || r(st, rd) !== 0n);
    }
    case 'not': {
      const r = operand(e.right, ctx, [...path, 'right']);
      return (st, rd) => b(r(st, rd) === 0n);
    }
    case '~': {
      const r = operand(e.right, ctx, [...path, 'right']);
      return (st, rd) => ~r(st, rd);
    }
    case 'd2b': {
      const r = operand(e.right, ctx, [...path, 'right']);
      return (st, rd) => b(r(st, rd) !== 0n);
    }
    case 'b2d': {
      return operand(e.right, ctx, [...path, 'right']);
    }
    case 'valid': {
      const r = e.right as TypeValue | null;
      if (!r || r.type !== 'header') refuse([...path, 'right'], 'valid() takes a header', r);
      const h = ctx.layout.header(r.value, [...path, 'right', 'value']).index;
      return (st) => BigInt(st.valid[h]!);
    }
    case '?': {
      const c = operand(e.cond, ctx, [...path, 'cond']);
      const l = operand(e.left, ctx, [...path, 'left']);
      const r = operand(e.right, ctx, [...path, 'right']);
      return (st, rd) => (c(st, rd) !== 0n ? l(st, rd) : r(st, rd));
    }
    default: {
      const f = binary.get(op);
      if (!f) return refuse([...path, 'op'], 'unsupported expression operator', op);
      const l = operand(e.left, ctx, [...path, 'left']);
      const r = operand(e.right, ctx, [...path, 'right']);
      return (st, rd) => f(l(st, rd), r(st, rd));
    }
  }
}

// ---- the number path ----
// An expression whose operands are all fields and action data of at most 32
// bits, validity bits and small constants, and whose operators are
// comparisons, logic, + and -, computes in plain numbers: with at most 16
// levels every intermediate stays below 2^48, far from 2^53.

export type NumValue = (st: PacketState, rd: ActionArgs) => number;

const NUM_LIMIT = 2 ** 32;

const numBinary = new Map<string, (a: number, c: number) => number>([
  ['+', (a, c) => a + c],
  ['-', (a, c) => a - c],
  ['==', (a, c) => (a === c ? 1 : 0)],
  ['!=', (a, c) => (a !== c ? 1 : 0)],
  ['>', (a, c) => (a > c ? 1 : 0)],
  ['>=', (a, c) => (a >= c ? 1 : 0)],
  ['<', (a, c) => (a < c ? 1 : 0)],
  ['<=', (a, c) => (a <= c ? 1 : 0)],
  ['and', (a, c) => (a !== 0 && c !== 0 ? 1 : 0)],
  ['or', (a, c) => (a !== 0 || c !== 0 ? 1 : 0)],
]);

/**
 * The number form of a value, or undefined when it needs bigint. Call only
 * on a value compileValue accepted (errors are reported there).
 */
export function compileNum(tv: unknown, ctx: ExprContext, depth = 0): NumValue | undefined {
  if (depth > 16 || tv === null || typeof tv !== 'object') return undefined;
  const { type, value } = tv as TypeValue;
  if (type === 'field') {
    const hv = ctx.layout.hiddenValid(value);
    if (hv !== undefined) return (st) => st.valid[hv]!;
    if (!Array.isArray(value)) return undefined;
    const f = ctx.layout.headerByName.get(value[0] as string)?.byName.get(value[1] as string);
    if (!f || f.width > NARROW_BITS) return undefined;
    const slot = f.slot;
    return (st) => st.num[slot]!;
  }
  if (type === 'runtime_data' || type === 'local') {
    const w = typeof value === 'number' ? ctx.runtimeWidths?.[value] : undefined;
    if (w === undefined || w > NARROW_BITS) return undefined;
    const i = value as number;
    return (_st, rd) => rd.num[i]!;
  }
  if (type === 'hexstr' && typeof value === 'string' && /^-?0x[0-9a-fA-F]+$/.test(value)) {
    const c = hexToBig(value);
    if (c >= BigInt(NUM_LIMIT) || c <= -BigInt(NUM_LIMIT)) return undefined;
    const n = Number(c);
    return () => n;
  }
  if (type === 'bool' && typeof value === 'boolean') {
    const n = value ? 1 : 0;
    return () => n;
  }
  if (type !== 'expression' || value === null || typeof value !== 'object') return undefined;
  const e = value as ExpressionValue;
  if (e.op === 'valid') {
    const r = e.right as TypeValue | null;
    const h =
      r && r.type === 'header' && typeof r.value === 'string' ? ctx.layout.headerByName.get(r.value) : undefined;
    if (!h) return undefined;
    const hi = h.index;
    return (st) => st.valid[hi]!;
  }
  if (e.op === 'not' || e.op === 'd2b' || e.op === 'b2d') {
    const r = compileNum(e.right, ctx, depth + 1);
    if (!r) return undefined;
    if (e.op === 'b2d') return r;
    return e.op === 'not' ? (st, rd) => (r(st, rd) === 0 ? 1 : 0) : (st, rd) => (r(st, rd) !== 0 ? 1 : 0);
  }
  const f = numBinary.get(e.op);
  if (!f) return undefined;
  const l = compileNum(e.left, ctx, depth + 1);
  const r = compileNum(e.right, ctx, depth + 1);
  if (!l || !r) return undefined;
  const lv = validOf(e.left, ctx);
  if (e.op === 'and' && lv >= 0) {
    // valid(h) and field <op> constant (a header's guard: valid(ipv4) and ttl > 0): one closure
    const rv = e.right as TypeValue | null;
    const re =
      rv && rv.type === 'expression' && rv.value !== null && typeof rv.value === 'object'
        ? (rv.value as ExpressionValue)
        : undefined;
    const rs = re ? plainField(re.left, ctx) : -1;
    const rc = re ? constant(re.right) : undefined;
    if (re && rs >= 0 && rc !== undefined) {
      switch (re.op) {
        case '==':
          return (st) => (st.valid[lv] !== 0 && st.num[rs] === rc ? 1 : 0);
        case '!=':
          return (st) => (st.valid[lv] !== 0 && st.num[rs] !== rc ? 1 : 0);
        case '>':
          return (st) => (st.valid[lv] !== 0 && st.num[rs]! > rc ? 1 : 0);
        case '>=':
          return (st) => (st.valid[lv] !== 0 && st.num[rs]! >= rc ? 1 : 0);
        case '<':
          return (st) => (st.valid[lv] !== 0 && st.num[rs]! < rc ? 1 : 0);
        case '<=':
          return (st) => (st.valid[lv] !== 0 && st.num[rs]! <= rc ? 1 : 0);
      }
    }
    return (st, rd) => (st.valid[lv] !== 0 && r(st, rd) !== 0 ? 1 : 0); // valid(h) and ...
  }
  if (e.op === 'and') return (st, rd) => (l(st, rd) !== 0 && r(st, rd) !== 0 ? 1 : 0);
  if (e.op === 'or') return (st, rd) => (l(st, rd) !== 0 || r(st, rd) !== 0 ? 1 : 0);
  // a field against a constant (ttl > 0, etherType == 0x0800): one closure, no calls
  const slot = plainField(e.left, ctx);
  const c = constant(e.right);
  if (slot >= 0 && c !== undefined) {
    switch (e.op) {
      case '==':
        return (st) => (st.num[slot] === c ? 1 : 0);
      case '!=':
        return (st) => (st.num[slot] !== c ? 1 : 0);
      case '>':
        return (st) => (st.num[slot]! > c ? 1 : 0);
      case '>=':
        return (st) => (st.num[slot]! >= c ? 1 : 0);
      case '<':
        return (st) => (st.num[slot]! < c ? 1 : 0);
      case '<=':
        return (st) => (st.num[slot]! <= c ? 1 : 0);
    }
  }
  return (st, rd) => f(l(st, rd), r(st, rd));
}

/** The header index of a valid(header) operand, else -1. */
function validOf(tv: unknown, ctx: ExprContext): number {
  const t = tv as TypeValue | null;
  if (!t || t.type !== 'expression' || t.value === null || typeof t.value !== 'object') return -1;
  const e = t.value as ExpressionValue;
  const r = e.right as TypeValue | null;
  if (e.op !== 'valid' || !r || r.type !== 'header' || typeof r.value !== 'string') return -1;
  return ctx.layout.headerByName.get(r.value)?.index ?? -1;
}

/** The number slot of a field operand of at most 32 bits, else -1. */
function plainField(tv: unknown, ctx: ExprContext): number {
  const t = tv as TypeValue | null;
  if (!t || t.type !== 'field' || !Array.isArray(t.value)) return -1;
  const f = ctx.layout.headerByName.get(t.value[0] as string)?.byName.get(t.value[1] as string);
  return f && f.width <= NARROW_BITS ? f.slot : -1;
}

/** The value of a hexstr operand below 2^32 in magnitude, else undefined. */
function constant(tv: unknown): number | undefined {
  const t = tv as TypeValue | null;
  if (!t || t.type !== 'hexstr' || typeof t.value !== 'string' || !/^-?0x[0-9a-fA-F]+$/.test(t.value)) return undefined;
  const c = hexToBig(t.value);
  return c < BigInt(NUM_LIMIT) && c > -BigInt(NUM_LIMIT) ? Number(c) : undefined;
}
