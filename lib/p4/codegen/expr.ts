// Expressions as source: compileNum's subset (../compile/expr.ts), the
// number path; anything off it refuses the program.

import type { ExpressionValue, TypeValue } from '../program/schema';
import { NARROW_BITS } from '../program/layout';
import { hexToBig } from '../program/numbers';
import { fieldOf, GenContext, int, no, NumCtx, v } from './context';

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

/** The number form of a value, as compileNum (./expr.ts) computes it; refuses where compileNum has none. */
export function num(gen: GenContext, tv: unknown, ctx: NumCtx, depth = 0): string {
  if (depth > 16 || tv === null || typeof tv !== 'object') no('an expression off the number path');
  const { type, value } = tv as TypeValue;
  const layout = gen.layout;
  if (type === 'field') {
    const hv = layout.hiddenValid(value);
    if (hv !== undefined) return v(hv);
    const fi = fieldOf(layout, value);
    if (!fi || fi.width > NARROW_BITS) no('a field over 32 bits in an expression');
    return gen.r(fi.slot);
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
    const h =
      rr && rr.type === 'header' && typeof rr.value === 'string' ? layout.headerByName.get(rr.value) : undefined;
    if (!h) no('valid() of no header');
    return v(h.index);
  }
  if (e.op === 'not' || e.op === 'd2b' || e.op === 'b2d') {
    const x = num(gen, e.right, ctx, depth + 1);
    if (e.op === 'b2d') return x;
    return e.op === 'not' ? `(${x} === 0 ? 1 : 0)` : `(${x} !== 0 ? 1 : 0)`;
  }
  const op = NUM_OPS.get(e.op);
  if (op === undefined) no('an operator off the number path');
  const l = num(gen, e.left, ctx, depth + 1);
  const r = num(gen, e.right, ctx, depth + 1);
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
