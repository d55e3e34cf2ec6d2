// The seam between the mesh core (mesh.ts with frame-router.ts,
// frame-writer.ts and health-check.ts: sockets, routing of data, the
// inbound queue, heartbeats, events) and the two roles (manager-role.ts,
// worker-role.ts: registration, topology, GIDs, who dials whom). Types only.

import type * as net from 'node:net';
import type { Logger } from '../log';
import type { MeshConnection, LinkKind } from './connection';
import type { GidTable } from './gid-table';
import type { FrameHeader, InstanceId, NodeInfo } from './messages';
import type { Resolver } from './dial';

/** What a role may use of the core. */
export interface MeshCore {
  readonly log: Logger;
  readonly instance: InstanceId;
  readonly gids: GidTable;
  readonly resolve: Resolver;
  readonly maxNodes: number;
  /**
   * Live registrations per source address (MeshLimits.nodesPerAddress).
   * Optional until mesh.ts passes it; NODES_PER_ADDRESS meanwhile.
   */
  readonly nodesPerAddress?: number;
  readonly heartbeatMs: number;
  /** True once close() started: roles start nothing new. */
  readonly closing: boolean;
  now(): number;
  /** The port our listener is bound to. */
  listenPort(): number;
  /** This node's own GIDs. */
  localGids(): readonly Buffer[];
  /** Wrap a connected socket into a mesh connection the core watches. */
  adopt(socket: net.Socket, kind: LinkKind, outgoing: boolean): MeshConnection;
  /** Frame and queue a control message; a peer whose control room overflows is closed. False when not queued. */
  sendControl(conn: MeshConnection, type: number, body: Buffer): boolean;
  /** Something that changes reachability happened: recompute routes and emit peer-up/peer-down. */
  routesChanged(reason: string): void;
  emitTopology(nodes: readonly NodeInfo[]): void;
  emitRegistered(nodeId: number): void;
  emitRefused(errno: number, reason: string): void;
  /** Rate-limited warning about a peer's input. */
  warn(key: string, message: string, meta?: Record<string, unknown>): void;
  /** A peer broke a protocol rule: count, warn (rate limited), close the connection. */
  violation(conn: MeshConnection, reason: string): void;
  /** Mesh diagnostics (at warn, rate limited, under ERNIC_DEBUG_MESH=1). */
  debug(message: string, meta?: Record<string, unknown>): void;
}

export interface Role {
  readonly kind: 'manager' | 'worker';
  /** Our node id (manager: 0; worker: once registered). */
  nodeId(): number | undefined;
  start(): void;
  /** A frame on a connection that is not established yet (registration, handshake, their replies). */
  onSetupFrame(conn: MeshConnection, header: FrameHeader, body: Buffer): void;
  /** A control frame on an established connection. */
  onControl(conn: MeshConnection, header: FrameHeader, body: Buffer): void;
  onClose(conn: MeshConnection, reason: string): void;
  /** Health tick: the manager pings every worker. */
  onTick(): void;
  /** The connection that carries data to `nodeId` (direct, or the manager's to relay), or undefined. */
  route(nodeId: number): MeshConnection | undefined;
  /** Every node id the role knows about (for route bookkeeping). */
  knownNodes(): Iterable<number>;
  /** Our own GIDs changed. */
  localGidsChanged(): void;
  /** The current topology (what 'topology' last reported). */
  topology(): readonly NodeInfo[];
  stop(): void;
}
