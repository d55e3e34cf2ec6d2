// The resource layer on its own (lib/rdma), against a Buffer standing in for
// guest RAM: page tables as merged runs and their translation, the run
// budget, the resource manager's keys (tags, the DMA key, PDs, access,
// bounds, wrap), fast registration, invalidation and windows, the QP state
// table, and the header-template parser.

import { expect } from 'chai';
import { parseHeaderTemplate } from '../../lib/ionic/rdma/header-template';
import { CqPost, cqDoorbell, cqFree, postCqe } from '../../lib/rdma/datapath/cq-ring';
import { gidToString } from '../../lib/rdma/address';
import { CqeType, newCqeRecord } from '../../lib/rdma/datapath/cqe';
import { DeviceCounter, DEVICE_COUNTER_NAMES, QP_COUNTER_NAMES } from '../../lib/rdma/counters';
import { loadPageList, PageTable, PageTableBuilder, PtStatus, RunBudget } from '../../lib/rdma/page-table';
import { KeyStatus, ResourceManager } from '../../lib/rdma/resources';
import { MrFlag, qpTransitionAllowed, QpState, QpType } from '../../lib/rdma/types';
import { BufferMemory } from '../../lib/vfio-user/buffer-memory';
import { headerTemplate } from '../support/ionic/rdma-cmds';

const PAGE = 4096;

describe('rdma resources: page tables', () => {
  it('merges adjacent pages into runs and translates across them', () => {
    const b = new PageTableBuilder(5 * PAGE - 100, 12, 100);
    // pages A, A+1 (adjacent), B, B+1, C: three runs.
    for (const p of [0x10000, 0x11000, 0x40000, 0x41000, 0x80000]) expect(b.addPage(p)).to.equal(true);
    const t = b.finish();
    expect([t.runs, t.entries, t.length]).to.deep.equal([3, 5, 5 * PAGE - 100]);
    expect(t.run(0)).to.deep.equal({ addr: 0x10064, len: 2 * PAGE - 100 });
    expect(t.run(1)).to.deep.equal({ addr: 0x40000, len: 2 * PAGE });
    expect(t.run(2)).to.deep.equal({ addr: 0x80000, len: PAGE });
    const out: number[] = [];
    expect(t.translate(2 * PAGE - 110, 20, out)).to.equal(PtStatus.OK);
    expect(out).to.deep.equal([0x10064 + 2 * PAGE - 110, 10, 0x40000, 10]);
    out.length = 0;
    expect(t.translate(0, t.length, out)).to.equal(PtStatus.OK);
    expect(out.length).to.equal(6);
    expect(t.translate(t.length, 0, out)).to.equal(PtStatus.OK);
    expect(t.translate(t.length - 1, 2, out)).to.equal(PtStatus.BOUNDS);
    expect(t.translate(-1, 2, out)).to.equal(PtStatus.BAD_RANGE);
    expect(t.translate(0, 1.5, out)).to.equal(PtStatus.BAD_RANGE);
    expect(t.translate(Number.MAX_SAFE_INTEGER, 1, out)).to.equal(PtStatus.BOUNDS);
    expect(t.addressOf(PAGE, 8)).to.equal(0x11064);
    expect(t.addressOf(2 * PAGE - 104, 8)).to.equal(-1); // crosses a run boundary
  });

  it('refuses misaligned pages, addresses past 2^53 and wrapping blocks', () => {
    const b = new PageTableBuilder(2 * PAGE, 12, 0);
    expect(b.addPage(0x1001)).to.equal(false);
    expect(b.addPage(2 ** 53)).to.equal(false);
    expect(b.addPage(-4096)).to.equal(false);
    expect(PageTable.contiguous(Number.MAX_SAFE_INTEGER - 10, 100)).to.equal(null);
    expect(PageTable.contiguous(0x1000, 100)?.runs).to.equal(1);
    expect(PageTableBuilder.pagesNeeded(1, 12, 4095)).to.equal(1);
    expect(PageTableBuilder.pagesNeeded(2, 12, 4095)).to.equal(2);
  });

  it('reads a guest page list in chunks, charges its runs, and gives them back on failure', () => {
    const ram = new BufferMemory(Buffer.alloc(1 << 20), 0x100000);
    const n = 20000; // more than one read chunk
    const list = Buffer.alloc(n * 8);
    for (let i = 0; i < n; i++) list.writeBigUInt64LE(BigInt(0x10000000 + i * 2 * PAGE), i * 8); // never adjacent
    list.copy(ram.buffer, 0);
    const budget = new RunBudget(1 << 20);
    const t = loadPageList(
      ram,
      { listAddr: 0x100000, count: n, pageShift: 12, firstOffset: 0, length: n * PAGE },
      budget,
    );
    expect(t).to.be.instanceOf(PageTable);
    expect((t as PageTable).runs).to.equal(n);
    expect(budget.used).to.equal(n);
    const small = new RunBudget(100);
    expect(
      loadPageList(ram, { listAddr: 0x100000, count: n, pageShift: 12, firstOffset: 0, length: n * PAGE }, small),
    ).to.equal('too-many-runs');
    expect(small.used).to.equal(0);
    expect(
      loadPageList(ram, { listAddr: 0x1f8000, count: n, pageShift: 12, firstOffset: 0, length: n * PAGE }, small),
    ).to.equal('unreadable');
    ram.buffer.writeBigUInt64LE(0x123n, 8);
    expect(
      loadPageList(ram, { listAddr: 0x100000, count: 4, pageShift: 12, firstOffset: 0, length: 4 * PAGE }, small),
    ).to.equal('misaligned');
    ram.buffer.writeBigUInt64LE(2n ** 63n, 8);
    expect(
      loadPageList(ram, { listAddr: 0x100000, count: 4, pageShift: 12, firstOffset: 0, length: 4 * PAGE }, small),
    ).to.equal('misaligned');
    expect(
      loadPageList(
        ram,
        { listAddr: Number.MAX_SAFE_INTEGER - 8, count: 4, pageShift: 12, firstOffset: 0, length: 4 * PAGE },
        small,
      ),
    ).to.equal('bad-range');
    expect(small.used).to.equal(0);
  });
});

describe('rdma resources: keys and translation', () => {
  const key = (i: number, tag: number): number => ((i << 8) | tag) >>> 0;
  let rm: ResourceManager;
  const mr = (index: number, tag: number, flags: number, iova: number, length: number, addr: number): void => {
    const r = rm.createMr({ key: key(index, tag), pdId: 1, flags, iova, length }, PageTable.contiguous(addr, length));
    expect(r.ok).to.equal(true);
  };

  beforeEach(() => {
    rm = new ResourceManager({ mrs: 64, ptRuns: 1000 });
  });

  it('checks the tag, the DMA key, the PD, the access and the bounds', () => {
    mr(3, 0x77, MrFlag.LOCAL_WRITE | MrFlag.REMOTE_READ, 0x7000, 0x1000, 0x200000);
    const out: number[] = [];
    const o = { dmaKey: false };
    expect(rm.translate(key(3, 0x77), 0x7800, 16, MrFlag.LOCAL_WRITE, o, out)).to.equal(KeyStatus.OK);
    expect(out).to.deep.equal([0x200800, 16]);
    expect(rm.translate(key(3, 0x78), 0x7800, 16, 0, o, out)).to.equal(KeyStatus.TAG);
    expect(rm.translate(key(4, 0x77), 0x7800, 16, 0, o, out)).to.equal(KeyStatus.NO_KEY);
    expect(rm.translate(key(3, 0x77), 0x7800, 16, MrFlag.REMOTE_WRITE, o, out)).to.equal(KeyStatus.ACCESS);
    expect(rm.translate(key(3, 0x77), 0x7800, 16, MrFlag.REMOTE_ATOMIC, o, out)).to.equal(KeyStatus.ACCESS);
    expect(rm.translate(key(3, 0x77), 0x6fff, 2, 0, o, out)).to.equal(KeyStatus.BOUNDS);
    expect(rm.translate(key(3, 0x77), 0x7fff, 2, 0, o, out)).to.equal(KeyStatus.BOUNDS);
    expect(rm.translate(key(3, 0x77), 0x7000, 0x1001, 0, o, out)).to.equal(KeyStatus.BOUNDS);
    expect(rm.translate(key(3, 0x77), 0x7000, -1, 0, o, out)).to.equal(KeyStatus.BAD_RANGE);
    expect(rm.translate(key(3, 0x77), 2 ** 60, 1, 0, o, out)).to.equal(KeyStatus.BAD_RANGE);
    expect(rm.translate(key(3, 0x77), 0x7000, 8, 0, { dmaKey: false, pdId: 9 }, out)).to.equal(KeyStatus.PD);
    expect(out.length).to.equal(2); // nothing appended on errors
    // Key 0: the identity map, only where allowed, never wrapping.
    expect(rm.translate(0, 0x123456, 64, MrFlag.LOCAL_WRITE, o, out)).to.equal(KeyStatus.NO_KEY);
    expect(rm.translate(0, 0x123456, 64, MrFlag.LOCAL_WRITE, { dmaKey: true }, out)).to.equal(KeyStatus.OK);
    expect(out.slice(2)).to.deep.equal([0x123456, 64]);
    expect(rm.translate(0, Number.MAX_SAFE_INTEGER - 10, 64, 0, { dmaKey: true }, out)).to.equal(KeyStatus.BAD_RANGE);
    // A zero-based MR: addresses are offsets from 0.
    mr(5, 1, MrFlag.ZERO_BASED, 0x9000_0000, 0x2000, 0x300000);
    out.length = 0;
    expect(rm.translate(key(5, 1), 0x1ff0, 16, 0, o, out)).to.equal(KeyStatus.OK);
    expect(out).to.deep.equal([0x301ff0, 16]);
    expect(rm.translate(key(5, 1), 0x9000_0000, 16, 0, o, out)).to.equal(KeyStatus.BOUNDS);
  });

  it('refuses keys outside the table and an index in use, whatever its tag', () => {
    expect(rm.checkMr({ key: key(0, 1), pdId: 1, flags: 0, iova: 0, length: 1 })).to.equal('bad-id');
    expect(rm.checkMr({ key: key(64, 1), pdId: 1, flags: 0, iova: 0, length: 1 })).to.equal('bad-id');
    mr(2, 1, 0, 0, 16, 0x1000);
    expect(rm.checkMr({ key: key(2, 2), pdId: 1, flags: 0, iova: 0, length: 1 })).to.equal('exists');
    expect(rm.checkMr({ key: key(3, 2), pdId: 1, flags: 0x4000, iova: 0, length: 0 })).to.equal('bad-type');
    expect(rm.checkMr({ key: key(3, 2), pdId: 1, flags: 0, iova: Number.MAX_SAFE_INTEGER, length: 2 })).to.equal(
      'bad-attr',
    );
    // A user MR needs a table, an FRMR must not have one.
    expect(rm.createMr({ key: key(3, 1), pdId: 1, flags: 0, iova: 0, length: 16 }, null).ok).to.equal(false);
    expect(
      rm.createMr(
        { key: key(3, 1), pdId: 1, flags: MrFlag.UKEY_EN | MrFlag.INV_EN, iova: 0, length: 0 },
        PageTable.contiguous(0, 16),
      ).ok,
    ).to.equal(false);
  });

  it('fast-registers an FRMR with a new tag, invalidates it, and registers it again', () => {
    expect(
      rm.createMr({ key: key(7, 1), pdId: 1, flags: MrFlag.UKEY_EN | MrFlag.INV_EN, iova: 0, length: 0 }, null).ok,
    ).to.equal(true);
    const out: number[] = [];
    expect(rm.translate(key(7, 1), 0, 0, 0, { dmaKey: false }, out)).to.equal(KeyStatus.INVALID);
    const t = PageTable.contiguous(0x500000, 0x3000)!;
    rm.budget.take(1);
    expect(
      rm.fastRegister(key(7, 1), key(7, 2), 0xa000, 0x3000, MrFlag.LOCAL_WRITE | MrFlag.REMOTE_WRITE, false, t),
    ).to.equal(KeyStatus.OK);
    expect(rm.translate(key(7, 1), 0xa000, 8, 0, { dmaKey: false }, out)).to.equal(KeyStatus.TAG);
    expect(rm.translate(key(7, 2), 0xb000, 8, MrFlag.REMOTE_WRITE, { dmaKey: false }, out)).to.equal(KeyStatus.OK);
    expect(out).to.deep.equal([0x501000, 8]);
    // Registering a mapped FRMR again is refused (and the new table's runs given back).
    const t2 = PageTable.contiguous(0x600000, 0x1000)!;
    rm.budget.take(1);
    expect(rm.fastRegister(key(7, 2), key(7, 3), 0, 0x1000, 0, false, t2)).to.equal(KeyStatus.INVALID);
    expect(rm.budget.used).to.equal(1);
    expect(rm.invalidate(key(7, 2))).to.equal(KeyStatus.OK);
    expect(rm.translate(key(7, 2), 0xb000, 8, 0, { dmaKey: false }, out)).to.equal(KeyStatus.INVALID);
    rm.budget.take(1);
    expect(rm.fastRegister(key(7, 2), key(7, 3), 0, 0x1000, 0, false, t2)).to.equal(KeyStatus.OK);
    expect(rm.budget.used).to.equal(1);
    // A user MR cannot be invalidated.
    mr(8, 1, 0, 0, 16, 0x1000);
    expect(rm.invalidate(key(8, 1))).to.equal(KeyStatus.ACCESS);
  });

  it('binds windows onto an MR that allows MW_BIND, translates through them, and unbinds', () => {
    mr(10, 1, MrFlag.LOCAL_WRITE | MrFlag.REMOTE_WRITE | MrFlag.MW_BIND, 0x10000, 0x4000, 0x700000);
    mr(11, 1, MrFlag.LOCAL_WRITE, 0x20000, 0x1000, 0x800000);
    expect(
      rm.createMr({ key: key(12, 1), pdId: 1, flags: MrFlag.UKEY_EN | MrFlag.IS_MW, iova: 0, length: 0 }, null).ok,
    ).to.equal(true);
    expect(
      rm.createMr(
        { key: key(13, 1), pdId: 1, flags: MrFlag.UKEY_EN | MrFlag.IS_MW | MrFlag.INV_EN, iova: 0, length: 0 },
        null,
      ).ok,
    ).to.equal(true);
    expect(rm.bindMw(key(12, 1), key(12, 2), key(11, 1), 0x20000, 0x100, MrFlag.REMOTE_READ)).to.equal(
      KeyStatus.ACCESS,
    ); // no MW_BIND
    expect(rm.bindMw(key(12, 1), key(12, 2), key(10, 1), 0x13000, 0x2000, MrFlag.REMOTE_READ)).to.equal(
      KeyStatus.BOUNDS,
    );
    expect(rm.bindMw(key(12, 1), key(12, 2), key(10, 1), 0x11000, 0x1000, MrFlag.REMOTE_READ)).to.equal(KeyStatus.OK);
    const out: number[] = [];
    expect(rm.translate(key(12, 2), 0x11800, 16, MrFlag.REMOTE_READ, { dmaKey: false }, out)).to.equal(KeyStatus.OK);
    expect(out).to.deep.equal([0x701800, 16]);
    expect(rm.translate(key(12, 2), 0x11800, 16, MrFlag.REMOTE_WRITE, { dmaKey: false }, out)).to.equal(
      KeyStatus.ACCESS,
    );
    expect(rm.translate(key(12, 2), 0x12000, 16, 0, { dmaKey: false }, out)).to.equal(KeyStatus.BOUNDS);
    // Destroying the MR kills the window's translation.
    expect(rm.destroyMr(key(10, 1)).ok).to.equal(true);
    expect(rm.translate(key(12, 2), 0x11800, 16, 0, { dmaKey: false }, out)).to.equal(KeyStatus.INVALID);
    // Type 1 unbinds with length 0; type 2 is invalidated.
    expect(rm.bindMw(key(12, 2), key(12, 3), 0, 0, 0, 0)).to.equal(KeyStatus.OK);
    expect(rm.translate(key(12, 3), 0, 0, 0, { dmaKey: false }, out)).to.equal(KeyStatus.INVALID);
    mr(14, 1, MrFlag.LOCAL_WRITE | MrFlag.MW_BIND, 0, 0x1000, 0x900000);
    expect(rm.bindMw(key(13, 1), key(13, 5), key(14, 1), 0, 0x1000, MrFlag.REMOTE_WRITE)).to.equal(KeyStatus.OK);
    expect(rm.invalidate(key(13, 5))).to.equal(KeyStatus.OK);
    expect(rm.translate(key(13, 5), 0, 8, 0, { dmaKey: false }, out)).to.equal(KeyStatus.INVALID);
  });
});

describe('rdma resources: objects and state', () => {
  it('follows the IB QP state table', () => {
    const allowed: Array<[QpState, QpState]> = [
      [QpState.RESET, QpState.INIT],
      [QpState.INIT, QpState.INIT],
      [QpState.INIT, QpState.RTR],
      [QpState.RTR, QpState.RTS],
      [QpState.RTS, QpState.RTS],
      [QpState.RTS, QpState.SQD],
      [QpState.SQD, QpState.RTS],
      [QpState.SQD, QpState.SQD],
      [QpState.SQE, QpState.RTS],
      [QpState.RTS, QpState.ERR],
      [QpState.ERR, QpState.RESET],
      [QpState.RESET, QpState.RESET],
      [QpState.ERR, QpState.ERR],
    ];
    const refused: Array<[QpState, QpState]> = [
      [QpState.RESET, QpState.RTR],
      [QpState.RESET, QpState.RTS],
      [QpState.INIT, QpState.RTS],
      [QpState.RTR, QpState.RTR],
      [QpState.RTR, QpState.INIT],
      [QpState.ERR, QpState.RTS],
      [QpState.RTS, QpState.INIT],
    ];
    for (const [a, b] of allowed) expect(qpTransitionAllowed(a, b), `${a}->${b}`).to.equal(true);
    for (const [a, b] of refused) expect(qpTransitionAllowed(a, b), `${a}->${b}`).to.equal(false);
  });

  it('keeps QP/CQ references and limits, and hands out unique handles across resets', () => {
    const rm = new ResourceManager({ qps: 8, cqs: 4, srqs: 1 });
    const ring = (): PageTable => PageTable.contiguous(0x1000, 4096)!;
    const cq = rm.createCq({ id: 3, eqId: 2, depthLog2: 7, strideLog2: 5, dbid: 0, admin: false }, ring());
    expect(cq.ok).to.equal(true);
    expect(rm.createCq({ id: 4, eqId: 2, depthLog2: 7, strideLog2: 5, dbid: 0, admin: false }, ring())).to.deep.include(
      { ok: false, error: 'bad-id' },
    );
    const spec = {
      id: 2,
      type: QpType.RC,
      pdId: 1,
      flags: 1 << 15,
      sqCqId: 3,
      rqCqId: 3,
      sq: { depthLog2: 6, strideLog2: 6 },
      rq: { depthLog2: 6, strideLog2: 6 },
      srqId: null,
      dbid: 0,
    };
    const qp = rm.createQp(spec, ring(), ring());
    expect(qp.ok && qp.value.privileged).to.equal(true);
    expect(rm.checkQp({ ...spec, id: 1 })).to.equal('bad-type'); // GSI must be UD
    expect(rm.checkQp({ ...spec, id: 8 })).to.equal('bad-id');
    expect(rm.checkQp({ ...spec, id: 3, sqCqId: 9 })).to.equal('unknown');
    expect(rm.destroyCq(3)).to.deep.include({ ok: false, error: 'busy' });
    const h1 = qp.ok ? qp.value.handle : 0;
    rm.destroyQp(2);
    expect(rm.cqs.get(3)!.refs).to.equal(0);
    rm.reset();
    expect(rm.counts()).to.deep.equal({ qps: 0, cqs: 0, mrs: 0, ahs: 0, srqs: 0, ptRuns: 0 });
    rm.createCq({ id: 3, eqId: 2, depthLog2: 7, strideLog2: 5, dbid: 0, admin: false }, ring());
    const again = rm.createQp(spec, ring(), ring());
    expect(again.ok && again.value.handle > h1).to.equal(true);
    // One SRQ at most; its id is above the QP range.
    const s = rm.createSrq(1, 0, { depthLog2: 6, strideLog2: 6 }, ring(), 0, 0);
    expect(s.ok && s.value.id).to.equal(4096);
    expect(rm.createSrq(1, 0, { depthLog2: 6, strideLog2: 6 }, ring(), 0, 0)).to.deep.include({
      ok: false,
      error: 'no-space',
    });
  });

  it('names every counter within the 27 characters hw_counters allows', () => {
    for (const n of [...DEVICE_COUNTER_NAMES, ...QP_COUNTER_NAMES]) expect(n.length, n).to.be.within(1, 27);
    expect(new Set(DEVICE_COUNTER_NAMES).size).to.equal(DEVICE_COUNTER_NAMES.length);
    expect(DeviceCounter.admin_commands).to.equal(0);
  });
});

describe('rdma: header templates and CQ mechanics', () => {
  const v4 = (d: string): Buffer => Buffer.from(d.split('.').map(Number));

  it('parses the four template shapes the driver builds and refuses others', () => {
    const shapes = [
      headerTemplate({ sip: v4('192.168.1.1'), dip: v4('192.168.1.2') }),
      headerTemplate({ sip: v4('192.168.1.1'), dip: v4('192.168.1.2'), vlan: 100 }),
      headerTemplate({ ipv6: true, sip: Buffer.alloc(16, 1), dip: Buffer.alloc(16, 2) }),
      headerTemplate({ ipv6: true, sip: Buffer.alloc(16, 1), dip: Buffer.alloc(16, 2), vlan: 0xe064 }),
    ];
    expect(shapes.map((t) => t.length)).to.deep.equal([42, 46, 62, 66]);
    const avs = shapes.map((t) => parseHeaderTemplate(t));
    for (const av of avs) expect(typeof av).to.equal('object');
    const [a4, a4v, a6, a6v] = avs as Exclude<ReturnType<typeof parseHeaderTemplate>, string>[];
    expect(gidToString(a4!.dgid)).to.equal('::ffff:192.168.1.2');
    expect(a4v!.vlanTci).to.equal(100);
    expect(a6!.dgid.equals(Buffer.alloc(16, 2))).to.equal(true);
    expect(a6v!.vlanTci).to.equal(0xe064);
    expect(parseHeaderTemplate(shapes[0]!.subarray(0, 40))).to.equal('short');
    expect(parseHeaderTemplate(shapes[2]!.subarray(0, 60))).to.equal('short');
    const bad = Buffer.from(shapes[0]!);
    bad[14] = 0x44; // IHL 4
    expect(parseHeaderTemplate(bad)).to.equal('ip-header');
    const tcp = Buffer.from(shapes[2]!);
    tcp[14 + 6] = 6;
    expect(parseHeaderTemplate(tcp)).to.equal('not-udp');
    expect(parseHeaderTemplate(Buffer.alloc(10))).to.equal('short');
  });

  it('writes CQEs with the color word last, flips at the wrap, stops when full, and fires armed events once', () => {
    const ram = new BufferMemory(Buffer.alloc(8192), 0x10000);
    const rm = new ResourceManager();
    const r = rm.createCq(
      { id: 9, eqId: 2, depthLog2: 2, strideLog2: 5, dbid: 0, admin: false },
      PageTable.contiguous(0x10000, 128)!,
    );
    const cq = r.ok ? r.value : null;
    const events: string[] = [];
    const ev = { notify: () => events.push('notify'), overflow: () => events.push('overflow') };
    const cqe = () =>
      Object.assign(newCqeRecord(), { type: CqeType.SEND_NPG, qid: 5, wqeIdLo: 0x11111111, wqeIdHi: 0x11111111 });
    expect(cqFree(cq!)).to.equal(3);
    cqDoorbell(cq!, 1, 7, ev); // arm (nothing waiting)
    expect(postCqe(ram, cq!, cqe(), false, ev)).to.equal(CqPost.OK);
    expect(events).to.deep.equal(['notify']);
    expect(ram.buffer[31]! & 1).to.equal(1);
    expect(ram.buffer.subarray(16, 24).toString('hex')).to.equal('11'.repeat(8)); // the record's npg wqe_id
    expect(postCqe(ram, cq!, cqe(), false, ev)).to.equal(CqPost.OK);
    expect(postCqe(ram, cq!, cqe(), false, ev)).to.equal(CqPost.OK);
    expect(postCqe(ram, cq!, cqe(), false, ev)).to.equal(CqPost.FULL);
    expect(postCqe(ram, cq!, cqe(), false, ev)).to.equal(CqPost.FULL);
    expect(events).to.deep.equal(['notify', 'overflow']);
    expect(cqDoorbell(cq!, 0, 3, ev)).to.equal(true);
    expect(postCqe(ram, cq!, cqe(), false, ev)).to.equal(CqPost.OK); // slot 3, still color 1
    expect(postCqe(ram, cq!, cqe(), false, ev)).to.equal(CqPost.OK); // slot 0 again, color 0
    expect(ram.buffer[3 * 32 + 31]! & 1).to.equal(1);
    expect(ram.buffer[31]! & 1).to.equal(0);
    // Solicited arm: an ordinary CQE does not fire it, a solicited one does.
    cqDoorbell(cq!, 0, 1, ev);
    cqDoorbell(cq!, 2, 0, ev);
    expect(postCqe(ram, cq!, cqe(), false, ev)).to.equal(CqPost.OK);
    expect(events.length).to.equal(2);
    expect(postCqe(ram, cq!, cqe(), true, ev)).to.equal(CqPost.OK);
    expect(events.length).to.equal(3);
    expect(cqDoorbell(cq!, 0, 4, ev)).to.equal(false); // an index past the ring
    expect(cqDoorbell(cq!, 3, 0, ev)).to.equal(false); // no such ring
  });
});
