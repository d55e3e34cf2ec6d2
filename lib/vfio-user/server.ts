// The vfio-user server: a listening UNIX socket serving one client at a time.
//
// While a client is attached we stop accepting: a second client waits in the
// listen backlog and is served when the first leaves (QEMU connects once and
// never retries, so closing it early would only make it fail). On disconnect
// the session drops its DMA maps and eventfds; the device keeps its state.

import * as fs from 'fs';
import * as net from 'net';
import { Logger, nullLogger } from '../log';
import * as native from '../native';
import type { VfioUserDevice } from './device';
import { DEFAULT_SESSION_LIMITS, Session, SessionLimits } from './session';
import { closeQuietly } from './transport';
import { warmUp, WarmUpPlan } from './warm-up';

export interface ServerOptions {
  readonly socketPath: string;
  readonly device: VfioUserDevice;
  readonly log?: Logger;
  /** chmod of the socket file (for example 0o660). */
  readonly mode?: number;
  /** Group (name or gid) to chown the socket file to. */
  readonly group?: string | number;
  readonly limits?: Partial<SessionLimits>;
  /**
   * Warm the request path up on the device before listening (lib/vfio-user/warm-up.ts):
   * no JIT pauses in the first client's MMIO. Costs about 0.1 s in listen().
   */
  readonly warmUp?: WarmUpPlan;
}

export class SocketInUseError extends Error {
  readonly code = 'ESOCKETINUSE';
}

export class VfioUserServer {
  readonly socketPath: string;
  readonly #device: VfioUserDevice;
  readonly #log: Logger;
  readonly #limits: SessionLimits;
  readonly #opts: ServerOptions;
  #listenFd = -1;
  #watcher: native.Watcher | null = null;
  #session: Session | null = null;
  #closed = false;
  #sessions = 0;
  #listeners: { client: ((s: Session) => void)[]; disconnect: ((s: Session, reason: string) => void)[] } = {
    client: [],
    disconnect: [],
  };

  constructor(opts: ServerOptions) {
    this.#opts = opts;
    this.socketPath = opts.socketPath;
    this.#device = opts.device;
    this.#log = opts.log ?? nullLogger;
    this.#limits = { ...DEFAULT_SESSION_LIMITS, ...opts.limits };
  }

  /** The current client's session, if one is attached. */
  get session(): Session | null {
    return this.#session;
  }

  /** Clients served so far (including the current one). */
  get sessionsServed(): number {
    return this.#sessions;
  }

  onClient(fn: (s: Session) => void): void {
    this.#listeners.client.push(fn);
  }

  onDisconnect(fn: (s: Session, reason: string) => void): void {
    this.#listeners.disconnect.push(fn);
  }

  /**
   * Create the socket and start accepting. Refuses to take over a socket that a
   * live server answers on; replaces a stale one; never removes a non-socket file.
   */
  async listen(): Promise<void> {
    native.loadNative(); // a missing addon is one error line, before the warm-up
    await prepareSocketPath(this.socketPath);
    if (this.#opts.warmUp) {
      try {
        const r = await warmUp(this.#device, this.#opts.warmUp, this.#limits);
        this.#log.debug(`vfio-user: warmed up with ${r.requests} requests in ${r.ms.toFixed(0)} ms`);
      } catch (e) {
        // Only slower first accesses: serve anyway.
        this.#log.warn(`vfio-user: warm-up failed: ${(e as Error).message}`);
      }
    }
    this.#listenFd = native.listen(this.socketPath, 16);
    try {
      if (this.#opts.mode !== undefined) fs.chmodSync(this.socketPath, this.#opts.mode);
      if (this.#opts.group !== undefined) fs.chownSync(this.socketPath, -1, resolveGroup(this.#opts.group));
    } catch (e) {
      this.close();
      throw e;
    }
    const self = this;
    this.#watcher = native.watch(this.#listenFd, native.READABLE, function onListenReady(status: number) {
      if (status < 0) self.#log.error(`vfio-user: listen socket error ${status}`);
      else self.#acceptOne();
    });
    this.#log.info(`vfio-user: listening on ${this.socketPath}`);
  }

  /** Stop: close the client, the listening socket, and remove the socket file. */
  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    this.#session?.close('server shutting down');
    this.#watcher?.close();
    this.#watcher = null;
    if (this.#listenFd >= 0) {
      closeQuietly(this.#listenFd);
      this.#listenFd = -1;
      try {
        fs.unlinkSync(this.socketPath);
      } catch {
        /* already gone */
      }
    }
  }

  #acceptOne(): void {
    if (this.#session || this.#closed) return;
    let fd: number;
    try {
      fd = native.accept(this.#listenFd);
    } catch (e) {
      this.#log.warn(`vfio-user: accept failed: ${(e as Error).message}`);
      return;
    }
    if (fd < 0) return;
    this.#sessions++;
    const session = new Session(fd, this.#device, this.#limits, this.#log, (s, reason) =>
      this.#onSessionClosed(s, reason),
    );
    this.#session = session;
    // One client at a time: queue the next in the backlog until this one leaves.
    this.#watcher?.update(0);
    this.#log.info(`vfio-user: client connected (session ${this.#sessions})`);
    for (const fn of this.#listeners.client) fn(session);
    session.start();
  }

  #onSessionClosed(s: Session, reason: string): void {
    if (this.#session === s) this.#session = null;
    for (const fn of this.#listeners.disconnect) fn(s, reason);
    if (!this.#closed) {
      this.#watcher?.update(native.READABLE);
      // A client may already wait in the backlog.
      setImmediate(() => this.#acceptOne());
    }
  }
}

/** Make `path` free for a new socket: remove a stale socket, refuse a live one or a non-socket. */
export async function prepareSocketPath(path: string): Promise<void> {
  let st: fs.Stats;
  try {
    st = fs.lstatSync(path);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return;
    throw e;
  }
  if (!st.isSocket()) throw new SocketInUseError(`${path} exists and is not a socket; refusing to replace it`);
  if (await socketIsLive(path)) throw new SocketInUseError(`${path} is in use by a running server`);
  fs.unlinkSync(path);
}

/** True when something accepts connections on the socket. */
export function socketIsLive(path: string): Promise<boolean> {
  return new Promise((resolve) => {
    const c = net.connect(path);
    c.once('connect', () => {
      c.destroy();
      resolve(true);
    });
    // Only ECONNREFUSED (nobody listens) or ENOENT proves the socket stale. Any
    // other error, notably EAGAIN from a live server whose backlog is full (its
    // client is attached and others wait), must not let us unlink its socket.
    c.once('error', (e: NodeJS.ErrnoException) => resolve(e.code !== 'ECONNREFUSED' && e.code !== 'ENOENT'));
  });
}

function resolveGroup(group: string | number): number {
  if (typeof group === 'number') return group;
  if (/^\d+$/.test(group)) return Number(group);
  const line = fs
    .readFileSync('/etc/group', 'utf8')
    .split('\n')
    .find((l) => l.split(':')[0] === group);
  if (!line) throw new Error(`unknown group ${group}`);
  return Number(line.split(':')[2]);
}
