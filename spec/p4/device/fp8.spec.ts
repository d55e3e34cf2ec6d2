// The number formats of the RDMA externs (lib/p4/device/fp8.ts) against tables
// computed here independently: every fp8 code decoded from its bit fields by
// a formula written out per format (and checked against the OFP8 spec's
// named values), encoding checked against an exhaustive nearest-code search
// with ties to the even code, every sum of two fp8 codes, FP32 against the
// platform's Float32Array rounding, BF16 against the integer RNE recipe,
// FP16 against an exhaustive search.

import { expect } from 'chai';
import {
  decodeValue,
  E4M3_VALUES,
  E5M2_VALUES,
  encodeValue,
  NumFormat,
  readElement,
  writeElement,
} from '../../../lib/p4/device/fp8';
import { MAXCODE, REF, refEncode } from './fp8-ref';

const FP8 = [
  [NumFormat.E4M3, 'E4M3', E4M3_VALUES],
  [NumFormat.E5M2, 'E5M2', E5M2_VALUES],
] as const;

describe('p4 number formats: OCP FP8 E4M3 / E5M2 and the wider formats', () => {
  it('every E4M3 and E5M2 code decodes to the value of its bit fields', () => {
    for (const [f, , table] of FP8) {
      for (let c = 0; c < 256; c++) {
        const want = REF[f](c);
        const got = decodeValue(f, c);
        if (Number.isNaN(want)) expect(Number.isNaN(got), `code ${c}`).to.equal(true);
        else expect(Object.is(got, want), `code 0x${c.toString(16)}: ${got} vs ${want}`).to.equal(true);
        expect(Object.is(table[c], got) || (Number.isNaN(table[c]!) && Number.isNaN(got))).to.equal(true);
      }
    }
  });

  it('the OFP8 named values: max/min normal, min/max subnormal, special codes', () => {
    expect(E4M3_VALUES[0x7e]).to.equal(448);
    expect(E4M3_VALUES[0xfe]).to.equal(-448);
    expect(E4M3_VALUES[0x08]).to.equal(2 ** -6);
    expect(E4M3_VALUES[0x01]).to.equal(2 ** -9);
    expect(E4M3_VALUES[0x07]).to.equal(0.875 * 2 ** -6);
    expect(E4M3_VALUES[0x78]).to.equal(256); // S.1111.000 is a normal number: no infinity in E4M3
    expect(Number.isNaN(E4M3_VALUES[0x7f]!)).to.equal(true);
    expect(Number.isNaN(E4M3_VALUES[0xff]!)).to.equal(true);
    expect([...E4M3_VALUES].filter(Number.isNaN)).to.have.length(2); // one NaN pattern, both signs
    expect([...E4M3_VALUES].filter((v) => !Number.isFinite(v) && !Number.isNaN(v))).to.have.length(0);
    expect(Object.is(E4M3_VALUES[0x80], -0)).to.equal(true);
    expect(E5M2_VALUES[0x7b]).to.equal(57344);
    expect(E5M2_VALUES[0x04]).to.equal(2 ** -14);
    expect(E5M2_VALUES[0x01]).to.equal(2 ** -16);
    expect(E5M2_VALUES[0x7c]).to.equal(Infinity);
    expect(E5M2_VALUES[0xfc]).to.equal(-Infinity);
    expect([0x7d, 0x7e, 0x7f, 0xfd, 0xfe, 0xff].every((c) => Number.isNaN(E5M2_VALUES[c]!))).to.equal(true);
  });

  it('every finite code encodes back to itself (both signs, zeros keep their sign)', () => {
    for (const [f, , table] of FP8) {
      for (let c = 0; c < 256; c++) {
        if (!Number.isFinite(table[c]!)) continue;
        expect(encodeValue(f, table[c]!, false), `code 0x${c.toString(16)}`).to.equal(c);
        expect(encodeValue(f, table[c]!, true)).to.equal(c);
      }
    }
  });

  it('midpoints between neighbouring codes round to the even code; a hair either side to the nearer one', () => {
    for (const [f] of FP8) {
      const ref = REF[f];
      for (let c = 0; c < MAXCODE[f]; c++) {
        const lo = ref(c);
        const hi = ref(c + 1);
        const mid = (lo + hi) / 2;
        const even = c % 2 === 0 ? c : c + 1;
        expect(encodeValue(f, mid, false), `mid of 0x${c.toString(16)}`).to.equal(even);
        expect(encodeValue(f, -mid, false)).to.equal(0x80 | even);
        const eps = (hi - lo) / 1024;
        expect(encodeValue(f, mid - eps, false)).to.equal(c);
        expect(encodeValue(f, mid + eps, false)).to.equal(c + 1);
        expect(encodeValue(f, mid, false)).to.equal(refEncode(f, mid, false));
      }
    }
  });

  it('overflow and infinities: E4M3 NaN, E5M2 infinity; saturation clamps to the largest finite value', () => {
    // E4M3: 464 is the midpoint of 448 and the (absent) 480: ties to even 448; above it overflows.
    expect(encodeValue(NumFormat.E4M3, 464, false)).to.equal(0x7e);
    expect(encodeValue(NumFormat.E4M3, 464.5, false)).to.equal(0x7f);
    expect(encodeValue(NumFormat.E4M3, -1e6, false)).to.equal(0xff);
    expect(encodeValue(NumFormat.E4M3, 1e6, true)).to.equal(0x7e);
    expect(encodeValue(NumFormat.E4M3, -Infinity, true)).to.equal(0xfe);
    expect(encodeValue(NumFormat.E4M3, Infinity, false)).to.equal(0x7f);
    // E5M2: 61440 is the midpoint of 57344 and 65536: ties to even, which is the overflow.
    expect(encodeValue(NumFormat.E5M2, 61439, false)).to.equal(0x7b);
    expect(encodeValue(NumFormat.E5M2, 61440, false)).to.equal(0x7c);
    expect(encodeValue(NumFormat.E5M2, -61440, true)).to.equal(0xfb);
    expect(encodeValue(NumFormat.E5M2, Infinity, false)).to.equal(0x7c);
    expect(encodeValue(NumFormat.E5M2, -Infinity, true)).to.equal(0xfb);
    expect(encodeValue(NumFormat.E5M2, NaN, true)).to.equal(0x7f);
    expect(encodeValue(NumFormat.E4M3, NaN, true)).to.equal(0x7f);
    // Underflow: half the smallest subnormal ties to even zero, a hair more rounds up.
    expect(encodeValue(NumFormat.E4M3, 2 ** -10, false)).to.equal(0);
    expect(encodeValue(NumFormat.E4M3, -(2 ** -10), false)).to.equal(0x80);
    expect(encodeValue(NumFormat.E4M3, 2 ** -10 * 1.001, false)).to.equal(1);
    expect(encodeValue(NumFormat.E5M2, 3 * 2 ** -17, false)).to.equal(2); // 1.5 subnormal steps: to even 2
  });

  it('random fp32 values encode as the exhaustive search says (seeded, 20000 per format, both modes)', () => {
    let seed = 12345;
    const rnd = (): number => {
      seed = (seed * 1103515245 + 12345) >>> 0;
      return seed / 2 ** 32;
    };
    const f32 = new Float32Array(1);
    const u32 = new Uint32Array(f32.buffer);
    for (const [f] of FP8) {
      for (let i = 0; i < 20000; i++) {
        // Exponents around the fp8 range, any mantissa: fp32 values as they come out of a GPU.
        const e = Math.floor(rnd() * 44) - 24;
        u32[0] = (((rnd() < 0.5 ? 1 : 0) << 31) | ((e + 127) << 23) | Math.floor(rnd() * 2 ** 23)) >>> 0;
        const v = f32[0]!;
        const sat = i % 2 === 0;
        expect(encodeValue(f, v, sat), `${v}`).to.equal(refEncode(f, v, sat));
      }
    }
  });

  it('every sum of two fp8 codes (all 65536 pairs per format) rounds as the table says', () => {
    for (const [f] of FP8) {
      const ref = REF[f];
      for (let a = 0; a < 256; a++) {
        for (let b = 0; b < 256; b++) {
          const sum = ref(a) + ref(b);
          for (const sat of [false, true]) {
            const got = encodeValue(f, E4M3orE5M2(f, a) + E4M3orE5M2(f, b), sat);
            expect(got, `0x${a.toString(16)} + 0x${b.toString(16)}`).to.equal(refEncode(f, sum, sat));
          }
        }
      }
    }
  });

  it('FP32 encoding agrees with Float32Array rounding; BF16 with the integer RNE recipe', () => {
    let seed = 99;
    const rnd = (): number => {
      seed = (seed * 1103515245 + 12345) >>> 0;
      return seed / 2 ** 32;
    };
    const f32 = new Float32Array(1);
    const u32 = new Uint32Array(f32.buffer);
    for (let i = 0; i < 20000; i++) {
      const v = (rnd() - 0.5) * 2 ** (Math.floor(rnd() * 80) - 40);
      f32[0] = v;
      expect(encodeValue(NumFormat.FP32, v, false), `${v}`).to.equal(u32[0]);
      // BF16 from an fp32 value: round the low 16 bits to nearest even (finite inputs).
      const bits = u32[0]!;
      const want = ((bits + 0x7fff + ((bits >>> 16) & 1)) >>> 16) & 0xffff;
      expect(encodeValue(NumFormat.BF16, f32[0]!, false), `${f32[0]}`).to.equal(want);
    }
    expect(encodeValue(NumFormat.FP32, 1e300, false)).to.equal(0x7f800000);
    expect(encodeValue(NumFormat.BF16, -Infinity, true)).to.equal(0xff80); // no saturation mode for the wider formats
  });

  it('FP16: every code round-trips; sampled values match an exhaustive nearest-even search', () => {
    const vals: number[] = [];
    for (let c = 0; c < 0x7c00; c++) {
      const e = c >> 10;
      const m = c & 0x3ff;
      vals.push(e === 0 ? m * 2 ** -24 : (1 + m / 1024) * 2 ** (e - 15));
    }
    for (let c = 0; c < 0x7c00; c++) {
      expect(decodeValue(NumFormat.FP16, c)).to.equal(vals[c]);
      expect(encodeValue(NumFormat.FP16, vals[c]!, false)).to.equal(c);
      expect(encodeValue(NumFormat.FP16, -vals[c]!, false)).to.equal(c === 0 ? 0x8000 : 0x8000 | c);
    }
    let seed = 7;
    const rnd = (): number => {
      seed = (seed * 1103515245 + 12345) >>> 0;
      return seed / 2 ** 32;
    };
    for (let i = 0; i < 300; i++) {
      const lo = Math.floor(rnd() * (0x7bff - 1));
      const v = i % 3 === 0 ? (vals[lo]! + vals[lo + 1]!) / 2 : vals[lo]! + rnd() * (vals[lo + 1]! - vals[lo]!);
      let best = 0;
      for (let c = 1; c < 0x7c00; c++) {
        const d = Math.abs(vals[c]! - v);
        const bd = Math.abs(vals[best]! - v);
        if (d < bd || (d === bd && c % 2 === 0)) best = c;
      }
      expect(encodeValue(NumFormat.FP16, v, false), `${v}`).to.equal(best);
    }
    expect(encodeValue(NumFormat.FP16, 65520, false)).to.equal(0x7c00); // the midpoint past 65504 ties to the overflow
    expect(encodeValue(NumFormat.FP16, 65519, false)).to.equal(0x7bff);
  });

  it('reads and writes elements little-endian', () => {
    const b = Buffer.alloc(8);
    writeElement(NumFormat.FP16, b, 0, 1.5, false);
    expect(b.readUInt16LE(0)).to.equal(0x3e00);
    writeElement(NumFormat.FP32, b, 2, -2, false);
    expect(b.readUInt32LE(2)).to.equal(0xc0000000);
    writeElement(NumFormat.E5M2, b, 6, 3, false);
    expect(b[6]).to.equal(0x42);
    expect(readElement(NumFormat.FP16, b, 0)).to.equal(1.5);
    expect(readElement(NumFormat.FP32, b, 2)).to.equal(-2);
    expect(readElement(NumFormat.E5M2, b, 6)).to.equal(3);
    writeElement(NumFormat.BF16, b, 0, 1, false);
    expect(b.readUInt16LE(0)).to.equal(0x3f80);
    expect(readElement(NumFormat.BF16, b, 0)).to.equal(1);
  });
});

function E4M3orE5M2(f: NumFormat, c: number): number {
  return f === NumFormat.E4M3 ? E4M3_VALUES[c]! : E5M2_VALUES[c]!;
}
