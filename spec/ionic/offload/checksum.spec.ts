// The offloads' Internet checksum against a plain RFC 1071 reference
// (spec/support/ionic/tcp-frames.ts): random spans of every parity and
// offset, initial sums, folding, and the IPv4 and IPv6 pseudo-header sums.

import { expect } from 'chai';
import { addSums, checksumOf, fold, ipv4PseudoSum, ipv6PseudoSum, onesSum } from '../../../lib/ionic/offload/checksum';
import { xorshift } from '../../support/rng';
import { pattern, pseudo, rfc1071Sum, tcpFrame } from '../../support/ionic/tcp-frames';

describe('ionic offloads: RFC 1071 checksum', () => {
  it('matches the reference on random spans of every length 0..70 and at odd and even offsets', () => {
    const next = xorshift(20261206);
    const buf = Buffer.alloc(200);
    for (let i = 0; i < buf.length; i++) buf[i] = next() & 0xff;
    for (let len = 0; len <= 70; len++) {
      for (const at of [0, 1, 2, 7]) {
        expect(onesSum(buf, at, len), `len ${len} at ${at}`).to.equal(rfc1071Sum(buf.subarray(at, at + len)));
      }
    }
  });

  it('matches the reference on a 64 KiB span of all ones (the largest sum a frame makes) and of zeros', () => {
    const ones = Buffer.alloc(65536, 0xff);
    expect(onesSum(ones, 0, ones.length)).to.equal(rfc1071Sum(ones));
    expect(onesSum(Buffer.alloc(65536), 0, 65536)).to.equal(0);
  });

  it('adds an initial sum, and sums add in any order (split spans at even offsets agree with the whole)', () => {
    const b = pattern(1501, 3);
    const whole = onesSum(b, 0, b.length);
    for (const cut of [0, 2, 14, 600, 1500]) {
      expect(onesSum(b, cut, b.length - cut, onesSum(b, 0, cut))).to.equal(whole);
      expect(addSums(onesSum(b, 0, cut), onesSum(b, cut, b.length - cut))).to.equal(whole);
    }
  });

  it('folds with end-around carry, and checksumOf inverts: a span with its checksum appended sums to 0xffff', () => {
    expect(fold(0x1ffff)).to.equal(0x1);
    expect(fold(0xffff)).to.equal(0xffff);
    expect(fold(2 ** 52)).to.equal(rfc1071SumOfNumber(2 ** 52));
    const b = pattern(40, 9);
    const c = checksumOf(onesSum(b, 0, b.length));
    const withSum = Buffer.concat([b, Buffer.from([c >> 8, c & 0xff])]);
    expect(rfc1071Sum(withSum)).to.equal(0xffff);
  });

  it('pseudo-header sums equal the reference over the pseudo-header bytes, IPv4 and IPv6 (a 32-bit length)', () => {
    const v4 = tcpFrame({ payload: pattern(10) });
    expect(ipv4PseudoSum(v4.frame, v4.l3, 6, 1234)).to.equal(rfc1071Sum(pseudo(v4.frame, v4.l3, 1234)));
    const v6 = tcpFrame({ v6: true, payload: pattern(10) });
    for (const len of [0, 1234, 65535, 70000]) {
      expect(ipv6PseudoSum(v6.frame, v6.l3, 6, len), `len ${len}`).to.equal(rfc1071Sum(pseudo(v6.frame, v6.l3, len)));
    }
  });
});

/** A number as 16-bit words, summed and folded by the reference. */
function rfc1071SumOfNumber(n: number): number {
  const b = Buffer.alloc(8);
  b.writeBigUInt64BE(BigInt(n));
  return rfc1071Sum(b);
}
