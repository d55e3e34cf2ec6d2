// The loopback data path (lib/rdma/executor/) driven as the
// host drivers drive it: WQEs written into the SQ/RQ rings in guest memory,
// doorbells, and CQEs read back from the CQ rings with their color bit
// (through the verbs guest, ../support/ionic/rdma-verbs.ts).

import { expect } from 'chai';
import { PAGE } from '../support/ionic/regs';
import { CqeT, MrF, QpS, QpT, ROp, WOp, WSt } from '../support/ionic/rdma-regs';
import { pageList } from '../support/ionic/rdma-cmds';
import { Cq, GuestMr, Qp, v4, VerbsGuest } from '../support/ionic/rdma-verbs';

const MR_KEY = (5 << 8) | 0x11;

describe('ionic rdma: the loopback data path', () => {
  let v: VerbsGuest;
  let scq: Cq;
  let rcq: Cq;
  let mr: GuestMr;

  before(async () => {
    v = await VerbsGuest.boot();
    scq = await v.createCq(300, 7);
    rcq = await v.createCq(301, 7);
    mr = await v.createMr({
      key: MR_KEY,
      pages: 4,
      contiguous: true,
      flags: MrF.LOCAL_WRITE | MrF.REMOTE_WRITE | MrF.REMOTE_READ | MrF.REMOTE_ATOMIC,
    });
  });
  after(async () => v.close());
  afterEach(() => expect(v.g.violations).to.deep.equal([]));

  describe('RC', () => {
    let a: Qp;
    let b: Qp;
    before(async () => {
      a = await v.createQp(10, QpT.RC, { sqCq: scq, rqCq: rcq });
      b = await v.createQp(11, QpT.RC, { sqCq: scq, rqCq: rcq });
      await v.connectPair(a, b);
    });

    it('SEND/RECV: the payload lands in the posted receive, MSN on the requester, RECV CQE on the responder', async () => {
      mr.write(0, Buffer.alloc(64, 0x5a));
      mr.write(PAGE + 64, Buffer.alloc(1));
      v.postRecv(b, { id: 0x77, idHi: 0xbeef0000, sges: [mr.sge(PAGE, 256)] });
      v.postSend(a, { op: WOp.SEND, id: 0x42, sges: [mr.sge(0, 64)] });
      await v.settle();
      expect(mr.read(PAGE, 64).equals(Buffer.alloc(64, 0x5a))).to.equal(true);
      expect(mr.read(PAGE + 64, 1)[0]).to.equal(0);
      const s = v.drain(scq);
      expect(s.map((c) => [c.type, c.qid, c.error, c.msn])).to.deep.equal([[CqeT.SEND_MSN, 10, false, 1]]);
      const rc = v.drain(rcq);
      expect(
        rc.map((c) => [c.type, c.qid, c.error, c.statusLength, c.srcQpn, c.recvOp, c.wqeIdLo, c.wqeIdHi >>> 0]),
      ).to.deep.equal([[CqeT.RECV, 11, false, 64, 10, ROp.SEND, 0x77, 0xbeef0000]]);
    });

    it('waits for a receive (RNR, rnr_retry 7 = forever) and completes once the RQ doorbell rings', async () => {
      mr.write(128, Buffer.alloc(16, 0x33));
      v.postSend(a, { op: WOp.SEND_IMM, id: 0x43, sges: [mr.sge(128, 16)], imm: 0x01020304 });
      await v.settle();
      expect(v.drain(scq)).to.have.length(0);
      v.postRecv(b, { id: 0x78, sges: [mr.sge(2 * PAGE, 64)] });
      await v.settle();
      expect(mr.read(2 * PAGE, 16).equals(Buffer.alloc(16, 0x33))).to.equal(true);
      expect(v.drain(scq).map((c) => c.msn)).to.deep.equal([2]);
      expect(v.drain(rcq).map((c) => [c.recvOp, c.immDataRkey, c.statusLength])).to.deep.equal([
        [ROp.SEND_IMM, 0x01020304, 16],
      ]);
    });

    it('RDMA WRITE and RDMA READ move bytes through the rkey', async () => {
      const src = Buffer.alloc(100);
      for (let i = 0; i < 100; i++) src[i] = i;
      mr.write(512, src);
      v.postSend(a, {
        op: WOp.RDMA_WRITE,
        id: 0x44,
        sges: [mr.sge(512, 100)],
        remote: { va: mr.va + 3 * PAGE + 8, rkey: MR_KEY },
      });
      await v.settle();
      expect(mr.read(3 * PAGE + 8, 100).equals(src)).to.equal(true);
      mr.write(3 * PAGE + 200, Buffer.alloc(32, 0xee));
      v.postSend(b, {
        op: WOp.RDMA_READ,
        id: 0x45,
        sges: [mr.sge(1024, 32)],
        remote: { va: mr.va + 3 * PAGE + 200, rkey: MR_KEY },
      });
      await v.settle();
      expect(mr.read(1024, 32).equals(Buffer.alloc(32, 0xee))).to.equal(true);
      expect(v.drain(scq).map((c) => [c.qid, c.error, c.msn])).to.deep.equal([
        [10, false, 3],
        [11, false, 1],
      ]);
      expect(v.drain(rcq)).to.have.length(0);
    });

    it('a bad rkey completes the requester with REMOTE_ACC and leaves memory alone', async () => {
      mr.write(3 * PAGE, Buffer.alloc(8, 0x11));
      v.postSend(a, {
        op: WOp.RDMA_WRITE,
        id: 0x46,
        sges: [mr.sge(512, 8)],
        remote: { va: mr.va + 3 * PAGE, rkey: MR_KEY ^ 0x01 },
      });
      await v.settle();
      expect(mr.read(3 * PAGE, 8).equals(Buffer.alloc(8, 0x11))).to.equal(true);
      expect(v.drain(scq).map((c) => [c.type, c.qid, c.error, c.statusLength, c.msn])).to.deep.equal([
        [CqeT.SEND_MSN, 10, true, WSt.REMOTE_ACC, 4],
      ]);
      expect(v.qpState(a)).to.equal(QpS.ERR);
    });
  });

  describe('RC atomics and flushes', () => {
    let a: Qp;
    let b: Qp;
    before(async () => {
      a = await v.createQp(12, QpT.RC, { sqCq: scq, rqCq: rcq });
      b = await v.createQp(13, QpT.RC, { sqCq: scq, rqCq: rcq });
      await v.connectPair(a, b);
      v.drain(scq);
      v.drain(rcq);
    });

    it('FETCH_ADD and CMP_SWAP return the old value and update the target', async () => {
      const target = 3 * PAGE + 2048;
      const t = Buffer.alloc(8);
      t.writeBigUInt64LE(40n);
      mr.write(target, t);
      v.postSend(a, {
        op: WOp.ATOMIC_FA,
        id: 0x60,
        remote: { va: mr.va + target, rkey: MR_KEY },
        atomic: { swapAdd: 2n, local: mr.sge(3072, 8) },
      });
      v.postSend(a, {
        op: WOp.ATOMIC_CS,
        id: 0x61,
        remote: { va: mr.va + target, rkey: MR_KEY },
        atomic: { swapAdd: 7n, compare: 42n, local: mr.sge(3080, 8) },
      });
      await v.settle();
      expect(mr.read(3072, 8).readBigUInt64LE(0)).to.equal(40n);
      expect(mr.read(3080, 8).readBigUInt64LE(0)).to.equal(42n);
      expect(mr.read(target, 8).readBigUInt64LE(0)).to.equal(7n);
      expect(v.drain(scq).map((c) => [c.qid, c.error, c.msn])).to.deep.equal([
        [12, false, 1],
        [12, false, 2],
      ]);
    });

    it('an unsignaled WQE still completes (MSN), so later ones retire in order', async () => {
      v.postRecv(b, { id: 0x80, sges: [mr.sge(PAGE, 64)] });
      v.postSend(a, { op: WOp.SEND, id: 0x62, sges: [mr.sge(0, 8)], signaled: false });
      await v.settle();
      expect(v.drain(scq).map((c) => [c.error, c.msn])).to.deep.equal([[false, 3]]);
      expect(v.drain(rcq).map((c) => c.wqeIdLo)).to.deep.equal([0x80]);
    });

    it('moving QPs to ERR posts the flush hints for their non-empty queues', async () => {
      v.postSend(a, { op: WOp.SEND, id: 0x63, sges: [mr.sge(0, 8)] }); // no receive posted: waits
      await v.settle();
      expect(v.drain(scq)).to.have.length(0);
      await v.toErr(a);
      expect(v.drain(scq).map((c) => [c.type, c.qid, c.error, c.statusLength])).to.deep.equal([
        [CqeT.SEND_NPG, 12, true, WSt.WQE_FLUSHED],
      ]);
      v.postRecv(b, { id: 0x81, sges: [mr.sge(PAGE, 64)] });
      await v.settle();
      await v.toErr(b);
      expect(v.drain(rcq).map((c) => [c.type, c.qid, c.error, c.statusLength])).to.deep.equal([
        [CqeT.RECV, 13, true, WSt.WQE_FLUSHED],
      ]);
      expect(v.drain(scq)).to.have.length(0);
    });
  });

  describe('UD', () => {
    let a: Qp;
    let b: Qp;
    before(async () => {
      a = await v.createQp(20, QpT.UD, { sqCq: scq, rqCq: rcq });
      b = await v.createQp(21, QpT.UD, { sqCq: scq, rqCq: rcq });
      await v.readyUd(a, 0x11111111);
      await v.readyUd(b, 0x11111111);
      await v.createAh(3, { sip: v4('10.0.0.1'), dip: v4('10.0.0.2'), ttl: 64 });
    });

    it('SEND with the 40-byte network header first, NPG on the requester with its wqe_id', async () => {
      v.drain(scq);
      v.drain(rcq);
      mr.write(2048, Buffer.alloc(20, 0x77));
      const base = 3 * PAGE + 1024;
      v.postRecv(b, { id: 0x99, sges: [mr.sge(base, 40 + 256)] });
      v.postSend(a, {
        op: WOp.SEND,
        id: 0x50,
        idHi: 0xc0ffee00,
        sges: [mr.sge(2048, 20)],
        ud: { ah: 3, qpn: 21, qkey: 0x11111111 },
      });
      await v.settle();
      const hdr = mr.read(base, 40);
      expect(hdr.subarray(0, 20).equals(Buffer.alloc(20))).to.equal(true);
      expect(hdr[20]).to.equal(0x45);
      expect([...hdr.subarray(32, 36)]).to.deep.equal([10, 0, 0, 1]);
      expect([...hdr.subarray(36, 40)]).to.deep.equal([10, 0, 0, 2]);
      expect(mr.read(base + 40, 20).equals(Buffer.alloc(20, 0x77))).to.equal(true);
      expect(v.drain(scq).map((c) => [c.type, c.qid, c.error, c.wqeIdLo, c.wqeIdHi >>> 0])).to.deep.equal([
        [CqeT.SEND_NPG, 20, false, 0x50, 0xc0ffee00],
      ]);
      expect(v.drain(rcq).map((c) => [c.qid, c.statusLength, c.srcQpn, c.ipv4, c.wqeIdLo])).to.deep.equal([
        [21, 60, 20, true, 0x99],
      ]);
    });

    it('drops a datagram with the wrong Q_Key (the sender still completes)', async () => {
      v.postRecv(b, { id: 0x9a, sges: [mr.sge(3 * PAGE + 1024, 40 + 256)] });
      v.postSend(a, { op: WOp.SEND, id: 0x51, sges: [mr.sge(2048, 20)], ud: { ah: 3, qpn: 21, qkey: 0x22 } });
      await v.settle();
      expect(v.drain(scq).map((c) => [c.error, c.wqeIdLo])).to.deep.equal([[false, 0x51]]);
      expect(v.drain(rcq)).to.have.length(0);
    });
  });

  describe('REG_MR (fast registration)', () => {
    const FR_INDEX = 40;
    const frKey = (tag: number): number => ((FR_INDEX << 8) | tag) >>> 0;
    const IOVA = 0x7000_0100;
    let a: Qp;
    let b: Qp;

    before(async () => {
      a = await v.createQp(14, QpT.RC, { sqCq: scq, rqCq: rcq });
      b = await v.createQp(15, QpT.RC, { sqCq: scq, rqCq: rcq });
      await v.connectPair(a, b);
      await v.createFrmr(frKey(1));
      v.drain(scq);
      v.drain(rcq);
    });

    it('registers an FRMR over a guest page list; an RDMA WRITE through the new rkey lands in those pages', async () => {
      const pages = [v.g.alloc(PAGE), v.g.alloc(2 * PAGE) + PAGE, v.g.alloc(PAGE)];
      for (const p of pages) v.g.mem(p, PAGE).fill(0);
      const len = 2 * PAGE + 0x200;
      v.postSend(a, {
        op: WOp.REG_MR,
        id: 0x60,
        imm: frKey(1),
        numSge: 2,
        regMr: {
          va: IOVA,
          length: len,
          offset: 0x100,
          dma: pageList(v.g, pages),
          mapCount: 3,
          flags: MrF.LOCAL_WRITE | MrF.REMOTE_WRITE | MrF.REMOTE_READ,
        },
      });
      await v.settle();
      expect(v.drain(scq).map((c) => [c.type, c.qid, c.error, c.wqeIdLo])).to.deep.equal([
        [CqeT.SEND_NPG, 14, false, 0x60],
      ]);
      const mrRec = v.rm.mrs.get(FR_INDEX)!;
      expect(mrRec).to.include({ key: frKey(2), valid: true, length: len, iova: IOVA });
      // 48 bytes across the end of the first page into the second: logical PAGE - 0x110 from the iova.
      const src = Buffer.alloc(48);
      for (let i = 0; i < 48; i++) src[i] = 0x80 + i;
      mr.write(512, src);
      v.postSend(b, {
        op: WOp.RDMA_WRITE,
        id: 0x61,
        sges: [mr.sge(512, 48)],
        remote: { va: IOVA + PAGE - 0x110, rkey: frKey(2) },
      });
      await v.settle();
      expect(v.drain(scq).map((c) => [c.qid, c.error, c.msn])).to.deep.equal([[15, false, 1]]);
      expect(v.g.mem(pages[0]! + PAGE - 16, 16).equals(src.subarray(0, 16))).to.equal(true);
      expect(v.g.mem(pages[1]!, 32).equals(src.subarray(16))).to.equal(true);
      expect(v.g.mem(pages[0]!, PAGE - 16).equals(Buffer.alloc(PAGE - 16))).to.equal(true);
      expect(v.g.mem(pages[2]!, PAGE).equals(Buffer.alloc(PAGE))).to.equal(true);
      // the old key is gone
      v.g.mem(pages[2]!, 8).fill(0);
      v.postSend(b, {
        op: WOp.RDMA_WRITE,
        id: 0x62,
        sges: [mr.sge(512, 8)],
        remote: { va: IOVA + 2 * PAGE, rkey: frKey(1) },
      });
      await v.settle();
      expect(v.drain(scq).map((c) => [c.qid, c.error, c.statusLength])).to.deep.equal([[15, true, WSt.REMOTE_ACC]]);
      expect(v.g.mem(pages[2]!, 8).equals(Buffer.alloc(8))).to.equal(true);
      // The responder NAKed with its own error: both ends are in ERR, as on an HCA.
      expect([v.qpState(a), v.qpState(b)]).to.deep.equal([QpS.ERR, QpS.ERR]);
    });

    it('a REG_MR naming an unknown key completes with MEM_MGMT_OPER and registers nothing', async () => {
      // QP a went to ERR as the last test's responder: back to RTS first.
      await v.reset(a);
      const page = v.g.alloc(PAGE);
      const before = v.rm.budget.used;
      v.postSend(a, {
        op: WOp.REG_MR,
        id: 0x63,
        imm: (99 << 8) | 1,
        numSge: 2,
        regMr: { va: IOVA, length: 64, offset: 0, dma: page, mapCount: 1, flags: MrF.REMOTE_WRITE },
      });
      await v.settle();
      const cqes = v.drain(scq);
      expect(cqes.map((c) => [c.type, c.qid, c.error, c.statusLength, c.wqeIdLo])[0]).to.deep.equal([
        CqeT.SEND_NPG,
        14,
        true,
        WSt.MEM_MGMT_OPER,
        0x63,
      ]);
      expect(v.rm.mrs.has(99)).to.equal(false);
      expect(v.rm.budget.used).to.equal(before);
      expect(v.qpState(a)).to.equal(QpS.ERR);
    });
  });
});
