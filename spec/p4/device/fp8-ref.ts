// Independent fp8 references for the specs (fp8.spec.ts, wqe.spec.ts): each
// code's value from its bit fields written out per format, and encoding by an
// exhaustive search for the nearest code (ties to the even code). Nothing
// here shares code with lib/p4/device/fp8.ts.

import { NumFormat } from '../../../lib/p4/device/fp8';

/** OFP8 E4M3 by its fields: S.EEEE.MMM, bias 7, S.1111.111 NaN, no infinity. */
function refE4M3(c: number): number {
  const s = c >> 7 ? -1 : 1;
  const e = (c >> 3) & 15;
  const m = c & 7;
  if (e === 15 && m === 7) return NaN;
  if (e === 0) return s * (m / 8) * Math.pow(2, -6);
  return s * (1 + m / 8) * Math.pow(2, e - 7);
}

/** OFP8 E5M2 by its fields: S.EEEEE.MM, bias 15, IEEE special values. */
function refE5M2(c: number): number {
  const s = c >> 7 ? -1 : 1;
  const e = (c >> 2) & 31;
  const m = c & 3;
  if (e === 31) return m === 0 ? s * Infinity : NaN;
  if (e === 0) return s * (m / 4) * Math.pow(2, -14);
  return s * (1 + m / 4) * Math.pow(2, e - 15);
}

export const REF = { [NumFormat.E4M3]: refE4M3, [NumFormat.E5M2]: refE5M2 } as const;
/** The value one step past the largest finite magnitude: where overflow starts (E4M3 480, E5M2 65536). */
const BEYOND = { [NumFormat.E4M3]: 480, [NumFormat.E5M2]: 65536 } as const;
export const MAXCODE = { [NumFormat.E4M3]: 0x7e, [NumFormat.E5M2]: 0x7b } as const;

/**
 * Nearest code by exhaustive search over the positive finite codes, ties to
 * the even code; overflow when the nearest is the virtual step past the max.
 */
export function refEncode(f: NumFormat.E4M3 | NumFormat.E5M2, v: number, sat: boolean): number {
  const ref = REF[f];
  if (Number.isNaN(v)) return 0x7f;
  const sign = v < 0 || Object.is(v, -0) ? 0x80 : 0;
  const a = Math.abs(v);
  const overflow = sat ? MAXCODE[f] : f === NumFormat.E4M3 ? 0x7f : 0x7c;
  if (a === Infinity) return sign | overflow;
  let best = -1;
  let bestD = Infinity;
  for (let c = 0; c <= MAXCODE[f] + 1; c++) {
    const val = c === MAXCODE[f] + 1 ? BEYOND[f] : ref(c);
    const d = Math.abs(val - a);
    if (d < bestD || (d === bestD && c % 2 === 0)) {
      best = c;
      bestD = d;
    }
  }
  if (best === MAXCODE[f] + 1) return sign | overflow;
  return sign | best;
}
