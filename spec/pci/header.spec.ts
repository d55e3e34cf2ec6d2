import { expect } from 'chai';
import { PciFunction } from '../../lib/pci';
import { Cfg, hex, nicSpec } from './helpers';

// The type-0 header as QEMU's vfio-user-pci reads it at realize
// (docs/vfio-user-protocol.md 3.4): one 4096/256-byte read at 0, ROM probe at 0x30,
// BAR type reads at 0x10 + 4i, MSI-X registers, the interrupt pin at 0x3d.

const NIC_HEADER = hex(
  'f41a f510 0000 1000 03 000002 00 00 00 00' + // ids, command, status (CAP_LIST), rev, class, cls, lat, hdr, bist
    '04000000 00000000 08000000 00000000 01000000 00000000' + // BAR0 mem64, BAR1 upper, BAR2 mem32 pf, BAR3, BAR4 io, BAR5
    '00000000 f51a 0154 00000000 40 000000 00000000' + // cardbus, subsystem, ROM, cap ptr, reserved
    '00 01 00 00', // line, pin INTA, min_gnt, max_lat
);

describe('pci/header', () => {
  describe('QEMU realize sequence', () => {
    const fn = new PciFunction(nicSpec());
    const cfg = new Cfg(fn);

    it('answers region info: BAR sizes, config 4096, nothing for ROM/VGA/upper halves', () => {
      expect(fn.region(0)?.size).to.equal(0x10000);
      expect(fn.region(1)).to.equal(undefined); // upper half of the 64-bit BAR0
      expect(fn.region(2)?.size).to.equal(0x400000);
      expect(fn.region(3)).to.equal(undefined);
      expect(fn.region(4)?.size).to.equal(0x100);
      expect(fn.region(5)).to.equal(undefined);
      expect(fn.region(6)).to.equal(undefined);
      const config = fn.region(7);
      expect(config?.size).to.equal(4096);
      expect(config?.readable).to.equal(true);
      expect(config?.writable).to.equal(true);
      expect(fn.region(8)).to.equal(undefined);
      expect(fn.region(9)).to.equal(undefined);
      expect(fn.region(-1)).to.equal(undefined);
      expect(fn.region(0.5)).to.equal(undefined);
    });

    it('answers irq counts: INTx 1, MSI 0, MSI-X = vectors, ERR 1, REQ 0', () => {
      expect([0, 1, 2, 3, 4, 5].map((i) => fn.irqCount(i))).to.deep.equal([1, 0, 32, 1, 0, 0]);
      expect(fn.resetSupported).to.equal(true);
    });

    it('serves the whole config space in one read, header bytes exact', () => {
      const all = cfg.bytes(0, 4096);
      expect(all.subarray(0, 0x40)).to.deep.equal(NIC_HEADER);
    });

    it('reports no expansion ROM to the sizing probe', () => {
      expect(cfg.r32(0x30)).to.equal(0);
      cfg.w32(0x30, 0xfffff800);
      expect(cfg.r32(0x30)).to.equal(0);
      cfg.w32(0x30, 0);
      expect(cfg.r32(0x30)).to.equal(0);
    });

    it('gives BAR type bits at 0x10 + 4i', () => {
      expect([0, 1, 2, 3, 4, 5].map((i) => cfg.r32(0x10 + 4 * i))).to.deep.equal([0x4, 0, 0x8, 0, 0x1, 0]);
    });

    it('gives the interrupt pin at 0x3d', () => {
      expect(cfg.r8(0x3d)).to.equal(1);
      expect(new Cfg(new PciFunction(nicSpec({ intx: false }))).r8(0x3d)).to.equal(0);
    });

    it('survives the pre/post-reset writes QEMU makes', () => {
      cfg.w16(0x04, 0x0007);
      const cmd = cfg.r16(0x04);
      cfg.w16(0x04, cmd & ~(0x1 | 0x2 | 0x4 | 0x400));
      fn.reset('device-reset');
      for (let i = 0; i < 6; i++) cfg.w32(0x10 + 4 * i, 0);
      expect(cfg.bytes(0, 0x40)).to.deep.equal(NIC_HEADER);
    });
  });

  it('keeps identity and read-only fields after all-ones writes; RW fields take their masks', () => {
    const fn = new PciFunction(nicSpec());
    const cfg = new Cfg(fn);
    cfg.bytes(0, 0x40);
    const ones = Buffer.alloc(0x40, 0xff);
    expect(fn.region(7)?.write(0, ones)).to.equal(0);
    expect(cfg.bytes(0, 0x40)).to.deep.equal(
      hex(
        'f41a f510 4705 1000 03 000002 ff 00 00 00' + // COMMAND = IO|MEM|MASTER|PARITY|SERR|INTX_DISABLE, PCIe latency 0
          '0400ffff ffffffff 0800c0ff 00000000 01ffffff 00000000' + // sized BARs
          '00000000 f51a 0154 00000000 40 000000 00000000' +
          'ff 01 00 00',
      ),
    );
    // Same through 1-, 2- and 4-byte writes at every offset.
    const fn2 = new PciFunction(nicSpec());
    const cfg2 = new Cfg(fn2);
    for (let off = 0; off < 0x40; off++) cfg2.w8(off, 0xff);
    for (let off = 0; off < 0x40; off += 2) cfg2.w16(off, 0xffff);
    for (let off = 0; off < 0x40; off += 4) cfg2.w32(off, 0xffffffff);
    expect(cfg2.bytes(0, 0x40)).to.deep.equal(cfg.bytes(0, 0x40));
  });

  describe('COMMAND', () => {
    it('stores exactly IO, MEM, MASTER, PARITY, SERR, INTX_DISABLE', () => {
      const fn = new PciFunction(nicSpec());
      const cfg = new Cfg(fn);
      cfg.w16(0x04, 0xffff);
      expect(cfg.r16(0x04)).to.equal(0x0547);
      expect(fn.ioEnabled && fn.memoryEnabled && fn.busMasterEnabled).to.equal(true);
      cfg.w16(0x04, 0x0002);
      expect(cfg.r16(0x04)).to.equal(0x0002);
      expect(fn.memoryEnabled).to.equal(true);
      expect(fn.busMasterEnabled).to.equal(false);
      expect(fn.ioEnabled).to.equal(false);
    });

    it('has no IO bit without an I/O BAR', () => {
      const fn = new PciFunction(nicSpec({ bars: [{ index: 0, size: 0x10000, kind: 'mem64' }] }));
      const cfg = new Cfg(fn);
      cfg.w16(0x04, 0xffff);
      expect(cfg.r16(0x04)).to.equal(0x0546);
    });

    it('tells the device about changes', () => {
      const seen: Array<[number, number]> = [];
      const fn = new PciFunction(nicSpec({ onCommandChange: (now, prev) => seen.push([now, prev]) }));
      const cfg = new Cfg(fn);
      cfg.w16(0x04, 0x0006);
      cfg.w16(0x04, 0x0006); // no change, no call
      cfg.w16(0x04, 0x0002);
      expect(seen).to.deep.equal([
        [0x0006, 0],
        [0x0002, 0x0006],
      ]);
    });
  });

  describe('STATUS', () => {
    it('clears error bits written as 1 and keeps CAP_LIST', () => {
      const fn = new PciFunction(nicSpec());
      const cfg = new Cfg(fn);
      fn.config.setBits(0x06, 2, 0xf900, true); // the device records every error bit
      expect(cfg.r16(0x06)).to.equal(0xf910);
      cfg.w16(0x06, 0x2000); // clear received master abort only
      expect(cfg.r16(0x06)).to.equal(0xd910);
      cfg.w16(0x06, 0xffff);
      expect(cfg.r16(0x06)).to.equal(0x0010);
    });

    it('has no CAP_LIST and a zero pointer without capabilities', () => {
      const fn = new PciFunction(nicSpec({ msix: undefined, pcie: undefined, powerManagement: false }));
      const cfg = new Cfg(fn);
      expect(cfg.r16(0x06)).to.equal(0);
      expect(cfg.r8(0x34)).to.equal(0);
    });
  });

  describe('conventional PCI', () => {
    const fn = new PciFunction(nicSpec({ pcie: undefined }));
    const cfg = new Cfg(fn);

    it('has a 256-byte config space', () => {
      expect(fn.region(7)?.size).to.equal(256);
      expect(cfg.bytes(0, 256).length).to.equal(256);
      expect(fn.region(7)?.read(0, Buffer.alloc(4096))).to.equal(22);
    });

    it('keeps a writable latency timer', () => {
      cfg.w8(0x0d, 0x40);
      expect(cfg.r8(0x0d)).to.equal(0x40);
    });
  });

  it('stores interrupt line and cache line size', () => {
    const cfg = new Cfg(new PciFunction(nicSpec()));
    cfg.w8(0x3c, 0x0b);
    cfg.w8(0x0c, 0x10);
    cfg.w8(0x0d, 0x40); // PCIe: latency timer hardwired to 0
    expect([cfg.r8(0x3c), cfg.r8(0x0c), cfg.r8(0x0d)]).to.deep.equal([0x0b, 0x10, 0]);
  });

  it('refuses bad declarations at construction', () => {
    expect(() => new PciFunction(nicSpec({ vendorId: 0x10000 }))).to.throw(/vendorId/);
    expect(() => new PciFunction(nicSpec({ vendorId: 0xffff }))).to.throw(/vendorId/);
    expect(() => new PciFunction(nicSpec({ classCode: 0x1000000 }))).to.throw(/classCode/);
    expect(() => new PciFunction(nicSpec({ revision: 256 }))).to.throw(/revision/);
    expect(() => new PciFunction(nicSpec({ subsystemId: -1 }))).to.throw(/subsystemId/);
    const badSpeed = { maxLinkSpeed: 7, maxLinkWidth: 16 } as unknown as { maxLinkSpeed: 1; maxLinkWidth: 16 };
    expect(() => new PciFunction(nicSpec({ pcie: badSpeed }))).to.throw(/maxLinkSpeed/);
    const badWidth = { maxLinkSpeed: 4, maxLinkWidth: 3 } as unknown as { maxLinkSpeed: 4; maxLinkWidth: 4 };
    expect(() => new PciFunction(nicSpec({ pcie: badWidth }))).to.throw(/maxLinkWidth/);
  });
});
