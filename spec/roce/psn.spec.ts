import { expect } from 'chai';
import { psnAdd, psnDiff } from '../../lib/roce/psn';

describe('roce/psn', () => {
  it('wraps at 2^24', () => {
    expect(psnAdd(0xffffff, 1)).to.equal(0);
    expect(psnAdd(0xfffffe, 5)).to.equal(3);
    expect(psnAdd(0, -1)).to.equal(0xffffff);
  });

  it('compares across the wrap: 0 is after 0xffffff, by one', () => {
    expect(psnDiff(0, 0xffffff)).to.equal(1);
    expect(psnDiff(0xffffff, 0)).to.equal(-1);
    expect(psnDiff(5, 0xfffffb)).to.equal(10);
    expect(psnDiff(0x123456, 0x123456)).to.equal(0);
    expect(psnDiff(0x7fffff, 0)).to.equal(0x7fffff);
    expect(psnDiff(0x800001, 0)).to.equal(-0x7fffff);
  });
});
