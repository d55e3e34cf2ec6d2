// The longest loop turn measured in this thread's CPU time, for the fuzz
// targets: a 1 ms timer chain notes, at each tick, the wall time and the CPU
// time (/proc/thread-self/schedstat) since the last. On a machine shared with
// other work a turn's wall time also holds the time the thread waited for a
// CPU (an idle loop sees 70 ms gaps at a load of 7 on 2 CPUs); its CPU time is
// what our code held the loop for.

import { performance } from 'perf_hooks';
import { threadCpuMs } from './mmio-probe';

export class CpuTurnWatch {
  #timer: NodeJS.Timeout | null = null;
  #lastWall = 0;
  #lastCpu = 0;
  /** CPU time spent in untimed() since the last tick: the caller's own work, not the code under test. */
  #excluded = 0;
  /** The most CPU time between two ticks (ms), and that gap's wall time. */
  maxCpuMs = 0;
  wallAtMaxMs = 0;
  /** False where schedstat cannot be read (then maxCpuMs is the wall time). */
  readonly cpuKnown = threadCpuMs() !== null;
  /** Called when a gap sets a new maximum (the caller notes what ran: its trail). */
  onMax: ((cpuMs: number, wallMs: number) => void) | null = null;

  start(): this {
    this.#lastWall = performance.now();
    this.#lastCpu = threadCpuMs() ?? this.#lastWall;
    const tick = (): void => {
      const wall = performance.now();
      const cpu = threadCpuMs() ?? wall;
      const gap = cpu - this.#lastCpu - this.#excluded;
      this.#excluded = 0;
      if (gap > this.maxCpuMs) {
        this.maxCpuMs = gap;
        this.wallAtMaxMs = wall - this.#lastWall;
        this.onMax?.(this.maxCpuMs, this.wallAtMaxMs);
      }
      this.#lastWall = wall;
      this.#lastCpu = cpu;
      this.#timer = setTimeout(tick, 1);
      this.#timer.unref();
    };
    this.#timer = setTimeout(tick, 1);
    this.#timer.unref();
    return this;
  }

  /**
   * Run `fn` (synchronous) with its CPU time left out of the turn it runs in:
   * a fuzzer's own generation of a big request is not the code under test.
   */
  untimed<T>(fn: () => T): T {
    const a = threadCpuMs();
    try {
      return fn();
    } finally {
      const b = threadCpuMs();
      if (a !== null && b !== null) this.#excluded += b - a;
    }
  }

  stop(): void {
    if (this.#timer) clearTimeout(this.#timer);
    this.#timer = null;
  }
}
