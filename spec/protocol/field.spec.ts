// protocol/field.ts, the one field codec: both byte orders at every size
// (bytes written out by hand), the u64 edge at 2^53, checked writes, split
// u64 addresses, whole u64s as bigint and opaque fields.
import { expect } from 'chai';
import {
  be,
  getField,
  getFieldBig,
  getRawWord,
  getSplitU64,
  le,
  raw,
  setField,
  setFieldBig,
  setRawBytes,
  setRawWord,
  U64_UNSAFE,
  viewRaw,
} from '../../protocol/field';

describe('protocol/field: the field codec', () => {
  it('builds fields with their byte order', () => {
    expect(le(4, 2)).to.deep.equal({ off: 4, size: 2, order: 'le' });
    expect(be(8, 8)).to.deep.equal({ off: 8, size: 8, order: 'be' });
    expect(raw(12, 6)).to.deep.equal({ off: 12, size: 6, order: 'raw' });
  });

  it('reads and writes both byte orders at base + offset', () => {
    const b = Buffer.alloc(20);
    setField(b, 2, be(0, 4), 0x01020304);
    setField(b, 2, le(4, 4), 0x01020304);
    setField(b, 2, be(8, 2), 0xa1b2);
    setField(b, 2, le(10, 2), 0xa1b2);
    setField(b, 2, be(12, 1), 0x7f);
    expect(b.toString('hex')).to.equal('0000' + '01020304' + '04030201' + 'a1b2' + 'b2a1' + '7f' + '0000000000');
    expect(getField(b, 2, be(0, 4))).to.equal(0x01020304);
    expect(getField(b, 2, le(4, 4))).to.equal(0x01020304);
    expect(getField(b, 2, be(8, 2))).to.equal(0xa1b2);
    expect(getField(b, 2, le(10, 2))).to.equal(0xa1b2);
    expect(getField(b, 2, le(12, 1))).to.equal(0x7f);
  });

  it('u64 in both orders up to 2^53-1; above it reads as U64_UNSAFE, never a wrong number', () => {
    const b = Buffer.alloc(16);
    setField(b, 0, be(0, 8), 2 ** 40 + 5);
    setField(b, 0, le(8, 8), Number.MAX_SAFE_INTEGER);
    expect(b.toString('hex')).to.equal('0000010000000005' + 'ffffffffffff1f00');
    expect(getField(b, 0, be(0, 8))).to.equal(2 ** 40 + 5);
    expect(getField(b, 0, le(8, 8))).to.equal(Number.MAX_SAFE_INTEGER);
    expect(U64_UNSAFE).to.equal(-1);
    for (const v of [2n ** 53n, 2n ** 63n, 0xffffffffffffffffn]) {
      b.writeBigUInt64BE(v, 0);
      b.writeBigUInt64LE(v, 8);
      expect(getField(b, 0, be(0, 8)), v.toString()).to.equal(U64_UNSAFE);
      expect(getField(b, 0, le(8, 8)), v.toString()).to.equal(U64_UNSAFE);
    }
  });

  it('refuses a value that does not fit its field (our bug) with a RangeError, writing nothing', () => {
    const b = Buffer.alloc(8);
    expect(() => setField(b, 0, le(0, 1), 0x100)).to.throw(RangeError);
    expect(() => setField(b, 0, be(0, 2), 0x10000)).to.throw(RangeError);
    expect(() => setField(b, 0, le(0, 4), -1)).to.throw(RangeError);
    expect(() => setField(b, 0, be(0, 8), 2 ** 53)).to.throw(RangeError);
    expect(() => setField(b, 0, le(0, 8), -1)).to.throw(RangeError);
    expect(() => setField(b, 0, le(0, 8), Number.NaN)).to.throw(RangeError);
    expect(b.toString('hex')).to.equal('0000000000000000');
  });

  it('a u64 split into high and low u32 words', () => {
    const b = Buffer.from('001fffff' + 'fffffff0' + '00200000' + '00000000', 'hex');
    expect(getSplitU64(b, 0, be(0, 4), be(4, 4))).to.equal(Number.MAX_SAFE_INTEGER - 15);
    expect(getSplitU64(b, 8, be(0, 4), be(4, 4))).to.equal(U64_UNSAFE);
  });

  it('opaque fields: host-order words copied verbatim, bytes zero-filled past the source', () => {
    const id = raw(4, 8);
    const b = Buffer.from('aaaaaaaa' + '0102030405060708' + 'bbbb', 'hex');
    const lo = getRawWord(b, 0, id, 0);
    const hi = getRawWord(b, 0, id, 1);
    const out = Buffer.alloc(14);
    setRawWord(out, 2, raw(0, 8), 0, lo);
    setRawWord(out, 2, raw(0, 8), 1, hi);
    expect(out.subarray(2, 10).toString('hex')).to.equal('0102030405060708');
    expect(viewRaw(b, 0, id).toString('hex')).to.equal('0102030405060708');
    const mac = raw(2, 6);
    const m = Buffer.alloc(10, 0xee);
    setRawBytes(m, 0, mac, Buffer.from('0a0b', 'hex'));
    expect(m.toString('hex')).to.equal('eeee' + '0a0b00000000' + 'eeee');
    setRawBytes(m, 0, mac, Buffer.from('0102030405060708', 'hex'));
    expect(m.toString('hex')).to.equal('eeee' + '010203040506' + 'eeee');
    setRawBytes(m, 0, mac, null);
    expect(m.toString('hex')).to.equal('eeee' + '000000000000' + 'eeee');
  });
  it('a whole u64 as a bigint in both orders; out of range or not a u64 field throws, writing nothing', () => {
    const b = Buffer.alloc(18);
    setFieldBig(b, 2, be(0, 8), 0x0102030405060708n);
    setFieldBig(b, 2, le(8, 8), 0xffffffffffffffffn);
    expect(b.toString('hex')).to.equal('0000' + '0102030405060708' + 'ffffffffffffffff');
    expect(getFieldBig(b, 2, be(0, 8))).to.equal(0x0102030405060708n);
    expect(getFieldBig(b, 2, le(8, 8))).to.equal(0xffffffffffffffffn);
    expect(getFieldBig(b, 2, le(0, 8))).to.equal(0x0807060504030201n);
    const z = Buffer.alloc(8);
    expect(() => setFieldBig(z, 0, le(0, 8), -1n)).to.throw(RangeError);
    expect(() => setFieldBig(z, 0, be(0, 8), 2n ** 64n)).to.throw(RangeError);
    expect(() => setFieldBig(z, 0, le(0, 4), 1n)).to.throw(RangeError);
    expect(() => getFieldBig(z, 0, be(0, 4))).to.throw(RangeError);
    expect(z.toString('hex')).to.equal('0000000000000000');
  });
});
