// Operator input for the mesh: the `--backend tcp:...` string and the
// ERNIC_TCP_* environment (docs/mesh.md, "Configuration"). Pure
// functions returning a typed config or one line naming the problem; the CLI
// prints that line and exits with status 2 before QEMU can connect.

import { z } from 'zod';
import { formatHostPort, gidFromText, HostPort, parseHostPort, parsePort } from './address';
import {
  DEFAULT_HEARTBEAT_MS,
  DEFAULT_LISTEN_BACKLOG,
  DEFAULT_SEND_TIMEOUT_MS,
  MAX_NODE_GIDS,
  MAX_NODES,
  NODES_PER_ADDRESS,
} from './limits';

// ---------------------------------------------------------------------------
// --backend

export type MeshBackendConfig =
  | {
      readonly role: 'manager';
      /** host undefined (`listen:PORT`): 127.0.0.1. Every address takes `0.0.0.0` or `[::]`, and credentials (docs/mesh.md). */
      readonly listen: { readonly host?: string; readonly port: number };
    }
  | {
      readonly role: 'worker';
      readonly manager: HostPort;
    };

export type ConfigResult<T> = { readonly ok: true; readonly value: T } | { readonly ok: false; readonly error: string };

const USAGE = 'tcp:manager:listen:PORT, tcp:manager:IP:PORT or tcp:worker:HOST:PORT';

/**
 * Parse `tcp:manager:listen:PORT`, `tcp:manager:IP:PORT` or
 * `tcp:worker:HOST:PORT`. An IPv6 address goes in brackets and may carry a
 * zone (`tcp:worker:[fe80::1%eth0]:7000`); a worker's HOST may be a name,
 * resolved when connecting and tried at each address.
 */
export function parseMeshBackend(text: string): ConfigResult<MeshBackendConfig> {
  const bad = (why: string): ConfigResult<MeshBackendConfig> => ({
    ok: false,
    error: `--backend ${text}: ${why} (want ${USAGE})`,
  });
  const m = /^tcp:(manager|worker):(.*)$/.exec(text);
  if (!m) return bad(text.startsWith('tcp:') ? 'role must be manager or worker' : 'not a tcp backend');
  const role = m[1]!;
  const rest = m[2]!;
  if (role === 'manager' && rest.startsWith('listen:')) {
    const portText = rest.slice('listen:'.length);
    const port = parsePort(portText);
    if (port === undefined) return bad(`bad port '${portText}' (1-65535)`);
    return { ok: true, value: { role: 'manager', listen: { port } } };
  }
  const hp = parseHostPort(rest);
  if (typeof hp === 'string') return bad(hp);
  if (role === 'manager') {
    if (hp.kind === 'name') return bad(`the manager listens on an IP address, not a name ('${hp.host}')`);
    return { ok: true, value: { role: 'manager', listen: { host: hp.host, port: hp.port } } };
  }
  return { ok: true, value: { role: 'worker', manager: hp } };
}

/** The backend string a config came from (for logs and round-trip tests). */
export function formatMeshBackend(c: MeshBackendConfig): string {
  if (c.role === 'worker') return `tcp:worker:${formatHostPort(c.manager.host, c.manager.port)}`;
  if (c.listen.host === undefined) return `tcp:manager:listen:${c.listen.port}`;
  return `tcp:manager:${formatHostPort(c.listen.host, c.listen.port)}`;
}

// ---------------------------------------------------------------------------
// Environment

interface MeshEnv {
  /** ERNIC_TCP_SEND_TIMEOUT_MS: no write progress for this long shuts a connection down (the manager uses half). */
  readonly sendTimeoutMs: number;
  /** ERNIC_TCP_GUEST_GIDS: this node's guest GIDs, 16 bytes each (IPv4 as ::ffff:a.b.c.d), at most 8, no duplicates. */
  readonly guestGids: readonly Buffer[];
  /** ERNIC_TCP_SOCKBUF: accepted and checked; Node sets no SO_SNDBUF/SO_RCVBUF on TCP sockets, so it has no effect (docs/mesh.md). */
  readonly sockbuf?: number;
  /** ERNIC_TCP_LISTEN_BACKLOG. */
  readonly listenBacklog: number;
  /** ERNIC_DEBUG_MESH=1: mesh diagnostics at warn level (rate limited). */
  readonly debugMesh: boolean;
  /** ERNIC_TCP_HEARTBEAT_MS (ours): the health-check interval. */
  readonly heartbeatMs: number;
  /** ERNIC_TCP_NODES_PER_ADDRESS (ours): live registrations the manager takes from one source address. */
  readonly nodesPerAddress: number;
}

const unsetIfEmpty = (v: unknown): unknown => (typeof v === 'string' && v.trim() === '' ? undefined : v);

function integerText(min: number, max: number) {
  return z
    .string()
    .trim()
    .regex(/^[0-9]+$/, `must be a decimal integer from ${min} to ${max}`)
    .transform(Number)
    .pipe(z.number().int().min(min, `must be at least ${min}`).max(max, `must be at most ${max}`));
}

/** An integer variable with a default when unset or empty. */
function integerVar(min: number, max: number, fallback: number) {
  return z.preprocess(unsetIfEmpty, integerText(min, max).optional()).transform((v) => v ?? fallback);
}

/** An integer variable with no default. */
function optionalIntegerVar(min: number, max: number) {
  return z.preprocess(unsetIfEmpty, integerText(min, max).optional());
}

const gidList = z.preprocess(unsetIfEmpty, z.string().optional()).transform((text, ctx) => {
  const out: Buffer[] = [];
  if (text === undefined) return out;
  const seen = new Set<string>();
  for (const raw of text.split(',')) {
    const item = raw.trim();
    if (item === '') continue;
    const gid = gidFromText(item);
    if (!gid) {
      ctx.addIssue({ code: z.ZodIssueCode.custom, message: `'${item}' is not an IPv6 or IPv4 address` });
      return z.NEVER;
    }
    const key = gid.toString('hex');
    if (seen.has(key)) continue;
    seen.add(key);
    out.push(gid);
  }
  if (out.length > MAX_NODE_GIDS) {
    ctx.addIssue({ code: z.ZodIssueCode.custom, message: `${out.length} GIDs, at most ${MAX_NODE_GIDS}` });
    return z.NEVER;
  }
  return out;
});

const envSchema = z.object({
  ERNIC_TCP_SEND_TIMEOUT_MS: integerVar(100, 3_600_000, DEFAULT_SEND_TIMEOUT_MS),
  ERNIC_TCP_GUEST_GIDS: gidList,
  ERNIC_TCP_SOCKBUF: optionalIntegerVar(4096, 1 << 30),
  ERNIC_TCP_LISTEN_BACKLOG: integerVar(1, 65535, DEFAULT_LISTEN_BACKLOG),
  ERNIC_DEBUG_MESH: z.preprocess(
    unsetIfEmpty,
    z.enum(['0', '1'], { errorMap: () => ({ message: 'must be 0 or 1' }) }).optional(),
  ),
  ERNIC_TCP_HEARTBEAT_MS: integerVar(100, 600_000, DEFAULT_HEARTBEAT_MS),
  ERNIC_TCP_NODES_PER_ADDRESS: integerVar(1, MAX_NODES, NODES_PER_ADDRESS),
});

/** Read the mesh's environment variables; a bad value is one line naming the variable. */
export function parseMeshEnv(env: Readonly<Record<string, string | undefined>>): ConfigResult<MeshEnv> {
  const picked: Record<string, string | undefined> = {};
  for (const key of Object.keys(envSchema.shape)) picked[key] = env[key];
  const r = envSchema.safeParse(picked);
  if (!r.success) {
    const issue = r.error.issues[0]!;
    const name = String(issue.path[0] ?? 'environment');
    const value = picked[name];
    return { ok: false, error: `${name}: ${issue.message}${value === undefined ? '' : ` (got '${value}')`}` };
  }
  const v = r.data;
  const out: MeshEnv = {
    sendTimeoutMs: v.ERNIC_TCP_SEND_TIMEOUT_MS,
    guestGids: v.ERNIC_TCP_GUEST_GIDS,
    listenBacklog: v.ERNIC_TCP_LISTEN_BACKLOG,
    debugMesh: v.ERNIC_DEBUG_MESH === '1',
    heartbeatMs: v.ERNIC_TCP_HEARTBEAT_MS,
    nodesPerAddress: v.ERNIC_TCP_NODES_PER_ADDRESS,
    ...(v.ERNIC_TCP_SOCKBUF === undefined ? {} : { sockbuf: v.ERNIC_TCP_SOCKBUF }),
  };
  return { ok: true, value: out };
}
