// RDMA between two servers over the TCP mesh, in one process: each server
// has its own device and guest model (real sockets, memfd guest memory), the
// two Meshes (manager and worker) talk over loopback TCP. Covers every verb
// across nodes, completions only after the peer's answer, RNR holds, the
// GID rules of MODIFY_QP, key 0 from a peer, datagrams, and a lost peer.

import { expect } from 'chai';
import * as sinon from 'sinon';
import * as lentViews from '../../../../lib/vfio-user/lent-views';
import { LEND_MIN_BYTES } from '../../../../lib/rdma/datapath/mesh/requester';
import { FrameParser, IN_PLACE_MIN } from '../../../../lib/mesh/frame-parser';
import type { Mesh } from '../../../../lib/mesh';
import { IonicStatus } from '../../../../lib/rdma/datapath/cqe';
import { gidsFromFrame, linkLocalGid } from '../../../../lib/rdma/datapath/mesh';
import { ipv4Gid } from '../../../../lib/rdma/address';
import { cqesOf as cqes, meshGuests, MeshGuests, until } from '../../../mesh/helpers';
import { PAGE } from '../../../support/ionic/regs';
import { AOp, CqeT, Mask, MrF, QpS, QpT, ROp, WOp } from '../../../support/ionic/rdma-regs';
import { modifyQpBody, createAhBody, headerTemplate, idBody, placeTemplate } from '../../../support/ionic/rdma-cmds';
import { Cq, GuestMr, Qp, v4, VerbsGuest } from '../../../support/ionic/rdma-verbs';
import { MeshBackend } from '../../../../lib/backends/mesh';

const ALL = MrF.LOCAL_WRITE | MrF.REMOTE_WRITE | MrF.REMOTE_READ | MrF.REMOTE_ATOMIC;
const IP_A = '10.9.0.1';
const IP_B = '10.9.0.2';

function pattern(n: number, seed: number): Buffer {
  const b = Buffer.alloc(n);
  for (let i = 0; i < n; i++) b[i] = (i * 31 + seed) & 0xff;
  return b;
}

describe('rdma over the TCP mesh: two servers, two guests', function () {
  this.timeout(60_000);
  let pair: MeshGuests | undefined;
  let worker: Mesh;
  let a: VerbsGuest;
  let b: VerbsGuest;
  let acq: Cq;
  let bcq: Cq;
  let A: GuestMr;
  let B: GuestMr;
  let qa: Qp;
  let qb: Qp;

  before(async () => {
    pair = await meshGuests(IP_A, IP_B, 512);
    ({ worker, a, b } = pair);
    acq = await a.createCq(40);
    bcq = await b.createCq(40);
    A = await a.createMr({ key: 0x501, pages: 16, flags: ALL });
    B = await b.createMr({ key: 0x702, pages: 16, flags: ALL });
    qa = await a.createQp(20, QpT.RC, { sqCq: acq, rqCq: acq });
    qb = await b.createQp(30, QpT.RC, { sqCq: bcq, rqCq: bcq });
    await a.connect(qa, qb.id, { tpl: { sip: v4(IP_A), dip: v4(IP_B) } });
    await b.connect(qb, qa.id, { tpl: { sip: v4(IP_B), dip: v4(IP_A) } });
  });
  /** An RC QP on A and one on B, connected to each other across the mesh. */
  async function crossPair(idA: number, idB: number): Promise<[Qp, Qp]> {
    const qpA = await a.createQp(idA, QpT.RC, { sqCq: acq, rqCq: acq });
    const qpB = await b.createQp(idB, QpT.RC, { sqCq: bcq, rqCq: bcq });
    await a.connect(qpA, qpB.id, { tpl: { sip: v4(IP_A), dip: v4(IP_B) } });
    await b.connect(qpB, qpA.id, { tpl: { sip: v4(IP_B), dip: v4(IP_A) } });
    return [qpA, qpB];
  }

  after(async () => {
    await pair?.close();
  });

  it('the QPs resolved their peers by GID: A sends to node 1, B to node 0', () => {
    expect((a.rig.device.backend as MeshBackend).dataPath).to.not.equal(null);
    expect(qa.id).to.equal(20);
    expect(a.qpState(qa)).to.equal(QpS.RTS);
    expect(b.qpState(qb)).to.equal(QpS.RTS);
  });

  it("SEND with immediate: the bytes land in B's receive; A completes only after B's ACK", async () => {
    const data = pattern(3000, 7);
    A.write(100, data);
    b.postRecv(qb, { id: 0x99, sges: [B.sge(0, 4096)] });
    a.postSend(qa, { op: WOp.SEND_IMM, id: 1, imm: 0xcafef00d, sges: [A.sge(100, 3000)] });
    const rc = await cqes(b, bcq, 1);
    expect(rc[0]!.type).to.equal(CqeT.RECV);
    expect(rc[0]!.error).to.equal(false);
    expect(rc[0]!.statusLength).to.equal(3000);
    expect(rc[0]!.recvOp).to.equal(ROp.SEND_IMM);
    expect(rc[0]!.immDataRkey >>> 0).to.equal(0xcafef00d);
    expect(rc[0]!.srcQpn).to.equal(qa.id);
    expect(B.read(0, 3000).equals(data)).to.equal(true);
    const sc = await cqes(a, acq, 1);
    expect(sc.map((c) => [c.type, c.error, c.msn])).to.deep.equal([[CqeT.SEND_MSN, false, 1]]);
  });

  it("RDMA WRITE (across pages, 20 KiB) by B's rkey, then RDMA READ it back into another range of A", async () => {
    const data = pattern(20_000, 3);
    A.write(0, data);
    a.postSend(qa, { op: WOp.RDMA_WRITE, id: 2, sges: [A.sge(0, 20_000)], remote: { va: B.va + 5, rkey: B.key } });
    a.postSend(qa, { op: WOp.RDMA_READ, id: 3, sges: [A.sge(24_000, 20_000)], remote: { va: B.va + 5, rkey: B.key } });
    const sc = await cqes(a, acq, 2);
    expect(sc.map((c) => [c.error, c.msn])).to.deep.equal([
      [false, 2],
      [false, 3],
    ]);
    expect(B.read(5, 20_000).equals(data)).to.equal(true);
    expect(A.read(24_000, 20_000).equals(data)).to.equal(true);
  });

  it("a large WRITE goes out of A's guest memory and B's socket reads it straight into the MR; a large READ_RESP goes out of B's MR into A's accepted socket; every loan is back", async () => {
    // 192 KiB: lent by A (>= LEND_MIN_BYTES), and B (the worker: it dialled, so its socket reads
    // where the parser asks) reads most of the body straight into the frame buffer (>= IN_PLACE_MIN).
    const n = 192 * 1024;
    expect(n)
      .to.be.at.least(LEND_MIN_BYTES)
      .and.at.least(2 * IN_PLACE_MIN);
    const A2 = await a.createMr({ key: 0x901, pages: n / PAGE, flags: ALL });
    const B2 = await b.createMr({ key: 0xa02, pages: n / PAGE, flags: ALL });
    const data = pattern(n, 9);
    A2.write(0, data);
    B2.write(0, Buffer.alloc(n));
    const lend = sinon.spy(lentViews, 'lendViews');
    const inPlace = sinon.spy(FrameParser.prototype, 'filledInPlace');
    try {
      a.postSend(qa, {
        op: WOp.RDMA_WRITE,
        id: 21,
        sges: [A2.sge(0, 16_384), A2.sge(16_384, n - 16_384)],
        remote: { va: B2.va, rkey: B2.key },
      });
      const sc = await cqes(a, acq, 1);
      expect(sc[0]!.error).to.equal(false);
      // Lent twice: by A (its payload written from guest memory) and by B (the MR's range, placed as it arrives).
      expect(lend.callCount, 'the payload was lent by A and placed by B, never copied').to.equal(2);
      expect(inPlace.callCount, 'B read part of the body in place, into its MR').to.be.at.least(1);
      expect(B2.read(0, n).equals(data)).to.equal(true);
      expect(lentViews.mappingsOnLoan(), 'no view still on loan').to.equal(0);
      // And back by READ: B answers out of its MR itself.
      A2.write(0, Buffer.alloc(n));
      inPlace.resetHistory();
      a.postSend(qa, { op: WOp.RDMA_READ, id: 22, sges: [A2.sge(0, n)], remote: { va: B2.va, rkey: B2.key } });
      const rc = await cqes(a, acq, 1);
      expect(rc[0]!.error).to.equal(false);
      expect(lend.callCount, 'the READ_RESP was lent by B').to.equal(3);
      // A is the manager: B's link reached it through its listener, re-wrapped so it reads in place too.
      expect(inPlace.callCount, 'A read part of the READ_RESP in place').to.be.at.least(1);
      expect(A2.read(0, n).equals(data)).to.equal(true);
      expect(lentViews.mappingsOnLoan(), 'no view still on loan').to.equal(0);
    } finally {
      lend.restore();
      inPlace.restore();
    }
  });

  it('back-to-back large WRITEs: once one ended in place, the next is read head first and its body goes straight into the MR (nothing through the read buffer)', async () => {
    // Larger than the socket's 256 KiB read buffer: even when a whole WRITE is queued before B reads,
    // its rest is read in place, so each one ends in place and the next is read head first.
    const n = 512 * 1024;
    const A3 = await a.createMr({ key: 0xb03, pages: n / PAGE, flags: ALL });
    const B3 = await b.createMr({ key: 0xc04, pages: n / PAGE, flags: ALL });
    const push = sinon.spy(FrameParser.prototype, 'push');
    const inPlace = sinon.spy(FrameParser.prototype, 'filledInPlace');
    const pushed = (): number => push.args.reduce((t, [chunk]) => t + chunk.length, 0);
    const readInPlace = (): number => inPlace.args.reduce((t, [k]) => t + k, 0);
    try {
      for (let i = 0; i < 3; i++) {
        const data = pattern(n, 20 + i);
        A3.write(0, data);
        push.resetHistory();
        inPlace.resetHistory();
        a.postSend(qa, { op: WOp.RDMA_WRITE, id: 30 + i, sges: [A3.sge(0, n)], remote: { va: B3.va, rkey: B3.key } });
        const sc = await cqes(a, acq, 1);
        expect(sc[0]!.error).to.equal(false);
        expect(B3.read(0, n).equals(data), `WRITE ${i}`).to.equal(true);
        // The first may arrive partly in the read buffer (copied from there); the later ones are read
        // head first (header + ionic header: 92 bytes) and then in place to their last byte. What else
        // went through push() is A's ACK (92 bytes) and, rarely, a heartbeat.
        if (i > 0) {
          expect(readInPlace(), `WRITE ${i}: read in place`).to.equal(n);
          expect(pushed(), `WRITE ${i}: bytes through the read buffer`).to.be.below(1024);
        }
      }
    } finally {
      push.restore();
      inPlace.restore();
    }
  });

  it("atomics: fetch-and-add and compare-and-swap on B's memory return the old value to A", async () => {
    B.write(64, Buffer.from('0100000000000000', 'hex'));
    a.postSend(qa, {
      op: WOp.ATOMIC_FA,
      id: 4,
      remote: { va: B.va + 64, rkey: B.key },
      atomic: { swapAdd: 41n, local: A.sge(200, 8) },
    });
    a.postSend(qa, {
      op: WOp.ATOMIC_CS,
      id: 5,
      remote: { va: B.va + 64, rkey: B.key },
      atomic: { swapAdd: 7n, compare: 42n, local: A.sge(208, 8) },
    });
    const sc = await cqes(a, acq, 2);
    expect(sc.every((c) => !c.error)).to.equal(true);
    expect(A.read(200, 8).readBigUInt64LE(0)).to.equal(1n);
    expect(A.read(208, 8).readBigUInt64LE(0)).to.equal(42n);
    expect(B.read(64, 8).readBigUInt64LE(0)).to.equal(7n);
  });

  it('receiver not ready: a SEND is held on B until a receive is posted, and the WRITE behind it waits with it', async () => {
    A.write(300, Buffer.from('held send'));
    A.write(400, Buffer.from('after it'));
    a.postSend(qa, { op: WOp.SEND, id: 6, sges: [A.sge(300, 9)] });
    a.postSend(qa, { op: WOp.RDMA_WRITE, id: 7, sges: [A.sge(400, 8)], remote: { va: B.va + 9000, rkey: B.key } });
    await until(() => (b.rig.device.backend as MeshBackend).dataPath!.stats.held === 2, 'two messages held on B');
    expect(B.read(9000, 8).equals(Buffer.from('after it'))).to.equal(false);
    expect(a.drain(acq)).to.deep.equal([]);
    b.postRecv(qb, { id: 0x77, sges: [B.sge(8000, 64)] });
    const rc = await cqes(b, bcq, 1);
    expect(rc[0]!.statusLength).to.equal(9);
    expect(B.read(8000, 9).toString()).to.equal('held send');
    const sc = await cqes(a, acq, 2);
    expect(sc.every((c) => !c.error)).to.equal(true);
    expect(B.read(9000, 8).toString()).to.equal('after it');
  });

  it('a SEND nobody receives fails with RNR_RETRY_EXCEEDED after the RNR deadline; the requester goes to ERR', async () => {
    const [qa2] = await crossPair(21, 31);
    a.postSend(qa2, { op: WOp.SEND, id: 8, sges: [A.sge(0, 16)] });
    const sc = await cqes(a, acq, 1);
    expect(sc[0]!.error).to.equal(true);
    expect(sc[0]!.statusLength).to.equal(IonicStatus.RNR_RETRY_EXCEEDED);
    expect(a.qpState(qa2)).to.equal(QpS.ERR);
    expect((b.rig.device.backend as MeshBackend).dataPath!.stats.held).to.equal(0);
  });

  it('inbound pressure: a held SEND fails at once with RNR_RETRY_EXCEEDED instead of waiting out its deadline', async () => {
    const [qa5] = await crossPair(25, 35);
    a.postSend(qa5, { op: WOp.SEND, id: 13, sges: [A.sge(0, 16)] });
    await until(() => (b.rig.device.backend as MeshBackend).dataPath!.stats.held === 1, 'the SEND held on B');
    worker.emit('pressure', 500);
    // Let go within the event itself, not at the deadline.
    expect((b.rig.device.backend as MeshBackend).dataPath!.stats.held).to.equal(0);
    const sc = await cqes(a, acq, 1);
    expect([sc[0]!.error, sc[0]!.statusLength]).to.deep.equal([true, IonicStatus.RNR_RETRY_EXCEEDED]);
  });

  it('a QP destroyed right after an unsignaled WRITE: the WRITE still reaches the peer', async () => {
    const [qa6] = await crossPair(26, 36);
    A.write(600, Buffer.from('last words'));
    a.postSend(qa6, {
      op: WOp.RDMA_WRITE,
      id: 14,
      signaled: false,
      sges: [A.sge(600, 10)],
      remote: { va: B.va + 30_000, rkey: B.key },
    });
    await a.ok(AOp.DESTROY_QP, idBody(qa6.id));
    await until(() => B.read(30_000, 10).toString() === 'last words', 'the WRITE landed on B');
    expect((a.rig.device.backend as MeshBackend).dataPath!.stats.pending).to.equal(0);
  });

  it('a peer may name memory only by rkey: key 0 is refused (REMOTE_ACC), and nothing of B changes', async () => {
    const [qa3] = await crossPair(22, 32);
    const before = B.read(0, PAGE);
    A.write(0, Buffer.alloc(64, 0xee));
    a.postSend(qa3, { op: WOp.RDMA_WRITE, id: 9, sges: [A.sge(0, 64)], remote: { va: B.at(0), rkey: 0 } });
    const sc = await cqes(a, acq, 1);
    expect([sc[0]!.error, sc[0]!.statusLength]).to.deep.equal([true, IonicStatus.REMOTE_ACC]);
    expect(B.read(0, PAGE).equals(before)).to.equal(true);
  });

  it('MODIFY_QP of a connected QP to a GID no node owns fails; an AH to one is created (and is local)', async () => {
    const q = await a.createQp(23, QpT.RC, { sqCq: acq, rqCq: acq });
    await a.ok(
      AOp.MODIFY_QP,
      modifyQpBody({
        id: q.id,
        mask: Mask.STATE | Mask.PKEY_INDEX | Mask.PORT | Mask.ACCESS_FLAGS,
        state: QpS.INIT,
        access: 0,
      }),
    );
    const tpl = headerTemplate({ sip: v4(IP_A), dip: v4('10.9.0.77') });
    const r = await a.admin(
      AOp.MODIFY_QP,
      modifyQpBody({
        id: q.id,
        mask: Mask.STATE | Mask.AV | Mask.PATH_MTU | Mask.DEST_QPN,
        state: QpS.RTR,
        qkeyDest: 5,
        pmtu: 10,
        ahId: q.id,
        hdrLen: tpl.length,
        hdrDma: placeTemplate(a.g, tpl),
      }),
    );
    expect(r.error).to.equal(true);
    expect(a.qpState(q)).to.equal(QpS.INIT);
    const ah = await a.admin(AOp.CREATE_AH, createAhBody({ id: 9, dma: placeTemplate(a.g, tpl), length: tpl.length }));
    expect(ah.error).to.equal(false);
  });

  it('UD across nodes: the datagram arrives with its GRH on B (Q_Key checked there); the sender completes at once', async () => {
    const ua = await a.createQp(40, QpT.UD, { sqCq: acq, rqCq: acq });
    const ub = await b.createQp(41, QpT.UD, { sqCq: bcq, rqCq: bcq });
    await a.readyUd(ua, 0x1234);
    await b.readyUd(ub, 0x1234);
    await a.createAh(3, { sip: v4(IP_A), dip: v4(IP_B) });
    b.postRecv(ub, { id: 0x55, sges: [B.sge(12_000, 40 + 100)] });
    A.write(500, pattern(100, 9));
    a.postSend(ua, { op: WOp.SEND, id: 10, sges: [A.sge(500, 100)], ud: { ah: 3, qpn: ub.id, qkey: 0x1234 } });
    // A wrong Q_Key is dropped on B: no receive consumed.
    a.postSend(ua, { op: WOp.SEND, id: 11, sges: [A.sge(500, 100)], ud: { ah: 3, qpn: ub.id, qkey: 0x9999 } });
    const sc = await cqes(a, acq, 2);
    expect(sc.every((c) => !c.error && c.type === CqeT.SEND_NPG)).to.equal(true);
    const rc = await cqes(b, bcq, 1);
    expect(rc[0]!.statusLength).to.equal(140);
    expect(rc[0]!.srcQpn).to.equal(ua.id);
    expect(B.read(12_040, 100).equals(pattern(100, 9))).to.equal(true);
    await new Promise((r) => setTimeout(r, 100));
    expect(b.drain(bcq)).to.deep.equal([]);
  });

  it('GIDs learned from transmitted frames: ARP sender, IPv4 and IPv6 sources, link-local from the MAC', () => {
    const mac = Buffer.from('02aabbccddee', 'hex');
    const arp = Buffer.concat([
      Buffer.alloc(6, 0xff),
      mac,
      Buffer.from('0806', 'hex'),
      Buffer.from('0001080006040001', 'hex'),
      mac,
      v4('10.1.2.3'),
      Buffer.alloc(6),
      v4('10.1.2.4'),
    ]);
    const out: Buffer[] = [];
    gidsFromFrame(arp, out);
    expect(out.map((g) => g.toString('hex'))).to.deep.equal([
      linkLocalGid(mac).toString('hex'),
      ipv4Gid(v4('10.1.2.3')).toString('hex'),
    ]);
    expect(linkLocalGid(mac).toString('hex')).to.equal('fe80000000000000' + '00aabbfffeccddee');
    out.length = 0;
    gidsFromFrame(Buffer.alloc(10), out);
    expect(out).to.deep.equal([]);
  });

  it('a lost peer: requests to a node that vanished complete with RETRY_EXCEEDED after the deadline, while other traffic goes on', async () => {
    const [qa4] = await crossPair(24, 34);
    // Two QPs of A's own guest, talking to each other while the request to the lost peer waits.
    const l1 = await a.createQp(27, QpT.RC, { sqCq: acq, rqCq: acq });
    const l2 = await a.createQp(28, QpT.RC, { sqCq: acq, rqCq: acq });
    await a.connect(l1, l2.id, { tpl: { sip: v4(IP_A), dip: v4(IP_A) } });
    await a.connect(l2, l1.id, { tpl: { sip: v4(IP_A), dip: v4(IP_A) } });
    a.drain(acq);
    // Mid-transfer: B holds the SEND (no receive posted), then B's server goes away without answering.
    a.postSend(qa4, { op: WOp.SEND, id: 12, sges: [A.sge(0, 8)] });
    await until(() => (b.rig.device.backend as MeshBackend).dataPath!.stats.held === 1, 'the SEND held on B');
    await worker.close();
    expect((a.rig.device.backend as MeshBackend).dataPath!.stats.pending).to.equal(1);
    A.write(700, Buffer.from('local traffic'));
    a.postRecv(l2, { id: 0x42, sges: [A.sge(800, 64)] });
    a.postSend(l1, { op: WOp.SEND, id: 15, sges: [A.sge(700, 13)] });
    const local = await cqes(a, acq, 2);
    expect(local.every((c) => !c.error && (c.qid === l1.id || c.qid === l2.id))).to.equal(true);
    expect(A.read(800, 13).toString()).to.equal('local traffic');
    const sc = await cqes(a, acq, 1);
    expect([sc[0]!.qid, sc[0]!.error, sc[0]!.statusLength]).to.deep.equal([qa4.id, true, IonicStatus.RETRY_EXCEEDED]);
  });
});
