// The guest side of the mesh benchmark (bench/mesh.ts): a guest model on one
// server's vfio-user socket (ionic.ko probe, ionic_rdma boot, the verbs
// helper) with a CQ, a contiguous MR and an RC QP, connected to the other
// side's QP; and the poller of A's send CQ, by color, as a busy-polling or
// event-driven verbs consumer reads it.

import { IonicGuest } from '../spec/support/ionic/guest';
import { RdmaGuest } from '../spec/support/ionic/rdma-guest';
import { CqeT, Mask, MrF, QpF, QpS, QpT, Ring } from '../spec/support/ionic/rdma-regs';
import { Cq, GuestMr, Qp, v4, VerbsGuest } from '../spec/support/ionic/rdma-verbs';
import { PAGE } from '../spec/support/ionic/regs';

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** How a side is laid out: its MR's size, its CQ's id and ring, its SQ's depth. */
export interface SideShape {
  readonly mrBytes: number;
  readonly cqId: number;
  readonly cqLog2: number;
  readonly sqLog2: number;
}

export interface Side {
  readonly g: IonicGuest;
  readonly r: RdmaGuest;
  readonly v: VerbsGuest;
  readonly cq: Cq;
  readonly mr: GuestMr;
  readonly qp: Qp;
  /** The MR's bytes (contiguous guest pages). */
  readonly bytes: Buffer;
}

export async function guestSide(sock: string, key: number, qpId: number, shape: SideShape): Promise<Side> {
  const { mrBytes: MR_BYTES, cqId: CQ_ID, cqLog2: CQ_LOG2, sqLog2: SQ_LOG2 } = shape;
  const g = await IonicGuest.connect(sock, { ramSize: MR_BYTES + (48 << 20) });
  try {
    await g.probe();
    const r = await RdmaGuest.boot(g, { cpus: 8 });
    const pages = MR_BYTES / PAGE;
    const v = VerbsGuest.attach(g, r, pages);
    const cq = await v.createCq(CQ_ID, CQ_LOG2);
    const mr = await v.createMr({
      key,
      pages,
      contiguous: true,
      flags: MrF.LOCAL_WRITE | MrF.REMOTE_WRITE | MrF.REMOTE_READ,
    });
    if (mr.pages[pages - 1] !== mr.pages[0]! + (pages - 1) * PAGE || mr.offset !== 0)
      throw new Error('MR pages are not contiguous');
    const qp = await v.createQp(qpId, QpT.RC, { sqCq: cq, rqCq: cq, depthLog2: SQ_LOG2 });
    return { g, r, v, cq, mr, qp, bytes: g.mem(mr.pages[0]!, MR_BYTES) };
  } catch (e) {
    g.dispose();
    throw e;
  }
}

/**
 * Connect `s.qp` to the peer's QP. MODIFY_QP to RTR fails while this server
 * does not yet know which node owns the peer's GID (the mesh fans GIDs out
 * after registration): then the QP goes back to RESET and we try again.
 */
export async function connectSide(s: Side, dest: number, sip: string, dip: string): Promise<number> {
  const t0 = Date.now();
  for (let tries = 1; ; tries++) {
    try {
      await s.v.connect(s.qp, dest, {
        access: QpF.REMOTE_WRITE | QpF.REMOTE_READ,
        tpl: { sip: v4(sip), dip: v4(dip) },
      });
      return tries;
    } catch (e) {
      if (Date.now() - t0 > 10000)
        throw new Error(`QP ${s.qp.id} could not reach RTS towards ${dip} in 10 s: ${(e as Error).message}`);
      const c = await s.v.modify(s.qp, { mask: Mask.STATE, state: QpS.RESET });
      if (c.error) throw new Error(`QP ${s.qp.id}: MODIFY_QP to RESET failed (status ${c.status})`);
      await sleep(100);
    }
  }
}

/** A's send CQ, polled by color; the read position reported lazily (a quarter of the ring). */
export class CqPoller {
  readonly #u8: Uint8Array;
  readonly #ring: Buffer;
  readonly #mask: number;
  #next = 0;
  #color = 1;
  #msn = 0;
  #unreported = 0;
  /** BENCH_MESH_WAIT=event: the CQ handler is installed, the armed event came, the host's arm counter. */
  #handlerSet = false;
  #fired = false;
  #arms = 0;

  constructor(private readonly s: Side) {
    this.#ring = s.g.mem(s.cq.ring, 32 << s.cq.depthLog2);
    this.#u8 = new Uint8Array(this.#ring.buffer, this.#ring.byteOffset, this.#ring.length);
    this.#mask = (1 << s.cq.depthLog2) - 1;
  }

  /** Consume every new CQE; answers how many. Throws on an error CQE or anything but in-sequence SEND_MSN of A's QP. */
  poll(): number {
    let n = 0;
    const b = this.#ring;
    while (this.peek()) {
      const at = this.#next * 32;
      const qtf = b.readUInt32BE(at + 28);
      const type = (qtf >>> 5) & 7;
      const qid = qtf >>> 8;
      if (qtf & 2) throw new Error(`error CQE: type ${type} qid ${qid} status ${b.readUInt32BE(at + 24)}`);
      if (type !== CqeT.SEND_MSN || qid !== this.s.qp.id) throw new Error(`unexpected CQE: type ${type} qid ${qid}`);
      const msn = b.readUInt32BE(at + 4);
      const want = (this.#msn + 1) & 0xffffff;
      if (msn !== want) throw new Error(`CQE msn ${msn}, expected ${want}`);
      this.#msn = want;
      this.#next = (this.#next + 1) & this.#mask;
      if (this.#next === 0) this.#color ^= 1;
      n++;
    }
    this.#unreported += n;
    if (this.#unreported >= (this.#mask + 1) / 4) this.report();
    return n;
  }

  /** A new CQE is waiting (nothing consumed). */
  peek(): boolean {
    return (Atomics.load(this.#u8, this.#next * 32 + 31) & 1) === this.#color;
  }

  report(): void {
    this.s.g.ringDoorbell(this.s.r.id.cq.qtype, this.s.cq.id, this.#next, Ring.INDEX);
    this.#unreported = 0;
  }

  /**
   * Wait for the next CQE as an event-driven verbs consumer does
   * (ibv_req_notify_cq, then ibv_get_cq_event): report the read position
   * (an arm with unreported CQEs fires at once), arm the CQ and sleep in
   * epoll until its EQ's interrupt; the interrupt's EQE is consumed by the
   * EQ "ISR" (RdmaGuest.service), which calls the CQ's handler.
   */
  async event(timeoutMs: number): Promise<void> {
    this.arm();
    await this.sleep(timeoutMs);
  }

  /** ibv_req_notify_cq: report the read position and arm the CQ (the next CQE raises its EQ's interrupt). */
  arm(): void {
    const s = this.s;
    if (!this.#handlerSet) {
      s.r.cqHandlers.set(s.cq.id, () => {
        this.#fired = true;
      });
      this.#handlerSet = true;
    }
    this.#fired = false;
    this.report();
    this.#arms = (this.#arms + 1) & 0xffff;
    s.g.ringDoorbell(s.r.id.cq.qtype, s.cq.id, this.#arms, Ring.ARM);
  }

  /** ibv_get_cq_event: sleep in epoll until the armed CQ's interrupt came (at once if it already did). */
  async sleep(timeoutMs: number): Promise<void> {
    const s = this.s;
    await s.g.waitFor(
      'a CQ event on A',
      () => {
        s.r.service();
        return this.#fired ? true : undefined;
      },
      timeoutMs,
    );
  }
}
