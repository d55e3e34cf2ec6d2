// Hardening of the RDMA data path against what a guest can legitimately do
// at scale, or do on purpose: thousands of QPs waking at once, a registration
// whose page list is a gigabyte long, a datagram with a Q_Key it has no right
// to. Driven through the verbs guest over a real socket and memfd memory.

import { expect } from 'chai';
import { guardStats } from '../../../lib/guard';
import { RDMA_QP_COUNT } from '../../../lib/rdma/limits';
import { PAGE } from '../../support/ionic/regs';
import { AOp, CqeT, Mask, MrF, QpS, QpT, WOp, WSt } from '../../support/ionic/rdma-regs';
import { createMrBody, modifyQpBody } from '../../support/ionic/rdma-cmds';
import { v4 } from '../../support/ionic/rdma-verbs';
import { Cq, GuestMr, Qp, VerbsGuest } from '../../support/ionic/rdma-verbs';

const MR_KEY = (3 << 8) | 0x21;

describe('ionic rdma: hardening', function () {
  this.timeout(120_000);

  describe('every QP of the device in a chain of waiting senders, failing one after the other', () => {
    let v: VerbsGuest;
    let scq: Cq;
    let mr: GuestMr;
    const chain: Qp[] = [];

    before(async () => {
      v = await VerbsGuest.boot({ ramSize: 160 << 20, arenaPages: 16 });
      scq = await v.createCq(100, 13);
      mr = await v.createMr({ key: MR_KEY, pages: 2, contiguous: true, flags: MrF.LOCAL_WRITE });
      // QP 0 is reserved and 1 is the GSI QP: 2..4095 each send to the next one.
      for (let id = 2; id < RDMA_QP_COUNT; id++) {
        chain.push(await v.createQp(id, QpT.RC, { sqCq: scq, rqCq: scq, depthLog2: 1, strideLog2: 6 }));
      }
      for (let i = 0; i < chain.length; i++) await v.connect(chain[i]!, chain[(i + 1) % chain.length]!);
    });
    after(async () => v.close());

    it('4,093 senders wait (rnr_retry 7); the last QP fails and each sender fails in turn, RETRY_EXCEEDED, without recursion', async () => {
      const before = guardStats.contained;
      mr.write(0, Buffer.alloc(16, 0x44));
      const senders = chain.slice(0, -1);
      const last = chain[chain.length - 1]!;
      // Every sender's SEND meets an empty receive queue and waits (rnr_retry 7 = for ever).
      for (const qp of senders) v.postSend(qp, { op: WOp.SEND, id: qp.id, sges: [mr.sge(0, 16)] });
      await v.settle();
      expect(v.drain(scq)).to.have.length(0);
      // The last QP posts a WQE with an opcode that does not exist: the device moves it to ERR,
      // its sender fails and goes to ERR, which fails that one's sender, and so on down the chain.
      v.postRaw(last, Buffer.from([0, 0, 0, 0, 0, 0, 0, 0, 0x1f]));
      const cqes: ReturnType<VerbsGuest['drain']> = [];
      for (let i = 0; i < 200 && cqes.length < chain.length; i++) {
        await v.settle();
        cqes.push(...v.drain(scq));
      }
      expect(cqes).to.have.length(chain.length);
      const failed = cqes.filter((c) => c.qid !== last.id);
      expect(
        failed.every((c) => c.type === CqeT.SEND_MSN && c.error && c.statusLength === WSt.RETRY_EXCEEDED),
      ).to.equal(true);
      // Down the chain, in order: each sender fails after the QP it sends to.
      expect(failed.map((c) => c.qid)).to.deep.equal(senders.map((q) => q.id).reverse());
      for (const qp of chain) expect(v.qpState(qp)).to.equal(QpS.ERR);
      // Nothing was contained: this is ordinary work, not a bug caught by the guard.
      expect(guardStats.contained).to.equal(before);
    });
  });

  describe('a REG_MR whose page list is longer than one turn reads', () => {
    let v: VerbsGuest;
    let cq: Cq;
    let qp: Qp;

    before(async () => {
      v = await VerbsGuest.boot({ ramSize: 96 << 20, arenaPages: 0 });
      cq = await v.createCq(200, 6);
      qp = await v.createQp(20, QpT.RC, { sqCq: cq, rqCq: cq, flags: 0, depthLog2: 2, strideLog2: 7 });
      await v.connect(qp, qp);
      await v.createFrmr((9 << 8) | 0x01);
    });
    after(async () => v.close());

    it('registers a 2^20-page list over many turns, answering MMIO in between', async () => {
      // 2^20 pages of 4 KiB: 8 MiB of page list naming a 4 GiB MR (pages may repeat: only
      // alignment is checked at registration; every access is checked later).
      const count = 1 << 20;
      const listAt = v.g.alloc(count * 8);
      const list = v.g.mem(listAt, count * 8);
      const page = v.g.alloc(PAGE);
      for (let i = 0; i < count; i++) list.writeBigUInt64LE(BigInt(page), i * 8);
      const newKey = (9 << 8) | 0x02;
      v.postSend(qp, {
        op: WOp.REG_MR,
        id: 0x99,
        imm: (9 << 8) | 0x01,
        numSge: newKey & 0xff,
        regMr: {
          va: 0x1000_0000,
          length: count * PAGE,
          offset: 0,
          dma: listAt,
          mapCount: count,
          flags: MrF.LOCAL_WRITE,
        },
      });
      // Register reads keep being answered while the list is read (each settle is a BAR0 round trip).
      let turns = 0;
      let cqes: ReturnType<VerbsGuest['drain']> = [];
      while (cqes.length === 0 && turns < 1000) {
        await v.settle();
        turns++;
        cqes = v.drain(cq);
      }
      expect(cqes.map((c) => [c.type, c.error, c.statusLength, c.wqeIdLo])).to.deep.equal([
        [CqeT.SEND_NPG, false, 0, 0x99],
      ]);
      // A BAR0 round trip was answered while the list was still being read.
      expect(turns, 'register round trips answered during the registration').to.be.greaterThan(2);
      const mrRec = v.rm.mrs.get(9)!;
      expect(mrRec).to.include({ key: newKey, valid: true, length: count * PAGE });
    });

    it('CREATE_MR over a 2^20-page list completes over many turns; register reads are answered meanwhile', async () => {
      const count = 1 << 20;
      const page = v.g.alloc(PAGE);
      const listAt = v.g.alloc(count * 8);
      const list = v.g.mem(listAt, count * 8);
      for (let i = 0; i < count; i++) list.writeBigUInt64LE(BigInt(page), i * 8);
      let done = false;
      const cmd = v
        .admin(
          AOp.CREATE_MR,
          createMrBody({
            key: (12 << 8) | 0x05,
            va: 0x2000_0000,
            length: count * PAGE,
            flags: MrF.LOCAL_WRITE,
            mapCount: count,
            dma: listAt,
            pageSizeLog2: 12,
          }),
        )
        .then((c) => {
          done = true;
          return c;
        });
      let roundTrips = 0;
      while (!done && roundTrips < 1000) {
        await v.g.sync();
        roundTrips++;
      }
      const c = await cmd;
      expect([c.error, c.status]).to.deep.equal([false, 0]);
      expect(roundTrips, 'BAR0 round trips answered while the list was read').to.be.greaterThan(2);
      expect(v.rm.mrs.get(12)).to.include({ key: (12 << 8) | 0x05, valid: true, length: count * PAGE });
    });

    it('a CREATE_MR whose long list goes bad half way is refused and leaves the run budget as it was', async () => {
      const count = 1 << 18;
      const page = v.g.alloc(PAGE);
      const listAt = v.g.alloc(count * 8);
      const list = v.g.mem(listAt, count * 8);
      for (let i = 0; i < count; i++) list.writeBigUInt64LE(BigInt(page + (i % 2) * 2 * PAGE), i * 8);
      list.writeBigUInt64LE(BigInt(page + 1), (count - 5) * 8); // misaligned, near the end
      const used = v.rm.budget.used;
      const c = await v.admin(
        AOp.CREATE_MR,
        createMrBody({
          key: (13 << 8) | 0x05,
          va: 0x3000_0000,
          length: count * PAGE,
          flags: MrF.LOCAL_WRITE,
          mapCount: count,
          dma: listAt,
          pageSizeLog2: 12,
        }),
      );
      expect(c.error).to.equal(true);
      expect(v.rm.mrs.has(13)).to.equal(false);
      expect(v.rm.budget.used).to.equal(used);
    });
  });

  describe('a controlled Q_Key from a QP that has none', () => {
    let v: VerbsGuest;
    let cq: Cq;
    let mr: GuestMr;
    let unset: Qp;
    let keyed: Qp;
    let dest: Qp;
    // Q_Key 0 on the destination: an unset Q_Key read as 0 would match it.
    const QKEY = 0;

    before(async () => {
      v = await VerbsGuest.boot({ arenaPages: 8 });
      cq = await v.createCq(300, 6);
      mr = await v.createMr({ key: MR_KEY, pages: 2, contiguous: true, flags: MrF.LOCAL_WRITE });
      unset = await v.createQp(30, QpT.UD, { sqCq: cq, rqCq: cq });
      keyed = await v.createQp(31, QpT.UD, { sqCq: cq, rqCq: cq });
      dest = await v.createQp(32, QpT.UD, { sqCq: cq, rqCq: cq });
      // To RTS with no QKEY in any MODIFY_QP: the QP never had a Q_Key.
      for (const state of [QpS.INIT, QpS.RTR, QpS.RTS]) {
        await v.ok(
          AOp.MODIFY_QP,
          modifyQpBody({ id: unset.id, mask: Mask.STATE | (state === QpS.RTS ? Mask.SQ_PSN : 0), state, sqPsn: 0 }),
          `QP 30 to ${state}`,
        );
      }
      await v.readyUd(keyed, QKEY);
      await v.readyUd(dest, QKEY);
      await v.createAh(5, { sip: v4('10.0.0.1'), dip: v4('10.0.0.1'), ttl: 64 });
    });
    after(async () => v.close());

    it('is refused: the datagram is dropped (the sender completes, as UD does); from a QP with a Q_Key it is delivered', async () => {
      expect(v.rm.qps.get(unset.id)!.attrs.qkey).to.equal(null);
      mr.write(0, Buffer.alloc(24, 0x61));
      v.postRecv(dest, { id: 0x70, sges: [mr.sge(PAGE, 40 + 64)] });
      // The high bit asks for the sender's own Q_Key, which it does not have.
      v.postSend(unset, {
        op: WOp.SEND,
        id: 0x71,
        sges: [mr.sge(0, 24)],
        ud: { ah: 5, qpn: dest.id, qkey: 0x80000000 },
      });
      await v.settle();
      expect(v.drain(cq).map((c) => [c.type, c.qid, c.error, c.wqeIdLo])).to.deep.equal([
        [CqeT.SEND_NPG, unset.id, false, 0x71],
      ]);
      // The same datagram from a QP whose Q_Key matches the destination's lands in the posted receive.
      v.postSend(keyed, {
        op: WOp.SEND,
        id: 0x72,
        sges: [mr.sge(0, 24)],
        ud: { ah: 5, qpn: dest.id, qkey: 0x80000000 },
      });
      await v.settle();
      const c = v.drain(cq).map((x) => [x.type, x.qid, x.error, x.wqeIdLo, x.statusLength]);
      expect(c).to.deep.include.members([
        [CqeT.SEND_NPG, keyed.id, false, 0x72, 0],
        [CqeT.RECV, dest.id, false, 0x70, 40 + 24],
      ]);
    });
  });
});
