// The health check (the C design's health-check thread): one interval timer,
// running only while connections exist. Each tick closes a connection that
// never finished registration or handshake within ESTABLISH_INTERVALS, closes
// an established one silent for DEAD_AFTER_INTERVALS, and pings: the manager
// every worker each interval, anyone else a link quiet for half an interval.

import type { MeshConnection } from './connection';
import { DEAD_AFTER_INTERVALS, ESTABLISH_INTERVALS } from './limits';

interface HealthCheckHost {
  readonly role: 'manager' | 'worker';
  /** The connections to watch (the live set, read at each tick). */
  readonly connections: ReadonlySet<MeshConnection>;
  /** The role's own tick, run before the connections are checked. */
  onTick(): void;
  /** Send a HEARTBEAT on `conn`. */
  ping(conn: MeshConnection): void;
}

export class HealthCheck {
  #timer: NodeJS.Timeout | undefined;

  constructor(readonly intervalMs: number, private readonly host: HealthCheckHost) {}

  start(): void {
    if (this.#timer) return;
    this.#timer = setInterval(this.#onTick, this.intervalMs);
    this.#timer.unref();
  }

  stop(): void {
    if (this.#timer) clearInterval(this.#timer);
    this.#timer = undefined;
  }

  readonly #onTick = (): void => {
    const now = Date.now();
    const interval = this.intervalMs;
    const host = this.host;
    host.onTick();
    for (const conn of [...host.connections]) {
      if (!conn.established) {
        if (now - conn.openedAt >= ESTABLISH_INTERVALS * interval) {
          conn.close(conn.outgoing ? 'no answer to registration or handshake' : 'never registered or handshook');
        }
        continue;
      }
      const silent = now - conn.lastHeardAt;
      if (silent >= DEAD_AFTER_INTERVALS * interval) {
        conn.close(`nothing heard for ${DEAD_AFTER_INTERVALS} heartbeat intervals`);
        continue;
      }
      if ((host.role === 'manager' && conn.kind === 'worker') || silent >= interval / 2) host.ping(conn);
    }
  };
}
