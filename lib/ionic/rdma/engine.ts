// The RDMA half of the ionic device: the bootstrap commands (50-53, from the
// Ethernet admin queue or the dev-cmd registers), the RDMA doorbell types,
// the event queues and admin queues, and the resource manager behind them.
//
// Bootstrap (ionic RDMA R0 step 3, 1.1-1.3), answered with Ethernet status codes:
//   50 RDMA_RESET_LIF      forget every EQ, AQ, CQ, QP, MR, AH, SRQ
//   51 RDMA_CREATE_EQ      qid = EQ id, cid = interrupt vector, contiguous ring of 4-byte EQEs
//   52 RDMA_CREATE_CQ      qid = CQ id, cid = EQ id: the CQ of the next admin queue
//   53 RDMA_CREATE_ADMINQ  qid = AQ id, cid = its CQ id, contiguous ring of 64-byte strides
// Doorbells (ionic RDMA R0.2): the value carries qid (bits 24..47), ring (16..18)
// and index (0..15); device.ts hands every type >= 5 here.
//
// The engine is also what the data path plugs into (lib/rdma/hooks.ts): it
// calls `hooks` on doorbells and object changes, and offers the CQ and QP
// events (the data path writes the CQEs into the rings itself).

import type { Logger } from '../../log';
import { nullLogger, RateLimiter, warnLimited } from '../../log';
import { DeviceCounter, deviceCounters, QpCounter } from '../../rdma/counters';
import type { DataPathDevice, DataPathHooks } from '../../rdma/hooks';
import {
  RDMA_AQ_COUNT,
  RDMA_AQ_STRIDE_LOG2,
  RDMA_CQE_STRIDE_LOG2,
  RDMA_EQE_STRIDE_LOG2,
  RDMA_MAX_DEPTH_LOG2,
  RDMA_MIN_DEPTH_LOG2,
  RDMA_NDBPGS_PER_LIF,
  RDMA_SRQ_BASE,
} from '../../rdma/limits';
import { isAddrRange, PageTable } from '../../rdma/page-table';
import { ResourceManager } from '../../rdma/resources';
import type { CqRecord } from '../../rdma/resources';
import type { GuestMemory } from '../../vfio-user/guest-memory';
import { MemStatus } from '../../vfio-user/guest-memory';
import { Opcode, Status } from '../constants';
import { FaultInjector } from '../fault-injection';
import type { InterruptController } from '../interrupts';
import type { NicProfile } from '../profile';
import { executeAdmin } from './admin-commands';
import { AdminEnv, AdminOutcome, AdminResult, isAdminWork } from './admin-outcome';
import { contain } from '../../guard';

/** What a command that threw (a bug) completes with. */
const BUG_RESULT: AdminResult = { status: AdminStatus.BAD_CMD, length: 0 };
import { AdminQueueContext, RdmaAdminQueue } from './admin-queue';
import { CqEvents, CqPost, cqDoorbell, DbRing, postCqe } from '../../rdma/datapath/cq-ring';
import { ADMIN_BUDGET, AdminStatus, EqeCode, EqeType, RdmaQType } from './constants';
import { EventQueue } from './event-queue';
import { rdmaEqCount } from './identity';
import { ionic_rdma_queue_cmd, ionic_rdma_reset_cmd } from './layouts';
import { getField, U64_UNSAFE } from '../../../protocol/field';

interface RdmaEngineOptions {
  readonly profile: NicProfile;
  memory(): GuestMemory | undefined;
  readonly interrupts: InterruptController;
  readonly faults?: FaultInjector;
  readonly log?: Logger;
}

export class RdmaEngine implements DataPathDevice {
  readonly rm = new ResourceManager();
  readonly counters = deviceCounters();
  readonly eqs = new Map<number, EventQueue>();
  readonly aqs = new Map<number, RdmaAdminQueue>();
  /** Event queue ids 0..eqCount-1 are accepted. */
  readonly eqCount: number;
  /** Where a CQ raises its events: an EQE on its EQ and the EQ's interrupt (the data path posts its CQEs itself). */
  readonly cqEvents: CqEvents;
  #hooks: DataPathHooks = {};
  /** The same hooks, each wrapped so a throw is logged as our bug and never reaches the guest. */
  #safe: DataPathHooks = {};
  readonly #interrupts: InterruptController;
  readonly #memory: () => GuestMemory | undefined;
  readonly #faults: FaultInjector;
  readonly #log: Logger;
  readonly #limiter = new RateLimiter();
  readonly #aqCtx: AdminQueueContext;
  readonly #env: AdminEnv;

  constructor(opts: RdmaEngineOptions) {
    this.eqCount = rdmaEqCount(opts.profile);
    this.#interrupts = opts.interrupts;
    this.#memory = opts.memory;
    this.#faults = opts.faults ?? FaultInjector.none();
    this.#log = opts.log ?? nullLogger;
    const self = this;
    this.cqEvents = {
      notify(cq) {
        self.#cqEvent(cq, EqeCode.CQ_NOTIFY);
      },
      overflow(cq) {
        self.#cqEvent(cq, EqeCode.CQ_ERR);
      },
    };
    this.#env = {
      rm: this.rm,
      eqs: this.eqs,
      counters: this.counters,
      faults: this.#faults,
      log: this.#log,
      limiter: this.#limiter,
      get hooks() {
        return self.#safe;
      },
    };
    this.#aqCtx = {
      budget: ADMIN_BUDGET,
      log: this.#log,
      memory: () => this.#memory(),
      execute: (aq, mem, op, body) => this.#execute(aq, mem, op, body),
      postCqe: (cq, cqe) => {
        const mem = this.#memory();
        if (!mem) return CqPost.DMA_ERROR;
        const r = postCqe(mem, cq, cqe, true, this.cqEvents);
        // Every command completed counts, refused ones (MSG_TOO_BIG included) as errors too.
        this.counters.inc(DeviceCounter.admin_commands);
        if (cqe.error) this.counters.inc(DeviceCounter.admin_errors);
        if (r === CqPost.OK) this.counters.inc(DeviceCounter.admin_cqes);
        return r;
      },
      alive: (aq) => this.aqs.get(aq.id) === aq,
      failed: (aq, why) =>
        warnLimited(this.#log, this.#limiter, 'rdma-aq-dead', `ionic rdma: admin queue ${aq.id} stopped: ${why}`),
    };
  }

  memory(): GuestMemory | undefined {
    return this.#memory();
  }

  get log(): Logger {
    return this.#log;
  }

  /** The data path's hooks (none until it plugs in). */
  get hooks(): DataPathHooks {
    return this.#hooks;
  }

  set hooks(h: DataPathHooks) {
    this.#hooks = h;
    const safe: Record<string, unknown> = {};
    for (const [name, fn] of Object.entries(h)) {
      if (typeof fn !== 'function') continue;
      safe[name] = (...args: unknown[]): unknown => {
        try {
          return (fn as (...a: unknown[]) => unknown).apply(h, args);
        } catch (e) {
          this.#log.error(`ionic rdma: data path hook ${name} threw: ${(e as Error).stack ?? String(e)}`);
          // A veto that throws does not refuse the guest's command.
          return name === 'modifyAllowed' ? true : undefined;
        }
      };
    }
    this.#safe = safe as DataPathHooks;
  }

  /** Forget every RDMA object (RDMA_RESET_LIF, LIF_RESET, device reset, disconnect). */
  reset(): void {
    this.eqs.clear();
    for (const aq of this.aqs.values()) aq.abort();
    this.aqs.clear();
    this.rm.reset();
    this.#safe.reset?.();
  }

  // ---- bootstrap commands ------------------------------------------------------------------

  /** Opcodes 50-53; the result is the completion's status. */
  bootstrap(opcode: number, cmd: Buffer): number {
    switch (opcode) {
      case Opcode.RDMA_RESET_LIF:
        if (getField(cmd, 0, ionic_rdma_reset_cmd.lif_index) !== 0) return Status.ENOENT;
        this.#log.debug('ionic rdma: RDMA_RESET_LIF');
        this.reset();
        return Status.SUCCESS;
      case Opcode.RDMA_CREATE_EQ:
        return this.#createEq(cmd);
      case Opcode.RDMA_CREATE_CQ:
        return this.#createAdminCq(cmd);
      case Opcode.RDMA_CREATE_ADMINQ:
        return this.#createAdminQueue(cmd);
      default:
        return Status.EOPCODE;
    }
  }

  /** Common checks of the rdma_queue command: the ring's address, or the status refusing it. */
  #queueRing(cmd: Buffer, strideLog2: number, write: boolean): { readonly addr: number } | { readonly status: number } {
    if (getField(cmd, 0, ionic_rdma_queue_cmd.dbid) >= RDMA_NDBPGS_PER_LIF) return { status: Status.EINVAL };
    const depth = getField(cmd, 0, ionic_rdma_queue_cmd.depth_log2);
    if (
      depth < RDMA_MIN_DEPTH_LOG2 ||
      depth > RDMA_MAX_DEPTH_LOG2 ||
      getField(cmd, 0, ionic_rdma_queue_cmd.stride_log2) !== strideLog2
    )
      return { status: Status.EINVAL };
    const addr = getField(cmd, 0, ionic_rdma_queue_cmd.dma_addr);
    const size = 2 ** (depth + strideLog2);
    if (addr === U64_UNSAFE || addr <= 0 || !isAddrRange(addr, size)) return { status: Status.BAD_ADDR };
    const mem = this.#memory();
    const probe: Buffer[] = [];
    if (!mem || mem.slices(addr, size, write, probe) !== MemStatus.OK) return { status: Status.BAD_ADDR };
    return { addr };
  }

  #createEq(cmd: Buffer): number {
    const id = getField(cmd, 0, ionic_rdma_queue_cmd.qid_ver);
    const vector = getField(cmd, 0, ionic_rdma_queue_cmd.cid);
    if (getField(cmd, 0, ionic_rdma_queue_cmd.lif_index) !== 0) return Status.ENOENT;
    if (id >= this.eqCount) return Status.EQID;
    if (this.eqs.has(id)) return Status.EEXIST;
    if (vector >= this.#interrupts.vectors) return Status.EINVAL;
    const ring = this.#queueRing(cmd, RDMA_EQE_STRIDE_LOG2, true);
    if ('status' in ring) return ring.status;
    this.eqs.set(id, new EventQueue(id, vector, ring.addr, getField(cmd, 0, ionic_rdma_queue_cmd.depth_log2)));
    this.#log.debug(
      `ionic rdma: EQ ${id} on vector ${vector}, ${2 ** getField(cmd, 0, ionic_rdma_queue_cmd.depth_log2)} entries`,
    );
    return Status.SUCCESS;
  }

  #createAdminCq(cmd: Buffer): number {
    const id = getField(cmd, 0, ionic_rdma_queue_cmd.qid_ver);
    const eqId = getField(cmd, 0, ionic_rdma_queue_cmd.cid);
    const spec = {
      id,
      eqId,
      depthLog2: getField(cmd, 0, ionic_rdma_queue_cmd.depth_log2),
      strideLog2: RDMA_CQE_STRIDE_LOG2,
      dbid: getField(cmd, 0, ionic_rdma_queue_cmd.dbid),
      admin: true,
    };
    if (getField(cmd, 0, ionic_rdma_queue_cmd.lif_index) !== 0) return Status.ENOENT;
    const err = this.rm.checkCq(spec);
    if (err === 'bad-id') return Status.EQID;
    if (err === 'exists') return Status.EEXIST;
    if (!this.eqs.has(eqId)) return Status.ENOENT;
    const ring = this.#queueRing(cmd, RDMA_CQE_STRIDE_LOG2, true);
    if ('status' in ring) return ring.status;
    const t = PageTable.contiguous(ring.addr, 2 ** (spec.depthLog2 + RDMA_CQE_STRIDE_LOG2));
    if (!t || !this.rm.budget.take(1)) return Status.ENOSPC;
    const r = this.rm.createCq(spec, t);
    return r.ok ? Status.SUCCESS : Status.EINVAL;
  }

  #createAdminQueue(cmd: Buffer): number {
    const id = getField(cmd, 0, ionic_rdma_queue_cmd.qid_ver);
    const cqId = getField(cmd, 0, ionic_rdma_queue_cmd.cid);
    if (getField(cmd, 0, ionic_rdma_queue_cmd.lif_index) !== 0) return Status.ENOENT;
    if (id >= RDMA_AQ_COUNT) return Status.EQID;
    if (this.aqs.has(id)) return Status.EEXIST;
    const cq = this.rm.cqs.get(cqId);
    if (!cq) return Status.ENOENT;
    if (!cq.admin) return Status.EINVAL;
    for (const aq of this.aqs.values()) if (aq.cq === cq) return Status.EBUSY;
    const ring = this.#queueRing(cmd, RDMA_AQ_STRIDE_LOG2, false);
    if ('status' in ring) return ring.status;
    this.aqs.set(id, new RdmaAdminQueue(id, ring.addr, getField(cmd, 0, ionic_rdma_queue_cmd.depth_log2), cq));
    this.#log.info(`ionic rdma: admin queue ${id} ready (CQ ${cqId}, EQ ${cq.eqId}, ${this.eqs.size} EQs)`);
    return Status.SUCCESS;
  }

  // ---- admin commands ------------------------------------------------------------------------

  #execute(aq: RdmaAdminQueue, mem: GuestMemory, op: number, body: Buffer): AdminOutcome {
    let r: AdminOutcome = BUG_RESULT;
    // Our bug, not the guest's: the command is refused, the device stays up.
    contain(this.#log, `RDMA admin command ${op} (queue ${aq.id})`, () => {
      r = executeAdmin(this.#env, mem, op, body);
    });
    if (isAdminWork(r)) {
      const work = r;
      return {
        step: (m) => {
          let s: AdminResult | null = BUG_RESULT;
          contain(
            this.#log,
            `RDMA admin command ${op} (queue ${aq.id}, continued)`,
            () => {
              s = work.step(m);
            },
            () => work.abort(),
          );
          return s;
        },
        abort: () => work.abort(),
      };
    }
    if (r.status !== AdminStatus.OK) {
      if (this.#log.debugEnabled) this.#log.debug(`ionic rdma: admin op ${op} on queue ${aq.id} -> status ${r.status}`);
    }
    return r;
  }

  // ---- doorbells -----------------------------------------------------------------------------

  /** A doorbell of an RDMA queue type (>= 5). */
  doorbell(qtype: number, qid: number, ring: number, index: number): void {
    let ok = false;
    switch (qtype) {
      case RdmaQType.AQ: {
        this.counters.inc(DeviceCounter.doorbells_aq);
        const aq = this.aqs.get(qid);
        ok = aq !== undefined && ring === DbRing.INDEX && aq.doorbell(index, this.#aqCtx);
        break;
      }
      case RdmaQType.CQ: {
        this.counters.inc(DeviceCounter.doorbells_cq);
        const cq = this.rm.cqs.get(qid);
        if (!cq) break;
        if (ring !== DbRing.INDEX) this.counters.inc(DeviceCounter.cq_arms);
        ok = cqDoorbell(cq, ring, index, this.cqEvents);
        if (ok && ring === DbRing.INDEX) this.#cqConsumed(cq);
        break;
      }
      case RdmaQType.SQ: {
        this.counters.inc(DeviceCounter.doorbells_sq);
        const qp = this.rm.qps.get(qid);
        if (!qp || ring !== DbRing.INDEX || index >= 2 ** qp.sq.depthLog2) break;
        qp.sq.pi = index;
        qp.stats.inc(QpCounter.doorbell_send);
        ok = true;
        this.#safe.sqDoorbell?.(qp);
        break;
      }
      case RdmaQType.RQ: {
        this.counters.inc(DeviceCounter.doorbells_rq);
        if (ring !== DbRing.INDEX) break;
        if (qid >= RDMA_SRQ_BASE) {
          const srq = this.rm.srqs.get(qid);
          if (!srq || index >= 2 ** srq.ring.depthLog2) break;
          srq.ring.pi = index;
          ok = true;
          this.#safe.srqDoorbell?.(srq);
          break;
        }
        const qp = this.rm.qps.get(qid);
        const rq = qp?.rq;
        if (!qp || !rq || index >= 2 ** rq.depthLog2) break;
        rq.pi = index;
        qp.stats.inc(QpCounter.doorbell_recv);
        ok = true;
        this.#safe.rqDoorbell?.(qp);
        break;
      }
      default:
        // EQs are never rung; anything else is not a queue type of ours.
        break;
    }
    if (!ok) {
      this.counters.inc(DeviceCounter.doorbells_bad);
      // Quiet: a driver unloading after RDMA_RESET_LIF still arms the CQs the device has
      // forgotten (seen with the stock ionic_rdma). Counted in doorbells_bad either way.
      if (this.#log.debugEnabled && this.#limiter.allow('rdma-db') >= 0)
        this.#log.debug(`ionic rdma: doorbell type ${qtype} qid ${qid} ring ${ring} index ${index} ignored`);
    }
  }

  /** A ring-0 CQ doorbell: an admin CQ may have room for its queue again; a data CQ tells the data path. */
  #cqConsumed(cq: CqRecord): void {
    if (cq.admin) {
      for (const aq of this.aqs.values()) if (aq.cq === cq) aq.run(this.#aqCtx);
      return;
    }
    this.#safe.cqConsumed?.(cq);
  }

  // ---- events, for the CQ mechanics and the data path ------------------------------------------

  #cqEvent(cq: CqRecord, code: number): void {
    const eq = this.eqs.get(cq.eqId);
    const mem = this.#memory();
    if (!eq || !mem) return;
    if (eq.post(mem, this.#interrupts, EqeType.CQ, code, cq.id)) this.counters.inc(DeviceCounter.eq_events);
    else
      warnLimited(
        this.#log,
        this.#limiter,
        'rdma-eq-dead',
        `ionic rdma: EQ ${eq.id} ring is not guest memory; events lost`,
      );
  }

  /** An asynchronous QP event on the first EQ (EQs 0 and 1 are the driver's async ones; any EQ works). */
  qpEvent(qpId: number, code: number): void {
    const mem = this.#memory();
    const eq = this.eqs.get(0) ?? this.eqs.values().next().value;
    if (!eq || !mem) return;
    if (eq.post(mem, this.#interrupts, EqeType.QP, code, qpId)) this.counters.inc(DeviceCounter.eq_events);
  }
}
