// Readiness for systemd (Type=notify). The notification is a datagram on the
// AF_UNIX socket named by NOTIFY_SOCKET; Node has no datagram UNIX sockets and
// the native helper is kept to fd passing and mapping, so the message goes
// through systemd's own `systemd-notify`, which waits until the manager has
// taken it (systemd >= 246), so it is not lost when the helper exits first.
// The unit needs NotifyAccess=all for a child's message to count.

import { execFile } from 'child_process';
import type { Logger } from '../log';

interface NotifyOptions {
  readonly env?: NodeJS.ProcessEnv;
  /** The program to run (default systemd-notify, found on PATH). */
  readonly program?: string;
}

/**
 * Tells systemd the service is ready, when it runs under one that asked
 * (NOTIFY_SOCKET set); otherwise does nothing. Never blocks the loop; a
 * failure is one warning, and the service keeps running.
 */
export function notifyReady(status: string, log: Logger, o: NotifyOptions = {}): Promise<boolean> {
  const env = o.env ?? process.env;
  if (!env.NOTIFY_SOCKET) return Promise.resolve(false);
  return new Promise((resolve) => {
    execFile(
      o.program ?? 'systemd-notify',
      ['--ready', `--pid=${process.pid}`, `--status=${status.slice(0, 200)}`],
      { env, timeout: 10_000 },
      (err) => {
        if (err) {
          log.warn(
            `systemd: could not report readiness (${err.message.split('\n')[0]}); a Type=notify unit will time out`,
          );
          resolve(false);
        } else resolve(true);
      },
    );
  });
}
