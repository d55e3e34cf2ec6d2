// Test-only helpers for the RDMA data-path specs. The byte poker writes values
// at offsets the tests spell out from docs/driver-contract.md (ionic RDMA); it
// shares no code with the codecs under test.

/** A zeroed buffer with explicit-offset big/little-endian writers. */
export class Poke {
  readonly buf: Buffer;
  constructor(size: number) {
    this.buf = Buffer.alloc(size);
  }
  u8(off: number, v: number): this {
    this.buf[off] = v & 0xff;
    return this;
  }
  be16(off: number, v: number): this {
    return this.u8(off, v >>> 8).u8(off + 1, v);
  }
  be32(off: number, v: number): this {
    return this.be16(off, v >>> 16).be16(off + 2, v & 0xffff);
  }
  be64(off: number, v: bigint | number): this {
    const b = BigInt(v);
    return this.be32(off, Number(b >> 32n)).be32(off + 4, Number(b & 0xffffffffn));
  }
  le16(off: number, v: number): this {
    return this.u8(off, v).u8(off + 1, v >>> 8);
  }
  le32(off: number, v: number): this {
    return this.le16(off, v & 0xffff).le16(off + 2, v >>> 16);
  }
  le64(off: number, v: bigint | number): this {
    const b = BigInt(v);
    return this.le32(off, Number(b & 0xffffffffn)).le32(off + 4, Number(b >> 32n));
  }
  bytes(off: number, data: Iterable<number>): this {
    let i = off;
    for (const x of data) this.u8(i++, x);
    return this;
  }
  /** An ionic_sge: va BE64 @0, len BE32 @8, lkey BE32 @12. */
  sge(off: number, va: bigint | number, len: number, lkey: number): this {
    return this.be64(off, va)
      .be32(off + 8, len)
      .be32(off + 12, lkey);
  }
}

/** Hex string (spaces allowed) to bytes. */
export function hex(s: string): Buffer {
  return Buffer.from(s.replace(/\s+/g, ''), 'hex');
}
