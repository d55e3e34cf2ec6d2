import { expect } from 'chai';
import { PciFunction } from '../../lib/pci';
import type { BarSpec, PciFunctionSpec } from '../../lib/pci';
import { Cfg, IDENT, RecordingBar, fakeContext, hex, nicSpec, regionRead, regionWrite } from './helpers';

function withBars(bars: BarSpec[], extra: Partial<PciFunctionSpec> = {}): PciFunction {
  return new PciFunction({ ...IDENT, bars, ...extra });
}

/** The OS's sizing probe: save, write all ones, read back, restore. */
function size(cfg: Cfg, offset: number): number {
  const saved = cfg.r32(offset);
  cfg.w32(offset, 0xffffffff);
  const probed = cfg.r32(offset);
  cfg.w32(offset, saved);
  return probed;
}

describe('pci/bars', () => {
  describe('sizing', () => {
    it('mem32: ~(size-1) with type bits 0', () => {
      const cfg = new Cfg(withBars([{ index: 1, size: 0x1000, kind: 'mem32' }]));
      expect(cfg.r32(0x14)).to.equal(0);
      expect(size(cfg, 0x14)).to.equal(0xfffff000);
      expect(cfg.bytes(0x14, 4)).to.deep.equal(hex('00000000'));
    });

    it('mem32 prefetchable: bit 3 set and read-only', () => {
      const cfg = new Cfg(withBars([{ index: 0, size: 16, kind: 'mem32', prefetchable: true }]));
      expect(cfg.r32(0x10)).to.equal(0x8);
      expect(size(cfg, 0x10)).to.equal(0xfffffff8);
      cfg.w32(0x10, 0);
      expect(cfg.r32(0x10)).to.equal(0x8);
    });

    it('mem64: both halves size, upper half all ones below 4 GiB', () => {
      const fn = withBars([{ index: 2, size: 0x20000, kind: 'mem64', prefetchable: true }]);
      const cfg = new Cfg(fn);
      expect(cfg.r32(0x18)).to.equal(0xc);
      expect(size(cfg, 0x18)).to.equal(0xfffe000c);
      expect(size(cfg, 0x1c)).to.equal(0xffffffff);
      cfg.w32(0x18, 0xfe000000);
      cfg.w32(0x1c, 0x00000001);
      expect(cfg.bytes(0x18, 8)).to.deep.equal(hex('0c0000fe 01000000'));
      expect(fn.barAddress(2)).to.equal(0x1_fe00_0000);
      expect(fn.barAddress(3)).to.equal(undefined);
      expect(fn.region(3)).to.equal(undefined);
    });

    it('mem64 larger than 4 GiB: low dword has only type bits, upper half masked', () => {
      const cfg = new Cfg(withBars([{ index: 0, size: 2 ** 34, kind: 'mem64' }]));
      expect(size(cfg, 0x10)).to.equal(0x00000004);
      expect(size(cfg, 0x14)).to.equal(0xfffffffc);
    });

    it('io: ~(size-1) with bit 0 set', () => {
      const fn = withBars([{ index: 5, size: 0x20, kind: 'io' }]);
      const cfg = new Cfg(fn);
      expect(cfg.r32(0x24)).to.equal(0x1);
      expect(size(cfg, 0x24)).to.equal(0xffffffe1);
      cfg.w32(0x24, 0xc040);
      expect(cfg.r32(0x24)).to.equal(0xc041);
      expect(fn.barAddress(5)).to.equal(0xc040);
    });

    it('unused BARs read 0 and ignore writes', () => {
      const cfg = new Cfg(withBars([{ index: 0, size: 0x1000, kind: 'mem32' }]));
      for (let i = 1; i < 6; i++) expect(size(cfg, 0x10 + 4 * i)).to.equal(0);
    });
  });

  describe('declaration checks', () => {
    const bad: Array<[string, BarSpec[]]> = [
      ['non power of two', [{ index: 0, size: 0x3000, kind: 'mem32' }]],
      ['memory below 16', [{ index: 0, size: 8, kind: 'mem32' }]],
      ['io below 4', [{ index: 0, size: 2, kind: 'io' }]],
      ['io above 256', [{ index: 0, size: 512, kind: 'io' }]],
      ['mem32 of 4 GiB', [{ index: 0, size: 2 ** 32, kind: 'mem32' }]],
      ['prefetchable io', [{ index: 0, size: 16, kind: 'io', prefetchable: true }]],
      ['mem64 in slot 5', [{ index: 5, size: 16, kind: 'mem64' }]],
      [
        'slot used twice',
        [
          { index: 1, size: 16, kind: 'mem32' },
          { index: 1, size: 16, kind: 'io' },
        ],
      ],
      [
        'upper half reused',
        [
          { index: 0, size: 16, kind: 'mem64' },
          { index: 1, size: 16, kind: 'mem32' },
        ],
      ],
      ['index 6', [{ index: 6 as 0, size: 16, kind: 'mem32' }]],
      ['size 0', [{ index: 0, size: 0, kind: 'mem32' }]],
    ];
    for (const [name, bars] of bad) {
      it(`throws for ${name}`, () => {
        expect(() => withBars(bars)).to.throw(RangeError);
      });
    }

    it('throws for MSI-X structures outside a memory BAR or overlapping', () => {
      const msix = { vectors: 4, tableBar: 0, tableOffset: 0, pbaBar: 0, pbaOffset: 0x40 };
      const bars: BarSpec[] = [
        { index: 0, size: 0x1000, kind: 'mem32' },
        { index: 1, size: 0x100, kind: 'io' },
      ];
      expect(() => withBars(bars, { msix })).to.not.throw();
      expect(() => withBars(bars, { msix: { ...msix, pbaOffset: 0x38 } })).to.throw(/overlap/);
      expect(() => withBars(bars, { msix: { ...msix, tableBar: 1 } })).to.throw(/memory BAR/);
      expect(() => withBars(bars, { msix: { ...msix, tableBar: 2 } })).to.throw(/not a declared BAR/);
      expect(() => withBars(bars, { msix: { ...msix, tableOffset: 4 } })).to.throw(/aligned/);
      expect(() => withBars(bars, { msix: { ...msix, pbaOffset: 0x1000 } })).to.throw(/does not fit/);
      expect(() => withBars(bars, { msix: { ...msix, vectors: 0 } })).to.throw(/vectors/);
      expect(() => withBars(bars, { msix: { ...msix, vectors: 2049 } })).to.throw(/vectors/);
    });
  });

  describe('BAR accesses', () => {
    function nic(): { fn: PciFunction; bar0: RecordingBar; bar2: RecordingBar } {
      const bar0 = new RecordingBar(0x10000);
      const bar2 = new RecordingBar(0x400000);
      const fn = new PciFunction(
        nicSpec({
          bars: [
            { index: 0, size: 0x10000, kind: 'mem64', handler: bar0 },
            { index: 2, size: 0x400000, kind: 'mem32', handler: bar2 },
          ],
        }),
      );
      return { fn, bar0, bar2 };
    }

    it('sends register accesses to the device handler at the BAR offset', () => {
      const { fn, bar0, bar2 } = nic();
      regionWrite(fn.region(0), 0x800, hex('01020304'));
      expect(regionRead(fn.region(0), 0x800, 4)).to.deep.equal(hex('01020304'));
      regionWrite(fn.region(2), 0x3ffff8, hex('aabbccddeeff0011'));
      expect(bar0.accesses).to.deep.equal([
        { op: 'w', offset: 0x800, len: 4 },
        { op: 'r', offset: 0x800, len: 4 },
      ]);
      expect(bar2.accesses).to.deep.equal([{ op: 'w', offset: 0x3ffff8, len: 8 }]);
    });

    it('keeps MSI-X table and PBA accesses away from the device handler', () => {
      const { fn, bar0 } = nic();
      expect(regionRead(fn.region(0), 0x8000 + 12, 4)).to.deep.equal(hex('01000000')); // vector 0 masked at reset
      regionRead(fn.region(0), 0xa000, 8);
      expect(bar0.accesses).to.deep.equal([]);
    });

    it('splits an access that straddles the table edge', () => {
      const { fn, bar0 } = nic();
      bar0.mem.write('ABCD', 0x7ffc, 'latin1');
      const got = regionRead(fn.region(0), 0x7ffc, 8);
      expect(got).to.deep.equal(Buffer.concat([Buffer.from('ABCD', 'latin1'), hex('00000000')]));
      expect(bar0.accesses).to.deep.equal([{ op: 'r', offset: 0x7ffc, len: 4 }]);
      // Table end: last vector's control then device registers.
      const end = 0x8000 + 32 * 16;
      regionWrite(fn.region(0), end - 4, hex('00000000 11223344'));
      expect(bar0.accesses[1]).to.deep.equal({ op: 'w', offset: end, len: 4 });
      expect(fn.msix?.tableOwner).to.equal('device');
      expect(fn.msix?.isVectorMasked(31)).to.equal(false);
    });

    it('default handler reads zeros and drops writes', () => {
      const fn = new PciFunction(nicSpec());
      regionWrite(fn.region(2), 0, hex('ffffffff'));
      expect(regionRead(fn.region(2), 0, 4)).to.deep.equal(hex('00000000'));
      expect(regionRead(fn.region(4), 0xfc, 4)).to.deep.equal(hex('00000000'));
    });

    it('refuses out-of-range accesses with EINVAL and does not call the handler', () => {
      const { fn, bar0 } = nic();
      const r = fn.region(0);
      expect(r?.read(0xfffe, Buffer.alloc(4))).to.equal(22);
      expect(r?.write(0x10000, Buffer.alloc(1))).to.equal(22);
      expect(r?.write(-4, Buffer.alloc(4))).to.equal(22);
      expect(r?.read(0, Buffer.alloc(0))).to.equal(22);
      expect(bar0.accesses).to.deep.equal([]);
    });

    it('passes a device errno back', () => {
      const fn = withBars([{ index: 0, size: 16, kind: 'mem32', handler: { read: () => 5, write: () => 14 } }]);
      expect(fn.region(0)?.read(0, Buffer.alloc(4))).to.equal(5);
      expect(fn.region(0)?.write(0, Buffer.alloc(4))).to.equal(14);
    });

    it('does not need a client to be attached', () => {
      const { fn } = nic();
      expect(() => fn.attach(fakeContext().ctx)).to.not.throw();
      fn.detach();
      expect(regionRead(fn.region(0), 0, 4)).to.deep.equal(hex('00000000'));
    });
  });
});
