// An nvme-rdma host on the guest model, for specs that need a connected
// controller behind the device (the loop-budget specs): CM on QP1 through an
// AH to the target's address, an RC QP per NVMe queue, Connect and CC.EN by
// capsule, and capsules posted several to one doorbell. The same steps as
// rdma/data-path.spec.ts, gathered in one class; MADs and capsules are built by
// hand (cm-mads.ts, helpers.ts).

import { decodeCqe, NvmeofTarget } from '../../../lib/targets/nvmeof';
import { until } from '../../support/fds';
import { PAGE } from '../../support/ionic/regs';
import { CqeT, MrF, QpF, QpT, WOp } from '../../support/ionic/rdma-regs';
import { Cq, Cqe, GuestMr, Qp, v4, VerbsGuest } from '../../support/ionic/rdma-verbs';
import { ATTR, header, repFields, req, rtu } from './cm-mads';
import { connectData, HOSTNQN, KEYED, sqe, SUBNQN } from './helpers';
import { NvmeofBackend } from '../../../lib/backends/nvmeof';

const GUEST = '192.168.200.2';
const TARGET = '192.168.200.1';
const AH = 5;
const QP1_QKEY = 0x80010000;

export interface HostQueue {
  readonly qp: Qp;
  readonly targetQpn: number;
}

export class DeviceHost {
  readonly seen: Cqe[] = [];
  readonly #recvAt = new Map<number, number>();
  #nextId = 0x1000;
  #scratch: number[] = [];
  #scratchNext = 0;
  #cid = 1;

  private constructor(
    readonly v: VerbsGuest,
    readonly cq: Cq,
    readonly gsi: Qp,
    readonly mr: GuestMr,
  ) {}

  /** A guest booted against `target`, QP1 ready, an MR of `mrPages` pages for data. */
  static async boot(target: NvmeofTarget, mrPages = 16): Promise<DeviceHost> {
    const v = await VerbsGuest.boot({ rdmaBackend: new NvmeofBackend(target), arenaPages: 64 + mrPages + 8 });
    const cq = await v.createCq(30, 10);
    const gsi = await v.createQp(1, QpT.UD, { sqCq: cq, rqCq: cq, flags: QpF.PRIVILEGED, depthLog2: 5 });
    await v.readyUd(gsi, QP1_QKEY);
    await v.createAh(AH, { sip: v4(GUEST), dip: v4(TARGET) });
    const mr = await v.createMr({
      key: 0x701,
      pages: mrPages,
      flags: MrF.LOCAL_WRITE | MrF.REMOTE_WRITE | MrF.REMOTE_READ,
    });
    const h = new DeviceHost(v, cq, gsi, mr);
    h.#scratch = v.pages(48);
    for (let i = 0; i < 8; i++) h.postRecv(gsi, 296);
    return h;
  }

  nextCid(): number {
    return this.#cid++;
  }

  page(): number {
    const p = this.#scratch[this.#scratchNext++ % this.#scratch.length]!;
    this.v.g.mem(p, PAGE).fill(0);
    return p;
  }

  async take(pred: (c: Cqe) => boolean, what: string, ms = 20_000): Promise<Cqe> {
    let found: Cqe | undefined;
    await until(
      () => {
        this.seen.push(...this.v.drain(this.cq));
        const i = this.seen.findIndex(pred);
        if (i >= 0) found = this.seen.splice(i, 1)[0];
        return found !== undefined;
      },
      what,
      ms,
    );
    return found!;
  }

  postRecv(qp: Qp, len: number, ring = true): void {
    const at = this.page();
    const id = this.#nextId++;
    this.#recvAt.set(id, at);
    this.v.postRecv(qp, { id, sges: [{ va: at, len, lkey: 0 }] }, ring);
  }

  async sendMad(mad: Buffer): Promise<void> {
    const at = this.page();
    mad.copy(this.v.g.mem(at, mad.length));
    const id = this.#nextId++;
    this.v.postSend(this.gsi, {
      op: WOp.SEND,
      id,
      sges: [
        { va: at, len: 24, lkey: 0 },
        { va: at + 24, len: mad.length - 24, lkey: 0 },
      ],
      ud: { ah: AH, qpn: 1, qkey: QP1_QKEY },
    });
    const c = await this.take(
      (x) => x.qid === 1 && x.type === CqeT.SEND_NPG && x.wqeIdLo === id,
      'the MAD send completion',
    );
    if (c.error) throw new Error('MAD send failed');
  }

  async nextMad(): Promise<Buffer> {
    const cqe = await this.take((x) => x.qid === 1 && x.type === CqeT.RECV, 'a MAD in QP1');
    const at = this.#recvAt.get(cqe.wqeIdLo)!;
    this.postRecv(this.gsi, 296);
    return Buffer.from(this.v.g.mem(at + 40, 256));
  }

  /** REQ, REP, the QP to RTS, RTU, `recvs` receives posted. */
  async openQueue(qpId: number, qid: number, cntlid = 0, recvs = 16): Promise<HostQueue> {
    const qp = await this.v.createQp(qpId, QpT.RC, {
      sqCq: this.cq,
      rqCq: this.cq,
      flags: QpF.PRIVILEGED,
      depthLog2: 6,
    });
    const theirs = 0x5000 + qpId;
    await this.sendMad(
      req({ commId: theirs, qpn: qpId, qid, hsqsize: qid === 0 ? 31 : 63, hrqsize: qid === 0 ? 32 : 64, cntlid }),
    );
    const mad = await this.nextMad();
    if (header(mad).attr !== ATTR.REP) throw new Error(`expected a REP, got attribute ${header(mad).attr}`);
    const f = repFields(mad);
    await this.v.connect(qp, f.qpn, { tpl: { sip: v4(GUEST), dip: v4(TARGET) } });
    await this.sendMad(rtu(theirs, f.local));
    for (let i = 0; i < recvs; i++) this.postRecv(qp, 64);
    return { qp, targetQpn: f.qpn };
  }

  /** Capsules by SEND, all behind one doorbell; they stay in flight (see responses()). */
  post(q: HostQueue, capsules: readonly Buffer[]): void {
    for (const c of capsules) {
      const at = this.page();
      c.copy(this.v.g.mem(at, c.length));
      this.v.postSend(q.qp, { op: WOp.SEND, id: this.#nextId++, sges: [{ va: at, len: c.length, lkey: 0 }] }, false);
    }
    this.v.ringSq(q.qp);
  }

  /** The next `n` NVMe completions on `q`, in arrival order (each receive posted again). */
  async responses(q: HostQueue, n: number, ms = 20_000): Promise<ReturnType<typeof decodeCqe>[]> {
    const out: ReturnType<typeof decodeCqe>[] = [];
    for (let i = 0; i < n; i++) {
      const recv = await this.take((x) => x.qid === q.qp.id && x.type === CqeT.RECV, 'a response capsule', ms);
      if (recv.error) throw new Error('response receive failed');
      out.push(decodeCqe(Buffer.from(this.v.g.mem(this.#recvAt.get(recv.wqeIdLo)!, 16))));
      this.postRecv(q.qp, 64);
    }
    this.seen.splice(0, this.seen.length, ...this.seen.filter((x) => !(x.qid === q.qp.id && x.type === CqeT.SEND_MSN)));
    return out;
  }

  async command(q: HostQueue, capsule: Buffer): Promise<ReturnType<typeof decodeCqe>> {
    this.post(q, [capsule]);
    return (await this.responses(q, 1))[0]!;
  }

  /** Connect data at `at` of the MR, the Connect capsule for `qid`. */
  connectCapsule(qid: number, sqsize: number, cntlid: number, at = 0): Buffer {
    connectData(SUBNQN, HOSTNQN, cntlid).copy(this.v.g.mem(this.mr.at(at), 1024));
    return sqe({
      opcode: 0x7f,
      cid: this.nextCid(),
      nsid: 0x01,
      sgl: { addr: this.mr.va + at, len: 1024, key: this.mr.key, type: KEYED },
      cdw10: qid << 16,
      cdw11: sqsize,
    });
  }

  /** Admin queue connected and enabled, then I/O queue 1: both queues. */
  async controller(): Promise<{ admin: HostQueue; io: HostQueue; cntlid: number }> {
    const admin = await this.openQueue(10, 0);
    const c = await this.command(admin, this.connectCapsule(0, 31, 0xffff));
    if (c.status !== 0) throw new Error(`admin Connect failed: ${c.status.toString(16)}`);
    const cntlid = c.dw0;
    await this.command(admin, sqe({ opcode: 0x7f, cid: this.nextCid(), nsid: 0x00, cdw11: 0x14, cdw12: 0x00460001 }));
    const io = await this.openQueue(11, 1, cntlid);
    const ic = await this.command(io, this.connectCapsule(1, 63, cntlid));
    if (ic.status !== 0) throw new Error(`I/O Connect failed: ${ic.status.toString(16)}`);
    return { admin, io, cntlid };
  }

  async close(): Promise<void> {
    await this.v.close();
  }
}
