// lib/mesh: the TCP mesh between rocm-ernic servers (docs/mesh.md).
//
// For the CLI: meshOptionsFromCli() turns `--backend tcp:...` and the
// environment into MeshOptions or one line to print before exiting with
// status 2; Mesh.start() then listens and (worker) registers.
// For the data path: Mesh.send(), the 'message' / 'peer-up' / 'peer-down' /
// 'topology' / 'writable' / 'pressure' events, lookupGid(), addLocalGid(),
// takeBack(), setConsumerPresent(); the ionic header codec below.

import type { Logger } from '../log';
import { ConfigResult, parseMeshBackend, parseMeshEnv } from './config';
import type { MeshOptions } from './mesh-types';

export { Mesh } from './mesh';
export { MeshMessage } from './mesh-message';
export type { MeshEvents, MeshOptions, MeshStats, Placer, Route, SendOptions, SendResult } from './mesh-types';
export type { Placement } from './frame-parser';
export { formatMeshBackend, parseMeshBackend, parseMeshEnv } from './config';
export type { ConfigResult, MeshBackendConfig, MeshEnv } from './config';
export { gidFromText, gidToText } from './address';
export { PendingRequests } from './pending';
export { BufferPool, meshBufferPool } from './buffer-pool';
export {
  decodeIonicWireHeader, encodeIonicWireHeader, writeIonicWireHeader, isReplyFrame,
} from './codec';
export type { IonicWireHeaderInit } from './codec';
export { ionic_wire_hdr, IONIC_WIRE_MAGIC, tcp_msg_header } from './layouts';
export { IonicWireOp, MsgType } from './messages';
export type { IonicWireHeader, NodeInfo } from './messages';
export {
  CONNECTION_QUEUE_BYTES, INBOUND_QUEUE_BYTES, INBOUND_QUEUE_MESSAGES, LOST_PEER_MS, MAX_FRAME_PAYLOAD,
  REQUEST_QUEUE_BYTES, RNR_TIMEOUT_MS, INBOUND_STALL_MS, NO_CONSUMER_DROP_MS,
} from './limits';
export type { MeshError, MeshErrorCode } from './errors';

/** True when a --backend string names the TCP mesh (the CLI routes it here). */
export function isMeshBackend(backend: string): boolean {
  return backend.startsWith('tcp:');
}

/**
 * `--backend tcp:...` plus the ERNIC_TCP_* environment -> MeshOptions, or the
 * one line the CLI prints before exiting with status 2.
 */
export function meshOptionsFromCli(backend: string, env: Readonly<Record<string, string | undefined>>, log?: Logger): ConfigResult<MeshOptions> {
  const b = parseMeshBackend(backend);
  if (!b.ok) return b;
  const e = parseMeshEnv(env);
  if (!e.ok) return e;
  if (e.value.sockbuf !== undefined) {
    log?.warn('mesh: ERNIC_TCP_SOCKBUF is accepted but has no effect here (Node sets no SO_SNDBUF/SO_RCVBUF on TCP sockets)');
  }
  const options: MeshOptions = {
    config: b.value,
    guestGids: e.value.guestGids,
    sendTimeoutMs: e.value.sendTimeoutMs,
    heartbeatMs: e.value.heartbeatMs,
    listenBacklog: e.value.listenBacklog,
    debug: e.value.debugMesh,
    ...(log ? { log } : {}),
  };
  return { ok: true, value: options };
}
