// The loopback data path (lib/rdma/datapath/engine-glue.ts) driven as the
// host drivers drive it: WQEs written into the SQ/RQ rings in guest memory,
// doorbells, and CQEs read back from the CQ rings with their color bit.

import { expect } from 'chai';
import { CqeRecord, CqeType, decodeCqe, IonicStatus, newCqeRecord, RecvOp, SendVerb, WqeFlag } from '../../lib/rdma/datapath/layouts';
import { IonicGuest } from '../support/ionic/guest';
import { PAGE } from '../support/ionic/regs';
import { Rig } from '../support/ionic/rig';
import { RdmaGuest } from '../support/ionic/rdma-guest';
import { AOp, Mask, MrF, QpF, QpS, QpT } from '../support/ionic/rdma-regs';
import {
  contiguousRing, createAhBody, createCqBody, createMrBody, createQpBody, headerTemplate, modifyQpBody, pageList, placeTemplate,
} from '../support/ionic/rdma-cmds';

const SEND_CQ = 300;
const RECV_CQ = 301;
const DEPTH_LOG2 = 4;
const STRIDE_LOG2 = 6;
const MR_KEY = (5 << 8) | 0x11;
const MR_LEN = 4 * PAGE;

function v4(s: string): Buffer { return Buffer.from(s.split('.').map(Number)); }

describe('ionic rdma: the loopback data path', () => {
  let rig: Rig;
  let g: IonicGuest;
  let r: RdmaGuest;
  let mr: number;
  const cqRing = new Map<number, { at: number; next: number }>();
  const rings = new Map<number, { sq: number; rq: number; sqPi: number; rqPi: number }>();

  async function ok(op: number, body: Buffer): Promise<void> {
    const c = await r.post(op, body);
    expect([c.error, c.status], `admin op ${op}`).to.deep.equal([false, 0]);
  }

  async function makeQp(id: number, type: number): Promise<void> {
    const sq = contiguousRing(g, PAGE).dma;
    const rq = contiguousRing(g, PAGE).dma;
    await ok(AOp.CREATE_QP, createQpBody({
      id, type, sq: { cqId: SEND_CQ, depthLog2: DEPTH_LOG2, strideLog2: STRIDE_LOG2, dma: sq },
      rq: { cqId: RECV_CQ, depthLog2: DEPTH_LOG2, strideLog2: STRIDE_LOG2, dma: rq },
    }));
    rings.set(id, { sq, rq, sqPi: 0, rqPi: 0 });
  }

  async function connect(id: number, dest: number): Promise<void> {
    await ok(AOp.MODIFY_QP, modifyQpBody({ id, mask: Mask.STATE | Mask.ACCESS_FLAGS, state: QpS.INIT,
      access: QpF.REMOTE_WRITE | QpF.REMOTE_READ | QpF.REMOTE_ATOMIC }));
    const tpl = headerTemplate({ sip: v4('10.0.0.1'), dip: v4('10.0.0.1') });
    await ok(AOp.MODIFY_QP, modifyQpBody({ id, mask: Mask.STATE | Mask.AV | Mask.DEST_QPN | Mask.PATH_MTU, state: QpS.RTR,
      qkeyDest: dest, pmtu: 10, ahId: 9, hdrLen: tpl.length, hdrDma: placeTemplate(g, tpl) }));
    await ok(AOp.MODIFY_QP, modifyQpBody({ id, mask: Mask.STATE, state: QpS.RTS }));
  }

  function sge(b: Buffer, at: number, va: number, len: number, lkey: number): void {
    b.writeUInt32BE(Math.floor(va / 0x100000000), at);
    b.writeUInt32BE(va >>> 0, at + 4);
    b.writeUInt32BE(len, at + 8);
    b.writeUInt32BE(lkey, at + 12);
  }

  /** Post a send WQE (v1 opcode = verb). */
  function postSend(qp: number, o: { verb: SendVerb; id: number; va?: number; len?: number; rva?: number; rkey?: number;
    imm?: number; ah?: number; dqpn?: number; qkey?: number; signaled?: boolean }): void {
    const q = rings.get(qp)!;
    const b = g.mem(q.sq + (q.sqPi << STRIDE_LOG2), 1 << STRIDE_LOG2);
    b.fill(0);
    b.writeUInt32LE(o.id, 0);
    b.writeUInt32LE(0xc0ffee00, 4);
    b[8] = o.verb;
    b[9] = o.len ? 1 : 0;
    b.writeUInt16BE(o.signaled === false ? 0 : WqeFlag.SIGNALED, 10);
    b.writeUInt32BE(o.imm ?? 0, 12);
    if (o.ah !== undefined) {
      b.writeUInt32BE(o.ah, 16);
      b.writeUInt32BE(o.dqpn ?? 0, 20);
      b.writeUInt32BE(o.qkey ?? 0, 24);
    } else {
      b.writeUInt32BE(Math.floor((o.rva ?? 0) / 0x100000000), 16);
      b.writeUInt32BE((o.rva ?? 0) >>> 0, 20);
      b.writeUInt32BE(o.rkey ?? 0, 24);
    }
    b.writeUInt32BE(o.len ?? 0, 28);
    if (o.len) sge(b, 32, o.va!, o.len, MR_KEY);
    q.sqPi = (q.sqPi + 1) & ((1 << DEPTH_LOG2) - 1);
    g.ringDoorbell(r.id.sq.qtype, qp, q.sqPi);
  }

  function postRecv(qp: number, id: number, va: number, len: number): void {
    const q = rings.get(qp)!;
    const b = g.mem(q.rq + (q.rqPi << STRIDE_LOG2), 1 << STRIDE_LOG2);
    b.fill(0);
    b.writeUInt32LE(id, 0);
    b.writeUInt32LE(0xbeef0000, 4);
    b[9] = 1;
    b.writeUInt32BE(len, 12);
    sge(b, 32, va, len, MR_KEY);
    q.rqPi = (q.rqPi + 1) & ((1 << DEPTH_LOG2) - 1);
    g.ringDoorbell(r.id.rq.qtype, qp, q.rqPi);
  }

  /** Every new CQE on a CQ (color 1: first pass). */
  function drain(cq: number): CqeRecord[] {
    const ring = cqRing.get(cq)!;
    const out: CqeRecord[] = [];
    for (;;) {
      const rec = newCqeRecord();
      decodeCqe(g.mem(ring.at + ring.next * 32, 32), 0, rec);
      if (!rec.color) return out;
      out.push(rec);
      ring.next++;
    }
  }

  before(async () => {
    rig = await Rig.start();
    g = await rig.probed();
    r = await RdmaGuest.boot(g, { cpus: 8 });
    for (const id of [SEND_CQ, RECV_CQ]) {
      const at = contiguousRing(g, 4 * PAGE).dma;
      await ok(AOp.CREATE_CQ, createCqBody({ id, eqId: 3, depthLog2: 7, strideLog2: 5, dma: at }));
      cqRing.set(id, { at, next: 0 });
    }
    mr = g.alloc(MR_LEN, MR_LEN);
    await ok(AOp.CREATE_MR, createMrBody({ key: MR_KEY, va: mr, length: MR_LEN, mapCount: 4, dma: pageList(g, [0, 1, 2, 3].map((i) => mr + i * PAGE)), pageSizeLog2: 12,
      flags: MrF.LOCAL_WRITE | MrF.REMOTE_WRITE | MrF.REMOTE_READ | MrF.REMOTE_ATOMIC }));
  });
  after(async () => rig.close());
  afterEach(() => expect(g.violations).to.deep.equal([]));

  describe('RC', () => {
    before(async () => {
      await makeQp(10, QpT.RC);
      await makeQp(11, QpT.RC);
      await connect(10, 11);
      await connect(11, 10);
    });

    it('SEND/RECV: the payload lands in the posted receive, MSN on the requester, RECV CQE on the responder', async () => {
      g.mem(mr, 64).fill(0x5a);
      postRecv(11, 0x77, mr + PAGE, 256);
      postSend(10, { verb: SendVerb.SEND, id: 0x42, va: mr, len: 64 });
      await g.sync();
      expect(g.mem(mr + PAGE, 64).equals(Buffer.alloc(64, 0x5a))).to.equal(true);
      expect(g.mem(mr + PAGE + 64, 1)[0]).to.equal(0);
      const s = drain(SEND_CQ);
      expect(s.map((c) => [c.type, c.qid, c.error, c.msn])).to.deep.equal([[CqeType.SEND_MSN, 10, false, 1]]);
      const rc = drain(RECV_CQ);
      expect(rc.map((c) => [c.type, c.qid, c.error, c.statusLength, c.srcQpn, c.recvOp, c.wqeIdLo, c.wqeIdHi >>> 0]))
        .to.deep.equal([[CqeType.RECV, 11, false, 64, 10, RecvOp.SEND, 0x77, 0xbeef0000]]);
    });

    it('waits for a receive (RNR) and completes once the RQ doorbell rings', async () => {
      g.mem(mr + 128, 16).fill(0x33);
      postSend(10, { verb: SendVerb.SEND_IMM, id: 0x43, va: mr + 128, len: 16, imm: 0x01020304 });
      await g.sync();
      expect(drain(SEND_CQ)).to.have.length(0);
      postRecv(11, 0x78, mr + 2 * PAGE, 64);
      await g.sync();
      expect(g.mem(mr + 2 * PAGE, 16).equals(Buffer.alloc(16, 0x33))).to.equal(true);
      expect(drain(SEND_CQ).map((c) => c.msn)).to.deep.equal([2]);
      expect(drain(RECV_CQ).map((c) => [c.recvOp, c.immDataRkey, c.statusLength])).to.deep.equal([[RecvOp.SEND_IMM, 0x01020304, 16]]);
    });

    it('RDMA WRITE and RDMA READ move bytes through the rkey', async () => {
      const src = g.mem(mr + 512, 100);
      for (let i = 0; i < 100; i++) src[i] = i;
      postSend(10, { verb: SendVerb.RDMA_WRITE, id: 0x44, va: mr + 512, len: 100, rva: mr + 3 * PAGE + 8, rkey: MR_KEY });
      await g.sync();
      expect(g.mem(mr + 3 * PAGE + 8, 100).equals(src)).to.equal(true);
      g.mem(mr + 3 * PAGE + 200, 32).fill(0xee);
      postSend(11, { verb: SendVerb.RDMA_READ, id: 0x45, va: mr + 1024, len: 32, rva: mr + 3 * PAGE + 200, rkey: MR_KEY });
      await g.sync();
      expect(g.mem(mr + 1024, 32).equals(Buffer.alloc(32, 0xee))).to.equal(true);
      expect(drain(SEND_CQ).map((c) => [c.qid, c.error, c.msn])).to.deep.equal([[10, false, 3], [11, false, 1]]);
      expect(drain(RECV_CQ)).to.have.length(0);
    });

    it('a bad rkey completes the requester with REMOTE_ACC and leaves memory alone', async () => {
      g.mem(mr + 3 * PAGE, 8).fill(0x11);
      postSend(10, { verb: SendVerb.RDMA_WRITE, id: 0x46, va: mr + 512, len: 8, rva: mr + 3 * PAGE, rkey: MR_KEY ^ 0x01 });
      await g.sync();
      expect(g.mem(mr + 3 * PAGE, 8).equals(Buffer.alloc(8, 0x11))).to.equal(true);
      expect(drain(SEND_CQ).map((c) => [c.type, c.qid, c.error, c.statusLength, c.msn]))
        .to.deep.equal([[CqeType.SEND_MSN, 10, true, IonicStatus.REMOTE_ACC, 4]]);
      expect(rig.device.rdma!.rm.qps.get(10)!.state).to.equal(QpS.ERR);
    });
  });

  describe('RC atomics and flushes', () => {
    before(async () => {
      await makeQp(12, QpT.RC);
      await makeQp(13, QpT.RC);
      await connect(12, 13);
      await connect(13, 12);
      drain(SEND_CQ);
      drain(RECV_CQ);
    });

    function postAtomic(qp: number, verb: SendVerb, id: number, rva: number, local: number, swapAdd: number, compare = 0): void {
      const q = rings.get(qp)!;
      const b = g.mem(q.sq + (q.sqPi << STRIDE_LOG2), 1 << STRIDE_LOG2);
      b.fill(0);
      b.writeUInt32LE(id, 0);
      b[8] = verb;
      b[9] = 1;
      b.writeUInt16BE(WqeFlag.SIGNALED, 10);
      b.writeUInt32BE(Math.floor(rva / 0x100000000), 16);
      b.writeUInt32BE(rva >>> 0, 20);
      b.writeUInt32BE(MR_KEY, 24);
      b.writeUInt32BE(0, 28);
      b.writeUInt32BE(swapAdd, 32);
      b.writeUInt32BE(0, 36);
      b.writeUInt32BE(compare, 40);
      sge(b, 48, local, 8, MR_KEY);
      q.sqPi = (q.sqPi + 1) & ((1 << DEPTH_LOG2) - 1);
      g.ringDoorbell(r.id.sq.qtype, qp, q.sqPi);
    }

    it('FETCH_ADD and CMP_SWAP return the old value and update the target', async () => {
      const target = mr + 3 * PAGE + 2048;
      g.mem(target, 8).writeBigUInt64LE(40n);
      postAtomic(12, SendVerb.ATOMIC_FA, 0x60, target, mr + 3072, 2);
      postAtomic(12, SendVerb.ATOMIC_CS, 0x61, target, mr + 3080, 7, 42);
      await g.sync();
      expect(g.mem(mr + 3072, 8).readBigUInt64LE(0)).to.equal(40n);
      expect(g.mem(mr + 3080, 8).readBigUInt64LE(0)).to.equal(42n);
      expect(g.mem(target, 8).readBigUInt64LE(0)).to.equal(7n);
      expect(drain(SEND_CQ).map((c) => [c.qid, c.error, c.msn])).to.deep.equal([[12, false, 1], [12, false, 2]]);
    });

    it('an unsignaled WQE still completes (MSN), so later ones retire in order', async () => {
      postRecv(13, 0x80, mr + PAGE, 64);
      postSend(12, { verb: SendVerb.SEND, id: 0x62, va: mr, len: 8, signaled: false });
      await g.sync();
      expect(drain(SEND_CQ).map((c) => [c.error, c.msn])).to.deep.equal([[false, 3]]);
      expect(drain(RECV_CQ).map((c) => c.wqeIdLo)).to.deep.equal([0x80]);
    });

    it('moving QPs to ERR posts the flush hints for their non-empty queues', async () => {
      postSend(12, { verb: SendVerb.SEND, id: 0x63, va: mr, len: 8 }); // no receive posted: waits
      await g.sync();
      expect(drain(SEND_CQ)).to.have.length(0);
      await ok(AOp.MODIFY_QP, modifyQpBody({ id: 12, mask: Mask.STATE, state: QpS.ERR }));
      expect(drain(SEND_CQ).map((c) => [c.type, c.qid, c.error, c.statusLength]))
        .to.deep.equal([[CqeType.SEND_NPG, 12, true, IonicStatus.WQE_FLUSHED]]);
      postRecv(13, 0x81, mr + PAGE, 64);
      await g.sync();
      await ok(AOp.MODIFY_QP, modifyQpBody({ id: 13, mask: Mask.STATE, state: QpS.ERR }));
      expect(drain(RECV_CQ).map((c) => [c.type, c.qid, c.error, c.statusLength]))
        .to.deep.equal([[CqeType.RECV, 13, true, IonicStatus.WQE_FLUSHED]]);
      expect(drain(SEND_CQ)).to.have.length(0);
    });
  });

  describe('UD', () => {
    before(async () => {
      for (const id of [20, 21]) {
        await makeQp(id, QpT.UD);
        await ok(AOp.MODIFY_QP, modifyQpBody({ id, mask: Mask.STATE | Mask.QKEY, state: QpS.INIT, qkeyDest: 0x11111111 }));
        await ok(AOp.MODIFY_QP, modifyQpBody({ id, mask: Mask.STATE, state: QpS.RTR }));
        await ok(AOp.MODIFY_QP, modifyQpBody({ id, mask: Mask.STATE, state: QpS.RTS }));
      }
      const t4 = headerTemplate({ sip: v4('10.0.0.1'), dip: v4('10.0.0.2'), ttl: 64 });
      await ok(AOp.CREATE_AH, createAhBody({ id: 3, dma: placeTemplate(g, t4), length: t4.length }));
    });

    it('SEND with the 40-byte network header first, NPG on the requester with its wqe_id', async () => {
      drain(SEND_CQ);
      drain(RECV_CQ);
      g.mem(mr + 2048, 20).fill(0x77);
      postRecv(21, 0x99, mr + 3 * PAGE + 1024, 40 + 256);
      postSend(20, { verb: SendVerb.SEND, id: 0x50, va: mr + 2048, len: 20, ah: 3, dqpn: 21, qkey: 0x11111111 });
      await g.sync();
      const base = mr + 3 * PAGE + 1024;
      const hdr = g.mem(base, 40);
      expect(hdr.subarray(0, 20).equals(Buffer.alloc(20))).to.equal(true);
      expect(hdr[20]).to.equal(0x45);
      expect([...hdr.subarray(32, 36)]).to.deep.equal([10, 0, 0, 1]);
      expect([...hdr.subarray(36, 40)]).to.deep.equal([10, 0, 0, 2]);
      expect(g.mem(base + 40, 20).equals(Buffer.alloc(20, 0x77))).to.equal(true);
      expect(drain(SEND_CQ).map((c) => [c.type, c.qid, c.error, c.wqeIdLo, c.wqeIdHi >>> 0]))
        .to.deep.equal([[CqeType.SEND_NPG, 20, false, 0x50, 0xc0ffee00]]);
      expect(drain(RECV_CQ).map((c) => [c.qid, c.statusLength, c.srcQpn, c.ipv4, c.wqeIdLo]))
        .to.deep.equal([[21, 60, 20, true, 0x99]]);
    });

    it('drops a datagram with the wrong Q_Key (the sender still completes)', async () => {
      postRecv(21, 0x9a, mr + 3 * PAGE + 1024, 40 + 256);
      postSend(20, { verb: SendVerb.SEND, id: 0x51, va: mr + 2048, len: 20, ah: 3, dqpn: 21, qkey: 0x22 });
      await g.sync();
      expect(drain(SEND_CQ).map((c) => [c.error, c.wqeIdLo])).to.deep.equal([[false, 0x51]]);
      expect(drain(RECV_CQ)).to.have.length(0);
    });
  });

  describe('REG_MR (fast registration)', () => {
    const FR_INDEX = 40;
    const frKey = (tag: number): number => ((FR_INDEX << 8) | tag) >>> 0;
    const IOVA = 0x7000_0100;

    before(async () => {
      await makeQp(14, QpT.RC);
      await makeQp(15, QpT.RC);
      await connect(14, 15);
      await connect(15, 14);
      await ok(AOp.CREATE_MR, createMrBody({ key: frKey(1), va: 0, length: 0, flags: MrF.PHYS, mapCount: 0, dma: 0, pageSizeLog2: 12 }));
      drain(SEND_CQ);
      drain(RECV_CQ);
    });

    /** A kernel REG_MR WQE: imm_data_key = current key, num_sge_key = new tag, BE64 dma_addr (merged 6.18). */
    function postRegMr(qp: number, o: { id: number; key: number; tag: number; va: number; len: number; offset: number; dma: number;
      mapCount: number; flags: number }): void {
      const q = rings.get(qp)!;
      const b = g.mem(q.sq + (q.sqPi << STRIDE_LOG2), 1 << STRIDE_LOG2);
      b.fill(0);
      b.writeUInt32LE(o.id, 0);
      b[8] = SendVerb.REG_MR;
      b[9] = o.tag;
      b.writeUInt16BE(WqeFlag.SIGNALED, 10);
      b.writeUInt32BE(o.key >>> 0, 12);
      const u64 = (at: number, v: number): void => { b.writeUInt32BE(Math.floor(v / 0x100000000), at); b.writeUInt32BE(v >>> 0, at + 4); };
      u64(16, o.va);
      u64(24, o.len);
      u64(32, o.offset);
      u64(40, o.dma);
      b.writeUInt32BE(o.mapCount, 48);
      b.writeUInt16BE(o.flags, 52);
      b[55] = 12;
      q.sqPi = (q.sqPi + 1) & ((1 << DEPTH_LOG2) - 1);
      g.ringDoorbell(r.id.sq.qtype, qp, q.sqPi);
    }

    it('registers an FRMR over a guest page list; an RDMA WRITE through the new rkey lands in those pages', async () => {
      const pages = [g.alloc(PAGE), g.alloc(2 * PAGE) + PAGE, g.alloc(PAGE)];
      for (const p of pages) g.mem(p, PAGE).fill(0);
      const len = 2 * PAGE + 0x200;
      postRegMr(14, { id: 0x60, key: frKey(1), tag: 2, va: IOVA, len, offset: 0x100, dma: pageList(g, pages), mapCount: 3,
        flags: MrF.LOCAL_WRITE | MrF.REMOTE_WRITE | MrF.REMOTE_READ });
      await g.sync();
      expect(drain(SEND_CQ).map((c) => [c.type, c.qid, c.error, c.wqeIdLo])).to.deep.equal([[CqeType.SEND_NPG, 14, false, 0x60]]);
      const mrRec = rig.device.rdma!.rm.mrs.get(FR_INDEX)!;
      expect(mrRec).to.include({ key: frKey(2), valid: true, length: len, iova: IOVA });
      // 48 bytes across the end of the first page into the second: logical PAGE - 0x110 from the iova.
      const src = g.mem(mr + 512, 48);
      for (let i = 0; i < 48; i++) src[i] = 0x80 + i;
      postSend(15, { verb: SendVerb.RDMA_WRITE, id: 0x61, va: mr + 512, len: 48, rva: IOVA + PAGE - 0x110, rkey: frKey(2) });
      await g.sync();
      expect(drain(SEND_CQ).map((c) => [c.qid, c.error, c.msn])).to.deep.equal([[15, false, 1]]);
      expect(g.mem(pages[0]! + PAGE - 16, 16).equals(src.subarray(0, 16))).to.equal(true);
      expect(g.mem(pages[1]!, 32).equals(src.subarray(16))).to.equal(true);
      expect(g.mem(pages[0]!, PAGE - 16).equals(Buffer.alloc(PAGE - 16))).to.equal(true);
      expect(g.mem(pages[2]!, PAGE).equals(Buffer.alloc(PAGE))).to.equal(true);
      // the old key is gone
      g.mem(pages[2]!, 8).fill(0);
      postSend(15, { verb: SendVerb.RDMA_WRITE, id: 0x62, va: mr + 512, len: 8, rva: IOVA + 2 * PAGE, rkey: frKey(1) });
      await g.sync();
      expect(drain(SEND_CQ).map((c) => [c.qid, c.error, c.statusLength])).to.deep.equal([[15, true, IonicStatus.REMOTE_ACC]]);
      expect(g.mem(pages[2]!, 8).equals(Buffer.alloc(8))).to.equal(true);
    });

    it('a REG_MR naming an unknown key completes with MEM_MGMT_OPER and registers nothing', async () => {
      const page = g.alloc(PAGE);
      const before = rig.device.rdma!.rm.budget.used;
      postRegMr(14, { id: 0x63, key: (99 << 8) | 1, tag: 2, va: IOVA, len: 64, offset: 0, dma: page, mapCount: 1, flags: MrF.REMOTE_WRITE });
      await g.sync();
      const cqes = drain(SEND_CQ);
      expect(cqes.map((c) => [c.type, c.qid, c.error, c.statusLength, c.wqeIdLo])[0])
        .to.deep.equal([CqeType.SEND_NPG, 14, true, IonicStatus.MEM_MGMT_OPER, 0x63]);
      expect(rig.device.rdma!.rm.mrs.has(99)).to.equal(false);
      expect(rig.device.rdma!.rm.budget.used).to.equal(before);
      expect(rig.device.rdma!.rm.qps.get(14)!.state).to.equal(QpS.ERR);
    });
  });
});
