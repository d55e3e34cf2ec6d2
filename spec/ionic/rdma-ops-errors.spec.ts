// RC data-path errors through the live loopback path: each error status the
// path reports, with the exact CQEs (docs/driver-contract.md, ionic RDMA R4.6/R4.7), the QP states, RNR,
// the flush hints, and an arena snapshot proving that nothing outside the
// operation's target was written. Fixture: spec/support/ionic/rdma-ops-fixture.ts.

import { expect } from 'chai';
import { PAGE } from '../support/ionic/regs';
import { MrF, QpS, QpT, ROp, WOp, WSt } from '../support/ionic/rdma-regs';
import { Qp, SendWr } from '../support/ionic/rdma-verbs';
import {
  A,
  a,
  ALL,
  B,
  b,
  bWord,
  expectCqes,
  expectOnly,
  fresh,
  LWO,
  msn,
  NOAT,
  npg,
  P2,
  pattern,
  R,
  ranges,
  rcq,
  recv,
  recvErr,
  RO,
  rqFlush,
  S,
  scq,
  snapshot,
  sqFlush,
  useOpsGuest,
  v,
} from '../support/ionic/rdma-ops-fixture';
import type { Range, Row } from '../support/ionic/rdma-ops-fixture';

/** The EQE type of a QP event, and the codes an HCA raises for a responder error. */
const EQE_QP = 1;
const QP_ERR = 8;
const ERR_REQUEST = 9;
const ERR_ACCESS = 10;
function responderEvent(requesterStatus: number): number {
  if (requesterStatus === WSt.REMOTE_ACC) return ERR_ACCESS;
  if (requesterStatus === WSt.REMOTE_INV_REQ) return ERR_REQUEST;
  return QP_ERR;
}

describe('ionic rdma: data-path operations through the live path: RC errors, RNR, flush hints', function () {
  this.timeout(20000);
  useOpsGuest();

  describe('RC errors: the requester completes with the status, goes to ERR, and the rest of its SQ is not run', () => {
    /** A WRITE that would succeed, queued behind the failing WQE: the host flushes it, the device must not run it. */
    const TRAIL = 3 * PAGE;
    let c: Qp;
    let d: Qp;

    before(async () => {
      c = await v.createQp(12, QpT.RC, { sqCq: scq, rqCq: rcq });
      d = await v.createQp(13, QpT.RC, { sqCq: scq, rqCq: rcq });
      await v.connectPair(c, d, { access: 0 });
    });
    beforeEach(async () => fresh(a, b));

    interface Case {
      what: string;
      /** Receives on the responder, source data; before the snapshot. */
      setup?: () => void;
      bad: () => SendWr;
      /** The requester's error CQE (MSN or NPG). */
      send: () => Row;
      /** Responder RECV CQEs (before the requester's RQ flush hint). */
      recv?: () => Row[];
      allowed?: () => Range[];
      responderErr?: boolean;
      req?: () => Qp;
    }

    async function fail(k: Case): Promise<void> {
      const q = k.req ? k.req() : a;
      const peer = q === a ? b : d;
      if (q !== a) await fresh(q, peer);
      // A receive on the requester: its RQ flush hint must follow the error.
      v.postRecv(q, { id: 0xa0, sges: [A.sge(3 * PAGE + 512, 64)] });
      k.setup?.();
      await v.settle();
      snapshot();
      const eventsBefore = v.r.events.length;
      v.postSend(q, k.bad(), false);
      v.postSend(q, {
        op: WOp.RDMA_WRITE,
        id: 0x7a11,
        sges: [A.sge(0, 16)],
        remote: { va: B.va + TRAIL, rkey: B.key },
      });
      await v.settle();
      expect(v.drain(scq).map(S), 'send CQEs').to.deep.equal([k.send()]);
      expect(v.drain(rcq).map(R), 'recv CQEs').to.deep.equal([...(k.recv?.() ?? []), rqFlush(q)]);
      expectOnly(k.allowed?.() ?? []);
      expect(v.qpState(q), 'requester state').to.equal(QpS.ERR);
      expect(v.qpState(peer), 'responder state').to.equal(k.responderErr ? QpS.ERR : QpS.RTS);
      // A responder error no receive CQE reports is the responder QP's asynchronous event, as an HCA raises it.
      v.r.service();
      const events = v.r.events
        .slice(eventsBefore)
        .filter((e) => e.type === EQE_QP && e.qid === peer.id)
        .map((e) => e.code);
      const reported = k.recv !== undefined;
      expect(events, 'responder QP events').to.deep.equal(
        k.responderErr && !reported ? [responderEvent(k.send()[3] as number)] : [],
      );
    }

    const cases: Case[] = [
      {
        what: 'receive too small: requester REMOTE_INV_REQ, responder RECV LOCAL_LEN (then ERR, flushing its other receive)',
        setup: () => {
          v.postRecv(b, { id: 0xb1, sges: [B.sge(0, 16)] });
          v.postRecv(b, { id: 0xb2, sges: [B.sge(100, 64)] });
        },
        bad: () => ({ op: WOp.SEND, id: 0x60, sges: [A.sge(0, 64)] }),
        send: () => msn(a, 1, WSt.REMOTE_INV_REQ),
        recv: () => [recvErr(b, WSt.LOCAL_LEN, 10, ROp.SEND, 0, 0xb1), rqFlush(b)],
        allowed: () => ranges(B, 0, 16),
        responderErr: true,
      },
      {
        what: "SEND with a bad lkey (wrong tag): LOCAL_PROT, the responder's receive not consumed",
        setup: () => v.postRecv(b, { id: 0xb3, sges: [B.sge(0, 64)] }),
        bad: () => ({ op: WOp.SEND, id: 0x61, sges: [{ ...A.sge(0, 8), lkey: A.key ^ 0x80 }] }),
        send: () => msn(a, 1, WSt.LOCAL_PROT),
      },
      {
        what: 'SEND with an lkey range past the MR end: LOCAL_PROT',
        setup: () => v.postRecv(b, { id: 0xb4, sges: [B.sge(0, 64)] }),
        bad: () => ({ op: WOp.SEND, id: 0x62, sges: [A.sge(4 * PAGE - 4, 8)] }),
        send: () => msn(a, 1, WSt.LOCAL_PROT),
      },
      {
        what: 'WRITE with an lkey range before the MR start: LOCAL_PROT',
        bad: () => ({
          op: WOp.RDMA_WRITE,
          id: 0x63,
          sges: [{ va: A.va - 1, len: 8, lkey: A.key }],
          remote: { va: B.va, rkey: B.key },
        }),
        send: () => msn(a, 1, WSt.LOCAL_PROT),
      },
      {
        what: "SEND gathering from another PD's MR: LOCAL_PROT",
        setup: () => v.postRecv(b, { id: 0xb5, sges: [B.sge(0, 64)] }),
        bad: () => ({ op: WOp.SEND, id: 0x64, sges: [P2.sge(0, 8)] }),
        send: () => msn(a, 1, WSt.LOCAL_PROT),
      },
      {
        what: 'lkey 0 from a user (non-privileged) QP: LOCAL_PROT',
        setup: () => v.postRecv(b, { id: 0xb6, sges: [B.sge(0, 64)] }),
        bad: () => ({ op: WOp.SEND, id: 0x65, sges: [{ va: A.at(0), len: 8, lkey: 0 }] }),
        send: () => msn(a, 1, WSt.LOCAL_PROT),
      },
      {
        what: 'a receive into an MR without LOCAL_WRITE: requester REMOTE_OPER, responder RECV LOCAL_PROT',
        setup: () => v.postRecv(b, { id: 0xb7, sges: [RO.sge(0, 64)] }),
        bad: () => ({ op: WOp.SEND, id: 0x66, inline: Buffer.from('hello') }),
        send: () => msn(a, 1, WSt.REMOTE_OPER),
        recv: () => [recvErr(b, WSt.LOCAL_PROT, 10, ROp.SEND, 0, 0xb7)],
        responderErr: true,
      },
      {
        what: 'a receive with lkey 0 on a user QP: requester REMOTE_OPER, responder RECV LOCAL_PROT',
        setup: () => v.postRecv(b, { id: 0xb8, sges: [{ va: B.at(0), len: 64, lkey: 0 }] }),
        bad: () => ({ op: WOp.SEND, id: 0x67, inline: Buffer.from('hello') }),
        send: () => msn(a, 1, WSt.REMOTE_OPER),
        recv: () => [recvErr(b, WSt.LOCAL_PROT, 10, ROp.SEND, 0, 0xb8)],
        responderErr: true,
      },
      {
        what: 'RDMA_READ into an MR without LOCAL_WRITE: LOCAL_PROT',
        bad: () => ({ op: WOp.RDMA_READ, id: 0x68, sges: [RO.sge(0, 16)], remote: { va: B.va, rkey: B.key } }),
        send: () => msn(a, 1, WSt.LOCAL_PROT),
      },
      {
        what: 'RDMA_READ into lkey 0 on a user QP: LOCAL_PROT',
        bad: () => ({
          op: WOp.RDMA_READ,
          id: 0x69,
          sges: [{ va: A.at(0), len: 16, lkey: 0 }],
          remote: { va: B.va, rkey: B.key },
        }),
        send: () => msn(a, 1, WSt.LOCAL_PROT),
      },
      {
        what: 'WRITE with an rkey of the wrong tag: REMOTE_ACC',
        bad: () => ({ op: WOp.RDMA_WRITE, id: 0x6a, sges: [A.sge(0, 8)], remote: { va: B.va, rkey: B.key + 1 } }),
        send: () => msn(a, 1, WSt.REMOTE_ACC),
        responderErr: true,
      },
      {
        what: 'READ with an unknown rkey index: REMOTE_ACC (a bad lkey too: the remote NAK wins)',
        bad: () => ({
          op: WOp.RDMA_READ,
          id: 0x6b,
          sges: [{ ...A.sge(0, 8), lkey: 0x3ff01 }],
          remote: { va: B.va, rkey: 0x3fe01 },
        }),
        send: () => msn(a, 1, WSt.REMOTE_ACC),
        responderErr: true,
      },
      {
        what: 'WRITE whose range wraps past 2^64: REMOTE_ACC',
        bad: () => ({
          op: WOp.RDMA_WRITE,
          id: 0x6c,
          sges: [A.sge(0, 16)],
          remote: { va: 0xfffffffffffffff8n, rkey: B.key },
        }),
        send: () => msn(a, 1, WSt.REMOTE_ACC),
        responderErr: true,
      },
      {
        what: 'WRITE past the remote MR end: REMOTE_ACC',
        bad: () => ({
          op: WOp.RDMA_WRITE,
          id: 0x6d,
          sges: [A.sge(0, 16)],
          remote: { va: B.va + B.length - 8, rkey: B.key },
        }),
        send: () => msn(a, 1, WSt.REMOTE_ACC),
        responderErr: true,
      },
      {
        what: 'READ starting before the remote MR: REMOTE_ACC',
        bad: () => ({ op: WOp.RDMA_READ, id: 0x6e, sges: [A.sge(0, 16)], remote: { va: B.va - 1, rkey: B.key } }),
        send: () => msn(a, 1, WSt.REMOTE_ACC),
        responderErr: true,
      },
      {
        what: 'WRITE to an MR without REMOTE_WRITE: REMOTE_ACC',
        bad: () => ({ op: WOp.RDMA_WRITE, id: 0x6f, sges: [A.sge(0, 8)], remote: { va: LWO.va, rkey: LWO.key } }),
        send: () => msn(a, 1, WSt.REMOTE_ACC),
        responderErr: true,
      },
      {
        what: 'READ from an MR without REMOTE_READ: REMOTE_ACC',
        bad: () => ({ op: WOp.RDMA_READ, id: 0x70, sges: [A.sge(0, 8)], remote: { va: LWO.va, rkey: LWO.key } }),
        send: () => msn(a, 1, WSt.REMOTE_ACC),
        responderErr: true,
      },
      {
        what: 'ATOMIC on an MR without REMOTE_ATOMIC: REMOTE_ACC',
        bad: () => ({
          op: WOp.ATOMIC_FA,
          id: 0x71,
          remote: { va: NOAT.va + 8, rkey: NOAT.key },
          atomic: { swapAdd: 1n, local: A.sge(8, 8) },
        }),
        send: () => msn(a, 1, WSt.REMOTE_ACC),
        responderErr: true,
      },
      {
        what: "WRITE to another PD's MR: REMOTE_ACC",
        bad: () => ({ op: WOp.RDMA_WRITE, id: 0x72, sges: [A.sge(0, 8)], remote: { va: P2.va, rkey: P2.key } }),
        send: () => msn(a, 1, WSt.REMOTE_ACC),
        responderErr: true,
      },
      {
        what: 'rkey 0 to a responder without REMOTE_PRIVILEGED: REMOTE_ACC',
        bad: () => ({ op: WOp.RDMA_WRITE, id: 0x73, sges: [A.sge(0, 8)], remote: { va: B.at(0), rkey: 0 } }),
        send: () => msn(a, 1, WSt.REMOTE_ACC),
        responderErr: true,
      },
      {
        what: 'WRITE to a responder QP without remote write access: REMOTE_ACC',
        req: () => c,
        bad: () => ({ op: WOp.RDMA_WRITE, id: 0x74, sges: [A.sge(0, 8)], remote: { va: B.va, rkey: B.key } }),
        send: () => msn(c, 1, WSt.REMOTE_ACC),
        responderErr: true,
      },
      {
        what: 'READ from a responder QP without remote read access: REMOTE_ACC',
        req: () => c,
        bad: () => ({ op: WOp.RDMA_READ, id: 0x75, sges: [A.sge(0, 8)], remote: { va: B.va, rkey: B.key } }),
        send: () => msn(c, 1, WSt.REMOTE_ACC),
        responderErr: true,
      },
      {
        what: 'ATOMIC to a responder QP without remote atomic access: REMOTE_ACC',
        req: () => c,
        bad: () => ({
          op: WOp.ATOMIC_CS,
          id: 0x76,
          remote: { va: bWord(24), rkey: B.key },
          atomic: { swapAdd: 1n, local: A.sge(8, 8) },
        }),
        send: () => msn(c, 1, WSt.REMOTE_ACC),
        responderErr: true,
      },
      {
        what: 'a misaligned ATOMIC target: REMOTE_INV_REQ',
        bad: () => ({
          op: WOp.ATOMIC_FA,
          id: 0x77,
          remote: { va: bWord(0) + 4, rkey: B.key },
          atomic: { swapAdd: 1n, local: A.sge(8, 8) },
        }),
        send: () => msn(a, 1, WSt.REMOTE_INV_REQ),
        responderErr: true,
      },
      {
        what: 'an ATOMIC whose local buffer is 4 bytes: LOCAL_LEN on an NPG CQE (the WQE is malformed)',
        bad: () => ({
          op: WOp.ATOMIC_CS,
          id: 0x78,
          remote: { va: bWord(8), rkey: B.key },
          atomic: { swapAdd: 1n, local: A.sge(8, 4) },
        }),
        send: () => npg(a, 0x78, WSt.LOCAL_LEN),
      },
      {
        what: 'an ATOMIC whose local lkey is bad: LOCAL_PROT, the remote word untouched',
        bad: () => ({
          op: WOp.ATOMIC_FA,
          id: 0x79,
          remote: { va: bWord(16), rkey: B.key },
          atomic: { swapAdd: 1n, local: { ...A.sge(8, 8), lkey: 0x12301 } },
        }),
        send: () => msn(a, 1, WSt.LOCAL_PROT),
      },
      {
        what: 'LOCAL_INV of an unknown key: MEM_MGMT_OPER (NPG)',
        bad: () => ({ op: WOp.LOCAL_INV, id: 0x7a, imm: 0x3fff01 }),
        send: () => npg(a, 0x7a, WSt.MEM_MGMT_OPER),
      },
      {
        what: 'LOCAL_INV of a user MR (not invalidatable): MEM_MGMT_OPER',
        bad: () => ({ op: WOp.LOCAL_INV, id: 0x7b, imm: B.key }),
        send: () => npg(a, 0x7b, WSt.MEM_MGMT_OPER),
      },
      {
        what: 'REG_MR of an unknown key: MEM_MGMT_OPER',
        bad: () => ({
          op: WOp.REG_MR,
          id: 0x7c,
          imm: 0x3ffe01,
          numSge: 2,
          regMr: { va: 0x1000, length: PAGE, offset: 0, dma: B.pages[0]!, mapCount: 1, flags: MrF.REMOTE_WRITE },
        }),
        send: () => npg(a, 0x7c, WSt.MEM_MGMT_OPER),
      },
      {
        what: 'REG_MR re-keying a user MR over other pages: MEM_MGMT_OPER',
        bad: () => ({
          op: WOp.REG_MR,
          id: 0x7d,
          imm: B.key,
          numSge: 9,
          regMr: { va: 0x1000, length: PAGE, offset: 0, dma: LWO.pages[0]!, mapCount: 1, flags: ALL },
        }),
        send: () => npg(a, 0x7d, WSt.MEM_MGMT_OPER),
      },
      {
        what: 'an unknown opcode (11): LOCAL_QP_OPER (NPG)',
        bad: () => ({ op: 11, id: 0x7e, sges: [A.sge(0, 8)] }),
        send: () => npg(a, 0x7e, WSt.LOCAL_QP_OPER),
      },
      {
        what: 'opcode 0xff: LOCAL_QP_OPER (NPG)',
        bad: () => ({ op: 0xff, id: 0x7f }),
        send: () => npg(a, 0x7f, WSt.LOCAL_QP_OPER),
      },
      {
        what: 'inline data longer than the stride holds: LOCAL_LEN (NPG)',
        bad: () => ({ op: WOp.SEND, id: 0x80, inline: pattern(224, 1), length: 225 }),
        send: () => npg(a, 0x80, WSt.LOCAL_LEN),
      },
      {
        what: 'a length field that disagrees with the SGEs: LOCAL_LEN (NPG)',
        bad: () => ({
          op: WOp.RDMA_WRITE,
          id: 0x81,
          sges: [A.sge(0, 8)],
          length: 9,
          remote: { va: B.va, rkey: B.key },
        }),
        send: () => npg(a, 0x81, WSt.LOCAL_LEN),
      },
      {
        what: 'more SGEs than the stride holds: LOCAL_QP_OPER (NPG)',
        bad: () => ({
          op: WOp.RDMA_WRITE,
          id: 0x82,
          sges: [A.sge(0, 8)],
          numSge: 15,
          length: 8,
          remote: { va: B.va, rkey: B.key },
        }),
        send: () => npg(a, 0x82, WSt.LOCAL_QP_OPER),
      },
      {
        what: 'INLINE on an RDMA_READ: LOCAL_QP_OPER (NPG)',
        bad: () => ({ op: WOp.RDMA_READ, id: 0x83, inline: Buffer.alloc(8), remote: { va: B.va, rkey: B.key } }),
        send: () => npg(a, 0x83, WSt.LOCAL_QP_OPER),
      },
    ];
    for (const k of cases) it(k.what, async () => fail(k));

    it('a destination QP that is not ready (RESET) or does not exist: RETRY_EXCEEDED', async () => {
      const e = await v.createQp(16, QpT.RC, { sqCq: scq, rqCq: rcq });
      await v.createQp(17, QpT.RC, { sqCq: scq, rqCq: rcq }); // left in RESET
      for (const [qp, dest] of [
        [e, 17],
        [e, 999],
      ] as const) {
        if (qp.up) await v.reset(qp, dest);
        else await v.connect(qp, dest);
        await v.settle();
        v.drainAll();
        snapshot();
        v.postSend(qp, { op: WOp.RDMA_WRITE, id: 0x84, sges: [A.sge(0, 8)], remote: { va: B.va, rkey: B.key } });
        await v.settle();
        expectCqes([msn(qp, 1, WSt.RETRY_EXCEEDED)], [], `QP ${qp.id} -> ${dest}`);
        expectOnly([]);
        expect(v.qpState(qp)).to.equal(QpS.ERR);
      }
    });
  });

  // -------------------------------------------------------------------------------------------

  describe('RNR (receive not ready)', () => {
    let r0: Qp;
    let r1: Qp;
    let r2: Qp;
    let r3: Qp;
    before(async () => {
      r0 = await v.createQp(26, QpT.RC, { sqCq: scq, rqCq: rcq });
      r1 = await v.createQp(27, QpT.RC, { sqCq: scq, rqCq: rcq });
      await v.connectPair(r0, r1, { rnrRetry: 0 });
      r2 = await v.createQp(28, QpT.RC, { sqCq: scq, rqCq: rcq });
      r3 = await v.createQp(29, QpT.RC, { sqCq: scq, rqCq: rcq });
      // min_rnr_timer code 1 = 0.01 ms on the responder; two retries.
      await v.connectPair(r2, r3, { rnrRetry: 2, rnrTimer: 1 });
    });
    beforeEach(async () => fresh(a, b, r0, r1, r2, r3));

    it('rnr_retry 0: a SEND with no receive completes RNR_RETRY_EXCEEDED at once', async () => {
      snapshot();
      v.postSend(r0, { op: WOp.SEND, id: 0x85, inline: Buffer.from('nobody') });
      await v.settle();
      expectCqes([msn(r0, 1, WSt.RNR_RETRY_EXCEEDED)], []);
      expectOnly([]);
      expect([v.qpState(r0), v.qpState(r1)]).to.deep.equal([QpS.ERR, QpS.RTS]);
    });

    it('rnr_retry 2: RNR_RETRY_EXCEEDED once the retries (after min_rnr_timer each) are spent', async () => {
      snapshot();
      v.postSend(r2, {
        op: WOp.RDMA_WRITE_IMM,
        id: 0x86,
        inline: Buffer.from('imm'),
        imm: 1,
        remote: { va: B.va, rkey: B.key },
      });
      for (let i = 0; i < 50 && v.qpState(r2) !== QpS.ERR; i++) {
        await new Promise((res) => setTimeout(res, 5));
        await v.settle();
      }
      expectCqes([msn(r2, 1, WSt.RNR_RETRY_EXCEEDED)], []);
      expectOnly([]);
    });

    it('rnr_retry 7 (forever): the SEND waits, and a receive posted later lets it complete', async () => {
      snapshot();
      v.postSend(a, { op: WOp.SEND, id: 0x87, inline: Buffer.from('late') });
      await new Promise((res) => setTimeout(res, 20));
      await v.settle();
      expectCqes([], []);
      v.postRecv(b, { id: 0xb9, sges: [B.sge(0, 8)] });
      await v.settle();
      expectCqes([msn(a, 1)], [recv(b, 4, 10, ROp.SEND, 0, 0xb9)]);
      expectOnly(ranges(B, 0, 4));
    });
  });

  // -------------------------------------------------------------------------------------------

  it('moving a QP with work in both queues to ERR posts one flush hint per queue', async () => {
    await fresh(a, b);
    v.postRecv(a, { id: 0xf1, sges: [A.sge(0, 8)] });
    v.postSend(a, { op: WOp.SEND, id: 0xf2, inline: Buffer.from('waits') }); // b has no receive: RNR, waits
    await v.settle();
    expectCqes([], []);
    await v.toErr(a);
    expectCqes([sqFlush(a)], [rqFlush(a)]);
    await v.settle();
    v.postRecv(b, { id: 0xf3, sges: [B.sge(0, 8)] });
    await v.settle();
    expectCqes([], [], 'the flushed SEND never runs');
  });
});
