// A guest model of ionic_rdma.ko's control path, on top of the ionic.ko model
// (./guest.ts): the RDMA bootstrap over the Ethernet admin queue, the event
// queues with their interrupts, and the RDMA admin queues as the driver runs
// them (ionic_admin.c), written from docs/driver-contract.md (part R) with
// our own offsets (./rdma-regs.ts), never with lib/ionic/rdma's.
//
// As the driver does:
// - Bootstrap: RDMA_RESET_LIF; per EQ: mask, mask-on-assert, coalesce 0,
//   intr clean, CREATE_EQ, unmask; per AQ: CREATE_CQ for its admin CQ (id from
//   the udma-0 half, EQ from ionic_get_eqid), CREATE_ADMINQ.
// - Posting: poll the admin CQ first (which arms it when it finds nothing
//   new), copy the command into its strides, ring (aqid << 24) | prod.
// - Completion: strictly through events. An interrupt runs the EQ "ISR": it
//   consumes EQEs by color; a CQ NOTIFY for an admin CQ disarms it and polls
//   that CQ by color, checking type, qid and cmd_idx like ionic_admin_poll_locked;
//   after consuming it rings ring 0 with its read position, and arms again
//   (ring 1, the arm counter in the low bits) once a poll finds nothing.
//   Busy mode instead polls the CQ every millisecond without events (the
//   create/destroy-AH path).
// - Anything the driver would warn about or choke on (a CQE of the wrong
//   type/qid/index, an EQE with nothing new behind it, an event for an unknown
//   CQ) goes into `violations` (the Ethernet model's list).

import { command, IonicGuest, putU64 } from './guest';
import { PAGE } from './regs';
import { BootOp, Eqe, QCmd, RdmaId, Ring } from './rdma-regs';

interface RdmaIdentity {
  readonly caps: bigint;
  readonly version: number;
  readonly qpOpcodes: number;
  readonly adminOpcodes: number;
  readonly npts: number;
  readonly nmrs: number;
  readonly nahs: number;
  readonly maxStride: number;
  readonly udmaShift: number;
  readonly aq: { qtype: number; count: number; base: number };
  readonly sq: { qtype: number; count: number; base: number };
  readonly rq: { qtype: number; count: number; base: number };
  readonly cq: { qtype: number; count: number; base: number };
  readonly eq: { qtype: number; count: number; base: number };
  readonly statsType: number;
}

export function readRdmaIdentity(l: Buffer): RdmaIdentity {
  const qt = (at: number): { qtype: number; count: number; base: number } => ({
    qtype: l[at]!,
    count: l.readUInt32LE(at + 4),
    base: l.readUInt32LE(at + 8),
  });
  return {
    caps: l.readBigUInt64LE(RdmaId.capabilities),
    version: l[RdmaId.version]!,
    qpOpcodes: l[RdmaId.qp_opcodes]!,
    adminOpcodes: l[RdmaId.admin_opcodes]!,
    npts: l.readUInt32LE(RdmaId.npts_per_lif),
    nmrs: l.readUInt32LE(RdmaId.nmrs_per_lif),
    nahs: l.readUInt32LE(RdmaId.nahs_per_lif),
    maxStride: l[RdmaId.max_stride]!,
    udmaShift: l[RdmaId.udma_shift]!,
    aq: qt(RdmaId.aq_qtype),
    sq: qt(RdmaId.sq_qtype),
    rq: qt(RdmaId.rq_qtype),
    cq: qt(RdmaId.cq_qtype),
    eq: qt(RdmaId.eq_qtype),
    statsType: l.readUInt16LE(RdmaId.stats_type),
  };
}

/** ionic_bitid_to_qid (ionic RDMA R4.9): udma bit at `shift`, group bits above it. */
function bitidToQid(bitid: number, shift: number, halfShift: number): number {
  const udmaBit = (bitid & (1 << halfShift)) >>> (halfShift - shift);
  const grpBits = (bitid & ((1 << halfShift) - (1 << shift))) << 1;
  return grpBits | udmaBit | (bitid & ((1 << shift) - 1));
}

interface ModelEq {
  readonly id: number;
  readonly vector: number;
  readonly ring: number;
  readonly size: number;
  /** Host read position and the color it expects there. */
  prod: number;
  color: number;
}

interface ModelCq {
  readonly id: number;
  readonly eqId: number;
  readonly ring: number;
  readonly size: number;
  prod: number;
  color: number;
}

export interface RdmaCompletion {
  readonly aq: number;
  /** cmd_idx: the ring index of the command's first stride. */
  readonly cmdIdx: number;
  readonly op: number;
  readonly error: boolean;
  /** The admin status (status_length with the error bit), else 0. */
  readonly status: number;
  readonly statusLength: number;
  /** Where in the CQ it was found, and its color. */
  readonly cqIndex: number;
  readonly color: number;
}

interface Pending {
  readonly op: number;
  readonly strides: number;
  done: RdmaCompletion | null;
}

interface ModelAq {
  readonly id: number;
  readonly ring: number;
  readonly size: number;
  readonly cq: ModelCq;
  prod: number;
  cons: number;
  armed: boolean;
  armProd: number;
  /** CQEs were consumed by polling while armed: the event they raise may find nothing new. */
  polledWhileArmed: boolean;
  readonly wr: Map<number, Pending>;
}

export interface EventRecord {
  readonly eq: number;
  readonly type: number;
  readonly code: number;
  readonly qid: number;
  readonly color: number;
  readonly index: number;
}

export interface BootOptions {
  /** Online CPUs (default 8): EQs = min(eq count, CPUs, 32). */
  readonly cpus?: number;
  /** Ethernet queue pairs ionic.ko sized for (default min(cpus, 16)): RDMA vectors start after them. */
  readonly nxqs?: number;
  readonly eqDepthLog2?: number;
  readonly cqDepthLog2?: number;
  readonly aqDepthLog2?: number;
  /** AQs to create (default min(aq count, 4)). */
  readonly aqCount?: number;
}

type PostMode = 'event' | 'busy';

export class RdmaGuest {
  readonly eqs: ModelEq[] = [];
  readonly aqs: ModelAq[] = [];
  readonly events: EventRecord[] = [];
  /** Completions in the order the model consumed them. */
  readonly completions: RdmaCompletion[] = [];
  /** Extra CQ event handlers (data CQs made by tests), by CQ id. */
  readonly cqHandlers = new Map<number, (e: EventRecord) => void>();
  readonly id: RdmaIdentity;
  #nextCqBit = 0;

  private constructor(readonly g: IonicGuest) {
    this.id = readRdmaIdentity(g.lifIdentity);
  }

  get violations(): string[] {
    return this.g.violations;
  }

  /** ionic_rdma's probe after ionic.ko's (the guest must be probed). */
  static async boot(g: IonicGuest, opts: BootOptions = {}): Promise<RdmaGuest> {
    const r = new RdmaGuest(g);
    const id = r.id;
    if (!(id.caps & 2n)) throw new Error('boot: no RDMA capability');
    const cpus = opts.cpus ?? 8;
    const nxqs = opts.nxqs ?? Math.min(cpus, 16);
    const reset = await g.adminCmd(r.resetCmd());
    if (reset.status !== 0) throw new Error(`boot: RDMA_RESET_LIF status ${reset.status}`);
    const neqs = Math.min(id.eq.count, cpus, 32);
    if (neqs < 4) throw new Error(`boot: only ${neqs} EQs (needs 4)`);
    for (let i = 0; i < neqs; i++) {
      const vector = 1 + nxqs + i;
      const depth = opts.eqDepthLog2 ?? 10;
      const eq: ModelEq = {
        id: id.eq.base + i,
        vector,
        ring: g.alloc(Math.max(PAGE, 4 << depth)),
        size: 1 << depth,
        prod: 0,
        color: 1,
      };
      g.setMask(vector, 1);
      g.setMaskAssert(vector, 1);
      g.setCoalInit(vector, 0);
      await g.intrClean(vector);
      const c = await g.adminCmd(r.queueCmd(BootOp.CREATE_EQ, eq.id, vector, depth, 2, eq.ring));
      if (c.status !== 0) throw new Error(`boot: CREATE_EQ ${eq.id} status ${c.status}`);
      g.setMask(vector, 0);
      r.eqs.push(eq);
    }
    const naqs = opts.aqCount ?? Math.min(id.aq.count, 4);
    for (let i = 0; i < naqs; i++) {
      const cqDepth = opts.cqDepthLog2 ?? 8;
      const cq: ModelCq = {
        id: r.allocCqId(0),
        eqId: r.eqForVector(i % neqs, 0),
        ring: g.alloc(Math.max(PAGE, 32 << cqDepth)),
        size: 1 << cqDepth,
        prod: 0,
        color: 1,
      };
      const cc = await g.adminCmd(r.queueCmd(BootOp.CREATE_CQ, cq.id, cq.eqId, cqDepth, 5, cq.ring));
      if (cc.status !== 0) throw new Error(`boot: CREATE_CQ ${cq.id} status ${cc.status}`);
      const aqDepth = opts.aqDepthLog2 ?? 9;
      const aq: ModelAq = {
        id: id.aq.base + i,
        ring: g.alloc(Math.max(PAGE, 64 << aqDepth)),
        size: 1 << aqDepth,
        cq,
        prod: 0,
        cons: 0,
        armed: false,
        armProd: 0,
        polledWhileArmed: false,
        wr: new Map(),
      };
      const ac = await g.adminCmd(r.queueCmd(BootOp.CREATE_ADMINQ, aq.id, cq.id, aqDepth, 6, aq.ring));
      if (ac.status !== 0) throw new Error(`boot: CREATE_ADMINQ ${aq.id} status ${ac.status}`);
      r.aqs.push(aq);
    }
    return r;
  }

  // ---- commands on the Ethernet admin queue -----------------------------------------------------

  resetCmd(lif = 0): Buffer {
    const c = command(BootOp.RESET_LIF);
    c.writeUInt16LE(lif, 2);
    return c;
  }

  queueCmd(
    op: number,
    qid: number,
    cid: number,
    depthLog2: number,
    strideLog2: number,
    dma: number,
    opts: { lif?: number; dbid?: number } = {},
  ): Buffer {
    const c = command(op);
    c.writeUInt16LE(opts.lif ?? 0, QCmd.lif_index);
    c.writeUInt32LE(qid >>> 0, QCmd.qid_ver);
    c.writeUInt32LE(cid >>> 0, QCmd.cid);
    c.writeUInt16LE(opts.dbid ?? 0, QCmd.dbid);
    c[QCmd.depth_log2] = depthLog2;
    c[QCmd.stride_log2] = strideLog2;
    putU64(c, QCmd.dma_addr, dma);
    return c;
  }

  /** ionic_get_cqid: the next free id of a udma half. */
  allocCqId(udma: number): number {
    const half = this.id.cq.count / 2;
    const bit = udma * half + this.#nextCqBit++;
    return this.id.cq.base + bitidToQid(bit, this.id.udmaShift, Math.log2(half));
  }

  /** ionic_get_eqid: (comp_vector % (E/2 - 1) + 1) * 2 + udma. */
  eqForVector(compVector: number, udma: number): number {
    const perUdma = this.eqs.length / 2 - 1;
    return ((compVector % perUdma) + 1) * 2 + udma;
  }

  // ---- the RDMA admin queue --------------------------------------------------------------------

  /** Strides a body of `len` bytes takes. */
  static strides(len: number): number {
    return Math.ceil((len + 4) / 64);
  }

  /**
   * Post one command (op, body) on AQ `aq` and resolve with its completion.
   * `len` overrides the header's length field (bad-input tests).
   */
  post(
    op: number,
    body: Buffer,
    opts: { aq?: number; mode?: PostMode; len?: number; timeoutMs?: number } = {},
  ): Promise<RdmaCompletion> {
    const aq = this.aqs[opts.aq ?? 0];
    if (!aq) return Promise.reject(new Error(`no AQ ${opts.aq}`));
    const slot = this.write(aq, op, body, opts.len);
    this.poll(aq);
    this.ring(aq);
    return this.wait(aq, slot, opts.mode ?? 'event', opts.timeoutMs);
  }

  /** Post several commands with one doorbell. */
  async postMany(
    cmds: readonly { op: number; body: Buffer }[],
    opts: { aq?: number; mode?: PostMode } = {},
  ): Promise<RdmaCompletion[]> {
    const aq = this.aqs[opts.aq ?? 0]!;
    const slots = cmds.map((c) => this.write(aq, c.op, c.body));
    this.poll(aq);
    this.ring(aq);
    const out: RdmaCompletion[] = [];
    for (const s of slots) out.push(await this.wait(aq, s, opts.mode ?? 'event'));
    return out;
  }

  /** Copy a command into the ring at prod (no doorbell); returns its first slot. */
  write(aq: ModelAq, op: number, body: Buffer, lenField?: number): number {
    const strides = RdmaGuest.strides(body.length);
    const used = (aq.prod - aq.cons + aq.size) % aq.size;
    if (strides > aq.size - 1 - used) throw new Error('admin queue full');
    const first = aq.prod;
    const s0 = this.g.mem(aq.ring + first * 64, 64);
    s0.fill(0);
    s0[0] = op;
    s0.writeUInt16LE(lenField ?? body.length, 2);
    body.copy(s0, 4, 0, Math.min(60, body.length));
    for (let s = 1, at = 60; at < body.length; s++, at += 64) {
      const slot = (first + s) % aq.size;
      const d = this.g.mem(aq.ring + slot * 64, 64);
      d.fill(0);
      body.copy(d, 0, at, Math.min(body.length, at + 64));
    }
    aq.prod = (first + strides) % aq.size;
    aq.wr.set(first, { op, strides, done: null });
    return first;
  }

  /** The AQ doorbell: (aqid << 24) | prod on aq_qtype. */
  ring(aq: ModelAq): void {
    this.g.ringDoorbell(this.id.aq.qtype, aq.id, aq.prod);
  }

  wait(aq: ModelAq, slot: number, mode: PostMode, timeoutMs?: number): Promise<RdmaCompletion> {
    const done = (): RdmaCompletion | undefined => {
      const p = aq.wr.get(slot);
      if (p?.done) {
        aq.wr.delete(slot);
        return p.done;
      }
      return undefined;
    };
    if (mode === 'event') {
      return this.g.waitFor(
        `admin slot ${slot} on AQ ${aq.id}`,
        () => {
          this.service();
          return done();
        },
        timeoutMs,
      );
    }
    return (async () => {
      for (let i = 0; i < 2000; i++) {
        await this.g.sync();
        this.poll(aq);
        const c = done();
        if (c) return c;
        await new Promise((r) => setTimeout(r, 1));
      }
      throw new Error(`admin slot ${slot} on AQ ${aq.id}: no completion after 2000 busy polls`);
    })();
  }

  /**
   * ionic_admin_poll_locked: consume CQEs by color; ring 0 after progress,
   * poll again; arm once a poll finds nothing (if not armed).
   */
  poll(aq: ModelAq): void {
    for (let rounds = 0; rounds < 1 << 16; rounds++) {
      const before = aq.cq.prod;
      this.#pollCq(aq);
      if (aq.cq.prod !== before) {
        if (aq.armed) aq.polledWhileArmed = true;
        this.g.ringDoorbell(this.id.cq.qtype, aq.cq.id, aq.cq.prod, Ring.INDEX);
        continue;
      }
      if (!aq.armed) {
        aq.armed = true;
        aq.armProd = (aq.armProd + 1) & 0xffff;
        this.g.ringDoorbell(this.id.cq.qtype, aq.cq.id, aq.armProd, Ring.ARM);
      }
      return;
    }
  }

  #pollCq(aq: ModelAq): void {
    const cq = aq.cq;
    for (;;) {
      const e = Buffer.from(this.g.mem(cq.ring + cq.prod * 32, 32));
      const qtf = e.readUInt32BE(28);
      if ((qtf & 1) !== cq.color) return;
      const type = (qtf >>> 5) & 7;
      const qid = qtf >>> 8;
      const cmdIdx = e.readUInt16BE(0);
      const at = cq.prod;
      cq.prod = (cq.prod + 1) % cq.size;
      if (cq.prod === 0) cq.color ^= 1;
      if (type !== 0) {
        this.violations.push(`admin CQ ${cq.id} index ${at}: type ${type}`);
        continue;
      }
      if (qid !== aq.id) {
        this.violations.push(`admin CQ ${cq.id} index ${at}: qid ${qid}, AQ is ${aq.id}`);
        continue;
      }
      if (aq.cons === aq.prod) {
        this.violations.push(`admin CQ ${cq.id} index ${at}: CQE for an empty AQ`);
        continue;
      }
      if (cmdIdx !== aq.cons) {
        this.violations.push(`admin CQ ${cq.id} index ${at}: cmd_idx ${cmdIdx}, cons ${aq.cons}`);
        continue;
      }
      const p = aq.wr.get(aq.cons);
      const error = (qtf & 2) !== 0;
      const statusLength = e.readUInt32BE(24);
      const c: RdmaCompletion = {
        aq: aq.id,
        cmdIdx,
        op: e[2]!,
        error,
        status: error ? statusLength : 0,
        statusLength,
        cqIndex: at,
        color: qtf & 1,
      };
      this.completions.push(c);
      if (p) p.done = c;
      aq.cons = (aq.cons + (p?.strides ?? 1)) % aq.size;
    }
  }

  /** The EQ "ISR" for every EQ: consume EQEs by color and dispatch them. */
  service(): number {
    let n = 0;
    for (const eq of this.eqs) n += this.#pollEq(eq);
    return n;
  }

  #pollEq(eq: ModelEq): number {
    let n = 0;
    for (;;) {
      const evt = this.g.mem(eq.ring + eq.prod * 4, 4).readUInt32BE(0);
      if ((evt & 1) !== eq.color) return n;
      const rec: EventRecord = {
        eq: eq.id,
        type: (evt >>> 1) & 7,
        code: (evt >>> 4) & 0xf,
        qid: evt >>> 8,
        color: evt & 1,
        index: eq.prod,
      };
      eq.prod = (eq.prod + 1) % eq.size;
      if (eq.prod === 0) eq.color ^= 1;
      this.events.push(rec);
      n++;
      if (rec.type !== Eqe.TYPE_CQ) continue;
      const aq = this.aqs.find((a) => a.cq.id === rec.qid);
      if (aq) {
        if (rec.code !== Eqe.CODE_NOTIFY) {
          this.violations.push(`admin CQ ${rec.qid}: event code ${rec.code}`);
          continue;
        }
        if (aq.cq.eqId !== eq.id)
          this.violations.push(`admin CQ ${rec.qid}: event on EQ ${eq.id}, expected EQ ${aq.cq.eqId}`);
        if (!aq.armed) this.violations.push(`admin CQ ${rec.qid}: event while not armed`);
        aq.armed = false;
        const stale = aq.polledWhileArmed;
        aq.polledWhileArmed = false;
        const before = aq.cq.prod;
        this.poll(aq);
        if (aq.cq.prod === before && !stale) this.violations.push(`admin CQ ${rec.qid}: event with no new CQE`);
        continue;
      }
      const h = this.cqHandlers.get(rec.qid);
      if (h) h(rec);
      else this.violations.push(`event for unknown CQ ${rec.qid}`);
    }
  }

  /** The driver's teardown: RDMA_RESET_LIF (the device forgets everything). */
  async resetLif(): Promise<number> {
    return (await this.g.adminCmd(this.resetCmd())).status;
  }
}
