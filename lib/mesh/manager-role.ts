// The manager (node 0): registers workers into the node table, tells them
// the topology and the GID table, pings them, and notices when they die. It
// never dials a worker. This replaces the C rocm-ernic's health-check and
// broadcast threads: changes are collected and sent together on the next
// turn of the event loop (setImmediate), which is the "next round" of the
// broadcast thread without a thread.
//
// Fan-out rules (docs/mesh.md, "The manager"): a change
// to a node's GIDs, or to whether it is alive, sends that node's set to every
// worker; a worker that has just registered is sent the whole table.

import { randomBytes } from 'node:crypto';
import type { MeshConnection } from './connection';
import {
  decodeNodeGids,
  decodeRegisterNode,
  encodeHandshake,
  encodeNodeGids,
  encodeRegisterResp,
  encodeTopology,
  linkKeyOf,
  NO_LINK_KEY,
} from './codec';
import { gidToText } from './address';
import { unmapAddress } from './dial';
import { MAX_NODES, MESH_PROTOCOL_VERSION, NODES_PER_ADDRESS } from './limits';
import { FrameHeader, MsgType, NodeGids, NodeInfo } from './messages';
import { Errno, NodeRegistry } from './registry';
import type { MeshCore, Role } from './role';

const EMPTY = Buffer.alloc(0);

export class ManagerRole implements Role {
  readonly kind = 'manager' as const;
  readonly registry: NodeRegistry;
  /** Established worker links by node id. */
  readonly #links = new Map<number, MeshConnection>();
  #topologyDirty = false;
  readonly #gidsDirty = new Set<number>();
  #flushScheduled = false;
  #stopped = false;
  /** Keys the link keys of worker pairs (codec linkKeyOf); a restarted manager hands out new ones. */
  readonly #linkSecret = randomBytes(32);
  /** Link keys by pair (lo * MAX_NODES + hi), with the incarnations they were made for: one HMAC per pair and incarnation. */
  readonly #linkKeys = new Map<number, { readonly incLo: string; readonly incHi: string; readonly key: Buffer }>();

  constructor(private readonly core: MeshCore) {
    this.registry = new NodeRegistry(
      core.maxNodes,
      { instance: core.instance, host: '', port: 0 },
      core.nodesPerAddress ?? NODES_PER_ADDRESS,
    );
  }

  nodeId(): number {
    return 0;
  }

  start(): void {
    this.registry.get(0)!.port = this.core.listenPort();
    this.core.gids.set(0, this.core.localGids());
  }

  stop(): void {
    this.#stopped = true;
  }

  route(nodeId: number): MeshConnection | undefined {
    const c = this.#links.get(nodeId);
    return c && c.established && !c.closed ? c : undefined;
  }

  knownNodes(): Iterable<number> {
    return this.registry.entries().map((e) => e.id);
  }

  /** The manager's own view (no link keys). */
  topology(): NodeInfo[] {
    return this.#topologyFor(0);
  }

  /**
   * What worker `to` is told: every node's id, host, port, liveness and
   * incarnation, and the link key of each pair `to` is in. Incarnations
   * only: a nonce in here would let any worker register as that node.
   */
  #topologyFor(to: number): NodeInfo[] {
    const me = this.registry.get(to);
    return this.registry.entries().map((e) => ({
      id: e.id,
      host: e.host,
      port: e.port,
      alive: e.alive,
      incarnation: e.incarnation,
      linkKey:
        me && to !== 0 && e.id !== 0 && e.id !== to
          ? this.#linkKey(to, me.incarnation, e.id, e.incarnation)
          : NO_LINK_KEY,
    }));
  }

  #linkKey(a: number, aInc: string, b: number, bInc: string): Buffer {
    const [lo, incLo, hi, incHi] = a < b ? [a, aInc, b, bInc] : [b, bInc, a, aInc];
    const slot = lo * MAX_NODES + hi;
    const had = this.#linkKeys.get(slot);
    if (had && had.incLo === incLo && had.incHi === incHi) return had.key;
    const key = linkKeyOf(this.#linkSecret, lo, incLo, hi, incHi);
    this.#linkKeys.set(slot, { incLo, incHi, key });
    return key;
  }

  localGidsChanged(): void {
    this.core.gids.set(0, this.core.localGids());
    this.#gidsDirty.add(0);
    this.#scheduleFlush();
  }

  onTick(): void {
    // The manager pings every registered worker each interval; the core
    // closes links that stay silent.
  }

  // -------------------------------------------------------------------------
  // Registration

  onSetupFrame(conn: MeshConnection, h: FrameHeader, body: Buffer): void {
    if (h.type === MsgType.HANDSHAKE) {
      // A worker never handshakes with node 0: its manager link is its registration.
      this.core.sendControl(
        conn,
        MsgType.HANDSHAKE_RESP,
        encodeHandshake({
          nodeId: 0,
          result: -Errno.EINVAL,
          incarnation: this.registry.get(0)!.incarnation,
          peerIncarnation: this.registry.get(0)!.incarnation,
          linkKey: NO_LINK_KEY,
        }),
      );
      conn.endAfterFlush('handshake sent to the manager');
      return;
    }
    if (h.type !== MsgType.REGISTER_NODE) {
      this.core.violation(conn, `protocol: message type ${h.type} before registration`);
      return;
    }
    const d = decodeRegisterNode(body);
    if (!d.ok) {
      if (d.error.code === 'BAD_VERSION') {
        this.core.warn(
          `reg-version:${conn.remoteAddress}`,
          `registration refused from ${conn.remote}: ${d.error.detail}`,
        );
        this.#refuse(conn, Errno.EPROTO, d.error.detail);
      } else {
        this.core.warn(
          `reg-bad:${conn.remoteAddress}`,
          `registration refused from ${conn.remote}: ${d.error.code} ${d.error.detail}`,
        );
        this.#refuse(conn, Errno.EINVAL, d.error.detail);
      }
      return;
    }
    const req = d.value;
    const source = unmapAddress(conn.remoteAddress);
    const host = req.host !== '' ? req.host : source;
    const out = this.registry.register({
      instance: req.instance,
      requestedId: req.requestedId,
      host,
      port: req.port,
      source,
    });
    if (!out.ok) {
      this.core.warn(`reg-refused:${conn.remoteAddress}`, `registration refused from ${conn.remote}: ${out.reason}`);
      this.#refuse(conn, out.errno, out.reason);
      // If that node's link is in fact dead (a process that came back before we saw it go), a ping shows it soon.
      const live = out.busy === undefined ? undefined : this.#links.get(out.busy);
      if (live && !live.closed) this.core.sendControl(live, MsgType.HEARTBEAT, EMPTY);
      return;
    }
    if (out.evicted !== undefined) {
      this.core.log.info(`mesh: node ${out.evicted} evicted (dead longest) to make room`);
      this.core.gids.remove(out.evicted);
      this.#gidsDirty.add(out.evicted);
    }
    // The new link replaces an old one the manager has not seen die yet; it
    // goes into the table first, so closing the old one does not mark the node dead.
    const old = this.#links.get(out.id);
    conn.kind = 'worker';
    conn.peerId = out.id;
    conn.peerInstance = this.registry.get(out.id)!.incarnation;
    conn.established = true;
    this.#links.set(out.id, conn);
    if (old && old !== conn) old.close(`node ${out.id} registered again on a new connection`);
    this.core.sendControl(
      conn,
      MsgType.REGISTER_RESP,
      encodeRegisterResp({
        nodeId: out.id,
        numNodes: this.registry.size,
        result: 0,
        managerInstance: this.core.instance,
      }),
    );
    // The newcomer gets the whole picture at once; everyone else the change.
    this.core.sendControl(conn, MsgType.MESH_TOPOLOGY, encodeTopology(this.#topologyFor(out.id)));
    this.#sendWholeGidTable(conn);
    this.core.log.info(
      `mesh: node ${out.id} ${out.rejoined ? 'rejoined' : 'registered'} from ${conn.remote}` +
        ` (${this.registry.size}/${this.core.maxNodes} nodes)`,
    );
    this.#topologyDirty = true;
    this.#gidsDirty.add(out.id);
    this.#scheduleFlush();
    this.core.routesChanged(`node ${out.id} registered`);
  }

  #refuse(conn: MeshConnection, errno: number, reason: string): void {
    this.core.sendControl(
      conn,
      MsgType.REGISTER_RESP,
      encodeRegisterResp({
        nodeId: 0,
        numNodes: this.registry.size,
        result: -errno,
        managerInstance: this.core.instance,
        version: MESH_PROTOCOL_VERSION,
      }),
    );
    conn.endAfterFlush(`registration refused: ${reason}`);
  }

  // -------------------------------------------------------------------------
  // Established links

  onControl(conn: MeshConnection, h: FrameHeader, body: Buffer): void {
    if (h.type !== MsgType.NODE_GIDS) {
      this.core.warn(`mgr-type:${conn.peerId}`, `mesh: dropped message type ${h.type} from ${conn.describe()}`);
      return;
    }
    const d = decodeNodeGids(body);
    if (!d.ok) {
      this.core.violation(conn, `protocol error ${d.error.code}: ${d.error.detail}`);
      return;
    }
    const records = d.value;
    if (records.length !== 1 || records[0]!.nodeId !== conn.peerId) {
      this.core.warn(`mgr-gids:${conn.peerId}`, `mesh: ${conn.describe()} advertised GIDs for another node; dropped`);
      return;
    }
    if (!this.core.gids.holds(conn.peerId, records[0]!.gids)) {
      this.core.log.info(
        `mesh: node ${conn.peerId} owns GIDs ${records[0]!.gids.map(gidToText).join(' ') || '(none)'}`,
      );
    }
    const conflicts = this.core.gids.set(conn.peerId, records[0]!.gids);
    for (const g of conflicts)
      this.core.warn(
        `gid-conflict:${g.toString('hex')}`,
        `mesh: GID ${g.toString('hex')} is claimed by two nodes; it names neither`,
      );
    this.#gidsDirty.add(conn.peerId);
    this.#scheduleFlush();
  }

  onClose(conn: MeshConnection, reason: string): void {
    if (conn.kind !== 'worker' || conn.peerId === undefined || this.#links.get(conn.peerId) !== conn) return;
    const id = conn.peerId;
    this.#links.delete(id);
    if (this.registry.markDead(id, this.core.now())) {
      this.core.log.info(`mesh: node ${id} is dead: ${reason}`);
      this.#topologyDirty = true;
      this.#gidsDirty.add(id);
      this.#scheduleFlush();
    }
    this.core.routesChanged(`node ${id}: ${reason}`);
  }

  // -------------------------------------------------------------------------
  // Broadcast

  #sendWholeGidTable(conn: MeshConnection): void {
    const records: NodeGids[] = this.core.gids.nodes().map((id) => ({ nodeId: id, gids: this.core.gids.gidsOf(id) }));
    for (let i = 0; i < records.length; i += MAX_NODES) {
      this.core.sendControl(conn, MsgType.NODE_GIDS, encodeNodeGids(records.slice(i, i + MAX_NODES)));
    }
  }

  #scheduleFlush(): void {
    if (this.#flushScheduled || this.#stopped) return;
    this.#flushScheduled = true;
    setImmediate(this.#flush);
  }

  readonly #flush = (): void => {
    this.#flushScheduled = false;
    if (this.#stopped) return;
    const workers = [...this.#links.values()].filter((c) => c.established && !c.closed);
    if (this.#topologyDirty) {
      this.#topologyDirty = false;
      // Each worker its own: the link keys differ per recipient.
      for (const c of workers)
        this.core.sendControl(c, MsgType.MESH_TOPOLOGY, encodeTopology(this.#topologyFor(c.peerId!)));
      this.core.emitTopology(this.topology());
    }
    if (this.#gidsDirty.size > 0) {
      const records: NodeGids[] = [...this.#gidsDirty]
        .sort((a, b) => a - b)
        .map((id) => ({ nodeId: id, gids: this.core.gids.gidsOf(id) }));
      this.#gidsDirty.clear();
      for (let i = 0; i < records.length; i += MAX_NODES) {
        const frame = encodeNodeGids(records.slice(i, i + MAX_NODES));
        for (const c of workers) this.core.sendControl(c, MsgType.NODE_GIDS, frame);
      }
    }
  };
}
