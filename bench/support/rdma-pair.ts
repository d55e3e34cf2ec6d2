// Two RC QPs of one guest connected to each other, driven the way libionic
// drives them: WQEs written into the SQ ring in guest memory from a template
// (only wqe_id and the addresses change), one SQ doorbell per batch (a posted
// BAR2 region write), the send CQ polled by its color bit in shared memory,
// and the CQ's read position reported with a ring-0 doorbell (contract 4.8)
// lazily but early enough that the device never finds the CQ full.
//
// Every WQE is an RDMA WRITE from the requester (QP A) into the same MR
// through the responder (QP B). The device completes each by MSN (contract
// 4.7): one SEND_MSN CQE per WQE with msn = count so far; any other CQE, an
// error bit, or an MSN out of sequence throws.
//
// Offsets and numbers come from the guest model (spec/support/ionic) and
// reference/ionic-rdma-contract.md, not from lib/ionic/rdma.

import { SendVerb, WqeFlag } from '../../lib/rdma/datapath/layouts';
import type { IonicGuest } from '../../spec/support/ionic/guest';
import type { RdmaGuest } from '../../spec/support/ionic/rdma-guest';
import { AOp, Mask, MrF, QpF, QpS, QpT } from '../../spec/support/ionic/rdma-regs';
import {
  contiguousRing, createCqBody, createMrBody, createQpBody, headerTemplate, modifyQpBody, pageList, placeTemplate,
} from '../../spec/support/ionic/rdma-cmds';
import { PAGE } from '../../spec/support/ionic/regs';

export const QP_A = 10;
export const QP_B = 11;
const SEND_CQ = 300;
const RECV_CQ = 301;
/** An EQ the boot created (the data CQs are never armed: no events). */
const EQ_ID = 3;
const WQE_STRIDE_LOG2 = 6;
const CQE_SIZE = 32;
const MR_KEY = (5 << 8) | 0x11;
/** CQE type SEND_MSN (contract 4.6). */
const CQE_SEND_MSN = 2;

export interface PairOptions {
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

  private constructor(readonly g: IonicGuest, readonly r: RdmaGuest, readonly o: PairOptions) {
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

  async #ok(op: number, body: Buffer, what: string): Promise<void> {
    const c = await this.r.post(op, body);
    if (c.error || c.status !== 0) throw new Error(`${what}: admin status ${c.status}`);
  }

  async #setup(): Promise<void> {
    const { g } = this;
    const cqLog2 = Math.log2(this.cqSize);
    const sendCq = contiguousRing(g, this.cqSize * CQE_SIZE).dma;
    await this.#ok(AOp.CREATE_CQ, createCqBody({ id: SEND_CQ, eqId: EQ_ID, depthLog2: cqLog2, strideLog2: 5, dma: sendCq }), 'CREATE_CQ send');
    await this.#ok(AOp.CREATE_CQ, createCqBody({ id: RECV_CQ, eqId: EQ_ID, depthLog2: 6, strideLog2: 5, dma: contiguousRing(g, PAGE).dma }), 'CREATE_CQ recv');
    this.#cqOff = sendCq - g.base;
    // The MR over 4 KiB pages listed one by one, as a user registration gives them.
    const pages: number[] = [];
    for (let at = 0; at < this.o.mrBytes; at += PAGE) pages.push(this.mr + at);
    await this.#ok(AOp.CREATE_MR, createMrBody({
      key: MR_KEY, va: this.mr, length: this.o.mrBytes, mapCount: pages.length, dma: pageList(g, pages), pageSizeLog2: 12,
      flags: MrF.LOCAL_WRITE | MrF.REMOTE_WRITE | MrF.REMOTE_READ,
    }), 'CREATE_MR');
    for (const id of [QP_A, QP_B]) {
      const sqLog2 = id === QP_A ? this.o.sqLog2 : 2;
      const sq = contiguousRing(g, (1 << sqLog2) << WQE_STRIDE_LOG2).dma;
      const rq = contiguousRing(g, PAGE).dma;
      await this.#ok(AOp.CREATE_QP, createQpBody({
        id, type: QpT.RC, sq: { cqId: SEND_CQ, depthLog2: sqLog2, strideLog2: WQE_STRIDE_LOG2, dma: sq },
        rq: { cqId: RECV_CQ, depthLog2: 2, strideLog2: WQE_STRIDE_LOG2, dma: rq },
      }), `CREATE_QP ${id}`);
      if (id === QP_A) this.#sqOff = sq - g.base;
    }
    const tpl = headerTemplate({ sip: Buffer.from([10, 0, 0, 1]), dip: Buffer.from([10, 0, 0, 1]) });
    for (const [id, dest] of [[QP_A, QP_B], [QP_B, QP_A]] as const) {
      await this.#ok(AOp.MODIFY_QP, modifyQpBody({ id, mask: Mask.STATE | Mask.ACCESS_FLAGS, state: QpS.INIT,
        access: QpF.REMOTE_WRITE | QpF.REMOTE_READ }), `MODIFY_QP ${id} INIT`);
      await this.#ok(AOp.MODIFY_QP, modifyQpBody({ id, mask: Mask.STATE | Mask.AV | Mask.DEST_QPN | Mask.PATH_MTU, state: QpS.RTR,
        qkeyDest: dest, pmtu: 10, ahId: 9 + id, hdrLen: tpl.length, hdrDma: placeTemplate(g, tpl) }), `MODIFY_QP ${id} RTR`);
      await this.#ok(AOp.MODIFY_QP, modifyQpBody({ id, mask: Mask.STATE, state: QpS.RTS }), `MODIFY_QP ${id} RTS`);
    }
    // The WQE template (contract 4.2): RDMA WRITE, one SGE, signaled.
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

  /** The SQ doorbell: (qpid << 24) | sq_prod on sq_qtype (contract 4.4). */
  ringSq(): void {
    this.g.ringDoorbell(this.r.id.sq.qtype, QP_A, this.#sqPi);
  }

  /** The CQ consumer update: (cqid << 24) | read index on cq_qtype, ring 0 (contract 4.8). */
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
      if (qtf & 2) throw new Error(`error CQE at index ${this.#cqCi}: type ${type} qid ${qid} status ${b.readUInt32BE(at + 24)}`);
      if (type !== CQE_SEND_MSN || qid !== QP_A) throw new Error(`unexpected CQE at index ${this.#cqCi}: type ${type} qid ${qid}`);
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
