// Wire structures of the TCP mesh as named-offset tables, one per struct,
// named after the C rocm-ernic's structs (docs/mesh.md, "Frame format", gives
// each) so a reader can hold them against it. Fields are the project's one
// field codec's (protocol/field.ts): numeric `Field`s with their byte order,
// read and written with getField/setField (getFieldBig/setFieldBig for the
// u64s kept whole), and opaque byte arrays (host names, GIDs, instance
// nonces) as `RawField`s, viewed with viewRaw. Handlers never use numeric
// offsets: they go through these tables.
//
// Byte order: the 32-byte frame header and every control payload are
// big-endian (network order), as the C rocm-ernic's TcpMsgHeader. The ionic
// header is little-endian except its immediate, which stays big-endian as in
// the WQE and CQE it is copied between.
//
// A table's `SIZE` is our (version 5) size; `V4_SIZE` / `V3_SIZE` name the
// C rocm-ernic's shorter layouts that ours extend by appending, so a decoder can
// tell an older peer from a corrupt message.

import { be, le, raw } from '../../protocol/field';

// ---------------------------------------------------------------------------
// Frame header (TcpMsgHeader): packed, 32 bytes, every field u32 big-endian.

export const tcp_msg_header = {
  magic: be(0, 4),
  msg_type: be(4, 4),
  /** Payload bytes after the header. */
  msg_len: be(8, 4),
  /** Sender's running count; informative (TCP orders the stream). */
  seq: be(12, 4),
  src_node_id: be(16, 4),
  dst_node_id: be(20, 4),
  src_qpn: be(24, 4),
  dst_qpn: be(28, 4),
  SIZE: 32,
} as const;

// ---------------------------------------------------------------------------
// Control payloads (big-endian)

/**
 * TcpHandshakePayload: node_id and version (v4, 8 bytes); v5 appends the
 * result and two 8-byte identities, which v6 fills with incarnations (the
 * public hash of a nonce, codec incarnationOf), never a nonce.
 */
export const tcp_handshake = {
  node_id: be(0, 4),
  version: be(4, 4),
  /** 0, or a negative errno (i32) in a refusing HANDSHAKE_RESP. */
  result: be(8, 4),
  /** The sender's incarnation. */
  incarnation: raw(12, 8),
  /** The incarnation the sender believes it is talking to (a connector's expectation; an acceptor echoes the connector's). */
  peer_incarnation: raw(20, 8),
  /** v6: the pair's link key (tcp_node_info.link_key): proof that the manager registered this pair. */
  link_key: raw(28, 16),
  SIZE: 44,
  V5_SIZE: 28,
  V4_SIZE: 8,
} as const;

/** TcpRegisterNodePayload. v3 ends before `version`, v4 before `instance`. */
export const tcp_register_node = {
  /** NUL-terminated host peers should dial; empty = the address the manager sees. */
  hostname: raw(0, 256),
  /** The worker's listening port for direct links (0: none, relay only). */
  port: be(256, 2),
  /** AUTO_NODE_ID for a new id, else the id the worker holds. */
  requested_node_id: be(258, 4),
  version: be(262, 4),
  instance: raw(266, 8),
  SIZE: 274,
  V4_SIZE: 266,
  V3_SIZE: 262,
} as const;

/** TcpRegisterRespPayload. v3 ends before `version`, v4 before `manager_instance`. */
export const tcp_register_resp = {
  assigned_node_id: be(0, 4),
  num_nodes: be(4, 4),
  /** i32: 0 ok, negative errno (-EPROTO wrong version, -ENOSPC table full, -EINVAL bad request). */
  result: be(8, 4),
  version: be(12, 4),
  manager_instance: raw(16, 8),
  SIZE: 24,
  V4_SIZE: 16,
  V3_SIZE: 12,
} as const;

/** TcpMeshTopologyPayload prefix; `num_nodes` tcp_node_info records follow (v5: only those, not 64 fixed slots). */
export const tcp_mesh_topology = {
  num_nodes: be(0, 4),
  NODES: 4,
  SIZE: 4,
} as const;

/**
 * TcpMeshNodeInfo (266 bytes in v4); v5 appends 8 bytes that v6 fills with
 * the node's incarnation (not its nonce); v6 appends the link key of the
 * pair (recipient, node): each worker gets its own topology.
 */
export const tcp_node_info = {
  node_id: be(0, 4),
  hostname: raw(4, 256),
  port: be(260, 2),
  is_alive: be(262, 1),
  reserved: raw(263, 3),
  incarnation: raw(266, 8),
  /** Known only to the manager and the two nodes of the pair; zero for the recipient itself and the manager. */
  link_key: raw(274, 16),
  SIZE: 290,
  V5_SIZE: 274,
  V4_SIZE: 266,
} as const;

/** TcpNodeGidsPayload: one node's GIDs. v5 sends 1 to MAX_NODES of these back to back in one NODE_GIDS frame. */
export const tcp_node_gids = {
  node_id: be(0, 4),
  num_gids: be(4, 4),
  /** MAX_NODE_GIDS slots of 16 bytes; the first num_gids are used, the rest zero. */
  gids: raw(8, 128),
  GID_SIZE: 16,
  SIZE: 136,
} as const;

/** TcpRdmaOpHeader, the prefix of RDMA_WRITE / RDMA_READ_REQ. Its contents belong to the data path; the mesh knows only its size. */
export const tcp_rdma_op_header = {
  SIZE: 16,
} as const;

// ---------------------------------------------------------------------------
// The ionic data path's header (struct ionic_wire_hdr), first in every
// TCP_MSG_IONIC payload: packed, little-endian, 60 bytes.

export const ionic_wire_hdr = {
  /** IONIC_WIRE_MAGIC. */
  magic: le(0, 4),
  /** IonicWireOp. */
  op: le(4, 1),
  /** ATOMIC_REQ: 1 compare-and-swap, 0 fetch-and-add. */
  atomic_cs: le(5, 1),
  /** 0 in the C rocm-ernic. Ours: bits 0..7 the data path's flags, bits 8..15 IONIC_WIRE_VERSION. */
  rsvd: le(6, 2),
  src_qp_id: le(8, 4),
  dst_qp_id: le(12, 4),
  /** Matches the requester's pending entry. */
  req_id: le(16, 4),
  /** Resolved by the responder against its own MR table. */
  rkey: le(20, 4),
  length: le(24, 4),
  /** Immediate data, kept big-endian as in the WQE and CQE. */
  imm_be: be(28, 4),
  status: le(32, 4),
  remote_va: le(36, 8),
  swap_add: le(44, 8),
  compare: le(52, 8),
  SIZE: 60,
} as const;

/** "IONC" read as a little-endian u32. */
export const IONIC_WIRE_MAGIC = 0x434e4f49;

/**
 * The version of the ionic header's meaning, in rsvd bits 8..15 (rsvd as a
 * u16). 0 is the C rocm-ernic's format and our own before datagrams carried
 * their Q_Key checked at the receiver; 1 is today's. A receiver refuses any
 * other (docs/mesh.md "RC rules at the responder").
 */
export const IONIC_WIRE_VERSION = 1;
export const IONIC_WIRE_VERSION_SHIFT = 8;
export const IONIC_WIRE_VERSION_MASK = 0xff00;
