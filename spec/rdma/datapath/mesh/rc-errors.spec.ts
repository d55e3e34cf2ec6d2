// Responder errors across the mesh, both ends (two servers in this process,
// each with its guest): a remote access, length or operation error NAKs the
// request with its status, the requester's WQE completes with that status
// and its QP goes to ERR, and the responder's QP goes to ERR too, with the
// asynchronous event the ionic driver turns into IB_EVENT_QP_ACCESS_ERR or
// IB_EVENT_QP_REQ_ERR on its EQ.

import { expect } from 'chai';
import { IonicStatus } from '../../../../lib/rdma/datapath/cqe';
import { cqesOf as cqes, meshGuests, MeshGuests } from '../../../mesh/helpers';
import { CqeT, MrF, QpS, QpT, WOp } from '../../../support/ionic/rdma-regs';
import { Cq, GuestMr, Qp, v4, VerbsGuest } from '../../../support/ionic/rdma-verbs';

const IP_A = '10.9.1.1';
const IP_B = '10.9.1.2';
const EQE_QP = 1;
const ERR_REQUEST = 9;
const ERR_ACCESS = 10;

describe('rdma over the TCP mesh: responder errors end both QPs', function () {
  this.timeout(60_000);
  let pair: MeshGuests | undefined;
  let a: VerbsGuest;
  let b: VerbsGuest;
  let acq: Cq;
  let bcq: Cq;
  let A: GuestMr;
  let B: GuestMr;
  let writeOnly: GuestMr;

  before(async () => {
    pair = await meshGuests(IP_A, IP_B);
    ({ a, b } = pair);
    acq = await a.createCq(40);
    bcq = await b.createCq(40);
    A = await a.createMr({ key: 0x511, pages: 4, flags: MrF.LOCAL_WRITE | MrF.REMOTE_WRITE | MrF.REMOTE_READ });
    B = await b.createMr({ key: 0x712, pages: 4, flags: MrF.LOCAL_WRITE | MrF.REMOTE_WRITE | MrF.REMOTE_READ });
    writeOnly = await b.createMr({ key: 0x813, pages: 1, flags: MrF.LOCAL_WRITE | MrF.REMOTE_WRITE });
  });

  after(async () => {
    await pair?.close();
  });

  async function crossPair(idA: number, idB: number): Promise<[Qp, Qp]> {
    const qpA = await a.createQp(idA, QpT.RC, { sqCq: acq, rqCq: acq });
    const qpB = await b.createQp(idB, QpT.RC, { sqCq: bcq, rqCq: bcq });
    await a.connect(qpA, qpB.id, { tpl: { sip: v4(IP_A), dip: v4(IP_B) } });
    await b.connect(qpB, qpA.id, { tpl: { sip: v4(IP_B), dip: v4(IP_A) } });
    return [qpA, qpB];
  }

  /** The QP event B's guest got for `qp` (its EQ "ISR" run until it shows). */
  function eventOf(qp: Qp): Promise<{ code: number; qid: number }> {
    return b.g.waitFor(
      `a QP event for ${qp.id}`,
      () => {
        b.r.service();
        return b.r.events.find((e) => e.type === EQE_QP && e.qid === qp.id);
      },
      10_000,
    );
  }

  it('a WRITE with a wrong rkey: REMOTE_ACC on A, both QPs in ERR, ERR_ACCESS on B', async () => {
    const [qa, qb] = await crossPair(20, 30);
    const before = B.read(0, 256);
    A.write(0, Buffer.alloc(64, 0xee));
    a.postSend(qa, { op: WOp.RDMA_WRITE, id: 1, sges: [A.sge(0, 64)], remote: { va: B.va, rkey: B.key + 0x100 } });
    const sc = await cqes(a, acq, 1);
    expect([sc[0]!.type, sc[0]!.error, sc[0]!.statusLength]).to.deep.equal([
      CqeT.SEND_MSN,
      true,
      IonicStatus.REMOTE_ACC,
    ]);
    expect(a.qpState(qa)).to.equal(QpS.ERR);
    expect(b.qpState(qb)).to.equal(QpS.ERR);
    expect(await eventOf(qb)).to.deep.include({ code: ERR_ACCESS, qid: qb.id });
    expect(B.read(0, 256).equals(before)).to.equal(true);
  });

  it('a READ of an MR without remote read: REMOTE_ACC on A, both QPs in ERR, ERR_ACCESS on B', async () => {
    const [qa, qb] = await crossPair(21, 31);
    a.postSend(qa, {
      op: WOp.RDMA_READ,
      id: 2,
      sges: [A.sge(0, 64)],
      remote: { va: writeOnly.va, rkey: writeOnly.key },
    });
    const sc = await cqes(a, acq, 1);
    expect([sc[0]!.error, sc[0]!.statusLength]).to.deep.equal([true, IonicStatus.REMOTE_ACC]);
    expect(a.qpState(qa)).to.equal(QpS.ERR);
    expect(b.qpState(qb)).to.equal(QpS.ERR);
    expect(await eventOf(qb)).to.deep.include({ code: ERR_ACCESS, qid: qb.id });
  });

  it('a SEND longer than the receive: REMOTE_INV_REQ on A, both QPs in ERR, ERR_REQUEST on B (its receive flushed)', async () => {
    const [qa, qb] = await crossPair(22, 32);
    b.postRecv(qb, { id: 0x77, sges: [B.sge(0, 100)] });
    a.postSend(qa, { op: WOp.SEND, id: 3, sges: [A.sge(0, 1000)] });
    const sc = await cqes(a, acq, 1);
    expect([sc[0]!.error, sc[0]!.statusLength]).to.deep.equal([true, IonicStatus.REMOTE_INV_REQ]);
    expect(a.qpState(qa)).to.equal(QpS.ERR);
    expect(b.qpState(qb)).to.equal(QpS.ERR);
    expect(await eventOf(qb)).to.deep.include({ code: ERR_REQUEST, qid: qb.id });
    const rc = await cqes(b, bcq, 1);
    expect(rc.map((c) => [c.type, c.error])).to.deep.equal([[CqeT.RECV, true]]);
  });

  it('a good pair beside them carries on', async () => {
    const [qa, qb] = await crossPair(23, 33);
    A.write(512, Buffer.alloc(32, 0x3c));
    a.postSend(qa, { op: WOp.RDMA_WRITE, id: 4, sges: [A.sge(512, 32)], remote: { va: B.va + 512, rkey: B.key } });
    const sc = await cqes(a, acq, 1);
    expect(sc[0]!.error).to.equal(false);
    expect(B.read(512, 32).equals(Buffer.alloc(32, 0x3c))).to.equal(true);
    expect(b.qpState(qb)).to.equal(QpS.RTS);
  });
});
