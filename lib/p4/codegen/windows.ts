// Header windows (../frame/header-bits.ts's shapes) as source: a window's
// bytes read into the field locals, or the locals written back.

import { Plan, W } from '../frame/header-bits';
import { f, GenContext, int, no } from './context';

/**
 * Window g of a header's plan as the read and the write both take it: its
 * length, first field, field count and first field's slot, and `by(k)`, the
 * source text of its k-th byte in `b` at `base`.
 */
function windowOf(
  plan: Plan,
  g: number,
  b: string,
  base: string,
): { l: number; f0: number; c: number; s0: number; by: (k: number) => string } {
  const f0 = plan.first[g]!;
  const at = plan.at[g]!;
  return { l: plan.len[g]!, f0, c: plan.count[g]!, s0: plan.slot[f0]!, by: (k) => `${b}[${base} + ${int(at + k)}]` };
}

/** Reads window g of a header at `b[base + at]` into the field locals. */
export function readWindow(gen: GenContext, plan: Plan, g: number, b: string, base: string): string {
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
  if (c === 1 && gen.lazy.has(s0)) return `m${int(s0)} = false;\n`; // its bytes stay in the frame
  if (plan.kind[g] === W.WORD && c === 1 && plan.shift[f0] === 0) return `${f(s0)} = ${word(l)};\n`;
  if (plan.kind[g] === W.WORD) {
    let s = `{ const w = ${word(l)};`;
    for (let i = f0; i < f0 + c; i++)
      s += ` ${f(plan.slot[i]!)} = ((w >>> ${int(plan.shift[i])}) & ${int(plan.mask[i])}) >>> 0;`;
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
export function writeWindow(plan: Plan, g: number, b: string, base: string): string {
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
    // ../frame/header-bits.ts's bytes (the low 32 bits by shifts from the last byte back, the rest above them):
    // for a value 0 <= x < 2^48, x >>> 0 is x mod 2^32 and (x / 2^32) >>> 0 its floor above
    let s = `{ const x = ${f(s0)}; const lo = x >>> 0; const hi = (x / 4294967296) >>> 0;`;
    let i = l - 1;
    for (let sh = 0; sh < 32 && i >= 0; sh += 8, i--) s += ` ${by(i)} = lo >>> ${int(sh)};`;
    for (let sh = 0; i >= 0; sh += 8, i--) s += ` ${by(i)} = hi >>> ${int(sh)};`;
    return `${s} }\n`;
  }
  return no('a field window outside the number shapes');
}
