// Scheduling of the loopback data path: one ready queue of QPs with work,
// drained in order by a single loop (never by recursion: an event that makes
// more QPs ready while the loop runs, such as a responder going to ERR and
// waking 4,000 waiting senders, only appends to the queue). Each QP runs at
// most BUDGET WQEs per visit and goes to the back if it has more; one turn
// runs at most TURN_BUDGET WQEs in all, then the loop yields (setImmediate).
// Every visit runs under the last-resort guard (lib/guard.ts): a bug becomes
// that QP's ERR, not a crash.
//
// Waiting QPs sit in waiter sets keyed by what they wait for, so an event
// wakes exactly its waiters: senders by the destination QP whose receive
// they need (RNR), QPs by the CQ they need room on. (Waking every waiter on
// every event made a chain of QPs failing one after the other quadratic,
// and recursive.)

import { contain } from '../../guard';
import type { DataPathDevice } from '../hooks';
import type { QpRecord } from '../resources';
import { QpDp, qpState, qpStateIfAny, WaitKind } from './qp-state';
import type { Logger } from '../../log';

/** WQEs one QP runs per visit before the next ready QP gets its turn. */
const BUDGET = 64;
/** WQEs all QPs together run per event-loop turn before yielding. */
export const TURN_BUDGET = 256;

/** What runs a QP's work: the WQE engine. */
export interface QpRunner {
  /** Run up to `budget` WQEs; returns how many ran. Leaves s.scheduled set when more remain. */
  run(qp: QpRecord, s: QpDp, budget: number): number;
  /** A visit threw (our bug): fail the QP as hardware would. */
  contained(qp: QpRecord, s: QpDp): void;
}

export class Scheduler {
  /** Where contained bugs are reported (the device's log, read once). */
  readonly #log: Logger;
  readonly #runner: QpRunner;
  /** QPs with work, in order; entries before #readyHead are done. */
  readonly #ready: QpRecord[] = [];
  #readyHead = 0;
  #draining = false;
  #drainScheduled = false;
  readonly #rnrWaiters = new Map<number, Set<QpRecord>>();
  readonly #cqWaiters = new Map<number, Set<QpRecord>>();
  readonly #peerWaiters = new Map<number, Set<QpRecord>>();
  /** Set by a step that answers 'wait': what it waits for. */
  #waitKind = WaitKind.NONE;
  #waitKey = -1;
  /** Bumped by every device reset: work started before it is void. */
  #generation = 0;
  /** The visit being run (read by the guarded #visit / #recover, made once: no closure per visit). */
  #visitQp: QpRecord | null = null;
  #visitState: QpDp | null = null;
  #visitBudget = 0;
  #visitUsed = 0;
  readonly #visit = (): void => {
    this.#visitUsed = this.#runner.run(this.#visitQp!, this.#visitState!, this.#visitBudget);
  };
  readonly #recover = (): void => {
    this.#runner.contained(this.#visitQp!, this.#visitState!);
  };
  readonly #nextTurn = (): void => {
    this.#drainScheduled = false;
    this.kick();
  };

  constructor(dev: DataPathDevice, runner: QpRunner) {
    this.#log = dev.log;
    this.#runner = runner;
  }

  get generation(): number {
    return this.#generation;
  }

  /** Put a QP with work on the ready queue and, unless the loop is already running, run it now. */
  schedule(qp: QpRecord): void {
    this.enqueue(qp);
    this.kick();
  }

  enqueue(qp: QpRecord): void {
    const s = qpState(qp);
    if (s.scheduled) return;
    s.scheduled = true;
    this.#ready.push(qp);
  }

  /** Drain the ready queue now, unless a drain is running (it will get there) or one is due next turn. */
  kick(): void {
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
          setImmediate(this.#nextTurn);
          return;
        }
        const qp = this.#ready[this.#readyHead]!;
        this.#ready[this.#readyHead++] = undefined as unknown as QpRecord;
        const s = qpStateIfAny(qp);
        if (!s || !s.scheduled) continue;
        this.#visitQp = qp;
        this.#visitState = s;
        this.#visitBudget = Math.min(BUDGET, budget);
        this.#visitUsed = 0;
        const ok = contain(this.#log, s.label, this.#visit, this.#recover);
        budget -= ok ? Math.max(this.#visitUsed, 1) : BUDGET;
        if (s.scheduled) this.#ready.push(qp); // more to do: back of the queue
      }
    } finally {
      this.#draining = false;
      this.#visitQp = null;
      this.#visitState = null;
      if (this.#readyHead >= this.#ready.length) {
        this.#ready.length = 0;
        this.#readyHead = 0;
      } else if (this.#readyHead > 1024 && this.#readyHead * 2 > this.#ready.length) {
        this.#ready.splice(0, this.#readyHead);
        this.#readyHead = 0;
      }
    }
  }

  // -------------------------------------------------------------------------
  // Waiters

  /** Record what the current step waits for (read by park). */
  waitFor(kind: WaitKind, key: number): void {
    this.#waitKind = kind;
    this.#waitKey = key;
  }

  /** Forget what the last step waited for (before the next step runs). */
  clearWaitFor(): void {
    this.#waitKind = WaitKind.NONE;
  }

  /** Park a QP whose step answered 'wait' in the waiter set of what it waits for (by default, room on its send CQ). */
  park(qp: QpRecord, s: QpDp): void {
    const kind = this.#waitKind === WaitKind.NONE ? WaitKind.CQ : this.#waitKind;
    const key = this.#waitKind === WaitKind.NONE ? qp.sqCqId : this.#waitKey;
    this.#waitKind = WaitKind.NONE;
    this.#waitKey = -1;
    const map = this.#waiters(kind);
    let set = map.get(key);
    if (!set) {
      set = new Set();
      map.set(key, set);
    }
    set.add(qp);
    s.waiting = true;
    s.waitKind = kind;
    s.waitKey = key;
  }

  /** What waiters of `kind` on `key` need appeared (a receive on QP `key`, room on CQ `key`, a state change): they look again. */
  wake(kind: WaitKind, key: number): void {
    const waiters = this.#waiters(kind);
    const set = waiters.get(key);
    if (!set) return;
    waiters.delete(key);
    for (const qp of set) {
      const s = qpStateIfAny(qp);
      if (!s) continue;
      s.waiting = false;
      s.waitKind = WaitKind.NONE;
      this.enqueue(qp);
    }
    this.kick();
  }

  /** The ids of the destination QPs senders wait on (RNR), into `out` (emptied first). */
  rnrDestinations(out: number[]): void {
    out.length = 0;
    for (const destId of this.#rnrWaiters.keys()) out.push(destId);
  }

  /** Take a QP out of the waiter set it sits in. */
  leaveWaiters(qp: QpRecord, s: QpDp): void {
    if (s.waitKind !== WaitKind.NONE) {
      const map = this.#waiters(s.waitKind);
      const set = map.get(s.waitKey);
      if (set) {
        set.delete(qp);
        if (set.size === 0) map.delete(s.waitKey);
      }
    }
    s.waiting = false;
    s.waitKind = WaitKind.NONE;
  }

  /** Every waiting QP (a copy). */
  waiting(): QpRecord[] {
    const out: QpRecord[] = [];
    for (const set of this.#rnrWaiters.values()) out.push(...set);
    for (const set of this.#cqWaiters.values()) out.push(...set);
    for (const set of this.#peerWaiters.values()) out.push(...set);
    return out;
  }

  #waiters(kind: WaitKind): Map<number, Set<QpRecord>> {
    return kind === WaitKind.RNR ? this.#rnrWaiters : kind === WaitKind.PEER ? this.#peerWaiters : this.#cqWaiters;
  }

  /** Device reset: no waiters, nothing ready, a new generation (REG_MRs in progress are dropped, not given back). */
  reset(): void {
    this.#rnrWaiters.clear();
    this.#cqWaiters.clear();
    this.#peerWaiters.clear();
    for (let i = this.#readyHead; i < this.#ready.length; i++) {
      const s = qpStateIfAny(this.#ready[i]!);
      if (s) {
        s.scheduled = false;
        s.regMr = null;
      }
    }
    this.#ready.length = 0;
    this.#readyHead = 0;
    this.#generation++;
  }
}
