// The admin queue's completion path, in order (docs/driver-contract.md, ionic RDMA R2.1-R2.3, R4.8, R0.1):
// the 32-byte CQE on the AQ's CQ, then (when armed) the EQE on the CQ's EQ,
// then the MSI-X interrupt with mask-on-assert; colors across wraps of the
// AQ, the CQ and the EQ; multi-stride commands across the AQ's end; arming
// with CQEs already waiting; a full admin CQ holding the queue until the
// host's ring-0 doorbell; two AQs side by side.

import { expect } from 'chai';
import { IonicGuest } from '../../support/ionic/guest';
import { PAGE } from '../../support/ionic/regs';
import { Rig } from '../../support/ionic/rig';
import { RdmaGuest } from '../../support/ionic/rdma-guest';
import { AOp, QpT, Ring } from '../../support/ionic/rdma-regs';
import { contiguousRing, createCqBody, createQpBody } from '../../support/ionic/rdma-cmds';

describe('ionic rdma: admin completions, events and interrupts', () => {
  let rig: Rig;
  let g: IonicGuest;

  beforeEach(async () => {
    rig = await Rig.start();
    g = await rig.probed(0, { ramSize: 96 << 20 });
  });
  afterEach(async () => {
    expect(g.violations).to.deep.equal([]);
    await rig.close();
  });

  it('keeps colors right across wraps of the AQ (2-stride commands over its end), the CQ and the EQ', async () => {
    // Small rings: 8 AQ strides, 4 CQEs, 8 EQEs.
    const r = await RdmaGuest.boot(g, { cpus: 8, aqDepthLog2: 3, cqDepthLog2: 2, eqDepthLog2: 3 });
    const aq = r.aqs[0]!;
    for (let i = 0; i < 45; i++) {
      // Every third command is 64 bytes long (two strides), so some straddle the ring's end.
      const c = await r.post(AOp.NOOP, Buffer.alloc(i % 3 === 0 ? 64 : 0));
      expect(c.error).to.equal(false);
    }
    // CQEs: index runs 0..3 round and round, color 1 on even passes, 0 on odd ones.
    r.completions.forEach((c, k) => {
      expect(c.cqIndex, `completion ${k}`).to.equal(k % 4);
      expect(c.color, `completion ${k}`).to.equal(Math.floor(k / 4) % 2 === 0 ? 1 : 0);
    });
    // EQEs on the CQ's EQ: same rule with 8 entries; every one names the admin CQ.
    const evs = r.events.filter((e) => e.eq === aq.cq.eqId);
    expect(evs.length).to.be.at.least(45);
    evs.forEach((e, k) => {
      expect(e.index, `event ${k}`).to.equal(k % 8);
      expect(e.color, `event ${k}`).to.equal(Math.floor(k / 8) % 2 === 0 ? 1 : 0);
      expect([e.type, e.code, e.qid]).to.deep.equal([0, 0, aq.cq.id]);
    });
    // A CREATE_QP (64-byte body) whose second stride is slot 0: its id is in that stride.
    while (aq.prod !== 7) expect((await r.post(AOp.NOOP, Buffer.alloc(0))).error).to.equal(false);
    expect(
      (await r.post(AOp.CREATE_CQ, createCqBody({ id: 300, eqId: 2, depthLog2: 7, dma: contiguousRing(g, PAGE).dma })))
        .error,
    ).to.equal(false);
    while (aq.prod !== 7) expect((await r.post(AOp.NOOP, Buffer.alloc(0))).error).to.equal(false);
    const body = createQpBody({
      id: 0x345,
      type: QpT.UD,
      sq: { cqId: 300, depthLog2: 6, strideLog2: 6, dma: contiguousRing(g, PAGE).dma },
      rq: { cqId: 300, depthLog2: 6, strideLog2: 6, dma: contiguousRing(g, PAGE).dma },
    });
    const c = await r.post(AOp.CREATE_QP, body);
    expect([c.error, c.cmdIdx]).to.deep.equal([false, 7]);
    expect(rig.device.rdma!.rm.qps.has(0x345)).to.equal(true);
    expect(aq.prod).to.equal(1);
  });

  it('writes the CQE, then the EQE, then interrupts; the vector masks itself and an event while masked waits for unmask', async () => {
    const r = await RdmaGuest.boot(g, { cpus: 8 });
    const aq = r.aqs[0]!;
    const eq = r.eqs.find((e) => e.id === aq.cq.eqId)!;
    g.setVectorMode(eq.vector, 'manual');
    const irq0 = await g.irqCount(eq.vector);
    // Post without waiting: the model polls (arming the CQ) and rings.
    const slot = r.write(aq, AOp.NOOP, Buffer.alloc(0));
    r.poll(aq);
    r.ring(aq);
    await g.sync();
    // CQE at CQ index 0 with color 1, EQE at EQ index 0 with color 1, one interrupt, vector now masked.
    const cqe = g.mem(aq.cq.ring, 32);
    expect(cqe.readUInt16BE(0)).to.equal(slot);
    expect(cqe.readUInt32BE(28)).to.equal((aq.id << 8) | 1);
    expect(g.mem(eq.ring, 4).readUInt32BE(0)).to.equal(((aq.cq.id << 8) | 1) >>> 0);
    expect(await g.irqCount(eq.vector)).to.equal(irq0 + 1);
    expect(await g.readMask(eq.vector)).to.equal(1);
    // The arm was one shot: a second command writes its CQE but raises nothing.
    r.write(aq, AOp.NOOP, Buffer.alloc(0));
    r.ring(aq);
    await g.sync();
    expect(g.mem(aq.cq.ring + 32, 32).readUInt32BE(28) & 1).to.equal(1);
    expect(g.mem(eq.ring + 4, 4).readUInt32BE(0)).to.equal(0);
    expect(await g.irqCount(eq.vector)).to.equal(irq0 + 1);
    // The ISR: consume the EQE, poll the CQ (both CQEs), ring 0, arm; unmask with credits.
    r.service();
    expect(r.completions.map((c) => c.cmdIdx)).to.deep.equal([0, 1]);
    g.returnCredits(eq.vector, 0, true);
    // Masked vector: the event is written and the interrupt latched until unmask.
    g.setMask(eq.vector, 1);
    r.write(aq, AOp.NOOP, Buffer.alloc(0));
    r.ring(aq);
    await g.sync();
    expect(g.mem(eq.ring + 4, 4).readUInt32BE(0) & 1).to.equal(1);
    expect(await g.irqCount(eq.vector)).to.equal(irq0 + 1);
    g.setMask(eq.vector, 0);
    expect(await g.irqCount(eq.vector)).to.equal(irq0 + 2);
    r.service();
    expect(r.completions.length).to.equal(3);
    for (const w of aq.wr.keys()) aq.wr.delete(w);
  });

  it('fires at once when the CQ is armed with CQEs already past the last ring-0 index', async () => {
    const r = await RdmaGuest.boot(g, { cpus: 8 });
    const aq = r.aqs[0]!;
    const dev = rig.device.rdma!;
    const cq = dev.rm.cqs.get(aq.cq.id)!;
    // Never polled yet, so never armed: the CQE comes without an event.
    r.write(aq, AOp.NOOP, Buffer.alloc(0));
    r.ring(aq);
    await g.sync();
    expect([cq.prod, cq.cons, cq.armed]).to.deep.equal([1, 0, 0]);
    const events = dev.counters.snapshot().eq_events!;
    // Arm (ring 1) without a ring-0 update: the device has written past index 0, so it fires now.
    g.ringDoorbell(r.id.cq.qtype, aq.cq.id, 1, Ring.ARM);
    await g.sync();
    expect(dev.counters.snapshot().eq_events).to.equal(events + 1);
    expect(cq.armed).to.equal(0);
    aq.armed = true; // the model's view of the arm it just sent
    const done = await r.wait(aq, 0, 'event');
    expect(done.error).to.equal(false);
    // The model re-armed (ring 1) after its poll; a solicited-only arm (ring 2) does not weaken that.
    await g.sync();
    expect(cq.armed).to.equal(1);
    g.ringDoorbell(r.id.cq.qtype, aq.cq.id, 2, Ring.ARM_SOL);
    await g.sync();
    expect(cq.armed).to.equal(1);
    // An index update past the ring is ignored.
    g.ringDoorbell(r.id.cq.qtype, aq.cq.id, 256, Ring.INDEX);
    await g.sync();
    expect(cq.cons).to.equal(aq.cq.prod);
  });

  it("holds the queue while the admin CQ is full and resumes on the host's ring-0 doorbell", async () => {
    const r = await RdmaGuest.boot(g, { cpus: 8, cqDepthLog2: 2, aqDepthLog2: 4 });
    const aq = r.aqs[0]!;
    const eq = r.eqs.find((e) => e.id === aq.cq.eqId)!;
    const devAq = rig.device.rdma!.aqs.get(aq.id)!;
    g.setVectorMode(eq.vector, 'manual');
    const slots: number[] = [];
    for (let i = 0; i < 8; i++) slots.push(r.write(aq, AOp.NOOP, Buffer.alloc(0)));
    r.poll(aq);
    r.ring(aq);
    await g.sync();
    // 4 CQE slots, one always kept empty: three commands ran, five wait.
    expect([devAq.ci, devAq.pending]).to.deep.equal([3, 5]);
    g.setVectorMode(eq.vector, 'napi');
    g.returnCredits(eq.vector, 0, true); // unmask: the latched interrupt arrives and the model services it
    const done = [];
    for (const s of slots) done.push(await r.wait(aq, s, 'event'));
    expect(done.map((c) => c.cmdIdx)).to.deep.equal(slots);
    expect(done.every((c) => !c.error)).to.equal(true);
    expect(devAq.pending).to.equal(0);
  });

  it('runs a batch longer than one pass (64) in order, the rest on later turns of the event loop', async () => {
    const r = await RdmaGuest.boot(g, { cpus: 8 });
    const done = await r.postMany(
      Array.from({ length: 150 }, (_, i) => ({ op: i % 2 ? AOp.NOOP : AOp.DEBUG, body: Buffer.alloc(0) })),
    );
    expect(done.map((c) => c.cmdIdx)).to.deep.equal(Array.from({ length: 150 }, (_, i) => i));
    expect(done.every((c) => !c.error)).to.equal(true);
    expect(r.completions.map((c) => c.cmdIdx)).to.deep.equal(Array.from({ length: 150 }, (_, i) => i));
  });

  it('runs two admin queues side by side, each completing on its own CQ and EQ', async () => {
    const r = await RdmaGuest.boot(g, { cpus: 8 });
    const [a0, a1] = r.aqs;
    const p0 = Array.from({ length: 10 }, () => r.post(AOp.NOOP, Buffer.alloc(0), { aq: 0 }));
    const p1 = Array.from({ length: 10 }, () => r.post(AOp.NOOP, Buffer.alloc(0), { aq: 1 }));
    const all = await Promise.all([...p0, ...p1]);
    expect(all.filter((c) => c.aq === a0!.id).length).to.equal(10);
    expect(all.filter((c) => c.aq === a1!.id).length).to.equal(10);
    const eqsSeen = new Set(r.events.map((e) => `${e.eq}:${e.qid}`));
    expect([...eqsSeen].sort()).to.deep.equal([`${a0!.cq.eqId}:${a0!.cq.id}`, `${a1!.cq.eqId}:${a1!.cq.id}`].sort());
  });
});
