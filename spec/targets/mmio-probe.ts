// What a vCPU would feel while a target works: MMIO reads of BAR0 sent one
// after another over the rig's vfio-user socket, each timed from send to
// reply, next to the loop's own delay histogram (perf_hooks). The server
// answers those reads on the loop the targets run on, so a turn the targets
// hold shows as a long round trip.

import { monitorEventLoopDelay, performance } from 'perf_hooks';

export interface ProbeResult {
  /** Round trips completed. */
  readonly reads: number;
  /** The longest round trip, ms. */
  readonly maxRttMs: number;
  /** The longest loop turn the histogram saw, ms. */
  readonly maxTurnMs: number;
}

export class MmioProbe {
  readonly #read: () => Promise<unknown>;
  readonly #hist = monitorEventLoopDelay({ resolution: 5 });
  #running = false;
  #loop: Promise<void> = Promise.resolve();
  #reads = 0;
  #max = 0;

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
        await this.#read();
        this.#max = Math.max(this.#max, performance.now() - t0);
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
    return { reads: this.#reads, maxRttMs: this.#max, maxTurnMs: this.#hist.max / 1e6 };
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
