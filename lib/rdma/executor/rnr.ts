// RNR waits (IBTA 9.7.5.2.8): a SEND to an RC/UC QP with no posted receive is
// RNR NAKed. With rnr_retry 7 the requester waits for the destination's RQ
// doorbell; with 0..6 it retries after the responder's min_rnr_timer that
// many times (an RQ doorbell in between resumes it at once), then completes
// with RNR_RETRY_EXCEEDED.

import { contain } from '../../guard';
import { DeviceCounter, QpCounter } from '../counters';
import type { DataPathDevice } from '../hooks';
import type { QpRecord } from '../resources';
import { QpDp, WaitKind } from './qp-state';
import type { Scheduler } from './scheduler';

/** rnr_retry 7 means retry for ever. */
const RNR_RETRY_INFINITE = 7;

/** IBTA table 45: the min_rnr_timer code (0..31) as milliseconds. */
const RNR_TIMER_MS = [
  655.36, 0.01, 0.02, 0.03, 0.04, 0.06, 0.08, 0.12, 0.16, 0.24, 0.32, 0.48, 0.64, 0.96, 1.28, 1.92, 2.56, 3.84, 5.12,
  7.68, 10.24, 15.36, 20.48, 30.72, 40.96, 61.44, 81.92, 122.88, 163.84, 245.76, 327.68, 491.52,
];

/** The wait an RNR NAK asks for, given the responder's min_rnr_timer code. */
export function rnrDelayMs(code: number): number {
  return RNR_TIMER_MS[code & 31]!;
}

export class RnrWaits {
  readonly #dev: DataPathDevice;
  readonly #sched: Scheduler;

  constructor(dev: DataPathDevice, sched: Scheduler) {
    this.#dev = dev;
    this.#sched = sched;
  }

  /**
   * The head WQE of `qp` met an empty receive queue on `dest` (RNR NAK):
   * 'wait' to retry later (the QP waits for a receive on `dest`, and for the
   * retry timer), or false when the requester's rnr_retry is spent.
   */
  nak(qp: QpRecord, s: QpDp, dest: QpRecord): 'wait' | false {
    this.#dev.counters.inc(DeviceCounter.rnr_naks);
    qp.stats.inc(QpCounter.rnr_naks);
    this.#sched.waitFor(WaitKind.RNR, dest.id);
    if (qp.attrs.rnrRetry === RNR_RETRY_INFINITE) return 'wait';
    // A retry already pending: this pass was an early wake-up (some RQ doorbell), not a retry.
    if (s.rnrTimer) return 'wait';
    if (s.rnrLeft < 0) s.rnrLeft = qp.attrs.rnrRetry;
    if (s.rnrLeft === 0) return false;
    s.rnrLeft--;
    const sched = this.#sched;
    const gen = sched.generation;
    const log = this.#dev.log;
    s.rnrTimer = setTimeout(() => {
      s.rnrTimer = null;
      if (gen !== sched.generation || qp.dp !== s || !s.waiting) return;
      sched.leaveWaiters(qp, s);
      contain(log, `RDMA RNR retry (QP ${qp.id})`, () => sched.schedule(qp));
    }, rnrDelayMs(dest.attrs.rnrTimer));
    s.rnrTimer.unref();
    return 'wait';
  }

  /** The head WQE is finished (or gone): its RNR state goes with it. */
  clear(s: QpDp): void {
    s.rnrLeft = -1;
    if (s.rnrTimer) {
      clearTimeout(s.rnrTimer);
      s.rnrTimer = null;
    }
  }
}
