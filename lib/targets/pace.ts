// Bulk work a guest or client can size (zero fills of a namespace, digests
// and copies of large bodies, XML of many entries) runs in slices, a few
// milliseconds of them per turn of the event loop, over every request of both
// targets together. The same loop answers every guest vCPU's MMIO read, so a
// turn must stay short however many requests are busy at once.
//
// A job is a step function: each call does one bounded slice and says whether
// the job is done. Jobs take turns (round robin, in arrival order), and each
// loop turn runs steps until its time is spent, then yields with setImmediate
// so timers and I/O (the vfio-user socket among them) are served in between.

import { performance } from 'perf_hooks';

/** Milliseconds of slices one loop turn may run (the last step may end a little past it). */
const TURN_BUDGET_MS = 2;

/** Slice sizes per kind of work: each well under a millisecond on a slow core. */
export const SLICE = {
  /** Hashing (MD5 is the slowest: ~2.5 ms per MiB here). */
  digest: 128 * 1024,
  /** memcpy: ~0.1 ms per MiB. */
  copy: 2 * 1024 * 1024,
  /** memset. */
  fill: 8 * 1024 * 1024,
} as const;

interface Job {
  readonly step: () => boolean;
  readonly resolve: () => void;
  readonly reject: (e: unknown) => void;
}

export class Pacer {
  readonly #budgetMs: number;
  readonly #now: () => number;
  #jobs: Job[] = [];
  #armed = false;
  /** Turns that ran steps, steps run, and the longest turn in ms (tests and stats). */
  readonly counts = { turns: 0, steps: 0, longestTurnMs: 0 };

  constructor(budgetMs = TURN_BUDGET_MS, now: () => number = () => performance.now()) {
    this.#budgetMs = budgetMs;
    this.#now = now;
  }

  /** Jobs not finished yet. */
  get pending(): number {
    return this.#jobs.length;
  }

  /** Run `step` (one slice per call, true when the job is done) over as many turns as it needs. */
  run(step: () => boolean): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      this.#jobs.push({ step, resolve, reject });
      this.#arm();
    });
  }

  /**
   * One step now, the rest (if any) paced: for work that is usually small
   * (one step) and only sometimes large.
   */
  start(step: () => boolean): Promise<void> {
    try {
      if (step()) return Promise.resolve();
    } catch (e) {
      return Promise.reject(e);
    }
    return this.run(step);
  }

  /** Call `slice(from, to)` over [0, total) in pieces of at most `size`. */
  each(total: number, size: number, slice: (from: number, to: number) => void): Promise<void> {
    let at = 0;
    return this.run(() => {
      const to = Math.min(total, at + size);
      slice(at, to);
      at = to;
      return at >= total;
    });
  }

  #arm(): void {
    if (this.#armed) return;
    this.#armed = true;
    setImmediate(() => this.#turn());
  }

  #turn(): void {
    this.#armed = false;
    this.counts.turns++;
    const end = this.#now() + this.#budgetMs;
    while (this.#jobs.length > 0 && this.#now() < end) {
      const job = this.#jobs.shift()!;
      this.counts.steps++;
      let done: boolean;
      try {
        done = job.step();
      } catch (e) {
        job.reject(e);
        continue;
      }
      if (done) job.resolve();
      else this.#jobs.push(job);
    }
    const took = this.#now() - end + this.#budgetMs;
    if (took > this.counts.longestTurnMs) this.counts.longestTurnMs = took;
    if (this.#jobs.length > 0) this.#arm();
  }
}

/** Jobs one after another, in arrival order (each may itself be paced). */
export class Serial {
  #tail: Promise<unknown> = Promise.resolve();
  #waiting = 0;

  get waiting(): number {
    return this.#waiting;
  }

  run<T>(job: () => Promise<T>): Promise<T> {
    this.#waiting++;
    const next = this.#tail.then(job).finally(() => {
      this.#waiting--;
    });
    this.#tail = next.catch(() => undefined);
    return next;
  }
}

/** The one pacer of the process: the S3 store and the NVMe-oF target share the loop, so they share the budget. */
export const pacer = new Pacer();

/** `buf.fill(value, start, end)` in slices. */
export function fillPaced(buf: Buffer, value: number, start: number, end: number, p: Pacer = pacer): Promise<void> {
  if (end - start <= SLICE.fill) {
    buf.fill(value, start, end);
    return Promise.resolve();
  }
  return p.each(end - start, SLICE.fill, (a, b) => {
    buf.fill(value, start + a, start + b);
  });
}

/** Buffer.concat in slices: one allocation, then the copies. */
export async function concatPaced(list: readonly Buffer[], p: Pacer = pacer): Promise<Buffer> {
  let total = 0;
  for (const b of list) total += b.length;
  if (total <= SLICE.copy) return Buffer.concat(list as Buffer[], total);
  const out = Buffer.allocUnsafe(total);
  let i = 0;
  let inner = 0;
  let at = 0;
  await p.run(() => {
    let room = SLICE.copy;
    while (room > 0 && i < list.length) {
      const src = list[i]!;
      const n = Math.min(room, src.length - inner);
      src.copy(out, at, inner, inner + n);
      at += n;
      inner += n;
      room -= n;
      if (inner >= src.length) {
        i++;
        inner = 0;
      }
      // Many tiny buffers cost per call, not per byte: count each as a small copy.
      room -= 64;
    }
    return i >= list.length;
  });
  return out;
}

/** Something fed bytes in order (a Hash, a CRC state). */
interface Digester {
  update(data: Buffer): void;
}

/** Feed `data` to every digester, a slice at a time. */
export function digestPaced(data: Buffer, digesters: readonly Digester[], p: Pacer = pacer): Promise<void> {
  if (digesters.length === 0) return Promise.resolve();
  const size = Math.max(4096, Math.floor(SLICE.digest / digesters.length));
  if (data.length <= size) {
    for (const d of digesters) d.update(data);
    return Promise.resolve();
  }
  return p.each(data.length, size, (a, b) => {
    const s = data.subarray(a, b);
    for (const d of digesters) d.update(s);
  });
}
