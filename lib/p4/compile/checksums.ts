// The program's checksums compiled: each verify (after the parser: marks
// the frame, never drops it) and each update (before the deparse: writes
// the target field), on csum16's number path (./csum16.ts) when the
// calculation has one, else through the calculation's bigint.

import { NumCalc } from './csum16';
import { compileNum, compileValue, ExprContext, NO_ARGS } from './expr';
import type { Calc } from './calculations';
import type { PacketState } from '../frame/packet-state';
import type { Layout } from '../program/layout';
import { refuse } from '../program/load';
import type { Program } from '../program/schema';

export type ChecksumStep = (st: PacketState) => void;

/** Each checksum's verify and update steps, in program order; `calcs`/`numCalcs`: the calculations by name. */
export function compileChecksums(
  p: Program,
  ctx: ExprContext,
  layout: Layout,
  calcs: ReadonlyMap<string, Calc>,
  numCalcs: ReadonlyMap<string, NumCalc>,
): { verify: ChecksumStep[]; update: ChecksumStep[] } {
  const verify: ChecksumStep[] = [];
  const update: ChecksumStep[] = [];
  p.checksums.forEach((c, ci) => {
    const path = ['checksums', ci];
    if (c.type !== 'generic') refuse([...path, 'type'], 'unsupported checksum type', c.type);
    const calc = calcs.get(c.calculation);
    if (!calc) refuse([...path, 'calculation'], 'no such calculation', c.calculation);
    const target = layout.field(c.target, [...path, 'target']);
    const cond = c.if_cond ? compileValue(c.if_cond, ctx, [...path, 'if_cond']) : undefined;
    const numCond = c.if_cond ? compileNum(c.if_cond, ctx) : undefined;
    const h = target.header;
    const applies = (st: PacketState): boolean =>
      st.valid[h] === 1 && (!cond || (numCond ? numCond(st, NO_ARGS) !== 0 : cond(st, NO_ARGS) !== 0n));
    const num = numCalcs.get(c.calculation);
    if (num && !target.wide && target.width >= 16 && !cond) {
      // the number path, unconditional (P4_14's and simple_router's): a 16-bit sum into the field
      const slot = target.slot;
      if (c.verify !== false)
        verify.push((st) => {
          if (st.valid[h] === 1 && num(st) !== st.num[slot]) st.checksumError = true;
        });
      if (c.update !== false)
        update.push((st) => {
          if (st.valid[h] === 1) st.num[slot] = num(st);
        });
      return;
    }
    if (num && !target.wide) {
      // the number path: a 16-bit sum into a number-stored field
      const slot = target.slot;
      const m = 2 ** Math.min(target.width, 16);
      if (c.verify !== false)
        verify.push((st) => {
          if (applies(st) && num(st) % m !== st.num[slot]) st.checksumError = true;
        });
      if (c.update !== false)
        update.push((st) => {
          if (applies(st)) st.num[slot] = num(st) % m;
        });
      return;
    }
    if (c.verify !== false) {
      verify.push((st) => {
        if (applies(st) && (calc(st) & target.mask) !== st.get(target)) st.checksumError = true;
      });
    }
    if (c.update !== false) {
      update.push((st) => {
        if (applies(st)) st.set(target, calc(st));
      });
    }
  });
  return { verify, update };
}
