// The TCP mesh between rocm-ernic servers: the public face (class Mesh) and
// its core. One event loop does what the C design's accept, receive, send,
// health-check, broadcast and peer-connect threads did (spec/architecture.rst
// "Threads"), with the same bounds and timeouts:
//
// - accept: the listener's 'connection' handler;
// - receive: each connection's 'data' handler and frame parser; data
//   messages go to 'message' listeners, charged to the inbound queue;
// - send: each connection's queue, written as the socket drains;
// - health check: one interval timer, running only while connections exist,
//   pings and closes silent links;
// - broadcast and peer connect: the roles (manager-role.ts, worker-role.ts).
//
// The layer above (the RDMA data path) uses send() and the events below; it
// never sees sockets. Nothing a peer sends throws out of here: bad frames
// close their connection with a logged reason, and a listener that throws is
// logged as a bug.

import { randomBytes } from 'node:crypto';
import { EventEmitter } from 'node:events';
import * as net from 'node:net';
import { Logger, nullLogger, RateLimiter, warnLimited } from '../log';
import { HostPort, parseHost } from './address';
import { dataHeaderSize, encodeFrameHeader, hasIonicMagic, isDataType, isInstanceId, isReplyFrame, writeFrameHeader } from './codec';
import type { MeshBackendConfig } from './config';
import { ConnectionOwner, LinkKind, MeshConnection } from './connection';
import { listen, Resolver, systemResolver } from './dial';
import { MeshError } from './errors';
import { GidTable } from './gid-table';
import { InboundBudget } from './inbound-budget';
import { tcp_msg_header } from './layouts';
import {
  DEAD_AFTER_INTERVALS, DEFAULT_HEARTBEAT_MS, DEFAULT_LISTEN_BACKLOG, DEFAULT_SEND_TIMEOUT_MS, ESTABLISH_INTERVALS,
  MAX_FRAME_PAYLOAD, MAX_NODE_GIDS, MeshLimits, resolveLimits,
} from './limits';
import { ManagerRole } from './manager-role';
import { FrameHeader, InstanceId, MsgType, NodeInfo } from './messages';
import { OutFrame } from './outbound-queue';
import type { MeshCore, Role } from './role';
import { WorkerRole } from './worker-role';

export interface MeshOptions {
  readonly config: MeshBackendConfig;
  /** Worker: where to listen for direct links from lower-id workers (default: every address, an ephemeral port). */
  readonly peerListen?: { readonly host?: string; readonly port?: number };
  /** Worker: the host its peers should dial (default: the address the manager sees it at). */
  readonly advertiseHost?: string;
  /** This node's guest GIDs (16 bytes each, at most 8): ERNIC_TCP_GUEST_GIDS. */
  readonly guestGids?: readonly Buffer[];
  /** ERNIC_TCP_SEND_TIMEOUT_MS (the manager uses half). */
  readonly sendTimeoutMs?: number;
  /** Health-check interval. */
  readonly heartbeatMs?: number;
  readonly listenBacklog?: number;
  /** ERNIC_DEBUG_MESH=1: diagnostics at warn level, rate limited. */
  readonly debug?: boolean;
  /** Lower bounds (tests). */
  readonly limits?: Partial<MeshLimits>;
  readonly log?: Logger;
  /** Host name resolver (default: the system's). */
  readonly resolve?: Resolver;
  /** This process's instance nonce (default: 8 random bytes). Tests pass one to play a node that comes back. */
  readonly instance?: InstanceId;
}

/** How a node is reached: our own link to it, or through the manager. */
export type Route = 'direct' | 'relay';

export type SendResult =
  /** Queued for the peer. */
  | 'queued'
  /** No room on the connection now: keep the work and try again on 'writable'. */
  | 'queue-full'
  /** No connection reaches that node (or it is us). */
  | 'no-route'
  /** Over the 16 MiB frame limit. */
  | 'too-large'
  /** Not a data type, or a header of the wrong size (an ionic one without its magic). */
  | 'bad-message';

export interface SendOptions {
  readonly srcQpn?: number;
  readonly dstQpn?: number;
  /** A reply (READ_RESP, ATOMIC_RESP, ACK): uses the reply room; drop it on 'queue-full'. */
  readonly reply?: boolean;
  /** takeBack(tag) removes this frame while it is still queued (a QP's creation handle). */
  readonly tag?: number;
}

/** A data message from a peer, as the 'message' event hands it over. */
export class MeshMessage {
  #release: (() => void) | undefined;
  #retained = false;

  constructor(
    readonly from: number,
    readonly type: number,
    readonly seq: number,
    readonly srcQpn: number,
    readonly dstQpn: number,
    /** The type's fixed header (60 bytes for IONIC). */
    readonly header: Buffer,
    /** What follows it. */
    readonly payload: Buffer,
    release: () => void,
  ) {
    this.#release = release;
  }

  /**
   * Keep this message (and its room in the inbound queue) past the event:
   * a SEND waiting for a receive does. Call the returned function when done;
   * until then the bytes stay valid and count against the queue.
   */
  retain(): () => void {
    this.#retained = true;
    return () => {
      const r = this.#release;
      this.#release = undefined;
      r?.();
    };
  }

  /** @internal The event is over: let go unless retained. */
  settle(): void {
    if (!this.#retained) {
      const r = this.#release;
      this.#release = undefined;
      r?.();
    }
  }
}

export interface MeshEvents {
  /** A data message for this node. */
  message: [msg: MeshMessage];
  /** A node became reachable, or its route changed. */
  'peer-up': [nodeId: number, route: Route];
  /** A node is no longer reachable. */
  'peer-down': [nodeId: number, reason: string];
  /** The manager's view of the mesh changed (worker: a new topology arrived). */
  topology: [nodes: readonly NodeInfo[]];
  /** Worker: registered with the manager under this id. */
  registered: [nodeId: number];
  /** Worker: the manager refused us (errno: EPROTO version, ENOSPC table full). */
  'registration-refused': [errno: number, reason: string];
  /** Send room appeared toward this node after a 'queue-full'. */
  writable: [nodeId: number];
  /** A reader has waited this long for inbound room: stop holding SENDs for receives. */
  pressure: [waitedMs: number];
}

export interface MeshStats {
  readonly nodeId: number | undefined;
  readonly role: 'manager' | 'worker';
  readonly connections: number;
  readonly established: number;
  /** Data bytes queued or in flight, all connections. */
  readonly outboundBytes: number;
  readonly inboundBytes: number;
  readonly inboundMessages: number;
  /** Connections whose reading is paused for room. */
  readonly heldConnections: number;
  /** Parser-held bytes across connections (partial frames and backlogs). */
  readonly parserBytes: number;
  readonly inboundDropped: number;
  readonly relayDropped: number;
  readonly protocolErrors: number;
}

const HEADER_SLAB = 16 * 1024;

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
  readonly #conns = new Set<MeshConnection>();
  readonly #budget: InboundBudget;
  readonly #routes = new Map<number, Route>();
  readonly #role: Role;
  #listenPort = 0;
  #tick: NodeJS.Timeout | undefined;
  #seq = 0;
  #slab = Buffer.allocUnsafe(HEADER_SLAB);
  #slabUsed = 0;
  #closing = false;
  #relayDropped = 0;
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
    this.#server = net.createServer({ pauseOnConnect: false }, (socket) => this.#onAccept(socket));
    this.#server.on('error', (err) => this.#log.error(`mesh: listener error: ${err.message}`));
    const core = this.#core();
    if (opts.config.role === 'manager') {
      this.#role = new ManagerRole(core);
    } else {
      const manager: HostPort = opts.config.manager;
      this.#role = new WorkerRole(core, manager, opts.advertiseHost ?? '');
    }
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
    const hdr = this.#headerBuffer();
    writeFrameHeader(hdr, 0, {
      type, length, seq: this.#nextSeq(), src: me, dst: nodeId, srcQpn: opts.srcQpn ?? 0, dstQpn: opts.dstQpn ?? 0,
    });
    const out: Buffer[] = [hdr];
    if (header.length > 0) out.push(header);
    for (const p of parts) if (p.length > 0) out.push(p);
    const frame: OutFrame = opts.tag === undefined
      ? { parts: out, bytes: tcp_msg_header.SIZE + length, cls: opts.reply ? 'reply' : 'request' }
      : { parts: out, bytes: tcp_msg_header.SIZE + length, cls: opts.reply ? 'reply' : 'request', tag: opts.tag };
    const r = conn.send(frame);
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

  /** Add one of our guest's GIDs (learned from its frames); false when already known or the set is full. */
  addLocalGid(gid: Buffer): boolean {
    if (!this.#addGid(gid)) return false;
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
      relayDropped: this.#relayDropped,
      protocolErrors: this.#protocolErrors,
    };
  }

  /** Close the listener and every connection, stop every timer. */
  async close(): Promise<void> {
    if (this.#closing) return;
    this.#closing = true;
    this.#role.stop();
    this.#stopTick();
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
      sendControl: (conn, type, body) => this.#sendControl(conn, type, body),
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

  #nextSeq(): number {
    this.#seq = (this.#seq + 1) >>> 0;
    return this.#seq;
  }

  /** 32 bytes for a frame header, carved from a slab that is never written again once handed out. */
  #headerBuffer(): Buffer {
    if (this.#slabUsed + tcp_msg_header.SIZE > this.#slab.length) {
      this.#slab = Buffer.allocUnsafe(HEADER_SLAB);
      this.#slabUsed = 0;
    }
    const b = this.#slab.subarray(this.#slabUsed, this.#slabUsed + tcp_msg_header.SIZE);
    this.#slabUsed += tcp_msg_header.SIZE;
    return b;
  }

  #sendControl(conn: MeshConnection, type: number, body: Buffer): boolean {
    const hdr = encodeFrameHeader({ type, length: body.length, seq: this.#nextSeq(), src: this.nodeId ?? 0, dst: conn.peerId ?? 0 });
    const r = conn.send({ parts: body.length > 0 ? [hdr, body] : [hdr], bytes: hdr.length + body.length, cls: 'control' });
    if (r === 'overflow') {
      conn.close('control queue overflow: the peer is not reading');
      return false;
    }
    return r === 'queued';
  }

  #sendHeartbeat(conn: MeshConnection, answer: boolean): void {
    const hdr = encodeFrameHeader({
      type: answer ? MsgType.HEARTBEAT_RESP : MsgType.HEARTBEAT, length: 0, seq: this.#nextSeq(),
      src: this.nodeId ?? 0, dst: conn.peerId ?? 0,
    });
    conn.sendHeartbeat({ parts: [hdr], bytes: hdr.length, cls: 'heartbeat' }, answer);
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

  #onAccept(socket: net.Socket): void {
    if (this.#closing) {
      socket.destroy();
      return;
    }
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
    this.#startTick();
    return conn;
  }

  readonly #owner: ConnectionOwner = {
    onFrame: (conn, h, body) => this.#onFrame(conn, h, body),
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
    if (this.#conns.size === 0) this.#stopTick();
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

  #onFrame(conn: MeshConnection, h: FrameHeader, body: Buffer): boolean {
    if (!conn.established) {
      if (isDataType(h.type)) {
        this.#violation(conn, `protocol: data before ${conn.outgoing ? 'the reply' : 'registration or handshake'}`);
        return true;
      }
      if (h.type === MsgType.HEARTBEAT || h.type === MsgType.HEARTBEAT_RESP) return true;
      this.#role.onSetupFrame(conn, h, body);
      return true;
    }
    switch (h.type) {
      case MsgType.HEARTBEAT:
        this.#sendHeartbeat(conn, true);
        return true;
      case MsgType.HEARTBEAT_RESP:
        return true;
      default:
        if (isDataType(h.type)) return this.#onData(conn, h, body);
        this.#role.onControl(conn, h, body);
        return true;
    }
  }

  #onData(conn: MeshConnection, h: FrameHeader, body: Buffer): boolean {
    const me = this.nodeId;
    if (h.type === MsgType.IONIC && !hasIonicMagic(body)) {
      this.#violation(conn, 'protocol: ionic message without the ionic magic');
      return true;
    }
    // Who may send what on which link: a peer speaks for itself; a worker's
    // manager link also carries what the manager relays from others.
    if (conn.kind === 'peer' || conn.kind === 'worker') {
      if (h.src !== conn.peerId) {
        this.#violation(conn, `protocol: message claims to be from node ${h.src}`);
        return true;
      }
    } else if (h.src === me) {
      this.#violation(conn, `protocol: relayed message claims to be from us`);
      return true;
    }
    if (h.dst !== me) {
      if (this.role === 'manager' && conn.kind === 'worker') return this.#relay(conn, h, body);
      this.#violation(conn, `protocol: message for node ${h.dst} on a direct link to node ${me}`);
      return true;
    }
    return this.#deliver(conn, h, body);
  }

  #deliver(conn: MeshConnection, h: FrameHeader, body: Buffer): boolean {
    const charge = tcp_msg_header.SIZE + body.length;
    const r = this.#budget.charge(charge, conn);
    if (r === 'wait') return false;
    if (r === 'drop') {
      this.#dbg(`mesh: inbound queue full with no client; dropped a message from node ${h.src}`);
      return true;
    }
    const hs = dataHeaderSize(h.type) ?? 0;
    const msg = new MeshMessage(h.src, h.type, h.seq, h.srcQpn, h.dstQpn, body.subarray(0, hs), body.subarray(hs),
      () => this.#budget.release(charge));
    this.#safeEmit('message', msg);
    msg.settle();
    return true;
  }

  /** Manager: pass a worker's message on to its destination, holding the source while the destination has no room. */
  #relay(conn: MeshConnection, h: FrameHeader, body: Buffer): boolean {
    const dest = this.#role.route(h.dst);
    if (!dest || dest === conn) {
      this.#relayDropped++;
      warnLimited(this.#log, this.#limiter, `relay:${h.dst}`, `mesh: no link to node ${h.dst}; dropped a message from node ${h.src}`);
      return true;
    }
    const hdr = this.#headerBuffer();
    writeFrameHeader(hdr, 0, h);
    const r = dest.send({ parts: body.length > 0 ? [hdr, body] : [hdr], bytes: hdr.length + body.length, cls: isReplyFrame(h.type, body) ? 'reply' : 'request' });
    if (r === 'queued') return true;
    if (r === 'queue-full') {
      dest.roomWaiters.add(conn);
      return false;
    }
    this.#relayDropped++;
    return true;
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

  // -------------------------------------------------------------------------
  // Health check

  #startTick(): void {
    if (this.#tick || this.#closing) return;
    this.#tick = setInterval(this.#onTick, this.#heartbeatMs);
    this.#tick.unref();
  }

  #stopTick(): void {
    if (this.#tick) clearInterval(this.#tick);
    this.#tick = undefined;
  }

  readonly #onTick = (): void => {
    const now = Date.now();
    const interval = this.#heartbeatMs;
    this.#role.onTick();
    for (const conn of [...this.#conns]) {
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
      // The manager pings every worker each interval; others ping a link that has gone quiet.
      if ((this.role === 'manager' && conn.kind === 'worker') || silent >= interval / 2) this.#sendHeartbeat(conn, false);
    }
  };
}

function randomInstance(): InstanceId {
  const b = randomBytes(8);
  // All zero reads as "unset" on the wire; one chance in 2^64, but never send it.
  if (b.every((x) => x === 0)) b[7] = 1;
  return b.toString('hex');
}
