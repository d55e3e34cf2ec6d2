// Number formats for the P4 engine's RDMA externs (issue 15): the two OCP
// 8-bit floating-point formats (OCP "8-bit Floating Point Specification
// (OFP8)" rev 1.0) and the wider formats they are converted from and to.
//
//   E4M3  1-4-3, bias 7: no infinities; S.1111.111 is the only NaN pattern
//         (both signs), so S.1111.000-110 are normal numbers (max 448)
//   E5M2  1-5-2, bias 15: IEEE 754-like (S.11111.00 infinity, S.11111.xx NaN;
//         max normal 57344)
//   FP16  IEEE binary16; BF16 (8-bit exponent, 7-bit mantissa); FP32 IEEE
//         binary32; all little-endian in guest memory
//
// Every source format is a subset of binary64, so decoding is exact; encoding
// rounds the binary64 value once, to nearest, ties to even. Overflow (a value
// whose rounded magnitude is beyond the format's largest finite number) and
// infinities: with `saturate`, an fp8 result clamps to its largest finite
// number of the same sign (OFP8's saturation mode); without it E4M3 gives NaN
// and E5M2 (and FP16/BF16/FP32, which have no saturation mode) infinity. NaN
// in gives the canonical NaN out (its sign is not kept): 0x7f for E4M3 and
// E5M2 (the pattern QEMU's OFP8 conversions use), 0x7e00 FP16, 0x7fc0 BF16,
// 0x7fc00000 FP32.

/** Formats as the `ernic_wqe.src_fmt` / `dst_fmt` fields name them. */
export const enum NumFormat {
  E4M3 = 1,
  E5M2 = 2,
  FP16 = 3,
  BF16 = 4,
  FP32 = 5,
}

interface FormatSpec {
  readonly bytes: number;
  readonly man: number; // mantissa bits
  readonly exp: number; // exponent bits
  readonly bias: number;
  /** true: IEEE-like (all-ones exponent = inf/NaN); false: OFP8 E4M3 (only all-ones code is NaN). */
  readonly ieee: boolean;
  readonly nan: number;
  readonly inf: number; // for !ieee: the NaN pattern (no infinity)
  readonly maxFinite: number; // code of the largest finite magnitude
  readonly signBit: number;
  readonly canSaturate: boolean;
}

function spec(bytes: number, exp: number, man: number, ieee: boolean, nan: number, canSaturate: boolean): FormatSpec {
  const bias = 2 ** (exp - 1) - 1;
  const signBit = 2 ** (exp + man);
  const allOnes = signBit - 1;
  const expOnes = (2 ** exp - 1) * 2 ** man;
  return {
    bytes,
    man,
    exp,
    bias,
    ieee,
    nan,
    canSaturate,
    signBit,
    inf: ieee ? expOnes : allOnes,
    maxFinite: ieee ? expOnes - 1 : allOnes - 1,
  };
}

const SPECS: readonly (FormatSpec | undefined)[] = [
  undefined,
  spec(1, 4, 3, false, 0x7f, true),
  spec(1, 5, 2, true, 0x7f, true),
  spec(2, 5, 10, true, 0x7e00, false),
  spec(2, 8, 7, true, 0x7fc0, false),
  spec(4, 8, 23, true, 0x7fc00000, false),
];

/** Bytes per element of a format, 0 for an unknown format. */
export function formatBytes(f: number): number {
  return SPECS[f]?.bytes ?? 0;
}

export function isFp8(f: number): boolean {
  return f === NumFormat.E4M3 || f === NumFormat.E5M2;
}

/** The value of `code` in format `f` (exact). */
export function decodeValue(f: NumFormat, code: number): number {
  const s = SPECS[f]!;
  const neg = code >= s.signBit;
  const mag = neg ? code - s.signBit : code;
  let v: number;
  const manMask = 2 ** s.man;
  const E = Math.floor(mag / manMask);
  const M = mag - E * manMask;
  if (!s.ieee && mag === s.inf) v = NaN;
  else if (s.ieee && E === 2 ** s.exp - 1) v = M === 0 ? Infinity : NaN;
  else if (E === 0) v = M * 2 ** (1 - s.bias - s.man);
  else v = (manMask + M) * 2 ** (E - s.bias - s.man);
  return neg ? -v : v;
}

// The exponent of a binary64 value, from its bits (Math.log2 may round near powers of two).
const F64 = new Float64Array(1);
const U32 = new Uint32Array(F64.buffer);
const HI = new Uint8Array(new Uint16Array([1]).buffer)[0] === 1 ? 1 : 0;

/** floor(log2(a)) for a finite a > 0 (binary64 subnormals do not arise: every input is an fp32 value or a sum of fp8 values). */
function exponentOf(a: number): number {
  F64[0] = a;
  const e = ((U32[HI]! >>> 20) & 0x7ff) - 1023;
  return e;
}

/** Round a non-negative binary64 value to an integer, ties to even (q < 2^53). */
function roundEven(q: number): number {
  const f = Math.floor(q);
  const d = q - f;
  if (d > 0.5) return f + 1;
  if (d < 0.5) return f;
  return f % 2 === 0 ? f : f + 1;
}

/** `v` in format `f`, rounded to nearest even once; see the header for overflow, infinities and NaN. */
export function encodeValue(f: NumFormat, v: number, saturate: boolean): number {
  const s = SPECS[f]!;
  const sign = v < 0 || Object.is(v, -0) ? s.signBit : 0;
  if (Number.isNaN(v)) return s.nan;
  const a = Math.abs(v);
  const sat = saturate && s.canSaturate;
  if (a === Infinity) return sign + (sat ? s.maxFinite : s.inf);
  if (a === 0) return sign;
  const emin = 1 - s.bias;
  const e = exponentOf(a);
  let code: number;
  if (e < emin) {
    code = roundEven(a * 2 ** (s.man - emin)); // subnormal (2^man rounds up into the smallest normal)
  } else {
    const q = roundEven(a * 2 ** (s.man - e)); // [2^man, 2^(man+1)]: a carry lands in the next exponent
    code = (e + s.bias) * 2 ** s.man + (q - 2 ** s.man);
  }
  if (code > s.maxFinite) code = sat ? s.maxFinite : s.inf;
  return sign + code;
}

/** Decoded values of the 256 codes of each fp8 format (index: code). */
export const E4M3_VALUES: Float64Array = table(NumFormat.E4M3);
export const E5M2_VALUES: Float64Array = table(NumFormat.E5M2);

function table(f: NumFormat): Float64Array {
  const t = new Float64Array(256);
  for (let c = 0; c < 256; c++) t[c] = decodeValue(f, c);
  return t;
}

/** Reads one element of format `f` from `b` (little-endian). */
export function readElement(f: NumFormat, b: Buffer, at: number): number {
  switch (f) {
    case NumFormat.E4M3:
      return E4M3_VALUES[b[at]!]!;
    case NumFormat.E5M2:
      return E5M2_VALUES[b[at]!]!;
    case NumFormat.FP16:
      return decodeValue(f, b.readUInt16LE(at));
    case NumFormat.BF16:
      return decodeValue(f, b.readUInt16LE(at));
    default:
      return b.readFloatLE(at);
  }
}

/** Writes `v` as format `f` at `at` (little-endian), rounded (encodeValue). */
export function writeElement(f: NumFormat, b: Buffer, at: number, v: number, saturate: boolean): void {
  const code = encodeValue(f, v, saturate);
  switch (f) {
    case NumFormat.E4M3:
    case NumFormat.E5M2:
      b[at] = code;
      break;
    case NumFormat.FP16:
    case NumFormat.BF16:
      b.writeUInt16LE(code, at);
      break;
    default:
      b.writeUInt32LE(code, at);
      break;
  }
}

// ---- lookup tables for the externs' hot loops -------------------------------------------------
// Built on first use from encodeValue/decodeValue (so they agree with them by
// construction), kept for the process: at most 8 add tables of 64 KiB, 20
// conversion tables from 8-bit formats (1 KiB) and 20 from 16-bit ones
// (256 KiB): about 5.7 MiB if a guest asked for every combination.

const addTables = new Map<number, Uint8Array>();
const convTables = new Map<number, Uint32Array>();

/** Codes of dst + src for two fp8 formats, indexed (dstCode << 8) | srcCode, rounded once into `dst`. */
export function addTable(src: NumFormat, dst: NumFormat, saturate: boolean): Uint8Array {
  const key = src * 16 + dst * 2 + (saturate ? 1 : 0);
  let t = addTables.get(key);
  if (!t) {
    t = new Uint8Array(65536);
    const sv = src === NumFormat.E4M3 ? E4M3_VALUES : E5M2_VALUES;
    const dv = dst === NumFormat.E4M3 ? E4M3_VALUES : E5M2_VALUES;
    for (let d = 0; d < 256; d++)
      for (let s = 0; s < 256; s++) t[(d << 8) | s] = encodeValue(dst, dv[d]! + sv[s]!, saturate);
    addTables.set(key, t);
  }
  return t;
}

/** Codes in `dst` of every code of an 8- or 16-bit format `src` (index: the source code). */
export function convertTable(src: NumFormat, dst: NumFormat, saturate: boolean): Uint32Array {
  const key = src * 16 + dst * 2 + (saturate ? 1 : 0);
  let t = convTables.get(key);
  if (!t) {
    const n = formatBytes(src) === 1 ? 256 : 65536;
    t = new Uint32Array(n);
    for (let c = 0; c < n; c++) t[c] = encodeValue(dst, decodeValue(src, c), saturate);
    convTables.set(key, t);
  }
  return t;
}
