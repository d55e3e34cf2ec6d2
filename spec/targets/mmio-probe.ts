// What a vCPU would feel while a target works: MMIO reads of BAR0 sent one
// after another over the rig's vfio-user socket, each timed from send to
// reply, next to the loop's own delay histogram (perf_hooks). The server
// answers those reads on the loop the targets run on, so a turn the targets
// hold shows as a long round trip.
//
// On a machine shared with other work, the wall time of a round trip also
// holds the time this thread waited for a CPU (an idle loop here sees gaps of
// 70 ms at a load of 7 on 2 CPUs). So each round trip is also timed in this
// thread's own CPU time (/proc/thread-self/schedstat: nanoseconds on a CPU):
// that is the loop being held by our code, whatever else runs.

import { readFileSync } from 'fs';
import { monitorEventLoopDelay, performance } from 'perf_hooks';

interface ProbeResult {
  /** Round trips completed. */
  readonly reads: number;
  /** The longest round trip, ms (wall clock). */
  readonly maxRttMs: number;
  /** The most CPU time this thread spent within one round trip, ms (the wall figure when schedstat cannot be read). */
  readonly maxRttCpuMs: number;
  /** The longest loop turn the histogram saw, ms (wall clock). */
  readonly maxTurnMs: number;
}

/** This thread's time on a CPU, ms; null where /proc/thread-self/schedstat is missing. */
export function threadCpuMs(): number | null {
  try {
    return Number(readFileSync('/proc/thread-self/schedstat', 'latin1').split(' ')[0]) / 1e6;
  } catch {
    return null;
  }
}

export class MmioProbe {
  readonly #read: () => Promise<unknown>;
  readonly #hist = monitorEventLoopDelay({ resolution: 5 });
  #running = false;
  #loop: Promise<void> = Promise.resolve();
  #reads = 0;
  #max = 0;
  #maxCpu = 0;

  /** `read`: one MMIO round trip (a BAR0 read of the guest model). */
  constructor(read: () => Promise<unknown>) {
    this.#read = read;
  }

  start(): void {
    this.#running = true;
    this.#hist.enable();
    this.#loop = (async () => {
      while (this.#running) {
        const t0 = performance.now();
        const c0 = threadCpuMs();
        await this.#read();
        const wall = performance.now() - t0;
        const c1 = threadCpuMs();
        this.#max = Math.max(this.#max, wall);
        this.#maxCpu = Math.max(this.#maxCpu, c0 !== null && c1 !== null ? c1 - c0 : wall);
        this.#reads++;
      }
    })();
  }

  async stop(): Promise<ProbeResult> {
    this.#running = false;
    await this.#loop;
    // One more sampling period, so a turn that just ended is in the histogram.
    await new Promise((r) => setTimeout(r, 12));
    this.#hist.disable();
    return { reads: this.#reads, maxRttMs: this.#max, maxRttCpuMs: this.#maxCpu, maxTurnMs: this.#hist.max / 1e6 };
  }

  /** Probe while `attack` runs; the figures, and what the attack returned. */
  static async during<T>(read: () => Promise<unknown>, attack: () => Promise<T>): Promise<ProbeResult & { value: T }> {
    const p = new MmioProbe(read);
    p.start();
    try {
      const value = await attack();
      return { ...(await p.stop()), value };
    } catch (e) {
      await p.stop();
      throw e;
    }
  }
}
