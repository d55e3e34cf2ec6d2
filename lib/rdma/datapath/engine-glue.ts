// The loopback data path: plugs into the RDMA engine's hooks (lib/rdma/hooks.ts)
// and executes send-queue WQEs between QPs of the same device.
//
// One translation model: every key goes through the resource manager's
// `rm.translate` (flat (addr, len) pairs), turned into guest-memory views
// here; `copySlices` moves the bytes between views (no bounce buffer).
//
// Scheduling: a QP with work goes on one ready queue, drained in order by a
// single loop (never by recursion: an event that makes more QPs ready while
// the loop runs, such as a responder going to ERR and waking 4,000 waiting
// senders, only appends to the queue). Each QP runs at most BUDGET WQEs per
// visit and goes to the back if it has more; one turn runs at most
// TURN_BUDGET WQEs in all, then the loop yields (setImmediate). Every visit
// runs under the last-resort guard: a bug becomes that QP's ERR, not a crash.
// Completions follow contract 4.7:
//   remote WQEs (RC/UC, not a local op)  SEND_MSN CQE, msn = sequence + 1
//   everything else (UD/GSI, local ops)  SEND_NPG CQE with the wqe_id
// one CQE per WQE (always safe), wqe_id echoed verbatim. An error on an RC
// WQE completes it with the error bit and moves the QP to ERR (the host
// flushes the rest). A SEND to an RC/UC QP with no posted receive is RNR
// NAKed: with rnr_retry 7 it waits for the destination's RQ doorbell; with
// 0..6 it retries after the responder's min_rnr_timer that many times (an RQ
// doorbell in between resumes it at once), then completes with
// RNR_RETRY_EXCEEDED. A WQE whose completion (or its receive's) would find its
// CQ full is not started: the QP waits for the host's ring-0 CQ doorbell, so no
// completion is lost. Moving a QP to ERR posts the flush hints (an NPG and a
// RECV with WQE_FLUSHED) for each non-empty queue.

import type { DataPathDevice, DataPathHooks } from '../hooks';
import type { QpRecord, QueueRing, SrqRecord } from '../resources';
import { KeyStatus } from '../resources';
import { QpState, QpType } from '../types';
import { DC, QC } from '../counters';
import { GSI_QPN, RDMA_MAX_MR_PAGES, RDMA_MAX_MSG_BYTES, RDMA_MAX_STRIDE_LOG2, RDMA_PT_ENTRIES_PER_TURN, RDMA_SRQ_BASE } from '../limits';
import { PageListLoader, PageTable, PageTableBuilder } from '../page-table';
import { contain } from '../../guard';
import { MemStatus } from '../../vfio-user/guest-memory';
import type { GuestMemory } from '../../vfio-user/guest-memory';
import { getRawWord } from '../../../protocol/field';
import { CqeType, IonicStatus, newCqeRecord, RecvOp } from './cqe';
import { decodeRecvWqe, decodeSendWqe, newRecvWqe, newSendWqe, RecvWqe, SendWqe, Sge } from './wqe-decode';
import { ATOMIC_SIZE, ionic_v1_base_hdr, MrFlag, QpFlag, SendVerb } from './wqe-layout';
import { copySlices } from './copy';
import { datagramAccepted, effectiveQkey, GRH_SIZE, writeGrh } from './datagram';

/** WQEs one QP runs per visit before the next ready QP gets its turn. */
export const BUDGET = 64;
/** WQEs all QPs together run per event-loop turn before yielding. */
export const TURN_BUDGET = 256;

/** Page sizes a REG_MR may name (4 KiB to 1 GiB; ib_map_mr_sg picks any power of two). */
const REG_MR_MIN_PAGE_SHIFT = 12;
const REG_MR_MAX_PAGE_SHIFT = 30;

/** The identity's RDMA version (v1 opcodes). */
const RDMA_VERSION = 1;

/** rnr_retry 7 means retry for ever (IBTA 9.7.5.2.8). */
const RNR_RETRY_INFINITE = 7;

/** IBTA table 45: the min_rnr_timer code (0..31) as milliseconds. */
const RNR_TIMER_MS = [
  655.36, 0.01, 0.02, 0.03, 0.04, 0.06, 0.08, 0.12, 0.16, 0.24, 0.32, 0.48, 0.64, 0.96, 1.28, 1.92,
  2.56, 3.84, 5.12, 7.68, 10.24, 15.36, 20.48, 30.72, 40.96, 61.44, 81.92, 122.88, 163.84, 245.76, 327.68, 491.52,
];

/** The wait an RNR NAK asks for, given the responder's min_rnr_timer code. */
export function rnrDelayMs(code: number): number {
  return RNR_TIMER_MS[code & 31]!;
}

interface QpDp {
  handle: number;
  /** Remote WQEs completed (the MSN counter). */
  msn: number;
  /** A turn is scheduled. */
  scheduled: boolean;
  /** Waiting for a receive WQE on the destination, or for CQ room (then in one of the waiter sets). */
  waiting: boolean;
  /** What it waits for: WAIT_RNR (key: the destination QP id) or WAIT_CQ (key: the CQ id). */
  waitKind: number;
  waitKey: number;
  /** RNR retries left for the WQE at the head of the SQ (-1: it has not been NAKed). */
  rnrLeft: number;
  /** The pending RNR retry, if any. */
  rnrTimer: NodeJS.Timeout | null;
  /** A REG_MR at the head whose page list is being read over several turns. */
  regMr: PendingRegMr | null;
}

/** A REG_MR WQE in progress: what it asked for, and its page list so far. */
interface PendingRegMr {
  readonly generation: number;
  readonly loader: PageListLoader;
  readonly key: number;
  readonly newKey: number;
  readonly va: number;
  readonly length: number;
  readonly flags: number;
  readonly wqeIdLo: number;
  readonly wqeIdHi: number;
  /** The table, once read (kept while the WQE waits for CQ room). */
  table: PageTable | null;
}

/**
 * done: the head WQE completed; wait: it waits for an event (a receive, CQ
 * room, an RNR timer); stop: the QP stopped (error, no memory); yield: it is
 * part way through (a long page list) and continues on a later turn.
 */
type StepResult = 'done' | 'wait' | 'stop' | 'yield';

const WAIT_NONE = 0;
/** A receive on the destination QP (an RNR NAK). */
const WAIT_RNR = 1;
/** Room on a CQ. */
const WAIT_CQ = 2;

export interface DataPathEngine extends DataPathDevice {
  hooks: DataPathHooks;
}

const TWO_32 = 0x100000000;
const WQE_ID = ionic_v1_base_hdr.wqe_id;

export class LoopbackDataPath {
  readonly #dev: DataPathEngine;
  readonly #wqe: SendWqe = newSendWqe();
  readonly #recv: RecvWqe = newRecvWqe();
  readonly #cqe = newCqeRecord();
  readonly #pairs: number[] = [];
  readonly #src: Buffer[] = [];
  readonly #dst: Buffer[] = [];
  /**
   * Waiting QPs by what they wait for, so an event wakes exactly its waiters:
   * senders by the destination QP whose receive they need, QPs by the CQ they
   * need room on. (Waking every waiter on every event made a chain of QPs
   * failing one after the other quadratic, and recursive.)
   */
  readonly #rnrWaiters = new Map<number, Set<QpRecord>>();
  readonly #cqWaiters = new Map<number, Set<QpRecord>>();
  /** Set by a step that answers 'wait': what it waits for. */
  #waitKind = WAIT_NONE;
  #waitKey = -1;
  /** QPs with work, in order; entries before #readyHead are done. */
  readonly #ready: QpRecord[] = [];
  #readyHead = 0;
  #draining = false;
  #drainScheduled = false;
  /** Ring slots are read into these (a send WQE and a receive WQE are live at once). */
  readonly #sqSlot = slotViews();
  readonly #rqSlot = slotViews();
  readonly #grh = Buffer.alloc(GRH_SIZE);
  readonly #word = Buffer.alloc(ATOMIC_SIZE);
  readonly #old = Buffer.alloc(ATOMIC_SIZE);
  readonly #remoteWord: Buffer[] = [];
  readonly #wordList: Buffer[] = [this.#word];
  #generation = 0;

  constructor(dev: DataPathEngine) {
    this.#dev = dev;
  }

  /** Install the hooks on the engine (keeps a modifyAllowed veto already there). */
  install(): void {
    const prev = this.#dev.hooks;
    this.#dev.hooks = {
      ...prev,
      sqDoorbell: (qp) => this.#schedule(qp),
      rqDoorbell: (qp) => this.#wake(this.#rnrWaiters, qp.id),
      srqDoorbell: (srq) => this.#wakeSrqUsers(srq),
      cqConsumed: (cq) => this.#wake(this.#cqWaiters, cq.id),
      cqDestroyed: (cq) => this.#wake(this.#cqWaiters, cq.id),
      qpModified: (qp, from) => this.#modified(qp, from),
      // A QP waiting on this one (RNR) must learn it is gone: it then completes with RETRY_EXCEEDED.
      qpDestroyed: (qp) => {
        this.#unwait(qp);
        const s = qp.dp as QpDp | undefined;
        if (s) s.scheduled = false;
        qp.dp = undefined;
        this.#wake(this.#rnrWaiters, qp.id);
      },
      reset: () => {
        for (const set of [...this.#rnrWaiters.values(), ...this.#cqWaiters.values()]) {
          for (const qp of [...set]) this.#unwait(qp);
        }
        this.#rnrWaiters.clear();
        this.#cqWaiters.clear();
        for (let i = this.#readyHead; i < this.#ready.length; i++) {
          const s = this.#ready[i]!.dp as QpDp | undefined;
          if (s) { s.scheduled = false; s.regMr = null; }
        }
        this.#ready.length = 0;
        this.#readyHead = 0;
        this.#generation++;
      },
    };
  }

  // -------------------------------------------------------------------------
  // Scheduling

  #state(qp: QpRecord): QpDp {
    let s = qp.dp as QpDp | undefined;
    if (!s || s.handle !== qp.handle) {
      s = { handle: qp.handle, msn: 0, scheduled: false, waiting: false, waitKind: WAIT_NONE, waitKey: -1, rnrLeft: -1, rnrTimer: null, regMr: null };
      qp.dp = s;
    }
    return s;
  }

  /** Put a QP with work on the ready queue and, unless the loop is already running, run it now. */
  #schedule(qp: QpRecord): void {
    this.#enqueue(qp);
    this.#kick();
  }

  #enqueue(qp: QpRecord): void {
    const s = this.#state(qp);
    if (s.scheduled) return;
    s.scheduled = true;
    this.#ready.push(qp);
  }

  /** Drain the ready queue now, unless a drain is running (it will get there) or one is due next turn. */
  #kick(): void {
    if (!this.#draining && !this.#drainScheduled) this.#drain();
  }

  /** The one loop that runs QPs: bounded per visit and per turn, each visit guarded. */
  #drain(): void {
    this.#draining = true;
    let budget = TURN_BUDGET;
    try {
      while (this.#readyHead < this.#ready.length) {
        if (budget <= 0) {
          this.#drainScheduled = true;
          setImmediate(() => {
            this.#drainScheduled = false;
            this.#kick();
          });
          return;
        }
        const qp = this.#ready[this.#readyHead]!;
        this.#ready[this.#readyHead++] = undefined as unknown as QpRecord;
        const s = qp.dp as QpDp | undefined;
        if (!s || !s.scheduled) continue;
        let used = 0;
        const ok = contain(this.#dev.log, `RDMA data path (QP ${qp.id})`, () => {
          used = this.#run(qp, s, Math.min(BUDGET, budget));
        }, () => this.#contained(qp, s));
        budget -= ok ? Math.max(used, 1) : BUDGET;
        if (s.scheduled) this.#ready.push(qp); // more to do: back of the queue
      }
    } finally {
      this.#draining = false;
      if (this.#readyHead >= this.#ready.length) {
        this.#ready.length = 0;
        this.#readyHead = 0;
      } else if (this.#readyHead > 1024 && this.#readyHead * 2 > this.#ready.length) {
        this.#ready.splice(0, this.#readyHead);
        this.#readyHead = 0;
      }
    }
  }

  /** A visit threw (our bug): the QP gets the error hardware would give, ERR, and its work is flushed. */
  #contained(qp: QpRecord, s: QpDp): void {
    s.scheduled = false;
    this.#dropRegMr(s);
    if (this.#dev.rm.qps.get(qp.id) === qp) this.#deviceError(qp, true);
  }

  /** What a waiting QP needs appeared (a receive on `key`, room on CQ `key`, a state change): its waiters look again. */
  #wake(waiters: Map<number, Set<QpRecord>>, key: number): void {
    const set = waiters.get(key);
    if (!set) return;
    waiters.delete(key);
    for (const qp of set) {
      const s = qp.dp as QpDp | undefined;
      if (!s) continue;
      s.waiting = false;
      s.waitKind = WAIT_NONE;
      this.#enqueue(qp);
    }
    this.#kick();
  }

  /** An SRQ got receives: wake the senders waiting on any QP that draws from it. */
  #wakeSrqUsers(srq: SrqRecord): void {
    if (this.#rnrWaiters.size === 0) return;
    const keys: number[] = [];
    for (const destId of this.#rnrWaiters.keys()) {
      const dest = this.#dev.rm.qps.get(destId);
      if (!dest || this.#recvRing(dest) === srq.ring) keys.push(destId);
    }
    for (const k of keys) this.#wake(this.#rnrWaiters, k);
  }

  /** Park a QP whose step answered 'wait' in the waiter set of what it waits for. */
  #park(qp: QpRecord, s: QpDp): void {
    const kind = this.#waitKind === WAIT_NONE ? WAIT_CQ : this.#waitKind;
    const key = this.#waitKind === WAIT_NONE ? qp.sqCqId : this.#waitKey;
    this.#waitKind = WAIT_NONE;
    this.#waitKey = -1;
    const map = kind === WAIT_RNR ? this.#rnrWaiters : this.#cqWaiters;
    let set = map.get(key);
    if (!set) { set = new Set(); map.set(key, set); }
    set.add(qp);
    s.waiting = true;
    s.waitKind = kind;
    s.waitKey = key;
  }

  /** Record what the current step waits for (read by #park). */
  #waitFor(kind: number, key: number): void {
    this.#waitKind = kind;
    this.#waitKey = key;
  }

  /** Forget a QP's wait, its RNR state and any REG_MR in progress (destroyed, reset, flushed). */
  #unwait(qp: QpRecord): void {
    const s = qp.dp as QpDp | undefined;
    if (!s) return;
    this.#leaveWaiters(qp, s);
    s.rnrLeft = -1;
    if (s.rnrTimer) { clearTimeout(s.rnrTimer); s.rnrTimer = null; }
    this.#dropRegMr(s);
  }

  #leaveWaiters(qp: QpRecord, s: QpDp): void {
    if (s.waitKind !== WAIT_NONE) {
      const map = s.waitKind === WAIT_RNR ? this.#rnrWaiters : this.#cqWaiters;
      const set = map.get(s.waitKey);
      if (set) {
        set.delete(qp);
        if (set.size === 0) map.delete(s.waitKey);
      }
    }
    s.waiting = false;
    s.waitKind = WAIT_NONE;
  }

  /** Give back a REG_MR in progress (its QP left RTS, was destroyed, or the device reset). */
  #dropRegMr(s: QpDp): void {
    const p = s.regMr;
    if (!p) return;
    s.regMr = null;
    // After a device reset the budget was zeroed with everything else: nothing to give back.
    if (p.generation !== this.#generation) return;
    p.loader.abort();
    if (p.table) this.#dev.rm.releaseTable(p.table);
  }

  /** Run up to `budget` WQEs of one QP; returns how many ran. Leaves s.scheduled set when more remain. */
  #run(qp: QpRecord, s: QpDp, budget: number): number {
    let used = 0;
    for (;;) {
      if (this.#dev.rm.qps.get(qp.id) !== qp || qp.dp !== s) { s.scheduled = false; return used; }
      if (qp.state !== QpState.RTS && qp.state !== QpState.SQD) { s.scheduled = false; return used; }
      const ring = qp.sq;
      const mask = (1 << ring.depthLog2) - 1;
      if (ring.ci === ring.pi) { s.scheduled = false; return used; }
      if (used >= budget) return used;
      used++;
      this.#waitKind = WAIT_NONE;
      const r = this.#step(qp, s);
      if (r === 'yield') return TURN_BUDGET; // a page-list share is this turn's work: yield after it
      if (r === 'wait') {
        this.#park(qp, s);
        s.scheduled = false;
        return used;
      }
      // The head WQE is finished: its RNR state goes with it.
      s.rnrLeft = -1;
      if (s.rnrTimer) { clearTimeout(s.rnrTimer); s.rnrTimer = null; }
      if (r === 'stop') { s.scheduled = false; return used; }
      ring.ci = (ring.ci + 1) & mask;
    }
  }

  /**
   * The head WQE met an empty receive queue (RNR NAK): 'wait' to retry later,
   * or false when the requester's rnr_retry is spent.
   */
  #rnr(qp: QpRecord, s: QpDp, dest: QpRecord): 'wait' | false {
    this.#dev.counters.inc(DC.rnr_naks);
    qp.stats.inc(QC.rnr_naks);
    this.#waitFor(WAIT_RNR, dest.id);
    if (qp.attrs.rnrRetry === RNR_RETRY_INFINITE) return 'wait';
    // A retry already pending: this pass was an early wake-up (some RQ doorbell), not a retry.
    if (s.rnrTimer) return 'wait';
    if (s.rnrLeft < 0) s.rnrLeft = qp.attrs.rnrRetry;
    if (s.rnrLeft === 0) return false;
    s.rnrLeft--;
    const gen = this.#generation;
    s.rnrTimer = setTimeout(() => {
      s.rnrTimer = null;
      if (gen !== this.#generation || qp.dp !== s || !s.waiting) return;
      this.#leaveWaiters(qp, s);
      contain(this.#dev.log, `RDMA RNR retry (QP ${qp.id})`, () => this.#schedule(qp));
    }, rnrDelayMs(dest.attrs.rnrTimer));
    s.rnrTimer.unref();
    return 'wait';
  }

  /** Whether the CQEs this WQE will post (on `dest` too) have room; counts a wait when not. */
  #cqRoom(qp: QpRecord, w: SendWqe, datagram: boolean, dest: QpRecord | undefined): boolean {
    const dev = this.#dev;
    let sqNeed = 1;
    const consumesRecv = w.verb === SendVerb.SEND || w.verb === SendVerb.SEND_IMM
      || (!datagram && (w.verb === SendVerb.SEND_INV || w.verb === SendVerb.RDMA_WRITE_IMM));
    if (consumesRecv) {
      if (dest) {
        if (dest.rqCqId === qp.sqCqId) sqNeed = 2;
        else {
          const room = dev.cqRoom(dest.rqCqId);
          if (room === 0) { dev.counters.inc(DC.cq_full_waits); this.#waitFor(WAIT_CQ, dest.rqCqId); return false; }
        }
      }
    }
    const room = dev.cqRoom(qp.sqCqId);
    if (room >= 0 && room < sqNeed) { dev.counters.inc(DC.cq_full_waits); this.#waitFor(WAIT_CQ, qp.sqCqId); return false; }
    return true;
  }

  // -------------------------------------------------------------------------
  // Guest memory helpers

  /**
   * Ring slot `index` copied into `scratch` (the guest may rewrite the ring
   * while we work), or null when it is not guest memory. WQEs never cross a page.
   */
  #slot(mem: GuestMemory, ring: QueueRing, index: number, scratch: readonly Buffer[]): Buffer | null {
    const out = scratch[ring.strideLog2];
    if (!out) return null;
    const size = out.length;
    const p = this.#pairs;
    p.length = 0;
    if (ring.table.translate(index << ring.strideLog2, size, p) !== 0 || p.length !== 2) return null;
    return mem.read(p[0]!, out) === MemStatus.OK ? out : null;
  }

  /** Views of (key, va, len) with `need` under the QP's PD; KeyStatus, or -1 for unusable guest memory. */
  #views(mem: GuestMemory, key: number, va: number, len: number, need: number, dmaKey: boolean, pdId: number, write: boolean, out: Buffer[]): number {
    if (len === 0) return KeyStatus.OK;
    const p = this.#pairs;
    p.length = 0;
    const st = this.#dev.rm.translate(key, va, len, need, { dmaKey, pdId }, p);
    if (st !== KeyStatus.OK) return st;
    for (let i = 0; i < p.length; i += 2) {
      if (mem.slices(p[i]!, p[i + 1]!, write, out) !== MemStatus.OK) return -1;
    }
    return KeyStatus.OK;
  }

  /** Views of the first `len` bytes of an SGL. */
  #sgl(mem: GuestMemory, qp: QpRecord, sges: readonly Sge[], count: number, len: number, write: boolean, out: Buffer[]): number {
    let left = len;
    for (let i = 0; i < count && left > 0; i++) {
      const sge = sges[i]!;
      const n = Math.min(sge.len, left);
      if (n === 0) continue;
      const st = this.#views(mem, sge.lkey, sge.va, n, write ? MrFlag.LOCAL_WRITE : 0, qp.privileged, qp.pdId, write, out);
      if (st !== KeyStatus.OK) return st;
      left -= n;
    }
    return left > 0 ? KeyStatus.BOUNDS : KeyStatus.OK;
  }

  // -------------------------------------------------------------------------
  // One WQE

  #step(qp: QpRecord, s: QpDp): StepResult {
    const dev = this.#dev;
    const mem = dev.memory();
    if (!mem) return 'stop';
    if (s.regMr) return this.#continueRegMr(mem, qp, s, s.regMr);
    const buf = this.#slot(mem, qp.sq, qp.sq.ci, this.#sqSlot);
    const datagram = qp.type === QpType.UD || qp.id === GSI_QPN;
    if (!buf) {
      this.#deviceError(qp);
      return 'stop';
    }
    const dec = decodeSendWqe(buf, { version: RDMA_VERSION, datagram }, this.#wqe);
    if (!dec.ok) {
      if (dev.cqRoom(qp.sqCqId) === 0) { dev.counters.inc(DC.cq_full_waits); return 'wait'; }
      this.#count(qp, dec.status);
      this.#sendCqe(qp, s, false, getRawWord(buf, 0, WQE_ID, 0), getRawWord(buf, 0, WQE_ID, 1), dec.status);
      this.#deviceError(qp, true);
      return 'stop';
    }
    const w = dec;
    const local = w.verb === SendVerb.LOCAL_INV || w.verb === SendVerb.REG_MR || w.verb === SendVerb.BIND_MW;
    // The destination QP, looked up once: a connected QP's peer, or the QP a datagram names.
    const dest = local ? undefined : dev.rm.qps.get(datagram ? w.ud.destQpn & 0xffffff : qp.attrs.destQpn);
    if (!this.#cqRoom(qp, w, datagram, dest)) return 'wait';
    const remote = !datagram && !local;
    this.#src.length = 0;
    this.#dst.length = 0;
    dev.counters.inc(DC.tx_wqes);
    qp.stats.inc(QC.wqes_processed);
    let status: number;
    if (w.verb === SendVerb.REG_MR) {
      dev.counters.inc(DC.reg_mr_wqes);
      const r = this.#regMr(mem, w, s);
      if (r === 'yield') return 'yield';
      status = r;
    } else if (local) status = this.#localOp(w);
    else if (datagram) status = this.#udSend(mem, qp, w, buf, dest);
    else {
      let r = this.#rcOp(mem, qp, dest, w, buf);
      // UC has no ACKs: a message the responder drops (no receive, bad rkey,
      // responder not ready) still completes the requester successfully.
      if (qp.type === QpType.UC && (r === 'wait' || ucSilent(r))) r = IonicStatus.OK;
      if (r === 'wait') {
        if (this.#rnr(qp, s, dest!) === 'wait') {
          // Counted above; a waiting WQE counts once, when it finally runs.
          dev.counters.inc(DC.tx_wqes, -1);
          qp.stats.inc(QC.wqes_processed, -1);
          return 'wait';
        }
        status = IonicStatus.RNR_RETRY_EXCEEDED;
      } else status = r;
    }
    this.#src.length = 0;
    this.#dst.length = 0;
    this.#count(qp, status);
    this.#sendCqe(qp, s, remote, w.wqeIdLo, w.wqeIdHi, status);
    if (status !== IonicStatus.OK) {
      this.#deviceError(qp, true);
      return 'stop';
    }
    return 'done';
  }

  /** Error counters for a requester completion. */
  #count(qp: QpRecord, status: number): void {
    if (status === IonicStatus.OK) return;
    const c = this.#dev.counters;
    qp.stats.inc(QC.errors);
    switch (status) {
      case IonicStatus.LOCAL_LEN: c.inc(DC.local_length_errors); break;
      case IonicStatus.LOCAL_PROT: c.inc(DC.local_prot_errors); break;
      case IonicStatus.LOCAL_QP_OPER: c.inc(DC.local_qp_errors); break;
      case IonicStatus.REMOTE_ACC: c.inc(DC.remote_access_errors); break;
      case IonicStatus.REMOTE_INV_REQ: c.inc(DC.remote_inv_req_errors); break;
      case IonicStatus.RNR_RETRY_EXCEEDED: c.inc(DC.rnr_retry_exceeded); break;
      case IonicStatus.RETRY_EXCEEDED: c.inc(DC.retry_exceeded); break;
      case IonicStatus.MEM_MGMT_OPER: c.inc(DC.mem_mgmt_errors); break;
      default: break;
    }
  }

  #localOp(w: SendWqe): number {
    const rm = this.#dev.rm;
    switch (w.verb) {
      case SendVerb.LOCAL_INV:
        this.#dev.counters.inc(DC.local_inv_wqes);
        return rm.invalidate(w.immDataKey) === KeyStatus.OK ? IonicStatus.OK : IonicStatus.MEM_MGMT_OPER;
      case SendVerb.BIND_MW: {
        const b = w.bindMw;
        const newKey = ((w.immDataKey & ~0xff) | (w.numSgeKey & 0xff)) >>> 0;
        return rm.bindMw(w.immDataKey, newKey, b.lkey, b.va, b.length, b.flags) === KeyStatus.OK ? IonicStatus.OK : IonicStatus.MEM_MGMT_OPER;
      }
      default:
        return IonicStatus.MEM_MGMT_OPER;
    }
  }

  /**
   * REG_MR (kernel fast registration, contract 4.2): re-key the FRMR whose
   * index imm_data_key names to num_sge_key's tag over the pages the WQE gives, read now
   * (the host may rewrite its page list for the next registration). One page:
   * dma_addr is that page plus the offset; more: dma_addr is an LE64 page-address
   * list and `offset` the in-page offset of va. A list longer than one turn's
   * share is read over several turns ('yield'; #continueRegMr finishes it).
   * Any refusal changes nothing and completes with MEM_MGMT_OPER.
   */
  #regMr(mem: GuestMemory, w: SendWqe, s: QpDp): number | 'yield' {
    const rm = this.#dev.rm;
    const r = w.regMr;
    const newKey = ((w.immDataKey & ~0xff) | (w.numSgeKey & 0xff)) >>> 0;
    const shift = r.pageSizeLog2;
    if (shift < REG_MR_MIN_PAGE_SHIFT || shift > REG_MR_MAX_PAGE_SHIFT || r.dirSizeLog2 !== 0) return IonicStatus.MEM_MGMT_OPER;
    if (r.length < 1 || !Number.isSafeInteger(r.va) || r.va < 0 || !Number.isSafeInteger(r.dmaAddr) || r.dmaAddr <= 0) return IonicStatus.MEM_MGMT_OPER;
    if (r.mapCount < 1 || r.mapCount > RDMA_MAX_MR_PAGES) return IonicStatus.MEM_MGMT_OPER;
    const pageSize = 2 ** shift;
    if (r.mapCount === 1) {
      const firstOffset = r.dmaAddr % pageSize;
      if (PageTableBuilder.pagesNeeded(r.length, shift, firstOffset) !== 1) return IonicStatus.MEM_MGMT_OPER;
      const t = PageTable.contiguous(r.dmaAddr, r.length);
      if (!t || !rm.budget.take(1)) return IonicStatus.MEM_MGMT_OPER;
      return this.#fastRegister(w.immDataKey, newKey, r.va, r.length, r.flags, t);
    }
    if (!Number.isSafeInteger(r.offset) || r.offset < 0 || r.offset >= pageSize) return IonicStatus.MEM_MGMT_OPER;
    if (PageTableBuilder.pagesNeeded(r.length, shift, r.offset) !== r.mapCount) return IonicStatus.MEM_MGMT_OPER;
    const loader = new PageListLoader({ listAddr: r.dmaAddr, count: r.mapCount, pageShift: shift, firstOffset: r.offset, length: r.length }, rm.budget);
    const t = loader.step(mem, RDMA_PT_ENTRIES_PER_TURN);
    if (t === null) {
      s.regMr = {
        generation: this.#generation, loader, key: w.immDataKey, newKey, va: r.va, length: r.length, flags: r.flags,
        wqeIdLo: w.wqeIdLo, wqeIdHi: w.wqeIdHi, table: null,
      };
      return 'yield';
    }
    if (typeof t === 'string') return IonicStatus.MEM_MGMT_OPER;
    return this.#fastRegister(w.immDataKey, newKey, r.va, r.length, r.flags, t);
  }

  /** The next share of a long REG_MR page list; at the end, the registration and its completion. */
  #continueRegMr(mem: GuestMemory, qp: QpRecord, s: QpDp, p: PendingRegMr): StepResult {
    if (!p.table) {
      const t = p.loader.step(mem, RDMA_PT_ENTRIES_PER_TURN);
      if (t === null) return 'yield';
      if (typeof t !== 'string') p.table = t;
    }
    // The CQ may have filled while the list was read: keep the table and wait for room.
    if (this.#dev.cqRoom(qp.sqCqId) === 0) { this.#dev.counters.inc(DC.cq_full_waits); return 'wait'; }
    s.regMr = null;
    const status = p.table ? this.#fastRegister(p.key, p.newKey, p.va, p.length, p.flags, p.table) : IonicStatus.MEM_MGMT_OPER;
    this.#count(qp, status);
    this.#sendCqe(qp, s, false, p.wqeIdLo, p.wqeIdHi, status);
    if (status !== IonicStatus.OK) {
      this.#deviceError(qp, true);
      return 'stop';
    }
    return 'done';
  }

  #fastRegister(key: number, newKey: number, va: number, length: number, flags: number, table: PageTable): number {
    const zeroBased = (flags & MrFlag.ZERO_BASED) !== 0;
    // fastRegister finds the FRMR by index and gives the table back itself when it refuses.
    return this.#dev.rm.fastRegister(key, newKey, va, length, flags, zeroBased, table) === KeyStatus.OK
      ? IonicStatus.OK : IonicStatus.MEM_MGMT_OPER;
  }

  /** Gather a SEND / WRITE payload into #src; KeyStatus or -1. */
  #gather(mem: GuestMemory, qp: QpRecord, w: SendWqe, buf: Buffer): number {
    if (w.inline) {
      if (w.inlineLength > 0) this.#src.push(buf.subarray(w.inlineOffset, w.inlineOffset + w.inlineLength));
      return KeyStatus.OK;
    }
    return this.#sgl(mem, qp, w.sges, w.sgeCount, w.sgeTotal, false, this.#src);
  }

  #msgLen(w: SendWqe): number {
    return w.inline ? w.inlineLength : w.sgeTotal;
  }

  /** The receive ring a QP draws from. */
  #recvRing(qp: QpRecord): QueueRing | null {
    if (qp.rq) return qp.rq;
    if (qp.srqId === null) return null;
    const srq: SrqRecord | undefined = this.#dev.rm.srqs.get(qp.srqId >= RDMA_SRQ_BASE ? qp.srqId : qp.srqId + RDMA_SRQ_BASE)
      ?? this.#dev.rm.srqs.get(qp.srqId);
    return srq ? srq.ring : null;
  }

  /**
   * Take the destination's next receive WQE into #recv: the ring it came from
   * (ci not yet advanced), 'empty', or 'bad' (unreadable / undecodable).
   */
  #takeRecv(mem: GuestMemory, dest: QpRecord): QueueRing | 'empty' | 'bad' {
    const ring = this.#recvRing(dest);
    if (!ring || ring.ci === ring.pi) return 'empty';
    const buf = this.#slot(mem, ring, ring.ci, this.#rqSlot);
    const d = buf ? decodeRecvWqe(buf, this.#recv) : null;
    if (d && d.ok) return ring;
    this.#badRecv(dest, ring, buf);
    return 'bad';
  }

  /**
   * The receive WQE at the head is unreadable or malformed: consume it with a
   * LOCAL_QP_OPER completion (its wqe_id when the slot could be read) and, on
   * a connected QP, move the responder to ERR, so the next message does not
   * meet the same WQE again.
   */
  #badRecv(dest: QpRecord, ring: QueueRing, buf: Buffer | null): void {
    this.#advance(ring);
    this.#recvErrorCqe(dest.id, IonicStatus.LOCAL_QP_OPER, buf ? getRawWord(buf, 0, WQE_ID, 0) : 0, buf ? getRawWord(buf, 0, WQE_ID, 1) : 0);
    this.#post(dest.rqCqId, true);
    dest.stats.inc(QC.cqes_posted);
    dest.stats.inc(QC.errors);
    if (dest.type !== QpType.UD && dest.id !== GSI_QPN) this.#deviceError(dest);
  }

  /** Fill #cqe as a RECV completion in error that carries nothing but its status and wqe_id. */
  #recvErrorCqe(qid: number, status: number, idLo: number, idHi: number): void {
    const c = this.#cqe;
    c.type = CqeType.RECV;
    c.qid = qid;
    c.error = true;
    c.statusLength = status;
    c.wqeIdLo = idLo;
    c.wqeIdHi = idHi;
    c.srcQpn = 0;
    c.recvOp = RecvOp.SEND;
    c.immDataRkey = 0;
    c.ipv4 = false;
    c.vlan = false;
    c.vlanTag = 0;
    c.srcMac = null;
  }

  #advance(ring: QueueRing): void {
    ring.ci = (ring.ci + 1) & ((1 << ring.depthLog2) - 1);
  }

  /**
   * Place #src (len bytes, after `prefix`) into the receive WQE in #recv on
   * `dest`, and post its RECV CQE. Answers the responder status.
   */
  #deliver(mem: GuestMemory, from: QpRecord, dest: QpRecord, ring: QueueRing, len: number, prefix: Buffer | null,
    op: RecvOp, imm: number, solicited: boolean, ud: { ipv4: boolean; smac: Buffer | null; vlan: number } | null,
    countOnly = false): number {
    const r = this.#recv;
    const pre = prefix ? prefix.length : 0;
    const total = pre + len;
    let st: number = IonicStatus.OK;
    this.#dst.length = 0;
    if (countOnly) { /* WRITE_IMM: the data went to the rkey; only the count is reported */ } else if (total > r.sgeTotal) st = IonicStatus.LOCAL_LEN;
    else if (this.#sgl(mem, dest, r.sges, r.sgeCount, total, true, this.#dst) !== KeyStatus.OK) st = IonicStatus.LOCAL_PROT;
    if (st === IonicStatus.OK && !countOnly) {
      if (prefix && pre > 0) {
        this.#wordList[0] = prefix;
        copySlices(this.#dst, 0, this.#wordList, 0, pre);
      }
      copySlices(this.#dst, pre, this.#src, 0, len);
      const c = this.#dev.counters;
      c.inc(DC.send_msgs);
      c.inc(DC.recv_msgs);
      c.inc(DC.tx_bytes, len);
      c.inc(DC.rx_bytes, total);
      from.stats.inc(QC.bytes_sent, len);
      dest.stats.inc(QC.bytes_received, total);
    }
    this.#dev.counters.inc(DC.rx_wqes);
    this.#advance(ring);
    const c = this.#cqe;
    c.type = CqeType.RECV;
    c.qid = dest.id;
    c.error = st !== IonicStatus.OK;
    c.statusLength = c.error ? st : total;
    c.wqeIdLo = r.wqeIdLo;
    c.wqeIdHi = r.wqeIdHi;
    c.srcQpn = from.id;
    c.recvOp = op;
    c.immDataRkey = imm;
    c.ipv4 = ud ? ud.ipv4 : false;
    c.vlan = ud ? ud.vlan >= 0 : false;
    c.vlanTag = ud && ud.vlan >= 0 ? ud.vlan : 0;
    c.srcMac = ud ? ud.smac : null;
    this.#post(dest.rqCqId, solicited || c.error);
    dest.stats.inc(QC.cqes_posted);
    this.#dst.length = 0;
    if (c.error && dest.type !== QpType.UD) this.#deviceError(dest);
    return st;
  }

  #rcOp(mem: GuestMemory, qp: QpRecord, dest: QpRecord | undefined, w: SendWqe, buf: Buffer): number | 'wait' {
    // UC has no responder resources: RDMA READ and atomics are RC only (IBTA table 38).
    if (qp.type === QpType.UC && (w.verb === SendVerb.RDMA_READ || w.verb === SendVerb.ATOMIC_CS || w.verb === SendVerb.ATOMIC_FA)) {
      return IonicStatus.LOCAL_QP_OPER;
    }
    if (!dest || dest.type !== qp.type || (dest.state !== QpState.RTR && dest.state !== QpState.RTS && dest.state !== QpState.SQD)) {
      return IonicStatus.RETRY_EXCEEDED;
    }
    switch (w.verb) {
      case SendVerb.SEND:
      case SendVerb.SEND_IMM:
      case SendVerb.SEND_INV:
      case SendVerb.RDMA_WRITE_IMM: {
        const isWrite = w.verb === SendVerb.RDMA_WRITE_IMM;
        // The requester's own buffers first: a bad lkey is reported whether or not a receive is posted.
        const g = this.#gather(mem, qp, w, buf);
        if (g !== KeyStatus.OK) return IonicStatus.LOCAL_PROT;
        const rr = this.#takeRecv(mem, dest);
        if (rr === 'empty') {
          this.#src.length = 0;
          return 'wait';
        }
        if (rr === 'bad') return IonicStatus.REMOTE_OPER;
        const len = this.#msgLen(w);
        if (isWrite) {
          const x = this.#remote(mem, dest, w.rdma.rkey, w.rdma.remoteVa, len, MrFlag.REMOTE_WRITE, QpFlag.REMOTE_WRITE, true);
          if (x !== IonicStatus.OK) return x;
          copySlices(this.#dst, 0, this.#src, 0, len);
          this.#written(qp, len);
          this.#src.length = 0;
          this.#dst.length = 0;
          // The receive CQE carries the bytes written.
          this.#deliver(mem, qp, dest, rr, len, null, RecvOp.RDMA_WRITE_IMM, w.immDataKey, w.solicited, null, true);
          return IonicStatus.OK;
        }
        const op = w.verb === SendVerb.SEND ? RecvOp.SEND : w.verb === SendVerb.SEND_IMM ? RecvOp.SEND_IMM : RecvOp.SEND_INV;
        const st = this.#deliver(mem, qp, dest, rr, len, null, op, w.verb === SendVerb.SEND ? 0 : w.immDataKey, w.solicited, null);
        if (st === IonicStatus.LOCAL_LEN) return IonicStatus.REMOTE_INV_REQ;
        if (st !== IonicStatus.OK) return IonicStatus.REMOTE_OPER;
        // The invalidation takes effect with the message, not when it fails.
        if (w.verb === SendVerb.SEND_INV && this.#dev.rm.invalidate(w.immDataKey) === KeyStatus.OK) {
          this.#dev.counters.inc(DC.remote_invalidates);
        }
        return IonicStatus.OK;
      }
      case SendVerb.RDMA_WRITE: {
        const g = this.#gather(mem, qp, w, buf);
        if (g !== KeyStatus.OK) return IonicStatus.LOCAL_PROT;
        const len = this.#msgLen(w);
        const x = this.#remote(mem, dest, w.rdma.rkey, w.rdma.remoteVa, len, MrFlag.REMOTE_WRITE, QpFlag.REMOTE_WRITE, true);
        if (x !== IonicStatus.OK) return x;
        copySlices(this.#dst, 0, this.#src, 0, len);
        this.#written(qp, len);
        return IonicStatus.OK;
      }
      case SendVerb.RDMA_READ: {
        const len = w.sgeTotal;
        // The remote side is checked first (a bad rkey NAKs before data returns); its views go to #dst, then swap.
        const x = this.#remote(mem, dest, w.rdma.rkey, w.rdma.remoteVa, len, MrFlag.REMOTE_READ, QpFlag.REMOTE_READ, false);
        if (x !== IonicStatus.OK) return x;
        this.#src.push(...this.#dst);
        this.#dst.length = 0;
        if (this.#sgl(mem, qp, w.sges, w.sgeCount, len, true, this.#dst) !== KeyStatus.OK) return IonicStatus.LOCAL_PROT;
        copySlices(this.#dst, 0, this.#src, 0, len);
        this.#dev.counters.inc(DC.rdma_read_bytes, len);
        qp.stats.inc(QC.bytes_rdma_read, len);
        return IonicStatus.OK;
      }
      case SendVerb.ATOMIC_CS:
      case SendVerb.ATOMIC_FA:
        return this.#atomic(mem, qp, dest, w);
      default:
        return IonicStatus.LOCAL_QP_OPER;
    }
  }

  /** Views of a remote range into #dst, with the responder's QP and MR checks; IonicStatus. */
  #remote(mem: GuestMemory, dest: QpRecord, rkey: number, va: number, len: number, need: number, qpBit: number, write: boolean): number {
    if (len === 0) return IonicStatus.OK;
    if (!(dest.attrs.access & qpBit)) return IonicStatus.REMOTE_ACC;
    const st = this.#views(mem, rkey, va, len, need, dest.remotePrivileged, dest.pdId, write, this.#dst);
    if (st === -1) return IonicStatus.REMOTE_OPER;
    if (st === KeyStatus.BAD_RANGE && len > RDMA_MAX_MSG_BYTES) return IonicStatus.REMOTE_INV_REQ;
    return st === KeyStatus.OK ? IonicStatus.OK : IonicStatus.REMOTE_ACC;
  }

  #written(qp: QpRecord, len: number): void {
    this.#dev.counters.inc(DC.rdma_write_bytes, len);
    qp.stats.inc(QC.bytes_rdma_write, len);
  }

  #atomic(mem: GuestMemory, qp: QpRecord, dest: QpRecord, w: SendWqe): number {
    const va = w.rdma.remoteVa;
    if (!Number.isSafeInteger(va) || va < 0) return IonicStatus.REMOTE_ACC;
    if (va % ATOMIC_SIZE !== 0) return IonicStatus.REMOTE_INV_REQ;
    const x = this.#remote(mem, dest, w.rdma.rkey, va, ATOMIC_SIZE, MrFlag.REMOTE_ATOMIC, QpFlag.REMOTE_ATOMIC, true);
    if (x !== IonicStatus.OK) return x;
    const remote = this.#remoteWord;
    remote.length = 0;
    for (const v of this.#dst) remote.push(v);
    this.#dst.length = 0;
    const a = w.atomic;
    if (a.localLen !== ATOMIC_SIZE) return IonicStatus.LOCAL_LEN;
    if (this.#views(mem, a.localLkey, a.localVa, ATOMIC_SIZE, MrFlag.LOCAL_WRITE, qp.privileged, qp.pdId, true, this.#dst) !== KeyStatus.OK) {
      return IonicStatus.LOCAL_PROT;
    }
    const word = this.#word;
    this.#wordList[0] = word;
    copySlices(this.#wordList, 0, remote, 0, ATOMIC_SIZE);
    const oldLo = word.readUInt32LE(0);
    const oldHi = word.readUInt32LE(4);
    let store = true;
    let newLo = a.swapAddLo;
    let newHi = a.swapAddHi;
    if (w.verb === SendVerb.ATOMIC_CS) store = oldHi === a.compareHi && oldLo === a.compareLo;
    else {
      const lo = oldLo + a.swapAddLo;
      const carry = lo >= TWO_32 ? 1 : 0;
      newLo = lo - carry * TWO_32;
      newHi = (oldHi + a.swapAddHi + carry) % TWO_32;
    }
    word.copy(this.#old);
    if (store) {
      word.writeUInt32LE(newLo >>> 0, 0);
      word.writeUInt32LE(newHi >>> 0, 4);
      copySlices(remote, 0, this.#wordList, 0, ATOMIC_SIZE);
    }
    this.#wordList[0] = this.#old;
    copySlices(this.#dst, 0, this.#wordList, 0, ATOMIC_SIZE);
    remote.length = 0;
    this.#dev.counters.inc(DC.atomic_ops);
    return IonicStatus.OK;
  }

  /** A UD/GSI SEND: the requester sees only its own errors; a refused datagram is dropped. */
  #udSend(mem: GuestMemory, qp: QpRecord, w: SendWqe, buf: Buffer, dest: QpRecord | undefined): number {
    if (w.verb !== SendVerb.SEND && w.verb !== SendVerb.SEND_IMM) return IonicStatus.LOCAL_QP_OPER;
    const g = this.#gather(mem, qp, w, buf);
    if (g !== KeyStatus.OK) return IonicStatus.LOCAL_PROT;
    const ah = this.#dev.rm.ahs.get(w.ud.ahId);
    if (!ah) return IonicStatus.LOCAL_QP_OPER;
    const qkey = effectiveQkey(w.ud.destQkey, qp.attrs.qkey);
    if (!dest || !receives(dest.state)) return IonicStatus.OK;
    const destUd = dest.type === QpType.UD || dest.id === GSI_QPN;
    if (!datagramAccepted(destUd, dest.attrs.qkey, qkey)) return IonicStatus.OK;
    const rr = this.#takeRecv(mem, dest);
    if (typeof rr === 'string') return IonicStatus.OK; // no receive posted: UD drops
    const av = ah.av;
    const len = this.#msgLen(w);
    const ipv4 = av.ipVersion === 4;
    const grh = this.#grh;
    writeGrh(av, len, grh);
    this.#deliver(mem, qp, dest, rr, len, grh, w.verb === SendVerb.SEND ? RecvOp.SEND : RecvOp.SEND_IMM,
      w.verb === SendVerb.SEND_IMM ? w.immDataKey : 0, w.solicited, { ipv4, smac: av.smac, vlan: av.vlanTci });
    return IonicStatus.OK;
  }

  // -------------------------------------------------------------------------
  // Completions

  /** Hand the CQE in #cqe to CQ `cqId` (the CQ sets its color and writes it). */
  #post(cqId: number, solicited: boolean): void {
    this.#dev.postCqe(cqId, this.#cqe, solicited);
  }

  #sendCqe(qp: QpRecord, s: QpDp, remote: boolean, idLo: number, idHi: number, status: number): void {
    const c = this.#cqe;
    c.qid = qp.id;
    c.error = status !== IonicStatus.OK;
    c.statusLength = status;
    c.srcMac = null;
    if (remote) {
      s.msn = (s.msn + 1) >>> 0;
      c.type = CqeType.SEND_MSN;
      c.msn = s.msn & 0xffffff;
      c.wqeIdLo = 0;
      c.wqeIdHi = 0;
    } else {
      c.type = CqeType.SEND_NPG;
      c.msn = 0;
      c.wqeIdLo = idLo;
      c.wqeIdHi = idHi;
    }
    this.#post(qp.sqCqId, c.error);
    qp.stats.inc(QC.cqes_posted);
  }

  /**
   * The device moves a QP to an error state on its own. A datagram QP's send
   * error stops only its SQ (SQE; the MAD layer moves QP1 back to RTS and
   * reposts); any other error is ERR, with flush hints for the queues no
   * error CQE covered.
   */
  #deviceError(qp: QpRecord, sqReported = false): void {
    if (qp.state === QpState.ERR) return;
    const from = qp.state;
    if (sqReported && (qp.type === QpType.UD || qp.id === GSI_QPN)) {
      if (qp.state === QpState.SQE) return;
      qp.state = QpState.SQE;
      qp.sq.ci = qp.sq.pi;
      this.#unwait(qp);
      return;
    }
    qp.state = QpState.ERR;
    if (sqReported) qp.sq.ci = qp.sq.pi;
    this.#modified(qp, from);
  }

  /** Count the WQEs a flush hint stands for (the host completes them itself). */
  #flushed(qp: QpRecord, ring: QueueRing): void {
    const n = (ring.pi - ring.ci) & ((1 << ring.depthLog2) - 1);
    this.#dev.counters.inc(DC.flushed_wqes, n);
    qp.stats.inc(QC.flushed_wqes, n);
    qp.stats.inc(QC.cqes_posted);
  }

  #modified(qp: QpRecord, from: QpState): void {
    this.#modifiedSelf(qp, from);
    // A sender waiting for this QP's receives sees the new state (a responder gone to ERR fails it).
    if (qp.state !== from) this.#wake(this.#rnrWaiters, qp.id);
  }

  #modifiedSelf(qp: QpRecord, from: QpState): void {
    const s = this.#state(qp);
    if (qp.state === QpState.RESET) {
      s.msn = 0;
      this.#unwait(qp);
      return;
    }
    if (qp.state === QpState.ERR && from !== QpState.ERR) {
      this.#unwait(qp);
      const c = this.#cqe;
      c.qid = qp.id;
      c.error = true;
      c.statusLength = IonicStatus.WQE_FLUSHED;
      c.srcMac = null;
      c.wqeIdLo = 0;
      c.wqeIdHi = 0;
      if (qp.sq.ci !== qp.sq.pi) {
        c.type = CqeType.SEND_NPG;
        c.msn = 0;
        this.#post(qp.sqCqId, true);
        this.#flushed(qp, qp.sq);
        qp.sq.ci = qp.sq.pi;
      }
      if (qp.rq && qp.rq.ci !== qp.rq.pi) {
        this.#recvErrorCqe(qp.id, IonicStatus.WQE_FLUSHED, 0, 0);
        this.#post(qp.rqCqId, true);
        this.#flushed(qp, qp.rq);
        qp.rq.ci = qp.rq.pi;
      }
      return;
    }
    if (qp.state === QpState.RTS && qp.sq.ci !== qp.sq.pi) this.#schedule(qp);
  }
}

/** One scratch buffer per WQE stride (index strideLog2), views of a single allocation: no allocation per WQE. */
function slotViews(): Buffer[] {
  const whole = Buffer.alloc(1 << RDMA_MAX_STRIDE_LOG2);
  const out: Buffer[] = [];
  for (let log2 = 0; log2 <= RDMA_MAX_STRIDE_LOG2; log2++) out.push(whole.subarray(0, 1 << log2));
  return out;
}

/** States in which a QP's receive side works (SQE stops only the send side). */
function receives(state: QpState): boolean {
  return state === QpState.RTR || state === QpState.RTS || state === QpState.SQD || state === QpState.SQE;
}

/** Responder-side outcomes a UC requester never learns of (there is no ACK/NAK). */
function ucSilent(status: number): boolean {
  return status === IonicStatus.REMOTE_ACC || status === IonicStatus.REMOTE_INV_REQ || status === IonicStatus.REMOTE_OPER
    || status === IonicStatus.RETRY_EXCEEDED;
}

/** Plug the loopback data path into an engine. */
export function installLoopbackDataPath(dev: DataPathEngine): LoopbackDataPath {
  const dp = new LoopbackDataPath(dev);
  dp.install();
  return dp;
}
