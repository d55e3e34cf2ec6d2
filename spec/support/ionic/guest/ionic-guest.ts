// ionic_open and the data path as the driver runs them: TX and RX queue
// pairs with their own vectors, RX buffers posted (SG past a page) and
// refilled from NAPI, TX frames split into SG pieces, completions checked by
// color and comp_index; then ionic_stop + ionic_remove.

import { GuestRam, VfioUserClient } from '../../../../lib/vfio-user/client';
import { command, putU64, txCmd } from './bytes';
import { GuestProbe } from './probe';
import type { GuestOptions, OpenOptions, RxBuf, RxFrame, RxQ, SendOptions, TxCompletion, TxQ } from './types';
import { Attr, COLOR, DevId, Op, PAGE, QCtl, QF, QId, QT, St, TxOp } from '../regs';

const TX_SLOT_BYTES = 16384;
/** Gap between TX SG pieces in a slot, so a device that reads past a piece gets the wrong bytes. */
const TX_PIECE_GAP = 64;
const RX_FILL_THRESHOLD = 16;
/** Completions a NAPI poll takes before the driver refills (NAPI_POLL_WEIGHT). */
const NAPI_BUDGET = 64;
const EMPTY = Buffer.alloc(0);

/** The whole guest driver: probe (GuestProbe), then ionic_open's queues and the TX/RX data path, and teardown. */
export class IonicGuest extends GuestProbe {
  readonly txqs: TxQ[] = [];
  readonly rxqs: RxQ[] = [];
  /** Frames received and not yet taken, in arrival order. */
  readonly rxFrames: RxFrame[] = [];
  /**
   * When set, good frames go here instead of rxFrames, from inside the poll,
   * as the driver hands an skb to GRO: `data` is a view of the RX buffer
   * (a copy when the frame spans SG pieces), valid only during the call.
   * `rxPollEnd` runs after each vector's poll (where GRO flushes).
   */
  rxSink: ((data: Buffer, csum: number, csumFlags: number) => void) | null = null;
  rxPollEnd: (() => void) | null = null;
  /** Where a frame spread over SG pieces is gathered for rxSink (the largest MTU's frame). */
  readonly #assembly = Buffer.alloc(9216 + 18);

  private constructor(client: VfioUserClient, ram: GuestRam, base: number, timeoutMs: number) {
    super(client, ram, base, timeoutMs);
  }

  /** Connect, share RAM with DMA_MAP, find MSI-X, wire one eventfd per vector and enable MSI-X. */
  static async connect(socketPath: string, opts: GuestOptions = {}): Promise<IonicGuest> {
    const client = await VfioUserClient.connect(socketPath);
    const ram = new GuestRam(opts.ramSize ?? 64 << 20, 'ionic-guest', !opts.unsealedRam);
    const g = new IonicGuest(client, ram, opts.iova ?? 2 ** 32, opts.timeoutMs ?? 3000);
    try {
      await client.dmaMap(g.base, ram.size, ram.fd, 0);
      await g.discover();
      await g.wireMsix();
    } catch (e) {
      g.dispose();
      throw e;
    }
    return g;
  }

  override napi(v: number, opts: { unmask?: boolean } = {}): number {
    let work = 0;
    if (this.adminq && v === 0) {
      work += this.serviceNotify();
      work += this.serviceAdmin();
    }
    for (const q of this.txqs) if (q && q.intr === v) work += this.#serviceTx(q);
    for (const q of this.rxqs) {
      if (!q || q.intr !== v) continue;
      // A NAPI budget at a time, refilling after each (ionic_rx_napi then ionic_rx_fill): the device can
      // fill the refilled buffers while the rest of a long batch is still being taken.
      for (;;) {
        const n = this.#serviceRx(q, NAPI_BUDGET);
        work += n;
        if (q.autoRefill) this.#refill(q, false);
        if (n < NAPI_BUDGET) break;
      }
      this.rxPollEnd?.();
    }
    this.returnCredits(v, work, opts.unmask ?? true);
    this.wake();
    return work;
  }

  // ---- open / data path ----------------------------------------------------------------------

  /** ionic_open with `n` queue pairs: Q_INIT TX and RX, fill RX, enable RX then TX, unmask. */
  async open(n: number, opts: OpenOptions = {}): Promise<void> {
    if (!this.adminq) throw new Error('open before probe');
    if (1 + n > this.nvec) throw new Error(`open: ${n} queue pairs need ${1 + n} vectors, the device has ${this.nvec}`);
    const txLog2 = opts.txRingLog2 ?? opts.ringLog2 ?? 6;
    const rxLog2 = opts.rxRingLog2 ?? opts.ringLog2 ?? 6;
    const devId = this.devIdentity;
    const mult = devId.readUInt32LE(DevId.intr_coal_mult);
    const div = devId.readUInt32LE(DevId.intr_coal_div);
    for (let i = 0; i < n; i++) {
      const v = 1 + i;
      await this.intrClean(v);
      this.setMaskAssert(v, 1);
      this.setCoalInit(v, div ? Math.round((64 * mult) / div) : 0);
    }
    const txId = this.qIdentity[QT.TXQ];
    const txVer = opts.txVersion ?? (txId ? txId[QId.version]! : 0);
    const sgDescSize = txVer >= 1 && txId && txId.readUInt16LE(QId.sg_desc_sz) === 256 ? 256 : 128;
    const mtu = opts.mtu ?? 1500;
    for (let i = 0; i < n; i++) {
      const v = 1 + i;
      const tsize = 1 << txLog2;
      const tx: TxQ = {
        index: i,
        intr: v,
        size: tsize,
        ring: this.alloc(tsize * 16),
        cq: this.alloc(tsize * 16),
        sg: this.alloc(tsize * sgDescSize),
        bufs: this.alloc(tsize * TX_SLOT_BYTES),
        sgDescSize,
        version: txVer,
        head: 0,
        tail: 0,
        cqTail: 0,
        doneColor: 1,
        hwType: -1,
        hwIndex: -1,
        waiters: new Map(),
        completed: 0,
      };
      const tr = await this.adminOk(
        `q_init_tx${i}`,
        this.qInitCmd(QT.TXQ, txVer, i, v, QF.IRQ | QF.SG, txLog2, tx.ring, tx.cq, tx.sg),
      );
      tx.hwIndex = tr.comp.readUInt32LE(4);
      tx.hwType = tr.comp[8]!;
      this.txqs[i] = tx;

      const rsize = 1 << rxLog2;
      const rx: RxQ = {
        index: i,
        intr: v,
        size: rsize,
        ring: this.alloc(rsize * 16),
        cq: this.alloc(rsize * 16),
        sg: this.alloc(rsize * 128),
        head: 0,
        tail: 0,
        cqTail: 0,
        doneColor: 1,
        hwType: -1,
        hwIndex: -1,
        bufs: [],
        frameLen: mtu + 18,
        autoRefill: opts.autoRefill ?? true,
        poison: opts.poisonRx ?? true,
      };
      for (let s = 0; s < rsize; s++) rx.bufs.push(this.#rxBuffers(rx.frameLen));
      const rxVer = this.qIdentity[QT.RXQ]?.[QId.version] ?? 0;
      const rr = await this.adminOk(
        `q_init_rx${i}`,
        this.qInitCmd(QT.RXQ, rxVer, i, v, QF.IRQ | QF.SG, rxLog2, rx.ring, rx.cq, rx.sg),
      );
      rx.hwIndex = rr.comp.readUInt32LE(4);
      rx.hwType = rr.comp[8]!;
      this.rxqs[i] = rx;
    }
    if (!this.carrier || opts.noEnable) return;
    for (let i = 0; i < n; i++) {
      const rx = this.rxqs[i]!;
      this.fillRx(i, opts.initialFill ?? rx.size - 1);
      await this.intrClean(1 + i);
      if ((await this.qControl(QT.RXQ, i, QCtl.ENABLE)) !== St.SUCCESS) throw new Error(`open: enable RX ${i} failed`);
      this.setMask(1 + i, 0);
      if ((await this.qControl(QT.TXQ, i, QCtl.ENABLE)) !== St.SUCCESS) throw new Error(`open: enable TX ${i} failed`);
    }
  }

  /** Buffers for one RX descriptor: the first up to a page, then page-sized SG pieces, none adjacent. */
  #rxBuffers(frameLen: number): RxBuf[] {
    const first = Math.min(frameLen, PAGE);
    const out: RxBuf[] = [{ iova: this.alloc(first, 64), len: first }];
    for (let left = frameLen - first; left > 0; left -= PAGE) {
      this.alloc(64, 64); // a gap: a device that writes past a piece hits the wrong bytes
      out.push({ iova: this.alloc(Math.min(left, PAGE), 64), len: Math.min(left, PAGE) });
    }
    return out;
  }

  /** Post `count` RX buffers (never more than size - 1 outstanding) and ring once. */
  fillRx(queue: number, count: number): number {
    const q = this.rxqs[queue]!;
    let posted = 0;
    while (posted < count && (q.head + 1) % q.size !== q.tail) {
      const slot = q.head;
      const bufs = q.bufs[slot]!;
      const d = this.mem(q.ring + slot * 16, 16);
      d.fill(0);
      d[0] = bufs.length > 1 ? 1 : 0; // SG : SIMPLE
      d.writeUInt16LE(bufs[0]!.len, 6);
      putU64(d, 8, bufs[0]!.iova);
      const sg = this.mem(q.sg + slot * 128, 128);
      sg.fill(0);
      for (let e = 1; e < bufs.length && e <= 8; e++) {
        putU64(sg, (e - 1) * 16, bufs[e]!.iova);
        sg.writeUInt16LE(bufs[e]!.len, (e - 1) * 16 + 8);
      }
      if (q.poison) for (const b of bufs) this.mem(b.iova, b.len).fill(0xee);
      q.head = (q.head + 1) % q.size;
      posted++;
    }
    if (posted > 0) this.ringDoorbell(q.hwType, q.hwIndex, q.head);
    return posted;
  }

  #refill(q: RxQ, force: boolean): void {
    const free = (q.tail - q.head - 1 + q.size) % q.size;
    if (force || free >= Math.min(RX_FILL_THRESHOLD, q.size / 8)) this.fillRx(q.index, free);
  }

  /** Buffers the device may still fill on an RX queue. */
  rxPosted(queue: number): number {
    const q = this.rxqs[queue]!;
    return (q.head - q.tail + q.size) % q.size;
  }

  #serviceRx(q: RxQ, budget = Infinity): number {
    let work = 0;
    while (work < budget) {
      const e = this.mem(q.cq + q.cqTail * 16, 16);
      const color = e[15]! & COLOR ? 1 : 0;
      if (color !== q.doneColor) break;
      const ci = e.readUInt16LE(2);
      if (q.tail === q.head) {
        this.violations.push(`RX ${q.index}: completion at CQ ${q.cqTail} for an empty queue`);
        break;
      }
      if (ci !== q.tail) {
        this.violations.push(`RX ${q.index}: comp_index ${ci} but the queue tail is ${q.tail}`);
        break;
      }
      const status = e[0]!;
      const numSg = e[1]!;
      const len = e.readUInt16LE(12);
      const bufs = q.bufs[q.tail]!;
      let room = 0;
      for (const b of bufs) room += b.len;
      let data: Buffer = EMPTY;
      if (status === 0) {
        if (len > room) this.violations.push(`RX ${q.index}: length ${len} is past the ${room} bytes posted`);
        if (numSg > bufs.length - 1)
          this.violations.push(`RX ${q.index}: num_sg_elems ${numSg} but ${bufs.length - 1} posted`);
        if (this.rxSink && len <= bufs[0]!.len) {
          data = this.mem(bufs[0]!.iova, len); // the common case for a sink: a view, no copy
        } else if (this.rxSink && len <= room && len <= this.#assembly.length) {
          // Spread over SG pieces: gathered into one reused buffer (as GRO reads the frags), no allocation.
          let at = 0;
          for (const b of bufs) {
            if (at >= len) break;
            const n = Math.min(len - at, b.len);
            this.mem(b.iova, n).copy(this.#assembly, at);
            at += n;
          }
          data = this.#assembly.subarray(0, len);
        } else {
          const parts: Buffer[] = [];
          let left = Math.min(len, room);
          for (const b of bufs) {
            if (left <= 0) break;
            const n = Math.min(left, b.len);
            parts.push(Buffer.from(this.mem(b.iova, n)));
            left -= n;
          }
          data = Buffer.concat(parts);
        }
      }
      if (status === 0 && this.rxSink) this.rxSink(data, e.readUInt16BE(8), e[14]!);
      else
        this.rxFrames.push({
          queue: q.index,
          index: ci,
          status,
          len,
          numSg,
          rssHash: e.readUInt32LE(4),
          pktType: e[15]! & 0x7f,
          data,
          csum: e.readUInt16BE(8),
          csumFlags: e[14]!,
          vlanTci: e.readUInt16LE(10),
        });
      q.tail = (q.tail + 1) % q.size;
      q.cqTail = (q.cqTail + 1) % q.size;
      if (q.cqTail === 0) q.doneColor ^= 1;
      work++;
    }
    return work;
  }

  #serviceTx(q: TxQ): number {
    let work = 0;
    for (;;) {
      const e = this.mem(q.cq + q.cqTail * 16, 16);
      const color = e[15]! & COLOR ? 1 : 0;
      if (color !== q.doneColor) break;
      const ci = e.readUInt16LE(2);
      const outstanding = (q.head - q.tail + q.size) % q.size;
      if (ci >= q.size || (ci - q.tail + q.size) % q.size >= outstanding) {
        this.violations.push(`TX ${q.index}: comp_index ${ci} is not outstanding (tail ${q.tail}, head ${q.head})`);
        break;
      }
      for (;;) {
        const slot = q.tail;
        q.tail = (q.tail + 1) % q.size;
        q.completed++;
        const w = q.waiters.get(slot);
        q.waiters.delete(slot);
        w?.({ status: e[0]!, slot });
        if (slot === ci) break;
      }
      q.cqTail = (q.cqTail + 1) % q.size;
      if (q.cqTail === 0) q.doneColor ^= 1;
      work++;
    }
    return work;
  }

  /**
   * Post a frame on a TX queue; resolves with its completion. Pieces other
   * than the first go in SG elements, laid out backwards in the slot's buffer
   * with gaps, so a device that ignores the SG addresses sends wrong bytes.
   */
  postFrame(frame: Buffer, opts: SendOptions = {}): { slot: number; done: Promise<TxCompletion> } {
    const q = this.txqs[opts.queue ?? 0];
    if (!q) throw new Error(`no TX queue ${opts.queue ?? 0}`);
    if ((q.head + 1) % q.size === q.tail) throw new Error(`TX ${q.index} ring full`);
    const pieces = opts.pieces ?? [frame.length];
    if (pieces.reduce((a, b) => a + b, 0) !== frame.length) throw new Error('pieces do not add up to the frame');
    const slot = q.head;
    const slotBase = q.bufs + slot * TX_SLOT_BYTES;
    const addrs: number[] = [];
    let end = TX_SLOT_BYTES;
    let off = 0;
    for (const len of pieces) {
      end -= len + TX_PIECE_GAP;
      if (end < 0) throw new Error('frame too large for a TX slot');
      addrs.push(slotBase + end);
      frame.copy(this.mem(slotBase + end, len), 0, off, off + len);
      off += len;
    }
    const sg = Buffer.alloc(q.sgDescSize);
    for (let i = 1; i < pieces.length; i++) {
      putU64(sg, (i - 1) * 16, addrs[i]!);
      sg.writeUInt16LE(pieces[i]!, (i - 1) * 16 + 8);
    }
    this.#writeTxDesc(q, slot, txCmd(TxOp.CSUM_NONE, 0, pieces.length - 1, addrs[0]!), pieces[0]!, sg);
    return { slot, done: this.#queueTx(q, slot, opts.ring ?? true) };
  }

  sendFrame(frame: Buffer, opts: SendOptions = {}): Promise<TxCompletion> {
    return this.postFrame(frame, opts).done;
  }

  /** Post a hand-made TX descriptor (and SG list) for bad-input tests. */
  postTxRaw(queue: number, desc: Buffer, sg?: Buffer): { slot: number; done: Promise<TxCompletion> } {
    const q = this.txqs[queue]!;
    const slot = q.head;
    desc.copy(this.mem(q.ring + slot * 16, 16));
    if (sg) sg.copy(this.mem(q.sg + slot * q.sgDescSize, Math.min(sg.length, q.sgDescSize)));
    return { slot, done: this.#queueTx(q, slot, true) };
  }

  /**
   * Post hand-made descriptors (each with its SG list) at consecutive slots
   * and ring once, as the driver posts a TSO run; resolves with the
   * completion of the last one.
   */
  postTxRun(queue: number, run: readonly { desc: Buffer; sg?: Buffer }[]): Promise<TxCompletion> {
    const q = this.txqs[queue]!;
    if (run.length === 0) throw new Error('postTxRun: an empty run');
    // Only the last descriptor gets a waiter: the device completes the run with one entry.
    for (let i = 0; i < run.length - 1; i++) {
      this.#writeRaw(q, run[i]!.desc, run[i]!.sg);
      q.head = (q.head + 1) % q.size;
    }
    const slot = q.head;
    this.#writeRaw(q, run[run.length - 1]!.desc, run[run.length - 1]!.sg);
    return this.#queueTx(q, slot, true);
  }

  #writeRaw(q: TxQ, desc: Buffer, sg: Buffer | undefined): void {
    desc.copy(this.mem(q.ring + q.head * 16, 16));
    if (sg) sg.copy(this.mem(q.sg + q.head * q.sgDescSize, Math.min(sg.length, q.sgDescSize)));
  }

  /** Where the TX buffer of a slot lives (for hand-made descriptors). */
  txSlotBuffer(queue: number, slot: number): number {
    return this.txqs[queue]!.bufs + slot * TX_SLOT_BYTES;
  }

  #writeTxDesc(q: TxQ, slot: number, cmd: bigint, len: number, sg: Buffer): void {
    const d = this.mem(q.ring + slot * 16, 16);
    d.fill(0);
    d.writeBigUInt64LE(cmd, 0);
    d.writeUInt16LE(len, 8);
    sg.copy(this.mem(q.sg + slot * q.sgDescSize, q.sgDescSize));
  }

  #queueTx(q: TxQ, slot: number, ring: boolean): Promise<TxCompletion> {
    q.head = (q.head + 1) % q.size;
    const p = new Promise<TxCompletion>((resolve, reject) => {
      const timer = setTimeout(() => {
        q.waiters.delete(slot);
        reject(new Error(`TX ${q.index} slot ${slot}: no completion`));
      }, this.timeoutMs);
      timer.unref();
      q.waiters.set(slot, (c) => {
        clearTimeout(timer);
        resolve(c);
      });
    });
    p.catch(() => {
      /* a caller that never awaits must not see an unhandled rejection */
    });
    if (ring) this.ringDoorbell(q.hwType, q.hwIndex, q.head);
    return p;
  }

  /** Ring a TX queue's doorbell with its current head (after batched posts). */
  kickTx(queue = 0): void {
    const q = this.txqs[queue]!;
    this.ringDoorbell(q.hwType, q.hwIndex, q.head);
  }

  /** TX descriptors completed so far on a queue. */
  txCompleted(queue = 0): number {
    return this.txqs[queue]!.completed;
  }

  /** Resolve with the next received frame that matches (taking it from `rxFrames`). */
  waitRxFrame(opts: { queue?: number; match?: (f: RxFrame) => boolean; timeoutMs?: number } = {}): Promise<RxFrame> {
    const pick = (): RxFrame | undefined => {
      const i = this.rxFrames.findIndex(
        (f) => (opts.queue === undefined || f.queue === opts.queue) && (!opts.match || opts.match(f)),
      );
      return i < 0 ? undefined : this.rxFrames.splice(i, 1)[0];
    };
    return this.waitFor('an RX frame', pick, opts.timeoutMs);
  }

  /** Take every frame received so far. */
  takeRx(): RxFrame[] {
    return this.rxFrames.splice(0, this.rxFrames.length);
  }

  // ---- teardown ------------------------------------------------------------------------------

  /** ionic_stop + ionic_remove: disable TX then RX (masking RX vectors), quiesce, LIF_RESET, PORT_RESET, RESET. */
  async remove(): Promise<void> {
    for (const q of this.txqs) if (q) await this.qControl(QT.TXQ, q.index, QCtl.DISABLE);
    for (const q of this.rxqs) {
      if (!q) continue;
      this.setMask(q.intr, 1);
      await this.qControl(QT.RXQ, q.index, QCtl.DISABLE);
    }
    const st = command(Op.LIF_SETATTR);
    st[1] = Attr.STATE;
    st[4] = 0; // QUIESCE
    await this.adminCmd(st);
    const lr = command(Op.LIF_RESET);
    lr.writeUInt16LE(0, 2);
    await this.devCmd(lr);
    this.adminq = null;
    this.notifyq = null;
    this.txqs.length = 0;
    this.rxqs.length = 0;
    await this.devCmd(command(Op.PORT_RESET));
    await this.devCmd(command(Op.RESET));
  }

  /** The driver's remove, then disconnect. */
  async close(): Promise<void> {
    if (this.adminq) await this.remove();
    this.dispose();
  }
}
