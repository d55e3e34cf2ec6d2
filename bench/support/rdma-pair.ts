// Two RC QPs of one guest connected to each other, driven the way libionic
// drives them: WQEs written into the SQ ring in guest memory from a template
// (only wqe_id and the addresses change), one SQ doorbell per batch (a posted
// BAR2 region write), the send CQ polled by its color bit in shared memory,
// and the CQ's read position reported with a ring-0 doorbell (ionic RDMA R4.8)
// lazily but early enough that the device never finds the CQ full.
//
// Every WQE is an RDMA WRITE from the requester (QP A) into the same MR
// through the responder (QP B). The device completes each by MSN (contract
// 4.7): one SEND_MSN CQE per WQE with msn = count so far; any other CQE, an
// error bit, or an MSN out of sequence throws.
//
// Offsets and numbers come from the guest model (spec/support/ionic) and
// docs/driver-contract.md (part R), not from lib/ionic/rdma.

import { SendVerb, WqeFlag } from '../../lib/rdma/datapath/wqe-layout';
import type { IonicGuest } from '../../spec/support/ionic/guest';
import type { RdmaGuest } from '../../spec/support/ionic/rdma-guest';
import { MrF, QpF, QpT } from '../../spec/support/ionic/rdma-regs';
import { VerbsGuest } from '../../spec/support/ionic/rdma-verbs';
import { PAGE } from '../../spec/support/ionic/regs';

const QP_A = 10;
const QP_B = 11;
const SEND_CQ = 300;
const RECV_CQ = 301;
const WQE_STRIDE_LOG2 = 6;
const CQE_SIZE = 32;
const MR_KEY = (5 << 8) | 0x11;
/** CQE type SEND_MSN (ionic RDMA R4.6). */
const CQE_SEND_MSN = 2;

interface PairOptions {
  /** log2 of the requester's SQ depth. */
  readonly sqLog2: number;
  /** Bytes of the MR: the lower half is the source, the upper half the destination. */
  readonly mrBytes: number;
}

export class RdmaPair {
  readonly sqSize: number;
  readonly cqSize: number;
  /** IOVA of the MR, and of its two halves. */
  readonly mr: number;
  readonly src: number;
  readonly dst: number;
  readonly half: number;
  /** Guest RAM as bytes (offset = iova - g.base), and a view Atomics can read. */
  readonly ram: Buffer;
  readonly #u8: Uint8Array;
  readonly #tpl = Buffer.alloc(1 << WQE_STRIDE_LOG2);
  #sqOff = 0;
  #cqOff = 0;
  #sqPi = 0;
  #cqCi = 0;
  #color = 1;
  /** MSN of the last CQE (24 bits). */
  #msn = 0;
  /** CQEs consumed since the last ring-0 CQ doorbell. */
  #unreported = 0;
  #id = 0;

  private constructor(
    readonly g: IonicGuest,
    readonly r: RdmaGuest,
    readonly o: PairOptions,
  ) {
    this.sqSize = 1 << o.sqLog2;
    // CQ twice the SQ: at most sqSize - 1 WQEs are in flight and the read
    // position is reported before sqSize / 4 CQEs go unreported.
    this.cqSize = 2 * this.sqSize;
    this.ram = g.ram.buffer;
    this.#u8 = new Uint8Array(this.ram.buffer, this.ram.byteOffset, this.ram.length);
    this.half = o.mrBytes / 2;
    this.mr = g.alloc(o.mrBytes, 2 << 20);
    this.src = this.mr;
    this.dst = this.mr + this.half;
  }

  static async create(g: IonicGuest, r: RdmaGuest, o: PairOptions): Promise<RdmaPair> {
    const p = new RdmaPair(g, r, o);
    await p.#setup();
    return p;
  }

  /** CQs, the MR and the two QPs through the guest model's verbs helper (the data CQs are never armed). */
  async #setup(): Promise<void> {
    const v = VerbsGuest.attach(this.g, this.r);
    const sendCq = await v.createCq(SEND_CQ, Math.log2(this.cqSize));
    const recvCq = await v.createCq(RECV_CQ, 6);
    this.#cqOff = sendCq.ring - this.g.base;
    // The MR over 4 KiB pages listed one by one, as a user registration gives them; its va is its guest address.
    const pages: number[] = [];
    for (let at = 0; at < this.o.mrBytes; at += PAGE) pages.push(this.mr + at);
    await v.createMr({ key: MR_KEY, pages, va: this.mr, flags: MrF.LOCAL_WRITE | MrF.REMOTE_WRITE | MrF.REMOTE_READ });
    const a = await v.createQp(QP_A, QpT.RC, {
      sqCq: sendCq,
      rqCq: recvCq,
      depthLog2: this.o.sqLog2,
      strideLog2: WQE_STRIDE_LOG2,
    });
    const b = await v.createQp(QP_B, QpT.RC, { sqCq: sendCq, rqCq: recvCq, depthLog2: 2, strideLog2: WQE_STRIDE_LOG2 });
    this.#sqOff = a.sq.at - this.g.base;
    await v.connectPair(a, b, { access: QpF.REMOTE_WRITE | QpF.REMOTE_READ });
    // The WQE template (ionic RDMA R4.2): RDMA WRITE, one SGE, signaled.
    const t = this.#tpl;
    t.writeUInt32LE(0x62656e63, 4); // wqe_id high word: "benc"
    t[8] = SendVerb.RDMA_WRITE;
    t[9] = 1;
    t.writeUInt16BE(WqeFlag.SIGNALED, 10);
    t.writeUInt32BE(MR_KEY, 24); // remote_rkey
    t.writeUInt32BE(MR_KEY, 44); // sge.lkey
  }

  /** Set the payload size of every following WQE. */
  setSize(len: number): void {
    this.#tpl.writeUInt32BE(len, 28); // length
    this.#tpl.writeUInt32BE(len, 40); // sge.len
  }

  /** Write one WQE at the SQ producer index (no doorbell): from iova `from` to iova `to`. */
  write(from: number, to: number): void {
    const at = this.#sqOff + (this.#sqPi << WQE_STRIDE_LOG2);
    const b = this.ram;
    this.#tpl.copy(b, at);
    b.writeUInt32LE(this.#id, at);
    this.#id = (this.#id + 1) >>> 0;
    b.writeUInt32BE(Math.floor(to / 0x100000000), at + 16);
    b.writeUInt32BE(to >>> 0, at + 20);
    b.writeUInt32BE(Math.floor(from / 0x100000000), at + 32);
    b.writeUInt32BE(from >>> 0, at + 36);
    this.#sqPi = (this.#sqPi + 1) & (this.sqSize - 1);
  }

  /** The SQ doorbell: (qpid << 24) | sq_prod on sq_qtype (ionic RDMA R4.4). */
  ringSq(): void {
    this.g.ringDoorbell(this.r.id.sq.qtype, QP_A, this.#sqPi);
  }

  /** The CQ consumer update: (cqid << 24) | read index on cq_qtype, ring 0 (ionic RDMA R4.8). */
  ringCq(): void {
    this.g.ringDoorbell(this.r.id.cq.qtype, SEND_CQ, this.#cqCi, 0);
    this.#unreported = 0;
  }

  /** Report the read position if enough CQEs went unreported (keeps the device's view of free space above sqSize). */
  maybeRingCq(): void {
    if (this.#unreported >= this.sqSize / 4) this.ringCq();
  }

  /** Whether the CQE at the read index has the current color (an atomic load: never hoisted out of a spin). */
  ready(): boolean {
    return (Atomics.load(this.#u8, this.#cqOff + this.#cqCi * CQE_SIZE + CQE_SIZE - 1) & 1) === this.#color;
  }

  /** Consume every new CQE; answers how many. Throws on anything but an in-sequence SEND_MSN success of QP A. */
  poll(): number {
    let n = 0;
    const b = this.ram;
    while (this.ready()) {
      const at = this.#cqOff + this.#cqCi * CQE_SIZE;
      const qtf = b.readUInt32BE(at + 28);
      const type = (qtf >>> 5) & 7;
      const qid = qtf >>> 8;
      if (qtf & 2)
        throw new Error(`error CQE at index ${this.#cqCi}: type ${type} qid ${qid} status ${b.readUInt32BE(at + 24)}`);
      if (type !== CQE_SEND_MSN || qid !== QP_A)
        throw new Error(`unexpected CQE at index ${this.#cqCi}: type ${type} qid ${qid}`);
      const msn = b.readUInt32BE(at + 4);
      const want = (this.#msn + 1) & 0xffffff;
      if (msn !== want) throw new Error(`CQE at index ${this.#cqCi}: msn ${msn}, expected ${want}`);
      this.#msn = want;
      this.#cqCi = (this.#cqCi + 1) & (this.cqSize - 1);
      if (this.#cqCi === 0) this.#color ^= 1;
      n++;
    }
    this.#unreported += n;
    return n;
  }
}
