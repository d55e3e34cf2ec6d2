import { expect } from 'chai';
import { PciFunction, supportedSpeedsVector } from '../../lib/pci';
import type { PciLinkSpeedCode } from '../../lib/pci';
import { Cfg, hex, nicSpec } from './helpers';

/** Walk the list the way QEMU and lspci do: from 0x34 while STATUS.CAP_LIST is set. */
function walk(cfg: Cfg): Array<{ at: number; id: number; next: number }> {
  const out: Array<{ at: number; id: number; next: number }> = [];
  if ((cfg.r16(0x06) & 0x10) === 0) return out;
  let at = cfg.r8(0x34);
  while (at !== 0 && out.length < 48) {
    const id = cfg.r8(at);
    const next = cfg.r8(at + 1);
    out.push({ at, id, next });
    at = next;
  }
  return out;
}

describe('pci/capabilities', () => {
  const fn = new PciFunction(nicSpec());
  const cfg = new Cfg(fn);

  it('chains PM, MSI-X and PCIe from 0x34, DWORD aligned, ending with 0', () => {
    expect(walk(cfg)).to.deep.equal([
      { at: 0x40, id: 0x01, next: 0x48 },
      { at: 0x48, id: 0x11, next: 0x54 },
      { at: 0x54, id: 0x10, next: 0x00 },
    ]);
    expect(fn.capabilities).to.deep.equal({ first: 0x40, pm: 0x40, msix: 0x48, pcie: 0x54 });
  });

  it('leaves out what is not declared', () => {
    const ids = (spec: Parameters<typeof nicSpec>[0]): number[] =>
      walk(new Cfg(new PciFunction(nicSpec(spec)))).map((c) => c.id);
    expect(ids({ powerManagement: false })).to.deep.equal([0x11, 0x10]);
    expect(ids({ msix: undefined })).to.deep.equal([0x01, 0x10]);
    expect(ids({ pcie: undefined })).to.deep.equal([0x01, 0x11]);
    expect(ids({ pcie: undefined, msix: undefined })).to.deep.equal([0x01]);
  });

  describe('Power Management', () => {
    it('is v3, D0 only besides D3hot, no soft reset', () => {
      expect(cfg.bytes(0x40, 8)).to.deep.equal(hex('01 48 0300 0800 00 00'));
    });

    it('accepts D3hot and D0, discards D1/D2, keeps read-only bits', () => {
      const f = new PciFunction(nicSpec());
      const c = new Cfg(f);
      c.w16(0x44, 0x0003);
      expect(c.r16(0x44)).to.equal(0x000b);
      expect(f.powerState).to.equal(3);
      c.w16(0x44, 0x0001); // D1 unsupported: the write is discarded
      expect(c.r16(0x44)).to.equal(0x000b);
      c.w16(0x44, 0xfff0); // PME bits, no_soft_reset and reserved are read-only; state bits 00 = D0
      expect(c.r16(0x44)).to.equal(0x0008);
      expect(f.powerState).to.equal(0);
      c.w16(0x42, 0xffff);
      expect(c.r16(0x42)).to.equal(0x0003);
    });
  });

  describe('MSI-X', () => {
    it('states table size, table and PBA BIR and offsets', () => {
      expect(cfg.bytes(0x48, 12)).to.deep.equal(hex('11 54 1f00 00800000 00a00000'));
    });

    it('encodes the BIR in the low bits', () => {
      const c = new Cfg(
        new PciFunction(
          nicSpec({
            msix: { vectors: 128, tableBar: 2, tableOffset: 0x1000, pbaBar: 0, pbaOffset: 0x3000 },
          }),
        ),
      );
      expect(c.r16(0x4a)).to.equal(127);
      expect(c.r32(0x4c)).to.equal(0x1002);
      expect(c.r32(0x50)).to.equal(0x3000);
    });

    it('stores only enable and function mask', () => {
      const f = new PciFunction(nicSpec());
      const c = new Cfg(f);
      c.w16(0x4a, 0xffff);
      expect(c.r16(0x4a)).to.equal(0xc01f);
      expect(f.msixEnabled).to.equal(true);
      c.w32(0x4c, 0);
      c.w32(0x50, 0xffffffff);
      expect(c.bytes(0x48, 12)).to.deep.equal(hex('11 54 1fc0 00800000 00a00000'));
    });
  });

  describe('PCI Express', () => {
    it('is a version 2 endpoint with FLR, 256-byte payload, x16 at 16 GT/s', () => {
      expect(cfg.bytes(0x54, 0x3c)).to.deep.equal(
        hex(
          '10 00 0200' + // id, next, flags: version 2, type endpoint
            '21800010' + // DevCap: MPS 256, ext tag, RBER, FLR
            '1028 0000' + // DevCtl: relaxed ordering, no snoop, MRRS 512; DevSta
            '04010000' + // LnkCap: 16 GT/s, x16
            '0000 0411' + // LnkCtl; LnkSta: 16 GT/s, x16, slot clock
            '00000000 0000 0000' + // slot
            '0000 0000 00000000' + // root
            '00000000 0000 0000' + // DevCap2, DevCtl2, DevSta2
            '1e000000 0400 0000' + // LnkCap2: 2.5..16 GT/s; LnkCtl2 target 16 GT/s; LnkSta2
            '00000000 0000 0000', // slot 2
        ),
      );
    });

    it('reports the declared speed and width in LnkCap and LnkSta', () => {
      for (const [speed, width] of [
        [1, 1],
        [3, 8],
        [5, 32],
        [6, 4],
      ] as const) {
        const c = new Cfg(new PciFunction(nicSpec({ pcie: { maxLinkSpeed: speed, maxLinkWidth: width } })));
        expect(c.r32(0x54 + 0x0c) & 0x3ff).to.equal(speed | (width << 4));
        expect(c.r16(0x54 + 0x12) & 0x3ff).to.equal(speed | (width << 4));
        expect(c.r32(0x54 + 0x2c)).to.equal(supportedSpeedsVector(speed) << 1);
      }
      const vectors = ([1, 2, 3, 4, 5, 6] as PciLinkSpeedCode[]).map((s) => supportedSpeedsVector(s) << 1);
      expect(vectors).to.deep.equal([0x02, 0x06, 0x0e, 0x1e, 0x3e, 0x7e]);
    });

    it('keeps DevCap, LnkCap, LnkSta read-only; DevCtl and LnkCtl take their RW bits; DevSta is W1C', () => {
      const f = new PciFunction(nicSpec({ resetSupported: false }));
      const c = new Cfg(f);
      expect(c.r32(0x58)).to.equal(0x0000_8021); // no FLR without reset support
      c.w32(0x58, 0);
      c.w32(0x60, 0);
      c.w16(0x66, 0);
      expect(c.r32(0x58)).to.equal(0x0000_8021);
      expect(c.r32(0x60)).to.equal(0x104);
      expect(c.r16(0x66)).to.equal(0x1104);
      c.w16(0x5c, 0xffff); // FLR bit not writable without FLR
      expect(c.r16(0x5c)).to.equal(0x79ff);
      c.w16(0x5c, 0x0000);
      expect(c.r16(0x5c)).to.equal(0);
      c.w16(0x64, 0xffff);
      expect(c.r16(0x64)).to.equal(0x00cb);
      f.config.setBits(0x5e, 2, 0x003f, true); // the device records errors and AUX/transactions pending
      c.w16(0x5e, 0x0005);
      expect(c.r16(0x5e)).to.equal(0x003a);
      c.w16(0x5e, 0xffff);
      expect(c.r16(0x5e)).to.equal(0x0030);
    });

    it('has config size 4096 and a zero extended header at 0x100', () => {
      expect(fn.region(7)?.size).to.equal(4096);
      expect(cfg.bytes(0x100, 4)).to.deep.equal(hex('00000000'));
      cfg.w32(0x100, 0xffffffff);
      expect(cfg.r32(0x100)).to.equal(0);
      expect(cfg.bytes(0x100, 0xf00).every((b) => b === 0)).to.equal(true);
    });
  });
});
