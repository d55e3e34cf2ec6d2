import { expect } from 'chai';
import { PciFunction } from '../../lib/pci';
import { Cfg, fakeContext, nicSpec } from './helpers';
import type { FakeContext } from './helpers';

const INTX = 0;
const STATUS = 0x06;
const COMMAND = 0x04;
const INTX_DISABLE = 0x0400;

function setup(intx = true): { fn: PciFunction; cfg: Cfg; fake: FakeContext } {
  const fn = new PciFunction(nicSpec({ intx }));
  const fake = fakeContext(true);
  fn.attach(fake.ctx);
  return { fn, cfg: new Cfg(fn), fake };
}

describe('pci/intx', () => {
  it('signals once per assertion edge and mirrors the level in STATUS.INTERRUPT', () => {
    const { fn, cfg, fake } = setup();
    expect(fn.intx.assert()).to.equal(true);
    expect(fn.intx.assert()).to.equal(false); // already high: no new edge
    expect(fake.signalIrq.args).to.deep.equal([[INTX, 0]]);
    expect(cfg.r16(STATUS)).to.equal(0x0018);
    fn.intx.deassert();
    expect(cfg.r16(STATUS)).to.equal(0x0010);
    fn.intx.assert();
    expect(fake.signalIrq.callCount).to.equal(2);
  });

  it('keeps STATUS.INTERRUPT read-only to the bus', () => {
    const { fn, cfg } = setup();
    fn.intx.assert();
    cfg.w16(STATUS, 0xffff);
    expect(cfg.r16(STATUS)).to.equal(0x0018);
  });

  it('re-signals on unmask (EOI/resample) only while still asserted', () => {
    const { fn, fake } = setup();
    fn.intx.assert();
    fn.irqChanged({ index: INTX, start: 0, count: 1, kind: 'unmask' });
    expect(fake.signalIrq.callCount).to.equal(2);
    fn.intx.deassert();
    fn.irqChanged({ index: INTX, start: 0, count: 1, kind: 'unmask' });
    expect(fake.signalIrq.callCount).to.equal(2);
  });

  it('signals a level already high when the eventfd gets wired', () => {
    const fn = new PciFunction(nicSpec());
    const fake = fakeContext(false);
    fn.attach(fake.ctx);
    fn.intx.assert();
    fake.signalIrq.returns(true);
    fn.irqChanged({ index: INTX, start: 0, count: 1, kind: 'wired' });
    expect(fake.signalIrq.args).to.deep.equal([
      [INTX, 0],
      [INTX, 0],
    ]);
  });

  it('holds the line while COMMAND.INTX_DISABLE is set and signals when it clears', () => {
    const { fn, cfg, fake } = setup();
    cfg.w16(COMMAND, 0x0006 | INTX_DISABLE);
    fn.intx.assert();
    expect(fake.signalIrq.callCount).to.equal(0);
    expect(cfg.r16(STATUS)).to.equal(0x0018); // status shows the level even when disabled
    fn.irqChanged({ index: INTX, start: 0, count: 1, kind: 'unmask' });
    expect(fake.signalIrq.callCount).to.equal(0);
    cfg.w16(COMMAND, 0x0006);
    expect(fake.signalIrq.args).to.deep.equal([[INTX, 0]]);
    cfg.w16(COMMAND, 0x0006); // no change, no new edge
    expect(fake.signalIrq.callCount).to.equal(1);
  });

  it('stays quiet while MSI-X is enabled', () => {
    const { fn, cfg, fake } = setup();
    cfg.w16(0x4a, 0x8000);
    fn.intx.assert();
    expect(fake.signalIrq.callCount).to.equal(0);
    cfg.w16(0x4a, 0x0000);
    expect(fake.signalIrq.args).to.deep.equal([[INTX, 0]]);
  });

  it('does not fire again on a trigger event (the server already signalled the eventfd)', () => {
    const { fn, fake } = setup();
    fn.irqChanged({ index: INTX, start: 0, count: 1, kind: 'trigger' });
    expect(fake.signalIrq.callCount).to.equal(0);
  });

  it('is inert without an INTx declaration', () => {
    const { fn, cfg, fake } = setup(false);
    expect(fn.irqCount(INTX)).to.equal(0);
    expect(cfg.r8(0x3d)).to.equal(0);
    expect(fn.intx.assert()).to.equal(false);
    fn.irqChanged({ index: INTX, start: 0, count: 1, kind: 'unmask' });
    expect(fake.signalIrq.callCount).to.equal(0);
    expect(cfg.r16(STATUS)).to.equal(0x0010);
  });

  it('does not signal while detached, and survives detach', () => {
    const { fn, fake } = setup();
    fn.detach();
    expect(fn.intx.assert()).to.equal(false);
    expect(fake.signalIrq.callCount).to.equal(0);
    expect(fn.intx.asserted).to.equal(true);
  });
});
