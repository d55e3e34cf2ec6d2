// The one field codec of the project: a field is an offset, a size and a byte
// order, declared in a named-offset table (protocol/layouts.ts for vfio-user,
// lib/ionic/layouts.ts, lib/ionic/rdma/layouts.ts, lib/rdma/datapath/*), and
// read or written only through the functions here.
//
// - Numeric fields (`Field`): 1, 2, 4 or 8 bytes, little- or big-endian. A u64
//   above 2^53-1 reads as U64_UNSAFE (never a wrong number): no address,
//   length or id the device accepts is negative. getFieldBig/setFieldBig
//   read and write a u64 whole, as a bigint.
// - Opaque bytes (`RawField`): copied verbatim (wqe_id cookies, MACs,
//   reserved areas); read as host-order words or copied as bytes.
//
// Writes are checked: a value that does not fit its field is our bug (guest
// input is validated or masked before it is written back), so it throws a
// RangeError rather than writing something else. Nothing here allocates or
// builds a closure per call: these run on every doorbell and every WQE.

/** Size of a numeric field in bytes. */
type FieldSize = 1 | 2 | 4 | 8;

/** Byte order of a numeric field. */
type ByteOrder = 'le' | 'be';

/** A numeric field: offset from the start of its structure, size, byte order. */
export interface Field {
  readonly off: number;
  readonly size: FieldSize;
  readonly order: ByteOrder;
}

/** Opaque bytes at an offset, copied verbatim (any size). */
export interface RawField {
  readonly off: number;
  readonly size: number;
  readonly order: 'raw';
}

/** A little-endian field. */
export function le(off: number, size: FieldSize): Field {
  return { off, size, order: 'le' };
}

/** A big-endian field. */
export function be(off: number, size: FieldSize): Field {
  return { off, size, order: 'be' };
}

/** Opaque bytes. */
export function raw(off: number, size: number): RawField {
  return { off, size, order: 'raw' };
}

/** A u64 that does not fit a JS number exactly (above 2^53 - 1) reads as this. */
export const U64_UNSAFE = -1;

const TWO_32 = 0x100000000;
/** Largest high word of a u64 that is still a safe integer. */
const SAFE_HI = 0x1fffff;

/** Read an unsigned field. A u64 above 2^53-1 comes back as U64_UNSAFE. The caller checks the buffer length. */
export function getField(buf: Buffer, base: number, f: Field): number {
  const at = base + f.off;
  const bigEndian = f.order === 'be';
  switch (f.size) {
    case 1:
      return buf[at]!;
    case 2:
      return bigEndian ? buf.readUInt16BE(at) : buf.readUInt16LE(at);
    case 4:
      return bigEndian ? buf.readUInt32BE(at) : buf.readUInt32LE(at);
    case 8: {
      const hi = bigEndian ? buf.readUInt32BE(at) : buf.readUInt32LE(at + 4);
      if (hi > SAFE_HI) return U64_UNSAFE;
      return hi * TWO_32 + (bigEndian ? buf.readUInt32BE(at + 4) : buf.readUInt32LE(at));
    }
  }
}

/**
 * Write an unsigned field. The value must fit: 0 <= value < 2^(8 * size), and
 * <= 2^53-1 for a u64; anything else throws a RangeError (our bug).
 */
export function setField(buf: Buffer, base: number, f: Field, value: number): void {
  const at = base + f.off;
  const bigEndian = f.order === 'be';
  switch (f.size) {
    case 1:
      buf.writeUInt8(value, at);
      return;
    case 2:
      if (bigEndian) buf.writeUInt16BE(value, at);
      else buf.writeUInt16LE(value, at);
      return;
    case 4:
      if (bigEndian) buf.writeUInt32BE(value, at);
      else buf.writeUInt32LE(value, at);
      return;
    case 8: {
      if (!(value >= 0 && value <= Number.MAX_SAFE_INTEGER)) {
        throw new RangeError(`u64 field at ${f.off}: ${value} is not an integer in 0..2^53-1`);
      }
      const hi = Math.floor(value / TWO_32);
      const lo = value % TWO_32;
      if (bigEndian) {
        buf.writeUInt32BE(hi, at);
        buf.writeUInt32BE(lo, at + 4);
      } else {
        buf.writeUInt32LE(lo, at);
        buf.writeUInt32LE(hi, at + 4);
      }
      return;
    }
  }
}

const U64_MAX = 0xffffffffffffffffn;

/** Read a u64 field exactly, as a bigint (for values the caller keeps whole past 2^53: remote addresses, atomic operands). */
export function getFieldBig(buf: Buffer, base: number, f: Field): bigint {
  if (f.size !== 8) throw new RangeError(`field at ${f.off} is ${f.size} bytes, not a u64`);
  return f.order === 'be' ? buf.readBigUInt64BE(base + f.off) : buf.readBigUInt64LE(base + f.off);
}

/** Write a u64 field from a bigint in 0..2^64-1; anything else (or a field that is not 8 bytes) throws a RangeError (our bug). */
export function setFieldBig(buf: Buffer, base: number, f: Field, value: bigint): void {
  if (f.size !== 8) throw new RangeError(`field at ${f.off} is ${f.size} bytes, not a u64`);
  if (value < 0n || value > U64_MAX) throw new RangeError(`u64 field at ${f.off}: ${value} is not in 0..2^64-1`);
  if (f.order === 'be') buf.writeBigUInt64BE(value, base + f.off);
  else buf.writeBigUInt64LE(value, base + f.off);
}

/** A u64 split into two u32 fields (high and low words, as some WQE bodies carry addresses); U64_UNSAFE above 2^53-1. */
export function getSplitU64(buf: Buffer, base: number, hi: Field, lo: Field): number {
  const h = getField(buf, base, hi);
  if (h > SAFE_HI) return U64_UNSAFE;
  return h * TWO_32 + getField(buf, base, lo);
}

/**
 * 32-bit word `word` of an opaque field, read in host (little-endian) order:
 * writing it back with setRawWord reproduces the bytes verbatim.
 */
export function getRawWord(buf: Buffer, base: number, f: RawField, word: number): number {
  return buf.readUInt32LE(base + f.off + word * 4);
}

/** Write 32-bit word `word` of an opaque field in host (little-endian) order (the value is taken modulo 2^32). */
export function setRawWord(buf: Buffer, base: number, f: RawField, word: number, value: number): void {
  buf.writeUInt32LE(value >>> 0, base + f.off + word * 4);
}

/** Copy `src` into an opaque field; the bytes `src` does not cover (all of them for null) become zero. */
export function setRawBytes(buf: Buffer, base: number, f: RawField, src: Buffer | null): void {
  const at = base + f.off;
  const n = src ? src.copy(buf, at, 0, Math.min(src.length, f.size)) : 0;
  if (n < f.size) buf.fill(0, at + n, at + f.size);
}

/** A view of an opaque field (no copy). */
export function viewRaw(buf: Buffer, base: number, f: RawField): Buffer {
  return buf.subarray(base + f.off, base + f.off + f.size);
}
