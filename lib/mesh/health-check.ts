// The health check (the C rocm-ernic's health-check thread) and the admission of
// new connections. The core calls start() for every connection it adopts,
// before anything is read from it; start() then
//
// - gives the connection's parser its gate: the connection is what the
//   partial-frame budget wakes, and a link that is not established may not
//   have a data frame's body buffered at all;
// - closes an accepted connection past the bounds on connections that have
//   not registered or handshaken yet (PENDING_CONNECTIONS in all,
//   PENDING_PER_ADDRESS from one address);
// - arms the setup deadline: an accepted connection that has not registered
//   or handshaken within SETUP_TIMEOUT_MS (or three intervals, if shorter)
//   is closed. One timer, for the earliest deadline, while any is pending.
//
// The interval timer runs only while connections exist. Each tick closes a
// dialled connection that got no answer within ESTABLISH_INTERVALS, closes
// an established one silent for DEAD_AFTER_INTERVALS, closes one whose
// partial frame has held room in the budget for PARTIAL_FRAME_MS while
// others wait for room, and pings: the manager every worker each interval,
// anyone else a link quiet for half an interval.

import type { MeshConnection } from './connection';
import type { FrameGate } from './frame-parser';
import { partialFrames } from './inbound-budget';
import {
  DEAD_AFTER_INTERVALS,
  ESTABLISH_INTERVALS,
  PARTIAL_FRAME_MS,
  PENDING_CONNECTIONS,
  PENDING_PER_ADDRESS,
  SETUP_TIMEOUT_MS,
} from './limits';
import { FrameHeader, MsgType } from './messages';

interface HealthCheckHost {
  readonly role: 'manager' | 'worker';
  /** The connections to watch (the live set, read at each tick). */
  readonly connections: ReadonlySet<MeshConnection>;
  /** The role's own tick, run before the connections are checked. */
  onTick(): void;
  /** Send a HEARTBEAT on `conn`. */
  ping(conn: MeshConnection): void;
}

/** What a link may carry before it is established (anything else is refused before its body is buffered). */
function setupType(type: number): boolean {
  return (
    type === MsgType.REGISTER_NODE ||
    type === MsgType.REGISTER_RESP ||
    type === MsgType.HANDSHAKE ||
    type === MsgType.HANDSHAKE_RESP ||
    type === MsgType.HEARTBEAT ||
    type === MsgType.HEARTBEAT_RESP
  );
}

class ConnectionGate implements FrameGate {
  constructor(readonly waiter: MeshConnection) {}

  allows(h: FrameHeader): boolean {
    return this.waiter.established || setupType(h.type);
  }
}

/** Accepted and not yet registered or handshaken. */
function pending(conn: MeshConnection): boolean {
  return !conn.outgoing && !conn.established && !conn.closed;
}

export class HealthCheck {
  #timer: NodeJS.Timeout | undefined;
  #setupTimer: NodeJS.Timeout | undefined;
  /** Connections start() has already admitted. */
  readonly #seen = new WeakSet<MeshConnection>();

  constructor(
    readonly intervalMs: number,
    private readonly host: HealthCheckHost,
  ) {}

  /** How long an accepted connection has to register or handshake. */
  get setupMs(): number {
    return Math.min(SETUP_TIMEOUT_MS, ESTABLISH_INTERVALS * this.intervalMs);
  }

  /** A connection was adopted (and maybe others since the last call): admit the new ones, run the timers. */
  start(): void {
    this.#admitNew();
    this.#armSetup();
    if (this.#timer) return;
    this.#timer = setInterval(this.#onTick, this.intervalMs);
    this.#timer.unref();
  }

  stop(): void {
    if (this.#timer) clearInterval(this.#timer);
    this.#timer = undefined;
    if (this.#setupTimer) clearTimeout(this.#setupTimer);
    this.#setupTimer = undefined;
  }

  #admitNew(): void {
    const fresh: MeshConnection[] = [];
    let all = 0;
    const perAddress = new Map<string, number>();
    for (const conn of this.host.connections) {
      if (!this.#seen.has(conn)) {
        this.#seen.add(conn);
        conn.parser.setGate(new ConnectionGate(conn));
        if (pending(conn)) fresh.push(conn);
        continue;
      }
      if (!pending(conn)) continue;
      all++;
      perAddress.set(conn.remoteAddress, (perAddress.get(conn.remoteAddress) ?? 0) + 1);
    }
    for (const conn of fresh) {
      const from = perAddress.get(conn.remoteAddress) ?? 0;
      if (all >= PENDING_CONNECTIONS || from >= PENDING_PER_ADDRESS) {
        conn.close(
          all >= PENDING_CONNECTIONS
            ? `${all} connections wait for registration or handshake (at most ${PENDING_CONNECTIONS})`
            : `${from} connections from ${conn.remoteAddress} wait for registration or handshake (at most ${PENDING_PER_ADDRESS})`,
        );
        continue;
      }
      all++;
      perAddress.set(conn.remoteAddress, from + 1);
    }
  }

  /** One timer for the earliest setup deadline of the pending connections. */
  #armSetup(): void {
    if (this.#setupTimer) return;
    let first = Infinity;
    for (const conn of this.host.connections) if (pending(conn) && conn.openedAt < first) first = conn.openedAt;
    if (first === Infinity) return;
    this.#setupTimer = setTimeout(this.#onSetupDeadline, Math.max(0, first + this.setupMs - Date.now()));
    this.#setupTimer.unref();
  }

  readonly #onSetupDeadline = (): void => {
    this.#setupTimer = undefined;
    const now = Date.now();
    for (const conn of [...this.host.connections]) {
      if (pending(conn) && now - conn.openedAt >= this.setupMs) {
        conn.close(`never registered or handshook within ${this.setupMs} ms`);
      }
    }
    this.#armSetup();
  };

  readonly #onTick = (): void => {
    const now = Date.now();
    const interval = this.intervalMs;
    const host = this.host;
    host.onTick();
    const contended = partialFrames.waiting > 0;
    for (const conn of [...host.connections]) {
      if (!conn.established) {
        if (conn.outgoing && now - conn.openedAt >= ESTABLISH_INTERVALS * interval)
          conn.close('no answer to registration or handshake');
        continue;
      }
      const since = conn.parser.partialSince;
      if (contended && since > 0 && now - since >= PARTIAL_FRAME_MS) {
        conn.close(
          `a partial frame held ${conn.parser.charged} bytes of room for ${now - since} ms while others waited`,
        );
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
