// lib/mesh: the TCP mesh between rocm-ernic servers (docs/mesh.md).
//
// For the CLI: meshOptionsFromCli() turns `--backend tcp:...` and the
// environment into MeshOptions or one line to print before exiting with
// status 2; meshSecurityFromCli() adds the credentials (--mesh-psk or
// --mesh-cert/--mesh-key/--mesh-ca, docs/mesh.md "Trust model") and refuses
// anything but loopback without them; Mesh.start() then listens and (worker)
// registers.
// For the data path: Mesh.send(), the 'message' / 'peer-up' / 'peer-down' /
// 'topology' / 'writable' / 'pressure' events, lookupGid(), addLocalGid(),
// takeBack(), setConsumerPresent(); the ionic header codec below.

import type { Logger } from '../log';
import { parseHost } from './address';
import { ConfigResult, parseMeshBackend, parseMeshEnv } from './config';
import { meshExposure, MeshStartOptions } from './exposure';
import type { MeshOptions } from './mesh-types';
import { CredentialFiles, loadMeshCredentials } from './tls';

export { Mesh } from './mesh';
export { MeshMessage } from './mesh-message';
export type { SendResult } from './mesh-types';
export type { Placement } from './frame-parser';
export { PendingRequests } from './pending';
export { meshBufferPool } from './buffer-pool';
export { IonicWireOp, MsgType } from './messages';
export { REQUEST_QUEUE_BYTES, RNR_TIMEOUT_MS } from './limits';

/** True when a --backend string names the TCP mesh (the CLI routes it here). */
export function isMeshBackend(backend: string): boolean {
  return backend.startsWith('tcp:');
}

/**
 * `--backend tcp:...` plus the ERNIC_TCP_* environment -> MeshOptions, or the
 * one line the CLI prints before exiting with status 2.
 */
export function meshOptionsFromCli(
  backend: string,
  env: Readonly<Record<string, string | undefined>>,
  log?: Logger,
): ConfigResult<MeshOptions> {
  const b = parseMeshBackend(backend);
  if (!b.ok) return b;
  const e = parseMeshEnv(env);
  if (!e.ok) return e;
  if (e.value.sockbuf !== undefined) {
    log?.warn(
      'mesh: ERNIC_TCP_SOCKBUF is accepted but has no effect here (Node sets no SO_SNDBUF/SO_RCVBUF on TCP sockets)',
    );
  }
  const options: MeshOptions = {
    config: b.value,
    guestGids: e.value.guestGids,
    sendTimeoutMs: e.value.sendTimeoutMs,
    heartbeatMs: e.value.heartbeatMs,
    limits: { nodesPerAddress: e.value.nodesPerAddress },
    listenBacklog: e.value.listenBacklog,
    debug: e.value.debugMesh,
    ...(log ? { log } : {}),
  };
  return { ok: true, value: options };
}

/** The operator's --mesh-* options. */
export interface MeshCliSecurity extends CredentialFiles {
  /** --mesh-advertise: the host other workers dial this one at (a worker's peer listener binds it). */
  readonly advertise?: string | undefined;
}

/**
 * MeshOptions plus the credentials (from the options, ERNIC_MESH_PSK_FILE or
 * $CREDENTIALS_DIRECTORY/mesh-psk) and the advertised host, or the one line
 * the CLI prints before exiting with status 2: a credential that cannot be
 * used, or, without credentials, an address that is not loopback (a host
 * name is checked at each dial: only loopback addresses are dialled).
 */
export function meshSecurityFromCli(
  options: MeshOptions,
  cli: MeshCliSecurity,
  env: Readonly<Record<string, string | undefined>>,
): ConfigResult<MeshStartOptions> {
  const creds = loadMeshCredentials(cli, env);
  if (!creds.ok) return creds;
  let out: MeshStartOptions = { ...options, credentials: creds.value };
  if (cli.advertise !== undefined) {
    if (options.config.role !== 'worker')
      return {
        ok: false,
        error: `--mesh-advertise ${cli.advertise}: only a worker advertises a host (the manager's address is in the workers' --backend)`,
      };
    if (!parseHost(cli.advertise))
      return {
        ok: false,
        error: `--mesh-advertise ${cli.advertise}: not an IP address or host name (IPv6 without brackets)`,
      };
    out = { ...out, advertiseHost: cli.advertise };
  }
  const exposed = meshExposure(out);
  if (exposed !== null) return { ok: false, error: exposed };
  return { ok: true, value: out };
}
