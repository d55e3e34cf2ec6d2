// The data path as kernel ULPs drive it (nvme-rdma / nvmet-rdma, seen in the
// VM rig): privileged QPs with lkey 0 and bus addresses, fast registration of
// each I/O's pages where the consumer bumps the key *before* posting (so the
// REG_MR WQE's imm_data_key already carries the new tag), the target's RDMA
// READ/WRITE through that rkey, and SEND with invalidate ending the mapping.

import { expect } from 'chai';
import { DeviceCounter } from '../../lib/rdma/counters';
import { PAGE } from '../support/ionic/regs';
import { pageList } from '../support/ionic/rdma-cmds';
import { Cq, Qp, VerbsGuest } from '../support/ionic/rdma-verbs';
import { CqeT, MrF, QpF, QpS, QpT, ROp, WOp, WSt } from '../support/ionic/rdma-regs';

const FR_INDEX = 77;
const key = (tag: number): number => ((FR_INDEX << 8) | (tag & 0xff)) >>> 0;
const ACCESS = MrF.LOCAL_WRITE | MrF.REMOTE_WRITE | MrF.REMOTE_READ;

describe('ionic rdma: kernel ULP usage (fast registration, SEND_INV, lkey 0)', () => {
  let v: VerbsGuest;
  let cq: Cq;
  let host: Qp;
  let target: Qp;
  let io: number[];
  let list: number;

  before(async () => {
    v = await VerbsGuest.boot();
    cq = await v.createCq(220, 8);
    host = await v.createQp(60, QpT.RC, { sqCq: cq, flags: QpF.PRIVILEGED });
    target = await v.createQp(61, QpT.RC, { sqCq: cq, flags: QpF.PRIVILEGED });
    await v.connectPair(host, target);
    await v.createFrmr(key(1));
    io = v.pages(3, true); // an I/O buffer of three scattered pages
    list = pageList(v.g, io);
  });
  after(async () => v.close());
  afterEach(() => expect(v.g.violations).to.deep.equal([]));

  function regMr(tag: number, id: number): void {
    // As ionic_prep_reg builds it after ib_update_fast_reg_key: imm_data_key is the new key.
    v.postSend(host, {
      op: WOp.REG_MR,
      id,
      imm: key(tag),
      numSge: tag,
      regMr: { va: io[0]! + 0x200, length: 3 * PAGE - 0x200, offset: 0x200, dma: list, mapCount: 3, flags: ACCESS },
    });
  }

  it('REG_MR naming the new key registers it; the target WRITEs and READs through it; SEND_INV ends it', async () => {
    const reg0 = v.rig.device.rdma!.counters.get(DeviceCounter.reg_mr_wqes);
    const inv0 = v.rig.device.rdma!.counters.get(DeviceCounter.remote_invalidates);
    regMr(2, 0x501);
    await v.settle();
    expect(v.drain(cq).map((c) => [c.type, c.qid, c.error, c.wqeIdLo])).to.deep.equal([
      [CqeT.SEND_NPG, host.id, false, 0x501],
    ]);
    expect(v.rm.mrs.get(FR_INDEX)).to.include({ key: key(2), valid: true, length: 3 * PAGE - 0x200 });

    // The target's data: a bus address with lkey 0 (privileged QP); it lands across the first two pages.
    const src = v.pages(1)[0]!;
    const data = Buffer.from(Array.from({ length: 256 }, (_, i) => i));
    data.copy(v.g.mem(src, 256));
    const rva = io[0]! + PAGE - 128; // 128 bytes before the end of page 0
    v.postSend(target, {
      op: WOp.RDMA_WRITE,
      id: 0x601,
      sges: [{ va: src, len: 256, lkey: 0 }],
      remote: { va: rva, rkey: key(2) },
    });
    await v.settle();
    expect(v.g.mem(io[0]! + PAGE - 128, 128).equals(data.subarray(0, 128))).to.equal(true);
    expect(v.g.mem(io[1]!, 128).equals(data.subarray(128))).to.equal(true);

    const back = v.pages(1)[0]!;
    v.postSend(target, {
      op: WOp.RDMA_READ,
      id: 0x602,
      sges: [{ va: back, len: 256, lkey: 0 }],
      remote: { va: rva, rkey: key(2) },
    });
    await v.settle();
    expect(v.g.mem(back, 256).equals(data)).to.equal(true);

    // The response: SEND with invalidate of the host's rkey, into a receive posted with lkey 0.
    const resp = v.pages(1)[0]!;
    v.postRecv(host, { id: 0x701, sges: [{ va: resp, len: 64, lkey: 0 }] });
    v.postSend(target, { op: WOp.SEND_INV, id: 0x603, imm: key(2), sges: [{ va: src, len: 16, lkey: 0 }] });
    await v.settle();
    const cqes = v.drain(cq);
    expect(cqes.filter((c) => c.qid === target.id).map((c) => [c.type, c.error])).to.deep.equal([
      [CqeT.SEND_MSN, false],
      [CqeT.SEND_MSN, false],
      [CqeT.SEND_MSN, false],
    ]);
    expect(
      cqes.filter((c) => c.qid === host.id).map((c) => [c.type, c.error, c.recvOp, c.statusLength, c.wqeIdLo]),
    ).to.deep.equal([[CqeT.RECV, false, ROp.SEND_INV, 16, 0x701]]);
    expect(v.rm.mrs.get(FR_INDEX)!.valid).to.equal(false);
    expect(v.rig.device.rdma!.counters.get(DeviceCounter.reg_mr_wqes) - reg0).to.equal(1);
    expect(v.rig.device.rdma!.counters.get(DeviceCounter.remote_invalidates) - inv0).to.equal(1);
  });

  it('the next I/O registers the next tag; the old rkey is refused with REMOTE_ACC', async () => {
    regMr(3, 0x502);
    await v.settle();
    expect(v.drain(cq).map((c) => [c.qid, c.error])).to.deep.equal([[host.id, false]]);
    const before = Buffer.from(v.g.mem(io[2]!, 64));
    const src = v.pages(1)[0]!;
    v.postSend(target, {
      op: WOp.RDMA_WRITE,
      id: 0x604,
      sges: [{ va: src, len: 64, lkey: 0 }],
      remote: { va: io[2]!, rkey: key(2) },
    });
    await v.settle();
    expect(v.drain(cq).map((c) => [c.qid, c.error, c.statusLength])).to.deep.equal([[target.id, true, WSt.REMOTE_ACC]]);
    expect(v.g.mem(io[2]!, 64).equals(before)).to.equal(true);
    expect(v.qpState(target)).to.equal(QpS.ERR);
    // The responder NAKed with its own error: it goes to ERR too, as an HCA's does.
    expect(v.qpState(host)).to.equal(QpS.ERR);
  });

  it('REG_MR over a registration still valid is refused (MEM_MGMT_OPER) and leaves it as it was', async () => {
    // The host QP went to ERR with the last test's refused WRITE: back to RTS first (registrations outlive it).
    await v.reset(host);
    regMr(4, 0x503);
    await v.settle();
    expect(v.drain(cq).map((c) => [c.type, c.qid, c.error, c.statusLength, c.wqeIdLo])).to.deep.equal([
      [CqeT.SEND_NPG, host.id, true, WSt.MEM_MGMT_OPER, 0x503],
    ]);
    expect(v.rm.mrs.get(FR_INDEX)).to.include({ key: key(3), valid: true });
  });
});
