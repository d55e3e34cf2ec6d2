import { expect } from 'chai';
import * as sinon from 'sinon';
import { ConfigSpace } from '../../lib/pci';
import { hex } from './helpers';

describe('pci/config-space', () => {
  function space(): ConfigSpace {
    const s = new ConfigSpace(256);
    s.define(0x00, 2, { reset: 0xabcd }); // RO
    s.define(0x04, 2, { reset: 0x0000, rw: 0x0407 }); // RW bits
    s.define(0x06, 2, { reset: 0xf910, w1c: 0xf900 }); // RO + W1C
    s.define(0x08, 4, { reset: 0x1122_3344, rw: 0xffff_0000, keepOnFlr: 0xff00_0000 });
    return s;
  }

  it('rejects sizes other than 256 and 4096', () => {
    expect(() => new ConfigSpace(512)).to.throw(RangeError);
    expect(new ConfigSpace(4096).size).to.equal(4096);
  });

  it('refuses a byte declared twice and fields outside the space', () => {
    const s = space();
    expect(() => s.define(0x01, 1, { reset: 0 })).to.throw(/declared twice/);
    expect(() => s.define(0xfe, 4, { reset: 0 })).to.throw(RangeError);
    expect(() => s.define(0x10, 5, { reset: 0 })).to.throw(RangeError);
  });

  it('reads reset values little-endian at any size and offset', () => {
    const s = space();
    const dst = Buffer.alloc(12);
    expect(s.read(0, dst)).to.equal(0);
    expect(dst).to.deep.equal(hex('cdab 0000 0000 10f9 44332211'));
    const one = Buffer.alloc(3);
    expect(s.read(0x09, one)).to.equal(0);
    expect(one).to.deep.equal(hex('332211'));
  });

  it('keeps read-only bits and applies only the RW mask', () => {
    const s = space();
    expect(s.write(0x00, hex('ffffffff'))).to.equal(0);
    expect(s.u16(0x00)).to.equal(0xabcd);
    s.write(0x04, hex('ffff'));
    expect(s.u16(0x04)).to.equal(0x0407);
    s.write(0x04, hex('0000'));
    expect(s.u16(0x04)).to.equal(0);
    s.write(0x08, hex('00000000'));
    expect(s.u32(0x08)).to.equal(0x0000_3344);
  });

  it('clears W1C bits written as 1 and leaves the others', () => {
    const s = space();
    s.write(0x06, hex('0001')); // clears bit 8 only
    expect(s.u16(0x06)).to.equal(0xf810);
    s.write(0x06, hex('ffff'));
    expect(s.u16(0x06)).to.equal(0x0010);
  });

  it('refuses out-of-range accesses without touching anything', () => {
    const s = space();
    const before = Buffer.alloc(256);
    s.read(0, before);
    const dst = Buffer.alloc(4, 0xee);
    expect(s.read(254, dst)).to.equal(22);
    expect(dst).to.deep.equal(hex('00000000'));
    expect(s.read(-1, Buffer.alloc(1))).to.equal(22);
    expect(s.read(1.5, Buffer.alloc(1))).to.equal(22);
    expect(s.read(0, Buffer.alloc(0))).to.equal(22);
    expect(s.write(256, hex('ff'))).to.equal(22);
    expect(s.write(253, hex('ffffffff'))).to.equal(22);
    expect(s.write(Number.NaN, hex('ff'))).to.equal(22);
    const after = Buffer.alloc(256);
    s.read(0, after);
    expect(after).to.deep.equal(before);
  });

  it('runs each overlapping hook once with old and new values', () => {
    const s = space();
    const cmd = sinon.spy();
    const word = sinon.spy();
    s.onWrite(0x04, 2, cmd);
    s.onWrite(0x08, 4, word);
    s.write(0x04, hex('0700 0000 44332211')); // 8 bytes over COMMAND, STATUS, 0x08
    expect(cmd.calledOnceWithExactly(0x0000, 0x0007)).to.equal(true);
    expect(word.calledOnceWithExactly(0x1122_3344, 0x1122_3344)).to.equal(true);
    s.write(0x0b, hex('77'));
    expect(word.secondCall.args).to.deep.equal([0x1122_3344, 0x7722_3344]);
    s.write(0x00, hex('0000'));
    expect(cmd.callCount).to.equal(1);
  });

  it('restores reset values, keeping FLR-preserved bits on request', () => {
    const s = space();
    s.write(0x04, hex('0700'));
    s.write(0x08, hex('0000aa55'));
    s.restore('flr');
    expect(s.u16(0x04)).to.equal(0);
    expect(s.u32(0x08)).to.equal(0x5522_3344);
    s.restore('full');
    expect(s.u32(0x08)).to.equal(0x1122_3344);
  });

  it('pokes device-owned bits past the masks, safely out of range', () => {
    const s = space();
    s.setBits(0x06, 2, 0x0008, true);
    expect(s.u16(0x06)).to.equal(0xf918);
    s.poke(0x00, 2, 0x1234);
    expect(s.u16(0x00)).to.equal(0x1234);
    expect(() => s.poke(300, 4, 1)).to.not.throw();
    expect(s.u32(300)).to.equal(0);
  });
});
