// GID -> node id, built from what each node advertises about itself
// (docs/mesh.md, "A worker" and "Trust boundary"). Exact lookups only: a
// GID no node claims names no node, and the caller must not pick a default.
// A GID claimed by two nodes is a conflict: lookups of it answer no node, as
// in the C rocm-ernic ("duplicate GID claims are dropped for both claimants"),
// until one of the two lets go of it.

import { gidKey } from './address';
import { MAX_NODE_GIDS } from './limits';

export class GidTable {
  /** node id -> its GIDs (copies, at most MAX_NODE_GIDS). */
  readonly #byNode = new Map<number, Buffer[]>();
  /** gid key -> the nodes claiming it (one normally; two or more is a conflict). */
  readonly #claims = new Map<string, Set<number>>();

  /**
   * Replace one node's GIDs. Returns the GIDs that became conflicts because
   * of this call (for a warning). Extra GIDs past MAX_NODE_GIDS are ignored,
   * as the decoder already refused them.
   */
  set(nodeId: number, gids: readonly Buffer[]): Buffer[] {
    this.remove(nodeId);
    const mine: Buffer[] = [];
    const seen = new Set<string>();
    const conflicts: Buffer[] = [];
    for (const g of gids.slice(0, MAX_NODE_GIDS)) {
      if (g.length !== 16) continue;
      const key = gidKey(g);
      if (seen.has(key)) continue;
      seen.add(key);
      const copy = Buffer.from(g);
      mine.push(copy);
      let owners = this.#claims.get(key);
      if (!owners) {
        owners = new Set();
        this.#claims.set(key, owners);
      }
      owners.add(nodeId);
      if (owners.size === 2) conflicts.push(copy);
    }
    if (mine.length > 0) this.#byNode.set(nodeId, mine);
    return conflicts;
  }

  /** True when `gids` (as set() would keep them) are exactly what `nodeId` has now. */
  holds(nodeId: number, gids: readonly Buffer[]): boolean {
    const now = this.#byNode.get(nodeId) ?? [];
    const next = new Set<string>();
    for (const g of gids.slice(0, MAX_NODE_GIDS)) if (g.length === 16) next.add(gidKey(g));
    return now.length === next.size && now.every((g) => next.has(gidKey(g)));
  }

  /** Forget a node's GIDs (evicted). */
  remove(nodeId: number): void {
    const old = this.#byNode.get(nodeId);
    if (!old) return;
    this.#byNode.delete(nodeId);
    for (const g of old) {
      const key = gidKey(g);
      const owners = this.#claims.get(key);
      if (!owners) continue;
      owners.delete(nodeId);
      if (owners.size === 0) this.#claims.delete(key);
    }
  }

  /** The one node that owns `gid`, or undefined (nobody, or a conflict). */
  lookup(gid: Buffer): number | undefined {
    if (gid.length !== 16) return undefined;
    const owners = this.#claims.get(gidKey(gid));
    if (!owners || owners.size !== 1) return undefined;
    for (const id of owners) return id;
    return undefined;
  }

  /** True when two or more nodes claim `gid`. */
  conflicted(gid: Buffer): boolean {
    return (this.#claims.get(gidKey(gid))?.size ?? 0) > 1;
  }

  /** One node's GIDs (empty when it has none). */
  gidsOf(nodeId: number): readonly Buffer[] {
    return this.#byNode.get(nodeId) ?? [];
  }

  /** Nodes that have at least one GID, in id order. */
  nodes(): number[] {
    return [...this.#byNode.keys()].sort((a, b) => a - b);
  }

  clear(): void {
    this.#byNode.clear();
    this.#claims.clear();
  }
}
