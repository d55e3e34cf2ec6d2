// A guest-side verbs layer on the RDMA guest model (./rdma-guest.ts), for the
// data-path specs: CQs polled by color, MRs over guest pages, RC/UC/UD QPs
// (optionally on an SRQ) with their rings, the INIT/RTR/RTS sequence
// ibv_rc_pingpong runs, and send/receive WQEs written byte by byte from
// docs/driver-contract.md, ionic RDMA R4.2/R4.3 with our own offsets (./rdma-regs.ts), never with lib's
// encoders, so a misreading in lib fails a test instead of being mirrored.
//
// Data buffers and MR pages come from an "arena" of guest pages filled with
// a pattern, so a test can snapshot it and see every byte the device wrote.
// The objects (Cq, Qp, GuestMr, Snapshot, ...) are in ./rdma-verbs-objects.ts,
// re-exported here.

import type { ResourceManager } from '../../../lib/rdma/resources';
import { expect } from 'chai';
import { putU64 } from './guest';
import type { IonicGuest } from './guest';
import { PAGE } from './regs';
import { Rig } from './rig';
import { RdmaCompletion, RdmaGuest } from './rdma-guest';
import { AOp, ALen, Mask, MrF, QpF, QpS, QpT, Ring, WOp, WqeF } from './rdma-regs';
import {
  contiguousRing,
  createAhBody,
  createCqBody,
  createMrBody,
  createQpBody,
  headerTemplate,
  ModifyBody,
  modifyQpBody,
  pageList,
  placeTemplate,
  TemplateOpts,
} from './rdma-cmds';
import {
  ConnectOptions,
  Cq,
  Cqe,
  decodeCqeBytes,
  GuestMr,
  Qp,
  RecvWr,
  SendWr,
  Sge,
  Srq,
  v4,
  VerbsOptions,
  WorkRing,
} from './rdma-verbs-objects';

export {
  ConnectOptions,
  Cq,
  Cqe,
  decodeCqeBytes,
  GuestMr,
  Qp,
  RecvWr,
  SendWr,
  Sge,
  Snapshot,
  Srq,
  v4,
  v6,
  VerbsOptions,
  WorkRing,
} from './rdma-verbs-objects';

// ---- the verbs guest ------------------------------------------------------------------------

export class VerbsGuest {
  readonly cqs = new Map<number, Cq>();
  readonly qps = new Map<number, Qp>();
  /** The data arena: [at, at + bytes). */
  readonly arena: { readonly at: number; readonly bytes: number };
  #arenaNext: number;
  readonly #rig: Rig | null;

  private constructor(
    rig: Rig | null,
    readonly g: IonicGuest,
    readonly r: RdmaGuest,
    arenaPages: number,
  ) {
    this.#rig = rig;
    const bytes = arenaPages * PAGE;
    const at = bytes > 0 ? g.alloc(bytes) : 0;
    if (bytes > 0) {
      const m = g.mem(at, bytes);
      // A pattern, so a write of zeros shows.
      for (let i = 0; i < bytes; i += 4) m.writeUInt32LE(((i * 2654435761) ^ 0xa5a5a5a5) >>> 0, i);
    }
    this.arena = { at, bytes };
    this.#arenaNext = at;
  }

  /**
   * Verbs over a guest already probed and RDMA-booted against some server
   * (the benchmark's, in its own process): no in-process rig, so `rig` and
   * `rm` are not available.
   */
  static attach(g: IonicGuest, r: RdmaGuest, arenaPages = 0): VerbsGuest {
    return new VerbsGuest(null, g, r, arenaPages);
  }

  static async boot(o: VerbsOptions = {}): Promise<VerbsGuest> {
    const rig = await Rig.start({
      ...(o.rdmaBackend ? { rdmaBackend: o.rdmaBackend } : {}),
      ...(o.log ? { log: o.log } : {}),
      ...(o.link ? { link: o.link } : {}),
    });
    try {
      const g = await rig.probed(0, o.ramSize ? { ramSize: o.ramSize } : {});
      const r = await RdmaGuest.boot(g, { cpus: 8, ...o });
      return new VerbsGuest(rig, g, r, o.arenaPages ?? 256);
    } catch (e) {
      await rig.close();
      throw e;
    }
  }

  async close(): Promise<void> {
    await this.#rig?.close();
  }

  /** The in-process device and server (boot() only). */
  get rig(): Rig {
    if (!this.#rig) throw new Error('VerbsGuest: attached to an outside server, there is no in-process rig');
    return this.#rig;
  }

  /** The device's resource manager (state checks only). */
  get rm(): ResourceManager {
    return this.rig.device.rdma!.rm;
  }

  qpState(qp: Qp | number): number | undefined {
    return this.rm.qps.get(typeof qp === 'number' ? qp : qp.id)?.state;
  }

  /** Pages from the arena; with `gaps`, an unused page after each (so no two are adjacent). */
  pages(n: number, gaps = false): number[] {
    const out: number[] = [];
    for (let i = 0; i < n; i++) {
      if (this.#arenaNext + PAGE > this.arena.at + this.arena.bytes) throw new Error('verbs arena exhausted');
      out.push(this.#arenaNext);
      this.#arenaNext += gaps ? 2 * PAGE : PAGE;
    }
    return out;
  }

  /** Let everything the doorbells started finish (a round trip, a turn of the event loop, another round trip). */
  async settle(): Promise<void> {
    await this.g.sync();
    await new Promise<void>((res) => setImmediate(res));
    await this.g.sync();
  }

  // ---- admin --------------------------------------------------------------------------------

  admin(op: number, body: Buffer): Promise<RdmaCompletion> {
    return this.r.post(op, body);
  }

  async ok(op: number, body: Buffer, what = `admin op ${op}`): Promise<void> {
    const c = await this.r.post(op, body);
    expect([c.error, c.status], what).to.deep.equal([false, 0]);
  }

  async createCq(id: number, depthLog2 = 8): Promise<Cq> {
    const ring = contiguousRing(this.g, 32 << depthLog2).dma;
    await this.ok(
      AOp.CREATE_CQ,
      createCqBody({ id, eqId: this.r.eqForVector(0, 0), depthLog2, strideLog2: 5, dma: ring }),
      `CREATE_CQ ${id}`,
    );
    const cq: Cq = { id, ring, depthLog2, next: 0, color: 1 };
    this.cqs.set(id, cq);
    return cq;
  }

  /**
   * An MR over `pages` (a count: fresh arena pages, scattered in reverse order
   * with gaps unless `contiguous`; or the guest pages themselves). The first
   * byte sits `offset` into the first page; va defaults to a user-looking
   * address with that in-page offset.
   */
  async createMr(o: {
    key: number;
    pages: number | readonly number[];
    flags: number;
    offset?: number;
    length?: number;
    va?: number;
    pdId?: number;
    contiguous?: boolean;
  }): Promise<GuestMr> {
    const offset = o.offset ?? (o.va !== undefined ? o.va % PAGE : 0);
    let pages: number[];
    if (typeof o.pages === 'number') {
      pages = this.pages(o.pages, !o.contiguous);
      if (!o.contiguous) pages.reverse();
    } else pages = [...o.pages];
    const length = o.length ?? pages.length * PAGE - offset;
    const va = o.va ?? 0x7f00_0000_0000 + (o.key >>> 8) * 2 ** 24 + offset;
    if (va % PAGE !== offset) throw new Error('createMr: va and offset disagree');
    const dma = pages.length === 1 ? pages[0]! + offset : pageList(this.g, pages);
    await this.ok(
      AOp.CREATE_MR,
      createMrBody({
        key: o.key,
        va,
        length,
        flags: o.flags,
        mapCount: pages.length,
        dma,
        pageSizeLog2: 12,
        ...(o.pdId !== undefined ? { pdId: o.pdId } : {}),
      }),
      `CREATE_MR ${o.key.toString(16)}`,
    );
    return new GuestMr(this.g, o.key, va, length, o.flags, pages, offset);
  }

  /** A fast-registration MR (alloc_mr: flags PHYS, nothing mapped). */
  async createFrmr(key: number): Promise<void> {
    await this.ok(
      AOp.CREATE_MR,
      createMrBody({ key, va: 0, length: 0, flags: MrF.PHYS, mapCount: 0, dma: 0, pageSizeLog2: 12 }),
      `CREATE_MR frmr ${key.toString(16)}`,
    );
  }

  async createAh(id: number, tpl: TemplateOpts): Promise<void> {
    const t = headerTemplate(tpl);
    await this.ok(
      AOp.CREATE_AH,
      createAhBody({ id, dma: placeTemplate(this.g, t), length: t.length }),
      `CREATE_AH ${id}`,
    );
  }

  /** An SRQ (the out-of-tree CREATE_SRQ): the device picks the id. */
  async createSrq(o: { depthLog2?: number; strideLog2?: number } = {}): Promise<Srq> {
    const depthLog2 = o.depthLog2 ?? 4;
    const strideLog2 = o.strideLog2 ?? 8;
    const at = contiguousRing(this.g, 1 << (depthLog2 + strideLog2)).dma;
    const resp = this.g.alloc(PAGE);
    const b = Buffer.alloc(ALen.CREATE_SRQ);
    putU64(b, 0, at);
    b.writeUInt32LE(1, 8); // map_count
    b.writeUInt32LE(1, 12); // pd_id
    b[26] = depthLog2;
    b[27] = strideLog2;
    b[29] = 1; // udma mask: udma 0
    b.writeUInt32LE(5, 30);
    putU64(b, 34, resp);
    await this.ok(AOp.CREATE_SRQ, b, 'CREATE_SRQ');
    return { id: this.g.mem(resp, 4).readUInt32LE(0), ring: { at, depthLog2, strideLog2, pi: 0 } };
  }

  async createQp(
    id: number,
    type: number,
    o: { sqCq: Cq; rqCq?: Cq; depthLog2?: number; strideLog2?: number; flags?: number; pdId?: number; srq?: Srq },
  ): Promise<Qp> {
    const depthLog2 = o.depthLog2 ?? 4;
    const strideLog2 = o.strideLog2 ?? 8;
    const bytes = 1 << (depthLog2 + strideLog2);
    // createQpBody names the SQ's CQ for the receive side of an SRQ QP.
    const rqCq = o.srq ? o.sqCq : (o.rqCq ?? o.sqCq);
    const sq: WorkRing = { at: contiguousRing(this.g, bytes).dma, depthLog2, strideLog2, pi: 0 };
    const rq: WorkRing | null = o.srq ? null : { at: contiguousRing(this.g, bytes).dma, depthLog2, strideLog2, pi: 0 };
    await this.ok(
      AOp.CREATE_QP,
      createQpBody({
        id,
        type,
        flags: o.flags ?? 0,
        ...(o.pdId !== undefined ? { pdId: o.pdId } : {}),
        sq: { cqId: o.sqCq.id, depthLog2, strideLog2, dma: sq.at },
        ...(rq ? { rq: { cqId: rqCq.id, depthLog2, strideLog2, dma: rq.at } } : { srqId: o.srq!.id }),
      }),
      `CREATE_QP ${id}`,
    );
    const qp: Qp = {
      id,
      type,
      flags: o.flags ?? 0,
      sq,
      rq,
      srq: o.srq ?? null,
      sqCq: o.sqCq,
      rqCq,
      remote: 0,
      up: null,
    };
    this.qps.set(id, qp);
    return qp;
  }

  /** A raw MODIFY_QP of `qp` (the body's id is the QP's). */
  modify(qp: Qp, body: Omit<ModifyBody, 'id'>): Promise<RdmaCompletion> {
    return this.r.post(AOp.MODIFY_QP, modifyQpBody({ ...body, id: qp.id }));
  }

  /**
   * RC/UC to RTS towards `dest`, with the masks ibv_rc_pingpong sends:
   * INIT (access), RTR (AV, MTU, dest QPN, RQ PSN, responder depth, min RNR
   * timer), RTS (SQ PSN, timeout, retry count, RNR retry 7 = forever, depth).
   */
  async connect(qp: Qp, dest: Qp | number, o: ConnectOptions = {}): Promise<void> {
    const destId = typeof dest === 'number' ? dest : dest.id;
    const id = qp.id;
    await this.ok(
      AOp.MODIFY_QP,
      modifyQpBody({
        id,
        mask: Mask.STATE | Mask.PKEY_INDEX | Mask.PORT | Mask.ACCESS_FLAGS,
        state: QpS.INIT,
        access: o.access ?? QpF.REMOTE_WRITE | QpF.REMOTE_READ | QpF.REMOTE_ATOMIC,
      }),
      `QP ${id} INIT`,
    );
    const tpl = headerTemplate(o.tpl ?? { sip: v4('10.0.0.1'), dip: v4('10.0.0.1') });
    await this.ok(
      AOp.MODIFY_QP,
      modifyQpBody({
        id,
        mask:
          Mask.STATE |
          Mask.AV |
          Mask.PATH_MTU |
          Mask.DEST_QPN |
          Mask.RQ_PSN |
          Mask.MAX_DEST_RD_ATOMIC |
          Mask.MIN_RNR_TIMER,
        state: QpS.RTR,
        qkeyDest: destId,
        pmtu: o.pmtu ?? 10,
        rqPsn: 0,
        rsqDepth: 1,
        rnrTimer: o.rnrTimer ?? 12,
        ahId: id,
        hdrLen: tpl.length,
        hdrDma: placeTemplate(this.g, tpl),
      }),
      `QP ${id} RTR`,
    );
    await this.ok(
      AOp.MODIFY_QP,
      modifyQpBody({
        id,
        mask: Mask.STATE | Mask.SQ_PSN | Mask.TIMEOUT | Mask.RETRY_CNT | Mask.RNR_RETRY | Mask.MAX_QP_RD_ATOMIC,
        state: QpS.RTS,
        sqPsn: 0,
        timeout: o.timeout ?? 14,
        retryCnt: o.retryCnt ?? 7,
        rnrRetry: o.rnrRetry ?? 7,
        rrqDepth: 1,
      }),
      `QP ${id} RTS`,
    );
    qp.up = { kind: 'connected', dest: destId, o };
  }

  async connectPair(a: Qp, b: Qp, o: ConnectOptions = {}): Promise<void> {
    await this.connect(a, b, o);
    await this.connect(b, a, o);
  }

  /** UD (or GSI) to RTS with a Q_Key, as ib_mad / ibv_ud_pingpong do. */
  async readyUd(qp: Qp, qkey: number): Promise<void> {
    const id = qp.id;
    await this.ok(
      AOp.MODIFY_QP,
      modifyQpBody({ id, mask: Mask.STATE | Mask.PKEY_INDEX | Mask.PORT | Mask.QKEY, state: QpS.INIT, qkeyDest: qkey }),
      `QP ${id} INIT`,
    );
    await this.ok(AOp.MODIFY_QP, modifyQpBody({ id, mask: Mask.STATE, state: QpS.RTR }), `QP ${id} RTR`);
    await this.ok(
      AOp.MODIFY_QP,
      modifyQpBody({ id, mask: Mask.STATE | Mask.SQ_PSN, state: QpS.RTS, sqPsn: 0 }),
      `QP ${id} RTS`,
    );
    qp.up = { kind: 'datagram', qkey };
  }

  /** Move a QP to ERR (the host's own flush). */
  async toErr(qp: Qp): Promise<void> {
    await this.ok(AOp.MODIFY_QP, modifyQpBody({ id: qp.id, mask: Mask.STATE, state: QpS.ERR }), `QP ${qp.id} ERR`);
  }

  /**
   * MODIFY to RESET (host and device indices restart at 0), then up to RTS
   * again as before (a connected QP towards `dest` instead, when given).
   */
  async reset(qp: Qp, dest?: Qp | number): Promise<void> {
    await this.ok(AOp.MODIFY_QP, modifyQpBody({ id: qp.id, mask: Mask.STATE, state: QpS.RESET }), `QP ${qp.id} RESET`);
    qp.sq.pi = 0;
    if (qp.rq) qp.rq.pi = 0;
    qp.remote = 0;
    const up = qp.up;
    if (up?.kind === 'connected') await this.connect(qp, dest ?? up.dest, up.o);
    else if (up?.kind === 'datagram') await this.readyUd(qp, up.qkey);
  }

  // ---- work requests ------------------------------------------------------------------------

  #slot(ring: WorkRing): Buffer {
    const b = this.g.mem(ring.at + (ring.pi << ring.strideLog2), 1 << ring.strideLog2);
    b.fill(0);
    return b;
  }

  #advance(ring: WorkRing): number {
    const slot = ring.pi;
    ring.pi = (ring.pi + 1) & ((1 << ring.depthLog2) - 1);
    return slot;
  }

  ringSq(qp: Qp): void {
    this.g.ringDoorbell(this.r.id.sq.qtype, qp.id, qp.sq.pi);
  }

  ringRq(qp: Qp | Srq): void {
    const ring = 'sq' in qp ? qp.rq! : qp.ring;
    this.g.ringDoorbell(this.r.id.rq.qtype, qp.id, ring.pi);
  }

  /** Write an SGL at 32 (or, SPEC32, lengths at 32 and SGEs at 64). */
  static writeSgl(b: Buffer, sges: readonly Sge[], spec: boolean): void {
    const first = spec ? 64 : 32;
    sges.forEach((s, i) => {
      const at = first + 16 * i;
      const va = BigInt.asUintN(64, BigInt(s.va));
      b.writeUInt32BE(Number(va >> 32n), at);
      b.writeUInt32BE(Number(va & 0xffffffffn), at + 4);
      b.writeUInt32BE(s.len >>> 0, at + 8);
      b.writeUInt32BE(s.lkey >>> 0, at + 12);
      if (spec && i < 8) b.writeUInt32BE(s.len >>> 0, 32 + 4 * i);
    });
  }

  /** Encode a send WQE (ionic RDMA R4.2) into a stride buffer. */
  static encodeSend(b: Buffer, w: SendWr): void {
    b.writeUInt32LE((w.id ?? 0) >>> 0, 0);
    b.writeUInt32LE((w.idHi ?? 0) >>> 0, 4);
    b[8] = w.op;
    const sges = w.sges ?? [];
    let flags =
      (w.signaled === false ? 0 : WqeF.SIGNALED) | (w.solicited ? WqeF.SOLICITED : 0) | (w.fence ? WqeF.FENCE : 0);
    if (w.inline) flags |= WqeF.INLINE;
    if (w.spec) flags |= WqeF.SPEC32;
    b.writeUInt16BE(flags, 10);
    b.writeUInt32BE((w.imm ?? 0) >>> 0, 12);
    const u64 = (at: number, v: number | bigint): void => {
      const x = BigInt.asUintN(64, BigInt(v));
      b.writeUInt32BE(Number(x >> 32n), at);
      b.writeUInt32BE(Number(x & 0xffffffffn), at + 4);
    };
    if (w.regMr) {
      const m = w.regMr;
      b[9] = w.numSge ?? 0;
      u64(16, m.va);
      u64(24, m.length);
      u64(32, m.offset);
      u64(40, m.dma);
      b.writeUInt32BE(m.mapCount >>> 0, 48);
      b.writeUInt16BE(m.flags & 0xffff, 52);
      b[55] = m.pageSizeLog2 ?? 12;
      return;
    }
    if (w.bindMw) {
      const m = w.bindMw;
      b[9] = w.numSge ?? 0;
      u64(16, m.va);
      u64(24, m.length);
      b.writeUInt32BE(m.lkey >>> 0, 32);
      b.writeUInt16BE(m.flags & 0xffff, 36);
      return;
    }
    if (w.atomic) {
      const a = w.atomic;
      b[9] = w.numSge ?? 1;
      u64(16, w.remote?.va ?? 0);
      b.writeUInt32BE((w.remote?.rkey ?? 0) >>> 0, 24);
      u64(28, a.swapAdd);
      u64(36, a.compare ?? 0n);
      VerbsGuest.writeSgl(b.subarray(16), [a.local], false);
      return;
    }
    if (w.ud) {
      b.writeUInt32BE(w.ud.ah >>> 0, 16);
      b.writeUInt32BE(w.ud.qpn >>> 0, 20);
      b.writeUInt32BE(w.ud.qkey >>> 0, 24);
    } else if (w.remote) {
      u64(16, w.remote.va);
      b.writeUInt32BE(w.remote.rkey >>> 0, 24);
    }
    if (w.inline) {
      b[9] = w.numSge ?? 0;
      b.writeUInt32BE((w.length ?? w.inline.length) >>> 0, 28);
      w.inline.copy(b, 32, 0, Math.min(w.inline.length, b.length - 32));
      return;
    }
    b[9] = w.numSge ?? sges.length;
    b.writeUInt32BE((w.length ?? sges.reduce((s, x) => s + x.len, 0)) >>> 0, 28);
    VerbsGuest.writeSgl(b, sges, w.spec ?? false);
  }

  /** Whether the host counts a WQE as remote (MSN-completed): RC/UC and not a local op (ionic RDMA R4.7). */
  static isRemote(qp: Qp, op: number): boolean {
    return (
      (qp.type === QpT.RC || qp.type === QpT.UC) && op !== WOp.LOCAL_INV && op !== WOp.REG_MR && op !== WOp.BIND_MW
    );
  }

  /** Post a send WQE; rings the SQ doorbell unless `ring` is false. Returns the slot. */
  postSend(qp: Qp, w: SendWr, ring = true): number {
    VerbsGuest.encodeSend(this.#slot(qp.sq), w);
    if (VerbsGuest.isRemote(qp, w.op)) qp.remote++;
    const slot = this.#advance(qp.sq);
    if (ring) this.ringSq(qp);
    return slot;
  }

  /** Post raw bytes as a send WQE (the rest of the stride zero). */
  postRaw(qp: Qp, bytes: Buffer, ring = true): number {
    const b = this.#slot(qp.sq);
    bytes.copy(b, 0, 0, Math.min(bytes.length, b.length));
    if (b.length > 8 && VerbsGuest.isRemote(qp, b[8]!)) qp.remote++;
    const slot = this.#advance(qp.sq);
    if (ring) this.ringSq(qp);
    return slot;
  }

  /** Post a receive WQE (ionic RDMA R4.3) on a QP's RQ or an SRQ. */
  postRecv(to: Qp | Srq, w: RecvWr, ring = true): number {
    const r = 'sq' in to ? to.rq! : to.ring;
    const b = this.#slot(r);
    b.writeUInt32LE(w.id >>> 0, 0);
    b.writeUInt32LE((w.idHi ?? 0) >>> 0, 4);
    b[9] = w.sges.length;
    b.writeUInt16BE(w.spec ? WqeF.SPEC32 : 0, 10);
    b.writeUInt32BE(w.sges.reduce((s, x) => s + x.len, 0) >>> 0, 12);
    VerbsGuest.writeSgl(b, w.sges, w.spec ?? false);
    const slot = this.#advance(r);
    if (ring) this.ringRq(to);
    return slot;
  }

  // ---- completions --------------------------------------------------------------------------

  /**
   * Every new CQE on a CQ, by color (flipping at each wrap); then the ring-0
   * doorbell with the new read position, as the driver's poll does.
   */
  drain(cq: Cq | number): Cqe[] {
    const c = typeof cq === 'number' ? this.cqs.get(cq)! : cq;
    const out: Cqe[] = [];
    const mask = (1 << c.depthLog2) - 1;
    for (;;) {
      const e = this.g.mem(c.ring + c.next * 32, 32);
      if ((e[31]! & 1) !== c.color) break;
      out.push(decodeCqeBytes(e));
      c.next = (c.next + 1) & mask;
      if (c.next === 0) c.color ^= 1;
    }
    if (out.length > 0) this.g.ringDoorbell(this.r.id.cq.qtype, c.id, c.next, Ring.INDEX);
    return out;
  }

  /** Drain every CQ this guest made. */
  drainAll(): void {
    for (const cq of this.cqs.values()) this.drain(cq);
  }
}
