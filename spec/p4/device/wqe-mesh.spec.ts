// The P4 engine on send WQEs whose destination is on another node (the TCP
// mesh, two servers in one process with their own devices and guest models):
// a WRITE the program passes crosses the mesh as usual; one it turns into an
// fp8 add is refused (REMOTE_ACC: an rkey belonging to another node is never
// an extern operand) and nothing lands on the peer; one it drops never
// leaves (RETRY_EXCEEDED on RC, nothing on the peer).

import { expect } from 'chai';
import * as path from 'path';
import { attachP4, P4Attachment, p4FromCli } from '../../../lib/p4/device/attach';
import { runCommand } from '../../../lib/p4/engine/commands';
import { NumFormat } from '../../../lib/p4/device/fp8';
import { cqesOf as cqes, meshGuests, MeshGuests } from '../../mesh/helpers';
import { MrF, QpT, WOp, WSt } from '../../support/ionic/rdma-regs';
import { Cq, GuestMr, Qp, v4, VerbsGuest } from '../../support/ionic/rdma-verbs';

const ROOT = path.join(__dirname, '..', '..', '..', '..');
const PROGRAM = path.join(ROOT, 'fixtures', 'p4', 'rdma_fp8.json');
const ALL = MrF.LOCAL_WRITE | MrF.REMOTE_WRITE | MrF.REMOTE_READ | MrF.REMOTE_ATOMIC;
const IP_A = '10.9.1.1';
const IP_B = '10.9.1.2';

describe('p4 on RDMA send WQEs to another node (TCP mesh)', function () {
  this.timeout(60_000);
  let pair: MeshGuests | undefined;
  let a: VerbsGuest;
  let b: VerbsGuest;
  let acq: Cq;
  let bcq: Cq;
  let A: GuestMr;
  let B: GuestMr;
  let att: P4Attachment;
  let next = 20;

  before(async () => {
    pair = await meshGuests(IP_A, IP_B);
    ({ a, b } = pair);
    acq = await a.createCq(40);
    bcq = await b.createCq(40);
    A = await a.createMr({ key: 0x501, pages: 2, flags: ALL });
    B = await b.createMr({ key: 0x702, pages: 2, flags: ALL });
    const setup = p4FromCli({ program: PROGRAM });
    if (!setup.ok) throw new Error(setup.error);
    att = attachP4(a.rig.device, setup.value!.engine);
    const e = att.engine!;
    for (const line of [
      `table_add wqe_ops fp8_add 4&&&0xff 8&&&0xffffffff 0&&&0 0&&&0 => ${NumFormat.E4M3} 0 10`,
      'table_add wqe_ops drop_wqe 4&&&0xff 3&&&0xffffffff 0&&&0 0&&&0 => 10',
    ]) {
      const r = runCommand(e, line);
      if (!r.ok) throw new Error(r.error);
    }
  });

  after(async () => {
    await pair?.close();
  });

  /** A fresh RC pair across the mesh (an error leaves a QP in ERR). */
  async function crossPair(): Promise<[Qp, Qp]> {
    const qpA = await a.createQp(next, QpT.RC, { sqCq: acq, rqCq: acq });
    const qpB = await b.createQp(next + 1, QpT.RC, { sqCq: bcq, rqCq: bcq });
    next += 2;
    await a.connect(qpA, qpB.id, { tpl: { sip: v4(IP_A), dip: v4(IP_B) } });
    await b.connect(qpB, qpA.id, { tpl: { sip: v4(IP_B), dip: v4(IP_A) } });
    return [qpA, qpB];
  }

  it('a WRITE the program passes crosses the mesh as usual', async () => {
    const [qa] = await crossPair();
    A.write(0, Buffer.from('sixteen bytes!!!'));
    const seen = att.wqe.stats.passed;
    a.postSend(qa, { op: WOp.RDMA_WRITE, id: 1, sges: [A.sge(0, 16)], remote: { va: B.va + 100, rkey: B.key } });
    const sc = await cqes(a, acq, 1);
    expect(sc.map((c) => [c.error, c.statusLength])).to.deep.equal([[false, 0]]);
    expect(B.read(100, 16).toString()).to.equal('sixteen bytes!!!');
    expect(att.wqe.stats.passed).to.equal(seen + 1);
  });

  it('a WRITE turned into an fp8 add whose rkey belongs to another node: REMOTE_ACC, nothing lands there', async () => {
    const [qa] = await crossPair();
    A.write(0, Buffer.from([0x38, 0x38, 0x38, 0x38, 0x38, 0x38, 0x38, 0x38]));
    B.write(200, Buffer.alloc(8, 0x11));
    a.postSend(qa, { op: WOp.RDMA_WRITE, id: 2, sges: [A.sge(0, 8)], remote: { va: B.va + 200, rkey: B.key } });
    const sc = await cqes(a, acq, 1);
    expect(sc.map((c) => [c.error, c.statusLength])).to.deep.equal([[true, WSt.REMOTE_ACC]]);
    await new Promise((r) => setTimeout(r, 50));
    expect(B.read(200, 8).equals(Buffer.alloc(8, 0x11))).to.equal(true);
    a.drainAll();
  });

  it('a dropped WRITE never leaves: RETRY_EXCEEDED, nothing on the peer', async () => {
    const [qa] = await crossPair();
    A.write(0, Buffer.from('abc'));
    B.write(300, Buffer.alloc(3));
    a.postSend(qa, { op: WOp.RDMA_WRITE, id: 3, sges: [A.sge(0, 3)], remote: { va: B.va + 300, rkey: B.key } });
    const sc = await cqes(a, acq, 1);
    expect(sc.map((c) => [c.error, c.statusLength])).to.deep.equal([[true, WSt.RETRY_EXCEEDED]]);
    await new Promise((r) => setTimeout(r, 50));
    expect(B.read(300, 3).equals(Buffer.alloc(3))).to.equal(true);
    a.drainAll();
  });
});
