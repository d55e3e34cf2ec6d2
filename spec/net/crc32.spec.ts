import { expect } from 'chai';
import { crc32 } from 'zlib';
import { checksumOf, onesComplementSum } from '../../lib/net/checksum';
import { crc32Finish, crc32Update, CRC32_INIT } from '../../lib/net/crc32';
import { xorshift } from '../support/rng';

describe('net/crc32', () => {
  it('matches zlib.crc32 over whole buffers of every length 0..40 and some long ones', () => {
    const next = xorshift(0x5eed01);
    for (const n of [...Array.from({ length: 41 }, (_, i) => i), 1000, 4096, 9001]) {
      const b = Buffer.alloc(n);
      for (let i = 0; i < n; i++) b[i] = next() & 0xff;
      expect(crc32Finish(crc32Update(CRC32_INIT, b, 0, n)), `length ${n}`).to.equal(crc32(b));
    }
  });

  it('fed in pieces at any split gives the CRC of the whole', () => {
    const next = xorshift(0x5eed02);
    const b = Buffer.alloc(100);
    for (let i = 0; i < b.length; i++) b[i] = next() & 0xff;
    for (let split = 0; split <= b.length; split += 7) {
      const s = crc32Update(crc32Update(CRC32_INIT, b, 0, split), b, split, b.length);
      expect(crc32Finish(s), `split ${split}`).to.equal(crc32(b));
    }
  });

  it('long ranges (the native path) agree with the table walk fed in short pieces, at any offset and state', () => {
    const next = xorshift(0x5eed03);
    const b = Buffer.alloc(9100);
    for (let i = 0; i < b.length; i++) b[i] = next() & 0xff;
    for (const n of [511, 512, 513, 1000, 4096, 9001]) {
      for (const start of [0, 3, 77]) {
        // A running state from a short head first, as the ICRC feeds masked headers then the payload.
        const head = crc32Update(CRC32_INIT, b, b.length - 40, b.length);
        let walked = head;
        for (let at = start; at < start + n; at += 100)
          walked = crc32Update(walked, b, at, Math.min(at + 100, start + n));
        expect(crc32Update(head, b, start, start + n), `length ${n} at ${start}`).to.equal(walked);
      }
    }
  });

  it('covers only the range it is given', () => {
    const b = Buffer.from('xx123456789yy');
    // The CRC-32 check value of "123456789".
    expect(crc32Finish(crc32Update(CRC32_INIT, b, 2, 11))).to.equal(0xcbf43926);
  });
});

describe('net/checksum', () => {
  it('gives the IPv4 header checksum of a known header', () => {
    // RFC 1071-style example: 45 00 00 73 00 00 40 00 40 11 [b8 61] c0 a8 00 01 c0 a8 00 c7
    const h = Buffer.from('450000730000400040110000c0a80001c0a800c7', 'hex');
    expect(checksumOf(onesComplementSum(h, 0, h.length))).to.equal(0xb861);
    h.writeUInt16BE(0xb861, 10);
    expect(onesComplementSum(h, 0, h.length)).to.equal(0xffff);
  });

  it('pads an odd last byte with zero and continues a running sum', () => {
    const b = Buffer.from([0x12, 0x34, 0x56]);
    expect(onesComplementSum(b, 0, 3)).to.equal(0x1234 + 0x5600);
    expect(onesComplementSum(b, 2, 3, 0xffff)).to.equal(((0xffff + 0x5600) & 0xffff) + 1);
  });
});
