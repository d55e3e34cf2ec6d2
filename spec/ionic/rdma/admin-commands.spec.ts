// The RDMA admin queue's object commands (docs/driver-contract.md, ionic RDMA R2.4, R3): CREATE/DESTROY of
// CQs, QPs, MRs (user, fast-registration, windows) and AHs, the no-op
// commands, and each refusal with a bad field, key or address. Every command
// goes through the guest model's admin queue and completes by CQE + EQE +
// interrupt (AHs also in the driver's busy-wait mode).

import { expect } from 'chai';
import { IonicGuest } from '../../support/ionic/guest';
import { PAGE } from '../../support/ionic/regs';
import { Rig } from '../../support/ionic/rig';
import { RdmaCompletion, RdmaGuest } from '../../support/ionic/rdma-guest';
import { AOp, ASt, MrF, QpF, QpS, QpT } from '../../support/ionic/rdma-regs';
import {
  contiguousRing,
  createAhBody,
  createCqBody,
  createMrBody,
  createQpBody,
  headerTemplate,
  idBody,
  pagedRing,
  pageList,
  placeTemplate,
  QpBody,
} from '../../support/ionic/rdma-cmds';
import { KeyStatus } from '../../../lib/rdma/resources';
import { gidToString } from '../../../lib/rdma/address';

describe('ionic rdma: admin queue objects', () => {
  let rig: Rig;
  let g: IonicGuest;
  let r: RdmaGuest;

  const ok = async (op: number, body: Buffer, what = `op ${op}`): Promise<RdmaCompletion> => {
    const c = await r.post(op, body);
    expect(c.error, `${what}: status ${c.status}`).to.equal(false);
    expect(c.op).to.equal(op);
    return c;
  };
  const refused = async (op: number, body: Buffer, status: number, what: string): Promise<void> => {
    const c = await r.post(op, body);
    expect(c.error, `${what}: no error bit`).to.equal(true);
    expect(c.status, what).to.equal(status);
  };
  const kernelCq = async (id: number, eqId = 2): Promise<void> => {
    const ring = contiguousRing(g, PAGE);
    await ok(AOp.CREATE_CQ, createCqBody({ id, eqId, depthLog2: 7, dma: ring.dma }), `CREATE_CQ ${id}`);
  };
  const kernelQp = (id: number, type: number, cqId: number, over: Partial<QpBody> = {}): Buffer => {
    const sq = contiguousRing(g, PAGE);
    const rq = contiguousRing(g, PAGE);
    return createQpBody({
      id,
      type,
      flags: QpF.PRIVILEGED | QpF.SQ_SPEC | QpF.RQ_SPEC,
      sq: { cqId, depthLog2: 6, strideLog2: 6, dma: sq.dma },
      rq: { cqId, depthLog2: 6, strideLog2: 6, dma: rq.dma },
      ...over,
    });
  };

  before(async () => {
    rig = await Rig.start();
    g = await rig.probed(0, { ramSize: 96 << 20 });
    r = await RdmaGuest.boot(g, { cpus: 8 });
  });
  after(async () => rig.close());
  afterEach(() => expect(g.violations).to.deep.equal([]));

  describe('framing and no-op commands', () => {
    it('completes NOOP, DEBUG, QUERY_AH and MODIFY_DCQCN with OK, echoing op and cmd_idx', async () => {
      for (const op of [AOp.NOOP, AOp.DEBUG, AOp.QUERY_AH, AOp.MODIFY_DCQCN]) {
        const c = await ok(op, Buffer.alloc(op === AOp.QUERY_AH ? 8 : 0));
        expect(c.statusLength).to.equal(0);
      }
    });

    it('refuses unknown and reserved opcodes with BAD_CMD', async () => {
      for (const op of [AOp.RSVD_7, 19, 20, 25, 30, 99, 255])
        await refused(op, Buffer.alloc(8), ASt.BAD_CMD, `op ${op}`);
    });

    it('refuses a body shorter than its command with BAD_CMD', async () => {
      await refused(AOp.CREATE_QP, Buffer.alloc(60), ASt.BAD_CMD, 'CREATE_QP of 60 bytes');
      await refused(AOp.CREATE_MR, Buffer.alloc(44), ASt.BAD_CMD, 'CREATE_MR of 44 bytes');
      await refused(AOp.DESTROY_CQ, Buffer.alloc(3), ASt.BAD_CMD, 'DESTROY_CQ of 3 bytes');
    });

    it('refuses a length past any command with MSG_TOO_BIG and stays in step (the next command completes)', async () => {
      const aq = r.aqs[0]!;
      // Claim 300 bytes in a 5-stride command: the device consumes those 5 strides.
      const c = await r.post(AOp.NOOP, Buffer.alloc(316), { len: 300 });
      expect(c).to.include({ error: true, status: ASt.MSG_TOO_BIG });
      expect((await r.post(AOp.NOOP, Buffer.alloc(0))).cmdIdx).to.equal((aq.prod - 1 + aq.size) % aq.size);
    });
  });

  describe('CQs', () => {
    it('creates a kernel CQ (one contiguous ring), a paged user CQ and a one-page user CQ', async () => {
      const rm = rig.device.rdma!.rm;
      await kernelCq(200);
      expect(rm.cqs.get(200)).to.include({ eqId: 2, depthLog2: 7, strideLog2: 5, admin: false });
      const paged = pagedRing(g, 2 * PAGE);
      await ok(
        AOp.CREATE_CQ,
        createCqBody({ id: 201, eqId: 3, depthLog2: 8, pageSizeLog2: 12, mapCount: 2, dma: paged.dma, dbid: 5 }),
      );
      const t = rm.cqs.get(201)!.table;
      expect(t.runs).to.equal(2);
      expect([t.run(0), t.run(1)]).to.deep.equal([
        { addr: paged.pages[0], len: PAGE },
        { addr: paged.pages[1], len: PAGE },
      ]);
      const one = pagedRing(g, PAGE);
      await ok(
        AOp.CREATE_CQ,
        createCqBody({ id: 202, eqId: 3, depthLog2: 7, pageSizeLog2: 12, mapCount: 1, dma: one.dma }),
      );
      // Adjacent pages merge into one run.
      const adj = pagedRing(g, 4 * PAGE, { adjacent: true });
      await ok(
        AOp.CREATE_CQ,
        createCqBody({ id: 203, eqId: 3, depthLog2: 9, pageSizeLog2: 12, mapCount: 4, dma: adj.dma }),
      );
      expect(rm.cqs.get(203)!.table.runs).to.equal(1);
    });

    it('refuses bad CREATE_CQ fields and creates nothing', async () => {
      const rm = rig.device.rdma!.rm;
      const before = rm.cqs.size;
      const ring = contiguousRing(g, PAGE);
      const two = pagedRing(g, 2 * PAGE);
      const base = { id: 250, eqId: 2, depthLog2: 7, dma: ring.dma };
      const misaligned = pageList(g, [two.pages[0]!, two.pages[1]! + 8]);
      const outside = pageList(g, [two.pages[0]!, 0x10000]);
      const cases: Array<[string, Buffer, number]> = [
        ['an EQ that does not exist', createCqBody({ ...base, eqId: 8 }), ASt.BAD_INDEX],
        ['a CQ id past the count', createCqBody({ ...base, id: 8192 }), ASt.BAD_INDEX],
        ['an existing CQ id', createCqBody({ ...base, id: 200 }), ASt.BAD_STATE],
        ['an admin CQ id', createCqBody({ ...base, id: r.aqs[0]!.cq.id }), ASt.BAD_STATE],
        ['stride_log2 6', createCqBody({ ...base, strideLog2: 6 }), ASt.BAD_ATTR],
        ['depth_log2 0', createCqBody({ ...base, depthLog2: 0 }), ASt.BAD_ATTR],
        ['depth_log2 17', createCqBody({ ...base, depthLog2: 17 }), ASt.BAD_ATTR],
        ['cq_flags set', createCqBody({ ...base, flags: 1 }), ASt.BAD_ATTR],
        ['dir_size_log2 set', createCqBody({ ...base, dirSize: 1 }), ASt.BAD_ATTR],
        ['dbid past ndbpgs_per_lif', createCqBody({ ...base, dbid: 256 }), ASt.BAD_ATTR],
        ['map_count 0', createCqBody({ ...base, mapCount: 0 }), ASt.BAD_ATTR],
        ['dma_addr 0', createCqBody({ ...base, dma: 0 }), ASt.BAD_ATTR],
        ['a contiguous ring outside guest RAM', createCqBody({ ...base, dma: 0x100000 }), ASt.BAD_ATTR],
        [
          'a ring running off the end of guest RAM',
          createCqBody({ ...base, dma: g.base + g.ram.size - 2048 }),
          ASt.BAD_ATTR,
        ],
        [
          'more pages than the ring needs',
          createCqBody({ ...base, depthLog2: 8, pageSizeLog2: 12, mapCount: 3, dma: two.dma }),
          ASt.BAD_ATTR,
        ],
        [
          'fewer pages than the ring needs',
          createCqBody({ ...base, depthLog2: 9, pageSizeLog2: 12, mapCount: 2, dma: two.dma }),
          ASt.BAD_ATTR,
        ],
        [
          'a page list outside guest RAM',
          createCqBody({ ...base, depthLog2: 8, pageSizeLog2: 12, mapCount: 2, dma: 0x200000 }),
          ASt.BAD_ATTR,
        ],
        [
          'a misaligned page',
          createCqBody({ ...base, depthLog2: 8, pageSizeLog2: 12, mapCount: 2, dma: misaligned }),
          ASt.BAD_ATTR,
        ],
        [
          'a page outside guest RAM',
          createCqBody({ ...base, depthLog2: 8, pageSizeLog2: 12, mapCount: 2, dma: outside }),
          ASt.BAD_ATTR,
        ],
        [
          'a page size of 2^11',
          createCqBody({ ...base, depthLog2: 8, pageSizeLog2: 11, mapCount: 2, dma: two.dma }),
          ASt.BAD_ATTR,
        ],
        [
          'one user page smaller than the ring',
          createCqBody({ ...base, depthLog2: 8, pageSizeLog2: 12, mapCount: 1, dma: two.pages[0]! }),
          ASt.BAD_ATTR,
        ],
      ];
      for (const [what, body, status] of cases) await refused(AOp.CREATE_CQ, body, status, what);
      expect(rm.cqs.size).to.equal(before);
    });

    it('destroys a CQ; refuses an unknown one, an admin CQ, and one a QP uses (until the QP is gone)', async () => {
      await kernelCq(210);
      await ok(AOp.DESTROY_CQ, idBody(210));
      await refused(AOp.DESTROY_CQ, idBody(210), ASt.BAD_INDEX, 'destroyed twice');
      await refused(AOp.DESTROY_CQ, idBody(0xffffffff), ASt.BAD_INDEX, 'id 2^32-1');
      await refused(AOp.DESTROY_CQ, idBody(r.aqs[1]!.cq.id), ASt.BAD_STATE, 'an admin CQ');
      await kernelCq(211);
      await ok(AOp.CREATE_QP, kernelQp(300, QpT.RC, 211));
      await refused(AOp.DESTROY_CQ, idBody(211), ASt.BAD_STATE, 'a CQ with a QP');
      await ok(AOp.DESTROY_QP, idBody(300));
      await ok(AOp.DESTROY_CQ, idBody(211));
    });
  });

  describe('QPs', () => {
    before(async () => {
      await kernelCq(220);
      await kernelCq(221, 3);
    });

    it('creates RC, UC and UD QPs (a two-stride command) in RESET with their CQs and flags', async () => {
      const rm = rig.device.rdma!.rm;
      await ok(AOp.CREATE_QP, kernelQp(310, QpT.RC, 220));
      const qp = rm.qps.get(310)!;
      expect(qp).to.include({
        type: QpT.RC,
        state: QpS.RESET,
        sqCqId: 220,
        rqCqId: 220,
        privileged: true,
        remotePrivileged: false,
        pdId: 1,
      });
      expect(qp.sq).to.include({ depthLog2: 6, strideLog2: 6, pi: 0, ci: 0 });
      expect(rm.cqs.get(220)!.refs).to.equal(2);
      await ok(AOp.CREATE_QP, kernelQp(311, QpT.UC, 221));
      await ok(
        AOp.CREATE_QP,
        kernelQp(312, QpT.UD, 220, {
          rq: { cqId: 221, depthLog2: 6, strideLog2: 6, dma: contiguousRing(g, PAGE).dma },
        }),
      );
      expect(rm.qps.get(312)).to.include({ sqCqId: 220, rqCqId: 221 });
      // The GSI QP is id 1 and UD.
      await ok(AOp.CREATE_QP, kernelQp(1, QpT.UD, 220));
      // A user QP on paged rings, stride 2^7, not privileged.
      const sq = pagedRing(g, 2 * PAGE);
      const rq = pagedRing(g, PAGE);
      await ok(
        AOp.CREATE_QP,
        createQpBody({
          id: 313,
          type: QpT.RC,
          flags: 0,
          dbid: 3,
          sq: { cqId: 221, depthLog2: 6, strideLog2: 7, pageSizeLog2: 12, mapCount: 2, dma: sq.dma },
          rq: { cqId: 221, depthLog2: 6, strideLog2: 6, pageSizeLog2: 12, mapCount: 1, dma: rq.dma },
        }),
      );
      expect(rm.qps.get(313)).to.include({ privileged: false, dbid: 3 });
      expect(rm.qps.get(313)!.sq.table.runs).to.equal(2);
    });

    it('refuses bad CREATE_QP fields and creates nothing', async () => {
      const rm = rig.device.rdma!.rm;
      const before = rm.qps.size;
      const runsBefore = rm.budget.used;
      const ring = contiguousRing(g, PAGE).dma;
      const body = (over: Partial<QpBody>): Buffer => kernelQp(330, QpT.RC, 220, over);
      const sq = { cqId: 220, depthLog2: 6, strideLog2: 6, dma: ring };
      const cases: Array<[string, Buffer, number]> = [
        ['QP 0 (SMI, never used)', body({ id: 0 }), ASt.BAD_INDEX],
        ['a QP id past the count', body({ id: 4096 }), ASt.BAD_INDEX],
        ['the scrubbed-CQE qid 0xffffff', body({ id: 0xffffff }), ASt.BAD_INDEX],
        ['an existing QP id', body({ id: 310 }), ASt.BAD_STATE],
        ['type RD', body({ type: QpT.RD }), ASt.BAD_TYPE],
        ['type SRQ', body({ type: QpT.SRQ }), ASt.BAD_TYPE],
        ['type XRC_TGT', body({ type: QpT.XRC_TGT }), ASt.BAD_TYPE],
        ['the GSI id again', body({ id: 1, type: QpT.UD }), ASt.BAD_STATE],
        ['a non-RESET initial state', body({ state: QpS.INIT }), ASt.BAD_STATE],
        ['a send CQ that does not exist', body({ sq: { ...sq, cqId: 999 } }), ASt.BAD_INDEX],
        ['an admin CQ', body({ sq: { ...sq, cqId: r.aqs[0]!.cq.id } }), ASt.BAD_STATE],
        ['an unknown flag bit', body({ flags: 1 << 20 }), ASt.BAD_ATTR],
        ['SQ_CMB (no CMB)', body({ flags: QpF.SQ_CMB }), ASt.BAD_ATTR],
        ['SQ_DRAINING (query only)', body({ flags: QpF.SQ_DRAINING }), ASt.BAD_ATTR],
        ['an SQ stride of 32 bytes', body({ sq: { ...sq, strideLog2: 5 } }), ASt.BAD_ATTR],
        ['an SQ stride past max_stride', body({ sq: { ...sq, strideLog2: 12 } }), ASt.BAD_ATTR],
        ['an RQ depth of 2^17', body({ rq: { ...sq, depthLog2: 17 } }), ASt.BAD_ATTR],
        ['an SQ ring outside guest RAM', body({ sq: { ...sq, dma: 0x4000 } }), ASt.BAD_ATTR],
        ['an RQ ring past 2^53', body({ rq: { ...sq, dma: 2 ** 56 } }), ASt.BAD_ATTR],
        ['an SRQ that does not exist', body({ rq: undefined, srqId: 5000 }), ASt.BAD_INDEX],
        ['dbid past ndbpgs_per_lif', body({ dbid: 300 }), ASt.BAD_ATTR],
      ];
      for (const [what, b, status] of cases) await refused(AOp.CREATE_QP, b, status, what);
      expect(rm.qps.size).to.equal(before);
      expect(rm.budget.used, 'page-table runs given back').to.equal(runsBefore);
    });

    it('destroys QPs (dropping their CQ references) and refuses unknown ids', async () => {
      const rm = rig.device.rdma!.rm;
      const refs = rm.cqs.get(221)!.refs;
      await ok(AOp.DESTROY_QP, idBody(311));
      expect(rm.cqs.get(221)!.refs).to.equal(refs - 2);
      await refused(AOp.DESTROY_QP, idBody(311), ASt.BAD_INDEX, 'destroyed twice');
      await refused(AOp.DESTROY_QP, idBody(0), ASt.BAD_INDEX, 'QP 0');
    });
  });

  describe('MRs and windows', () => {
    const key = (index: number, tag: number): number => ((index << 8) | tag) >>> 0;

    it('registers a user MR on scattered 4 KiB pages and translates through its runs', async () => {
      const rm = rig.device.rdma!.rm;
      const pages = [g.alloc(PAGE), g.alloc(PAGE), g.alloc(PAGE)];
      g.alloc(PAGE);
      // Three pages, the second and third adjacent: two runs. iova starts 0x123 into the first page.
      const scattered = [pages[0]!, g.alloc(PAGE), 0];
      scattered[2] = g.alloc(PAGE); // adjacent to scattered[1]
      const va = 0x7f0000000123;
      const length = 2 * PAGE + 100;
      await ok(
        AOp.CREATE_MR,
        createMrBody({
          key: key(5, 1),
          va,
          length,
          flags: MrF.LOCAL_WRITE | MrF.REMOTE_READ,
          mapCount: 3,
          dma: pageList(g, scattered),
          pageSizeLog2: 12,
        }),
      );
      const mr = rm.mrs.get(5)!;
      expect(mr).to.include({
        key: key(5, 1),
        kind: 'user',
        valid: true,
        iova: va,
        length,
        access: MrF.LOCAL_WRITE | MrF.REMOTE_READ,
      });
      expect(mr.table!.runs).to.equal(2);
      const out: number[] = [];
      expect(rm.translate(key(5, 1), va, length, MrF.LOCAL_WRITE, { dmaKey: false }, out)).to.equal(KeyStatus.OK);
      expect(out).to.deep.equal([scattered[0]! + 0x123, PAGE - 0x123, scattered[1]!, 0x123 + PAGE + 100]);
      // Out of bounds, wrapping, access, stale tag.
      expect(rm.translate(key(5, 1), va + length - 4, 8, 0, { dmaKey: false }, out)).to.equal(KeyStatus.BOUNDS);
      expect(rm.translate(key(5, 1), va - 1, 8, 0, { dmaKey: false }, out)).to.equal(KeyStatus.BOUNDS);
      expect(rm.translate(key(5, 1), Number.MAX_SAFE_INTEGER, 8, 0, { dmaKey: false }, out)).to.equal(
        KeyStatus.BAD_RANGE,
      );
      expect(rm.translate(key(5, 1), va, 8, MrF.REMOTE_WRITE, { dmaKey: false }, out)).to.equal(KeyStatus.ACCESS);
      expect(rm.translate(key(5, 2), va, 8, 0, { dmaKey: false }, out)).to.equal(KeyStatus.TAG);
      expect(rm.translate(0, 0x1000, 8, 0, { dmaKey: false }, out)).to.equal(KeyStatus.NO_KEY);
      expect(rm.translate(key(5, 1), va, 8, 0, { dmaKey: false, pdId: 2 }, out)).to.equal(KeyStatus.PD);
      void pages;
    });

    it('registers a one-page MR (dma_addr already offset), a 2 MiB-page MR, an FRMR and both window types', async () => {
      const rm = rig.device.rdma!.rm;
      const page = g.alloc(PAGE);
      await ok(
        AOp.CREATE_MR,
        createMrBody({
          key: key(6, 7),
          va: 0x1000_0040,
          length: 64,
          flags: 0,
          mapCount: 1,
          dma: page + 0x40,
          pageSizeLog2: 12,
        }),
      );
      const out: number[] = [];
      expect(rm.translate(key(6, 7), 0x1000_0040, 64, 0, { dmaKey: false }, out)).to.equal(KeyStatus.OK);
      expect(out).to.deep.equal([page + 0x40, 64]);
      // 2 MiB pages: the table entries are 2 MiB aligned; they need not be guest RAM to register.
      const big = 2 ** 21;
      await ok(
        AOp.CREATE_MR,
        createMrBody({
          key: key(7, 0),
          va: 3 * big + 10,
          length: 2 * big,
          flags: MrF.REMOTE_WRITE | MrF.LOCAL_WRITE,
          mapCount: 3,
          dma: pageList(g, [2 ** 40, 2 ** 40 + big, 2 ** 41]),
          pageSizeLog2: 21,
        }),
      );
      expect(rm.mrs.get(7)!.table!.runs).to.equal(2);
      await ok(
        AOp.CREATE_MR,
        createMrBody({ key: key(8, 1), va: 0, length: 0, flags: MrF.PHYS, mapCount: 0, dma: 0, pageSizeLog2: 12 }),
      );
      expect(rm.mrs.get(8)).to.include({ kind: 'frmr', valid: false });
      expect(rm.translate(key(8, 1), 0, 0, 0, { dmaKey: false }, out)).to.equal(KeyStatus.INVALID);
      await ok(
        AOp.CREATE_MR,
        createMrBody({ key: key(9, 1), va: 0, length: 0, flags: MrF.MW_1, mapCount: 0, dma: 0, pageSizeLog2: 0 }),
      );
      await ok(
        AOp.CREATE_MR,
        createMrBody({ key: key(10, 1), va: 0, length: 0, flags: MrF.MW_2, mapCount: 0, dma: 0, pageSizeLog2: 0 }),
      );
      expect([rm.mrs.get(9)!.kind, rm.mrs.get(10)!.kind]).to.deep.equal(['mw1', 'mw2']);
    });

    it('refuses bad CREATE_MR fields, keys and page tables, and registers nothing', async () => {
      const rm = rig.device.rdma!.rm;
      const before = rm.mrs.size;
      const runs = rm.budget.used;
      const p = [g.alloc(PAGE), g.alloc(PAGE)];
      const list = pageList(g, p);
      const good = {
        key: key(20, 1),
        va: 0x10000,
        length: 2 * PAGE,
        flags: MrF.LOCAL_WRITE,
        mapCount: 2,
        dma: list,
        pageSizeLog2: 12,
      };
      const cases: Array<[string, Buffer, number]> = [
        ['key index 0 (the DMA key)', createMrBody({ ...good, key: key(0, 5) }), ASt.BAD_INDEX],
        ['key index past nmrs_per_lif', createMrBody({ ...good, key: key(16384, 1) }), ASt.BAD_INDEX],
        ['an index in use (another tag)', createMrBody({ ...good, key: key(5, 9) }), ASt.BAD_STATE],
        ['UKEY_EN alone', createMrBody({ ...good, flags: 0x2000 }), ASt.BAD_TYPE],
        ['INV_EN alone', createMrBody({ ...good, flags: 0x8000 }), ASt.BAD_TYPE],
        ['ON_DEMAND (no ODP)', createMrBody({ ...good, flags: MrF.ON_DEMAND }), ASt.BAD_ATTR],
        ['an access bit past PB', createMrBody({ ...good, flags: 1 << 9 }), ASt.BAD_ATTR],
        ['pt_type 1', createMrBody({ ...good, ptType: 1 }), ASt.BAD_ATTR],
        ['dir_size_log2 1', createMrBody({ ...good, dirSize: 1 }), ASt.BAD_ATTR],
        ['a page size of 8 KiB', createMrBody({ ...good, pageSizeLog2: 13 }), ASt.BAD_ATTR],
        ['length 0', createMrBody({ ...good, length: 0 }), ASt.BAD_ATTR],
        ['one page more than the range needs', createMrBody({ ...good, mapCount: 3 }), ASt.BAD_ATTR],
        ['one page fewer', createMrBody({ ...good, length: 2 * PAGE + 1 }), ASt.BAD_ATTR],
        ['va + length wrapping 2^64', createMrBody({ ...good, va: 2n ** 64n - 4096n }), ASt.BAD_ATTR],
        ['va past 2^53', createMrBody({ ...good, va: 2n ** 60n }), ASt.BAD_ATTR],
        ['va + length past 2^53', createMrBody({ ...good, va: 2 ** 53 - 4096, length: 8192 }), ASt.BAD_ATTR],
        ['a page list outside guest RAM', createMrBody({ ...good, dma: 0x1000 }), ASt.BAD_ATTR],
        ['a page list running off guest RAM', createMrBody({ ...good, dma: g.base + g.ram.size - 8 }), ASt.BAD_ATTR],
        ['a misaligned page', createMrBody({ ...good, dma: pageList(g, [p[0]!, p[1]! + 1]) }), ASt.BAD_ATTR],
        ['a page address past 2^53', createMrBody({ ...good, dma: pageList(g, [p[0]!, 2n ** 60n]) }), ASt.BAD_ATTR],
        [
          "one page whose offset is not the va's",
          createMrBody({ ...good, length: 64, mapCount: 1, dma: p[0]! + 8 }),
          ASt.BAD_ATTR,
        ],
        ['an FRMR with pages', createMrBody({ ...good, flags: MrF.PHYS }), ASt.BAD_ATTR],
        ['a window with a length', createMrBody({ ...good, flags: MrF.MW_1, mapCount: 0 }), ASt.BAD_ATTR],
        ['a 4 PiB MR', createMrBody({ ...good, length: 2 ** 52, mapCount: 2 ** 40 }), ASt.BAD_ATTR],
      ];
      for (const [what, body, status] of cases) await refused(AOp.CREATE_MR, body, status, what);
      expect(rm.mrs.size).to.equal(before);
      expect(rm.budget.used).to.equal(runs);
      await ok(AOp.CREATE_MR, createMrBody(good));
    });

    it('destroys by key index (the tag may have changed since) and refuses unknown keys', async () => {
      const rm = rig.device.rdma!.rm;
      rm.mrs.get(8)!.key = key(8, 0x42); // as a REG_MR WQE would re-key the FRMR
      await ok(AOp.DESTROY_MR, idBody(key(8, 1)));
      expect(rm.mrs.has(8)).to.equal(false);
      await refused(AOp.DESTROY_MR, idBody(key(8, 1)), ASt.BAD_INDEX, 'destroyed twice');
      await refused(AOp.DESTROY_MR, idBody(key(9999, 1)), ASt.BAD_INDEX, 'never created');
    });
  });

  describe('AHs', () => {
    const v4 = (d: string): Buffer => Buffer.from(d.split('.').map(Number));

    it('parses the destination GID out of IPv4, IPv6 and VLAN templates (event and busy-wait modes)', async () => {
      const rm = rig.device.rdma!.rm;
      const t4 = headerTemplate({ sip: v4('10.0.0.1'), dip: v4('10.0.0.2'), ttl: 64, tos: 0x68 });
      expect(t4.length).to.equal(42);
      await ok(AOp.CREATE_AH, createAhBody({ id: 3, dma: placeTemplate(g, t4), length: t4.length }));
      const ah = rm.ahs.get(3)!;
      expect(gidToString(ah.av.dgid)).to.equal('::ffff:10.0.0.2');
      expect(gidToString(ah.av.sgid)).to.equal('::ffff:10.0.0.1');
      expect(ah.av).to.include({
        ipVersion: 4,
        hopLimit: 64,
        trafficClass: 0x68,
        vlanTci: -1,
        udpSrcPort: 28272,
        udpDstPort: 4791,
      });
      const sip = Buffer.from('fe800000000000000211223344556677', 'hex');
      const dip = Buffer.from('fe8000000000000002aabbccddeeff00', 'hex');
      const t6 = headerTemplate({ ipv6: true, vlan: (3 << 13) | 42, sip, dip, ttl: 1, tos: 0, flow: 0x12345 });
      expect(t6.length).to.equal(66);
      const c = await r.post(
        AOp.CREATE_AH,
        createAhBody({ id: 4, dma: placeTemplate(g, t6), length: t6.length, csum: 3 }),
        { mode: 'busy' },
      );
      expect(c.error).to.equal(false);
      const av6 = rm.ahs.get(4)!.av;
      expect(av6.dgid.equals(dip)).to.equal(true);
      expect(av6).to.include({ ipVersion: 6, vlanTci: (3 << 13) | 42, flowLabel: 0x12345, hopLimit: 1 });
      expect(av6.template.equals(t6)).to.equal(true);
      await ok(AOp.DESTROY_AH, idBody(3));
      expect((await r.post(AOp.DESTROY_AH, idBody(4), { mode: 'busy' })).error).to.equal(false);
      await refused(AOp.DESTROY_AH, idBody(4), ASt.BAD_INDEX, 'destroyed twice');
    });

    it('refuses bad CREATE_AH fields and templates', async () => {
      const rm = rig.device.rdma!.rm;
      const t4 = headerTemplate({ sip: v4('10.0.0.1'), dip: v4('10.0.0.2') });
      const at = placeTemplate(g, t4);
      const good = { id: 10, dma: at, length: t4.length };
      const bad = (mutate: (t: Buffer) => void): number => {
        const t = Buffer.from(t4);
        mutate(t);
        return placeTemplate(g, t);
      };
      await ok(AOp.CREATE_AH, createAhBody({ ...good, id: 11 }));
      const cases: Array<[string, Buffer, number]> = [
        ['an AH id past nahs_per_lif', createAhBody({ ...good, id: 16384 }), ASt.BAD_INDEX],
        ['an existing AH id', createAhBody({ ...good, id: 11 }), ASt.BAD_STATE],
        ['a template of 20 bytes', createAhBody({ ...good, length: 20 }), ASt.BAD_ATTR],
        ['a template of 4 KiB', createAhBody({ ...good, length: 4096 }), ASt.BAD_ATTR],
        ['a template outside guest RAM', createAhBody({ ...good, dma: 0x1000 }), ASt.BAD_ATTR],
        ['csum_profile 4', createAhBody({ ...good, csum: 4 }), ASt.BAD_ATTR],
        ['crypto set', createAhBody({ ...good, crypto: 1 }), ASt.BAD_ATTR],
        ['an ARP ethertype', createAhBody({ ...good, dma: bad((t) => t.writeUInt16BE(0x0806, 12)) }), ASt.BAD_ATTR],
        [
          'IP version 5',
          createAhBody({
            ...good,
            dma: bad((t) => {
              t[14] = 0x55;
            }),
          }),
          ASt.BAD_ATTR,
        ],
        [
          'TCP, not UDP',
          createAhBody({
            ...good,
            dma: bad((t) => {
              t[23] = 6;
            }),
          }),
          ASt.BAD_ATTR,
        ],
      ];
      for (const [what, body, status] of cases) await refused(AOp.CREATE_AH, body, status, what);
      expect(rm.ahs.has(10)).to.equal(false);
    });
  });

  describe('trust boundary', () => {
    it('gives back every page-table run when objects go (the budget stays bounded)', async () => {
      const rm = rig.device.rdma!.rm;
      const before = rm.budget.used;
      const p = pagedRing(g, 4 * PAGE);
      await ok(
        AOp.CREATE_MR,
        createMrBody({ key: 0x4001, va: 0, length: 4 * PAGE, flags: 0, mapCount: 4, dma: p.dma, pageSizeLog2: 12 }),
      );
      expect(rm.budget.used).to.equal(before + 4);
      await ok(AOp.DESTROY_MR, idBody(0x4001));
      expect(rm.budget.used).to.equal(before);
    });
  });
});
