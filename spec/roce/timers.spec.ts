import { expect } from 'chai';
import { ackTimeoutMs, rnrTimerMs, timerDelayMs } from '../../lib/roce/timers';

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
