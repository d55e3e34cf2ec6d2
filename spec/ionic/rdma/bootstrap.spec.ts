// The RDMA half's bootstrap as ionic_rdma.ko does it (docs/driver-contract.md, ionic RDMA R0 step 3, R1):
// the LIF identity's RDMA section, RDMA_RESET_LIF / CREATE_EQ / CREATE_CQ /
// CREATE_ADMINQ on the Ethernet admin queue (RESET also through dev cmd), and
// each refusal with a bad field. Through a real socket and memfd guest RAM.

import { expect } from 'chai';
import { command, IonicGuest } from '../../support/ionic/guest';
import { DevId, LifId, Op, St } from '../../support/ionic/regs';
import { Rig, testProfile } from '../../support/ionic/rig';
import { RdmaGuest, readRdmaIdentity } from '../../support/ionic/rdma-guest';
import { AOp, BootOp, RdmaId } from '../../support/ionic/rdma-regs';
import { createCqBody, contiguousRing } from '../../support/ionic/rdma-cmds';

/** Status codes the bootstrap refusals use (ionic_status_code). */
const S = { ...St, EBUSY: 12, EEXIST: 13 } as const;

function isPow2(n: number): boolean {
  return n > 0 && (n & (n - 1)) === 0;
}

describe('ionic rdma: identity', () => {
  let rig: Rig;
  let g: IonicGuest;

  before(async () => {
    rig = await Rig.start();
    g = await rig.probed();
  });
  after(async () => rig.close());

  it('LIF_IDENTIFY sets the RDMA capability and a section the host accepts (ionic RDMA R1.4, R1.5)', () => {
    const id = readRdmaIdentity(g.lifIdentity);
    expect(id.caps & 2n).to.equal(2n);
    expect(id.caps & 1n).to.equal(1n);
    expect(id.version).to.be.within(1, 2);
    expect(id.qpOpcodes).to.be.greaterThan(10);
    expect(id.adminOpcodes).to.equal(19); // every upstream op, QP stats included
    expect(g.lifIdentity[RdmaId.minor_version]).to.equal(0);
    // max_mr_size = npts * 4096 / 2 = 4 TiB.
    expect((id.npts * 4096) / 2).to.equal(4 * 2 ** 40);
    expect(id.nmrs).to.be.at.least(2);
    expect(id.nahs).to.be.at.least(id.sq.count); // RC QPs take AH ids too
    expect(id.maxStride).to.equal(11);
    expect(isPow2(id.sq.count) && isPow2(id.cq.count)).to.equal(true);
    for (const count of [id.sq.count, id.cq.count]) {
      expect(id.udmaShift).to.be.at.least(1);
      expect(id.udmaShift).to.be.below(Math.log2(count / 2));
    }
    expect(id.eq.count).to.equal(32);
    expect(id.eq.base).to.equal(0);
    expect(id.cq.base).to.equal(0);
    expect(id.aq.count).to.be.within(1, 4);
    expect(id.statsType).to.equal(3);
    expect(g.lifIdentity.readBigUInt64LE(RdmaId.page_size_cap)).to.equal(0n); // v1: host assumes 4K/2M/1G
    expect(g.lifIdentity.subarray(486, RdmaId.END).every((b) => b === 0)).to.equal(true);
  });

  it('gives the RDMA queue types their own doorbell slots, above the Ethernet types 0..4', () => {
    const id = readRdmaIdentity(g.lifIdentity);
    const types = [id.aq.qtype, id.sq.qtype, id.rq.qtype, id.cq.qtype, id.eq.qtype];
    expect(new Set(types).size).to.equal(5);
    for (const t of types) expect(t).to.be.within(5, 511); // 8 * qtype must stay inside the 4 KiB page
    expect(types).to.deep.equal([5, 6, 7, 8, 9]);
  });

  it('IDENTIFY offers a doorbell page per user context (ndbpgs_per_lif >= 2); the kernel page is still page 0', () => {
    expect(g.devIdentity.readUInt32LE(DevId.ndbpgs_per_lif)).to.be.at.least(2);
    expect(g.dbPage).to.equal(0);
  });

  it('answers the Ethernet-only bring-up unchanged: queue counts and eq count field as before', () => {
    expect(g.lifIdentity.readUInt32LE(LifId.qcount_rxq)).to.equal(16);
    expect(g.lifIdentity.readUInt32LE(LifId.qcount_eq)).to.equal(0);
    expect(g.carrier).to.equal(true);
  });
});

describe('ionic rdma: an Ethernet-only profile (rdma_eqs = 0)', () => {
  let rig: Rig;
  let g: IonicGuest;

  before(async () => {
    rig = await Rig.start({ profile: testProfile({ rdmaEqs: 0 }) });
    g = await rig.probed();
  });
  after(async () => rig.close());
  afterEach(() => expect(g.violations).to.deep.equal([]));

  it('advertises no RDMA: capability ETH only, a zero RDMA section, one doorbell page', () => {
    expect(g.lifIdentity.readBigUInt64LE(LifId.capabilities)).to.equal(1n);
    expect(g.lifIdentity.subarray(LifId.rdma, LifId.SIZE).every((b) => b === 0)).to.equal(true);
    expect(g.devIdentity.readUInt32LE(DevId.ndbpgs_per_lif)).to.equal(1);
    expect(rig.device.rdma).to.equal(null);
  });

  it('answers the RDMA bootstrap commands 50-53 with EOPCODE on the admin queue and through dev cmd', async () => {
    for (const op of [Op.RDMA_RESET_LIF, Op.RDMA_CREATE_EQ, Op.RDMA_CREATE_CQ, Op.RDMA_CREATE_ADMINQ]) {
      expect((await g.adminCmd(command(op))).status, `adminq opcode ${op}`).to.equal(St.EOPCODE);
      expect((await g.devCmd(command(op))).status, `devcmd opcode ${op}`).to.equal(St.EOPCODE);
    }
  });
});

describe('ionic rdma: bootstrap', () => {
  let rig: Rig;
  let g: IonicGuest;
  let r: RdmaGuest;

  beforeEach(async () => {
    rig = await Rig.start();
    g = await rig.probed();
    r = await RdmaGuest.boot(g, { cpus: 8 });
  });
  afterEach(async () => {
    expect(g.violations).to.deep.equal([]);
    await rig.close();
  });

  it('creates the EQs on their vectors and the AQs with their CQs, as ionic_create_rdma_admin asks', async () => {
    const dev = rig.device.rdma!;
    expect([...dev.eqs.keys()]).to.deep.equal([0, 1, 2, 3, 4, 5, 6, 7]);
    expect([...dev.eqs.values()].map((e) => e.vector)).to.deep.equal([9, 10, 11, 12, 13, 14, 15, 16]);
    expect([...dev.aqs.keys()]).to.deep.equal([0, 1]);
    // AQ i's CQ: comp_vector i -> EQ (i % 3 + 1) * 2 (udma 0).
    expect(r.aqs.map((a) => a.cq.eqId)).to.deep.equal([2, 4]);
    expect([...dev.aqs.values()].map((a) => a.cq.eqId)).to.deep.equal([2, 4]);
    expect([...dev.aqs.values()].map((a) => a.cq.admin)).to.deep.equal([true, true]);
    // The first admin command goes all the way: CQE, EQE on the CQ's EQ, interrupt.
    const before = await g.irqCount(11);
    const c = await r.post(AOp.NOOP, Buffer.alloc(0));
    expect(c.error).to.equal(false);
    expect(r.events.at(-1)).to.include({ eq: 2, type: 0, code: 0, qid: r.aqs[0]!.cq.id });
    expect(await g.irqCount(11)).to.be.above(before);
  });

  it("takes RDMA_RESET_LIF through dev cmd too (the driver's fallback) and forgets the queues", async () => {
    const dev = rig.device.rdma!;
    const res = await g.devCmd(r.resetCmd());
    expect(res.status).to.equal(St.SUCCESS);
    expect(dev.eqs.size).to.equal(0);
    expect(dev.aqs.size).to.equal(0);
    expect(dev.rm.counts()).to.deep.include({ cqs: 0, qps: 0, mrs: 0 });
    // An AQ doorbell now names no queue: nothing is written to the old admin CQ.
    const cqBefore = Buffer.from(g.mem(r.aqs[0]!.cq.ring, 64));
    r.write(r.aqs[0]!, AOp.NOOP, Buffer.alloc(0));
    r.ring(r.aqs[0]!);
    await g.sync();
    expect(g.mem(r.aqs[0]!.cq.ring, 64).equals(cqBefore)).to.equal(true);
    expect(dev.counters.snapshot().doorbells_bad).to.be.at.least(1);
    r.aqs[0]!.wr.clear();
  });

  it('boots again after RDMA_RESET_LIF with the same ids (a driver reload)', async () => {
    expect(await r.resetLif()).to.equal(St.SUCCESS);
    const r2 = await RdmaGuest.boot(g, { cpus: 8 });
    expect((await r2.post(AOp.NOOP, Buffer.alloc(0))).error).to.equal(false);
    expect(rig.device.rdma!.eqs.size).to.equal(8);
  });

  it('refuses RDMA_RESET_LIF for another LIF with ENOENT and keeps everything', async () => {
    expect((await g.adminCmd(r.resetCmd(1))).status).to.equal(S.ENOENT);
    expect(rig.device.rdma!.eqs.size).to.equal(8);
    expect((await r.post(AOp.NOOP, Buffer.alloc(0))).error).to.equal(false);
  });

  it('refuses bad CREATE_EQ fields with the status the driver checks (non-zero) and creates nothing', async () => {
    const dev = rig.device.rdma!;
    const ring = g.alloc(4096);
    const eq = (
      qid: number,
      vector: number,
      depth: number,
      stride: number,
      dma: number,
      o: { lif?: number; dbid?: number } = {},
    ): Buffer => r.queueCmd(BootOp.CREATE_EQ, qid, vector, depth, stride, dma, o);
    const cases: Array<[string, Buffer, number]> = [
      ['eq id past eq_qtype count', eq(32, 20, 10, 2, ring), S.EQID],
      ['eq id 2^32-1', eq(0xffffffff, 20, 10, 2, ring), S.EQID],
      ['an existing eq id', eq(3, 20, 10, 2, ring), S.EEXIST],
      ['vector past the MSI-X table', eq(8, 32, 10, 2, ring), S.EINVAL],
      ['depth_log2 0', eq(8, 20, 0, 2, ring), S.EINVAL],
      ['depth_log2 17', eq(8, 20, 17, 2, ring), S.EINVAL],
      ['stride_log2 3 (EQEs are 4 bytes)', eq(8, 20, 10, 3, ring), S.EINVAL],
      ['dbid past ndbpgs_per_lif', eq(8, 20, 10, 2, ring, { dbid: 256 }), S.EINVAL],
      ['another LIF', eq(8, 20, 10, 2, ring, { lif: 1 }), S.ENOENT],
      ['dma_addr 0', eq(8, 20, 10, 2, 0), S.BAD_ADDR],
      ['a ring outside guest RAM', eq(8, 20, 10, 2, 0x1000), S.BAD_ADDR],
      ['a ring running off the end of guest RAM', eq(8, 20, 10, 2, g.base + g.ram.size - 1024), S.BAD_ADDR],
      ['dma_addr past 2^53', eq(8, 20, 10, 2, 2 ** 60), S.BAD_ADDR],
    ];
    for (const [what, cmd, status] of cases) {
      expect((await g.adminCmd(cmd)).status, what).to.equal(status);
    }
    // u64 2^64 - 4096: a wrapping ring.
    const wrap = eq(8, 20, 10, 2, 0);
    wrap.writeBigUInt64LE(2n ** 64n - 4096n, 16);
    expect((await g.adminCmd(wrap)).status).to.equal(S.BAD_ADDR);
    expect(dev.eqs.size).to.equal(8);
    // And a good one still works afterwards.
    expect((await g.adminCmd(eq(8, 20, 10, 2, ring))).status).to.equal(St.SUCCESS);
  });

  it('refuses bad CREATE_CQ (52) fields and creates nothing', async () => {
    const dev = rig.device.rdma!;
    const cqRing = g.alloc(8192);
    const cq = (qid: number, eq: number, depth = 8, stride = 5, dma = cqRing): Buffer =>
      r.queueCmd(BootOp.CREATE_CQ, qid, eq, depth, stride, dma);
    const cases: Array<[string, Buffer, number]> = [
      ['cq id past cq_qtype count', cq(8192, 2), S.EQID],
      ['an existing cq id', cq(r.aqs[0]!.cq.id, 2), S.EEXIST],
      ['an EQ that does not exist', cq(100, 8), S.ENOENT],
      ['stride_log2 4 (CQEs are 32 bytes)', cq(100, 2, 8, 4), S.EINVAL],
      ['depth_log2 20', cq(100, 2, 20), S.EINVAL],
      ['a ring outside guest RAM', cq(100, 2, 8, 5, 0x2000), S.BAD_ADDR],
    ];
    for (const [what, cmd, status] of cases) expect((await g.adminCmd(cmd)).status, what).to.equal(status);
    expect(dev.rm.cqs.size).to.equal(2);
    expect((await g.adminCmd(cq(100, 2))).status).to.equal(St.SUCCESS);
    expect(dev.rm.cqs.get(100)?.admin).to.equal(true);
  });
});

describe('ionic rdma: CREATE_ADMINQ refusals', () => {
  let rig: Rig;
  let g: IonicGuest;
  let r: RdmaGuest;

  before(async () => {
    rig = await Rig.start();
    g = await rig.probed();
    r = await RdmaGuest.boot(g, { cpus: 8, aqCount: 1 });
  });
  after(async () => {
    expect(g.violations).to.deep.equal([]);
    await rig.close();
  });

  it('refuses a bad aq id, CQ, stride or ring, then accepts a good one', async () => {
    const dev = rig.device.rdma!;
    const aqRing = g.alloc(32768);
    expect((await g.adminCmd(r.queueCmd(BootOp.CREATE_CQ, 100, 2, 8, 5, g.alloc(8192)))).status).to.equal(St.SUCCESS);
    const data = contiguousRing(g, 4096);
    expect(
      (await r.post(AOp.CREATE_CQ, createCqBody({ id: 101, eqId: 2, depthLog2: 7, dma: data.dma }))).error,
    ).to.equal(false);
    const aq = (qid: number, cqId: number, depth = 9, stride = 6, dma = aqRing): Buffer =>
      r.queueCmd(BootOp.CREATE_ADMINQ, qid, cqId, depth, stride, dma);
    const cases: Array<[string, Buffer, number]> = [
      ['aq id past aq_qtype count', aq(2, 100), S.EQID],
      ['an existing aq id', aq(0, 100), S.EEXIST],
      ['a CQ that does not exist', aq(1, 999), S.ENOENT],
      ['a data CQ', aq(1, 101), S.EINVAL],
      ['a CQ another AQ has', aq(1, r.aqs[0]!.cq.id), S.EBUSY],
      ['stride_log2 5 (admin strides are 64 bytes)', aq(1, 100, 9, 5), S.EINVAL],
      ['depth_log2 0', aq(1, 100, 0), S.EINVAL],
      ['a ring outside guest RAM', aq(1, 100, 9, 6, 0x3000), S.BAD_ADDR],
    ];
    for (const [what, cmd, status] of cases) expect((await g.adminCmd(cmd)).status, what).to.equal(status);
    expect(dev.aqs.size).to.equal(1);
    expect((await g.adminCmd(aq(1, 100))).status).to.equal(St.SUCCESS);
    expect(dev.aqs.size).to.equal(2);
  });
});
