// Who may hold a connection to a mesh listener, and for how long before it
// proves itself. Every accepted socket takes a slot: at most `maxInbound` in
// all, at most `maxPending` that have not yet registered (or handshaken, on a
// worker's peer listener), at most `maxPendingPerSource` of those from one
// address; a slot that has not become an established link `timeoutMs` after
// its accept is closed. Past a bound the socket is closed at once, before
// anything is read from it, so a flood of idle connections costs a few dozen
// descriptors and never the process's whole table (the vfio-user socket goes
// on being served).

import { unmapAddress } from './dial';

export interface AdmissionLimits {
  /** Inbound connections in any state (established links included). */
  readonly maxInbound: number;
  /** Inbound connections not yet established. */
  readonly maxPending: number;
  /** Of those, from one source address. */
  readonly maxPendingPerSource: number;
  /** From accept to established (TLS handshake, then registration or handshake), at most this long. */
  readonly timeoutMs: number;
}

/** Inbound connections waiting to establish, all sources. */
const MAX_PENDING_INBOUND = 64;
/** Of those, from one address: every worker of a host dials from the same one, so not much lower. */
const MAX_PENDING_PER_SOURCE = 32;
/** Accept to established link. A healthy peer takes milliseconds; a loaded host a second or two. */
const ADMISSION_TIMEOUT_MS = 10_000;

/** The defaults for a mesh of `maxNodes`: every node linked at once, plus the pending room. */
export function admissionLimits(maxNodes: number, partial: Partial<AdmissionLimits> = {}): AdmissionLimits {
  const out: AdmissionLimits = {
    maxInbound: partial.maxInbound ?? maxNodes + MAX_PENDING_INBOUND,
    maxPending: partial.maxPending ?? MAX_PENDING_INBOUND,
    maxPendingPerSource: partial.maxPendingPerSource ?? MAX_PENDING_PER_SOURCE,
    timeoutMs: partial.timeoutMs ?? ADMISSION_TIMEOUT_MS,
  };
  for (const [k, v] of Object.entries(out) as [keyof AdmissionLimits, number][]) {
    if (!Number.isInteger(v) || v < 1)
      throw new RangeError(`mesh admission limit ${k} must be a positive integer (got ${v})`);
  }
  return out;
}

/** One admitted inbound connection. */
export class AdmissionSlot {
  #established = false;
  #released = false;
  #timer: NodeJS.Timeout | undefined;
  /** What the deadline does: set by whoever holds the connection at the time (its handshake, then its link). */
  onTimeout: (() => void) | null = null;

  constructor(
    private readonly gate: Admission,
    readonly source: string,
    timeoutMs: number,
  ) {
    this.#timer = setTimeout(() => {
      this.#timer = undefined;
      if (!this.#established && !this.#released) this.onTimeout?.();
    }, timeoutMs);
    this.#timer.unref();
  }

  get established(): boolean {
    return this.#established;
  }

  /** The link proved itself: it no longer counts as pending and its deadline is off. */
  establish(): void {
    if (this.#established || this.#released) return;
    this.#established = true;
    this.#stopTimer();
    this.gate.onEstablished(this);
  }

  /** The connection is gone (idempotent). */
  release(): void {
    if (this.#released) return;
    this.#released = true;
    this.#stopTimer();
    this.gate.onReleased(this, this.#established);
  }

  #stopTimer(): void {
    if (this.#timer) clearTimeout(this.#timer);
    this.#timer = undefined;
  }
}

export class Admission {
  #inbound = 0;
  #pending = 0;
  /** Pending connections by source address (a Map: the keys are peers' addresses). */
  readonly #perSource = new Map<string, number>();

  constructor(readonly limits: AdmissionLimits) {}

  get inbound(): number {
    return this.#inbound;
  }

  get pending(): number {
    return this.#pending;
  }

  /** A slot for a connection from `remoteAddress`, or why there is none. */
  admit(remoteAddress: string | undefined): AdmissionSlot | string {
    const source = unmapAddress(remoteAddress ?? '?');
    const l = this.limits;
    if (this.#inbound >= l.maxInbound) return `${this.#inbound} inbound connections already (the most)`;
    if (this.#pending >= l.maxPending) return `${this.#pending} connections already waiting to register (the most)`;
    const mine = this.#perSource.get(source) ?? 0;
    if (mine >= l.maxPendingPerSource)
      return `${mine} connections from ${source} already waiting to register (the most from one address)`;
    this.#inbound++;
    this.#pending++;
    this.#perSource.set(source, mine + 1);
    return new AdmissionSlot(this, source, l.timeoutMs);
  }

  /** @internal (AdmissionSlot) */
  onEstablished(slot: AdmissionSlot): void {
    this.#unpend(slot.source);
  }

  /** @internal (AdmissionSlot) */
  onReleased(slot: AdmissionSlot, wasEstablished: boolean): void {
    this.#inbound--;
    if (!wasEstablished) this.#unpend(slot.source);
  }

  #unpend(source: string): void {
    this.#pending--;
    const n = (this.#perSource.get(source) ?? 1) - 1;
    if (n <= 0) this.#perSource.delete(source);
    else this.#perSource.set(source, n);
  }
}
