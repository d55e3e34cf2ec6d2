// Seeded fuzz of the RDMA control path: random admin WQEs (raw bytes, and
// real commands with random fields, ids, addresses and page lists), random
// bootstrap commands and random RDMA doorbells. The server must stay up,
// complete every command exactly once with a status, keep its books
// consistent (references, page-table runs, limits), and still serve the
// Ethernet admin queue and good RDMA commands afterwards.

import { expect } from 'chai';
import { command, IonicGuest } from '../../support/ionic/guest';
import { Op, PAGE } from '../../support/ionic/regs';
import { Prng, Rig } from '../../support/ionic/rig';
import { RdmaGuest } from '../../support/ionic/rdma-guest';
import { AOp, BootOp, Mask, MrF, QpF } from '../../support/ionic/rdma-regs';
import {
  contiguousRing,
  createAhBody,
  createCqBody,
  createMrBody,
  createQpBody,
  headerTemplate,
  idBody,
  modifyQpBody,
  pageList,
  placeTemplate,
  queryQpBody,
  statsBody,
} from '../../support/ionic/rdma-cmds';
import { checkBooks } from '../../support/ionic/rdma-books';

describe('ionic rdma: seeded fuzz of the control path', function () {
  this.timeout(120000);
  let rig: Rig;
  let g: IonicGuest;
  let r: RdmaGuest;

  before(async () => {
    rig = await Rig.start();
    g = await rig.probed(0, { ramSize: 128 << 20 });
    r = await RdmaGuest.boot(g, { cpus: 8 });
  });
  after(async () => rig.close());

  for (const seed of [1, 0xc0ffee, 77]) {
    it(`survives 400 random admin WQEs (seed ${seed}) with one completion each and consistent books`, async () => {
      const rnd = new Prng(seed);
      const dev = rig.device.rdma!;
      const pick = <T>(xs: readonly T[]): T => rnd.pick(xs);
      /** The good value two times in three, else one of the bad ones. */
      const mostly = <T>(good: T, bad: readonly T[]): T => (rnd.below(3) < 2 ? good : pick(bad));
      const small = (): number => rnd.below(16);
      const id = (): number => pick([small(), small() + 200, rnd.next(), 0, 1, 0xffffff, 4095, 4096, 8191, 8192]);
      const ring = (): number =>
        pick([contiguousRing(g, PAGE).dma, 0, 0x1000, 2 ** 60, g.base + g.ram.size - 64, rnd.next() * 4096]);
      const pages = (n: number): number =>
        pageList(
          g,
          Array.from({ length: n }, () => pick([g.alloc(PAGE), rnd.next() * 4096, 7, 2 ** 40])),
        );
      const tpl = (): number =>
        placeTemplate(
          g,
          pick([
            headerTemplate({ sip: Buffer.from([10, 0, 0, 1]), dip: Buffer.from([10, 0, 0, rnd.below(255)]) }),
            headerTemplate({ ipv6: true, vlan: rnd.below(65536), sip: rnd.bytes(16), dip: rnd.bytes(16) }),
            rnd.bytes(rnd.below(80)),
          ]),
        );
      const cmd = (): { op: number; body: Buffer } => {
        switch (rnd.below(12)) {
          case 0:
            return { op: rnd.below(32), body: rnd.bytes(rnd.below(300)) };
          case 1:
            return {
              op: AOp.CREATE_CQ,
              body: createCqBody({
                id: mostly(200 + rnd.below(64), [id()]),
                eqId: mostly(2, [3, 4, 8, 100]),
                depthLog2: mostly(7, [0, 17, 2]),
                strideLog2: mostly(5, [4]),
                pageSizeLog2: mostly(0, [12, 13]),
                mapCount: mostly(1, [2, 0, 3]),
                dma: mostly(contiguousRing(g, PAGE).dma, [ring()]),
              }),
            };
          case 2: {
            const cq = pick([...dev.rm.cqs.keys(), 999]);
            return {
              op: AOp.CREATE_QP,
              body: createQpBody({
                id: mostly(2 + rnd.below(64), [id()]),
                type: mostly(pick([0, 1, 3]), [2, 7]),
                flags: mostly(QpF.PRIVILEGED, [0, rnd.next()]),
                sq: {
                  cqId: cq,
                  depthLog2: mostly(6, [17]),
                  strideLog2: mostly(6, [5, 12]),
                  dma: mostly(contiguousRing(g, PAGE).dma, [ring()]),
                },
                rq: { cqId: cq, depthLog2: 6, strideLog2: 6, dma: mostly(contiguousRing(g, PAGE).dma, [ring()]) },
              }),
            };
          }
          case 3: {
            const n = 1 + rnd.below(4);
            const kind = pick([0, MrF.LOCAL_WRITE, MrF.PHYS, MrF.MW_1, MrF.MW_2]);
            const user = (kind & 0x4000) === 0 && kind !== MrF.PHYS;
            return {
              op: AOp.CREATE_MR,
              body: createMrBody({
                key: ((1 + rnd.below(40)) << 8) | rnd.below(256),
                va: mostly(0x10000, [0x1000, rnd.next() * 4096, 2 ** 53 - 4096]),
                length: mostly(user ? n * PAGE : 0, [0, 1, 2 ** 40]),
                flags: mostly(kind, [rnd.next() & 0xffff]),
                mapCount: user ? n : mostly(0, [n]),
                dma: user ? (n > 1 ? pages(n) : g.alloc(PAGE)) : mostly(0, [ring()]),
                pageSizeLog2: mostly(12, [21, 13]),
              }),
            };
          }
          case 4:
            return {
              op: AOp.MODIFY_QP,
              body: modifyQpBody({
                id: pick([...dev.rm.qps.keys(), 999]),
                mask: mostly(pick([Mask.STATE, Mask.STATE | Mask.QKEY, Mask.STATE | Mask.PATH_MTU]), [
                  Mask.STATE | Mask.AV | Mask.DEST_QPN,
                  rnd.next(),
                ]),
                state: rnd.below(8),
                curState: rnd.below(8),
                pmtu: mostly(10, [rnd.below(16)]),
                qkeyDest: rnd.next(),
                retry: rnd.below(256),
                timeout: rnd.below(40),
                rsqDepth: rnd.below(12),
                rrqDepth: rnd.below(12),
                ahId: rnd.below(20000),
                hdrLen: mostly(42, [rnd.below(80)]),
                hdrDma: tpl(),
              }),
            };
          case 5:
            return {
              op: AOp.QUERY_QP,
              body: queryQpBody(
                pick([...dev.rm.qps.keys(), 5]),
                pick([g.alloc(PAGE), 0, 0x10]),
                pick([g.alloc(PAGE), 2 ** 55]),
              ),
            };
          case 6: {
            const t = headerTemplate({ sip: Buffer.from([10, 0, 0, 1]), dip: Buffer.from([10, 0, 0, rnd.below(255)]) });
            return {
              op: AOp.CREATE_AH,
              body: mostly(createAhBody({ id: rnd.below(64), dma: placeTemplate(g, t), length: t.length }), [
                createAhBody({ id: id(), dma: tpl(), length: rnd.below(100), csum: rnd.below(5) }),
              ]),
            };
          }
          case 7:
            return {
              op: pick([AOp.DESTROY_CQ, AOp.DESTROY_QP, AOp.DESTROY_MR, AOp.DESTROY_AH, AOp.DESTROY_SRQ]),
              body: idBody(pick([id(), ...dev.rm.qps.keys(), ...dev.rm.cqs.keys()])),
            };
          case 8:
            return {
              op: pick([AOp.STATS_HDRS, AOp.STATS_VALS, AOp.QP_STATS_HDRS, AOp.QP_STATS_VALS]),
              body: statsBody(pick([g.alloc(PAGE), 0x1000]), pick([PAGE, 8, 0]), pick([0, ...dev.rm.qps.keys()])),
            };
          case 9:
            return { op: pick([AOp.NOOP, AOp.DEBUG, AOp.QUERY_AH, AOp.MODIFY_DCQCN]), body: rnd.bytes(rnd.below(64)) };
          case 10:
            return { op: pick([AOp.CREATE_SRQ, AOp.MODIFY_SRQ, AOp.QUERY_SRQ]), body: rnd.bytes(pick([4, 6, 42, 50])) };
          default:
            return { op: rnd.below(256), body: Buffer.alloc(rnd.below(128)) };
        }
      };
      const before = dev.counters.snapshot().admin_commands!;
      let posted = 0;
      let good = 0;
      for (let i = 0; i < 400; i++) {
        // Now and then: a random RDMA doorbell or bootstrap command from the side.
        // (Not on the admin queues or their CQs: that would desynchronise the model, not the device; see the last test.)
        if (rnd.below(10) === 0) {
          const dataCqs = [...dev.rm.cqs.values()].filter((q) => !q.admin).map((q) => q.id);
          g.ringDoorbell(
            pick([6, 7, 8, 9, 10, 63]),
            pick([...dev.rm.qps.keys(), ...dataCqs, 4096, 0xffffff]),
            rnd.below(65536),
            rnd.below(8),
          );
        }
        if (rnd.below(25) === 0) {
          const c = r.queueCmd(
            pick([BootOp.CREATE_EQ, BootOp.CREATE_CQ, BootOp.CREATE_ADMINQ]),
            id(),
            pick([0, 2, 9, 100]),
            rnd.below(20),
            rnd.below(8),
            ring(),
          );
          const st = (await g.adminCmd(c)).status;
          expect(st, 'bootstrap status').to.be.within(0, 31);
        }
        const { op, body } = cmd();
        const aq = rnd.below(2);
        const c = await r.post(op, body, { aq });
        posted++;
        expect(c.op).to.equal(op & 0xff);
        if (c.error) expect(c.status, `op ${op} status`).to.be.within(1, 6);
        else good++;
      }
      // The mix reaches both sides of the checks.
      expect(good, 'successes').to.be.at.least(60);
      expect(posted - good, 'refusals').to.be.at.least(100);
      expect(dev.counters.snapshot().admin_commands! - before).to.equal(posted);
      expect(g.violations).to.deep.equal([]);
      checkBooks(dev);
      // Still serving: the Ethernet admin queue, and a good RDMA command on both AQs.
      expect((await g.adminCmd(command(Op.NOP))).status).to.equal(0);
      for (const aq of [0, 1]) expect((await r.post(AOp.NOOP, Buffer.alloc(0), { aq })).error).to.equal(false);
    });
  }

  it('stays up when the guest scribbles on its own admin queues and CQs, and recovers with RDMA_RESET_LIF', async () => {
    const rnd = new Prng(4242);
    const dev = rig.device.rdma!;
    for (let i = 0; i < 300; i++) {
      const aq = r.aqs[rnd.below(2)]!;
      if (rnd.below(3) === 0) g.mem(aq.ring + rnd.below(aq.size) * 64, 64).set(rnd.bytes(64));
      g.ringDoorbell(rnd.pick([5, 8]), rnd.pick([aq.id, aq.cq.id, rnd.below(4)]), rnd.below(65536), rnd.below(4));
    }
    await g.sync();
    checkBooks(dev);
    expect((await g.adminCmd(command(Op.NOP))).status).to.equal(0);
    g.violations.length = 0; // the model's view of the scribbled queues is meaningless now
    expect(await r.resetLif()).to.equal(0);
    expect(dev.rm.counts()).to.deep.equal({ qps: 0, cqs: 0, mrs: 0, ahs: 0, srqs: 0, ptRuns: 0 });
    r = await RdmaGuest.boot(g, { cpus: 8 });
    for (const aq of [0, 1]) expect((await r.post(AOp.NOOP, Buffer.alloc(0), { aq })).error).to.equal(false);
    expect(g.violations).to.deep.equal([]);
  });
});
