import { expect } from 'chai';
import { psnAdd, psnDiff } from '../../lib/roce/psn';
import { ackTimeoutMs, rnrTimerMs, timerDelayMs } from '../../lib/roce/timers';

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

describe('roce/timers', () => {
  it('decodes the RNR timer codes of the IBTA table', () => {
    expect(rnrTimerMs(0)).to.equal(655.36);
    expect(rnrTimerMs(1)).to.equal(0.01);
    expect(rnrTimerMs(14)).to.equal(1.28);
    expect(rnrTimerMs(31)).to.equal(491.52);
    expect(rnrTimerMs(32 + 14)).to.equal(1.28);
  });

  it('decodes the local ACK timeout: 4.096 us * 2^t, 0 never', () => {
    expect(ackTimeoutMs(0)).to.equal(Infinity);
    expect(ackTimeoutMs(14)).to.be.closeTo(67.1, 0.1);
    expect(ackTimeoutMs(1)).to.be.closeTo(0.008192, 1e-9);
  });

  it('never asks setTimeout for less than a millisecond', () => {
    expect(timerDelayMs(0.01)).to.equal(1);
    expect(timerDelayMs(67.1)).to.equal(68);
  });
});
