import { expect } from 'chai';
import { flowLabelOfQpns, udpSourcePort, udpSourcePortOfFlowLabel } from '../../lib/roce/flow';

describe('roce/flow', () => {
  // Expected values worked out by hand from the kernel's definitions (64-bit product, two folds, 14-bit fold).
  it('derives the flow label from the QPNs with a 64-bit product', () => {
    expect(flowLabelOfQpns(0x11, 0x22)).to.equal(0x242);
    expect(flowLabelOfQpns(0xffffff, 0xffffff)).to.equal(0xfff1e);
    expect(flowLabelOfQpns(0x123456, 0x654321)).to.equal(0xa77ae);
  });

  it('folds a flow label into 0xC000-0xFFFF', () => {
    expect(udpSourcePortOfFlowLabel(0xfffff)).to.equal(0xffc0);
    expect(udpSourcePortOfFlowLabel(0x12345)).to.equal(0xe341);
    expect(udpSourcePortOfFlowLabel(0)).to.equal(0xc000);
  });

  it('uses the flow label when there is one, else the QPN hash', () => {
    expect(udpSourcePort(0x12345, 1, 2)).to.equal(0xe341);
    expect(udpSourcePort(0, 0x11, 0x22)).to.equal(0xc242);
    expect(udpSourcePort(0, 0xffffff, 0xffffff)).to.equal(0xff21);
  });
});
