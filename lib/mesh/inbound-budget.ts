// The node-wide inbound queue's room (docs/mesh.md, "Flow control and every
// bound"): data messages received and not yet let go by the layer
// above count against 64 MiB and 4096 messages, whichever fills first; an
// empty queue takes any one message. The messages themselves stay where the
// parser put them (this only counts), so the "queue" costs nothing while the
// layer above keeps up, which on one event loop is the normal case.
//
// A connection whose message does not fit waits (its socket paused) in FIFO
// order and is woken when room appears. Two deadlines, both real timers
// armed only while someone waits:
// - after INBOUND_STALL_MS of waiting, 'stall' fires (again each period while
//   the wait lasts): the data path should stop holding SENDs for receives.
// - while no consumer is present (no QEMU connected) for NO_CONSUMER_DROP_MS,
//   a full queue drops what arrives instead of holding the readers back.

import { INBOUND_STALL_MS, NO_CONSUMER_DROP_MS, PARTIAL_FRAME_BYTES } from './limits';

export interface Waiter {
  /** Called when room may have appeared: offer the held message again. */
  unhold(): void;
  readonly closed: boolean;
}

interface BudgetEvents {
  /** Someone has waited INBOUND_STALL_MS (ms waited so far). */
  onStall(waitedMs: number): void;
}

type ChargeResult = 'charged' | 'wait' | 'drop';

export class InboundBudget {
  #bytes = 0;
  #messages = 0;
  #dropped = 0;
  readonly #waiters: Waiter[] = [];
  #stallTimer: NodeJS.Timeout | undefined;
  #stalledMs = 0;
  #wakeScheduled = false;
  #consumerPresent = true;
  #dropMode = false;
  #dropTimer: NodeJS.Timeout | undefined;

  constructor(
    private readonly maxBytes: number,
    private readonly maxMessages: number,
    private readonly events: BudgetEvents,
  ) {}

  get bytes(): number {
    return this.#bytes;
  }

  get messages(): number {
    return this.#messages;
  }

  /** Messages dropped because the queue was full while no consumer was present. */
  get dropped(): number {
    return this.#dropped;
  }

  get waiting(): number {
    return this.#waiters.length;
  }

  /** True while a full queue drops instead of waiting. */
  get dropping(): boolean {
    return this.#dropMode;
  }

  /** Try to take room for one message of `bytes`. On 'wait' the caller holds it and is woken later. */
  charge(bytes: number, waiter: Waiter): ChargeResult {
    const fits =
      this.#messages === 0 || (this.#messages + 1 <= this.maxMessages && this.#bytes + bytes <= this.maxBytes);
    // Earlier waiters go first, so a small message cannot overtake a large one forever.
    const queueAhead = this.#waiters.length > 0 && this.#waiters[0] !== waiter;
    if (fits && !queueAhead) {
      this.#messages++;
      this.#bytes += bytes;
      if (this.#waiters[0] === waiter) this.#waiters.shift();
      this.#settleTimers();
      return 'charged';
    }
    if (this.#dropMode) {
      this.#dropped++;
      this.#forget(waiter);
      return 'drop';
    }
    if (!this.#waiters.includes(waiter)) this.#waiters.push(waiter);
    this.#settleTimers();
    return 'wait';
  }

  /** Let go of one message's room. */
  release(bytes: number): void {
    this.#messages--;
    this.#bytes -= bytes;
    if (this.#messages < 0 || this.#bytes < 0) throw new Error('inbound budget released more than it charged');
    this.#scheduleWake();
  }

  /** A waiter went away (its connection closed). */
  forget(waiter: Waiter): void {
    this.#forget(waiter);
    this.#scheduleWake();
  }

  /**
   * Whether the layer above is consuming (a QEMU client is connected). Going
   * absent starts the drop deadline; coming back cancels it and returns how
   * many messages were dropped meanwhile (for the log).
   */
  setConsumerPresent(present: boolean): number {
    if (present === this.#consumerPresent) return 0;
    this.#consumerPresent = present;
    if (present) {
      if (this.#dropTimer) clearTimeout(this.#dropTimer);
      this.#dropTimer = undefined;
      this.#dropMode = false;
      const n = this.#dropped;
      this.#dropped = 0;
      return n;
    }
    this.#dropTimer = setTimeout(this.#enterDropMode, NO_CONSUMER_DROP_MS);
    this.#dropTimer.unref();
    return 0;
  }

  /** Stop every timer (the mesh is closing). */
  dispose(): void {
    if (this.#stallTimer) clearTimeout(this.#stallTimer);
    if (this.#dropTimer) clearTimeout(this.#dropTimer);
    this.#stallTimer = undefined;
    this.#dropTimer = undefined;
    this.#waiters.length = 0;
  }

  readonly #enterDropMode = (): void => {
    this.#dropTimer = undefined;
    this.#dropMode = true;
    // Those waiting now re-offer and drop.
    this.#scheduleWake();
  };

  #forget(waiter: Waiter): void {
    const i = this.#waiters.indexOf(waiter);
    if (i >= 0) this.#waiters.splice(i, 1);
    this.#settleTimers();
  }

  #scheduleWake(): void {
    if (this.#wakeScheduled || this.#waiters.length === 0) return;
    this.#wakeScheduled = true;
    setImmediate(this.#wake);
  }

  /** Offer the held messages again, first waiter first; stop at the first that still does not fit. */
  readonly #wake = (): void => {
    this.#wakeScheduled = false;
    // Bounded: each pass either removes the head waiter (charged, dropped, closed) or stops.
    let budget = this.#waiters.length;
    while (this.#waiters.length > 0 && budget-- > 0) {
      const w = this.#waiters[0]!;
      if (w.closed) {
        this.#waiters.shift();
        continue;
      }
      w.unhold();
      if (this.#waiters[0] === w) break;
    }
    this.#settleTimers();
  };

  #settleTimers(): void {
    if (this.#waiters.length === 0) {
      if (this.#stallTimer) clearTimeout(this.#stallTimer);
      this.#stallTimer = undefined;
      this.#stalledMs = 0;
      return;
    }
    if (this.#stallTimer) return;
    this.#stallTimer = setTimeout(this.#onStall, INBOUND_STALL_MS);
    this.#stallTimer.unref();
  }

  readonly #onStall = (): void => {
    this.#stallTimer = undefined;
    if (this.#waiters.length === 0) return;
    this.#stalledMs += INBOUND_STALL_MS;
    this.events.onStall(this.#stalledMs);
    this.#settleTimers();
  };
}

/**
 * The process-wide budget of frame bodies the parsers hold: bodies being
 * assembled (partial frames) and whole ones waiting to be taken. A parser
 * charges a body before it buffers any of it; a body that does not fit waits
 * (its connection's socket paused: the bytes stay in the kernel) in FIFO
 * order and is woken when room appears. An empty budget takes any one body,
 * so a lowered bound cannot wedge a frame larger than itself. Charges with
 * no waiter to wake (a body that is already here) are always taken.
 */
export class PartialFrameBudget {
  #bytes = 0;
  readonly #waiters: { readonly waiter: Waiter; readonly bytes: number }[] = [];
  #wakeScheduled = false;

  constructor(private max: number) {}

  get bytes(): number {
    return this.#bytes;
  }

  get limit(): number {
    return this.max;
  }

  /** Connections waiting for room. */
  get waiting(): number {
    return this.#waiters.length;
  }

  /**
   * Take `bytes` for `waiter`'s body: true when charged; false when it must
   * wait (it is queued and its unhold() is called when room may be there).
   * `waiter` null: the bytes are here already, charged whatever the room.
   */
  take(bytes: number, waiter: Waiter | null): boolean {
    if (waiter === null) {
      this.#bytes += bytes;
      return true;
    }
    const ws = this.#waiters;
    // Earlier waiters go first, so a large body is not overtaken forever by small ones.
    const head = ws.length === 0 || ws[0]!.waiter === waiter;
    if (head && (this.#bytes === 0 || this.#bytes + bytes <= this.max)) {
      if (ws.length > 0) ws.shift();
      this.#bytes += bytes;
      return true;
    }
    let queued = false;
    for (const w of ws)
      if (w.waiter === waiter) {
        queued = true;
        break;
      }
    if (!queued) ws.push({ waiter, bytes });
    return false;
  }

  /** Give back a body's charge. */
  give(bytes: number): void {
    this.#bytes -= bytes;
    if (this.#bytes < 0) throw new Error('partial frame budget gave back more than it charged');
    if (this.#waiters.length > 0) this.#scheduleWake();
  }

  /** A waiter went away (its connection closed). */
  forget(waiter: Waiter): void {
    const ws = this.#waiters;
    for (let i = 0; i < ws.length; i++) {
      if (ws[i]!.waiter === waiter) {
        ws.splice(i, 1);
        if (i === 0) this.#scheduleWake();
        return;
      }
    }
  }

  /** Tests: another bound (the process-wide default is PARTIAL_FRAME_BYTES). */
  setLimit(max: number): void {
    if (!Number.isInteger(max) || max < 1) throw new RangeError(`partial frame budget ${max}`);
    this.max = max;
    this.#scheduleWake();
  }

  #scheduleWake(): void {
    if (this.#wakeScheduled || this.#waiters.length === 0) return;
    this.#wakeScheduled = true;
    setImmediate(this.#wake);
  }

  /** Offer room to the waiters, first first; stop at the first that still waits. */
  readonly #wake = (): void => {
    this.#wakeScheduled = false;
    const ws = this.#waiters;
    // Bounded: each pass removes the head (charged or closed) or stops.
    for (let budget = ws.length; ws.length > 0 && budget > 0; budget--) {
      const head = ws[0]!;
      if (head.waiter.closed) {
        ws.shift();
        continue;
      }
      if (this.#bytes !== 0 && this.#bytes + head.bytes > this.max) break;
      head.waiter.unhold();
      if (ws[0] === head) {
        // It did not take the room (it was woken for something else first): it stays at the head.
        break;
      }
    }
  };
}

/** The one budget of the process: every mesh and connection in it shares the bound. */
export const partialFrames = new PartialFrameBudget(PARTIAL_FRAME_BYTES);
