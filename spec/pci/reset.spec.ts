import { expect } from 'chai';
import * as sinon from 'sinon';
import { PciFunction } from '../../lib/pci';
import type { DmaRange } from '../../lib/vfio-user/device';
import { Cfg, fakeContext, hex, nicSpec, regionRead, regionWrite } from './helpers';

// nicSpec layout: PM 0x40 (PMCSR 0x44), MSI-X 0x48 (control 0x4a), PCIe 0x54
// (DevCtl 0x5c, LnkCtl 0x64); MSI-X table at BAR0 0x8000, PBA at 0xa000.

/** Put the function in a used state: decoding, BARs assigned, MSI-X on, D3hot, DevCtl and LnkCtl tuned. */
function dirty(fn: PciFunction, cfg: Cfg): void {
  cfg.w16(0x04, 0x0547);
  cfg.w32(0x10, 0xfebf0000);
  cfg.w32(0x14, 0x1);
  cfg.w32(0x18, 0xfc000000);
  cfg.w8(0x3c, 11);
  cfg.w16(0x4a, 0xc000);
  regionWrite(fn.region(0), 0x8000, hex('00e0fffe 00000000 21400000 00000000'));
  fn.raiseMsix(0);
  cfg.w16(0x44, 0x0003);
  cfg.w16(0x5c, 0x203f); // error reporting, relaxed ordering, MPS 256, MRRS 512
  cfg.w16(0x64, 0x0043); // ASPM L0s+L1, common clock
  fn.intx.assert();
}

describe('pci/reset', () => {
  it('FLR through DevCtl bit 15 calls onReset("flr") and restores reset values', () => {
    const onReset = sinon.spy();
    const fn = new PciFunction(nicSpec({ onReset }));
    const cfg = new Cfg(fn);
    const fresh = cfg.bytes(0, 4096);
    fn.attach(fakeContext().ctx);
    dirty(fn, cfg);
    expect(fn.powerState).to.equal(3);

    cfg.w16(0x5c, 0x8000 | cfg.r16(0x5c));
    expect(onReset.args).to.deep.equal([['flr']]);
    expect(cfg.r16(0x04)).to.equal(0);
    expect(cfg.bytes(0x10, 12)).to.deep.equal(hex('04000000 00000000 08000000'));
    expect(cfg.r16(0x06)).to.equal(0x0010); // INTx level dropped with the device state
    expect(cfg.r16(0x4a)).to.equal(0x001f);
    expect(cfg.r16(0x44)).to.equal(0x0008);
    // FLR keeps Max_Payload_Size and the link control fields (PCIe 6.6.2); the FLR bit reads 0.
    expect(cfg.r16(0x5c)).to.equal(0x2830);
    expect(cfg.r16(0x64)).to.equal(0x0043);
    expect(regionRead(fn.region(0), 0x8000, 16)).to.deep.equal(hex('00000000 00000000 00000000 01000000'));
    expect(regionRead(fn.region(0), 0xa000, 8)).to.deep.equal(hex('0000000000000000'));
    expect(fn.msixEnabled || fn.busMasterEnabled || fn.intx.asserted).to.equal(false);
    expect(fn.powerState).to.equal(0);
    // Everything else is back to the reset image.
    const now = cfg.bytes(0, 4096);
    fresh.writeUInt16LE(0x2830, 0x5c);
    fresh.writeUInt16LE(0x0043, 0x64);
    expect(now).to.deep.equal(fresh);
  });

  it('device-reset restores the whole config space and the MSI-X structures', () => {
    const onReset = sinon.spy();
    const fn = new PciFunction(nicSpec({ onReset }));
    const cfg = new Cfg(fn);
    const fresh = cfg.bytes(0, 4096);
    dirty(fn, cfg);
    fn.reset('device-reset');
    expect(onReset.args).to.deep.equal([['device-reset']]);
    expect(cfg.bytes(0, 4096)).to.deep.equal(fresh);
    expect(fn.msix?.isPending(0)).to.equal(false);
    expect(fn.msix?.isVectorMasked(0)).to.equal(true);
  });

  it('lost-connection keeps config and interrupt state for the next client', () => {
    const onReset = sinon.spy();
    const fn = new PciFunction(nicSpec({ onReset }));
    const cfg = new Cfg(fn);
    dirty(fn, cfg);
    const before = cfg.bytes(0, 4096);
    fn.detach();
    fn.reset('lost-connection');
    expect(onReset.args).to.deep.equal([['lost-connection']]);
    expect(cfg.bytes(0, 4096)).to.deep.equal(before);
    expect(fn.msix?.isPending(0)).to.equal(true);
    expect(fn.intx.asserted).to.equal(true);
  });

  it('a reset clears pending MSI-X so nothing stale fires on re-enable', () => {
    const fn = new PciFunction(nicSpec());
    const fake = fakeContext();
    fn.attach(fake.ctx);
    const cfg = new Cfg(fn);
    fn.raiseMsix(3);
    fn.reset('device-reset');
    cfg.w16(0x4a, 0x8000);
    expect(fake.signalIrq.callCount).to.equal(0);
  });

  it('without reset support: no FLR in DevCap, bit 15 ignored', () => {
    const onReset = sinon.spy();
    const fn = new PciFunction(nicSpec({ resetSupported: false, onReset }));
    const cfg = new Cfg(fn);
    expect(fn.resetSupported).to.equal(false);
    expect(cfg.r32(0x58) & 0x1000_0000).to.equal(0);
    cfg.w16(0x04, 0x0006);
    cfg.w16(0x5c, 0x8000);
    expect(onReset.callCount).to.equal(0);
    expect(cfg.r16(0x04)).to.equal(0x0006);
  });

  it('forwards attach, detach and DMA events to the declaration', () => {
    const onAttach = sinon.spy();
    const onDetach = sinon.spy();
    const onDmaMapped = sinon.spy();
    const onDmaUnmapped = sinon.spy();
    const fn = new PciFunction(nicSpec({ onAttach, onDetach, onDmaMapped, onDmaUnmapped }));
    const { ctx } = fakeContext();
    fn.attach(ctx);
    expect(fn.context).to.equal(ctx);
    const range: DmaRange = { iova: 0x1000, size: 0x1000, readable: true, writable: true, mapped: true };
    fn.dmaMapped(range);
    fn.dmaUnmapped(range);
    fn.detach();
    expect(fn.context).to.equal(undefined);
    expect(onAttach.calledOnceWithExactly(ctx)).to.equal(true);
    expect(onDmaMapped.calledOnceWithExactly(range)).to.equal(true);
    expect(onDmaUnmapped.calledOnceWithExactly(range)).to.equal(true);
    expect(onDetach.calledOnce).to.equal(true);
  });
});
