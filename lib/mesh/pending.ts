// Requests waiting for a peer's reply, each with the lost-peer deadline
// (docs/mesh.md, "Flow control and every bound": a request whose reply never
// arrives completes in error after 30 s). For the data path: it records a request
// under a fresh req_id, takes it back when the reply comes, and is told when
// one expires.
//
// Every entry has the same timeout, so deadlines come in insertion order and
// one timer, armed for the oldest entry, serves the whole table: no polling,
// and no timer at all while nothing is pending.

import { LOST_PEER_MS } from './limits';

interface Entry<T> {
  readonly value: T;
  readonly deadline: number;
}

export class PendingRequests<T> {
  /** req_id -> entry, in insertion (= deadline) order. */
  readonly #entries = new Map<number, Entry<T>>();
  #nextId = 1;
  #timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly onExpire: (reqId: number, value: T) => void,
    private readonly timeoutMs: number = LOST_PEER_MS,
    private readonly maxEntries: number = 1 << 20,
  ) {}

  get size(): number {
    return this.#entries.size;
  }

  /** Record a request; its req_id, or undefined when the table is full. */
  add(value: T): number | undefined {
    if (this.#entries.size >= this.maxEntries) return undefined;
    // A u32 id not in use; bounded because the table holds far fewer than 2^32.
    let id = this.#nextId;
    while (id === 0 || this.#entries.has(id)) id = (id + 1) >>> 0;
    this.#nextId = (id + 1) >>> 0;
    this.#entries.set(id, { value, deadline: Date.now() + this.timeoutMs });
    this.#arm();
    return id;
  }

  /** The request under `reqId`, left in place (to check a reply before taking it). */
  peek(reqId: number): T | undefined {
    return this.#entries.get(reqId)?.value;
  }

  /** The reply arrived: the request, or undefined (unknown, expired or dropped: ignore the reply). */
  take(reqId: number): T | undefined {
    const e = this.#entries.get(reqId);
    if (!e) return undefined;
    this.#entries.delete(reqId);
    if (this.#entries.size === 0) this.#disarm();
    return e.value;
  }

  /** Drop matching requests without completing them (their QP was destroyed); returns how many. */
  dropWhere(pred: (value: T) => boolean): number {
    let n = 0;
    for (const [id, e] of this.#entries) {
      if (pred(e.value)) {
        this.#entries.delete(id);
        n++;
      }
    }
    if (this.#entries.size === 0) this.#disarm();
    return n;
  }

  /** Expire matching requests now (no route to their peer): onExpire for each; returns how many. */
  expireWhere(pred: (value: T) => boolean): number {
    const hit: [number, T][] = [];
    for (const [id, e] of this.#entries) if (pred(e.value)) hit.push([id, e.value]);
    for (const [id] of hit) this.#entries.delete(id);
    if (this.#entries.size === 0) this.#disarm();
    for (const [id, v] of hit) this.onExpire(id, v);
    return hit.length;
  }

  dispose(): void {
    this.#entries.clear();
    this.#disarm();
  }

  #arm(): void {
    if (this.#timer || this.#entries.size === 0) return;
    const first = this.#entries.values().next().value as Entry<T>;
    this.#timer = setTimeout(this.#onTimer, Math.max(0, first.deadline - Date.now()));
    this.#timer.unref();
  }

  #disarm(): void {
    if (this.#timer) clearTimeout(this.#timer);
    this.#timer = undefined;
  }

  readonly #onTimer = (): void => {
    this.#timer = undefined;
    const now = Date.now();
    const due: [number, T][] = [];
    for (const [id, e] of this.#entries) {
      if (e.deadline > now) break;
      due.push([id, e.value]);
    }
    for (const [id] of due) this.#entries.delete(id);
    this.#arm();
    for (const [id, v] of due) this.onExpire(id, v);
  };
}
