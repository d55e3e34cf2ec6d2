// The Internet checksum against a plain RFC 1071 reference: random spans at
// every alignment (the fast path reads 32-bit words where the span starts
// on an even address, bytes elsewhere), odd lengths, and initial sums.

import { expect } from 'chai';
import { randomBytes } from 'crypto';
import { onesComplementSum } from '../../lib/net/checksum';

function reference(b: Uint8Array, start: number, end: number, sum: number): number {
  let s = sum;
  for (let i = start; i < end; i += 2) s += (b[i]! << 8) | (i + 1 < end ? b[i + 1]! : 0);
  while (s > 0xffff) s = (s & 0xffff) + (s >>> 16);
  return s;
}

describe('net: the ones-complement sum (RFC 1071)', () => {
  it('matches the byte-by-byte reference at every start alignment, odd and even lengths, short and long spans', () => {
    const buf = randomBytes(70000);
    for (const start of [0, 1, 2, 3, 14, 35]) {
      for (const len of [0, 1, 2, 63, 64, 65, 1460, 1461, 9000, 65535]) {
        for (const init of [0, 0xffff, 0x1234]) {
          expect(onesComplementSum(buf, start, start + len, init), `start ${start} len ${len}`).to.equal(
            reference(buf, start, start + len, init),
          );
        }
      }
    }
  });

  it('matches at every address modulo 4 (the fast path reads 32-bit words from a 4-byte boundary)', () => {
    const ab = new ArrayBuffer(12000);
    randomBytes(12000).copy(Buffer.from(ab));
    for (let off = 0; off < 4; off++) {
      const b = Buffer.from(ab, off, 11000);
      for (const start of [0, 1, 2, 3, 34]) {
        for (const len of [64, 65, 66, 67, 1480, 1481, 8980]) {
          expect(onesComplementSum(b, start, start + len), `offset ${off} start ${start} len ${len}`).to.equal(
            reference(b, start, start + len, 0),
          );
        }
      }
    }
  });

  it('all ones and all zeros: the folds end where the reference ends', () => {
    for (const fill of [0, 0xff]) {
      const b = Buffer.alloc(65536, fill);
      expect(onesComplementSum(b, 0, b.length)).to.equal(reference(b, 0, b.length, 0));
    }
  });
});
