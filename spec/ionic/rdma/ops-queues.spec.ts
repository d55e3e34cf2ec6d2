// Data-path operations beyond RC through the live loopback path: completion
// queue room, SRQ, UC, privileged (kernel) QPs with the DMA key, UD and GSI;
// exact CQEs (docs/driver-contract.md, ionic RDMA R4.6/R4.7) and arena snapshots.
// Fixture: spec/support/ionic/rdma-ops-fixture.ts.

import { expect } from 'chai';
import { PAGE } from '../../support/ionic/regs';
import { AOp, Mask, QpF, QpS, QpT, ROp, WOp, WSt } from '../../support/ionic/rdma-regs';
import { modifyQpBody } from '../../support/ionic/rdma-cmds';
import { Cq, Qp, SendWr, Srq, v4, v6 } from '../../support/ionic/rdma-verbs';
import {
  A,
  B,
  b,
  expectCqes,
  expectOnly,
  fresh,
  GSI_QKEY,
  msn,
  npg,
  pattern,
  R,
  ranges,
  rcq,
  recv,
  recvErr,
  S,
  scq,
  snapshot,
  UD_QKEY,
  useOpsGuest,
  v,
} from '../../support/ionic/rdma-ops-fixture';

describe('ionic rdma: data-path operations through the live path: CQ room, SRQ, UC, privileged QPs, UD and GSI', function () {
  this.timeout(20000);
  useOpsGuest();

  describe('completion queue room', () => {
    let small: Cq;
    let p: Qp;
    let q: Qp;
    before(async () => {
      small = await v.createCq(302, 3);
      p = await v.createQp(30, QpT.RC, { sqCq: small, rqCq: rcq });
      q = await v.createQp(31, QpT.RC, { sqCq: small, rqCq: rcq });
      await v.connectPair(p, q);
    });

    it("a WQE whose CQE would find the CQ full waits for the host's ring-0 doorbell instead of losing the completion", async () => {
      snapshot();
      for (let i = 0; i < 10; i++)
        v.postSend(p, {
          op: WOp.RDMA_WRITE,
          id: i,
          inline: Buffer.from([i + 1]),
          remote: { va: B.va + 3 * PAGE + i, rkey: B.key },
        });
      await v.settle();
      // 8 slots, 7 usable (one is the hole).
      expectOnly(ranges(B, 3 * PAGE, 7));
      const first = v.drain(small); // rings ring 0 with the new read position
      expect(first.map(S)).to.deep.equal([1, 2, 3, 4, 5, 6, 7].map((n) => msn(p, n)));
      await v.settle();
      expect(v.drain(small).map(S)).to.deep.equal([8, 9, 10].map((n) => msn(p, n)));
      expect([...B.read(3 * PAGE, 10)]).to.deep.equal([1, 2, 3, 4, 5, 6, 7, 8, 9, 10]);
      expectOnly(ranges(B, 3 * PAGE, 10));
    });
  });

  // -------------------------------------------------------------------------------------------

  describe('SRQ', () => {
    let own: Cq;
    let s: Qp;
    let t: Qp;
    let srq: Srq;
    before(async () => {
      own = await v.createCq(303);
      srq = await v.createSrq();
      s = await v.createQp(24, QpT.RC, { sqCq: own, srq });
      t = await v.createQp(25, QpT.RC, { sqCq: scq, rqCq: rcq });
      await v.connectPair(s, t);
    });

    it("a SEND to a QP on an SRQ consumes the SRQ's receive; the RECV CQE names the QP", async () => {
      snapshot();
      v.postRecv(srq, { id: 0xc1, sges: [B.sge(0, 32)] });
      v.postSend(t, { op: WOp.SEND_IMM, id: 0x88, inline: Buffer.from('via srq'), imm: 0x55 });
      await v.settle();
      expect(B.read(0, 7).toString()).to.equal('via srq');
      expectOnly(ranges(B, 0, 7));
      expect(v.drain(own).map(R)).to.deep.equal([recv(s, 7, 25, ROp.SEND_IMM, 0x55, 0xc1)]);
      expectCqes([msn(t, 1)], []);
    });
  });

  // -------------------------------------------------------------------------------------------

  describe('UC', () => {
    let u: Qp;
    let w: Qp;
    before(async () => {
      u = await v.createQp(32, QpT.UC, { sqCq: scq, rqCq: rcq });
      w = await v.createQp(33, QpT.UC, { sqCq: scq, rqCq: rcq });
      await v.connectPair(u, w);
    });
    beforeEach(async () => fresh(u, w));

    it('SEND and RDMA_WRITE_IMM between UC QPs (MSN completions, RECV CQEs)', async () => {
      snapshot();
      v.postRecv(w, { id: 0xd1, sges: [B.sge(0, 32)] });
      v.postRecv(w, { id: 0xd2, sges: [] });
      v.postSend(u, { op: WOp.SEND, id: 0x89, inline: Buffer.from('uc send') });
      v.postSend(u, {
        op: WOp.RDMA_WRITE_IMM,
        id: 0x8a,
        inline: Buffer.from('uc write'),
        imm: 9,
        remote: { va: B.va + 64, rkey: B.key },
      });
      await v.settle();
      expect(B.read(0, 7).toString()).to.equal('uc send');
      expect(B.read(64, 8).toString()).to.equal('uc write');
      expectOnly([...ranges(B, 0, 7), ...ranges(B, 64, 8)]);
      expectCqes(
        [msn(u, 1), msn(u, 2)],
        [recv(w, 7, 32, ROp.SEND, 0, 0xd1), recv(w, 8, 32, ROp.RDMA_WRITE_IMM, 9, 0xd2)],
      );
    });

    it('no ACKs: a SEND with no receive, a bad rkey and a dead destination all complete the requester OK, and nothing lands', async () => {
      snapshot();
      v.postSend(u, { op: WOp.SEND, id: 0x8d, inline: Buffer.from('dropped') }); // w has no receive: dropped, no RNR
      v.postSend(u, {
        op: WOp.RDMA_WRITE,
        id: 0x8e,
        inline: Buffer.from('bad rkey'),
        remote: { va: B.va, rkey: B.key ^ 0x80 },
      });
      await v.settle();
      expectOnly([]);
      expectCqes([msn(u, 1), msn(u, 2)], []);
      expect(v.qpState(u)).to.equal(QpS.RTS);
      await v.toErr(w);
      v.drainAll();
      v.postSend(u, {
        op: WOp.RDMA_WRITE,
        id: 0x8f,
        inline: Buffer.from('to nobody'),
        remote: { va: B.va, rkey: B.key },
      });
      await v.settle();
      expectOnly([]);
      expectCqes([msn(u, 3)], []);
      await v.reset(w);
    });

    it('RDMA READ and atomics are not UC operations: LOCAL_QP_OPER and the requester goes to ERR', async () => {
      snapshot();
      v.postSend(u, { op: WOp.RDMA_READ, id: 0x90, sges: [A.sge(0, 8)], remote: { va: B.va, rkey: B.key } });
      await v.settle();
      expectOnly([]);
      expectCqes([msn(u, 1, WSt.LOCAL_QP_OPER)], []);
      expect(v.qpState(u)).to.equal(QpS.ERR);
    });
  });

  // -------------------------------------------------------------------------------------------

  describe('privileged (kernel) QPs: the DMA key', () => {
    let k1: Qp;
    let k2: Qp;
    before(async () => {
      k1 = await v.createQp(34, QpT.RC, { sqCq: scq, rqCq: rcq, flags: QpF.PRIVILEGED });
      k2 = await v.createQp(35, QpT.RC, { sqCq: scq, rqCq: rcq, flags: QpF.PRIVILEGED | QpF.REMOTE_PRIVILEGED });
      await v.connectPair(k1, k2);
    });
    beforeEach(async () => fresh(k1, k2));

    it('lkey 0 gathers from bus addresses; rkey 0 writes a bus address on a REMOTE_PRIVILEGED responder', async () => {
      const [src, dst] = v.pages(2, true);
      v.g.mem(src!, 64).set(pattern(64, 50));
      snapshot();
      v.postSend(k1, {
        op: WOp.RDMA_WRITE,
        id: 0x8b,
        sges: [
          { va: src!, len: 40, lkey: 0 },
          { va: src! + 40, len: 24, lkey: 0 },
        ],
        remote: { va: dst! + 100, rkey: 0 },
      });
      await v.settle();
      expect(v.g.mem(dst! + 100, 64).equals(pattern(64, 50))).to.equal(true);
      expectOnly([[dst! + 100, 64]]);
      expectCqes([msn(k1, 1)], []);
    });

    it('rkey 0 towards a privileged responder without REMOTE_PRIVILEGED: REMOTE_ACC', async () => {
      const [dst] = v.pages(1);
      snapshot();
      v.postSend(k2, {
        op: WOp.RDMA_WRITE,
        id: 0x8c,
        sges: [{ va: A.at(0), len: 8, lkey: 0 }],
        remote: { va: dst!, rkey: 0 },
      });
      await v.settle();
      expectCqes([msn(k2, 1, WSt.REMOTE_ACC)], []);
      expectOnly([]);
      expect(v.qpState(k2)).to.equal(QpS.ERR);
    });
  });

  // -------------------------------------------------------------------------------------------

  describe('UD and GSI', () => {
    let x: Qp;
    let y: Qp;
    let gsi: Qp;
    const SMAC = Buffer.from('02a1b2c3d4e5', 'hex');
    const SIP6 = v6('fe80:0:0:0:0:0:0:1');
    const DIP6 = v6('2001:db8:0:0:0:0:0:2');

    before(async () => {
      x = await v.createQp(20, QpT.UD, { sqCq: scq, rqCq: rcq });
      y = await v.createQp(21, QpT.UD, { sqCq: scq, rqCq: rcq });
      await v.readyUd(x, UD_QKEY);
      await v.readyUd(y, UD_QKEY);
      gsi = await v.createQp(1, QpT.UD, { sqCq: scq, rqCq: rcq, flags: QpF.PRIVILEGED });
      await v.readyUd(gsi, GSI_QKEY);
      await v.createAh(4, { sip: v4('10.1.2.3'), dip: v4('10.9.8.7'), ttl: 33, tos: 0x10, smac: SMAC });
      await v.createAh(6, { ipv6: true, sip: SIP6, dip: DIP6, ttl: 7, tos: 0x20, flow: 0x12345, smac: SMAC });
      await v.createAh(7, { sip: v4('10.1.2.3'), dip: v4('10.9.8.7'), vlan: 0x6005, smac: SMAC });
    });
    beforeEach(async () => fresh(x, y, gsi));

    it('IPv4: 20 zero bytes then the IPv4 header (lengths, TTL, TOS, checksum, addresses), then the payload', async () => {
      A.write(0, pattern(100, 60));
      snapshot();
      v.postRecv(y, { id: 0xe1, sges: [B.sge(0, 40 + 256)] });
      v.postSend(x, {
        op: WOp.SEND_IMM,
        id: 0x8d,
        idHi: 0x12345678,
        imm: 0xfeedface,
        sges: [A.sge(0, 60), A.sge(60, 40)],
        ud: { ah: 4, qpn: 21, qkey: UD_QKEY },
      });
      await v.settle();
      const h = B.read(0, 40);
      expect(h.subarray(0, 20).equals(Buffer.alloc(20))).to.equal(true);
      const ip = h.subarray(20);
      expect([ip[0], ip[1], ip.readUInt16BE(2), ip.readUInt16BE(4), ip.readUInt16BE(6), ip[8], ip[9]]).to.deep.equal([
        0x45,
        0x10,
        20 + 8 + 12 + 8 + 100 + 4,
        0,
        0x4000,
        33,
        17,
      ]);
      let sum = 0;
      for (let i = 0; i < 20; i += 2) sum += ip.readUInt16BE(i);
      while (sum > 0xffff) sum = (sum & 0xffff) + (sum >>> 16);
      expect(sum, 'IPv4 header checksum').to.equal(0xffff);
      expect([...ip.subarray(12, 20)]).to.deep.equal([10, 1, 2, 3, 10, 9, 8, 7]);
      expect(B.read(40, 100).equals(pattern(100, 60))).to.equal(true);
      expectOnly(ranges(B, 0, 140));
      const s = v.drain(scq);
      expect(s.map(S)).to.deep.equal([npg(x, 0x8d)]);
      expect(s[0]!.wqeIdHi >>> 0).to.equal(0x12345678);
      const r = v.drain(rcq);
      expect(r.map(R)).to.deep.equal([recv(y, 140, 20, ROp.SEND_IMM, 0xfeedface, 0xe1)]);
      expect([r[0]!.ipv4, r[0]!.vlan, r[0]!.vlanTag, r[0]!.srcMac.toString('hex')]).to.deep.equal([
        true,
        false,
        0,
        SMAC.toString('hex'),
      ]);
    });

    it('IPv6: the 40-byte IPv6 header (version, class, flow, payload length, next header, hop limit, GIDs)', async () => {
      A.write(0, pattern(33, 61));
      snapshot();
      v.postRecv(y, { id: 0xe2, sges: [B.sge(PAGE, 40 + 256)] });
      v.postSend(x, { op: WOp.SEND, id: 0x8e, sges: [A.sge(0, 33)], ud: { ah: 6, qpn: 21, qkey: UD_QKEY } });
      await v.settle();
      const h = B.read(PAGE, 40);
      expect([h.readUInt32BE(0) >>> 0, h.readUInt16BE(4), h[6], h[7]]).to.deep.equal([
        ((6 << 28) | (0x20 << 20) | 0x12345) >>> 0,
        8 + 12 + 8 + 33 + 4,
        17,
        7,
      ]);
      expect(h.subarray(8, 24).equals(SIP6)).to.equal(true);
      expect(h.subarray(24, 40).equals(DIP6)).to.equal(true);
      expect(B.read(PAGE + 40, 33).equals(pattern(33, 61))).to.equal(true);
      expectOnly(ranges(B, PAGE, 73));
      expect(v.drain(scq).map(S)).to.deep.equal([npg(x, 0x8e)]);
      const r = v.drain(rcq);
      expect(r.map(R)).to.deep.equal([recv(y, 73, 20, ROp.SEND, 0, 0xe2)]);
      expect([r[0]!.ipv4, r[0]!.vlan]).to.deep.equal([false, false]);
    });

    it('a VLAN template: the RECV CQE has the VLAN bit and the full TCI', async () => {
      snapshot();
      v.postRecv(y, { id: 0xe3, sges: [B.sge(0, 64)] });
      v.postSend(x, { op: WOp.SEND, id: 0x8f, inline: Buffer.from('tagged'), ud: { ah: 7, qpn: 21, qkey: UD_QKEY } });
      await v.settle();
      expect(B.read(40, 6).toString()).to.equal('tagged');
      expectOnly(ranges(B, 0, 46));
      expect(v.drain(scq).map(S)).to.deep.equal([npg(x, 0x8f)]);
      const r = v.drain(rcq);
      expect(r.map(R)).to.deep.equal([recv(y, 46, 20, ROp.SEND, 0, 0xe3)]);
      expect([r[0]!.ipv4, r[0]!.vlan, r[0]!.vlanTag]).to.deep.equal([true, true, 0x6005]);
    });

    it("a controlled Q_Key (bit 31) in the WQE means the sending QP's own; a wrong Q_Key or a non-UD target drops (the sender completes)", async () => {
      snapshot();
      v.postRecv(y, { id: 0xe4, sges: [B.sge(0, 64)] });
      v.postRecv(b, { id: 0xe5, sges: [B.sge(100, 64)] });
      v.postSend(x, { op: WOp.SEND, id: 0x90, inline: Buffer.from('wrong'), ud: { ah: 4, qpn: 21, qkey: 0x22 } });
      v.postSend(x, { op: WOp.SEND, id: 0x91, inline: Buffer.from('to rc'), ud: { ah: 4, qpn: b.id, qkey: UD_QKEY } });
      v.postSend(x, { op: WOp.SEND, id: 0x92, inline: Buffer.from('nobody'), ud: { ah: 4, qpn: 4000, qkey: UD_QKEY } });
      v.postSend(x, { op: WOp.SEND, id: 0x93, inline: Buffer.from('mine'), ud: { ah: 4, qpn: 21, qkey: 0x80000000 } });
      await v.settle();
      expect(B.read(40, 4).toString()).to.equal('mine');
      expectOnly(ranges(B, 0, 44));
      expectCqes([npg(x, 0x90), npg(x, 0x91), npg(x, 0x92), npg(x, 0x93)], [recv(y, 44, 20, ROp.SEND, 0, 0xe4)]);
    });

    it('GSI (QP1, privileged): a MAD with two lkey-0 SGEs and dest_qkey 0x80000000 reaches QP1 (GRH + 256 bytes)', async () => {
      const [hdr, data, rx] = v.pages(3, true);
      v.g.mem(hdr!, 24).set(pattern(24, 70));
      v.g.mem(data!, 232).set(pattern(232, 71));
      snapshot();
      v.postRecv(gsi, { id: 0xe6, sges: [{ va: rx!, len: 40 + 256, lkey: 0 }] });
      v.postSend(gsi, {
        op: WOp.SEND,
        id: 0x94,
        sges: [
          { va: hdr!, len: 24, lkey: 0 },
          { va: data!, len: 232, lkey: 0 },
        ],
        ud: { ah: 4, qpn: 1, qkey: 0x80000000 },
      });
      await v.settle();
      expect(v.g.mem(rx! + 40, 256).equals(Buffer.concat([pattern(24, 70), pattern(232, 71)]))).to.equal(true);
      expect(v.g.mem(rx! + 20, 1)[0]).to.equal(0x45);
      expectOnly([[rx!, 296]]);
      expect(v.drain(scq).map(S)).to.deep.equal([npg(gsi, 0x94)]);
      const r = v.drain(rcq);
      expect(r.map(R)).to.deep.equal([recv(gsi, 296, 1, ROp.SEND, 0, 0xe6)]);
      expect(r[0]!.ipv4).to.equal(true);
    });

    it('a UD receive too small: the sender completes OK, the receiver gets RECV LOCAL_LEN and stays RTS', async () => {
      snapshot();
      v.postRecv(y, { id: 0xe7, sges: [B.sge(0, 40 + 4)] });
      v.postSend(x, { op: WOp.SEND, id: 0x95, inline: Buffer.from('too long'), ud: { ah: 4, qpn: 21, qkey: UD_QKEY } });
      await v.settle();
      expectOnly(ranges(B, 0, 44));
      expectCqes([npg(x, 0x95)], [recvErr(y, WSt.LOCAL_LEN, 20, ROp.SEND, 0, 0xe7)]);
      expect(v.qpState(y)).to.equal(QpS.RTS);
    });

    const udErrors: [string, () => SendWr, number][] = [
      [
        'a bad lkey: LOCAL_PROT',
        () => ({
          op: WOp.SEND,
          id: 0x96,
          sges: [{ ...A.sge(0, 8), lkey: 0x55501 }],
          ud: { ah: 4, qpn: 21, qkey: UD_QKEY },
        }),
        WSt.LOCAL_PROT,
      ],
      [
        'lkey 0 on a user UD QP: LOCAL_PROT',
        () => ({
          op: WOp.SEND,
          id: 0x97,
          sges: [{ va: A.at(0), len: 8, lkey: 0 }],
          ud: { ah: 4, qpn: 21, qkey: UD_QKEY },
        }),
        WSt.LOCAL_PROT,
      ],
      [
        'an unknown AH: LOCAL_QP_OPER',
        () => ({ op: WOp.SEND, id: 0x98, inline: Buffer.from('x'), ud: { ah: 99, qpn: 21, qkey: UD_QKEY } }),
        WSt.LOCAL_QP_OPER,
      ],
      [
        'an RDMA_WRITE on a UD QP: LOCAL_QP_OPER',
        () => ({ op: WOp.RDMA_WRITE, id: 0x99, sges: [A.sge(0, 8)], remote: { va: B.va, rkey: B.key } }),
        WSt.LOCAL_QP_OPER,
      ],
      ['a LOCAL_INV on a UD QP: LOCAL_QP_OPER', () => ({ op: WOp.LOCAL_INV, id: 0x9a, imm: B.key }), WSt.LOCAL_QP_OPER],
    ];
    for (const [what, wr, st] of udErrors) {
      it(`UD send with ${what} (NPG with the wqe_id); nothing delivered`, async () => {
        v.postRecv(x, { id: 0xe8, sges: [A.sge(3 * PAGE, 64)] });
        v.postRecv(y, { id: 0xe9, sges: [B.sge(0, 64)] });
        await v.settle();
        snapshot();
        const w = wr();
        v.postSend(x, w);
        await v.settle();
        expect(v.drain(scq).map(S)).to.deep.equal([npg(x, w.id!, st)]);
        // A datagram QP's send error stops only its SQ (SQE): its own receive stays posted, y's is left alone.
        expect(v.qpState(x)).to.equal(QpS.SQE);
        expect(v.drain(rcq).map(R)).to.deep.equal([]);
        expectOnly([]);
        // SQE -> RTS (what the MAD layer does) and the SQ runs again.
        await v.ok(
          AOp.MODIFY_QP,
          modifyQpBody({ id: x.id, mask: Mask.STATE | Mask.CUR_STATE, state: QpS.RTS, curState: QpS.SQE }),
          'SQE -> RTS',
        );
        v.postSend(x, { op: WOp.SEND, id: 0x9b, inline: Buffer.from('again'), ud: { ah: 4, qpn: 21, qkey: UD_QKEY } });
        await v.settle();
        expect(v.drain(scq).map(S)).to.deep.equal([npg(x, 0x9b)]);
        expect(v.drain(rcq).map((c) => [c.qid, c.error, c.statusLength, c.wqeIdLo])).to.deep.equal([
          [y.id, false, 40 + 5, 0xe9],
        ]);
      });
    }
  });
});
