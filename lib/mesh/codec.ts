// The mesh codec: pure functions over Buffers, no sockets, no logging. The
// frame header decoder applies the per-type length rules, so a frame parser
// can refuse a frame before buffering its payload. Control payload decoders
// check every field a peer sets and return a MeshError rather than throw.
// Encoders throw only for our own bad arguments.

import { createHash, createHmac, timingSafeEqual } from 'node:crypto';
import { newWireHeader, readWireHeader, writeWireHeader } from './ionic-header';
import { parseHost } from './address';
import { Decoded, fail, ok } from './errors';
import { Field, getField, getFieldBig, setField, setFieldBig, viewRaw } from '../../protocol/field';
import {
  ionic_wire_hdr,
  IONIC_WIRE_MAGIC,
  IONIC_WIRE_VERSION,
  IONIC_WIRE_VERSION_SHIFT,
  tcp_handshake,
  tcp_mesh_topology,
  tcp_msg_header,
  tcp_node_gids,
  tcp_node_info,
  tcp_rdma_op_header,
  tcp_register_node,
  tcp_register_resp,
} from './layouts';
import {
  AUTO_NODE_ID,
  HOSTNAME_FIELD,
  MAX_FRAME_PAYLOAD,
  MAX_NODE_GIDS,
  MAX_NODE_ID,
  MAX_NODES,
  MESH_MAGIC,
  MESH_PROTOCOL_VERSION,
} from './limits';
import {
  DataMsgType,
  FrameHeader,
  Handshake,
  InstanceId,
  IonicWireHeader,
  IonicWireOp,
  MsgType,
  NodeGids,
  NodeInfo,
  RegisterNode,
  RegisterResp,
} from './messages';

// ---------------------------------------------------------------------------
// Per-type length rules

interface LengthRule {
  readonly min: number;
  readonly max: number;
}

const HEARTBEAT_MAX = 64;

/**
 * The types we speak and the payload lengths each may declare. The upper
 * bounds are what the largest honest message needs, so a header can be
 * refused before its payload is read. Legacy PVRDMA types (3-11),
 * NODE_STATUS and the retired 18-20 are refused.
 */
const LENGTH_RULES: ReadonlyMap<number, LengthRule> = new Map<number, LengthRule>([
  [MsgType.HANDSHAKE, { min: tcp_handshake.V4_SIZE, max: 64 }],
  [MsgType.HANDSHAKE_RESP, { min: tcp_handshake.V4_SIZE, max: 64 }],
  [MsgType.REGISTER_NODE, { min: tcp_register_node.V3_SIZE, max: 512 }],
  [MsgType.REGISTER_RESP, { min: tcp_register_resp.V3_SIZE, max: 64 }],
  [
    MsgType.MESH_TOPOLOGY,
    { min: tcp_mesh_topology.SIZE, max: tcp_mesh_topology.SIZE + MAX_NODES * tcp_node_info.SIZE },
  ],
  [MsgType.HEARTBEAT, { min: 0, max: HEARTBEAT_MAX }],
  [MsgType.HEARTBEAT_RESP, { min: 0, max: HEARTBEAT_MAX }],
  [MsgType.NODE_GIDS, { min: tcp_node_gids.SIZE, max: MAX_NODES * tcp_node_gids.SIZE }],
  [MsgType.DATA, { min: 0, max: MAX_FRAME_PAYLOAD }],
  [MsgType.RDMA_WRITE, { min: tcp_rdma_op_header.SIZE, max: MAX_FRAME_PAYLOAD }],
  [MsgType.RDMA_READ_REQ, { min: tcp_rdma_op_header.SIZE, max: MAX_FRAME_PAYLOAD }],
  [MsgType.RDMA_READ_RESP, { min: 0, max: MAX_FRAME_PAYLOAD }],
  [MsgType.IONIC, { min: ionic_wire_hdr.SIZE, max: MAX_FRAME_PAYLOAD }],
]);

/** The fixed header each data type starts its payload with. */
const DATA_HEADER_SIZE: ReadonlyMap<number, number> = new Map<number, number>([
  [MsgType.DATA, 0],
  [MsgType.RDMA_WRITE, tcp_rdma_op_header.SIZE],
  [MsgType.RDMA_READ_REQ, tcp_rdma_op_header.SIZE],
  [MsgType.RDMA_READ_RESP, 0],
  [MsgType.IONIC, ionic_wire_hdr.SIZE],
]);

/** True for the types the layer above sends and receives. */
export function isDataType(type: number): type is DataMsgType {
  return DATA_HEADER_SIZE.has(type);
}

/** Size of the fixed header a data type's payload starts with (undefined for other types). */
export function dataHeaderSize(type: number): number | undefined {
  return DATA_HEADER_SIZE.get(type);
}

/** Largest payload a frame of this type may declare (undefined: type not spoken). */
export function maxPayloadOf(type: number): number | undefined {
  return LENGTH_RULES.get(type)?.max;
}

// ---------------------------------------------------------------------------
// Frame header

interface FrameHeaderInit {
  readonly type: number;
  readonly length: number;
  readonly seq: number;
  readonly src: number;
  readonly dst: number;
  readonly srcQpn?: number;
  readonly dstQpn?: number;
}

/** Write a frame header at `at` (32 bytes). */
export function writeFrameHeader(out: Buffer, at: number, h: FrameHeaderInit): void {
  if (at < 0 || at + tcp_msg_header.SIZE > out.length) throw new RangeError('frame header does not fit');
  setField(out, at, tcp_msg_header.magic, MESH_MAGIC);
  setField(out, at, tcp_msg_header.msg_type, h.type);
  setField(out, at, tcp_msg_header.msg_len, h.length);
  setField(out, at, tcp_msg_header.seq, h.seq);
  setField(out, at, tcp_msg_header.src_node_id, h.src);
  setField(out, at, tcp_msg_header.dst_node_id, h.dst);
  setField(out, at, tcp_msg_header.src_qpn, h.srcQpn ?? 0);
  setField(out, at, tcp_msg_header.dst_qpn, h.dstQpn ?? 0);
}

/** A new 32-byte frame header. */
export function encodeFrameHeader(h: FrameHeaderInit): Buffer {
  const out = Buffer.allocUnsafe(tcp_msg_header.SIZE);
  writeFrameHeader(out, 0, h);
  return out;
}

/**
 * Decode and check the header at `at` (the caller guarantees 32 bytes):
 * magic, a type we speak, and a length inside that type's bounds. The payload
 * has not been read yet: this is where an oversized frame is refused.
 */
export function decodeFrameHeader(buf: Buffer, at: number): Decoded<FrameHeader> {
  const magic = getField(buf, at, tcp_msg_header.magic);
  if (magic !== MESH_MAGIC)
    return fail('BAD_MAGIC', `magic 0x${magic.toString(16).padStart(8, '0')}, want 0x${MESH_MAGIC.toString(16)}`);
  const type = getField(buf, at, tcp_msg_header.msg_type);
  const length = getField(buf, at, tcp_msg_header.msg_len);
  const rule = LENGTH_RULES.get(type);
  if (!rule) {
    if (type >= 1 && type <= MsgType.NODE_GIDS)
      return fail('UNSUPPORTED_TYPE', `message type ${type} is not spoken by this mesh`);
    return fail('UNKNOWN_TYPE', `unknown message type ${type}`);
  }
  if (length > rule.max) {
    const code = rule.max === MAX_FRAME_PAYLOAD ? 'FRAME_TOO_LARGE' : 'BAD_LENGTH';
    return fail(code, `type ${type} declares ${length} payload bytes, at most ${rule.max}`);
  }
  if (length < rule.min)
    return fail('BAD_LENGTH', `type ${type} declares ${length} payload bytes, at least ${rule.min}`);
  return ok({
    type,
    length,
    seq: getField(buf, at, tcp_msg_header.seq),
    src: getField(buf, at, tcp_msg_header.src_node_id),
    dst: getField(buf, at, tcp_msg_header.dst_node_id),
    srcQpn: getField(buf, at, tcp_msg_header.src_qpn),
    dstQpn: getField(buf, at, tcp_msg_header.dst_qpn),
  });
}

// ---------------------------------------------------------------------------
// Small field helpers

const INSTANCE_BYTES = 8;
const ZERO_INSTANCE: InstanceId = '0'.repeat(INSTANCE_BYTES * 2);

/** True for 16 hex digits, not all zero (a zero nonce is refused: it is what an unset field reads as). */
export function isInstanceId(text: string): boolean {
  return /^[0-9a-f]{16}$/.test(text) && text !== ZERO_INSTANCE;
}

const INCARNATION_DOMAIN = Buffer.from('rocm-ernic mesh incarnation\0', 'ascii');

/**
 * A node's public identity: the first 8 bytes of SHA-256 over a domain tag
 * and its nonce. Peers see this in the topology and handshakes; it tells a
 * restarted process from the one before, and cannot be turned back into the
 * nonce that registers under the node's id.
 */
export function incarnationOf(instance: InstanceId): InstanceId {
  if (!isInstanceId(instance)) throw new RangeError(`bad instance id '${instance}'`);
  const d = createHash('sha256').update(INCARNATION_DOMAIN).update(Buffer.from(instance, 'hex')).digest();
  // All zero reads as "unset" on the wire.
  if (d.readUInt32BE(0) === 0 && d.readUInt32BE(4) === 0) d[7] = 1;
  return d.toString('hex', 0, INSTANCE_BYTES);
}

/** Write an instance nonce or incarnation into its field (a view of the 8 bytes). */
function writeInstance(field: Buffer, id: InstanceId): void {
  if (!/^[0-9a-f]{16}$/.test(id)) throw new RangeError(`instance id must be 16 hex digits (got '${id}')`);
  field.write(id, 0, INSTANCE_BYTES, 'hex');
}

/** Bytes of a link key (tcp_node_info.link_key, tcp_handshake.link_key). */
const LINK_KEY_BYTES = 16;

/** The all-zero link key: none. */
export const NO_LINK_KEY: Buffer = Buffer.alloc(LINK_KEY_BYTES);

function writeLinkKey(field: Buffer, key: Buffer): void {
  if (key.length !== LINK_KEY_BYTES) throw new RangeError(`a link key is ${LINK_KEY_BYTES} bytes`);
  key.copy(field);
}

/**
 * The link key of workers `a` and `b` (either order): HMAC-SHA256 under the
 * manager's secret over both ids and incarnations, cut to 16 bytes. Only the
 * manager and the pair learn it (each in its own topology), so a third node
 * cannot handshake as either; a new process on a reused id gets a new key.
 */
export function linkKeyOf(secret: Buffer, a: number, aInc: InstanceId, b: number, bInc: InstanceId): Buffer {
  const lo = a < b ? ([a, aInc] as const) : ([b, bInc] as const);
  const hi = a < b ? ([b, bInc] as const) : ([a, aInc] as const);
  const ids = Buffer.alloc(8);
  ids.writeUInt32BE(lo[0], 0);
  ids.writeUInt32BE(hi[0], 4);
  const mac = createHmac('sha256', secret)
    .update(LINK_KEY_DOMAIN)
    .update(ids)
    .update(Buffer.from(lo[1], 'hex'))
    .update(Buffer.from(hi[1], 'hex'))
    .digest();
  return mac.subarray(0, LINK_KEY_BYTES);
}

const LINK_KEY_DOMAIN = Buffer.from('rocm-ernic mesh link key\0', 'ascii');

/** Whether `got` is the (non-zero) link key `want`, compared in constant time. */
export function linkKeyMatches(want: Buffer, got: Buffer): boolean {
  return (
    want.length === LINK_KEY_BYTES &&
    got.length === LINK_KEY_BYTES &&
    !want.equals(NO_LINK_KEY) &&
    timingSafeEqual(want, got)
  );
}

/** Write a NUL-terminated host name into its field (a view of HOSTNAME_FIELD bytes); the host must be valid and fit. */
function writeHostField(field: Buffer, host: string): void {
  if (host !== '' && !parseHost(host)) throw new RangeError(`not a host: '${host}'`);
  if (Buffer.byteLength(host, 'ascii') >= HOSTNAME_FIELD) throw new RangeError('host name too long');
  field.fill(0);
  field.write(host, 0, 'ascii');
}

/** Read a NUL-terminated host name field: ASCII, NUL inside the field, and empty or a valid host. */
function readHostField(field: Buffer): Decoded<string> {
  const nul = field.indexOf(0);
  if (nul < 0) return fail('BAD_HOST', 'host name field has no NUL');
  for (let i = 0; i < nul; i++) {
    const c = field[i]!;
    if (c < 0x21 || c > 0x7e) return fail('BAD_HOST', `host name byte ${i} is 0x${c.toString(16)}`);
  }
  const host = field.toString('ascii', 0, nul);
  if (host !== '' && !parseHost(host)) return fail('BAD_HOST', `'${host}' is not a host`);
  return ok(host);
}

/** A registration's version field; a v3 body ends before it. */
function readVersion(body: Buffer, version: Field): number {
  return body.length >= version.off + version.size ? getField(body, 0, version) : 3;
}

// ---------------------------------------------------------------------------
// HANDSHAKE / HANDSHAKE_RESP

export function encodeHandshake(h: Omit<Handshake, 'version'> & { readonly version?: number }): Buffer {
  const out = Buffer.alloc(tcp_handshake.SIZE);
  setField(out, 0, tcp_handshake.node_id, h.nodeId);
  setField(out, 0, tcp_handshake.version, h.version ?? MESH_PROTOCOL_VERSION);
  setField(out, 0, tcp_handshake.result, h.result >>> 0); // i32 on the wire
  writeInstance(viewRaw(out, 0, tcp_handshake.incarnation), h.incarnation);
  writeInstance(viewRaw(out, 0, tcp_handshake.peer_incarnation), h.peerIncarnation);
  writeLinkKey(viewRaw(out, 0, tcp_handshake.link_key), h.linkKey);
  return out;
}

export function decodeHandshake(body: Buffer): Decoded<Handshake> {
  const version = body.length >= tcp_handshake.V4_SIZE ? getField(body, 0, tcp_handshake.version) : 0;
  if (version !== MESH_PROTOCOL_VERSION)
    return fail('BAD_VERSION', `handshake version ${version}, want ${MESH_PROTOCOL_VERSION}`);
  if (body.length !== tcp_handshake.SIZE)
    return fail('BAD_LENGTH', `handshake is ${body.length} bytes, want ${tcp_handshake.SIZE}`);
  const nodeId = getField(body, 0, tcp_handshake.node_id);
  if (nodeId > MAX_NODE_ID) return fail('BAD_NODE_ID', `handshake node id ${nodeId}`);
  const incarnation = viewRaw(body, 0, tcp_handshake.incarnation).toString('hex');
  const peerIncarnation = viewRaw(body, 0, tcp_handshake.peer_incarnation).toString('hex');
  if (!isInstanceId(incarnation)) return fail('BAD_FIELD', 'handshake incarnation is zero');
  const linkKey = Buffer.from(viewRaw(body, 0, tcp_handshake.link_key));
  return ok({
    nodeId,
    version,
    result: getField(body, 0, tcp_handshake.result) | 0,
    incarnation,
    peerIncarnation,
    linkKey,
  });
}

// ---------------------------------------------------------------------------
// REGISTER_NODE / REGISTER_RESP

export function encodeRegisterNode(r: Omit<RegisterNode, 'version'> & { readonly version?: number }): Buffer {
  const out = Buffer.alloc(tcp_register_node.SIZE);
  writeHostField(viewRaw(out, 0, tcp_register_node.hostname), r.host);
  setField(out, 0, tcp_register_node.port, r.port);
  setField(out, 0, tcp_register_node.requested_node_id, r.requestedId);
  setField(out, 0, tcp_register_node.version, r.version ?? MESH_PROTOCOL_VERSION);
  writeInstance(viewRaw(out, 0, tcp_register_node.instance), r.instance);
  return out;
}

export function decodeRegisterNode(body: Buffer): Decoded<RegisterNode> {
  const version = readVersion(body, tcp_register_node.version);
  if (version !== MESH_PROTOCOL_VERSION)
    return fail('BAD_VERSION', `registration version ${version}, want ${MESH_PROTOCOL_VERSION}`);
  if (body.length !== tcp_register_node.SIZE)
    return fail('BAD_LENGTH', `registration is ${body.length} bytes, want ${tcp_register_node.SIZE}`);
  const host = readHostField(viewRaw(body, 0, tcp_register_node.hostname));
  if (!host.ok) return host;
  const requestedId = getField(body, 0, tcp_register_node.requested_node_id);
  // Only ids the table can hold may be asked for: one REGISTER cannot move the manager's ids out of range.
  if (requestedId !== AUTO_NODE_ID && (requestedId < 1 || requestedId > MAX_NODE_ID)) {
    return fail('BAD_NODE_ID', `requested node id ${requestedId}, want 1..${MAX_NODE_ID}`);
  }
  const instance = viewRaw(body, 0, tcp_register_node.instance).toString('hex');
  if (!isInstanceId(instance)) return fail('BAD_FIELD', 'registration instance is zero');
  return ok({ host: host.value, port: getField(body, 0, tcp_register_node.port), requestedId, version, instance });
}

export function encodeRegisterResp(r: Omit<RegisterResp, 'version'> & { readonly version?: number }): Buffer {
  const out = Buffer.alloc(tcp_register_resp.SIZE);
  setField(out, 0, tcp_register_resp.assigned_node_id, r.nodeId);
  setField(out, 0, tcp_register_resp.num_nodes, r.numNodes);
  setField(out, 0, tcp_register_resp.result, r.result >>> 0); // i32 on the wire
  setField(out, 0, tcp_register_resp.version, r.version ?? MESH_PROTOCOL_VERSION);
  writeInstance(viewRaw(out, 0, tcp_register_resp.manager_instance), r.managerInstance);
  return out;
}

export function decodeRegisterResp(body: Buffer): Decoded<RegisterResp> {
  const version = readVersion(body, tcp_register_resp.version);
  if (version !== MESH_PROTOCOL_VERSION)
    return fail('BAD_VERSION', `registration reply version ${version}, want ${MESH_PROTOCOL_VERSION}`);
  if (body.length !== tcp_register_resp.SIZE)
    return fail('BAD_LENGTH', `registration reply is ${body.length} bytes, want ${tcp_register_resp.SIZE}`);
  const nodeId = getField(body, 0, tcp_register_resp.assigned_node_id);
  const result = getField(body, 0, tcp_register_resp.result) | 0;
  if (result === 0 && (nodeId < 1 || nodeId > MAX_NODE_ID)) return fail('BAD_NODE_ID', `assigned node id ${nodeId}`);
  const numNodes = getField(body, 0, tcp_register_resp.num_nodes);
  if (numNodes > MAX_NODES) return fail('TOO_MANY', `registration reply counts ${numNodes} nodes`);
  const managerInstance = viewRaw(body, 0, tcp_register_resp.manager_instance).toString('hex');
  if (!isInstanceId(managerInstance)) return fail('BAD_FIELD', 'manager instance is zero');
  return ok({ nodeId, numNodes, result, version, managerInstance });
}

// ---------------------------------------------------------------------------
// MESH_TOPOLOGY

export function encodeTopology(nodes: readonly NodeInfo[]): Buffer {
  if (nodes.length > MAX_NODES) throw new RangeError(`topology of ${nodes.length} nodes`);
  const out = Buffer.alloc(tcp_mesh_topology.SIZE + nodes.length * tcp_node_info.SIZE);
  setField(out, 0, tcp_mesh_topology.num_nodes, nodes.length);
  let at = tcp_mesh_topology.NODES;
  for (const n of nodes) {
    setField(out, at, tcp_node_info.node_id, n.id);
    writeHostField(viewRaw(out, at, tcp_node_info.hostname), n.host);
    setField(out, at, tcp_node_info.port, n.port);
    setField(out, at, tcp_node_info.is_alive, n.alive ? 1 : 0);
    writeInstance(viewRaw(out, at, tcp_node_info.incarnation), n.incarnation);
    writeLinkKey(viewRaw(out, at, tcp_node_info.link_key), n.linkKey);
    at += tcp_node_info.SIZE;
  }
  return out;
}

export function decodeTopology(body: Buffer): Decoded<NodeInfo[]> {
  if (body.length < tcp_mesh_topology.SIZE) return fail('BAD_LENGTH', `topology of ${body.length} bytes`);
  const count = getField(body, 0, tcp_mesh_topology.num_nodes);
  if (count > MAX_NODES) return fail('TOO_MANY', `topology counts ${count} nodes, at most ${MAX_NODES}`);
  const want = tcp_mesh_topology.SIZE + count * tcp_node_info.SIZE;
  if (body.length !== want)
    return fail('BAD_LENGTH', `topology of ${count} nodes is ${body.length} bytes, want ${want}`);
  const nodes: NodeInfo[] = [];
  const seen = new Set<number>();
  let at = tcp_mesh_topology.NODES;
  for (let i = 0; i < count; i++, at += tcp_node_info.SIZE) {
    const id = getField(body, at, tcp_node_info.node_id);
    if (id > MAX_NODE_ID) return fail('BAD_NODE_ID', `topology node id ${id}`);
    if (seen.has(id)) return fail('DUPLICATE', `topology lists node ${id} twice`);
    seen.add(id);
    const host = readHostField(viewRaw(body, at, tcp_node_info.hostname));
    if (!host.ok) return host;
    const alive = getField(body, at, tcp_node_info.is_alive);
    if (alive > 1) return fail('BAD_FIELD', `node ${id} is_alive ${alive}`);
    const incarnation = viewRaw(body, at, tcp_node_info.incarnation).toString('hex');
    if (!isInstanceId(incarnation)) return fail('BAD_FIELD', `node ${id} incarnation is zero`);
    const linkKey = Buffer.from(viewRaw(body, at, tcp_node_info.link_key));
    nodes.push({
      id,
      host: host.value,
      port: getField(body, at, tcp_node_info.port),
      alive: alive === 1,
      incarnation,
      linkKey,
    });
  }
  return ok(nodes);
}

// ---------------------------------------------------------------------------
// NODE_GIDS (one record per node, several per frame)

export function encodeNodeGids(records: readonly NodeGids[]): Buffer {
  if (records.length < 1 || records.length > MAX_NODES) throw new RangeError(`NODE_GIDS batch of ${records.length}`);
  const out = Buffer.alloc(records.length * tcp_node_gids.SIZE);
  let at = 0;
  for (const r of records) {
    if (r.gids.length > MAX_NODE_GIDS) throw new RangeError(`node ${r.nodeId} has ${r.gids.length} GIDs`);
    setField(out, at, tcp_node_gids.node_id, r.nodeId);
    setField(out, at, tcp_node_gids.num_gids, r.gids.length);
    const slots = viewRaw(out, at, tcp_node_gids.gids);
    r.gids.forEach((g, i) => {
      if (g.length !== tcp_node_gids.GID_SIZE) throw new RangeError('a GID is 16 bytes');
      g.copy(slots, i * tcp_node_gids.GID_SIZE);
    });
    at += tcp_node_gids.SIZE;
  }
  return out;
}

export function decodeNodeGids(body: Buffer): Decoded<NodeGids[]> {
  if (body.length === 0 || body.length % tcp_node_gids.SIZE !== 0) {
    return fail(
      'BAD_LENGTH',
      `NODE_GIDS of ${body.length} bytes is not a whole number of ${tcp_node_gids.SIZE}-byte records`,
    );
  }
  const count = body.length / tcp_node_gids.SIZE;
  if (count > MAX_NODES) return fail('TOO_MANY', `NODE_GIDS batch of ${count} records`);
  const out: NodeGids[] = [];
  const seen = new Set<number>();
  for (let i = 0, at = 0; i < count; i++, at += tcp_node_gids.SIZE) {
    const nodeId = getField(body, at, tcp_node_gids.node_id);
    if (nodeId > MAX_NODE_ID) return fail('BAD_NODE_ID', `NODE_GIDS node id ${nodeId}`);
    if (seen.has(nodeId)) return fail('DUPLICATE', `NODE_GIDS lists node ${nodeId} twice`);
    seen.add(nodeId);
    const n = getField(body, at, tcp_node_gids.num_gids);
    if (n > MAX_NODE_GIDS) return fail('TOO_MANY', `node ${nodeId} claims ${n} GIDs, at most ${MAX_NODE_GIDS}`);
    const gids: Buffer[] = [];
    const slots = viewRaw(body, at, tcp_node_gids.gids);
    for (let g = 0; g < n; g++) gids.push(slots.subarray(g * tcp_node_gids.GID_SIZE, (g + 1) * tcp_node_gids.GID_SIZE));
    out.push({ nodeId, gids });
  }
  return ok(out);
}

// ---------------------------------------------------------------------------
// ionic_wire_hdr (the data path's; here so its layout has one home)

type IonicWireHeaderInit = Omit<IonicWireHeader, 'remoteVa' | 'swapAdd' | 'compare'> & {
  readonly remoteVa?: bigint;
  readonly swapAdd?: bigint;
  readonly compare?: bigint;
  /** rsvd bits 0..7 (the data path's flags; default 0). */
  readonly flags?: number;
  /** rsvd bits 8..15 (default IONIC_WIRE_VERSION; 0 writes the C rocm-ernic's format). */
  readonly version?: number;
};

const scratch = newWireHeader();
const TWO_32 = 0x100000000n;

/** Write an ionic header at `at` (60 bytes), through the one writer of its layout (ionic-header.ts). */
function writeIonicWireHeader(out: Buffer, at: number, h: IonicWireHeaderInit): void {
  if (at < 0 || at + ionic_wire_hdr.SIZE > out.length) throw new RangeError('ionic header does not fit');
  const r = scratch;
  r.op = h.op;
  r.atomicCs = h.atomicCs === 1;
  r.flags = ((h.flags ?? 0) & 0xff) | (((h.version ?? IONIC_WIRE_VERSION) & 0xff) << IONIC_WIRE_VERSION_SHIFT);
  r.srcQp = h.srcQpId;
  r.dstQp = h.dstQpId;
  r.reqId = h.reqId;
  r.rkey = h.rkey;
  r.length = h.length;
  r.imm = h.immBe;
  r.status = h.status;
  const va = h.remoteVa ?? 0n;
  if (va < 0n || va >= 1n << 64n) throw new RangeError('remote_va out of range');
  const vaLo = Number(va % TWO_32);
  const vaHi = Number(va / TWO_32);
  r.remoteVa = 0;
  const sa = h.swapAdd ?? 0n;
  const cmp = h.compare ?? 0n;
  r.swapAddLo = Number(BigInt.asUintN(32, sa));
  r.swapAddHi = Number(BigInt.asUintN(32, sa >> 32n));
  r.compareLo = Number(BigInt.asUintN(32, cmp));
  r.compareHi = Number(BigInt.asUintN(32, cmp >> 32n));
  const view = out.subarray(at, at + ionic_wire_hdr.SIZE);
  writeWireHeader(view, r);
  // remote_va may exceed 2^53 here (the record holds a safe integer): write it whole.
  setFieldBig(view, 0, ionic_wire_hdr.remote_va, (BigInt(vaHi) << 32n) | BigInt(vaLo));
}

export function encodeIonicWireHeader(h: IonicWireHeaderInit): Buffer {
  const out = Buffer.allocUnsafe(ionic_wire_hdr.SIZE);
  writeIonicWireHeader(out, 0, h);
  return out;
}

/** Decode the ionic header at the start of `buf`: length, magic and op are checked; the rest is the data path's to judge. */
export function decodeIonicWireHeader(buf: Buffer): Decoded<IonicWireHeader> {
  if (buf.length < ionic_wire_hdr.SIZE)
    return fail('BAD_LENGTH', `ionic header of ${buf.length} bytes, want ${ionic_wire_hdr.SIZE}`);
  const magic = getField(buf, 0, ionic_wire_hdr.magic);
  if (magic !== IONIC_WIRE_MAGIC) return fail('BAD_MAGIC', `ionic magic 0x${magic.toString(16).padStart(8, '0')}`);
  const r = scratch;
  readWireHeader(buf, r);
  if (r.op < IonicWireOp.SEND || r.op > IonicWireOp.ACK) return fail('BAD_FIELD', `ionic op ${r.op}`);
  return ok({
    op: r.op,
    atomicCs: getField(buf, 0, ionic_wire_hdr.atomic_cs),
    srcQpId: r.srcQp,
    dstQpId: r.dstQp,
    reqId: r.reqId,
    rkey: r.rkey,
    length: r.length,
    immBe: r.imm,
    status: r.status,
    remoteVa: getFieldBig(buf, 0, ionic_wire_hdr.remote_va),
    swapAdd: (BigInt(r.swapAddHi) << 32n) | BigInt(r.swapAddLo),
    compare: (BigInt(r.compareHi) << 32n) | BigInt(r.compareLo),
  });
}

/** True when an ionic payload starts with the ionic magic (the mesh's one look inside, at delivery and relay). */
export function hasIonicMagic(body: Buffer): boolean {
  return body.length >= ionic_wire_hdr.SIZE && getField(body, 0, ionic_wire_hdr.magic) === IONIC_WIRE_MAGIC;
}

/**
 * Whether a data frame is a reply (it gets the reply room of a send queue and
 * is dropped, not waited for, when that is full). The manager needs this for
 * frames it relays, so it reads the ionic op; everything else is a request.
 */
export function isReplyFrame(type: number, body: Buffer): boolean {
  if (type === MsgType.RDMA_READ_RESP) return true;
  if (type !== MsgType.IONIC || body.length < ionic_wire_hdr.SIZE) return false;
  const op = getField(body, 0, ionic_wire_hdr.op);
  return op === IonicWireOp.READ_RESP || op === IonicWireOp.ATOMIC_RESP || op === IonicWireOp.ACK;
}
