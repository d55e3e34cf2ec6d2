// The fuzz targets `npm run fuzz -- --target NAME` can run. Each runs against
// real components in this process for a wall-clock budget, from a seed, and
// throws FuzzFinding on anything that must not happen (a crash, a broken
// invariant, a loop turn over the target's limit). The runner (../run.ts)
// measures the longest loop turn around every target.

import type { Logger } from '../../../lib/log';

export interface FuzzRunOptions {
  readonly seed: number;
  readonly ms: number;
  readonly log: Logger;
  /** Progress, about once a second: one line. */
  readonly progress: (line: string) => void;
  /** The longest loop turn seen so far in this run, ms (the runner's watchdog). */
  readonly longestTurnMs: () => number;
  /**
   * A loop turn longer than this is a finding (`npm run fuzz`: 50 ms). The
   * suite's short runs share a loaded machine with everything else, where
   * the process itself may wait for a CPU that long, so they pass a limit
   * that only a real hold of the loop reaches.
   */
  readonly turnLimitMs: number;
}

interface FuzzTarget {
  readonly name: string;
  readonly describe: string;
  /** Runs until the budget is spent; resolves with a one-line summary (counts of what it did). */
  run(o: FuzzRunOptions): Promise<string>;
}

/** Something that must not happen happened; the message names the seed and the last steps. */
export class FuzzFinding extends Error {
  constructor(
    message: string,
    readonly seed: number,
    readonly epoch: number,
    readonly trail: readonly string[],
  ) {
    super(`${message} (seed ${seed}, epoch ${epoch}; last actions: ${trail.join(' | ')})`);
  }
}

/** The registry: name -> target. Targets add themselves in ./all.ts. */
export const FUZZ_TARGETS = new Map<string, FuzzTarget>();

export function registerTarget(t: FuzzTarget): void {
  if (FUZZ_TARGETS.has(t.name)) throw new Error(`fuzz target ${t.name} registered twice`);
  FUZZ_TARGETS.set(t.name, t);
}

/**
 * Exceptions that escape a target while it runs: uncaught ones and
 * unhandled rejections, kept in `seen` (a target may add its own, such as a
 * rejected submission) until stop().
 */
export class EscapeWatch {
  readonly seen: string[] = [];
  readonly #onUncaught = (e: unknown): void => {
    this.seen.push(`uncaught: ${e instanceof Error ? (e.stack ?? e.message) : String(e)}`);
  };
  readonly #onRejection = (e: unknown): void => {
    this.seen.push(`unhandled rejection: ${e instanceof Error ? (e.stack ?? e.message) : String(e)}`);
  };

  start(): this {
    process.on('uncaughtException', this.#onUncaught);
    process.on('unhandledRejection', this.#onRejection);
    return this;
  }

  stop(): void {
    process.off('uncaughtException', this.#onUncaught);
    process.off('unhandledRejection', this.#onRejection);
  }
}
