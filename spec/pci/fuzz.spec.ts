import { expect } from 'chai';
import { PciFunction } from '../../lib/pci';
import type { PciFunctionSpec } from '../../lib/pci';
import type { IrqEvent } from '../../lib/vfio-user/device';
import { Cfg, RecordingBar, fakeContext, nicSpec, prng } from './helpers';

// Random accesses from an untrusted bus: nothing may throw, and the fields
// that identify the function (and the capability chain QEMU walks) never change.

const SIZES = [1, 2, 3, 4, 8, 16, 64, 256, 4096];
const KINDS: ReadonlyArray<IrqEvent['kind']> = ['wired', 'unwired', 'mask', 'unmask', 'trigger'];

/** Offsets of bytes that must read the same forever (ids, class, header type, cap chain, RO capability fields). */
function identity(cfg: Cfg, express: boolean): Buffer {
  const parts = [
    cfg.bytes(0x00, 4), // vendor, device
    cfg.bytes(0x08, 4), // revision, class
    cfg.bytes(0x0e, 1), // header type
    cfg.bytes(0x2c, 4), // subsystem
    cfg.bytes(0x34, 1), // capabilities pointer
    cfg.bytes(0x3d, 1), // interrupt pin
    cfg.bytes(0x40, 4), // PM id, next, PMC
    cfg.bytes(0x48, 2), // MSI-X id, next
    cfg.bytes(0x4c, 8), // MSI-X table and PBA pointers
  ];
  if (express) {
    parts.push(
      cfg.bytes(0x54, 8), // PCIe id, next, flags, DevCap
      cfg.bytes(0x60, 4), // LnkCap
      cfg.bytes(0x66, 2), // LnkSta
      cfg.bytes(0x80, 4), // LnkCap2
      cfg.bytes(0x100, 4), // extended header
    );
  }
  return Buffer.concat(parts);
}

function run(spec: PciFunctionSpec, seed: number, iterations: number): { resets: number } {
  const random = prng(seed);
  const int = (n: number): number => Math.floor(random() * n);
  let resets = 0;
  const fn = new PciFunction({
    ...spec,
    onReset: () => {
      resets++;
    },
  });
  const fake = fakeContext(true);
  fn.attach(fake.ctx);
  const cfg = new Cfg(fn);
  const express = spec.pcie !== undefined;
  const expected = identity(cfg, express);
  const configSize = fn.region(7)?.size ?? 0;

  for (let i = 0; i < iterations; i++) {
    const pick = int(10);
    if (pick === 9) {
      // Interrupt side: raises and wiring events with wild numbers.
      const wild = [int(40), -int(5), int(2 ** 31), random() * 10];
      const v = wild[int(wild.length)] ?? 0;
      fake.signalIrq.returns(random() < 0.7);
      expect(() => {
        fn.raiseMsix(v);
        if (random() < 0.3) fn.intx.assert();
        else fn.intx.deassert();
        fn.irqChanged({
          index: int(6),
          start: wild[int(wild.length)] ?? 0,
          count: int(100),
          kind: KINDS[int(KINDS.length)] ?? 'wired',
        });
      }).to.not.throw();
      continue;
    }
    // Mostly config space (where the guarded state is), the rest BARs and absent regions.
    const index = pick < 6 ? 7 : ([0, 1, 2, 4, 6, 8][int(6)] ?? 0);
    const region = fn.region(index);
    const len = SIZES[int(SIZES.length)] ?? 4;
    const limit = region?.size ?? 0;
    const roll = random();
    const offset = roll < 0.9 ? int(Math.max(1, limit)) : roll < 0.95 ? limit - int(8) : -int(4) - 0.5 * int(2);
    const buf = Buffer.alloc(len);
    for (let b = 0; b < len; b++) buf[b] = random() < 0.3 ? 0xff : int(256);
    expect(() => {
      if (region === undefined) return;
      const err = random() < 0.6 ? region.write(offset, buf) : region.read(offset, buf);
      expect(err === 0 || err === 22).to.equal(true);
    }).to.not.throw();
    if (index === 7 && i % 16 === 0) expect(identity(cfg, express)).to.deep.equal(expected);
  }
  expect(identity(cfg, express)).to.deep.equal(expected);
  expect(configSize).to.equal(express ? 4096 : 256);
  return { resets };
}

describe('pci/fuzz', () => {
  it('PCIe function: 20000 random config, BAR and interrupt operations', () => {
    const bar0 = new RecordingBar(0x10000);
    const { resets } = run(
      nicSpec({
        bars: [
          { index: 0, size: 0x10000, kind: 'mem64', handler: bar0 },
          { index: 2, size: 0x400000, kind: 'mem32', prefetchable: true },
          { index: 4, size: 0x100, kind: 'io' },
        ],
      }),
      0x5eed_0001,
      20000,
    );
    expect(resets).to.be.greaterThan(0); // random DevCtl writes hit FLR: resets are exercised too
  });

  it('conventional function: 10000 random operations', () => {
    run(nicSpec({ pcie: undefined }), 0x5eed_0002, 10000);
  });

  it('several seeds with a small BAR and every kind of access', () => {
    for (let seed = 1; seed <= 5; seed++) {
      run(
        nicSpec({
          bars: [
            { index: 0, size: 0x4000, kind: 'mem32' },
            { index: 2, size: 0x100, kind: 'io' },
          ],
          msix: { vectors: 64, tableBar: 0, tableOffset: 0x2000, pbaBar: 0, pbaOffset: 0x3000 },
        }),
        seed,
        4000,
      );
    }
  });
});
