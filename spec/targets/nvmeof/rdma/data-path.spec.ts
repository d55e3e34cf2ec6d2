// The NVMe-oF target behind the device (`rdmaBackend: new NvmeofBackend(target)`), driven by
// the guest model the way nvme-rdma drives it: CM MADs on QP1 through an AH
// to the target's address (REQ -> REP with a GRH from the target's GID, RTU,
// DREQ -> DREP), an RC QP per NVMe queue connected to the controller QPN the
// REP names, 64-byte command capsules by SEND from lkey-0 buffers of a
// privileged QP, data through rkeys (a plain MR, and a fast-registered one
// ended by the response's SEND with invalidate), and 16-byte responses in the
// QP's receives. Capsules and MADs are built by hand (helpers.ts, cm-mads.ts).

import { expect } from 'chai';
import { createNvmeofTarget, decodeCqe, NvmeofTarget, parseNvmeofBackend } from '../../../../lib/targets/nvmeof';
import { TARGET_QPN_BASE } from '../../../../lib/targets/nvmeof/rdma';
import { DeviceCounter } from '../../../../lib/rdma/counters';
import { until } from '../../../support/fds';
import { PAGE } from '../../../support/ionic/regs';
import { DEVICE_MAC, Rig } from '../../../support/ionic/rig';
import { pageList } from '../../../support/ionic/rdma-cmds';
import { CqeT, MrF, QpF, QpS, QpT, ROp, WOp, WSt } from '../../../support/ionic/rdma-regs';
import { Cq, Cqe, GuestMr, Qp, v4, VerbsGuest } from '../../../support/ionic/rdma-verbs';
import { ATTR, dreq, header, rejFields, repFields, req, rtu } from '../cm-mads';
import { connectData, HOSTNQN, KEYED, KEYED_INV, SC, sqe, SUBNQN } from '../helpers';
import { NvmeofBackend } from '../../../../lib/backends/nvmeof';

const GUEST = '192.168.200.2';
const TARGET = '192.168.200.1';
const TARGET_MAC = '0200c0a8c801';
const AH = 5;
const QP1_QKEY = 0x80010000;
const FR_INDEX = 90;
const frKey = (tag: number): number => ((FR_INDEX << 8) | (tag & 0xff)) >>> 0;
const DATA_ACCESS = MrF.LOCAL_WRITE | MrF.REMOTE_WRITE | MrF.REMOTE_READ;

function pattern(n: number, seed: number): Buffer {
  const b = Buffer.alloc(n);
  for (let i = 0; i < n; i++) b[i] = (i * 7 + seed) & 0xff;
  return b;
}

/** One NVMe queue as the host sees it: its RC QP, the controller QPN, both communication ids. */
interface HostQueue {
  qp: Qp;
  targetQpn: number;
  ours: number;
  theirs: number;
}

describe('nvmeof target over the device: CM on QP1, capsules on RC QPs', function () {
  this.timeout(30_000);
  let target: NvmeofTarget;
  let v: VerbsGuest;
  let cq: Cq;
  let gsi: Qp;
  let mr: GuestMr;
  /** Every CQE seen, not yet taken by a test. */
  const seen: Cqe[] = [];
  /** Receive buffers by wqe_id. */
  const recvAt = new Map<number, number>();
  let nextId = 0x1000;
  let scratch: number[];
  let scratchNext = 0;

  /** A fresh lkey-0 buffer page (bus address; the QPs are privileged, as a kernel ULP's). */
  function page(): number {
    const p = scratch[scratchNext++ % scratch.length]!;
    v.g.mem(p, PAGE).fill(0);
    return p;
  }

  async function take(pred: (c: Cqe) => boolean, what: string): Promise<Cqe> {
    let found: Cqe | undefined;
    await until(
      () => {
        seen.push(...v.drain(cq));
        const i = seen.findIndex(pred);
        if (i >= 0) found = seen.splice(i, 1)[0];
        return found !== undefined;
      },
      what,
      10_000,
    );
    return found!;
  }

  function postRecv(qp: Qp, len: number): void {
    const at = page();
    const id = nextId++;
    recvAt.set(id, at);
    v.postRecv(qp, { id, sges: [{ va: at, len, lkey: 0 }] });
  }

  /** Send a MAD from QP1 through the AH to the target; the send completes at once (a datagram). */
  async function sendMad(mad: Buffer): Promise<void> {
    const at = page();
    mad.copy(v.g.mem(at, mad.length));
    const id = nextId++;
    v.postSend(gsi, {
      op: WOp.SEND,
      id,
      sges: [
        { va: at, len: 24, lkey: 0 },
        { va: at + 24, len: mad.length - 24, lkey: 0 },
      ],
      ud: { ah: AH, qpn: 1, qkey: QP1_QKEY },
    });
    const c = await take((x) => x.qid === 1 && x.type === CqeT.SEND_NPG && x.wqeIdLo === id, 'the MAD send completion');
    expect(c.error).to.equal(false);
  }

  /** The next MAD in QP1's receives: the 40-byte GRH and the 256-byte MAD, and its CQE. */
  async function nextMad(): Promise<{ grh: Buffer; mad: Buffer; cqe: Cqe }> {
    const cqe = await take((x) => x.qid === 1 && x.type === CqeT.RECV, 'a MAD in QP1');
    expect(cqe.error, 'MAD receive error').to.equal(false);
    const at = recvAt.get(cqe.wqeIdLo)!;
    postRecv(gsi, 296);
    return { grh: Buffer.from(v.g.mem(at, 40)), mad: Buffer.from(v.g.mem(at + 40, 256)), cqe };
  }

  /** REQ for `qid` from a new RC QP, REP, the QP to RTS towards the controller QPN, RTU, receives posted. */
  async function openQueue(
    qpId: number,
    qid: number,
    o: { hsqsize?: number; hrqsize?: number; cntlid?: number; recvs?: number } = {},
  ): Promise<HostQueue> {
    const qp = await v.createQp(qpId, QpT.RC, { sqCq: cq, rqCq: cq, flags: QpF.PRIVILEGED, depthLog2: 5 });
    const theirs = 0x5000 + qpId;
    await sendMad(
      req({
        commId: theirs,
        qpn: qpId,
        qid,
        hsqsize: o.hsqsize ?? (qid === 0 ? 31 : 127),
        hrqsize: o.hrqsize ?? (qid === 0 ? 32 : 128),
        cntlid: o.cntlid ?? 0,
      }),
    );
    const { mad } = await nextMad();
    expect(header(mad).attr, 'REP').to.equal(ATTR.REP);
    const f = repFields(mad);
    expect(f.remote).to.equal(theirs);
    await v.connect(qp, f.qpn, { tpl: { sip: v4(GUEST), dip: v4(TARGET) } });
    await sendMad(rtu(theirs, f.local));
    for (let i = 0; i < (o.recvs ?? 8); i++) postRecv(qp, 64);
    return { qp, targetQpn: f.qpn, ours: f.local, theirs };
  }

  /** One command capsule by SEND; resolves to the send CQE, the response CQE and the decoded NVMe completion. */
  async function command(
    q: HostQueue,
    capsule: Buffer,
  ): Promise<{ send: Cqe; recv: Cqe; nvme: ReturnType<typeof decodeCqe> }> {
    const at = page();
    capsule.copy(v.g.mem(at, capsule.length));
    const id = nextId++;
    v.postSend(q.qp, { op: WOp.SEND, id, sges: [{ va: at, len: capsule.length, lkey: 0 }] });
    const send = await take((x) => x.qid === q.qp.id && x.type === CqeT.SEND_MSN, 'the capsule SEND completion');
    const recv = await take((x) => x.qid === q.qp.id && x.type === CqeT.RECV, 'the response capsule');
    const nvme = decodeCqe(Buffer.from(v.g.mem(recvAt.get(recv.wqeIdLo)!, 16)));
    postRecv(q.qp, 64);
    return { send, recv, nvme };
  }

  let cid = 1;
  const connectCmd = (qid: number, sqsize: number, cntlid: number, at: number): Buffer => {
    connectData(SUBNQN, HOSTNQN, cntlid).copy(v.g.mem(mr.at(at), 1024));
    return sqe({
      opcode: 0x7f,
      cid: cid++,
      nsid: 0x01,
      sgl: { addr: mr.va + at, len: 1024, key: mr.key, type: KEYED },
      cdw10: qid << 16,
      cdw11: sqsize,
      cdw12: 0,
    });
  };

  let admin: HostQueue;
  let io: HostQueue;
  let cntlid: number;

  before(async () => {
    const parsed = parseNvmeofBackend('nvmeof:size=1M,queues=2');
    if (!parsed.ok) throw new Error(parsed.error);
    target = await createNvmeofTarget(parsed.value);
    v = await VerbsGuest.boot({ rdmaBackend: new NvmeofBackend(target), arenaPages: 160 });
    cq = await v.createCq(30, 9);
    gsi = await v.createQp(1, QpT.UD, { sqCq: cq, rqCq: cq, flags: QpF.PRIVILEGED, depthLog2: 5 });
    await v.readyUd(gsi, QP1_QKEY);
    await v.createAh(AH, { sip: v4(GUEST), dip: v4(TARGET) });
    scratch = v.pages(48);
    mr = await v.createMr({ key: 0x701, pages: 16, flags: DATA_ACCESS });
    await v.createFrmr(frKey(1));
    for (let i = 0; i < 8; i++) postRecv(gsi, 296);
  });
  after(async () => {
    await v?.close();
    await target?.close();
  });

  it("CM REQ through an AH to the target's address: the REP arrives in QP1 with a GRH from the target's GID", async () => {
    const qp = await v.createQp(9, QpT.RC, { sqCq: cq, rqCq: cq, flags: QpF.PRIVILEGED });
    await sendMad(req({ commId: 0x77, qpn: 9 }));
    const { grh, mad, cqe } = await nextMad();
    expect([cqe.statusLength, cqe.srcQpn, cqe.recvOp, cqe.ipv4]).to.deep.equal([296, 1, ROp.SEND, true]);
    expect(cqe.srcMac.toString('hex')).to.equal(TARGET_MAC);
    // RoCEv2 IPv4 GRH: 20 zero bytes, then the IPv4 header from the target to the guest.
    expect(grh.subarray(0, 20).equals(Buffer.alloc(20))).to.equal(true);
    expect([grh[20], grh[29], [...grh.subarray(32, 36)].join('.'), [...grh.subarray(36, 40)].join('.')]).to.deep.equal([
      0x45,
      17,
      TARGET,
      GUEST,
    ]);
    expect(header(mad)).to.deep.include({ base: 1, cls: 7, ver: 2, method: 3, attr: ATTR.REP });
    const f = repFields(mad);
    expect([f.remote, f.qpn, f.crqsize]).to.deep.equal([0x77, TARGET_QPN_BASE, 32]);
    expect((v.rig.device.backend as NvmeofBackend).dataPath!.stats.connections).to.equal(1);
    // The guest leaves (DREQ): DREP, and the connection is gone.
    await sendMad(dreq(0x77, f.local, f.qpn));
    const d = await nextMad();
    expect(header(d.mad).attr).to.equal(ATTR.DREP);
    expect([d.mad.readUInt32BE(24), d.mad.readUInt32BE(28)]).to.deep.equal([f.local, 0x77]);
    expect((v.rig.device.backend as NvmeofBackend).dataPath!.stats.connections).to.equal(0);
    expect(v.qpState(qp)).to.equal(QpS.RESET);
  });

  it('a REQ NVMe/RDMA refuses (qid 3 of 2 I/O queues): REJ with nvme_rdma_cm_rej INVALID_QID', async () => {
    await v.createQp(8, QpT.RC, { sqCq: cq, rqCq: cq, flags: QpF.PRIVILEGED });
    await sendMad(req({ commId: 0x78, qpn: 8, qid: 3, hsqsize: 127, hrqsize: 128 }));
    const { mad } = await nextMad();
    expect(header(mad).attr).to.equal(ATTR.REJ);
    const f = rejFields(mad);
    expect([f.remote, f.reason, f.recfmt, f.sts]).to.deep.equal([0x78, 28, 0, 3]);
  });

  it("admin queue: Connect by SEND (ACKed at once), the response in the QP's receive; Property Set/Get; Identify through an rkey", async () => {
    admin = await openQueue(10, 0);
    const c = await command(admin, connectCmd(0, 31, 0xffff, 0));
    expect([c.send.error, c.send.msn]).to.deep.equal([false, 1]);
    expect([c.recv.error, c.recv.statusLength, c.recv.srcQpn, c.recv.recvOp]).to.deep.equal([
      false,
      16,
      admin.targetQpn,
      ROp.SEND,
    ]);
    expect(c.nvme.status).to.equal(0);
    cntlid = c.nvme.dw0;
    expect(cntlid).to.be.within(1, 0xffef);
    expect(c.nvme.sqid).to.equal(0);
    // CC.EN with IOSQES 6 / IOCQES 4, then CSTS.RDY.
    const set = await command(
      admin,
      sqe({ opcode: 0x7f, cid: cid++, nsid: 0x00, cdw10: 0, cdw11: 0x14, cdw12: 0x00460001 }),
    );
    expect(set.nvme.status).to.equal(0);
    const get = await command(admin, sqe({ opcode: 0x7f, cid: cid++, nsid: 0x04, cdw10: 0, cdw11: 0x1c }));
    expect(get.nvme.dw0 & 1).to.equal(1);
    // Identify Controller into the MR (the controller's RDMA WRITE of guest memory).
    const idc = await command(
      admin,
      sqe({ opcode: 0x06, cid: cid++, sgl: { addr: mr.va + 4096, len: 4096, key: mr.key, type: KEYED }, cdw10: 1 }),
    );
    expect(idc.nvme.status).to.equal(0);
    const ident = mr.read(4096, 4096);
    expect(ident.toString('latin1', 24, 64).trim()).to.equal('rocm-ernic NVMe-oF target');
    expect(ident.toString('latin1', 4, 24).trim()).to.equal('ERNIC0000000000001');
    expect(ident.readUInt16LE(78)).to.equal(cntlid);
    expect(ident.toString('latin1', 768, 768 + SUBNQN.length)).to.equal(SUBNQN);
  });

  it('I/O queue: REQ naming the controller, Connect qid 1; a Write and a Read through fast-registered pages, answered with SEND_INV', async () => {
    io = await openQueue(11, 1, { cntlid });
    const c = await command(io, connectCmd(1, 127, cntlid, 0));
    expect([c.nvme.status, c.nvme.sqid]).to.deep.equal([0, 1]);
    // As nvme-rdma does per I/O: REG_MR of the pages (the key already bumped), then the command names that key with invalidate.
    const pages = v.pages(2, true);
    const data = pattern(8192, 5);
    v.g.mem(pages[0]!, PAGE).set(data.subarray(0, PAGE));
    v.g.mem(pages[1]!, PAGE).set(data.subarray(PAGE));
    const list = pageList(v.g, pages);
    const reg = (tag: number): void => {
      v.postSend(io.qp, {
        op: WOp.REG_MR,
        id: nextId++,
        imm: frKey(tag),
        numSge: tag,
        signaled: false,
        regMr: { va: 0x7f12_3400_0000, length: 8192, offset: 0, dma: list, mapCount: 2, flags: DATA_ACCESS },
      });
    };
    const inv0 = v.rig.device.rdma!.counters.get(DeviceCounter.remote_invalidates);
    reg(2);
    const w = await command(
      io,
      sqe({
        opcode: 0x01,
        cid: cid++,
        nsid: 1,
        sgl: { addr: 0x7f12_3400_0000, len: 8192, key: frKey(2), type: KEYED_INV },
        cdw10: 8,
        cdw12: 15,
      }),
    );
    expect(w.nvme.status).to.equal(0);
    expect([w.recv.recvOp, w.recv.immDataRkey >>> 0]).to.deep.equal([ROp.SEND_INV, frKey(2)]);
    expect(v.rm.mrs.get(FR_INDEX)!.valid).to.equal(false);
    // Read it back into the same pages, zeroed first, through the next tag.
    v.g.mem(pages[0]!, PAGE).fill(0);
    v.g.mem(pages[1]!, PAGE).fill(0);
    reg(3);
    const r = await command(
      io,
      sqe({
        opcode: 0x02,
        cid: cid++,
        nsid: 1,
        sgl: { addr: 0x7f12_3400_0000, len: 8192, key: frKey(3), type: KEYED_INV },
        cdw10: 8,
        cdw12: 15,
      }),
    );
    expect(r.nvme.status).to.equal(0);
    expect(Buffer.concat([v.g.mem(pages[0]!, PAGE), v.g.mem(pages[1]!, PAGE)]).equals(data)).to.equal(true);
    expect(v.rig.device.rdma!.counters.get(DeviceCounter.remote_invalidates) - inv0).to.equal(2);
    // And the namespace holds it: the target read it over its own keyed SGL.
    const rb = await command(
      io,
      sqe({
        opcode: 0x02,
        cid: cid++,
        nsid: 1,
        sgl: { addr: mr.va + 16384, len: 4096, key: mr.key, type: KEYED },
        cdw10: 8,
        cdw12: 7,
      }),
    );
    expect(rb.nvme.status).to.equal(0);
    expect(rb.recv.recvOp).to.equal(ROp.SEND);
    expect(mr.read(16384, 4096).equals(data.subarray(0, 4096))).to.equal(true);
  });

  it('data only by rkey: key 0 is refused by the controller, a bad or invalidated rkey is a transfer error; memory untouched', async () => {
    const before = Buffer.from(mr.read(20480, 4096));
    const k0 = await command(
      io,
      sqe({
        opcode: 0x02,
        cid: cid++,
        nsid: 1,
        sgl: { addr: mr.at(20480), len: 4096, key: 0, type: KEYED },
        cdw10: 0,
        cdw12: 7,
      }),
    );
    expect(k0.nvme.status).to.equal(SC.SGL_INVALID_DATA | SC.DNR);
    const bad = await command(
      io,
      sqe({
        opcode: 0x02,
        cid: cid++,
        nsid: 1,
        sgl: { addr: mr.va + 20480, len: 4096, key: 0x999901, type: KEYED },
        cdw10: 0,
        cdw12: 7,
      }),
    );
    expect(bad.nvme.status).to.equal(SC.DATA_XFER_ERROR | SC.DNR);
    const gone = await command(
      io,
      sqe({
        opcode: 0x01,
        cid: cid++,
        nsid: 1,
        sgl: { addr: 0x7f12_3400_0000, len: 4096, key: frKey(3), type: KEYED },
        cdw10: 0,
        cdw12: 7,
      }),
    );
    expect(gone.nvme.status).to.equal(SC.DATA_XFER_ERROR | SC.DNR);
    // Out of the MR's bounds.
    const oob = await command(
      io,
      sqe({
        opcode: 0x02,
        cid: cid++,
        nsid: 1,
        sgl: { addr: mr.va + 16 * PAGE - 512, len: 4096, key: mr.key, type: KEYED },
        cdw10: 0,
        cdw12: 7,
      }),
    );
    expect(oob.nvme.status).to.equal(SC.DATA_XFER_ERROR | SC.DNR);
    expect(mr.read(20480, 4096).equals(before)).to.equal(true);
    expect(v.qpState(io.qp)).to.equal(QpS.RTS);
  });

  it('a response finds no receive posted: it waits for the RQ doorbell, then arrives', async () => {
    const q = await openQueue(12, 2, { cntlid, recvs: 1 });
    // The only receive takes the Connect's response; the next response has none.
    const c = await command(q, connectCmd(2, 127, cntlid, 0));
    expect(c.nvme.status).to.equal(0);
    // command() reposted one receive: use it up with a Flush, then send a Keep Alive with none left.
    const at = page();
    sqe({ opcode: 0x00, cid: cid++, nsid: 1 }).copy(v.g.mem(at, 64));
    v.postSend(q.qp, { op: WOp.SEND, id: nextId++, sges: [{ va: at, len: 64, lkey: 0 }] });
    await take((x) => x.qid === q.qp.id && x.type === CqeT.SEND_MSN, 'the flush SEND completion');
    await take((x) => x.qid === q.qp.id && x.type === CqeT.RECV, 'the flush response');
    const at2 = page();
    sqe({ opcode: 0x00, cid: 0x4321, nsid: 1 }).copy(v.g.mem(at2, 64));
    v.postSend(q.qp, { op: WOp.SEND, id: nextId++, sges: [{ va: at2, len: 64, lkey: 0 }] });
    await take((x) => x.qid === q.qp.id && x.type === CqeT.SEND_MSN, 'the SEND completion (ACK before any receive)');
    await until(() => (v.rig.device.backend as NvmeofBackend).dataPath!.stats.heldResponses === 1, 'the response held');
    seen.push(...v.drain(cq));
    expect(seen.filter((x) => x.qid === q.qp.id && x.type === CqeT.RECV)).to.deep.equal([]);
    postRecv(q.qp, 64);
    const recv = await take((x) => x.qid === q.qp.id && x.type === CqeT.RECV, 'the held response');
    expect(decodeCqe(Buffer.from(v.g.mem(recvAt.get(recv.wqeIdLo)!, 16))).cid).to.equal(0x4321);
    expect((v.rig.device.backend as NvmeofBackend).dataPath!.stats.heldResponses).to.equal(0);
    // An RDMA WRITE to a controller QP is refused (no remote access there): REMOTE_ACC, the QP to ERR.
    v.postSend(q.qp, {
      op: WOp.RDMA_WRITE,
      id: nextId++,
      sges: [{ va: at, len: 8, lkey: 0 }],
      remote: { va: 0x1000, rkey: 0x1234 },
    });
    const e = await take((x) => x.qid === q.qp.id && x.type === CqeT.SEND_MSN, 'the refused WRITE');
    expect([e.error, e.statusLength]).to.deep.equal([true, WSt.REMOTE_ACC]);
    expect(v.qpState(q.qp)).to.equal(QpS.ERR);
    // The QP's error ended its connection.
    await until(
      () => (v.rig.device.backend as NvmeofBackend).dataPath!.stats.connections === 2,
      'the errored queue gone',
    );
  });

  it('a host that never posts receives: 512 responses are held, the next ends the connection with a DREQ', async () => {
    const q = await openQueue(13, 2, { cntlid, recvs: 0 });
    const at = page();
    // Not a Connect: each capsule gets an error response of its own (no controller needed).
    sqe({ opcode: 0x00, cid: 7, nsid: 1 }).copy(v.g.mem(at, 64));
    const dp = (v.rig.device.backend as NvmeofBackend).dataPath!;
    for (let sent = 0; sent < 513; sent += 16) {
      const n = Math.min(16, 513 - sent);
      for (let i = 0; i < n; i++)
        v.postSend(q.qp, { op: WOp.SEND, id: nextId++, sges: [{ va: at, len: 64, lkey: 0 }] }, i === n - 1);
      for (let i = 0; i < n; i++) await take((x) => x.qid === q.qp.id && x.type === CqeT.SEND_MSN, 'a SEND completion');
    }
    const { mad } = await nextMad();
    expect(header(mad).attr).to.equal(ATTR.DREQ);
    expect([mad.readUInt32BE(24), mad.readUInt32BE(28), mad.readUInt32BE(32) >>> 8]).to.deep.equal([
      q.ours,
      q.theirs,
      q.qp.id,
    ]);
    expect(dp.stats.heldResponses).to.equal(0);
    expect(dp.cm.byTargetQpn(q.targetQpn)).to.equal(undefined);
  });

  it('DREQ of the admin queue: DREP, the controller ends, and the target sends a DREQ for its I/O queue; later SENDs there are not acknowledged', async () => {
    await sendMad(dreq(admin.theirs, admin.ours, admin.targetQpn));
    const got = [await nextMad(), await nextMad()];
    const drep = got.find((m) => header(m.mad).attr === ATTR.DREP)!;
    const ours = got.find((m) => header(m.mad).attr === ATTR.DREQ)!;
    expect([drep.mad.readUInt32BE(24), drep.mad.readUInt32BE(28)]).to.deep.equal([admin.ours, admin.theirs]);
    expect([ours.mad.readUInt32BE(24), ours.mad.readUInt32BE(28), ours.mad.readUInt32BE(32) >>> 8]).to.deep.equal([
      io.ours,
      io.theirs,
      io.qp.id,
    ]);
    expect((v.rig.device.backend as NvmeofBackend).dataPath!.stats.connections).to.equal(0);
    const at = page();
    sqe({ opcode: 0x00, cid: cid++, nsid: 1 }).copy(v.g.mem(at, 64));
    v.postSend(io.qp, { op: WOp.SEND, id: nextId++, sges: [{ va: at, len: 64, lkey: 0 }] });
    const e = await take((x) => x.qid === io.qp.id && x.type === CqeT.SEND_MSN && x.error, 'the unanswered SEND');
    expect(e.statusLength).to.equal(WSt.RETRY_EXCEEDED);
  });
});

describe('nvmeof target on the Ethernet segment', () => {
  it('answers ARP for its address and ICMP echo; other frames pass', async () => {
    const parsed = parseNvmeofBackend('nvmeof:size=64K,ip=10.7.0.1');
    if (!parsed.ok) throw new Error(parsed.error);
    const target = await createNvmeofTarget(parsed.value);
    const rig = await Rig.start({ rdmaBackend: new NvmeofBackend(target) });
    try {
      const g = await rig.probed(1);
      const me = DEVICE_MAC;
      const arp = (tip: number[]): Buffer => {
        const f = Buffer.alloc(42);
        f.fill(0xff, 0, 6);
        me.copy(f, 6);
        f.writeUInt16BE(0x0806, 12);
        f.writeUInt16BE(1, 14);
        f.writeUInt16BE(0x0800, 16);
        f[18] = 6;
        f[19] = 4;
        f.writeUInt16BE(1, 20);
        me.copy(f, 22);
        Buffer.from([10, 7, 0, 2]).copy(f, 28);
        Buffer.from(tip).copy(f, 38);
        return f;
      };
      await g.sendFrame(arp([10, 7, 0, 9]));
      await g.sendFrame(arp([10, 7, 0, 1]));
      const r = await g.waitRxFrame();
      const f = r.data.subarray(0, r.len);
      expect(f.subarray(0, 6).equals(me)).to.equal(true);
      expect(f.subarray(6, 12).toString('hex')).to.equal('02000a070001');
      expect([f.readUInt16BE(12), f.readUInt16BE(20)]).to.deep.equal([0x0806, 2]);
      expect(f.subarray(22, 28).toString('hex')).to.equal('02000a070001');
      expect([...f.subarray(28, 32)]).to.deep.equal([10, 7, 0, 1]);
      expect(f.subarray(32, 38).equals(me)).to.equal(true);
      expect([...f.subarray(38, 42)]).to.deep.equal([10, 7, 0, 2]);
      // ping 10.7.0.1: an echo reply with the same id, sequence and data, checksums right.
      const ip = Buffer.alloc(20 + 8 + 16);
      ip[0] = 0x45;
      ip.writeUInt16BE(ip.length, 2);
      ip[8] = 64;
      ip[9] = 1;
      Buffer.from([10, 7, 0, 2]).copy(ip, 12);
      Buffer.from([10, 7, 0, 1]).copy(ip, 16);
      ip[20] = 8;
      ip.writeUInt16BE(0xbeef, 24);
      ip.writeUInt16BE(3, 26);
      pattern(16, 1).copy(ip, 28);
      const sum = (b: Buffer): number => {
        let s = 0;
        for (let i = 0; i < b.length; i += 2) s += b.readUInt16BE(i);
        while (s > 0xffff) s = (s & 0xffff) + (s >>> 16);
        return s;
      };
      ip.writeUInt16BE(~sum(ip.subarray(0, 20)) & 0xffff, 10);
      ip.writeUInt16BE(~sum(ip.subarray(20)) & 0xffff, 22);
      const eth = Buffer.concat([Buffer.from('02000a070001', 'hex'), me, Buffer.from([0x08, 0x00]), ip]);
      await g.sendFrame(eth);
      const e = await g.waitRxFrame();
      const pong = e.data.subarray(14, e.len);
      expect([pong[9], [...pong.subarray(12, 16)].join('.'), [...pong.subarray(16, 20)].join('.')]).to.deep.equal([
        1,
        '10.7.0.1',
        '10.7.0.2',
      ]);
      expect([pong[20], pong.readUInt16BE(24), pong.readUInt16BE(26)]).to.deep.equal([0, 0xbeef, 3]);
      expect(pong.subarray(28, 44).equals(pattern(16, 1))).to.equal(true);
      expect(sum(pong.subarray(0, 20))).to.equal(0xffff);
      expect(sum(pong.subarray(20, 44))).to.equal(0xffff);
      expect(g.takeRx()).to.deep.equal([]);
    } finally {
      await rig.close();
      await target.close();
    }
  });
});
