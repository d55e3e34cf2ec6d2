// The TCP mesh between rocm-ernic servers: the public face (class Mesh) and
// the core that ties the pieces together. One event loop does what the C
// rocm-ernic's accept, receive, send, health-check, broadcast and peer-connect
// threads did (docs/mesh.md, "Differences from the C rocm-ernic"), with the same bounds and
// timeouts:
//
// - accept: the listener, admission and TLS handshakes (gate.ts);
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
//
// Who may connect (docs/mesh.md, "Trust model"): with credentials every link
// is TLS 1.3 (tls.ts), authenticated both ways before its first frame is read
// or written; without, the mesh listens on and dials loopback only (exposure.ts), in
// plaintext. Every accepted socket takes an admission slot (admission.ts)
// first: bounded in number, per source, and in time (gate.ts).

import { randomBytes } from 'node:crypto';
import { EventEmitter } from 'node:events';
import * as net from 'node:net';
import * as tls from 'node:tls';
import { Logger, nullLogger, RateLimiter, warnLimited } from '../log';
import { gidToText, HostPort, parseHost } from './address';
import { dataHeaderSize, hasIonicMagic, isDataType, isInstanceId } from './codec';
import { ConnectionOwner, LinkKind, MeshConnection } from './connection';
import { listen, OnRead, Resolver, systemResolver } from './dial';
import { MeshError } from './errors';
import { FrameRouter } from './frame-router';
import { FrameWriter } from './frame-writer';
import { GidTable } from './gid-table';
import { HealthCheck } from './health-check';
import { InboundBudget } from './inbound-budget';
import {
  DEFAULT_HEARTBEAT_MS,
  DEFAULT_LISTEN_BACKLOG,
  DEFAULT_SEND_TIMEOUT_MS,
  MAX_FRAME_PAYLOAD,
  MAX_NODE_GIDS,
  MeshLimits,
  resolveLimits,
} from './limits';
import { ManagerRole } from './manager-role';
import type { MeshEvents, MeshStats, Placer, Route, SendOptions, SendResult } from './mesh-types';
import { InstanceId, MsgType, NodeInfo } from './messages';
import type { MeshCore, Role } from './role';
import { MeshGate } from './gate';
import { CREDENTIALS_HINT } from './tls';
import { WorkerRole } from './worker-role';
import { advertisedHost, listenHost, meshExposure, MeshStartOptions } from './exposure';

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
  /** The listener, admission and TLS: who gets a connection (gate.ts). */
  readonly #gate: MeshGate;
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

  private constructor(opts: MeshStartOptions) {
    super();
    this.#log = opts.log ?? nullLogger;
    this.#limits = resolveLimits(opts.limits);
    this.role = opts.config.role;
    const timeout = opts.sendTimeoutMs ?? DEFAULT_SEND_TIMEOUT_MS;
    this.#sendTimeoutMs = this.role === 'manager' ? Math.max(1, Math.floor(timeout / 2)) : timeout;
    this.#heartbeatMs = opts.heartbeatMs ?? DEFAULT_HEARTBEAT_MS;
    this.#backlog = opts.listenBacklog ?? DEFAULT_LISTEN_BACKLOG;
    this.#debug = opts.debug ?? false;
    const resolve = opts.resolve ?? systemResolver;
    this.#resolve = Object.assign((host: string) => resolve(host), {
      admit: (a: string, p: number) => this.#gate.admitDial(a, p),
      open: (a: string, p: number, onread: OnRead) => this.#gate.open(a, p, onread),
    });
    if (opts.instance !== undefined && !isInstanceId(opts.instance))
      throw new RangeError(`bad instance id '${opts.instance}'`);
    if (opts.advertiseHost !== undefined && opts.advertiseHost !== '' && !parseHost(opts.advertiseHost)) {
      throw new RangeError(`bad advertised host '${opts.advertiseHost}'`);
    }
    this.instance = opts.instance ?? randomInstance();
    for (const g of opts.guestGids ?? []) this.#addGid(g);
    this.#budget = new InboundBudget(this.#limits.inboundQueueBytes, this.#limits.inboundQueueMessages, {
      onStall: (ms) => this.#safeEmit('pressure', ms),
    });
    this.#gate = new MeshGate(
      {
        log: this.#log,
        limiter: this.#limiter,
        closing: () => this.#closing,
        adoptInbound: (socket) => this.#adopt(socket, 'pending', false),
        debug: (message) => this.#dbg(message),
      },
      opts.credentials,
      this.#limits.maxNodes,
      opts.admission,
    );
    const core = this.#core();
    if (opts.config.role === 'manager') {
      this.#role = new ManagerRole(core);
    } else {
      const manager: HostPort = opts.config.manager;
      this.#role = new WorkerRole(core, manager, advertisedHost(opts));
    }
    const role = this.#role;
    this.#router = new FrameRouter({
      log: this.#log,
      limiter: this.#limiter,
      role,
      writer: this.#writer,
      budget: this.#budget,
      nodeId: () => this.nodeId,
      violation: (conn, reason) => this.#violation(conn, reason),
      emitMessage: (msg) => this.#safeEmit('message', msg),
      debug: (message) => this.#dbg(message),
    });
    this.#health = new HealthCheck(this.#heartbeatMs, {
      role: this.role,
      connections: this.#conns,
      onTick: () => role.onTick(),
      ping: (conn) => this.#writer.heartbeat(conn, false),
    });
  }

  /**
   * Listen, then (worker) start registering in the background. Without
   * credentials, refuses (throws) to listen anywhere but loopback or to have
   * a manager or an advertised address that is not; a host name is checked
   * at each dial instead (every address it resolves to must be loopback).
   */
  static async start(opts: MeshStartOptions): Promise<Mesh> {
    const exposed = meshExposure(opts);
    if (exposed !== null) throw new Error(exposed);
    const mesh = new Mesh(opts);
    const c = opts.config;
    const host = listenHost(opts);
    const port = c.role === 'manager' ? c.listen.port : (opts.peerListen?.port ?? 0);
    mesh.#listenPort = await listen(mesh.#gate.server, host, port, mesh.#backlog);
    const how = mesh.#gate.tls ? `TLS 1.3, ${mesh.#gate.tls.describe()}` : 'no credentials: plaintext, loopback only';
    mesh.#log.info(
      `mesh: ${mesh.role} listening on port ${mesh.#listenPort} at ${host ?? 'every address'} (instance ${mesh.instance}; ${how})`,
    );
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

  /** The address the listener is bound to ('127.0.0.1', '::' for every address, ...). */
  get listenAddress(): string {
    const a = this.#gate.server.address();
    return typeof a === 'object' && a ? a.address : '';
  }

  /** True when links are TLS (credentials were given). */
  get secured(): boolean {
    return this.#gate.tls !== null;
  }

  /** Inbound and outbound handshakes refused (wrong key, unknown certificate, not TLS), since start. */
  get tlsRefusals(): number {
    return this.#gate.tlsRefusals;
  }

  /** Inbound connections closed for want of an admission slot or past its deadline, since start. */
  get admissionRefusals(): number {
    return this.#gate.admissionRefusals;
  }

  /** Inbound connections now: all, and those not yet established. */
  inboundConnections(): { readonly all: number; readonly pending: number } {
    return { all: this.#gate.admission.inbound, pending: this.#gate.admission.pending };
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
  send(
    nodeId: number,
    type: number,
    header: Buffer,
    payload: Buffer | readonly Buffer[] = [],
    opts: SendOptions = {},
  ): SendResult {
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
      type,
      src: me,
      dst: nodeId,
      srcQpn: opts.srcQpn ?? 0,
      dstQpn: opts.dstQpn ?? 0,
      header,
      parts,
      length,
      reply: opts.reply ?? false,
      ...(opts.tag === undefined ? {} : { tag: opts.tag }),
      ...(opts.onDone ? { onDone: opts.onDone } : {}),
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
      warnLimited(
        this.#log,
        this.#limiter,
        'local-gids-full',
        `mesh: our guest shows more than ${MAX_NODE_GIDS} GIDs; ${gidToText(gid)} is not advertised (nor any further one)`,
      );
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
    this.#gate.close();
    this.#budget.dispose();
    await new Promise<void>((resolve) => this.#gate.server.close(() => resolve()));
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
      nodesPerAddress: this.#limits.nodesPerAddress,
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
      this.#log.error(
        `mesh: a '${String(event)}' listener threw (a bug above the mesh): ${(e as Error).stack ?? String(e)}`,
      );
    }
  }

  // -------------------------------------------------------------------------
  // Connections

  #adopt(socket: net.Socket, kind: LinkKind, outgoing: boolean): MeshConnection {
    // A dialled socket with credentials: the client side of a handshake, the link gated until it is done and checked.
    const gated = outgoing && this.#gate.tls !== null;
    const s = gated ? this.#gate.secureDialled(socket as tls.TLSSocket) : socket;
    const conn = new MeshConnection(s, this.#owner, {
      sendTimeoutMs: this.#sendTimeoutMs,
      kind,
      outgoing,
      gated,
      limits: {
        requestBytes: this.#limits.requestQueueBytes,
        connectionBytes: this.#limits.connectionQueueBytes,
        controlBytes: this.#limits.controlQueueBytes,
      },
    });
    if (gated) this.#gate.track(s as tls.TLSSocket, conn);
    this.#conns.add(conn);
    if (!this.#closing) this.#health.start();
    return conn;
  }

  readonly #owner: ConnectionOwner = {
    onFrame: (conn, h, body, placed) => {
      if (conn.established) return this.#router.onFrame(conn, h, body, placed);
      const taken = this.#router.onFrame(conn, h, body, placed);
      // Registered (or handshaken): no longer pending, its admission deadline is off.
      if (conn.established) this.#gate.established(conn);
      return taken;
    },
    place: (conn, h, head) => this.#router.place(conn, h, head, this.#placer),
    onProtocolError: (conn, error) => this.#onProtocolError(conn, error),
    onClose: (conn, reason) => this.#onClose(conn, reason),
    onWritable: (conn) => this.#onWritable(conn),
  };

  #onProtocolError(conn: MeshConnection, error: MeshError): void {
    this.#protocolErrors++;
    // A TLS ClientHello read as a frame header: the peer has credentials and we have none.
    const tlsHint =
      !this.#gate.tls && error.code === 'BAD_MAGIC' && /magic 0x1603/.test(error.detail)
        ? ` (the peer speaks TLS: it has mesh credentials and this server has none; ${CREDENTIALS_HINT})`
        : '';
    warnLimited(
      this.#log,
      this.#limiter,
      `proto:${conn.remoteAddress}:${error.code}`,
      `mesh: closing ${conn.describe()}: ${error.code}: ${error.detail}${tlsHint}`,
    );
  }

  /** A peer broke a rule of the protocol: count it, say so (rate limited), close its connection. */
  #violation(conn: MeshConnection, reason: string): void {
    this.#protocolErrors++;
    // Keyed by address and the kind of fault, so one flood does not hide another.
    warnLimited(
      this.#log,
      this.#limiter,
      `proto:${conn.remoteAddress}:${reason.slice(0, 32)}`,
      `mesh: closing ${conn.describe()}: ${reason}`,
    );
    conn.close(reason);
  }

  #onClose(conn: MeshConnection, reason: string): void {
    this.#gate.closed(conn);
    if (
      conn.outgoing &&
      !conn.established &&
      conn.bytesIn === 0 &&
      !this.#closing &&
      !conn.gated &&
      (reason === 'peer hung up' || reason === 'connection closed' || reason === 'socket error: ECONNRESET')
    ) {
      // Closed by the far end before a byte of answer: with TLS 1.3 a server that refuses our certificate does just this.
      const why = this.#gate.tls
        ? 'it may not accept our credentials, or be full (its log says why)'
        : `it may be full, or want mesh credentials, which this server lacks (its log says why); ${CREDENTIALS_HINT}`;
      warnLimited(
        this.#log,
        this.#limiter,
        `hangup:${conn.remoteAddress}`,
        `mesh: ${conn.remote} closed our ${conn.kind === 'manager' ? 'registration' : 'handshake'} link before answering: ${why}`,
      );
    }
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
