// Little-endian helpers and raw command/descriptor builders of the guest
// model: ours, on purpose (never lib/ionic's), so a misreading of the
// contract in the device fails a test instead of being mirrored.

export function u64(buf: Buffer, at: number): number {
  const v = buf.readBigUInt64LE(at);
  if (v > BigInt(Number.MAX_SAFE_INTEGER)) throw new RangeError(`u64 at ${at} is past 2^53`);
  return Number(v);
}

export function putU64(buf: Buffer, at: number, v: number | bigint): void {
  if (typeof v === 'number' && Number.isSafeInteger(v) && v >= 0) {
    // The common case (addresses and lengths), without a BigInt per call: two 32-bit halves.
    buf.writeUInt32LE(v % 0x100000000, at);
    buf.writeUInt32LE(Math.floor(v / 0x100000000), at + 4);
    return;
  }
  buf.writeBigUInt64LE(BigInt.asUintN(64, BigInt(v)), at);
}

export function u32le(v: number): Buffer {
  const b = Buffer.alloc(4);
  b.writeUInt32LE(v >>> 0, 0);
  return b;
}

/** A 64-byte command with the opcode set; fields are filled by the caller. */
export function command(opcode: number): Buffer {
  const c = Buffer.alloc(64);
  c[0] = opcode;
  return c;
}

/** cmd = flags (bits 0..3) | opcode (4..7) | nsge (8..11) | address (12..63). */
export function txCmd(opcode: number, flags: number, nsge: number, addr: number): bigint {
  return (
    BigInt(flags & 0xf) |
    (BigInt(opcode & 0xf) << 4n) |
    (BigInt(nsge & 0xf) << 8n) |
    ((BigInt(addr) & ((1n << 52n) - 1n)) << 12n)
  );
}

/** A raw 16-byte TX descriptor. */
export function txDesc(opcode: number, nsge: number, addr: number, len: number): Buffer {
  const d = Buffer.alloc(16);
  d.writeBigUInt64LE(txCmd(opcode, 0, nsge, addr), 0);
  d.writeUInt16LE(len & 0xffff, 8);
  return d;
}
