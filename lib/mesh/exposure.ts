// Where a mesh listens and what it advertises, from its options (docs/mesh.md, "Trust model"): without credentials
// it listens on and dials loopback only, in plaintext, and meshExposure says what in the options would leave loopback;
// with credentials (TLS 1.3, tls.ts) a worker's peer listener takes every address unless told one.

import { isLoopbackAddress, parseHost } from './address';
import type { AdmissionLimits } from './admission';
import type { MeshOptions } from './mesh-types';
import { CREDENTIALS_HINT, MeshCredentials } from './tls';

/** What Mesh.start() takes beyond MeshOptions: how links are secured and inbound connections bounded. */
interface MeshSecurityOptions {
  /** TLS 1.3 credentials (tls.ts loadMeshCredentials); absent or null: plaintext, loopback only. */
  readonly credentials?: MeshCredentials | null;
  /** Bounds on inbound connections (admission.ts; tests lower them). */
  readonly admission?: Partial<AdmissionLimits>;
}

export type MeshStartOptions = MeshOptions & MeshSecurityOptions;

const LOOPBACK_V4 = '127.0.0.1';
const LOOPBACK_V6 = '::1';

/** Where a mesh listens: the manager's address, or a worker's peer listener (undefined: every address). */
export function listenHost(opts: MeshStartOptions): string | undefined {
  const c = opts.config;
  if (c.role === 'manager') return c.listen.host ?? LOOPBACK_V4;
  if (opts.peerListen?.host !== undefined) return opts.peerListen.host;
  const adv = opts.advertiseHost ?? '';
  if (adv !== '' && parseHost(adv)?.kind !== 'name') return adv;
  if (opts.credentials) return undefined;
  return c.manager.kind === 'ipv6' ? LOOPBACK_V6 : LOOPBACK_V4;
}

/** The host a worker advertises: as given; without credentials or a listener address, the loopback it binds. */
export function advertisedHost(opts: MeshStartOptions): string {
  if (opts.advertiseHost !== undefined && opts.advertiseHost !== '') return opts.advertiseHost;
  if (opts.credentials || opts.peerListen?.host !== undefined) return '';
  return listenHost(opts) ?? '';
}

/**
 * Without credentials the mesh stays on loopback: null when these options
 * keep to it, else the one line saying what does not and how to give
 * credentials. Host names are left to each dial (dial.ts admit).
 */
export function meshExposure(opts: MeshStartOptions): string | null {
  if (opts.credentials) return null;
  const off = (what: string): string =>
    `no mesh credentials, so the mesh stays on loopback (127.0.0.0/8, ::1) and ${what} is not; ${CREDENTIALS_HINT}`;
  const host = listenHost(opts);
  if (host === undefined) return off('listening on every address');
  if (!isLoopbackAddress(host)) return off(`listening on ${host}`);
  const c = opts.config;
  if (c.role === 'worker' && c.manager.kind !== 'name' && !isLoopbackAddress(c.manager.host))
    return off(`the manager at ${c.manager.host}`);
  const adv = opts.advertiseHost ?? '';
  if (adv !== '' && parseHost(adv)?.kind !== 'name' && !isLoopbackAddress(adv)) return off(`advertising ${adv}`);
  return null;
}
