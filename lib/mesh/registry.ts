// The manager's node table, as data (no sockets): who registered, under
// which id, from which process instance, and whether it is alive. The rules
// (spec/architecture.rst "Topology"):
//
// - The manager is node 0. New workers get 1, 2, ... in arrival order; an id
//   is never given out twice (the counter only goes up).
// - A node that went quiet and comes back (same instance nonce) keeps its
//   id. A restarted one (new nonce) gets a new id, even if it asks for its
//   old one while that entry is still in the table.
// - A worker asking for an id the table does not hold (the manager was
//   restarted, or the entry was evicted) gets it back, and the counter moves
//   past it: this is how a restarted manager gets its workers back under
//   the ids their peers know. Only the holder of an id asks for it.
// - At most `maxNodes` entries, the manager included. A new node in a full
//   table evicts the node that has been dead longest, or is refused when
//   none is dead.

import { AUTO_NODE_ID, MAX_NODE_ID } from './limits';
import { InstanceId } from './messages';

/** Linux errno values carried (negated) in REGISTER_RESP.result and HANDSHAKE_RESP.result. */
export const Errno = {
  EAGAIN: 11,
  EINVAL: 22,
  ENOSPC: 28,
  EPROTO: 71,
  ESTALE: 116,
} as const;

interface NodeEntry {
  readonly id: number;
  instance: InstanceId;
  /** Host peers dial (the advertised one, or the address the manager saw). */
  host: string;
  port: number;
  alive: boolean;
  /** Clock reading when it died (0 while alive). */
  deadSince: number;
}

interface RegisterRequest {
  readonly instance: InstanceId;
  readonly requestedId: number;
  readonly host: string;
  readonly port: number;
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
  | { readonly ok: false; readonly errno: number; readonly reason: string };

export class NodeRegistry {
  readonly #nodes = new Map<number, NodeEntry>();
  #nextId = 1;

  constructor(private readonly maxNodes: number, self: { readonly instance: InstanceId; readonly host: string; readonly port: number }) {
    this.#nodes.set(0, { id: 0, instance: self.instance, host: self.host, port: self.port, alive: true, deadSince: 0 });
  }

  get size(): number {
    return this.#nodes.size;
  }

  /** The id the next new node would get. */
  get nextId(): number {
    return this.#nextId;
  }

  get(id: number): NodeEntry | undefined {
    return this.#nodes.get(id);
  }

  /** All entries in id order. */
  entries(): NodeEntry[] {
    return [...this.#nodes.values()].sort((a, b) => a.id - b.id);
  }

  register(req: RegisterRequest): RegisterOutcome {
    // The same process coming back keeps its id, whatever it asked for.
    for (const e of this.#nodes.values()) {
      if (e.id !== 0 && e.instance === req.instance) {
        this.#revive(e, req);
        return { ok: true, id: e.id, rejoined: true };
      }
    }
    let id: number;
    if (req.requestedId !== AUTO_NODE_ID && req.requestedId >= 1 && req.requestedId <= MAX_NODE_ID &&
      !this.#nodes.has(req.requestedId)) {
      id = req.requestedId;
    } else {
      if (this.#nextId > MAX_NODE_ID) return { ok: false, errno: Errno.ENOSPC, reason: 'node ids exhausted' };
      id = this.#nextId;
    }
    let evicted: number | undefined;
    if (this.#nodes.size >= this.maxNodes) {
      evicted = this.#longestDead();
      if (evicted === undefined) {
        return { ok: false, errno: Errno.ENOSPC, reason: `node table full (${this.maxNodes} nodes, none dead)` };
      }
      this.#nodes.delete(evicted);
    }
    this.#nextId = Math.max(this.#nextId, id + 1);
    this.#nodes.set(id, { id, instance: req.instance, host: req.host, port: req.port, alive: true, deadSince: 0 });
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

  #revive(e: NodeEntry, req: RegisterRequest): void {
    e.alive = true;
    e.deadSince = 0;
    e.host = req.host;
    e.port = req.port;
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
