// What `ernicctl start N` will run, worked out before anything is created:
// per instance its id, role, socket, TAP, MAC, the guest GID it advertises,
// backend and files, and the rocm-ernic argument list. Pure apart from
// reading /etc/machine-id for the default MACs, so tests can check it whole.

import { createHash } from 'node:crypto';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { isValidIfName } from './netdev';
import { formatHostPort, gidToText, isLoopbackAddress } from '../mesh/address';
import { linkLocalGid } from '../rdma/datapath/mesh/gid-learning';
import { NODES_PER_ADDRESS } from '../mesh/limits';

/** Defaults of the C rocm-ernic's service environment (/etc/rocm-ernic/rocm-ernic.env). */
export const OPS_DEFAULTS = {
  runDir: '/run/rocm-ernic',
  logDir: '/var/log/rocm-ernic',
  instances: 4,
  tcpPort: 6320,
  managerIp: '127.0.0.1',
  tapPrefix: 'ernic-tap',
  bridge: 'ernicbr0',
  profile: 'compat',
  socketMode: '660',
  logLevel: 'info',
} as const;

/** At most this many instances on one host (the mesh's node table is larger; this bounds a typo). */
export const MAX_INSTANCES = 64;

export interface HostPlanOptions {
  readonly count: number;
  readonly runDir: string;
  readonly logDir: string;
  /** Mesh port of the manager (instance 0); null: no mesh, every instance uses `backend`. */
  readonly tcpPort: number | null;
  readonly managerIp: string;
  /** Backend for every instance when there is no mesh (tcpPort null). */
  readonly backend: string;
  /** TAP name prefix (instance n gets PREFIXn); null: no TAPs. */
  readonly tapPrefix: string | null;
  /** Bridge joining the TAPs; null: TAPs stay alone. */
  readonly bridge: string | null;
  readonly profile: string;
  readonly socketMode: string | null;
  readonly socketGroup: string | null;
  readonly logLevel: string;
  /** MACs by instance id (ERNIC_MAC_<n>); the rest are derived from the machine id. */
  readonly macs?: ReadonlyMap<number, string>;
  /** Guest GIDs by instance id (ERNIC_GUEST_GIDS_<n>); the rest are the MAC's IPv6 link-local address. */
  readonly gids?: ReadonlyMap<number, string>;
  /** Seed for derived MACs (default /etc/machine-id, else the host name). */
  readonly machineId?: string;
  /** Pass --stats-file RUN_DIR/ID.stats (when the server has that option). */
  readonly statsFile?: boolean;
  /** The mesh's pre-shared key file, passed to every instance as --mesh-psk (start makes it: instances.ts). */
  readonly meshPsk?: string | null;
}

/** Where `ernicctl start` keeps the host's mesh key: RUN_DIR/mesh.psk, 32 random bytes, mode 0600, reused while it exists. */
export function meshKeyPath(runDir: string): string {
  return path.join(runDir, 'mesh.psk');
}

/**
 * The manager's backend: the default loopback listener when the workers dial
 * 127.0.0.1, else the address they dial (listen:PORT binds loopback alone).
 */
export function managerBackend(managerIp: string, port: number): string {
  return managerIp === '127.0.0.1' ? `tcp:manager:listen:${port}` : `tcp:manager:${formatHostPort(managerIp, port)}`;
}

export interface InstancePlan {
  readonly id: number;
  readonly role: 'manager' | 'worker' | 'single';
  readonly socket: string;
  readonly tap: string | null;
  readonly mac: string;
  readonly gid: string;
  readonly backend: string;
  readonly profile: string;
  readonly pidFile: string;
  readonly stats: string;
  readonly log: string;
  /** rocm-ernic's arguments (without the program). */
  readonly args: readonly string[];
  /** Environment added for this instance. */
  readonly env: Readonly<Record<string, string>>;
}

type PlanResult = { ok: true; instances: InstancePlan[] } | { ok: false; error: string };

function machineSeed(): string {
  for (const f of ['/etc/machine-id', '/var/lib/dbus/machine-id']) {
    try {
      const id = fs.readFileSync(f, 'utf8').trim();
      if (id) return id;
    } catch {
      /* next */
    }
  }
  return os.hostname();
}

/** A locally administered unicast MAC for instance `id`: 02, three bytes of the host's hash, the id in two. */
export function deriveMac(seed: string, id: number): string {
  const h = createHash('sha256').update(`rocm-ernic:${seed}`).digest();
  return macText(Buffer.from([0x02, h[0]!, h[1]!, h[2]!, (id >> 8) & 0xff, id & 0xff]));
}

function macText(b: Buffer): string {
  return [...b].map((x) => x.toString(16).padStart(2, '0')).join(':');
}

/** The IPv6 link-local address (modified EUI-64) of a MAC, as text: what a Linux guest's GID 0 is. */
export function linkLocalGidText(mac: string): string {
  return gidToText(linkLocalGid(Buffer.from(mac.split(/[:-]/).map((h) => parseInt(h, 16)))));
}

const MAC_TEXT = /^[0-9a-f]{2}(:[0-9a-f]{2}){5}$/i;

/** Check the options and produce one plan per instance. */
export function planInstances(o: HostPlanOptions): PlanResult {
  if (!Number.isInteger(o.count) || o.count < 1 || o.count > MAX_INSTANCES)
    return { ok: false, error: `instance count ${o.count}: expected 1 to ${MAX_INSTANCES}` };
  if (o.tcpPort !== null && (!Number.isInteger(o.tcpPort) || o.tcpPort < 1 || o.tcpPort > 65535))
    return { ok: false, error: `--tcp-port ${o.tcpPort}: expected 1 to 65535` };
  if (!path.isAbsolute(o.runDir)) return { ok: false, error: `--run-dir ${o.runDir}: must be an absolute path` };
  if (!path.isAbsolute(o.logDir)) return { ok: false, error: `--log-dir ${o.logDir}: must be an absolute path` };
  if (o.socketMode !== null && !/^[0-7]{3,4}$/.test(o.socketMode))
    return { ok: false, error: `--socket-mode ${o.socketMode}: expected an octal mode such as 660` };
  if (o.bridge !== null && o.tapPrefix === null)
    return { ok: false, error: '--bridge needs TAPs (drop --no-tap, or add --no-bridge)' };
  if (o.bridge !== null && !isValidIfName(o.bridge))
    return { ok: false, error: `--bridge ${o.bridge}: not a valid interface name (1-15 of A-Z a-z 0-9 _ . -)` };
  if (o.tcpPort !== null && !o.meshPsk && !isLoopbackAddress(o.managerIp)) {
    return {
      ok: false,
      error: `--manager-ip ${o.managerIp}: a mesh off loopback needs its key (--mesh-psk); ernicctl start passes one`,
    };
  }
  const seed = o.machineId ?? machineSeed();
  const out: InstancePlan[] = [];
  const seenMacs = new Set<string>();
  for (let id = 0; id < o.count; id++) {
    const tap = o.tapPrefix === null ? null : `${o.tapPrefix}${id}`;
    if (tap !== null && !isValidIfName(tap))
      return {
        ok: false,
        error: `--tap-prefix ${o.tapPrefix}: TAP name ${tap} is not a valid interface name (at most 15 characters)`,
      };
    const mac = (o.macs?.get(id) ?? deriveMac(seed, id)).toLowerCase();
    if (!MAC_TEXT.test(mac) || parseInt(mac.slice(0, 2), 16) & 1)
      return { ok: false, error: `MAC of instance ${id} (${mac}): expected a unicast address like 02:00:00:00:00:01` };
    if (seenMacs.has(mac)) return { ok: false, error: `MAC ${mac} is given to two instances` };
    seenMacs.add(mac);
    const gid = o.gids?.get(id) ?? linkLocalGidText(mac);
    const role = o.tcpPort === null ? 'single' : id === 0 ? 'manager' : 'worker';
    const backend =
      o.tcpPort === null
        ? o.backend
        : id === 0
          ? managerBackend(o.managerIp, o.tcpPort)
          : `tcp:worker:${formatHostPort(o.managerIp, o.tcpPort)}`;
    const socket = path.join(o.runDir, `${id}.sock`);
    const args = [
      '--socket',
      socket,
      '--backend',
      backend,
      '--mac',
      mac,
      '--nic-profile',
      o.profile,
      '--log-level',
      o.logLevel,
    ];
    if (tap !== null) args.push('--tap', tap);
    if (o.socketMode !== null) args.push('--socket-mode', o.socketMode);
    if (o.socketGroup !== null) args.push('--socket-group', o.socketGroup);
    const stats = path.join(o.runDir, `${id}.stats`);
    if (o.statsFile) args.push('--stats-file', stats);
    if (role !== 'single' && o.meshPsk) args.push('--mesh-psk', o.meshPsk);
    out.push({
      id,
      role,
      socket,
      tap,
      mac,
      gid,
      backend,
      profile: o.profile,
      pidFile: path.join(o.runDir, `${id}.pid`),
      stats,
      log: path.join(o.logDir, `${id}.log`),
      args,
      // Every worker of this host registers from the same address: past the
      // manager's default of NODES_PER_ADDRESS a source, let it take them all.
      env:
        role === 'single'
          ? {}
          : role === 'manager' && o.count - 1 > NODES_PER_ADDRESS
            ? { ERNIC_TCP_GUEST_GIDS: gid, ERNIC_TCP_NODES_PER_ADDRESS: String(o.count - 1) }
            : { ERNIC_TCP_GUEST_GIDS: gid },
    });
  }
  return { ok: true, instances: out };
}
