// MR model and translation (contract 3.1-3.3): page tables merged into runs,
// translation across runs, pages and guest-memory windows, every error
// (bounds, wrap, access, values, lengths, guest memory), keys with tag and PD
// checks, and the key-0 DMA-key policy.

import { expect } from 'chai';
import { MAX_MSG_BYTES, MrFlag, QpFlag, U64_UNSAFE } from '../../lib/rdma/datapath/layouts';
import {
  Access, accessWrites, DMA_MR, dmaKeyAllowed, inPageOffset, KeyUse, MAX_PAGE_TABLE_ENTRIES, MemoryRegion, MrBuildError,
  mrBuildErrorName, mrFromDirect, mrFromPages, mrFromTable, MrSpec, mrUnmapped, pagesNeeded, qpAllows, resolveKey, translate,
  Xlate, xlateName,
} from '../../lib/rdma/datapath/translate';
import { BufferMemory } from '../../lib/vfio-user/buffer-memory';
import { FakeMrs, kctx, Poke, SplitMemory } from './datapath-helpers';

const PG = 4096;
const RAM_BASE = 0x100000;
const ALL = MrFlag.LOCAL_WRITE | MrFlag.REMOTE_WRITE | MrFlag.REMOTE_READ | MrFlag.REMOTE_ATOMIC;

function mr(x: MemoryRegion | MrBuildError): MemoryRegion {
  if (typeof x === 'number') throw new Error(`build failed: ${mrBuildErrorName(x)}`);
  return x;
}

function spec(over: Partial<MrSpec> = {}): MrSpec {
  return { key: 0x101, pd: 1, iova: 0x7f0000000000 + 0x10, length: 3 * PG, flags: ALL, ...over };
}

/** Guest RAM with byte i = i & 0xff so views are recognisable. */
function ram(size = 64 * PG): { buf: Buffer; mem: BufferMemory } {
  const buf = Buffer.alloc(size);
  for (let i = 0; i < size; i++) buf[i] = i & 0xff;
  return { buf, mem: new BufferMemory(buf, RAM_BASE) };
}

function concat(views: Buffer[]): Buffer {
  return Buffer.concat(views);
}

describe('rdma datapath: MR model and translation', () => {
  describe('building from a page table', () => {
    it('merges adjacent pages into runs and clips the first and last page', () => {
      // pages 0,1 adjacent; 5 separate; region starts 0x10 into page 0, length 3 pages -> ends 0x10 into the 4th page
      const pages = [RAM_BASE, RAM_BASE + PG, RAM_BASE + 5 * PG, RAM_BASE + 6 * PG];
      const m = mr(mrFromPages(spec(), { pageSizeLog2: 12, firstPageOffset: 0x10 }, pages));
      expect(m.runs).to.deep.equal([
        { guestAddr: RAM_BASE + 0x10, len: 2 * PG - 0x10 },
        { guestAddr: RAM_BASE + 5 * PG, len: PG + 0x10 },
      ]);
      expect(m.runOffsets).to.deep.equal([0, 2 * PG - 0x10]);
      expect(m.base).to.equal(0x7f0000000010);
      expect(m.identity).to.equal(false);
    });

    it('one run when every page is adjacent; a page per run when none is', () => {
      const adj = [0, 1, 2].map((i) => RAM_BASE + i * PG);
      expect(mr(mrFromPages(spec({ iova: 0 }), { pageSizeLog2: 12, firstPageOffset: 0 }, adj)).runs).to.have.length(1);
      const apart = [0, 2, 4].map((i) => RAM_BASE + i * PG);
      expect(mr(mrFromPages(spec({ iova: 0 }), { pageSizeLog2: 12, firstPageOffset: 0 }, apart)).runs).to.have.length(3);
      const back = [2, 1, 0].map((i) => RAM_BASE + i * PG);
      expect(mr(mrFromPages(spec({ iova: 0 }), { pageSizeLog2: 12, firstPageOffset: 0 }, back)).runs).to.have.length(3);
    });

    it('2 MiB and 1 GiB pages with addresses above 4 GiB (no 32-bit masking)', () => {
      const big = 2 ** 21;
      const pages = [0x3_0000_0000, 0x3_0000_0000 + big];
      const m = mr(mrFromPages(spec({ iova: 0x5_0000_1234, length: big }), { pageSizeLog2: 21, firstPageOffset: inPageOffset(0x5_0000_1234, 21) }, pages));
      expect(m.runs).to.deep.equal([{ guestAddr: 0x3_0000_1234, len: big }]);
      expect(inPageOffset(0x1_0000_1234, 12)).to.equal(0x234);
      expect(inPageOffset(2 ** 52 + 5, 30)).to.equal(5);
      expect(pagesNeeded(1, { pageSizeLog2: 30, firstPageOffset: 2 ** 30 - 1 })).to.equal(1);
      expect(pagesNeeded(2, { pageSizeLog2: 30, firstPageOffset: 2 ** 30 - 1 })).to.equal(2);
    });

    it('ZERO_BASED regions start at address 0', () => {
      const m = mr(mrFromPages(spec({ flags: ALL | MrFlag.ZERO_BASED, length: PG }), { pageSizeLog2: 12, firstPageOffset: 0 }, [RAM_BASE]));
      expect(m.base).to.equal(0);
    });

    it('direct (map_count 1) and unmapped (map_count 0) regions', () => {
      const d = mr(mrFromDirect(spec({ length: 10 * PG }), RAM_BASE + 0x123));
      expect(d.runs).to.deep.equal([{ guestAddr: RAM_BASE + 0x123, len: 10 * PG }]);
      const u = mr(mrUnmapped(spec()));
      expect([u.length, u.runs.length]).to.deep.equal([0, 0]);
      expect(mrFromDirect(spec(), U64_UNSAFE)).to.equal(MrBuildError.BAD_ADDRESS);
      expect(mrFromDirect(spec({ length: 100 }), Number.MAX_SAFE_INTEGER - 50)).to.equal(MrBuildError.BAD_ADDRESS);
    });

    const g = { pageSizeLog2: 12, firstPageOffset: 0 };
    const three = [0, 1, 2].map((i) => RAM_BASE + i * PG);
    const errors: [string, () => MemoryRegion | MrBuildError, MrBuildError][] = [
      ['length not decodable', () => mrFromPages(spec({ length: U64_UNSAFE }), g, three), MrBuildError.BAD_LENGTH],
      ['fractional length', () => mrFromPages(spec({ length: 1.5 }), g, three), MrBuildError.BAD_LENGTH],
      ['iova not decodable', () => mrFromPages(spec({ iova: U64_UNSAFE }), g, three), MrBuildError.WRAP],
      ['iova + length past 2^53', () => mrFromPages(spec({ iova: Number.MAX_SAFE_INTEGER - PG }), g, three), MrBuildError.WRAP],
      ['page size 2^11', () => mrFromPages(spec(), { pageSizeLog2: 11, firstPageOffset: 0 }, three), MrBuildError.BAD_PAGE_SIZE],
      ['page size 2^41', () => mrFromPages(spec(), { pageSizeLog2: 41, firstPageOffset: 0 }, three), MrBuildError.BAD_PAGE_SIZE],
      ['offset not inside the first page', () => mrFromPages(spec(), { pageSizeLog2: 12, firstPageOffset: PG }, three), MrBuildError.BAD_OFFSET],
      ['negative offset', () => mrFromPages(spec(), { pageSizeLog2: 12, firstPageOffset: -1 }, three), MrBuildError.BAD_OFFSET],
      ['more pages than the region needs', () => mrFromPages(spec(), g, [...three, RAM_BASE + 3 * PG]), MrBuildError.PAGE_COUNT],
      ['fewer pages than the region needs', () => mrFromPages(spec(), g, three.slice(0, 2)), MrBuildError.PAGE_COUNT],
      ['offset making the region need one more page', () => mrFromPages(spec(), { pageSizeLog2: 12, firstPageOffset: 1 }, three), MrBuildError.PAGE_COUNT],
      ['misaligned page', () => mrFromPages(spec(), g, [RAM_BASE, RAM_BASE + PG + 8, RAM_BASE + 2 * PG]), MrBuildError.PAGE_MISALIGNED],
      ['undecodable page', () => mrFromPages(spec(), g, [RAM_BASE, U64_UNSAFE, RAM_BASE]), MrBuildError.BAD_ADDRESS],
      ['page past 2^53', () => mrFromPages(spec(), g, [RAM_BASE, 2 ** 53 - PG, RAM_BASE]), MrBuildError.BAD_ADDRESS],
    ];
    for (const [what, build, code] of errors) {
      it(`refuses: ${what}`, () => {
        expect(mrBuildErrorName(build() as MrBuildError)).to.equal(mrBuildErrorName(code));
      });
    }

    it('refuses a table larger than MAX_PAGE_TABLE_ENTRIES before reading it', () => {
      const { mem } = ram();
      const huge = spec({ iova: 0, length: (MAX_PAGE_TABLE_ENTRIES + 1) * PG });
      expect(mrFromTable(mem, huge, { pageSizeLog2: 12, firstPageOffset: 0 }, MAX_PAGE_TABLE_ENTRIES + 1, RAM_BASE)).to.equal(MrBuildError.TABLE_TOO_BIG);
    });
  });

  describe('building from a guest page list (CREATE_MR / REG_MR)', () => {
    it('reads LE64 entries from guest memory, in chunks, merging as it goes', () => {
      const { buf, mem } = ram(2048 * 8 + PG);
      const n = 1200;
      const table = new Poke(n * 8);
      // pairs of adjacent pages, pairs apart: 600 runs of 2 pages
      for (let i = 0; i < n; i++) table.le64(i * 8, 0x40_0000_0000 + (Math.floor(i / 2) * 4 + (i % 2)) * PG);
      table.buf.copy(buf, PG);
      const m = mr(mrFromTable(mem, spec({ iova: 0, length: n * PG }), { pageSizeLog2: 12, firstPageOffset: 0 }, n, RAM_BASE + PG));
      expect(m.runs).to.have.length(600);
      expect(m.runs[599]).to.deep.equal({ guestAddr: 0x40_0000_0000 + 599 * 4 * PG, len: 2 * PG });
      expect(m.runOffsets[599]).to.equal(599 * 2 * PG);
    });

    it('map_count 0 and 1 do not read a table', () => {
      const { mem } = ram();
      expect(mr(mrFromTable(mem, spec(), { pageSizeLog2: 0, firstPageOffset: 0 }, 0, 0)).length).to.equal(0);
      expect(mr(mrFromTable(mem, spec(), { pageSizeLog2: 0, firstPageOffset: 0 }, 1, RAM_BASE + 0x10)).runs)
        .to.deep.equal([{ guestAddr: RAM_BASE + 0x10, len: 3 * PG }]);
    });

    it('an unreadable table refuses the region', () => {
      const { mem } = ram(PG);
      const s = spec({ iova: 0 });
      const g = { pageSizeLog2: 12, firstPageOffset: 0 };
      expect(mrFromTable(mem, s, g, 3, RAM_BASE + PG - 8)).to.equal(MrBuildError.TABLE_UNREADABLE);
      expect(mrFromTable(mem, s, g, 3, U64_UNSAFE)).to.equal(MrBuildError.TABLE_UNREADABLE);
      expect(mrFromTable(mem, s, g, 4, RAM_BASE)).to.equal(MrBuildError.PAGE_COUNT);
    });
  });

  describe('translate', () => {
    // region 0x7f..10 length 3 pages over pages 0,1 (adjacent) and 5,6
    const { buf, mem } = ram();
    const pages = [RAM_BASE, RAM_BASE + PG, RAM_BASE + 5 * PG, RAM_BASE + 6 * PG];
    const m = mr(mrFromPages(spec(), { pageSizeLog2: 12, firstPageOffset: 0x10 }, pages));
    const base = m.base;

    it('inside one run: one view of the right bytes', () => {
      const out: Buffer[] = [];
      expect(translate(m, base + 0x100, 0x20, Access.LOCAL_READ, mem, out)).to.equal(Xlate.OK);
      expect(out).to.have.length(1);
      expect(out[0]).to.deep.equal(buf.subarray(0x110, 0x130));
    });

    it('across a page boundary inside a merged run: still one view', () => {
      const out: Buffer[] = [];
      expect(translate(m, base + PG - 0x20, 0x40, Access.LOCAL_WRITE, mem, out)).to.equal(Xlate.OK);
      expect(out).to.have.length(1);
      expect(out[0]).to.deep.equal(buf.subarray(PG - 0x10, PG + 0x30));
    });

    it('across runs: one view per run, in order, covering the whole range', () => {
      const out: Buffer[] = [];
      const start = base + 2 * PG - 0x30; // 0x20 bytes before the run break
      expect(translate(m, start, 0x40, Access.REMOTE_READ, mem, out)).to.equal(Xlate.OK);
      expect(out.map((v) => v.length)).to.deep.equal([0x20, 0x20]);
      expect(concat(out)).to.deep.equal(Buffer.concat([buf.subarray(2 * PG - 0x20, 2 * PG), buf.subarray(5 * PG, 5 * PG + 0x20)]));
    });

    it('starting exactly at a run boundary: views from that run only, no empty pieces', () => {
      const out: Buffer[] = [];
      expect(translate(m, base + m.runOffsets[1]!, 0x20, Access.LOCAL_READ, mem, out)).to.equal(Xlate.OK);
      expect(out).to.have.length(1);
      expect(out[0]).to.deep.equal(buf.subarray(5 * PG, 5 * PG + 0x20));
      out.length = 0;
      expect(translate(m, base + m.runOffsets[1]! - 1, 2, Access.LOCAL_READ, mem, out)).to.equal(Xlate.OK);
      expect(out.map((v) => v.length)).to.deep.equal([1, 1]);
    });

    it('the whole region, and exactly its last byte', () => {
      const out: Buffer[] = [];
      expect(translate(m, base, 3 * PG, Access.REMOTE_WRITE, mem, out)).to.equal(Xlate.OK);
      expect(concat(out).length).to.equal(3 * PG);
      out.length = 0;
      expect(translate(m, base + 3 * PG - 1, 1, Access.LOCAL_READ, mem, out)).to.equal(Xlate.OK);
      expect(out[0]![0]).to.equal(buf[5 * PG + PG + 0x10 - 1]);
    });

    it('across guest-memory windows: GuestMemory splits further', () => {
      const split = new SplitMemory(RAM_BASE, buf, 1024);
      const out: Buffer[] = [];
      expect(translate(m, base + 0x3f0 - 0x10, 0x20, Access.LOCAL_READ, split, out)).to.equal(Xlate.OK);
      expect(out.map((v) => v.length)).to.deep.equal([0x10, 0x10]);
    });

    it('appends after existing views and leaves them alone on error', () => {
      const keep = Buffer.from('x');
      const out: Buffer[] = [keep];
      expect(translate(m, base, 0x10, Access.LOCAL_READ, mem, out)).to.equal(Xlate.OK);
      expect(out).to.have.length(2);
      out.length = 1;
      const far = mr(mrFromPages(spec(), { pageSizeLog2: 12, firstPageOffset: 0x10 }, [RAM_BASE, RAM_BASE + PG, 0x9000_0000, 0x9000_1000]));
      expect(translate(far, base, 3 * PG, Access.LOCAL_READ, mem, out)).to.equal(Xlate.UNMAPPED);
      expect(out).to.deep.equal([keep]);
    });

    it('zero length succeeds with no views and no checks', () => {
      const out: Buffer[] = [];
      expect(translate(m, 0, 0, Access.REMOTE_ATOMIC, mem, out)).to.equal(Xlate.OK);
      expect(translate(mr(mrFromDirect(spec({ flags: 0 }), RAM_BASE)), base + 10 * PG, 0, Access.REMOTE_WRITE, mem, out)).to.equal(Xlate.OK);
      expect(out).to.have.length(0);
    });

    const bad: [string, number, number, Xlate][] = [
      ['below the region', base - 1, 2, Xlate.BOUNDS],
      ['past the end by one', base + 3 * PG - 1, 2, Xlate.BOUNDS],
      ['starting at the end', base + 3 * PG, 1, Xlate.BOUNDS],
      ['far outside', 0x10, 0x10, Xlate.BOUNDS],
      ['negative address', -16, 4, Xlate.BAD_VALUE],
      ['undecodable address', U64_UNSAFE, 4, Xlate.BAD_VALUE],
      ['fractional address', base + 0.5, 4, Xlate.BAD_VALUE],
      ['NaN length', base, Number.NaN, Xlate.BAD_VALUE],
      ['negative length', base, -1, Xlate.BAD_VALUE],
      ['wrapping range', Number.MAX_SAFE_INTEGER - 2, 8, Xlate.WRAP],
      ['longer than the largest message', base, MAX_MSG_BYTES + 1, Xlate.TOO_LONG],
    ];
    for (const [what, va, len, x] of bad) {
      it(`refuses: ${what} (${xlateName(x)})`, () => {
        const out: Buffer[] = [];
        expect(xlateName(translate(m, va, len, Access.LOCAL_READ, mem, out))).to.equal(xlateName(x));
        expect(out).to.have.length(0);
      });
    }

    it('checks each access right against the region flags; local read needs none', () => {
      const rights: [Access, number][] = [
        [Access.LOCAL_WRITE, MrFlag.LOCAL_WRITE], [Access.REMOTE_WRITE, MrFlag.REMOTE_WRITE],
        [Access.REMOTE_READ, MrFlag.REMOTE_READ], [Access.REMOTE_ATOMIC, MrFlag.REMOTE_ATOMIC],
      ];
      for (const [access, flag] of rights) {
        const without = mr(mrFromDirect(spec({ flags: ALL & ~flag }), RAM_BASE));
        const withIt = mr(mrFromDirect(spec({ flags: flag }), RAM_BASE));
        expect(translate(without, base, 8, access, mem, [])).to.equal(Xlate.ACCESS);
        expect(translate(withIt, base, 8, access, mem, [])).to.equal(Xlate.OK);
      }
      expect(translate(mr(mrFromDirect(spec({ flags: 0 }), RAM_BASE)), base, 8, Access.LOCAL_READ, mem, [])).to.equal(Xlate.OK);
      expect([Access.LOCAL_READ, Access.REMOTE_READ].map(accessWrites)).to.deep.equal([false, false]);
      expect([Access.LOCAL_WRITE, Access.REMOTE_WRITE, Access.REMOTE_ATOMIC].map(accessWrites)).to.deep.equal([true, true, true]);
    });

    it('guest memory shared read-only refuses writes but not reads', () => {
      const ro = new BufferMemory(buf, RAM_BASE, true);
      expect(translate(m, base, 8, Access.LOCAL_WRITE, ro, [])).to.equal(Xlate.READ_ONLY);
      expect(translate(m, base, 8, Access.REMOTE_READ, ro, [])).to.equal(Xlate.OK);
    });
  });

  describe('keys', () => {
    const table = new FakeMrs();
    const region = table.add(mr(mrFromDirect(spec({ key: (5 << 8) | 0x33, pd: 2 }), RAM_BASE)));

    it('looks up by index and checks the tag byte and the PD', () => {
      expect(resolveKey(table, (5 << 8) | 0x33, KeyUse.LOCAL, kctx(2), 8)).to.equal(region);
      expect(resolveKey(table, (5 << 8) | 0x34, KeyUse.LOCAL, kctx(2), 8)).to.equal(Xlate.BAD_KEY);
      expect(resolveKey(table, (6 << 8) | 0x33, KeyUse.LOCAL, kctx(2), 8)).to.equal(Xlate.BAD_KEY);
      expect(resolveKey(table, (5 << 8) | 0x33, KeyUse.REMOTE, kctx(3), 8)).to.equal(Xlate.PD_MISMATCH);
      for (const k of [-1, 2 ** 32, 1.5, Number.NaN]) expect(resolveKey(table, k, KeyUse.LOCAL, kctx(2), 8)).to.equal(Xlate.BAD_KEY);
    });

    it('responder QP access bits (QP bit and MR bit both needed)', () => {
      expect(qpAllows(kctx(1, QpFlag.REMOTE_WRITE), Access.REMOTE_WRITE)).to.equal(true);
      expect(qpAllows(kctx(1, QpFlag.REMOTE_READ | QpFlag.REMOTE_ATOMIC), Access.REMOTE_WRITE)).to.equal(false);
      expect(qpAllows(kctx(1, QpFlag.REMOTE_READ), Access.REMOTE_READ)).to.equal(true);
      expect(qpAllows(kctx(1, QpFlag.REMOTE_ATOMIC), Access.REMOTE_ATOMIC)).to.equal(true);
      expect(qpAllows(kctx(1, 0), Access.REMOTE_ATOMIC)).to.equal(false);
      expect(qpAllows(kctx(1, 0), Access.LOCAL_WRITE)).to.equal(true);
    });
  });

  describe('the DMA key (key 0) policy', () => {
    const table = new FakeMrs();
    const PRIV = QpFlag.PRIVILEGED;
    const RPRIV = QpFlag.REMOTE_PRIVILEGED;
    const policy: [KeyUse, number, boolean][] = [
      [KeyUse.LOCAL, PRIV, true],
      [KeyUse.LOCAL, PRIV | RPRIV, true],
      [KeyUse.LOCAL, 0, false],
      [KeyUse.LOCAL, RPRIV, false],
      [KeyUse.REMOTE, RPRIV, true],
      [KeyUse.REMOTE, PRIV, false],
      [KeyUse.REMOTE, 0, false],
      [KeyUse.UNTRUSTED, PRIV | RPRIV, false],
      [KeyUse.UNTRUSTED, 0, false],
    ];
    const useName = ['local', 'remote', 'untrusted'];
    for (const [use, flags, allowed] of policy) {
      it(`${useName[use]} use, QP flags ${flags.toString(16)}: ${allowed ? 'allowed' : 'refused'}`, () => {
        expect(dmaKeyAllowed(use, kctx(1, flags), 8)).to.equal(allowed);
        expect(resolveKey(table, 0, use, kctx(1, flags), 8)).to.equal(allowed ? DMA_MR : Xlate.DMA_KEY_REFUSED);
        // zero-length accesses touch nothing and are always let through
        expect(dmaKeyAllowed(use, kctx(1, flags), 0)).to.equal(true);
      });
    }

    it('reaches any guest RAM shared with the server, by bus address, in any PD', () => {
      const { buf, mem } = ram();
      const out: Buffer[] = [];
      expect(resolveKey(table, 0, KeyUse.LOCAL, kctx(99, PRIV), 16)).to.equal(DMA_MR);
      expect(translate(DMA_MR, RAM_BASE + 0x1234, 16, Access.LOCAL_WRITE, mem, out)).to.equal(Xlate.OK);
      expect(out[0]).to.deep.equal(buf.subarray(0x1234, 0x1244));
      out.length = 0;
      expect(translate(DMA_MR, RAM_BASE + 63 * PG, 2 * PG, Access.REMOTE_WRITE, mem, out)).to.equal(Xlate.UNMAPPED);
    });

    it('reaches nothing outside guest memory and still refuses wrapping ranges', () => {
      const { mem } = ram();
      expect(translate(DMA_MR, 0, 8, Access.LOCAL_READ, mem, [])).to.equal(Xlate.UNMAPPED);
      expect(translate(DMA_MR, Number.MAX_SAFE_INTEGER - 4, 8, Access.LOCAL_READ, mem, [])).to.equal(Xlate.WRAP);
      expect(translate(DMA_MR, RAM_BASE, MAX_MSG_BYTES + 1, Access.LOCAL_READ, mem, [])).to.equal(Xlate.TOO_LONG);
      const ro = new BufferMemory(Buffer.alloc(PG), RAM_BASE, true);
      expect(translate(DMA_MR, RAM_BASE, 8, Access.LOCAL_WRITE, ro, [])).to.equal(Xlate.READ_ONLY);
    });
  });
});
