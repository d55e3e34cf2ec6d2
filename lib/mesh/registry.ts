// The manager's node table, as data (no sockets): who registered, under
// which id, from which process instance and source address, and whether it
// is alive (its link is up). The rules (docs/mesh.md, "The manager" and
// "Identity, RC rules and bounds"):
//
// - The manager is node 0. Worker ids live in the table's range,
//   1..maxNodes-1, so no request can move them out of it. A new worker gets
//   the next free id after the last one given (a cursor that wraps), so an
//   id freed by eviction is reused as late as possible; peers tell the new
//   holder from the old one by its incarnation.
// - The instance nonce is the node's secret: it is matched here and never
//   sent to anyone. A node that went quiet and comes back (same nonce)
//   keeps its id; but while that node is alive (its link up), a REGISTER
//   with its nonce from another connection is refused (EBUSY), never taken
//   as a reason to evict the live node.
// - A worker asking for an id the table does not hold (the manager was
//   restarted, or the entry was evicted) gets it back: this is how a
//   restarted manager gets its workers back under the ids their peers know.
// - At most `nodesPerAddress` live nodes registered from one source address
//   (EUSERS past it), so one client cannot fill the table.
// - At most `maxNodes` entries, the manager included. A new node in a full
//   table evicts the node that has been dead longest, or is refused when
//   none is dead.

import { incarnationOf } from './codec';
import { AUTO_NODE_ID } from './limits';
import { InstanceId } from './messages';

/** Linux errno values carried (negated) in REGISTER_RESP.result and HANDSHAKE_RESP.result. */
export const Errno = {
  EAGAIN: 11,
  EBUSY: 16,
  EINVAL: 22,
  ENOSPC: 28,
  EPROTO: 71,
  EUSERS: 87,
  ESTALE: 116,
} as const;

interface NodeEntry {
  readonly id: number;
  /** The secret nonce (never leaves the manager). */
  readonly instance: InstanceId;
  /** The public identity peers see (a hash of the nonce). */
  readonly incarnation: InstanceId;
  /** Host peers dial (the advertised one, or the address the manager saw). */
  host: string;
  port: number;
  /** The address the registration came from (the per-address bound). */
  source: string;
  alive: boolean;
  /** Clock reading when it died (0 while alive). */
  deadSince: number;
}

interface RegisterRequest {
  readonly instance: InstanceId;
  readonly requestedId: number;
  readonly host: string;
  readonly port: number;
  /** The connection's remote address. */
  readonly source: string;
}

type RegisterOutcome =
  | {
      readonly ok: true;
      readonly id: number;
      /** The same instance came back (its id kept). */
      readonly rejoined: boolean;
      /** The id evicted to make room, if any. */
      readonly evicted?: number;
    }
  | {
      readonly ok: false;
      readonly errno: number;
      readonly reason: string;
      /** EBUSY: the live node whose nonce was presented. */
      readonly busy?: number;
    };

export class NodeRegistry {
  readonly #nodes = new Map<number, NodeEntry>();
  /** The last id given to a new node; the next search starts after it. */
  #cursor = 0;

  constructor(
    private readonly maxNodes: number,
    self: { readonly instance: InstanceId; readonly host: string; readonly port: number },
    private readonly nodesPerAddress: number = maxNodes,
  ) {
    this.#nodes.set(0, {
      id: 0,
      instance: self.instance,
      incarnation: incarnationOf(self.instance),
      host: self.host,
      port: self.port,
      source: '',
      alive: true,
      deadSince: 0,
    });
  }

  get size(): number {
    return this.#nodes.size;
  }

  /** Highest id a worker can hold. */
  get maxId(): number {
    return this.maxNodes - 1;
  }

  get(id: number): NodeEntry | undefined {
    return this.#nodes.get(id);
  }

  /** All entries in id order. */
  entries(): NodeEntry[] {
    return [...this.#nodes.values()].sort((a, b) => a.id - b.id);
  }

  register(req: RegisterRequest): RegisterOutcome {
    const same = this.#byInstance(req.instance);
    if (same && same.alive) {
      return { ok: false, errno: Errno.EBUSY, reason: `node ${same.id} is alive on another connection`, busy: same.id };
    }
    const fromSource = this.#liveFrom(req.source);
    if (fromSource >= this.nodesPerAddress) {
      return {
        ok: false,
        errno: Errno.EUSERS,
        reason: `${fromSource} live nodes registered from ${req.source} (at most ${this.nodesPerAddress})`,
      };
    }
    // The same process coming back keeps its id, whatever it asked for.
    if (same) {
      same.alive = true;
      same.deadSince = 0;
      same.host = req.host;
      same.port = req.port;
      same.source = req.source;
      return { ok: true, id: same.id, rejoined: true };
    }
    let evicted: number | undefined;
    if (this.#nodes.size >= this.maxNodes) {
      evicted = this.#longestDead();
      if (evicted === undefined) {
        return { ok: false, errno: Errno.ENOSPC, reason: `node table full (${this.maxNodes} nodes, none dead)` };
      }
      this.#nodes.delete(evicted);
    }
    const asked = req.requestedId;
    const id =
      asked !== AUTO_NODE_ID && asked >= 1 && asked <= this.maxId && !this.#nodes.has(asked) ? asked : this.#freeId();
    if (id !== asked) this.#cursor = id;
    this.#nodes.set(id, {
      id,
      instance: req.instance,
      incarnation: incarnationOf(req.instance),
      host: req.host,
      port: req.port,
      source: req.source,
      alive: true,
      deadSince: 0,
    });
    return evicted === undefined ? { ok: true, id, rejoined: false } : { ok: true, id, rejoined: false, evicted };
  }

  /** The node's link is gone: it stays in the table, dead since `now`. */
  markDead(id: number, now: number): boolean {
    const e = this.#nodes.get(id);
    if (!e || id === 0 || !e.alive) return false;
    e.alive = false;
    e.deadSince = now;
    return true;
  }

  #byInstance(instance: InstanceId): NodeEntry | undefined {
    for (const e of this.#nodes.values()) if (e.id !== 0 && e.instance === instance) return e;
    return undefined;
  }

  #liveFrom(source: string): number {
    let n = 0;
    for (const e of this.#nodes.values()) if (e.id !== 0 && e.alive && e.source === source) n++;
    return n;
  }

  /** The first id after the cursor that no entry holds (the table has room, so there is one). */
  #freeId(): number {
    const max = this.maxId;
    for (let i = 1; i <= max; i++) {
      const id = ((this.#cursor + i - 1) % max) + 1;
      if (!this.#nodes.has(id)) return id;
    }
    throw new Error('node registry: no free id in a table with room');
  }

  #longestDead(): number | undefined {
    let best: NodeEntry | undefined;
    for (const e of this.#nodes.values()) {
      if (e.id === 0 || e.alive) continue;
      if (!best || e.deadSince < best.deadSince || (e.deadSince === best.deadSince && e.id < best.id)) best = e;
    }
    return best?.id;
  }
}
