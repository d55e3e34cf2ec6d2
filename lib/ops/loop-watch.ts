// How long the event loop was held: the longest turn seen. perf_hooks'
// histogram samples the loop's delay from libuv's side (its timer runs on the
// loop, so a turn that holds the loop delays it by that much). That sampling
// timer is a cost of its own, so the server runs it only when asked
// (--loop-watch, a debugging aid); the fuzzer always does.

import { monitorEventLoopDelay, IntervalHistogram } from 'perf_hooks';

export class LoopWatch {
  readonly #h: IntervalHistogram;

  /** `resolutionMs`: the sampling interval (a turn shorter than it may go unseen). */
  constructor(resolutionMs = 5) {
    this.#h = monitorEventLoopDelay({ resolution: resolutionMs });
    this.#h.enable();
  }

  /** The longest delay seen so far, in ms (the longest loop turn, within the resolution). */
  get maxMs(): number {
    return this.#h.max / 1e6;
  }

  get p99Ms(): number {
    return this.#h.percentile(99) / 1e6;
  }

  reset(): void {
    this.#h.reset();
  }

  stop(): void {
    this.#h.disable();
  }
}
