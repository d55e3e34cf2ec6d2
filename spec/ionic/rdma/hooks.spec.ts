// The seam the data path plugs into (lib/rdma/hooks.ts): the engine calls
// the hooks on doorbells and object changes (a throwing hook is our bug, not
// the guest's: logged, and the device carries on), lets a hook veto a
// MODIFY_QP, and offers postCqe / qpEvent, which write data CQEs and events
// with the same color and arming rules as the admin path.

import { expect } from 'chai';
import type { RdmaEngine } from '../../../lib/ionic/rdma/engine';
import { CqeType, newCqeRecord } from '../../../lib/rdma/datapath/cqe';
import { udmaOf } from '../../../lib/rdma/limits';
import { IonicGuest } from '../../support/ionic/guest';
import { PAGE } from '../../support/ionic/regs';
import { Rig } from '../../support/ionic/rig';
import { EventRecord, RdmaGuest } from '../../support/ionic/rdma-guest';
import { AOp, ASt, Mask, MrF, QpS, QpT, Ring } from '../../support/ionic/rdma-regs';
import {
  contiguousRing,
  createCqBody,
  createMrBody,
  createQpBody,
  idBody,
  modifyQpBody,
} from '../../support/ionic/rdma-cmds';
import { postDataCqe } from '../../../lib/rdma/datapath/cq-ring';

describe('ionic rdma: data path hooks and the device it gets', () => {
  let rig: Rig;
  let g: IonicGuest;
  let r: RdmaGuest;
  let dev: RdmaEngine;
  const calls: string[] = [];

  before(async () => {
    rig = await Rig.start();
    g = await rig.probed();
    r = await RdmaGuest.boot(g, { cpus: 8 });
    dev = rig.device.rdma!;
    dev.hooks = {
      sqDoorbell: (qp) => calls.push(`sq ${qp.id} ${qp.sq.pi}`),
      rqDoorbell: (qp) => calls.push(`rq ${qp.id} ${qp.rq!.pi}`),
      cqConsumed: (cq) => calls.push(`cq ${cq.id} ${cq.cons}`),
      qpModified: (qp, from, c) => calls.push(`mod ${qp.id} ${from}->${qp.state} ${Object.keys(c).sort().join(',')}`),
      qpDestroyed: (qp) => calls.push(`qp- ${qp.id}`),
      cqDestroyed: (cq) => calls.push(`cq- ${cq.id}`),
      mrDestroyed: (mr) => calls.push(`mr- ${mr.index}`),
      modifyAllowed: (qp, c) => !(qp.id === 801 && c.state === QpS.RTR),
    };
    for (const id of [300, 301]) {
      expect(
        (await r.post(AOp.CREATE_CQ, createCqBody({ id, eqId: 3, depthLog2: 2, dma: contiguousRing(g, PAGE).dma })))
          .error,
      ).to.equal(false);
    }
    for (const id of [800, 801]) {
      expect(
        (
          await r.post(
            AOp.CREATE_QP,
            createQpBody({
              id,
              type: QpT.RC,
              sq: { cqId: 300, depthLog2: 6, strideLog2: 6, dma: contiguousRing(g, PAGE).dma },
              rq: { cqId: 301, depthLog2: 6, strideLog2: 6, dma: contiguousRing(g, PAGE).dma },
            }),
          )
        ).error,
      ).to.equal(false);
    }
  });
  after(async () => rig.close());
  beforeEach(() => {
    calls.length = 0;
  });
  afterEach(() => expect(g.violations).to.deep.equal([]));

  it('calls the doorbell hooks after recording the index', async () => {
    g.ringDoorbell(r.id.sq.qtype, 800, 3);
    g.ringDoorbell(r.id.rq.qtype, 800, 7);
    g.ringDoorbell(r.id.cq.qtype, 300, 0, Ring.INDEX);
    g.ringDoorbell(r.id.sq.qtype, 800, 64); // past the ring: no hook
    g.ringDoorbell(r.id.sq.qtype, 999, 1); // no such QP: no hook
    await g.sync();
    expect(calls).to.deep.equal(['sq 800 3', 'rq 800 7', 'cq 300 0']);
  });

  it('calls the object hooks after the change, and honours a MODIFY_QP veto', async () => {
    expect((await r.post(AOp.MODIFY_QP, modifyQpBody({ id: 801, mask: Mask.STATE, state: QpS.INIT }))).error).to.equal(
      false,
    );
    const c = await r.post(
      AOp.MODIFY_QP,
      modifyQpBody({ id: 801, mask: Mask.STATE | Mask.PATH_MTU, state: QpS.RTR, pmtu: 12 }),
    );
    expect([c.error, c.status]).to.deep.equal([true, ASt.BAD_ATTR]);
    expect(dev.rm.qps.get(801)).to.include({ state: QpS.INIT });
    expect(dev.rm.qps.get(801)!.attrs.pmtu).to.equal(10);
    expect(
      (
        await r.post(
          AOp.CREATE_MR,
          createMrBody({ key: 0x301, va: 0, length: 0, flags: MrF.PHYS, mapCount: 0, dma: 0, pageSizeLog2: 12 }),
        )
      ).error,
    ).to.equal(false);
    expect((await r.post(AOp.DESTROY_MR, idBody(0x301))).error).to.equal(false);
    expect(calls).to.deep.equal(['mod 801 0->1 state', 'mr- 3']);
  });

  it("posts data CQEs with the color rules, raises the armed CQ's event, and reports a full or unknown CQ", async () => {
    const events: EventRecord[] = [];
    r.cqHandlers.set(300, (e) => events.push(e));
    const cq = dev.rm.cqs.get(300)!;
    const cqe = (tag: number) => Object.assign(newCqeRecord(), { type: CqeType.SEND_MSN, qid: 800, msn: tag });
    g.ringDoorbell(r.id.cq.qtype, 300, 1, Ring.ARM);
    await g.sync();
    expect(postDataCqe(dev, 300, cqe(1), false)).to.equal('ok');
    expect(postDataCqe(dev, 300, cqe(2), false)).to.equal('ok');
    expect(postDataCqe(dev, 300, cqe(3), false)).to.equal('ok');
    expect(postDataCqe(dev, 300, cqe(4), false)).to.equal('full'); // 4 slots, one kept empty
    expect(postDataCqe(dev, r.aqs[0]!.cq.id, cqe(5), false)).to.equal('no-cq');
    expect(postDataCqe(dev, 12345, cqe(5), false)).to.equal('no-cq');
    await g.waitFor('the CQ events', () => {
      r.service();
      return events.length >= 2 ? true : undefined;
    });
    // The notify (armed) and the overflow (CQ_ERR, code 8).
    expect(events.map((e) => [e.eq, e.type, e.code, e.qid])).to.deep.equal([
      [3, 0, 0, 300],
      [3, 0, 8, 300],
    ]);
    // The host's read position frees room; the next CQE wraps with color 0.
    g.ringDoorbell(r.id.cq.qtype, 300, 3, Ring.INDEX);
    await g.sync();
    expect(postDataCqe(dev, 300, cqe(6), false)).to.equal('ok');
    expect(postDataCqe(dev, 300, cqe(7), false)).to.equal('ok');
    const base = cq.table.run(0).addr;
    expect(g.mem(base + 3 * 32, 32).readUInt32BE(28)).to.equal(((800 << 8) | (2 << 5) | 1) >>> 0);
    expect(g.mem(base, 32).readUInt32BE(28)).to.equal(((800 << 8) | (2 << 5) | 0) >>> 0);
    expect(g.mem(base, 8).readUInt32BE(4)).to.equal(7); // the MSN
    expect(g.mem(base + 3 * 32, 8).readUInt32BE(4)).to.equal(6);
  });

  it('raises asynchronous QP events on the first EQ', async () => {
    dev.qpEvent(800, 8); // QP_ERR
    const e = await g.waitFor('a QP event', () => {
      r.service();
      return r.events.find((x) => x.type === 1);
    });
    expect([e.eq, e.code, e.qid]).to.deep.equal([0, 8, 800]);
  });

  it('carries on when a hook throws: the doorbell is recorded, the command completes, the error is ours', async () => {
    dev.hooks = {
      sqDoorbell: () => {
        throw new Error('data path bug');
      },
      qpDestroyed: () => {
        throw new Error('data path bug');
      },
      modifyAllowed: () => {
        throw new Error('data path bug');
      },
    };
    g.ringDoorbell(r.id.sq.qtype, 800, 9);
    await g.sync();
    expect(dev.rm.qps.get(800)!.sq.pi).to.equal(9);
    expect((await r.post(AOp.MODIFY_QP, modifyQpBody({ id: 800, mask: Mask.STATE, state: QpS.INIT }))).error).to.equal(
      false,
    );
    expect((await r.post(AOp.DESTROY_QP, idBody(800))).error).to.equal(false);
    expect(dev.rm.qps.has(800)).to.equal(false);
    dev.hooks = {};
  });

  it('names the udma of an id by the bit at udma_shift (both halves are ordinary ids)', () => {
    expect([
      udmaOf(0),
      udmaOf(1),
      udmaOf(63),
      udmaOf(64),
      udmaOf(127),
      udmaOf(128),
      udmaOf(0x40 | 0x100),
    ]).to.deep.equal([0, 0, 0, 1, 1, 0, 1]);
  });
});
