// Types only: the mesh's message types (ordinals fixed forever by the C
// rocm-ernic; docs/mesh.md, "Message types") and the decoded records of its
// control payloads.

/** TcpMsgType ordinals. 18-20 are retired and stay reserved. */
export const MsgType = {
  HANDSHAKE: 1,
  HANDSHAKE_RESP: 2,
  POST_SEND: 3,
  POST_RECV: 4,
  COMPLETION: 5,
  DATA: 6,
  QP_STATE_INIT: 7,
  QP_STATE_RTR: 8,
  QP_STATE_RTS: 9,
  QUERY_REMOTE_CONN_INFO: 10,
  REMOTE_CONN_INFO_RESP: 11,
  REGISTER_NODE: 12,
  REGISTER_RESP: 13,
  MESH_TOPOLOGY: 14,
  HEARTBEAT: 15,
  HEARTBEAT_RESP: 16,
  NODE_STATUS: 17,
  RESERVED_18: 18,
  RESERVED_19: 19,
  RESERVED_20: 20,
  RDMA_WRITE: 21,
  RDMA_READ_REQ: 22,
  RDMA_READ_RESP: 23,
  IONIC: 24,
  NODE_GIDS: 25,
} as const;

/** The types the layer above may send and receive; the mesh routes them without looking past the type's own header. */
export type DataMsgType =
  | typeof MsgType.DATA
  | typeof MsgType.RDMA_WRITE
  | typeof MsgType.RDMA_READ_REQ
  | typeof MsgType.RDMA_READ_RESP
  | typeof MsgType.IONIC;

/** struct ionic_wire_hdr `op`. */
export const IonicWireOp = {
  SEND: 1,
  SEND_IMM: 2,
  SEND_INV: 3,
  WRITE: 4,
  WRITE_IMM: 5,
  READ_REQ: 6,
  READ_RESP: 7,
  ATOMIC_REQ: 8,
  ATOMIC_RESP: 9,
  ACK: 10,
} as const;

/** The 32-byte frame header, decoded. */
export interface FrameHeader {
  readonly type: number;
  /** Payload bytes. */
  readonly length: number;
  readonly seq: number;
  readonly src: number;
  readonly dst: number;
  readonly srcQpn: number;
  readonly dstQpn: number;
}

/**
 * An 8-byte instance nonce as 16 lowercase hex digits; a process draws one
 * at start, so a restart shows. A worker's nonce is its proof of identity
 * to the manager: it goes only in its own REGISTER_NODE and never leaves the
 * manager. Peers know a node by its incarnation (same format): a one-way
 * hash of the nonce (codec incarnationOf).
 */
export type InstanceId = string;

export interface Handshake {
  readonly nodeId: number;
  readonly version: number;
  readonly result: number;
  /** The sender's incarnation. */
  readonly incarnation: InstanceId;
  /** The incarnation the dialler expects to reach (a reply echoes the dialler's). */
  readonly peerIncarnation: InstanceId;
  /** The pair's link key from the topology (16 bytes; zeros in a refusal). */
  readonly linkKey: Buffer;
}

export interface RegisterNode {
  /** Host peers should dial ('' = the address the manager sees). */
  readonly host: string;
  readonly port: number;
  /** AUTO_NODE_ID, or the id the worker holds. */
  readonly requestedId: number;
  readonly version: number;
  readonly instance: InstanceId;
}

export interface RegisterResp {
  readonly nodeId: number;
  readonly numNodes: number;
  readonly result: number;
  readonly version: number;
  readonly managerInstance: InstanceId;
}

export interface NodeInfo {
  readonly id: number;
  readonly host: string;
  readonly port: number;
  readonly alive: boolean;
  /** Public: changes when another process holds the id (never the node's nonce). */
  readonly incarnation: InstanceId;
  /**
   * The link key of the pair (the topology's recipient, this node), 16
   * bytes, all zero when there is none (the recipient itself, the manager,
   * the manager's own view). A dialler proves with it that it is this node.
   */
  readonly linkKey: Buffer;
}

export interface NodeGids {
  readonly nodeId: number;
  /** 16-byte GIDs (views into the received frame: copy to keep). */
  readonly gids: readonly Buffer[];
}

/** struct ionic_wire_hdr, decoded. The 64-bit fields are exact (bigint). */
export interface IonicWireHeader {
  readonly op: number;
  readonly atomicCs: number;
  readonly srcQpId: number;
  readonly dstQpId: number;
  readonly reqId: number;
  readonly rkey: number;
  readonly length: number;
  /** The immediate as the 32-bit big-endian value it is on the wire and in the CQE. */
  readonly immBe: number;
  readonly status: number;
  readonly remoteVa: bigint;
  readonly swapAdd: bigint;
  readonly compare: bigint;
}
