// The RDMA resource manager: every object the guest's RDMA driver creates on
// the device, with its limits, indexed by the ids the driver chose (the data
// path looks objects up by those ids: QP and CQ ids from WQEs and doorbells,
// keys from SGEs).
//
//   PD    one. The ionic driver allocates PDs itself; commands only carry a
//         pd_id, which each object records so the data path can check that a
//         QP and an MR belong together.
//   MR    user MRs, fast-registration MRs and memory windows, by key index
//         (key = index << 8 | tag). Each mapped MR keeps its page table as
//         runs (page-table.ts); `translate` turns (key, va, len) into guest
//         address segments or a status, with the access and bounds checks.
//   CQ    ring geometry and table, its EQ, and the device's producer state
//         (the CQ mechanics live in lib/ionic/rdma/completion-queue.ts).
//   QP    type, state (contract 5.2 state table), rings, CQs, the attributes
//         MODIFY_QP recorded (PSNs, MTU, Q_Key, dest QP, address vector,
//         access flags, timers), counters.
//   AH    address vectors for UD sends.
//   SRQ   device-assigned ids above the QP range, ring and limit.
//
// Every object gets a `handle`, a serial number unique for the life of the
// server: a QP id is reused after destroy, a handle never is, so the data
// path can tell a stale reference from the object now holding the id.
// Nothing here throws on guest input: operations return a status.

import type { AddressVector } from './address';
import { CounterSet, qpCounters } from './counters';
import {
  GSI_QPN, RDMA_AH_COUNT, RDMA_CQ_COUNT, RDMA_MAX_PT_RUNS, RDMA_MR_COUNT, RDMA_QP_COUNT, RDMA_SRQ_BASE, RDMA_SRQ_COUNT,
  SCRUBBED_QPN,
} from './limits';
import { isAddrRange, PageTable, PtStatus, RunBudget } from './page-table';
import { MrFlag, MrKind, QP_ACCESS_MASK, QpFlag, qpTransitionAllowed, QpState, QpType } from './types';

/** Why an operation was refused. */
export type RmError =
  /** The id is outside its range, or reserved. */
  | 'bad-id'
  /** An object with this id exists already. */
  | 'exists'
  /** No object with this id (or key). */
  | 'unknown'
  /** The object is in use (a CQ with QPs, an SRQ with QPs, an admin CQ). */
  | 'busy'
  /** A type the device does not support, or that does not fit the id. */
  | 'bad-type'
  /** The state machine does not allow it. */
  | 'bad-state'
  /** An attribute out of range. */
  | 'bad-attr'
  /** No id or table space left. */
  | 'no-space';

export type RmResult<T> = { readonly ok: true; readonly value: T } | { readonly ok: false; readonly error: RmError };

function ok<T>(value: T): RmResult<T> {
  return { ok: true, value };
}

function fail<T>(error: RmError): RmResult<T> {
  return { ok: false, error };
}

// ---- records -------------------------------------------------------------------------------

/** The one protection domain the device keeps. */
export interface PdRecord {
  readonly handle: number;
}

export interface MrRecord {
  /** Key index (key >> 8), the table slot. */
  readonly index: number;
  /** Current full key (index << 8 | tag); REG_MR and BIND_MW change the tag. */
  key: number;
  readonly kind: MrKind;
  readonly pdId: number;
  readonly handle: number;
  /** MrFlag access bits (bits 0..11). */
  access: number;
  /** Mapped and not invalidated: usable for translation. */
  valid: boolean;
  /** First byte's address (iova), or 0 with ZERO_BASED. */
  iova: number;
  length: number;
  zeroBased: boolean;
  /** The page table; null while unmapped (FRMR before REG_MR, windows). */
  table: PageTable | null;
  /** For a bound window: the MR it opens onto (its handle pins the binding). */
  boundTo: { readonly mr: MrRecord; readonly handle: number } | null;
}

/** A CQ, CQ mechanics state included (the device writes CQEs; lib/ionic/rdma/completion-queue.ts). */
export interface CqRecord {
  readonly id: number;
  readonly handle: number;
  readonly eqId: number;
  readonly depthLog2: number;
  readonly strideLog2: number;
  readonly table: PageTable;
  readonly dbid: number;
  /** Created by RDMA_CREATE_CQ for an admin queue (not by the admin queue's CREATE_CQ). */
  readonly admin: boolean;
  /** QPs and SRQs using it. */
  refs: number;
  /** Next slot the device writes. */
  prod: number;
  /** Color of the current pass: 1 on the first (the ring is zero-filled), flipped at every wrap. */
  color: number;
  /** The host's read position from its last ring-0 doorbell: the free-space bound. */
  cons: number;
  /** 0 not armed, 1 armed for any CQE, 2 armed for solicited (or error) CQEs. */
  armed: 0 | 1 | 2;
  /** Set when a CQE was dropped for lack of room (the CQ overflowed). */
  overflowed: boolean;
}

/** A work ring (SQ, RQ, SRQ): geometry, table, and the indices the doorbells and the data path move. */
export interface QueueRing {
  readonly depthLog2: number;
  readonly strideLog2: number;
  readonly table: PageTable;
  /** Producer index from the last doorbell (16-bit, below the depth). */
  pi: number;
  /** Device consumer index (the data path advances it). */
  ci: number;
}

export interface QpAttrs {
  /** 24-bit PSNs. */
  sqPsn: number;
  rqPsn: number;
  /** log2 of the path MTU in bytes (8..12). */
  pmtu: number;
  /** UD/GSI Q_Key; null until a MODIFY_QP sets one (unset is not 0: a controlled Q_Key then has nothing to use). */
  qkey: number | null;
  /** RC/UC destination QP number. */
  destQpn: number;
  /** QpFlag remote-access bits. */
  access: number;
  sqdNotify: boolean;
  retryCnt: number;
  rnrRetry: number;
  rnrTimer: number;
  timeout: number;
  /** log2 depths as MODIFY_QP sent them: max_rd_atomic = 2^rrq - 1, max_dest_rd_atomic = 2^rsq - 1. */
  rrqDepth: number;
  rsqDepth: number;
  rateLimitKbps: number;
  /** RC/UC destination, from the AV header template. */
  av: AddressVector | null;
  /** The AH id the driver gave this QP's AV (-1 before one). */
  ahId: number;
  /** 802.1p priority (SL) and DSCP the AV asked for; the checksum profile of its template. */
  pcp: number;
  dscp: number;
  csumProfile: number;
}

/** The attributes of a new QP. */
export function defaultQpAttrs(): QpAttrs {
  return {
    sqPsn: 0, rqPsn: 0, pmtu: 10, qkey: null, destQpn: 0, access: 0, sqdNotify: false, retryCnt: 0, rnrRetry: 0, rnrTimer: 0,
    timeout: 0, rrqDepth: 0, rsqDepth: 0, rateLimitKbps: 0, av: null, ahId: -1, pcp: 0, dscp: 0, csumProfile: 0,
  };
}

export interface QpRecord {
  readonly id: number;
  readonly handle: number;
  readonly type: QpType;
  readonly pdId: number;
  /** QpFlag bits fixed at creation (PRIVILEGED, REMOTE_PRIVILEGED, SPEC, PB). */
  readonly flags: number;
  /** Kernel QP: lkey 0 means bus addresses (contract 3.2). */
  readonly privileged: boolean;
  /** May honour rkey 0 (PD created with IB_PD_UNSAFE_GLOBAL_RKEY). */
  readonly remotePrivileged: boolean;
  state: QpState;
  readonly sqCqId: number;
  readonly rqCqId: number;
  readonly sq: QueueRing;
  /** Null when the QP draws receives from an SRQ. */
  readonly rq: QueueRing | null;
  readonly srqId: number | null;
  readonly dbid: number;
  readonly attrs: QpAttrs;
  readonly stats: CounterSet;
  /** The data path's private per-QP state; the resource manager never looks inside. */
  dp: unknown;
}

export interface AhRecord {
  readonly id: number;
  readonly handle: number;
  readonly pdId: number;
  readonly av: AddressVector;
  readonly csumProfile: number;
}

export interface SrqRecord {
  readonly id: number;
  readonly handle: number;
  readonly pdId: number;
  readonly udma: number;
  readonly ring: QueueRing;
  /** Low-watermark limit (0 = not armed). */
  limit: number;
  readonly dbid: number;
  /** QPs bound to it. */
  refs: number;
  dp: unknown;
}

// ---- specs ---------------------------------------------------------------------------------

export interface MrSpec {
  readonly key: number;
  readonly pdId: number;
  /** CREATE_MR flags: access bits plus UKEY_EN / IS_MW / INV_EN. */
  readonly flags: number;
  readonly iova: number;
  readonly length: number;
}

export interface CqSpec {
  readonly id: number;
  readonly eqId: number;
  readonly depthLog2: number;
  readonly strideLog2: number;
  readonly dbid: number;
  readonly admin: boolean;
}

export interface RingSpec {
  readonly depthLog2: number;
  readonly strideLog2: number;
}

export interface QpSpec {
  readonly id: number;
  readonly type: QpType;
  readonly pdId: number;
  readonly flags: number;
  readonly sqCqId: number;
  readonly rqCqId: number;
  readonly sq: RingSpec;
  /** Null when the QP uses `srqId`. */
  readonly rq: RingSpec | null;
  readonly srqId: number | null;
  readonly dbid: number;
}

/** What a MODIFY_QP changes: only the fields present are applied. */
export type QpChanges = Partial<QpAttrs> & { state?: QpState };

/** Result of `translate`. */
export const enum KeyStatus {
  OK = 0,
  /** No MR/MW has that key index (or key 0 where the DMA key is not allowed). */
  NO_KEY = 1,
  /** The index exists with another tag (a stale key). */
  TAG = 2,
  /** The MR/MW is not mapped (FRMR before REG_MR, invalidated, unbound window). */
  INVALID = 3,
  /** The MR lacks an access right the operation needs. */
  ACCESS = 4,
  /** The range is outside the MR. */
  BOUNDS = 5,
  /** The range wraps, or passes 2^53. */
  BAD_RANGE = 6,
  /** The MR belongs to another PD. */
  PD = 7,
}

export interface TranslateOptions {
  /** Key 0 is the identity map (a privileged QP's lkey, a remote-privileged QP's rkey). */
  readonly dmaKey: boolean;
  /** When set, the MR must belong to this PD. */
  readonly pdId?: number;
}

/** Kinds an MR index may hold, by CREATE_MR flags (contract 3.3). */
export function mrKindOf(flags: number): MrKind | null {
  const type = flags & (MrFlag.UKEY_EN | MrFlag.IS_MW | MrFlag.INV_EN);
  switch (type) {
    case 0: return MrKind.USER;
    case MrFlag.UKEY_EN | MrFlag.INV_EN: return MrKind.FRMR;
    case MrFlag.UKEY_EN | MrFlag.IS_MW: return MrKind.MW1;
    case MrFlag.UKEY_EN | MrFlag.IS_MW | MrFlag.INV_EN: return MrKind.MW2;
    default: return null;
  }
}

// ---- the manager ---------------------------------------------------------------------------

export interface ResourceLimits {
  readonly qps: number;
  readonly cqs: number;
  readonly mrs: number;
  readonly ahs: number;
  readonly srqs: number;
  readonly ptRuns: number;
}

export const DEFAULT_LIMITS: ResourceLimits = {
  qps: RDMA_QP_COUNT, cqs: RDMA_CQ_COUNT, mrs: RDMA_MR_COUNT, ahs: RDMA_AH_COUNT, srqs: RDMA_SRQ_COUNT, ptRuns: RDMA_MAX_PT_RUNS,
};

export class ResourceManager {
  readonly limits: ResourceLimits;
  readonly pd: PdRecord;
  readonly mrs = new Map<number, MrRecord>();
  readonly cqs = new Map<number, CqRecord>();
  readonly qps = new Map<number, QpRecord>();
  readonly ahs = new Map<number, AhRecord>();
  readonly srqs = new Map<number, SrqRecord>();
  /** Page-table runs of every live table. */
  readonly budget: RunBudget;
  #serial = 1;

  constructor(limits: Partial<ResourceLimits> = {}) {
    this.limits = { ...DEFAULT_LIMITS, ...limits };
    this.budget = new RunBudget(this.limits.ptRuns);
    this.pd = { handle: this.#serial++ };
  }

  /** Forget every object (RDMA_RESET_LIF, device reset, disconnect). Handles keep counting. */
  reset(): void {
    this.mrs.clear();
    this.cqs.clear();
    this.qps.clear();
    this.ahs.clear();
    this.srqs.clear();
    this.budget.used = 0;
  }

  /** Give back a table's runs (a table built for a command that then failed). */
  releaseTable(t: PageTable | null): void {
    if (t) this.budget.give(t.runs);
  }

  // ---- MR / MW -----------------------------------------------------------------------------

  /** Can an MR with this key be created? (cheap checks, before a table is read) */
  checkMr(spec: MrSpec): RmError | null {
    const index = spec.key >>> 8;
    if (!Number.isInteger(spec.key) || spec.key < 0 || spec.key > 0xffffffff) return 'bad-id';
    if (index === 0 || index >= this.limits.mrs) return 'bad-id';
    if (this.mrs.has(index)) return 'exists';
    if (mrKindOf(spec.flags) === null) return 'bad-type';
    if (!isAddrRange(spec.iova, spec.length)) return 'bad-attr';
    return null;
  }

  /**
   * Create an MR or window. A USER MR comes with its table (mapped now); FRMRs
   * and windows come without (mapped later by the data path). The table's runs
   * must already be charged to `budget`; on failure they are given back.
   */
  createMr(spec: MrSpec, table: PageTable | null): RmResult<MrRecord> {
    const err = this.checkMr(spec);
    const kind = mrKindOf(spec.flags);
    if (err || kind === null) { this.releaseTable(table); return fail(err ?? 'bad-type'); }
    if ((kind === MrKind.USER) !== (table !== null)) { this.releaseTable(table); return fail('bad-attr'); }
    const mr: MrRecord = {
      index: spec.key >>> 8, key: spec.key >>> 0, kind, pdId: spec.pdId, handle: this.#serial++,
      access: spec.flags & 0xfff, valid: kind === MrKind.USER, iova: spec.iova, length: spec.length,
      zeroBased: (spec.flags & MrFlag.ZERO_BASED) !== 0, table, boundTo: null,
    };
    this.mrs.set(mr.index, mr);
    return ok(mr);
  }

  /** DESTROY_MR: by index (the tag may have changed since creation). */
  destroyMr(key: number): RmResult<MrRecord> {
    const mr = this.mrs.get(key >>> 8);
    if (!mr) return fail('unknown');
    this.releaseTable(mr.table);
    this.mrs.delete(mr.index);
    return ok(mr);
  }

  /** The MR/MW a key names, with its tag checked. */
  lookupKey(key: number): MrRecord | KeyStatus {
    const mr = this.mrs.get(key >>> 8);
    if (!mr || key >>> 8 === 0) return KeyStatus.NO_KEY;
    if (mr.key !== key >>> 0) return KeyStatus.TAG;
    return mr;
  }

  /**
   * Translate (key, va, len) for an access needing the MrFlag bits in `need`
   * (LOCAL_WRITE to write into a local buffer; REMOTE_READ / REMOTE_WRITE /
   * REMOTE_ATOMIC for a remote request; 0 to read a local buffer). On OK the
   * guest segments are appended to `out` as flat (addr, len) pairs; on error
   * nothing is appended. A zero-length range needs a valid key and no bounds.
   */
  translate(key: number, va: number, len: number, need: number, opts: TranslateOptions, out: number[]): KeyStatus {
    if (!Number.isSafeInteger(va) || !Number.isSafeInteger(len) || va < 0 || len < 0) return KeyStatus.BAD_RANGE;
    if (key >>> 0 === 0) {
      if (!opts.dmaKey) return KeyStatus.NO_KEY;
      if (!isAddrRange(va, len)) return KeyStatus.BAD_RANGE;
      if (len > 0) out.push(va, len);
      return KeyStatus.OK;
    }
    const mr = this.lookupKey(key);
    if (typeof mr === 'number') return mr;
    if (!mr.valid) return KeyStatus.INVALID;
    if (opts.pdId !== undefined && mr.pdId !== opts.pdId) return KeyStatus.PD;
    if ((need & ~mr.access & 0xfff) !== 0) return KeyStatus.ACCESS;
    const st = this.#bounds(mr, va, len);
    if (st !== KeyStatus.OK || len === 0) return st;
    if (mr.boundTo) {
      // A window: its range lies within the MR it was bound to, at the same addresses.
      const target = mr.boundTo.mr;
      if (target.handle !== mr.boundTo.handle || !target.valid || this.mrs.get(target.index) !== target) return KeyStatus.INVALID;
      const tst = this.#bounds(target, va, len);
      if (tst !== KeyStatus.OK) return tst;
      return this.#walk(target, va, len, out);
    }
    return this.#walk(mr, va, len, out);
  }

  #bounds(mr: MrRecord, va: number, len: number): KeyStatus {
    const base = mr.zeroBased ? 0 : mr.iova;
    if (!isAddrRange(va, len)) return KeyStatus.BAD_RANGE;
    if (va < base || va - base > mr.length || len > mr.length - (va - base)) return KeyStatus.BOUNDS;
    return KeyStatus.OK;
  }

  #walk(mr: MrRecord, va: number, len: number, out: number[]): KeyStatus {
    if (!mr.table) return KeyStatus.INVALID;
    const base = mr.zeroBased ? 0 : mr.iova;
    const st = mr.table.translate(va - base, len, out);
    return st === PtStatus.OK ? KeyStatus.OK : st === PtStatus.BOUNDS ? KeyStatus.BOUNDS : KeyStatus.BAD_RANGE;
  }

  /**
   * Fast registration (a REG_MR WQE): `key` names the FRMR by its index,
   * `newKey` is its new key (same index, new tag). Only the index of `key`
   * counts: kernel consumers bump the key first (ib_update_fast_reg_key) and
   * the driver then sends the *new* key there too (seen with nvme-rdma).
   * The FRMR must be unmapped. The table's runs must be charged already; on
   * failure they are given back.
   */
  fastRegister(key: number, newKey: number, iova: number, length: number, access: number, zeroBased: boolean, table: PageTable): KeyStatus {
    const index = key >>> 8;
    const mr = index === 0 ? undefined : this.mrs.get(index);
    const refuse = (s: KeyStatus): KeyStatus => { this.releaseTable(table); return s; };
    if (!mr) return refuse(KeyStatus.NO_KEY);
    if (mr.kind !== MrKind.FRMR || newKey >>> 8 !== mr.index) return refuse(KeyStatus.NO_KEY);
    if (mr.valid) return refuse(KeyStatus.INVALID);
    if (!isAddrRange(iova, length) || table.length !== length) return refuse(KeyStatus.BAD_RANGE);
    this.releaseTable(mr.table);
    mr.key = newKey >>> 0;
    mr.iova = iova;
    mr.length = length;
    mr.access = access & 0xfff;
    mr.zeroBased = zeroBased;
    mr.table = table;
    mr.valid = true;
    return KeyStatus.OK;
  }

  /** LOCAL_INV / SEND_INV: only FRMRs and type-2 windows may be invalidated. */
  invalidate(key: number): KeyStatus {
    const mr = this.lookupKey(key);
    if (typeof mr === 'number') return mr;
    if (mr.kind !== MrKind.FRMR && mr.kind !== MrKind.MW2) return KeyStatus.ACCESS;
    mr.valid = false;
    mr.boundTo = null;
    return KeyStatus.OK;
  }

  /**
   * BIND_MW: open window `mwKey` (re-keyed to `newKey`) onto [va, va + length)
   * of MR `mrKey` with `access`. Length 0 on a type-1 window unbinds it. The MR
   * must be valid, allow MW_BIND, and cover the range; a window cannot grant
   * remote write or atomic access on an MR without local write.
   */
  bindMw(mwKey: number, newKey: number, mrKey: number, va: number, length: number, access: number): KeyStatus {
    const mw = this.lookupKey(mwKey);
    if (typeof mw === 'number') return mw;
    if ((mw.kind !== MrKind.MW1 && mw.kind !== MrKind.MW2) || newKey >>> 8 !== mw.index) return KeyStatus.NO_KEY;
    if (mw.kind === MrKind.MW1 && length === 0) {
      mw.valid = false;
      mw.boundTo = null;
      mw.key = newKey >>> 0;
      return KeyStatus.OK;
    }
    const mr = this.lookupKey(mrKey);
    if (typeof mr === 'number') return mr;
    if (!mr.valid || mr.boundTo || mr.kind === MrKind.MW1 || mr.kind === MrKind.MW2) return KeyStatus.INVALID;
    if (!(mr.access & MrFlag.MW_BIND)) return KeyStatus.ACCESS;
    if ((access & (MrFlag.REMOTE_WRITE | MrFlag.REMOTE_ATOMIC)) && !(mr.access & MrFlag.LOCAL_WRITE)) return KeyStatus.ACCESS;
    if (mr.pdId !== mw.pdId && mw.kind === MrKind.MW1) return KeyStatus.PD;
    const st = this.#bounds(mr, va, length);
    if (st !== KeyStatus.OK) return st;
    mw.key = newKey >>> 0;
    mw.iova = va;
    mw.length = length;
    mw.zeroBased = false;
    mw.access = access & 0xfff;
    mw.boundTo = { mr, handle: mr.handle };
    mw.valid = true;
    return KeyStatus.OK;
  }

  // ---- CQ ------------------------------------------------------------------------------------

  checkCq(spec: CqSpec): RmError | null {
    if (!Number.isInteger(spec.id) || spec.id < 0 || spec.id >= this.limits.cqs) return 'bad-id';
    if (this.cqs.has(spec.id)) return 'exists';
    return null;
  }

  createCq(spec: CqSpec, table: PageTable): RmResult<CqRecord> {
    const err = this.checkCq(spec);
    if (err) { this.releaseTable(table); return fail(err); }
    const cq: CqRecord = {
      id: spec.id, handle: this.#serial++, eqId: spec.eqId, depthLog2: spec.depthLog2, strideLog2: spec.strideLog2, table,
      dbid: spec.dbid, admin: spec.admin, refs: 0, prod: 0, color: 1, cons: 0, armed: 0, overflowed: false,
    };
    this.cqs.set(cq.id, cq);
    return ok(cq);
  }

  /** DESTROY_CQ: refused while a QP or SRQ uses it, and for admin CQs (their queue needs them). */
  destroyCq(id: number): RmResult<CqRecord> {
    const cq = this.cqs.get(id);
    if (!cq) return fail('unknown');
    if (cq.admin || cq.refs > 0) return fail('busy');
    this.releaseTable(cq.table);
    this.cqs.delete(id);
    return ok(cq);
  }

  // ---- QP ------------------------------------------------------------------------------------

  checkQp(spec: QpSpec): RmError | null {
    if (!Number.isInteger(spec.id) || spec.id <= 0 || spec.id >= this.limits.qps || spec.id === SCRUBBED_QPN) return 'bad-id';
    if (this.qps.has(spec.id)) return 'exists';
    if (spec.type !== QpType.RC && spec.type !== QpType.UC && spec.type !== QpType.UD) return 'bad-type';
    if (spec.id === GSI_QPN && spec.type !== QpType.UD) return 'bad-type';
    for (const cqId of [spec.sqCqId, spec.rqCqId]) {
      const cq = this.cqs.get(cqId);
      if (!cq) return 'unknown';
      if (cq.admin) return 'busy';
    }
    if ((spec.rq === null) === (spec.srqId === null)) return 'bad-attr';
    if (spec.srqId !== null && !this.srqs.has(spec.srqId)) return 'unknown';
    return null;
  }

  /** Create a QP in RESET. The ring tables' runs must be charged; on failure they are given back. */
  createQp(spec: QpSpec, sqTable: PageTable, rqTable: PageTable | null): RmResult<QpRecord> {
    const err = this.checkQp(spec) ?? ((spec.rq === null) !== (rqTable === null) ? 'bad-attr' : null);
    if (err) { this.releaseTable(sqTable); this.releaseTable(rqTable); return fail(err); }
    const qp: QpRecord = {
      id: spec.id, handle: this.#serial++, type: spec.type, pdId: spec.pdId, flags: spec.flags & ~QP_ACCESS_MASK,
      privileged: (spec.flags & QpFlag.PRIVILEGED) !== 0, remotePrivileged: (spec.flags & QpFlag.REMOTE_PRIVILEGED) !== 0,
      state: QpState.RESET, sqCqId: spec.sqCqId, rqCqId: spec.rqCqId,
      sq: { depthLog2: spec.sq.depthLog2, strideLog2: spec.sq.strideLog2, table: sqTable, pi: 0, ci: 0 },
      rq: spec.rq && rqTable ? { depthLog2: spec.rq.depthLog2, strideLog2: spec.rq.strideLog2, table: rqTable, pi: 0, ci: 0 } : null,
      srqId: spec.srqId, dbid: spec.dbid, attrs: defaultQpAttrs(), stats: qpCounters(), dp: undefined,
    };
    this.cqs.get(spec.sqCqId)!.refs++;
    this.cqs.get(spec.rqCqId)!.refs++;
    if (spec.srqId !== null) this.srqs.get(spec.srqId)!.refs++;
    this.qps.set(qp.id, qp);
    return ok(qp);
  }

  /**
   * Apply a MODIFY_QP. The state change is checked against the IB state table
   * (from the state the device recorded); the caller has range-checked the
   * values. Nothing changes on refusal. Returns the state before.
   */
  modifyQp(id: number, changes: QpChanges): RmResult<QpState> {
    const qp = this.qps.get(id);
    if (!qp) return fail('unknown');
    const from = qp.state;
    if (changes.state !== undefined && !qpTransitionAllowed(from, changes.state)) return fail('bad-state');
    const { state, ...attrs } = changes;
    Object.assign(qp.attrs, attrs);
    if (state !== undefined) {
      qp.state = state;
      if (state === QpState.RESET) {
        // The host restarts its indices at 0 (contract 4.7): so does the device.
        qp.sq.pi = qp.sq.ci = 0;
        if (qp.rq) qp.rq.pi = qp.rq.ci = 0;
      }
    }
    return ok(from);
  }

  destroyQp(id: number): RmResult<QpRecord> {
    const qp = this.qps.get(id);
    if (!qp) return fail('unknown');
    this.releaseTable(qp.sq.table);
    this.releaseTable(qp.rq?.table ?? null);
    for (const cqId of [qp.sqCqId, qp.rqCqId]) {
      const cq = this.cqs.get(cqId);
      if (cq) cq.refs = Math.max(0, cq.refs - 1);
    }
    if (qp.srqId !== null) {
      const srq = this.srqs.get(qp.srqId);
      if (srq) srq.refs = Math.max(0, srq.refs - 1);
    }
    this.qps.delete(id);
    return ok(qp);
  }

  // ---- AH ------------------------------------------------------------------------------------

  createAh(id: number, pdId: number, av: AddressVector, csumProfile: number): RmResult<AhRecord> {
    if (!Number.isInteger(id) || id < 0 || id >= this.limits.ahs) return fail('bad-id');
    if (this.ahs.has(id)) return fail('exists');
    const ah: AhRecord = { id, handle: this.#serial++, pdId, av, csumProfile };
    this.ahs.set(id, ah);
    return ok(ah);
  }

  destroyAh(id: number): RmResult<AhRecord> {
    const ah = this.ahs.get(id);
    if (!ah) return fail('unknown');
    this.ahs.delete(id);
    return ok(ah);
  }

  // ---- SRQ -----------------------------------------------------------------------------------

  /** The id the next SRQ would get (the device assigns them), or -1 when all are in use. */
  nextSrqId(): number {
    for (let i = 0; i < this.limits.srqs; i++) if (!this.srqs.has(RDMA_SRQ_BASE + i)) return RDMA_SRQ_BASE + i;
    return -1;
  }

  /** Create an SRQ with a device-assigned id (above the QP range). */
  createSrq(pdId: number, udma: number, ring: RingSpec, table: PageTable, limit: number, dbid: number): RmResult<SrqRecord> {
    const id = this.nextSrqId();
    if (id < 0) { this.releaseTable(table); return fail('no-space'); }
    const srq: SrqRecord = {
      id, handle: this.#serial++, pdId, udma, ring: { depthLog2: ring.depthLog2, strideLog2: ring.strideLog2, table, pi: 0, ci: 0 },
      limit, dbid, refs: 0, dp: undefined,
    };
    this.srqs.set(id, srq);
    return ok(srq);
  }

  modifySrq(id: number, limit: number): RmResult<SrqRecord> {
    const srq = this.srqs.get(id);
    if (!srq) return fail('unknown');
    srq.limit = limit;
    return ok(srq);
  }

  destroySrq(id: number): RmResult<SrqRecord> {
    const srq = this.srqs.get(id);
    if (!srq) return fail('unknown');
    if (srq.refs > 0) return fail('busy');
    this.releaseTable(srq.ring.table);
    this.srqs.delete(id);
    return ok(srq);
  }

  /** Object counts, for logs, gauges and tests. */
  counts(): { qps: number; cqs: number; mrs: number; ahs: number; srqs: number; ptRuns: number } {
    return { qps: this.qps.size, cqs: this.cqs.size, mrs: this.mrs.size, ahs: this.ahs.size, srqs: this.srqs.size, ptRuns: this.budget.used };
  }
}
