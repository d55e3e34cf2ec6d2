// The last-resort guard (lib/guard.ts): a bug of ours, planted here with a
// sinon stub that throws, must cost only the unit of work it hit (a QP goes
// to ERR, a vfio-user command fails with EIO, a host frame is dropped) plus
// an error line with the stack; the device, the session and every other QP
// go on. Without the guard each of these throws ended the process.

import { expect } from 'chai';
import * as sinon from 'sinon';
import { guardStats } from '../lib/guard';
import type { Logger } from '../lib/log';
import { Errno } from '../protocol/constants';
import { MrF, QpS, QpT, WOp } from './support/ionic/rdma-regs';
import { Cq, GuestMr, Qp, VerbsGuest } from './support/ionic/rdma-verbs';

const ALL = MrF.LOCAL_WRITE | MrF.REMOTE_WRITE | MrF.REMOTE_READ | MrF.REMOTE_ATOMIC;

/** A logger that keeps its error lines. */
function errorLog(): Logger & { errors: string[] } {
  const errors: string[] = [];
  return {
    errors,
    error: (m: string) => {
      errors.push(m);
    },
    warn() {},
    info() {},
    debug() {},
    debugEnabled: false,
  };
}

describe('the last-resort guard: a bug costs its unit of work, never the process', function () {
  this.timeout(60_000);
  let v: VerbsGuest;
  let log: ReturnType<typeof errorLog>;
  let cq: Cq;
  let mr: GuestMr;
  let a: Qp;
  let b: Qp;
  let c: Qp;
  let d: Qp;

  before(async () => {
    log = errorLog();
    v = await VerbsGuest.boot({ log, arenaPages: 16 });
    cq = await v.createCq(40);
    mr = await v.createMr({ key: 0x701, pages: 2, flags: ALL });
    a = await v.createQp(12, QpT.RC, { sqCq: cq, rqCq: cq });
    b = await v.createQp(13, QpT.RC, { sqCq: cq, rqCq: cq });
    c = await v.createQp(14, QpT.RC, { sqCq: cq, rqCq: cq });
    d = await v.createQp(15, QpT.RC, { sqCq: cq, rqCq: cq });
    await v.connectPair(a, b);
    await v.connectPair(c, d);
  });
  after(async () => v.close());
  afterEach(() => sinon.restore());

  it('a throw while a QP runs: that QP goes to ERR (its work flushed), one error line with the stack; another QP pair still works', async () => {
    const engine = v.rig.device.rdma!;
    const before = guardStats.contained;
    const memory = sinon.stub(engine, 'memory');
    memory.onFirstCall().throws(new Error('planted bug in memory'));
    memory.callThrough();
    v.postRecv(b, { id: 1, sges: [mr.sge(0, 64)] });
    v.postSend(a, { op: WOp.SEND, id: 2, sges: [mr.sge(100, 16)] });
    await v.settle();
    expect(guardStats.contained).to.equal(before + 1);
    expect(
      log.errors.some((l) => /internal error in RDMA data path \(QP 1[23]\).*planted bug in memory/s.test(l)),
    ).to.equal(true);
    // The QP whose visit threw is in ERR; the device itself is fine.
    expect([v.qpState(a), v.qpState(b)]).to.include(QpS.ERR);
    v.drain(cq);
    sinon.restore();
    mr.write(200, Buffer.from('after the bug'));
    v.postRecv(d, { id: 3, sges: [mr.sge(400, 64)] });
    v.postSend(c, { op: WOp.SEND, id: 4, sges: [mr.sge(200, 13)] });
    await v.settle();
    const done = v.drain(cq);
    expect(done.map((e) => [e.qid, e.error])).to.deep.include.members([
      [c.id, false],
      [d.id, false],
    ]);
    expect(mr.read(400, 13).toString()).to.equal('after the bug');
  });

  it("a throw in a vfio-user handler (the device's DMA_MAP hook): that command fails with EIO, the session goes on", async () => {
    const before = guardStats.contained;
    sinon.stub(v.rig.device.pci, 'dmaMapped').throws(new Error('planted bug in dmaMapped'));
    const err = await v.g.client.dmaMap(0x7000_0000, 0x1000, -1).then(
      () => null,
      (e: unknown) => e,
    );
    expect(err, 'DMA_MAP must fail').to.be.an('error');
    expect((err as { errno?: number }).errno).to.equal(Errno.EIO);
    expect(guardStats.contained).to.equal(before + 1);
    expect(
      log.errors.some((l) => /internal error in vfio-user DMA_MAP handler.*planted bug in dmaMapped/s.test(l)),
    ).to.equal(true);
    sinon.restore();
    // Still attached, still answering: config space reads the ionic vendor id.
    const id = await v.g.client.regionRead(7, 0, 2);
    expect(id.readUInt16LE(0)).to.equal(0x1dd8);
  });
});
