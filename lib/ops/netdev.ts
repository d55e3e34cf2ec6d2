// Host network devices for the instances: TAPs and the bridge that joins them,
// made and removed with iproute2 (`ip tuntap`, `ip link`), as an operator
// would by hand. Needs CAP_NET_ADMIN (root). Every call returns a result;
// nothing here throws for a failed command.

import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';

/** Linux interface names: at most 15 bytes (IFNAMSIZ - 1), no '/', ':' or white space. */
const IFNAME = /^[A-Za-z0-9_.-]{1,15}$/;

export function isValidIfName(name: string): boolean {
  return IFNAME.test(name) && name !== '.' && name !== '..';
}

type IpResult = { ok: true } | { ok: false; error: string };

/** Run `ip ARGS`; the error is ip's own message on one line. */
function ip(...args: string[]): IpResult {
  const r = spawnSync('ip', args, { encoding: 'utf8', timeout: 10_000 });
  if (r.error) return { ok: false, error: `ip ${args.join(' ')}: ${r.error.message}` };
  if (r.status !== 0)
    return {
      ok: false,
      error: `ip ${args.join(' ')}: ${(r.stderr || `exit ${r.status}`).trim().replace(/\s*\n\s*/g, '; ')}`,
    };
  return { ok: true };
}

export function linkExists(name: string): boolean {
  return fs.existsSync(`/sys/class/net/${name}`);
}

function isBridge(name: string): boolean {
  return fs.existsSync(`/sys/class/net/${name}/bridge`);
}

/** The bridge a link is enslaved to, or null. */
function masterOf(name: string): string | null {
  try {
    return fs.readlinkSync(`/sys/class/net/${name}/master`).split('/').pop() ?? null;
  } catch {
    return null;
  }
}

/** Links enslaved to a bridge. */
export function bridgePorts(bridge: string): string[] {
  try {
    return fs.readdirSync(`/sys/class/net/${bridge}/brif`);
  } catch {
    return [];
  }
}

type EnsureResult = { ok: true; created: boolean } | { ok: false; error: string };

/** The bridge, created and up if it is missing. An existing non-bridge link of that name is an error. */
export function ensureBridge(name: string): EnsureResult {
  if (!isValidIfName(name))
    return {
      ok: false,
      error: `bridge name ${JSON.stringify(name)}: not a valid interface name (1-15 of A-Z a-z 0-9 _ . -)`,
    };
  let created = false;
  if (linkExists(name)) {
    if (!isBridge(name)) return { ok: false, error: `${name} exists and is not a bridge` };
  } else {
    const r = ip('link', 'add', name, 'type', 'bridge');
    if (!r.ok) return r;
    created = true;
  }
  const up = ip('link', 'set', name, 'up');
  return up.ok ? { ok: true, created } : up;
}

interface TapOptions {
  /** Owner user of the TAP (ip tuntap ... user U), so a server not running as root can attach. */
  readonly user?: string;
  /** Bridge to join (null: none). */
  readonly bridge?: string | null;
}

/** A persistent TAP, created if missing, joined to the bridge and up. */
export function ensureTap(name: string, opts: TapOptions = {}): EnsureResult {
  if (!isValidIfName(name))
    return {
      ok: false,
      error: `TAP name ${JSON.stringify(name)}: not a valid interface name (1-15 of A-Z a-z 0-9 _ . -)`,
    };
  let created = false;
  if (!linkExists(name)) {
    const r = ip('tuntap', 'add', 'dev', name, 'mode', 'tap', ...(opts.user ? ['user', opts.user] : []));
    if (!r.ok) return r;
    created = true;
  }
  if (opts.bridge && masterOf(name) !== opts.bridge) {
    const r = ip('link', 'set', name, 'master', opts.bridge);
    if (!r.ok) {
      if (created) removeLink(name);
      return r;
    }
  }
  const up = ip('link', 'set', name, 'up');
  if (!up.ok && created) removeLink(name);
  return up.ok ? { ok: true, created } : up;
}

/** Delete a link (TAP or bridge); a link already gone is success. */
export function removeLink(name: string): IpResult {
  if (!linkExists(name)) return { ok: true };
  const r = ip('link', 'del', name);
  return r.ok || !linkExists(name) ? { ok: true } : r;
}

/** A link's kernel counters (/sys/class/net/NAME/statistics), or null when it is gone. */
export function linkCounters(name: string): Record<string, number> | null {
  const dir = `/sys/class/net/${name}/statistics`;
  let names: string[];
  try {
    names = fs.readdirSync(dir);
  } catch {
    return null;
  }
  const out: Record<string, number> = {};
  for (const n of names.sort()) {
    try {
      out[n] = Number(fs.readFileSync(`${dir}/${n}`, 'utf8').trim());
    } catch {
      /* raced with removal */
    }
  }
  return out;
}
