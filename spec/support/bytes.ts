// A deliberately simple byte builder for expected test bytes. It shares no code
// with the serializer under test, so a mistake there cannot hide here.

export class Bytes {
  private readonly parts: number[] = [];
  u8(v: number): this {
    this.parts.push(v & 0xff);
    return this;
  }
  u16(v: number): this {
    return this.u8(v).u8(v >>> 8);
  }
  u32(v: number): this {
    return this.u16(v & 0xffff).u16(v >>> 16);
  }
  u64(v: number | bigint): this {
    const b = BigInt(v);
    return this.u32(Number(b & 0xffffffffn)).u32(Number((b >> 32n) & 0xffffffffn));
  }
  raw(bytes: Iterable<number>): this {
    for (const x of bytes) this.u8(x);
    return this;
  }
  text(s: string): this {
    return this.raw(Buffer.from(s, 'utf8'));
  }
  zeros(n: number): this {
    for (let i = 0; i < n; i++) this.u8(0);
    return this;
  }
  get length(): number {
    return this.parts.length;
  }
  build(): Buffer {
    return Buffer.from(this.parts);
  }
}

/** A whole message: header (msg_size computed) + payload. */
export function msg(id: number, command: number, flags: number, payload: Buffer = Buffer.alloc(0), error = 0): Buffer {
  return Buffer.concat([
    new Bytes()
      .u16(id)
      .u16(command)
      .u32(16 + payload.length)
      .u32(flags)
      .u32(error)
      .build(),
    payload,
  ]);
}
