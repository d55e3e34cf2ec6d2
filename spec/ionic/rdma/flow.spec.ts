// Flow control on the loopback data path, driven by the guest model: RNR
// (a SEND that finds no receive) with the requester's rnr_retry and the
// responder's min_rnr_timer, and CQ room (a WQE whose completion has no room
// waits for the host's ring-0 CQ doorbell instead of losing the CQE).

import { expect } from 'chai';
import * as sinon from 'sinon';
import { DeviceCounter } from '../../../lib/rdma/counters';
import { Cq, GuestMr, Qp, VerbsGuest } from '../../support/ionic/rdma-verbs';
import { idBody } from '../../support/ionic/rdma-cmds';
import { AOp, CqeT, Eqe, MrF, QpS, QpT, WOp, WSt } from '../../support/ionic/rdma-regs';
import { NoBackend } from '../../../lib/backends/none';

const KEY = (3 << 8) | 0x21;

describe('ionic rdma: flow control (RNR and CQ room)', () => {
  let v: VerbsGuest;
  let mr: GuestMr;
  let scq: Cq;
  let rcq: Cq;
  let nextQp = 40;

  const counter = (i: number): number => v.rig.device.rdma!.counters.get(i);

  async function pair(o: {
    rnrRetry: number;
    rnrTimer: number;
    sqCq?: Cq;
    rqCq?: Cq;
    depthLog2?: number;
  }): Promise<[Qp, Qp]> {
    const a = await v.createQp(nextQp++, QpT.RC, {
      sqCq: o.sqCq ?? scq,
      rqCq: o.rqCq ?? rcq,
      depthLog2: o.depthLog2 ?? 4,
    });
    const b = await v.createQp(nextQp++, QpT.RC, {
      sqCq: o.sqCq ?? scq,
      rqCq: o.rqCq ?? rcq,
      depthLog2: o.depthLog2 ?? 4,
    });
    await v.connectPair(a, b, { rnrRetry: o.rnrRetry, rnrTimer: o.rnrTimer });
    return [a, b];
  }

  before(async () => {
    v = await VerbsGuest.boot();
    scq = await v.createCq(200, 8);
    rcq = await v.createCq(201, 8);
    mr = await v.createMr({ key: KEY, pages: 8, flags: MrF.LOCAL_WRITE | MrF.REMOTE_WRITE | MrF.REMOTE_READ });
  });
  after(async () => v.close());
  afterEach(() => {
    expect(v.g.violations).to.deep.equal([]);
    v.drainAll();
  });

  describe('RNR', () => {
    // The RNR timers run on a fake clock: the tests move time themselves, so a
    // loaded machine cannot make a retry fire early or late against the test.
    // Only setTimeout and Date are faked; the guest model's I/O and
    // setImmediate stay real.
    let clock: sinon.SinonFakeTimers;
    beforeEach(() => {
      clock = sinon.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'Date'] });
    });
    afterEach(() => clock.restore());
    /** Moves the fake clock by `ms`, running the timers due, then lets the device finish what they started. */
    const advance = async (ms: number): Promise<void> => {
      await clock.tickAsync(ms);
      await v.settle();
    };

    it('rnr_retry 0: the first RNR NAK fails the SEND with RNR_RETRY_EXCEEDED and the QP goes to ERR', async () => {
      const [a, b] = await pair({ rnrRetry: 0, rnrTimer: 1 });
      const naks = counter(DeviceCounter.rnr_naks);
      v.postSend(a, { op: WOp.SEND, id: 0x10, sges: [mr.sge(0, 16)] });
      await v.settle();
      expect(v.drain(scq).map((c) => [c.type, c.qid, c.error, c.statusLength])).to.deep.equal([
        [CqeT.SEND_MSN, a.id, true, WSt.RNR_RETRY_EXCEEDED],
      ]);
      expect(v.qpState(a)).to.equal(QpS.ERR);
      expect(v.qpState(b)).to.equal(QpS.RTS);
      expect(counter(DeviceCounter.rnr_naks) - naks).to.equal(1);
    });

    it('rnr_retry 3: three retries a min_rnr_timer apart, then RNR_RETRY_EXCEEDED', async () => {
      // Code 18 = 5.12 ms (IBTA table 45): the NAKs come at 0, ~5, ~10 and ~15 ms
      // (timers have millisecond resolution); look between them.
      const [a] = await pair({ rnrRetry: 3, rnrTimer: 18 });
      const naks = counter(DeviceCounter.rnr_naks);
      const exceeded = counter(DeviceCounter.rnr_retry_exceeded);
      v.postSend(a, { op: WOp.SEND, id: 0x11, sges: [mr.sge(0, 16)] });
      await v.settle();
      expect(counter(DeviceCounter.rnr_naks) - naks, 'the first NAK at once').to.equal(1);
      let now = 0;
      for (const [to, nakCount] of [
        [4, 1],
        [6, 2],
        [9, 2],
        [11, 3],
        [14, 3],
      ] as const) {
        await advance(to - now);
        now = to;
        expect(counter(DeviceCounter.rnr_naks) - naks, `NAKs by ${to} ms`).to.equal(nakCount);
        expect(v.drain(scq), `nothing completed by ${to} ms`).to.have.length(0);
      }
      await advance(16 - now); // the fourth NAK spends the last retry
      const got = v.drain(scq);
      expect(got.map((c) => [c.qid, c.error, c.statusLength])).to.deep.equal([[a.id, true, WSt.RNR_RETRY_EXCEEDED]]);
      expect(counter(DeviceCounter.rnr_naks) - naks).to.equal(4);
      expect(counter(DeviceCounter.rnr_retry_exceeded) - exceeded).to.equal(1);
    });

    it('a receive posted during the retries completes the SEND at once, and later SENDs stay in order', async () => {
      const [a, b] = await pair({ rnrRetry: 2, rnrTimer: 24 }); // 40.96 ms per retry
      mr.write(0, Buffer.from('first message...'));
      mr.write(16, Buffer.from('second message..'));
      v.postSend(a, { op: WOp.SEND, id: 0x12, sges: [mr.sge(0, 16)] });
      v.postSend(a, { op: WOp.SEND, id: 0x13, sges: [mr.sge(16, 16)] });
      await v.settle();
      expect(v.drain(scq)).to.have.length(0);
      v.postRecv(b, { id: 0x90, sges: [mr.sge(4096, 64)] });
      await v.settle();
      // The first SEND landed; the second is now the one waiting for a receive.
      expect(mr.read(4096, 16).toString()).to.equal('first message...');
      expect(v.drain(scq).map((c) => [c.error, c.msn])).to.deep.equal([[false, 1]]);
      v.postRecv(b, { id: 0x91, sges: [mr.sge(8192, 64)] });
      await v.settle();
      expect(mr.read(8192, 16).toString()).to.equal('second message..');
      expect(v.drain(scq).map((c) => [c.error, c.msn])).to.deep.equal([[false, 2]]);
      expect(v.drain(rcq).map((c) => [c.qid, c.wqeIdLo, c.statusLength])).to.deep.equal([
        [b.id, 0x90, 16],
        [b.id, 0x91, 16],
      ]);
      await advance(200); // past every timer that was armed: nothing more may appear
      expect(v.drain(scq)).to.have.length(0);
      expect(v.qpState(a)).to.equal(QpS.RTS);
    });

    it('rnr_retry 7 waits for ever, and a flush (to ERR) ends the wait with one flush hint', async () => {
      const [a] = await pair({ rnrRetry: 7, rnrTimer: 1 });
      v.postSend(a, { op: WOp.SEND, id: 0x14, sges: [mr.sge(0, 8)] });
      await advance(30);
      expect(v.drain(scq)).to.have.length(0);
      await v.toErr(a);
      expect(v.drain(scq).map((c) => [c.type, c.error, c.statusLength])).to.deep.equal([
        [CqeT.SEND_NPG, true, WSt.WQE_FLUSHED],
      ]);
    });

    it('a SEND waiting for ever (rnr_retry 7) fails with RETRY_EXCEEDED when its responder goes to ERR', async () => {
      const [a, b] = await pair({ rnrRetry: 7, rnrTimer: 1 });
      v.postSend(a, { op: WOp.SEND, id: 0x16, sges: [mr.sge(0, 8)] });
      await v.settle();
      expect(v.drain(scq)).to.have.length(0);
      await v.toErr(b);
      await v.settle();
      expect(v.drain(scq).map((c) => [c.qid, c.error, c.statusLength])).to.deep.equal([
        [a.id, true, WSt.RETRY_EXCEEDED],
      ]);
      expect(v.qpState(a)).to.equal(QpS.ERR);
    });

    it('... and when its responder is destroyed', async () => {
      const [a, b] = await pair({ rnrRetry: 7, rnrTimer: 1 });
      v.postSend(a, { op: WOp.SEND, id: 0x17, sges: [mr.sge(0, 8)] });
      await v.settle();
      expect(v.drain(scq)).to.have.length(0);
      await v.ok(AOp.DESTROY_QP, idBody(b.id), 'DESTROY_QP');
      await v.settle();
      expect(v.drain(scq).map((c) => [c.qid, c.error, c.statusLength])).to.deep.equal([
        [a.id, true, WSt.RETRY_EXCEEDED],
      ]);
    });

    it('a QP destroyed while an RNR retry is pending: the timer fires into nothing', async () => {
      const [a] = await pair({ rnrRetry: 1, rnrTimer: 20 }); // 10.24 ms
      v.postSend(a, { op: WOp.SEND, id: 0x15, sges: [mr.sge(0, 8)] });
      await v.settle();
      await v.ok(AOp.DESTROY_QP, idBody(a.id), 'DESTROY_QP');
      await advance(40);
      expect(v.drain(scq).filter((c) => c.qid === a.id && c.statusLength === WSt.RNR_RETRY_EXCEEDED)).to.have.length(0);
    });
  });

  describe('CQ room', () => {
    it('WRITEs whose CQEs have no room wait for the ring-0 doorbell; nothing is lost and no CQ_ERR is raised', async () => {
      const small = await v.createCq(210, 2); // 4 slots: the device may fill 3 before the host reports
      const [a] = await pair({ rnrRetry: 7, rnrTimer: 1, sqCq: small, rqCq: rcq });
      const waits = counter(DeviceCounter.cq_full_waits);
      const eventsBefore = v.r.events.filter((e) => e.code === Eqe.CODE_CQ_ERR).length;
      for (let i = 0; i < 6; i++) mr.write(12288 + i * 8, Buffer.alloc(8, 0));
      for (let i = 0; i < 6; i++) {
        mr.write(1024 + i * 8, Buffer.alloc(8, 0x30 + i));
        v.postSend(
          a,
          {
            op: WOp.RDMA_WRITE,
            id: 0x20 + i,
            sges: [mr.sge(1024 + i * 8, 8)],
            remote: { va: mr.va + 12288 + i * 8, rkey: KEY },
          },
          i === 5,
        );
      }
      await v.settle();
      // Peek without reporting: 3 CQEs written, the 4th WRITE not started.
      const peek = (): number => {
        let n = 0;
        for (let i = 0; i < 4; i++) if ((v.g.mem(small.ring + i * 32 + 31, 1)[0]! & 1) === 1) n++;
        return n;
      };
      expect(peek()).to.equal(3);
      expect(mr.read(12288 + 3 * 8, 8).equals(Buffer.alloc(8, 0)), 'the 4th WRITE has not run').to.equal(true);
      expect(counter(DeviceCounter.cq_full_waits)).to.be.above(waits);
      const first = v.drain(small); // polls and rings ring 0: room again
      await v.settle();
      const rest = v.drain(small);
      expect([...first, ...rest].map((c) => [c.qid, c.error, c.msn])).to.deep.equal(
        [1, 2, 3, 4, 5, 6].map((m) => [a.id, false, m]),
      );
      for (let i = 0; i < 6; i++)
        expect(mr.read(12288 + i * 8, 8).equals(Buffer.alloc(8, 0x30 + i)), `WRITE ${i}`).to.equal(true);
      expect(v.r.events.filter((e) => e.code === Eqe.CODE_CQ_ERR).length).to.equal(eventsBefore);
    });

    it('a SEND whose receive CQ is full waits until the responder polls', async () => {
      const small = await v.createCq(211, 1); // 2 slots: one receive CQE at a time
      const [a, b] = await pair({ rnrRetry: 7, rnrTimer: 1, rqCq: small });
      for (let i = 0; i < 3; i++) v.postRecv(b, { id: 0xa0 + i, sges: [mr.sge(16384 + i * 64, 64)] });
      for (let i = 0; i < 3; i++) v.postSend(a, { op: WOp.SEND, id: 0x30 + i, sges: [mr.sge(0, 8)] });
      await v.settle();
      const seen: number[] = [];
      for (let round = 0; round < 5 && seen.length < 3; round++) {
        const got = v.drain(small).filter((c) => c.qid === b.id);
        expect(got.length, 'at most one receive CQE per poll').to.be.at.most(1);
        seen.push(...got.map((c) => c.wqeIdLo));
        await v.settle();
      }
      expect(seen).to.deep.equal([0xa0, 0xa1, 0xa2]);
      expect(
        v
          .drain(scq)
          .filter((c) => c.qid === a.id)
          .map((c) => [c.error, c.msn]),
      ).to.deep.equal([
        [false, 1],
        [false, 2],
        [false, 3],
      ]);
    });
  });
});

describe('ionic rdma: --backend none', () => {
  let v: VerbsGuest;
  after(async () => v?.close());

  it('creates every object and records doorbells, but runs no WQE and completes nothing', async () => {
    v = await VerbsGuest.boot({ rdmaBackend: new NoBackend() });
    const cq = await v.createCq(230, 6);
    const mr = await v.createMr({ key: KEY, pages: 2, flags: MrF.LOCAL_WRITE | MrF.REMOTE_WRITE });
    const a = await v.createQp(70, QpT.RC, { sqCq: cq });
    const b = await v.createQp(71, QpT.RC, { sqCq: cq });
    await v.connectPair(a, b);
    const target = mr.read(4096, 16);
    v.postRecv(b, { id: 1, sges: [mr.sge(0, 64)] });
    v.postSend(a, {
      op: WOp.RDMA_WRITE,
      id: 2,
      inline: Buffer.from('not moved'),
      remote: { va: mr.va + 4096, rkey: KEY },
    });
    v.postSend(a, { op: WOp.SEND, id: 3, inline: Buffer.from('nor this') });
    await v.settle();
    await v.settle(); // a second round trip: anything the doorbells started has run by now
    expect(v.drain(cq)).to.deep.equal([]);
    expect(mr.read(4096, 16).equals(target)).to.equal(true);
    const qp = v.rm.qps.get(a.id)!;
    expect([qp.sq.pi, qp.sq.ci, qp.state]).to.deep.equal([2, 0, QpS.RTS]);
    expect(v.rig.device.rdma!.counters.get(DeviceCounter.tx_wqes)).to.equal(0);
  });
});
