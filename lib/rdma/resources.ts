// The RDMA resource manager: every object the guest's RDMA driver creates on
// the device, with its limits, indexed by the ids the driver chose (the data
// path looks objects up by those ids: QP and CQ ids from WQEs and doorbells,
// keys from SGEs).
//
//   PD    one. The ionic driver allocates PDs itself; commands only carry a
//         pd_id, which each object records so the data path can check that a
//         QP and an MR belong together.
//   MR    user MRs, fast-registration MRs and memory windows, by key index
//         (key = index << 8 | tag): memory-keys.ts, with `translate`, which
//         turns (key, va, len) into guest address segments or a status.
//   CQ    ring geometry and table, its EQ, and the device's producer state
//         (the CQ mechanics live in lib/rdma/datapath/cq-ring.ts).
//   QP    type, state (ionic RDMA R5.2 state table), rings, CQs, the attributes
//         MODIFY_QP recorded (PSNs, MTU, Q_Key, dest QP, address vector,
//         access flags, timers), counters.
//   AH    address vectors for UD sends.
//   SRQ   device-assigned ids above the QP range, ring and limit.
//
// Every object gets a `handle`, a serial number unique for the life of the
// server: a QP id is reused after destroy, a handle never is, so the data
// path can tell a stale reference from the object now holding the id.
// Nothing here throws on guest input: operations return a status. The
// records and specs are in records.ts (re-exported here with the keys' types).

import type { AddressVector } from './address';
import { opcodeCounts, qpCounters } from './counters';
import {
  GSI_QPN,
  RDMA_AH_COUNT,
  RDMA_CQ_COUNT,
  RDMA_MAX_PT_RUNS,
  RDMA_MR_COUNT,
  RDMA_QP_COUNT,
  RDMA_SRQ_BASE,
  RDMA_SRQ_COUNT,
  SCRUBBED_QPN,
} from './limits';
import { KeyStatus, MemoryKeys, MrRecord, MrSpec, TranslateOptions } from './memory-keys';
import { PageTable, RunBudget } from './page-table';
import {
  AhRecord,
  CqRecord,
  CqSpec,
  defaultQpAttrs,
  HandleSerial,
  PdRecord,
  QpChanges,
  QpRecord,
  QpSpec,
  RingSpec,
  RmError,
  RmResult,
  rmFail as fail,
  rmOk as ok,
  SrqRecord,
} from './records';
import { QP_ACCESS_MASK, QpFlag, qpTransitionAllowed, QpState, QpType } from './types';

export * from './records';
export { KeyStatus, mrKindOf } from './memory-keys';
export type { MrRecord } from './memory-keys';

interface ResourceLimits {
  readonly qps: number;
  readonly cqs: number;
  readonly mrs: number;
  readonly ahs: number;
  readonly srqs: number;
  readonly ptRuns: number;
}

const DEFAULT_LIMITS: ResourceLimits = {
  qps: RDMA_QP_COUNT,
  cqs: RDMA_CQ_COUNT,
  mrs: RDMA_MR_COUNT,
  ahs: RDMA_AH_COUNT,
  srqs: RDMA_SRQ_COUNT,
  ptRuns: RDMA_MAX_PT_RUNS,
};

export class ResourceManager {
  readonly limits: ResourceLimits;
  readonly pd: PdRecord;
  /** MRs and windows, and key translation. */
  readonly keys: MemoryKeys;
  /** MRs and windows by key index (keys.mrs). */
  readonly mrs: Map<number, MrRecord>;
  readonly cqs = new Map<number, CqRecord>();
  readonly qps = new Map<number, QpRecord>();
  readonly ahs = new Map<number, AhRecord>();
  readonly srqs = new Map<number, SrqRecord>();
  /** Page-table runs of every live table. */
  readonly budget: RunBudget;
  /** WQEs by opcode of the QPs already gone (opcodeTotals adds the live ones). */
  readonly #retiredOpcodes = opcodeCounts();
  readonly #serial = new HandleSerial();

  constructor(limits: Partial<ResourceLimits> = {}) {
    this.limits = { ...DEFAULT_LIMITS, ...limits };
    this.budget = new RunBudget(this.limits.ptRuns);
    this.pd = { handle: this.#serial.take() };
    this.keys = new MemoryKeys(this.limits.mrs, this.budget, this.#serial);
    this.mrs = this.keys.mrs;
  }

  /** Forget every object (RDMA_RESET_LIF, device reset, disconnect). Handles keep counting. */
  reset(): void {
    for (const qp of this.qps.values()) this.#retire(qp);
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

  // ---- MR / MW: memory-keys.ts ----------------------------------------------------------------

  /** Can an MR with this key be created? (cheap checks, before a table is read) */
  checkMr(spec: MrSpec): RmError | null {
    return this.keys.checkMr(spec);
  }

  /** Create an MR or window (MemoryKeys.createMr). */
  createMr(spec: MrSpec, table: PageTable | null): RmResult<MrRecord> {
    return this.keys.createMr(spec, table);
  }

  /** DESTROY_MR: by index (the tag may have changed since creation). */
  destroyMr(key: number): RmResult<MrRecord> {
    return this.keys.destroyMr(key);
  }

  /** The MR/MW a key names, with its tag checked. */
  lookupKey(key: number): MrRecord | KeyStatus {
    return this.keys.lookupKey(key);
  }

  /** (key, va, len) to guest segments appended to `out` as (addr, len) pairs, or why not (MemoryKeys.translate). */
  translate(key: number, va: number, len: number, need: number, opts: TranslateOptions, out: number[]): KeyStatus {
    return this.keys.translate(key, va, len, need, opts, out);
  }

  /** A REG_MR WQE (MemoryKeys.fastRegister). */
  fastRegister(
    key: number,
    newKey: number,
    iova: number,
    length: number,
    access: number,
    zeroBased: boolean,
    table: PageTable,
  ): KeyStatus {
    return this.keys.fastRegister(key, newKey, iova, length, access, zeroBased, table);
  }

  /** LOCAL_INV / SEND_INV. */
  invalidate(key: number): KeyStatus {
    return this.keys.invalidate(key);
  }

  /** BIND_MW (MemoryKeys.bindMw). */
  bindMw(mwKey: number, newKey: number, mrKey: number, va: number, length: number, access: number): KeyStatus {
    return this.keys.bindMw(mwKey, newKey, mrKey, va, length, access);
  }

  // ---- CQ ------------------------------------------------------------------------------------

  checkCq(spec: CqSpec): RmError | null {
    if (!Number.isInteger(spec.id) || spec.id < 0 || spec.id >= this.limits.cqs) return 'bad-id';
    if (this.cqs.has(spec.id)) return 'exists';
    return null;
  }

  createCq(spec: CqSpec, table: PageTable): RmResult<CqRecord> {
    const err = this.checkCq(spec);
    if (err) {
      this.releaseTable(table);
      return fail(err);
    }
    const cq: CqRecord = {
      id: spec.id,
      handle: this.#serial.take(),
      eqId: spec.eqId,
      depthLog2: spec.depthLog2,
      strideLog2: spec.strideLog2,
      table,
      dbid: spec.dbid,
      admin: spec.admin,
      refs: 0,
      prod: 0,
      color: 1,
      cons: 0,
      armed: 0,
      overflowed: false,
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
    if (!Number.isInteger(spec.id) || spec.id <= 0 || spec.id >= this.limits.qps || spec.id === SCRUBBED_QPN)
      return 'bad-id';
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
    if (err) {
      this.releaseTable(sqTable);
      this.releaseTable(rqTable);
      return fail(err);
    }
    const qp: QpRecord = {
      id: spec.id,
      handle: this.#serial.take(),
      type: spec.type,
      pdId: spec.pdId,
      flags: spec.flags & ~QP_ACCESS_MASK,
      privileged: (spec.flags & QpFlag.PRIVILEGED) !== 0,
      remotePrivileged: (spec.flags & QpFlag.REMOTE_PRIVILEGED) !== 0,
      state: QpState.RESET,
      sqCqId: spec.sqCqId,
      rqCqId: spec.rqCqId,
      sq: { depthLog2: spec.sq.depthLog2, strideLog2: spec.sq.strideLog2, table: sqTable, pi: 0, ci: 0 },
      rq:
        spec.rq && rqTable
          ? { depthLog2: spec.rq.depthLog2, strideLog2: spec.rq.strideLog2, table: rqTable, pi: 0, ci: 0 }
          : null,
      srqId: spec.srqId,
      dbid: spec.dbid,
      attrs: defaultQpAttrs(),
      stats: qpCounters(),
      opcodes: opcodeCounts(),
      dp: undefined,
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
        // The host restarts its indices at 0 (ionic RDMA R4.7): so does the device.
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
    this.#retire(qp);
    this.qps.delete(id);
    return ok(qp);
  }

  /** WQEs run by opcode since the server started, every QP's, gone ones included (into `out`). */
  opcodeTotals(out: Float64Array = opcodeCounts()): Float64Array {
    out.set(this.#retiredOpcodes);
    for (const qp of this.qps.values()) for (let i = 0; i < out.length; i++) out[i] += qp.opcodes[i] ?? 0;
    return out;
  }

  #retire(qp: QpRecord): void {
    for (let i = 0; i < this.#retiredOpcodes.length; i++) this.#retiredOpcodes[i] += qp.opcodes[i] ?? 0;
  }

  // ---- AH ------------------------------------------------------------------------------------

  createAh(id: number, pdId: number, av: AddressVector, csumProfile: number): RmResult<AhRecord> {
    if (!Number.isInteger(id) || id < 0 || id >= this.limits.ahs) return fail('bad-id');
    if (this.ahs.has(id)) return fail('exists');
    const ah: AhRecord = { id, handle: this.#serial.take(), pdId, av, csumProfile };
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
  createSrq(
    pdId: number,
    udma: number,
    ring: RingSpec,
    table: PageTable,
    limit: number,
    dbid: number,
  ): RmResult<SrqRecord> {
    const id = this.nextSrqId();
    if (id < 0) {
      this.releaseTable(table);
      return fail('no-space');
    }
    const srq: SrqRecord = {
      id,
      handle: this.#serial.take(),
      pdId,
      udma,
      ring: { depthLog2: ring.depthLog2, strideLog2: ring.strideLog2, table, pi: 0, ci: 0 },
      limit,
      dbid,
      refs: 0,
      dp: undefined,
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
    return {
      qps: this.qps.size,
      cqs: this.cqs.size,
      mrs: this.mrs.size,
      ahs: this.ahs.size,
      srqs: this.srqs.size,
      ptRuns: this.budget.used,
    };
  }
}
