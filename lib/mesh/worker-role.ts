// A worker: registers with the manager (and again, under the id it holds,
// whenever that link ends or goes silent), follows the topology, dials the
// workers with higher ids than its own, accepts those with lower ids, and
// keeps the GID table the manager fans out. This replaces the C rocm-ernic's
// "peer connect" thread: dials are asynchronous, and each retry is a backoff
// timer (RECONNECT_MIN_MS doubling to RECONNECT_MAX_MS), so an unreachable
// peer costs a timer, not a loop.

import type { MeshConnection } from './connection';
import {
  decodeHandshake,
  decodeNodeGids,
  decodeRegisterResp,
  decodeTopology,
  encodeHandshake,
  encodeNodeGids,
  encodeRegisterNode,
  incarnationOf,
  linkKeyMatches,
  NO_LINK_KEY,
} from './codec';
import { dial, DialCancel } from './dial';
import { formatHostPort, gidToText, HostPort } from './address';
import { AUTO_NODE_ID, RECONNECT_MAX_MS, RECONNECT_MIN_MS } from './limits';
import { FrameHeader, MsgType, NodeInfo } from './messages';
import { Errno } from './registry';
import type { MeshCore, Role } from './role';

interface DialState {
  attempt: number;
  timer: NodeJS.Timeout | undefined;
  cancel: DialCancel | undefined;
}

function backoff(attempt: number): number {
  return Math.min(RECONNECT_MAX_MS, RECONNECT_MIN_MS * 2 ** Math.min(attempt, 16));
}

export class WorkerRole implements Role {
  readonly kind = 'worker' as const;
  #myId: number | undefined;
  #manager: MeshConnection | undefined;
  #managerInstance: string | undefined;
  readonly #managerDial: DialState = { attempt: 0, timer: undefined, cancel: undefined };
  /** The last topology from the manager, by id. */
  #topology = new Map<number, NodeInfo>();
  /** Established direct links by node id. */
  readonly #peers = new Map<number, MeshConnection>();
  /** Dials to higher-id peers: in progress or waiting for a retry. */
  readonly #dials = new Map<number, DialState>();
  #gidAdvertScheduled = false;
  #stopped = false;
  /** What peers know us by (our nonce goes to the manager only). */
  readonly #incarnation: string;

  constructor(
    private readonly core: MeshCore,
    private readonly managerAddress: HostPort,
    private readonly advertiseHost: string,
  ) {
    this.#incarnation = incarnationOf(core.instance);
  }

  nodeId(): number | undefined {
    return this.#myId;
  }

  /** The manager's instance nonce (changes when the manager restarts). */
  get managerInstance(): string | undefined {
    return this.#managerInstance;
  }

  /** True while registered with the manager. */
  get registered(): boolean {
    return this.#manager !== undefined && this.#manager.established && !this.#manager.closed;
  }

  start(): void {
    this.#dialManager();
  }

  stop(): void {
    this.#stopped = true;
    this.#cancelDial(this.#managerDial);
    for (const d of this.#dials.values()) this.#cancelDial(d);
    this.#dials.clear();
  }

  route(nodeId: number): MeshConnection | undefined {
    const direct = this.#peers.get(nodeId);
    if (direct && direct.established && !direct.closed) return direct;
    if (!this.registered) return undefined;
    if (nodeId === 0) return this.#manager;
    return this.#topology.get(nodeId)?.alive ? this.#manager : undefined;
  }

  knownNodes(): Iterable<number> {
    return new Set<number>([0, ...this.#topology.keys(), ...this.#peers.keys()]);
  }

  topology(): NodeInfo[] {
    return [...this.#topology.values()].sort((a, b) => a.id - b.id);
  }

  localGidsChanged(): void {
    if (this.#gidAdvertScheduled || this.#stopped) return;
    this.#gidAdvertScheduled = true;
    setImmediate(() => {
      this.#gidAdvertScheduled = false;
      this.#advertiseGids();
    });
  }

  onTick(): void {
    // Workers ping only links that have gone quiet (the core does that).
  }

  // -------------------------------------------------------------------------
  // The manager link

  #dialManager(): void {
    if (this.#stopped || this.core.closing || this.#manager || this.#managerDial.cancel || this.#managerDial.timer)
      return;
    const cancel: DialCancel = { cancelled: false };
    this.#managerDial.cancel = cancel;
    const { host, port } = this.managerAddress;
    void dial(host, port, this.core.resolve, cancel).then((r) => {
      if (this.#managerDial.cancel === cancel) this.#managerDial.cancel = undefined;
      if (cancel.cancelled || this.#stopped || this.core.closing) {
        if (r.ok) r.socket.destroy();
        return;
      }
      if (!r.ok) {
        this.core.debug(`mesh: manager ${formatHostPort(host, port)} not reachable: ${r.error}`);
        this.#retryManager(false);
        return;
      }
      const conn = this.core.adopt(r.socket, 'manager', true);
      this.#manager = conn;
      this.core.sendControl(
        conn,
        MsgType.REGISTER_NODE,
        encodeRegisterNode({
          host: this.advertiseHost,
          port: this.core.listenPort(),
          requestedId: this.#myId ?? AUTO_NODE_ID,
          instance: this.core.instance,
        }),
      );
    });
  }

  #retryManager(slow: boolean): void {
    if (this.#stopped || this.core.closing || this.#managerDial.timer) return;
    const delay = slow ? RECONNECT_MAX_MS : backoff(this.#managerDial.attempt++);
    this.#managerDial.timer = setTimeout(() => {
      this.#managerDial.timer = undefined;
      this.#dialManager();
    }, delay);
    this.#managerDial.timer.unref();
  }

  #onRegisterResp(conn: MeshConnection, body: Buffer): void {
    const d = decodeRegisterResp(body);
    if (!d.ok) {
      this.core.log.error(
        `mesh: the manager at ${conn.remote} answered registration with ${d.error.code}: ${d.error.detail}`,
      );
      this.core.emitRefused(Errno.EPROTO, d.error.detail);
      conn.close(`registration reply: ${d.error.detail}`);
      return;
    }
    const r = d.value;
    if (r.result !== 0) {
      const reason =
        r.result === -Errno.EPROTO
          ? 'protocol version mismatch'
          : r.result === -Errno.ENOSPC
            ? 'node table full'
            : r.result === -Errno.EBUSY
              ? 'our instance is registered on a connection the manager still sees alive'
              : r.result === -Errno.EUSERS
                ? 'too many live nodes from our address'
                : `errno ${-r.result}`;
      this.core.log.warn(`mesh: the manager refused registration: ${reason}`);
      this.core.emitRefused(-r.result, reason);
      conn.close(`registration refused: ${reason}`);
      return;
    }
    if (this.#myId !== undefined && this.#myId !== r.nodeId) {
      // We were forgotten (evicted, or our id went to another instance): peers know us under the old id.
      this.core.log.warn(`mesh: node id changed from ${this.#myId} to ${r.nodeId}; dropping direct links`);
      this.core.gids.remove(this.#myId);
      for (const p of [...this.#peers.values()]) p.close('our node id changed');
    }
    if (this.#managerInstance !== undefined && this.#managerInstance !== r.managerInstance) {
      this.core.log.info('mesh: the manager restarted');
    }
    this.#myId = r.nodeId;
    this.#managerInstance = r.managerInstance;
    conn.peerId = 0;
    conn.peerInstance = r.managerInstance;
    conn.established = true;
    this.#managerDial.attempt = 0;
    this.core.log.info(`mesh: registered as node ${r.nodeId} with the manager at ${conn.remote}`);
    this.#advertiseGids();
    this.core.emitRegistered(r.nodeId);
    this.core.routesChanged('registered');
  }

  #advertiseGids(): void {
    if (!this.registered || this.#myId === undefined) return;
    this.core.sendControl(
      this.#manager!,
      MsgType.NODE_GIDS,
      encodeNodeGids([{ nodeId: this.#myId, gids: this.core.localGids() }]),
    );
  }

  // -------------------------------------------------------------------------
  // Frames

  onSetupFrame(conn: MeshConnection, h: FrameHeader, body: Buffer): void {
    if (conn.kind === 'manager') {
      if (h.type !== MsgType.REGISTER_RESP) {
        this.core.violation(conn, `protocol: message type ${h.type} before the registration reply`);
        return;
      }
      this.#onRegisterResp(conn, body);
      return;
    }
    if (conn.kind === 'peer' && conn.outgoing) {
      if (h.type !== MsgType.HANDSHAKE_RESP) {
        this.core.violation(conn, `protocol: message type ${h.type} before the handshake reply`);
        return;
      }
      this.#onHandshakeResp(conn, body);
      return;
    }
    if (h.type !== MsgType.HANDSHAKE) {
      this.core.violation(conn, `protocol: message type ${h.type} before the handshake`);
      return;
    }
    this.#onHandshake(conn, h, body);
  }

  onControl(conn: MeshConnection, h: FrameHeader, body: Buffer): void {
    if (conn !== this.#manager) {
      this.core.warn(`peer-type:${conn.peerId}`, `mesh: dropped message type ${h.type} from ${conn.describe()}`);
      return;
    }
    if (h.type === MsgType.MESH_TOPOLOGY) {
      const d = decodeTopology(body);
      if (!d.ok) {
        this.core.violation(conn, `protocol error ${d.error.code}: ${d.error.detail}`);
        return;
      }
      this.#applyTopology(d.value);
      return;
    }
    if (h.type === MsgType.NODE_GIDS) {
      const d = decodeNodeGids(body);
      if (!d.ok) {
        this.core.violation(conn, `protocol error ${d.error.code}: ${d.error.detail}`);
        return;
      }
      for (const r of d.value) {
        if (r.nodeId === this.#myId) continue;
        if (!this.core.gids.holds(r.nodeId, r.gids))
          this.core.log.info(`mesh: node ${r.nodeId} owns GIDs ${r.gids.map(gidToText).join(' ') || '(none)'}`);
        const conflicts = this.core.gids.set(r.nodeId, r.gids);
        for (const g of conflicts)
          this.core.warn(
            `gid-conflict:${g.toString('hex')}`,
            `mesh: GID ${g.toString('hex')} is claimed by two nodes; it names neither`,
          );
      }
      return;
    }
    this.core.warn('mgr-type', `mesh: dropped message type ${h.type} from the manager`);
  }

  onClose(conn: MeshConnection, reason: string): void {
    if (conn === this.#manager) {
      this.#manager = undefined;
      this.core.log.info(`mesh: lost the manager link: ${reason}`);
      this.core.routesChanged(`manager: ${reason}`);
      // A refusal waits the longest backoff; anything else starts over quickly.
      this.#retryManager(reason.startsWith('registration refused') || reason.startsWith('registration reply'));
      return;
    }
    if (conn.kind !== 'peer' || conn.peerId === undefined) return;
    const id = conn.peerId;
    if (this.#peers.get(id) === conn) {
      this.#peers.delete(id);
      this.core.log.info(`mesh: direct link to node ${id} closed: ${reason}`);
      this.core.routesChanged(`node ${id}: ${reason}`);
    }
    if (conn.outgoing) {
      const d = this.#dials.get(id);
      if (d) this.#scheduleDial(id, d);
    }
  }

  // -------------------------------------------------------------------------
  // Topology and direct links

  #applyTopology(nodes: readonly NodeInfo[]): void {
    const next = new Map<number, NodeInfo>();
    for (const n of nodes) next.set(n.id, n);
    this.#topology = next;
    for (const [id, conn] of [...this.#peers]) {
      const n = next.get(id);
      // Absent means the manager does not know it (yet): leave the link to its heartbeats.
      if (n && (!n.alive || n.incarnation !== conn.peerInstance))
        conn.close(n.alive ? 'node restarted' : 'node dead per the manager');
    }
    for (const [id, d] of [...this.#dials]) {
      if (!this.#wantDial(id)) {
        this.#cancelDial(d);
        this.#dials.delete(id);
      }
    }
    for (const n of nodes) {
      if (this.#wantDial(n.id) && !this.#peers.has(n.id) && !this.#dials.has(n.id)) {
        const d: DialState = { attempt: 0, timer: undefined, cancel: undefined };
        this.#dials.set(n.id, d);
        this.#dialPeer(n.id, d);
      }
    }
    this.core.emitTopology(this.topology());
    this.core.routesChanged('topology');
  }

  /** We dial nodes with higher ids than ours that are alive and listening. */
  #wantDial(id: number): boolean {
    const n = this.#topology.get(id);
    return (
      !this.#stopped &&
      !this.core.closing &&
      this.#myId !== undefined &&
      id > this.#myId &&
      id !== 0 &&
      n !== undefined &&
      n.alive &&
      n.port !== 0 &&
      n.host !== ''
    );
  }

  #dialPeer(id: number, d: DialState): void {
    const n = this.#topology.get(id);
    if (!n || !this.#wantDial(id) || this.#peers.has(id) || d.cancel) return;
    const cancel: DialCancel = { cancelled: false };
    d.cancel = cancel;
    void dial(n.host, n.port, this.core.resolve, cancel).then((r) => {
      if (d.cancel === cancel) d.cancel = undefined;
      if (cancel.cancelled || !this.#wantDial(id) || this.#peers.has(id) || this.#myId === undefined) {
        if (r.ok) r.socket.destroy();
        return;
      }
      if (!r.ok) {
        this.core.debug(`mesh: node ${id} at ${formatHostPort(n.host, n.port)} not reachable: ${r.error}`);
        this.#scheduleDial(id, d);
        return;
      }
      const conn = this.core.adopt(r.socket, 'peer', true);
      conn.peerId = id;
      conn.peerInstance = n.incarnation;
      this.core.sendControl(
        conn,
        MsgType.HANDSHAKE,
        encodeHandshake({
          nodeId: this.#myId,
          result: 0,
          incarnation: this.#incarnation,
          peerIncarnation: n.incarnation,
          linkKey: n.linkKey,
        }),
      );
    });
  }

  #scheduleDial(id: number, d: DialState): void {
    if (d.timer || d.cancel || !this.#wantDial(id) || this.#peers.has(id)) return;
    d.timer = setTimeout(() => {
      d.timer = undefined;
      this.#dialPeer(id, d);
    }, backoff(d.attempt++));
    d.timer.unref();
  }

  #cancelDial(d: DialState): void {
    if (d.timer) clearTimeout(d.timer);
    d.timer = undefined;
    if (d.cancel) d.cancel.cancelled = true;
    d.cancel = undefined;
  }

  #onHandshakeResp(conn: MeshConnection, body: Buffer): void {
    const d = decodeHandshake(body);
    if (!d.ok) {
      this.core.violation(conn, `handshake reply: ${d.error.code} ${d.error.detail}`);
      return;
    }
    const h = d.value;
    if (h.result !== 0) {
      conn.close(`handshake refused by node ${conn.peerId}: errno ${-h.result}`);
      return;
    }
    const known = this.#topology.get(h.nodeId);
    if (
      h.nodeId !== conn.peerId ||
      h.incarnation !== conn.peerInstance ||
      h.peerIncarnation !== this.#incarnation ||
      !known ||
      !linkKeyMatches(known.linkKey, h.linkKey)
    ) {
      this.core.violation(conn, `handshake reply from the wrong node (${h.nodeId}, incarnation ${h.incarnation})`);
      return;
    }
    const id = h.nodeId;
    const old = this.#peers.get(id);
    conn.established = true;
    this.#peers.set(id, conn);
    if (old && old !== conn) old.close('replaced by a new connection');
    const ds = this.#dials.get(id);
    if (ds) ds.attempt = 0;
    this.core.log.info(`mesh: direct link to node ${id} up (${conn.remote})`);
    this.core.routesChanged(`node ${id} linked`);
  }

  #onHandshake(conn: MeshConnection, header: FrameHeader, body: Buffer): void {
    const d = decodeHandshake(body);
    const refuse = (errno: number, why: string): void => {
      this.core.warn(`hs:${conn.remoteAddress}`, `mesh: handshake from ${conn.remote} refused: ${why}`);
      this.core.sendControl(
        conn,
        MsgType.HANDSHAKE_RESP,
        encodeHandshake({
          nodeId: this.#myId ?? 0,
          result: -errno,
          incarnation: this.#incarnation,
          peerIncarnation: d.ok ? d.value.incarnation : this.#incarnation,
          linkKey: NO_LINK_KEY,
        }),
      );
      conn.endAfterFlush(`handshake refused: ${why}`);
    };
    if (!d.ok) {
      if (d.error.code === 'BAD_VERSION') refuse(Errno.EPROTO, d.error.detail);
      else this.core.violation(conn, `protocol error ${d.error.code}: ${d.error.detail}`);
      return;
    }
    const h = d.value;
    if (this.#myId === undefined) return refuse(Errno.EAGAIN, 'not registered yet');
    if (h.nodeId === 0 || h.nodeId >= this.#myId || header.src !== h.nodeId) {
      return refuse(Errno.EINVAL, `node ${h.nodeId} may not dial node ${this.#myId}`);
    }
    if (h.peerIncarnation !== this.#incarnation) return refuse(Errno.ESTALE, 'it expected another instance of us');
    const known = this.#topology.get(h.nodeId);
    // Not in our topology yet (its registration is still on its way to us): it dials again after a backoff.
    if (!known) return refuse(Errno.EAGAIN, `node ${h.nodeId} is not in our topology yet`);
    if (known.incarnation !== h.incarnation)
      return refuse(Errno.ESTALE, `node ${h.nodeId} is another instance per the manager`);
    if (!known.alive) return refuse(Errno.ESTALE, `node ${h.nodeId} is dead per the manager`);
    // Only the manager and the real node know this pair's key: anyone else claiming the id is refused.
    if (!linkKeyMatches(known.linkKey, h.linkKey))
      return refuse(Errno.EINVAL, `node ${h.nodeId} did not prove its identity (link key)`);
    const old = this.#peers.get(h.nodeId);
    conn.kind = 'peer';
    conn.peerId = h.nodeId;
    conn.peerInstance = h.incarnation;
    conn.established = true;
    this.#peers.set(h.nodeId, conn);
    if (old && old !== conn) old.close('replaced by a new connection');
    this.core.sendControl(
      conn,
      MsgType.HANDSHAKE_RESP,
      encodeHandshake({
        nodeId: this.#myId,
        result: 0,
        incarnation: this.#incarnation,
        peerIncarnation: h.incarnation,
        linkKey: known.linkKey,
      }),
    );
    this.core.log.info(`mesh: direct link from node ${h.nodeId} up (${conn.remote})`);
    this.core.routesChanged(`node ${h.nodeId} linked`);
  }
}
