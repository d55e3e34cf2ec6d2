import { expect } from 'chai';
import { PciFunction } from '../../lib/pci';
import { Cfg, fakeContext, hex, nicSpec, regionRead, regionWrite } from './helpers';
import type { FakeContext } from './helpers';

// nicSpec: 32 vectors, table at BAR0 0x8000, PBA at BAR0 0xa000, MSI-X
// capability at 0x48 (message control at 0x4a).
const MSIX = 2;
const CTRL = 0x4a;
const ENABLE = 0x8000;
const MASKALL = 0x4000;
const TABLE = 0x8000;
const PBA = 0xa000;

function setup(wired = true): { fn: PciFunction; cfg: Cfg; fake: FakeContext } {
  const fn = new PciFunction(nicSpec());
  const fake = fakeContext(wired);
  fn.attach(fake.ctx);
  return { fn, cfg: new Cfg(fn), fake };
}

function pba(fn: PciFunction): Buffer {
  return regionRead(fn.region(0), PBA, 8);
}

/** Program vector `v` the way a guest driver does on a table the client forwards. */
function writeEntry(fn: PciFunction, v: number, masked: boolean): void {
  regionWrite(fn.region(0), TABLE + 16 * v, hex('00e0 fffe 0000 0000 2140 0000'));
  regionWrite(fn.region(0), TABLE + 16 * v + 12, hex(masked ? '01000000' : '00000000'));
}

describe('pci/msix', () => {
  it('signals an enabled, unmasked vector through signalIrq(MSIX, vector)', () => {
    const { fn, cfg, fake } = setup();
    cfg.w16(CTRL, ENABLE);
    expect(fn.raiseMsix(3)).to.equal(true);
    expect(fake.signalIrq.args).to.deep.equal([[MSIX, 3]]);
    expect(pba(fn)).to.deep.equal(hex('0000000000000000'));
  });

  it('latches while disabled and fires once on enable', () => {
    const { fn, cfg, fake } = setup();
    expect(fn.raiseMsix(5)).to.equal(false);
    expect(fn.raiseMsix(5)).to.equal(false);
    expect(fake.signalIrq.callCount).to.equal(0);
    expect(pba(fn)).to.deep.equal(hex('2000000000000000'));
    cfg.w16(CTRL, ENABLE);
    expect(fake.signalIrq.args).to.deep.equal([[MSIX, 5]]);
    expect(pba(fn)).to.deep.equal(hex('0000000000000000'));
    cfg.w16(CTRL, ENABLE); // rewriting control does not fire again
    expect(fake.signalIrq.callCount).to.equal(1);
  });

  it('latches under the function mask and fires on unmask', () => {
    const { fn, cfg, fake } = setup();
    cfg.w16(CTRL, ENABLE | MASKALL);
    expect(fn.msix?.functionMasked).to.equal(true);
    fn.raiseMsix(7);
    fn.raiseMsix(31);
    expect(fake.signalIrq.callCount).to.equal(0);
    expect(pba(fn)).to.deep.equal(hex('8000008000000000'));
    cfg.w16(CTRL, ENABLE);
    expect(fake.signalIrq.args).to.deep.equal([
      [MSIX, 7],
      [MSIX, 31],
    ]);
    expect(pba(fn)).to.deep.equal(hex('0000000000000000'));
  });

  it('latches when no eventfd is wired and fires on the irqChanged wired event', () => {
    const { fn, cfg, fake } = setup(false);
    cfg.w16(CTRL, ENABLE);
    expect(fn.raiseMsix(1)).to.equal(false);
    expect(fake.signalIrq.args).to.deep.equal([[MSIX, 1]]); // tried, nobody listening
    expect(pba(fn)).to.deep.equal(hex('0200000000000000'));
    fake.signalIrq.returns(true);
    fn.irqChanged({ index: MSIX, start: 2, count: 4, kind: 'wired' }); // not covering vector 1
    expect(fake.signalIrq.callCount).to.equal(1);
    fn.irqChanged({ index: MSIX, start: 0, count: 2, kind: 'wired' });
    expect(fake.signalIrq.args).to.deep.equal([
      [MSIX, 1],
      [MSIX, 1],
    ]);
    expect(pba(fn)).to.deep.equal(hex('0000000000000000'));
  });

  it('latches while detached and fires once a new client wires the vector', () => {
    const fn = new PciFunction(nicSpec());
    const cfg = new Cfg(fn);
    cfg.w16(CTRL, ENABLE);
    expect(fn.raiseMsix(9)).to.equal(false);
    const fake = fakeContext(true);
    fn.attach(fake.ctx);
    expect(fake.signalIrq.callCount).to.equal(0);
    fn.irqChanged({ index: MSIX, start: 0, count: 32, kind: 'wired' });
    expect(fake.signalIrq.args).to.deep.equal([[MSIX, 9]]);
  });

  describe('table owner', () => {
    // QEMU emulates the table and never forwards table accesses, so our copy
    // stays at reset (every vector masked) and must not gate delivery.
    it("starts as 'client': our reset-masked copy does not stop delivery", () => {
      const { fn, cfg, fake } = setup();
      cfg.w16(CTRL, ENABLE);
      expect(fn.msix?.tableOwner).to.equal('client');
      expect(fn.msix?.isVectorMasked(0)).to.equal(true);
      expect(fn.raiseMsix(0)).to.equal(true);
      expect(fake.signalIrq.args).to.deep.equal([[MSIX, 0]]);
    });

    it("switches to 'device' on the first table write; then vector masks latch and unmask fires", () => {
      const { fn, cfg, fake } = setup();
      cfg.w16(CTRL, ENABLE);
      writeEntry(fn, 2, true);
      expect(fn.msix?.tableOwner).to.equal('device');
      expect(fn.raiseMsix(2)).to.equal(false);
      expect(fn.raiseMsix(4)).to.equal(false); // never programmed: still masked from reset
      expect(fake.signalIrq.callCount).to.equal(0);
      expect(pba(fn)).to.deep.equal(hex('1400000000000000'));
      regionWrite(fn.region(0), TABLE + 16 * 2 + 12, hex('00000000'));
      expect(fake.signalIrq.args).to.deep.equal([[MSIX, 2]]);
      expect(pba(fn)).to.deep.equal(hex('1000000000000000'));
      regionWrite(fn.region(0), TABLE + 16 * 2 + 12, hex('00000000')); // already unmasked: nothing new
      expect(fake.signalIrq.callCount).to.equal(1);
      expect(fn.raiseMsix(2)).to.equal(true);
    });

    it("goes back to 'client' when a new client attaches", () => {
      const { fn } = setup();
      writeEntry(fn, 0, false);
      expect(fn.msix?.tableOwner).to.equal('device');
      fn.detach();
      fn.attach(fakeContext().ctx);
      expect(fn.msix?.tableOwner).to.equal('client');
    });
  });

  it('stores table entries with only the mask bit writable in vector control', () => {
    const { fn } = setup();
    regionWrite(fn.region(0), TABLE + 16, hex('0c00e0fe 00000000 35400000 ffffffff'));
    expect(regionRead(fn.region(0), TABLE + 16, 16)).to.deep.equal(hex('0c00e0fe 00000000 35400000 01000000'));
    regionWrite(fn.region(0), TABLE + 16 + 3, hex('aa')); // byte access inside the address
    expect(regionRead(fn.region(0), TABLE + 16, 4)).to.deep.equal(hex('0c00e0aa'));
  });

  it('shows pending bits in the PBA and ignores PBA writes', () => {
    const fn = new PciFunction(
      nicSpec({
        msix: { vectors: 128, tableBar: 0, tableOffset: 0x8000, pbaBar: 0, pbaOffset: 0xa000 },
      }),
    );
    fn.raiseMsix(0);
    fn.raiseMsix(100);
    fn.raiseMsix(127);
    expect(regionRead(fn.region(0), PBA, 16)).to.deep.equal(hex('0100000000000000 0000000010000080'));
    regionWrite(fn.region(0), PBA, Buffer.alloc(16, 0));
    regionWrite(fn.region(0), PBA, Buffer.alloc(16, 0xff));
    expect(regionRead(fn.region(0), PBA, 16)).to.deep.equal(hex('0100000000000000 0000000010000080'));
    expect(fn.msix?.isPending(100)).to.equal(true);
  });

  it('ignores vectors that do not exist', () => {
    const { fn, cfg, fake } = setup();
    cfg.w16(CTRL, ENABLE);
    for (const v of [-1, 32, 1.5, Number.NaN, 2 ** 40]) expect(fn.raiseMsix(v)).to.equal(false);
    fn.irqChanged({ index: MSIX, start: -1, count: 2, kind: 'wired' });
    fn.irqChanged({ index: MSIX, start: 30, count: 1e9, kind: 'trigger' });
    expect(fake.signalIrq.callCount).to.equal(0);
    expect(pba(fn)).to.deep.equal(hex('0000000000000000'));
  });

  it('raise() uses MSI-X when enabled and INTx otherwise', () => {
    const { fn, cfg, fake } = setup();
    expect(fn.raise(4)).to.equal(true);
    expect(fake.signalIrq.args).to.deep.equal([[0, 0]]);
    fn.intx.deassert();
    cfg.w16(CTRL, ENABLE);
    expect(fn.raise(4)).to.equal(true);
    expect(fake.signalIrq.args).to.deep.equal([
      [0, 0],
      [MSIX, 4],
    ]);
    const noIntx = new PciFunction(nicSpec({ intx: false }));
    expect(noIntx.raise(4)).to.equal(false); // latched for MSI-X enable
    expect(noIntx.msix?.isPending(4)).to.equal(true);
  });

  it('reports no MSI-X without the declaration', () => {
    const fn = new PciFunction(nicSpec({ msix: undefined }));
    expect(fn.irqCount(MSIX)).to.equal(0);
    expect(fn.raiseMsix(0)).to.equal(false);
    expect(fn.msixEnabled).to.equal(false);
    expect(() => fn.irqChanged({ index: MSIX, start: 0, count: 1, kind: 'wired' })).to.not.throw();
  });
});
