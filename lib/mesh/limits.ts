// Every bound and timeout of the TCP mesh, in one place. The numbers are the
// C rocm-ernic's (its mesh's room rules, timeouts, ERNIC_TCP_* defaults and
// wire constants), each listed in docs/mesh.md ("Flow control and every
// bound", "Configuration", "Frame format"). None of them means "unlimited" when zero; each is checked at the edge
// where a peer's value first arrives, and each has a negative test.

const MiB = 1024 * 1024;

/** "RDMA" in ASCII, the first word of every frame (C rocm-ernic: TCP_PROTOCOL_MAGIC). */
export const MESH_MAGIC = 0x52444d41;

/**
 * Our protocol version. The C rocm-ernic is at 4; our control payloads extend
 * its v4 layouts (an instance nonce, batched GID records, a variable-length
 * topology), so we say 6 and refuse anything else at registration and
 * handshake. 6 differs from 5 in what the 8-byte identity fields of the
 * topology and the handshake carry: a node's public incarnation (a hash of
 * its nonce), never the nonce itself. docs/mesh.md lists the differences.
 */
export const MESH_PROTOCOL_VERSION = 6;

/** Largest frame payload (C rocm-ernic: TCP_MAX_PAYLOAD_LEN, 16 MiB). Checked from the header, before any body is buffered. */
export const MAX_FRAME_PAYLOAD = 16 * MiB;

/** Nodes in the manager's table, the manager (node 0) included; as the C topology's 64 slots. */
export const MAX_NODES = 64;

/** Highest node id: ids live in the table's range (1..MAX_NODES-1 for workers), so any larger id on the wire is refused. */
export const MAX_NODE_ID = MAX_NODES - 1;

/** Live nodes the manager registers from one source address (configurable, 1..MAX_NODES): one client cannot fill the table. */
export const NODES_PER_ADDRESS = 8;

/** Accepted connections not yet registered or handshaken, in all and from one address; past these a new one is closed at once. */
export const PENDING_CONNECTIONS = 64;
export const PENDING_PER_ADDRESS = 16;

/** An accepted connection must register or handshake within this long (or three heartbeat intervals, if shorter). */
export const SETUP_TIMEOUT_MS = 3000;

/** requested_node_id meaning "give me a new id" (C rocm-ernic: 0xFFFFFFFF). */
export const AUTO_NODE_ID = 0xffffffff;

/** GIDs one node may own (C rocm-ernic: TCP_MAX_NODE_GIDS). */
export const MAX_NODE_GIDS = 8;

/** Hostname field of the registration and topology payloads, NUL included. */
export const HOSTNAME_FIELD = 256;

/** Per connection: bytes of our own requests queued and not yet written to the kernel. */
export const REQUEST_QUEUE_BYTES = 32 * MiB;

/** Per connection: all data queued (requests and replies), twice the request room. */
export const CONNECTION_QUEUE_BYTES = 2 * REQUEST_QUEUE_BYTES;

/** Per connection: control frames (topology, GID batches, registration) queued; a peer past this is not reading and is closed. */
const CONTROL_QUEUE_BYTES = 4 * MiB;

/** Node-wide inbound queue of data messages the layer above still holds: bytes. */
const INBOUND_QUEUE_BYTES = 64 * MiB;

/** Node-wide inbound queue: messages. An empty queue takes any one message. */
const INBOUND_QUEUE_MESSAGES = 4096;

/** Health-check interval (C rocm-ernic: 5 s). */
export const DEFAULT_HEARTBEAT_MS = 5000;

/** A connection that carries nothing for this many intervals is dead. */
export const DEAD_AFTER_INTERVALS = 3;

/** A connection that has not registered or handshaken after this many intervals is closed. */
export const ESTABLISH_INTERVALS = 3;

/** ERNIC_TCP_SEND_TIMEOUT_MS default: no write progress for this long shuts the connection down. The manager uses half. */
export const DEFAULT_SEND_TIMEOUT_MS = 10_000;

/** A request whose reply never comes completes in error after this long (for the data path). */
export const LOST_PEER_MS = 30_000;

/** Receiver-not-ready retry window (for the data path). */
export const RNR_TIMEOUT_MS = 5000;

/** A reader waiting this long for inbound room raises 'pressure': the data path stops holding SENDs for receives. */
export const INBOUND_STALL_MS = 500;

/** With no consumer (no QEMU connected) for this long, a full inbound queue drops instead of holding readers back. */
export const NO_CONSUMER_DROP_MS = 2000;

/** Reconnect backoff: first delay, doubling up to the cap. */
export const RECONNECT_MIN_MS = 100;
export const RECONNECT_MAX_MS = 5000;

/** One connect attempt to one address gives up after this long. */
export const CONNECT_TIMEOUT_MS = 5000;

/** Addresses tried per host name (a resolver that answers more is cut short). */
export const MAX_RESOLVED_ADDRESSES = 16;

/** ERNIC_TCP_LISTEN_BACKLOG default. */
export const DEFAULT_LISTEN_BACKLOG = 32;

/**
 * Process-wide: bytes of frame bodies being assembled or held by the parsers
 * (partial frames included). A body is charged before it is buffered; a
 * header announcing more than is left waits, its socket paused, until room
 * appears (an empty budget takes any one frame).
 */
export const PARTIAL_FRAME_BYTES = 64 * MiB;

/** A partial frame that holds room this long while others wait for room is given up (its connection closed). */
export const PARTIAL_FRAME_MS = 10_000;

/** Chunks a held connection may still receive after pausing its socket before it is closed (a stream that ignores pause). */
export const MAX_HELD_CHUNK_BYTES = 4 * MiB;

/**
 * One pass of a connection's writer hands the socket queued frames, corked,
 * until this many bytes wait in it: many small frames go to the kernel in one
 * writev (one send and one loopback push for all), a 1 MiB frame alone.
 */
export const WRITE_BATCH_BYTES = 1 * MiB;

/** Bounds a caller can lower (tests do, to reach them quickly). Raising them past the defaults is refused (nodesPerAddress: up to MAX_NODES). */
export interface MeshLimits {
  readonly requestQueueBytes: number;
  readonly connectionQueueBytes: number;
  readonly controlQueueBytes: number;
  readonly inboundQueueBytes: number;
  readonly inboundQueueMessages: number;
  readonly maxNodes: number;
  /** Live registrations per source address (manager). */
  readonly nodesPerAddress: number;
}

const DEFAULT_LIMITS: MeshLimits = {
  requestQueueBytes: REQUEST_QUEUE_BYTES,
  connectionQueueBytes: CONNECTION_QUEUE_BYTES,
  controlQueueBytes: CONTROL_QUEUE_BYTES,
  inboundQueueBytes: INBOUND_QUEUE_BYTES,
  inboundQueueMessages: INBOUND_QUEUE_MESSAGES,
  maxNodes: MAX_NODES,
  nodesPerAddress: NODES_PER_ADDRESS,
};

/** The most each limit may be set to: its default, except the per-address count, which may go up to the table. */
const CEILINGS: MeshLimits = { ...DEFAULT_LIMITS, nodesPerAddress: MAX_NODES };

/** Merge caller limits over the defaults; each must be a positive integer no larger than its default. */
export function resolveLimits(partial: Partial<MeshLimits> | undefined): MeshLimits {
  const out: Record<keyof MeshLimits, number> = { ...DEFAULT_LIMITS };
  if (partial) {
    for (const key of Object.keys(DEFAULT_LIMITS) as (keyof MeshLimits)[]) {
      const v = partial[key];
      if (v === undefined) continue;
      if (!Number.isInteger(v) || v < 1 || v > CEILINGS[key]) {
        throw new RangeError(`mesh limit ${key} must be an integer from 1 to ${CEILINGS[key]} (got ${v})`);
      }
      out[key] = v;
    }
  }
  if (out.maxNodes < 2) throw new RangeError('mesh limit maxNodes must be at least 2');
  return out;
}
