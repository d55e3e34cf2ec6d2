// The TCP mesh between rocm-ernic servers: the public face (class Mesh) and
// the core that ties the pieces together. One event loop does what the C
// design's accept, receive, send, health-check, broadcast and peer-connect
// threads did (spec/architecture.rst "Threads"), with the same bounds and
// timeouts:
//
// - accept: the listener's 'connection' handler (here);
// - receive: each connection's 'data' handler and frame parser
//   (connection.ts), then frame-router.ts: data messages go to 'message'
//   listeners, charged to the inbound queue (inbound-budget.ts), or are relayed;
// - send: frame-writer.ts builds frames, each connection's queue writes them
//   as the socket drains (outbound-queue.ts);
// - health check: health-check.ts, one interval timer running only while
//   connections exist, pings and closes silent links;
// - broadcast and peer connect: the roles (manager-role.ts, worker-role.ts).
//
// This file keeps the public API, the core the roles use (role.ts), the set
// of connections and the routes behind 'peer-up'/'peer-down'. The layer above
// (the RDMA data path) uses send() and the events (mesh-types.ts); it never
// sees sockets. Nothing a peer sends throws out of here: bad frames close
// their connection with a logged reason, and a listener that throws is logged
// as a bug.

import { randomBytes } from 'node:crypto';
import { EventEmitter } from 'node:events';
import * as net from 'node:net';
import { Logger, nullLogger, RateLimiter, warnLimited } from '../log';
import { gidToText, HostPort, parseHost } from './address';
import { dataHeaderSize, hasIonicMagic, isDataType, isInstanceId } from './codec';
import { ConnectionOwner, LinkKind, MeshConnection } from './connection';
import { listen, Resolver, rewrapAccepted, systemResolver } from './dial';
import { MeshError } from './errors';
import { FrameRouter } from './frame-router';
import { FrameWriter } from './frame-writer';
import { GidTable } from './gid-table';
import { HealthCheck } from './health-check';
import { InboundBudget } from './inbound-budget';
import {
  DEFAULT_HEARTBEAT_MS, DEFAULT_LISTEN_BACKLOG, DEFAULT_SEND_TIMEOUT_MS, MAX_FRAME_PAYLOAD, MAX_NODE_GIDS, MeshLimits,
  resolveLimits,
} from './limits';
import { ManagerRole } from './manager-role';
import type { MeshEvents, MeshOptions, MeshStats, Placer, Route, SendOptions, SendResult } from './mesh-types';
import { InstanceId, MsgType, NodeInfo } from './messages';
import type { MeshCore, Role } from './role';
import { WorkerRole } from './worker-role';

export class Mesh extends EventEmitter<MeshEvents> {
  readonly instance: InstanceId;
  readonly role: 'manager' | 'worker';
  readonly #log: Logger;
  readonly #limiter = new RateLimiter(10, 10_000);
  readonly #limits: MeshLimits;
  readonly #sendTimeoutMs: number;
  readonly #heartbeatMs: number;
  readonly #backlog: number;
  readonly #debug: boolean;
  readonly #resolve: Resolver;
  readonly #server: net.Server;
  readonly #gids = new GidTable();
  readonly #localGids: Buffer[] = [];
  #placer: Placer | null = null;
  readonly #conns = new Set<MeshConnection>();
  readonly #budget: InboundBudget;
  readonly #routes = new Map<number, Route>();
  readonly #role: Role;
  readonly #writer = new FrameWriter(() => this.nodeId);
  readonly #router: FrameRouter;
  readonly #health: HealthCheck;
  #listenPort = 0;
  #closing = false;
  #protocolErrors = 0;
  #lastReason = '';

  private constructor(opts: MeshOptions) {
    super();
    this.#log = opts.log ?? nullLogger;
    this.#limits = resolveLimits(opts.limits);
    this.role = opts.config.role;
    const timeout = opts.sendTimeoutMs ?? DEFAULT_SEND_TIMEOUT_MS;
    this.#sendTimeoutMs = this.role === 'manager' ? Math.max(1, Math.floor(timeout / 2)) : timeout;
    this.#heartbeatMs = opts.heartbeatMs ?? DEFAULT_HEARTBEAT_MS;
    this.#backlog = opts.listenBacklog ?? DEFAULT_LISTEN_BACKLOG;
    this.#debug = opts.debug ?? false;
    this.#resolve = opts.resolve ?? systemResolver;
    if (opts.instance !== undefined && !isInstanceId(opts.instance)) throw new RangeError(`bad instance id '${opts.instance}'`);
    if (opts.advertiseHost !== undefined && opts.advertiseHost !== '' && !parseHost(opts.advertiseHost)) {
      throw new RangeError(`bad advertised host '${opts.advertiseHost}'`);
    }
    this.instance = opts.instance ?? randomInstance();
    for (const g of opts.guestGids ?? []) this.#addGid(g);
    this.#budget = new InboundBudget(this.#limits.inboundQueueBytes, this.#limits.inboundQueueMessages, {
      onStall: (ms) => this.#safeEmit('pressure', ms),
    });
    // Paused: an accepted socket is re-wrapped (rewrapAccepted) before anything is read from it.
    this.#server = net.createServer({ pauseOnConnect: true }, (socket) => this.#onAccept(socket));
    this.#server.on('error', (err) => this.#log.error(`mesh: listener error: ${err.message}`));
    const core = this.#core();
    if (opts.config.role === 'manager') {
      this.#role = new ManagerRole(core);
    } else {
      const manager: HostPort = opts.config.manager;
      this.#role = new WorkerRole(core, manager, opts.advertiseHost ?? '');
    }
    const role = this.#role;
    this.#router = new FrameRouter({
      log: this.#log, limiter: this.#limiter, role, writer: this.#writer, budget: this.#budget,
      nodeId: () => this.nodeId,
      violation: (conn, reason) => this.#violation(conn, reason),
      emitMessage: (msg) => this.#safeEmit('message', msg),
      debug: (message) => this.#dbg(message),
    });
    this.#health = new HealthCheck(this.#heartbeatMs, {
      role: this.role, connections: this.#conns,
      onTick: () => role.onTick(),
      ping: (conn) => this.#writer.heartbeat(conn, false),
    });
  }

  /** Listen, then (worker) start registering in the background. */
  static async start(opts: MeshOptions): Promise<Mesh> {
    const mesh = new Mesh(opts);
    const c = opts.config;
    const host = c.role === 'manager' ? c.listen.host : opts.peerListen?.host;
    const port = c.role === 'manager' ? c.listen.port : opts.peerListen?.port ?? 0;
    mesh.#listenPort = await listen(mesh.#server, host, port, mesh.#backlog);
    mesh.#log.info(`mesh: ${mesh.role} listening on port ${mesh.#listenPort} (instance ${mesh.instance})`);
    mesh.#role.start();
    return mesh;
  }

  // -------------------------------------------------------------------------
  // Public API

  /** Our node id: 0 on the manager, a worker's once registered. */
  get nodeId(): number | undefined {
    return this.#role.nodeId();
  }

  get listenPort(): number {
    return this.#listenPort;
  }

  /** The send timeout this node applies (the manager's is half the configured one). */
  get sendTimeoutMs(): number {
    return this.#sendTimeoutMs;
  }

  /**
   * Send a data message to `nodeId`. `header` is the type's fixed header (60
   * bytes for IONIC), `payload` up to two (or more) parts written after it
   * without copying: the caller hands them over and must not change them.
   */
  send(nodeId: number, type: number, header: Buffer, payload: Buffer | readonly Buffer[] = [], opts: SendOptions = {}): SendResult {
    if (!isDataType(type) || header.length !== dataHeaderSize(type)) return 'bad-message';
    if (type === MsgType.IONIC && !hasIonicMagic(header)) return 'bad-message';
    const parts = Buffer.isBuffer(payload) ? [payload] : payload;
    let length = header.length;
    for (const p of parts) length += p.length;
    if (length > MAX_FRAME_PAYLOAD) return 'too-large';
    const me = this.nodeId;
    if (me === undefined || nodeId === me || this.#closing) return 'no-route';
    const conn = this.#role.route(nodeId);
    if (!conn) return 'no-route';
    const r = this.#writer.data(conn, {
      type, src: me, dst: nodeId, srcQpn: opts.srcQpn ?? 0, dstQpn: opts.dstQpn ?? 0, header, parts, length,
      reply: opts.reply ?? false, ...(opts.tag === undefined ? {} : { tag: opts.tag }), ...(opts.onDone ? { onDone: opts.onDone } : {}),
    });
    if (r === 'queued') return 'queued';
    if (r === 'queue-full') return 'queue-full';
    return 'no-route';
  }

  /** Take back queued (not yet written) messages sent with `tag`; returns how many. */
  takeBack(tag: number): number {
    let n = 0;
    for (const c of this.#conns) n += c.takeBack(tag);
    return n;
  }

  /** How `nodeId` is reached now, or undefined. */
  routeTo(nodeId: number): Route | undefined {
    return this.#routes.get(nodeId);
  }

  /**
   * Where the payload of a large IONIC message for us may be written as it
   * arrives, decided from its 60-byte header (the RDMA data path places an
   * RDMA WRITE straight into the MR); null to have it buffered as usual.
   */
  setPlacer(placer: Placer | null): void {
    this.#placer = placer;
  }

  /** Add one of our guest's GIDs (learned from its frames); false when already known or the set is full. */
  addLocalGid(gid: Buffer): boolean {
    if (gid.length === 16 && this.#localGids.length >= MAX_NODE_GIDS && !this.#localGids.some((g) => g.equals(gid))) {
      warnLimited(this.#log, this.#limiter, 'local-gids-full', `mesh: our guest shows more than ${MAX_NODE_GIDS} GIDs; ${gidToText(gid)} is not advertised (nor any further one)`);
      return false;
    }
    if (!this.#addGid(gid)) return false;
    this.#log.info(`mesh: our guest's GID ${gidToText(gid)} (${this.#localGids.length} of ${MAX_NODE_GIDS})`);
    this.#role.localGidsChanged();
    return true;
  }

  localGids(): readonly Buffer[] {
    return this.#localGids;
  }

  /** The node that owns `gid` (ours included), or undefined: nobody, or two nodes claim it. */
  lookupGid(gid: Buffer): number | undefined {
    if (gid.length !== 16) return undefined;
    for (const g of this.#localGids) if (g.equals(gid)) return this.nodeId;
    return this.#gids.lookup(gid);
  }

  /** The topology as last reported. */
  topology(): readonly NodeInfo[] {
    return this.#role.topology();
  }

  /**
   * Whether the layer above is consuming messages (a QEMU client is
   * connected). After NO_CONSUMER_DROP_MS absent, a full inbound queue drops
   * what arrives instead of holding back the senders. Returns how many were
   * dropped while absent, when coming back.
   */
  setConsumerPresent(present: boolean): number {
    const dropped = this.#budget.setConsumerPresent(present);
    if (dropped > 0) this.#log.warn(`mesh: dropped ${dropped} inbound messages while no client was connected`);
    return dropped;
  }

  stats(): MeshStats {
    let outboundBytes = 0;
    let established = 0;
    let held = 0;
    let parserBytes = 0;
    for (const c of this.#conns) {
      outboundBytes += c.outbound.dataBytes;
      if (c.established) established++;
      if (c.held) held++;
      parserBytes += c.parser.bufferedBytes;
    }
    return {
      nodeId: this.nodeId,
      role: this.role,
      connections: this.#conns.size,
      established,
      outboundBytes,
      inboundBytes: this.#budget.bytes,
      inboundMessages: this.#budget.messages,
      heldConnections: held,
      parserBytes,
      inboundDropped: this.#budget.dropped,
      relayDropped: this.#router.relayDropped,
      protocolErrors: this.#protocolErrors,
    };
  }

  /** Close the listener and every connection, stop every timer. */
  async close(): Promise<void> {
    if (this.#closing) return;
    this.#closing = true;
    this.#role.stop();
    this.#health.stop();
    for (const c of [...this.#conns]) c.close('mesh closing');
    this.#budget.dispose();
    await new Promise<void>((resolve) => this.#server.close(() => resolve()));
  }

  // -------------------------------------------------------------------------
  // Core for the roles

  #core(): MeshCore {
    const mesh = this;
    return {
      log: this.#log,
      instance: this.instance,
      gids: this.#gids,
      resolve: this.#resolve,
      maxNodes: this.#limits.maxNodes,
      heartbeatMs: this.#heartbeatMs,
      get closing(): boolean {
        return mesh.#closing;
      },
      now: () => Date.now(),
      listenPort: () => this.#listenPort,
      localGids: () => this.#localGids,
      adopt: (socket, kind, outgoing) => this.#adopt(socket, kind, outgoing),
      sendControl: (conn, type, body) => this.#writer.control(conn, type, body),
      routesChanged: (reason) => this.#routesChanged(reason),
      emitTopology: (nodes) => this.#safeEmit('topology', nodes),
      emitRegistered: (id) => this.#safeEmit('registered', id),
      emitRefused: (errno, reason) => this.#safeEmit('registration-refused', errno, reason),
      warn: (key, message, meta) => warnLimited(this.#log, this.#limiter, key, message, meta),
      debug: (message, meta) => this.#dbg(message, meta),
      violation: (conn, reason) => this.#violation(conn, reason),
    };
  }

  #dbg(message: string, meta?: Record<string, unknown>): void {
    if (this.#debug) warnLimited(this.#log, this.#limiter, `debug:${message.slice(0, 40)}`, message, meta);
    else this.#log.debug(message, meta);
  }

  #addGid(gid: Buffer): boolean {
    if (gid.length !== 16 || this.#localGids.length >= MAX_NODE_GIDS) return false;
    if (this.#localGids.some((g) => g.equals(gid))) return false;
    this.#localGids.push(Buffer.from(gid));
    return true;
  }

  #safeEmit<K extends keyof MeshEvents>(event: K, ...args: MeshEvents[K]): void {
    try {
      (this.emit as (e: K, ...a: MeshEvents[K]) => boolean)(event, ...args);
    } catch (e) {
      this.#log.error(`mesh: a '${String(event)}' listener threw (a bug above the mesh): ${(e as Error).stack ?? String(e)}`);
    }
  }

  // -------------------------------------------------------------------------
  // Connections

  #onAccept(accepted: net.Socket): void {
    if (this.#closing) {
      accepted.destroy();
      return;
    }
    const socket = rewrapAccepted(accepted) ?? accepted.resume();
    const conn = this.#adopt(socket, 'pending', false);
    this.#dbg(`mesh: accepted ${conn.remote}`);
  }

  #adopt(socket: net.Socket, kind: LinkKind, outgoing: boolean): MeshConnection {
    const conn = new MeshConnection(socket, this.#owner, {
      sendTimeoutMs: this.#sendTimeoutMs,
      kind,
      outgoing,
      limits: {
        requestBytes: this.#limits.requestQueueBytes,
        connectionBytes: this.#limits.connectionQueueBytes,
        controlBytes: this.#limits.controlQueueBytes,
      },
    });
    this.#conns.add(conn);
    if (!this.#closing) this.#health.start();
    return conn;
  }

  readonly #owner: ConnectionOwner = {
    onFrame: (conn, h, body, placed) => this.#router.onFrame(conn, h, body, placed),
    place: (conn, h, head) => this.#router.place(conn, h, head, this.#placer),
    onProtocolError: (conn, error) => this.#onProtocolError(conn, error),
    onClose: (conn, reason) => this.#onClose(conn, reason),
    onWritable: (conn) => this.#onWritable(conn),
  };

  #onProtocolError(conn: MeshConnection, error: MeshError): void {
    this.#protocolErrors++;
    warnLimited(this.#log, this.#limiter, `proto:${conn.remoteAddress}:${error.code}`,
      `mesh: closing ${conn.describe()}: ${error.code}: ${error.detail}`);
  }

  /** A peer broke a rule of the protocol: count it, say so (rate limited), close its connection. */
  #violation(conn: MeshConnection, reason: string): void {
    this.#protocolErrors++;
    // Keyed by address and the kind of fault, so one flood does not hide another.
    warnLimited(this.#log, this.#limiter, `proto:${conn.remoteAddress}:${reason.slice(0, 32)}`, `mesh: closing ${conn.describe()}: ${reason}`);
    conn.close(reason);
  }

  #onClose(conn: MeshConnection, reason: string): void {
    this.#conns.delete(conn);
    this.#budget.forget(conn);
    for (const other of this.#conns) other.roomWaiters.delete(conn);
    this.#wakeRoomWaiters(conn);
    if (!this.#closing) this.#dbg(`mesh: closed ${conn.describe()}: ${reason}`);
    this.#role.onClose(conn, reason);
    if (this.#conns.size === 0) this.#health.stop();
  }

  #onWritable(conn: MeshConnection): void {
    this.#wakeRoomWaiters(conn);
    if (conn.established && conn.peerId !== undefined) {
      // The manager link carries our relayed traffic too: every node routed through it may go on.
      for (const [id] of this.#routes) {
        if (this.#role.route(id) === conn) this.#safeEmit('writable', id);
      }
    }
  }

  #wakeRoomWaiters(conn: MeshConnection): void {
    if (conn.roomWaiters.size === 0) return;
    const waiters = [...conn.roomWaiters];
    conn.roomWaiters.clear();
    for (const w of waiters) w.unhold();
  }

  // -------------------------------------------------------------------------
  // Routes and events

  #routesChanged(reason: string): void {
    this.#lastReason = reason;
    const me = this.nodeId;
    const ids = new Set<number>([...this.#routes.keys(), ...this.#role.knownNodes()]);
    for (const id of ids) {
      if (id === me) {
        this.#routes.delete(id);
        continue;
      }
      const conn = this.#role.route(id);
      const now: Route | undefined = conn ? (conn.peerId === id ? 'direct' : 'relay') : undefined;
      const before = this.#routes.get(id);
      if (now === before) continue;
      if (now) {
        this.#routes.set(id, now);
        this.#safeEmit('peer-up', id, now);
      } else {
        this.#routes.delete(id);
        this.#safeEmit('peer-down', id, this.#lastReason);
      }
    }
  }
}

function randomInstance(): InstanceId {
  const b = randomBytes(8);
  // All zero reads as "unset" on the wire; one chance in 2^64, but never send it.
  if (b.every((x) => x === 0)) b[7] = 1;
  return b.toString('hex');
}
