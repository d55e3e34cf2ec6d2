// The Mesh's public types: its options, what send() answers, its events and
// its statistics (types only; the class is mesh.ts).

import type { Logger } from '../log';
import type { MeshBackendConfig } from './config';
import type { Resolver } from './dial';
import type { MeshLimits } from './limits';
import type { Placement } from './frame-parser';
import type { MeshMessage } from './mesh-message';
import type { InstanceId, NodeInfo } from './messages';

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
  /**
   * Once the frame was 'queued': called when the kernel has it, or it was
   * taken back or dropped; the caller may reuse the header and payload then.
   * Not called when send() answers anything but 'queued'.
   */
  readonly onDone?: () => void;
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

/**
 * Where the rest of a large IONIC message from node `from` may be written as
 * it arrives: `head` is its 60-byte header, `rest` the payload bytes that
 * follow. Views of exactly `rest` bytes (their `done` is called when the
 * message is delivered or given up), or null to have it buffered whole.
 */
export type Placer = (from: number, head: Buffer, rest: number) => Placement | null;
