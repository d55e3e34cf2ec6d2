// Device commands the device must refuse, and the doorbell rules of the
// device-command registers: a doorbell of 0 is a clean, not a command, and a
// doorbell of 1 without a new command re-executes it (the driver's EAGAIN retry).

import { expect } from 'chai';
import { IonicGuest, command } from '../support/ionic/guest';
import { Bar0, LifId, Op, QF, QT, St } from '../support/ionic/regs';
import { Rig } from '../support/ionic/rig';

describe('ionic: device command refusals and doorbell rules', () => {
  let rig: Rig;
  let g: IonicGuest;
  let ring: number;
  let cq: number;

  before(async () => {
    rig = await Rig.start();
    g = await rig.probed();
    ring = g.alloc(64 * 16);
    cq = g.alloc(64 * 16);
  });
  after(async () => rig.close());
  afterEach(() => expect(g.violations).to.deep.equal([]));

  it('answers unknown opcodes with EOPCODE (2) on the devcmd path and on the AdminQ', async () => {
    for (const op of [6, 7, 9, 15, 26, 33, 38, 42, 60, 80, 99, 128, 200, 252, 255]) {
      expect((await g.devCmd(command(op))).status, `devcmd opcode ${op}`).to.equal(St.EOPCODE);
      expect((await g.adminCmd(command(op))).status, `adminq opcode ${op}`).to.equal(St.EOPCODE);
    }
  });

  it('knows the RDMA bootstrap commands 50-53 (RDMA is advertised; EOPCODE without it: spec/ionic/rdma/bootstrap.spec.ts)', async () => {
    for (const op of [Op.RDMA_RESET_LIF, Op.RDMA_CREATE_EQ, Op.RDMA_CREATE_CQ, Op.RDMA_CREATE_ADMINQ]) {
      // All-zero fields: RESET succeeds; the creates are refused for their fields, not as unknown opcodes.
      for (const [path, st] of [
        ['adminq', (await g.adminCmd(command(op))).status],
        ['devcmd', (await g.devCmd(command(op))).status],
      ] as const) {
        if (op === Op.RDMA_RESET_LIF) expect(st, `${path} opcode ${op}`).to.equal(St.SUCCESS);
        else expect(st, `${path} opcode ${op}`).to.not.be.oneOf([St.SUCCESS, St.EOPCODE]);
      }
    }
  });

  it('refuses Q_INIT of an unknown queue type with EQTYPE (6)', async () => {
    for (const type of [4, 5, 15, 255]) {
      const r = await g.qInit({ type, index: 0, ringLog2: 6, ring, cq });
      expect(r.status, `type ${type}`).to.equal(St.EQTYPE);
    }
  });

  it("refuses Q_INIT with an index past the LIF's queue count with EQID (5)", async () => {
    const cases: Array<[number, number]> = [
      [QT.TXQ, 16],
      [QT.RXQ, 16],
      [QT.TXQ, 0xffffffff],
      [QT.ADMINQ, 1],
      [QT.NOTIFYQ, 1],
    ];
    for (const [type, index] of cases) {
      const r = await g.qInit({ type, index, ringLog2: 6, ring, cq });
      expect(r.status, `type ${type} index ${index}`).to.equal(St.EQID);
    }
    expect(rig.device.lif.txqs.length).to.equal(16);
  });

  it('refuses ring_size outside 2..15 with EINVAL (14), and accepts the bounds', async () => {
    for (const ringLog2 of [0, 1, 16, 17, 255]) {
      const r = await g.qInit({ type: QT.TXQ, index: 3, ringLog2, ring, cq });
      expect(r.status, `ring_size ${ringLog2}`).to.equal(St.EINVAL);
    }
    expect((await g.qInit({ type: QT.TXQ, index: 3, ringLog2: 2, ring, cq })).status).to.equal(St.SUCCESS);
    expect((await g.qInit({ type: QT.TXQ, index: 3, ringLog2: 6, ring, cq })).status).to.equal(St.SUCCESS);
  });

  it('refuses an interrupt index past the 32 vectors with EINVAL (14) when IRQ is asked for', async () => {
    for (const intr of [32, 33, 0x7ff, 0xffff]) {
      const r = await g.qInit({ type: QT.RXQ, index: 2, intr, flags: QF.IRQ | QF.SG, ringLog2: 6, ring, cq });
      expect(r.status, `intr_index ${intr}`).to.equal(St.EINVAL);
    }
    expect(
      (await g.qInit({ type: QT.RXQ, index: 2, intr: 31, flags: QF.IRQ | QF.SG, ringLog2: 6, ring, cq })).status,
    ).to.equal(St.SUCCESS);
  });

  it('refuses a data queue without a completion ring (cq_ring_base 0) with EINVAL', async () => {
    expect((await g.qInit({ type: QT.TXQ, index: 4, ringLog2: 6, ring, cq: 0 })).status).to.equal(St.EINVAL);
    expect((await g.qInit({ type: QT.TXQ, index: 4, ringLog2: 6, ring: 0, cq })).status).to.equal(St.EINVAL);
  });

  it('answers Q_CONTROL for a queue never created and RX_FILTER_DEL of an unknown id with ENOENT (7)', async () => {
    expect(await g.qControl(QT.TXQ, 9, 1)).to.equal(St.ENOENT);
    expect(await g.qControl(QT.RXQ, 15, 1)).to.equal(St.ENOENT);
    expect(await g.delFilter(0x7777)).to.equal(St.ENOENT);
  });

  it('does nothing on a doorbell write of 0, even with a command in the registers', async () => {
    const c = command(Op.LIF_IDENTIFY);
    c[2] = 1;
    g.bar0Write(Bar0.CMD, c);
    g.bar0Write(Bar0.DATA, Buffer.alloc(64, 0x3c));
    g.bar0Write32(Bar0.DONE, 0);
    const before = rig.device.counters.devCmds;
    g.bar0Write32(Bar0.DB, 0);
    expect(await g.bar0Read32(Bar0.DONE)).to.equal(0);
    expect((await g.bar0Read(Bar0.DATA, 64)).equals(Buffer.alloc(64, 0x3c))).to.equal(true);
    expect(rig.device.counters.devCmds).to.equal(before);
    g.bar0Write(Bar0.CMD, Buffer.alloc(64));
  });

  it('re-executes the command on doorbell 1 without a new command (EAGAIN retry)', async () => {
    const c = command(Op.LIF_IDENTIFY);
    c[2] = 1;
    const first = await g.devCmd(c, { clean: false, readData: true });
    expect(first.status).to.equal(0);
    const runs = rig.device.commandCounts.get(Op.LIF_IDENTIFY)!;
    // The driver: done = 0, sleep, doorbell = 1 again; the command bytes are still there.
    g.bar0Write(Bar0.DATA, Buffer.alloc(Bar0.DATA_LEN, 0x77));
    g.bar0Write32(Bar0.DONE, 0);
    g.bar0Write32(Bar0.DB, 1);
    expect(await g.bar0Read32(Bar0.DONE)).to.equal(1);
    expect((await g.bar0Read(Bar0.COMP, 2)).equals(Buffer.from([0, 1]))).to.equal(true);
    const again = await g.bar0Read(Bar0.DATA, Bar0.DATA_LEN);
    expect(again.equals(first.data!)).to.equal(true);
    expect(again.readUInt32LE(LifId.qcount_rxq)).to.equal(16);
    expect(rig.device.commandCounts.get(Op.LIF_IDENTIFY)).to.equal(runs + 1);
    g.bar0Write32(Bar0.DB, 0);
    g.bar0Write(Bar0.CMD, Buffer.alloc(64));
  });

  it('keeps working after the refusals: the AdminQ and a TX/RX queue pair come up', async () => {
    await g.open(1);
    expect(g.rxPosted(0)).to.equal(63);
    expect((await g.adminCmd(command(Op.NOP))).status).to.equal(St.SUCCESS);
  });
});
