// The last-resort guard. Guest and client input never throws by design (every
// value is checked and refused with a status), so an exception that reaches
// one of these is a bug of ours. Left alone it would unwind into libuv and end
// the process, taking the VM's NIC with it. Each place where work starts (a
// message, a deferred turn, a timer) runs its work through `contain`, which
// logs the bug once per burst with its stack and calls the site's recovery:
// the device-level error hardware would show for that unit (a QP to ERR, a
// queue stopped, a command refused), never a crash.

import { Logger, RateLimiter } from './log';

const limiter = new RateLimiter(5, 60_000);

/** Bugs contained since start (every site together); tests and stats read it. */
export const guardStats = { contained: 0 };

/** Log a contained bug: error level, rate limited per site, with the stack. */
export function reportBug(log: Logger, where: string, err: unknown): void {
  guardStats.contained++;
  const allowed = limiter.allow(where);
  if (allowed < 0) return;
  const detail = err instanceof Error ? (err.stack ?? err.message) : String(err);
  const more = allowed > 0 ? ` (${allowed} more suppressed)` : '';
  log.error(`internal error in ${where}, contained as a device error${more}: ${detail}`);
}

/**
 * Run `fn`; if it throws, report the bug and run `recover` (itself guarded: a
 * recovery that throws is reported too, never rethrown). Returns false when
 * `fn` threw.
 */
export function contain(log: Logger, where: string, fn: () => void, recover?: (err: unknown) => void): boolean {
  try {
    fn();
    return true;
  } catch (err) {
    reportBug(log, where, err);
    if (recover) {
      try {
        recover(err);
      } catch (again) {
        reportBug(log, `${where} (recovery)`, again);
      }
    }
    return false;
  }
}

/** setImmediate whose callback runs under `contain`. */
export function guardedImmediate(
  log: Logger,
  where: string,
  fn: () => void,
  recover?: (err: unknown) => void,
): NodeJS.Immediate {
  return setImmediate(() => {
    contain(log, where, fn, recover);
  });
}

/** setTimeout whose callback runs under `contain`. */
export function guardedTimeout(
  log: Logger,
  where: string,
  ms: number,
  fn: () => void,
  recover?: (err: unknown) => void,
): NodeJS.Timeout {
  return setTimeout(() => {
    contain(log, where, fn, recover);
  }, ms);
}
