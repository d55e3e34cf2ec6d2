// N rocm-ernic instances on one host without systemd (what `ernicctl` does):
// one mesh manager (instance 0) and workers, each with its socket in the run
// directory, a TAP joined to a host bridge, a log file and a pid file, all
// recorded in instances.json. `stop` undoes exactly what `start` recorded.
// docs/instances.md describes the layout.

import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import {
  Manifest,
  InstanceRecord,
  readManifest,
  removeManifest,
  writeManifest,
  MANIFEST_FORMAT,
  manifestPath,
} from './manifest';
import { bridgePorts, ensureBridge, ensureTap, linkCounters, linkExists, removeLink } from './netdev';
import { HostPlanOptions, InstancePlan, meshKeyPath, planInstances } from './plan';
import { readInstanceState, waitFor } from './instance-state';
import { isOurServer, processUsage, signal, Spawned, spawnDetached, tailLines, waitUntil } from './processes';

type OpResult<T> = { ok: true; value: T } | { ok: false; error: string };

interface StartOptions extends HostPlanOptions {
  /** How to run rocm-ernic: program and leading arguments. */
  readonly server: readonly string[];
  /** Owner of the TAPs ernicctl creates (ip tuntap ... user U), for servers not running as root. */
  readonly tapUser?: string | null;
  /** How long each server has to start listening. */
  readonly startTimeoutMs: number;
  /** How long each worker has to register with the manager (0: do not wait). */
  readonly meshTimeoutMs: number;
  /** Progress lines (one per step). */
  readonly progress?: (line: string) => void;
}

function isSocket(file: string): boolean {
  try {
    return fs.statSync(file).isSocket();
  } catch {
    return false;
  }
}

function liveInstances(m: Manifest): InstanceRecord[] {
  return m.instances.filter((i) => isOurServer(i.pid, i.socket));
}

/** Bytes of a key ernicctl makes. */
const MESH_KEY_BYTES = 32;

/**
 * The host's mesh key, made if missing: 32 random bytes, mode 0600, written
 * to a temporary file and linked into place (so no instance ever reads half a
 * key, and two starts racing keep one key). An existing key is reused when it
 * is a regular file of ours that nobody else may read, of a key's size.
 */
export function ensureMeshKey(file: string): OpResult<{ file: string; created: boolean }> {
  const tmp = `${file}.${process.pid}.${randomBytes(4).toString('hex')}.tmp`;
  try {
    const fd = fs.openSync(
      tmp,
      fs.constants.O_WRONLY | fs.constants.O_CREAT | fs.constants.O_EXCL | fs.constants.O_NOFOLLOW,
      0o600,
    );
    try {
      fs.writeSync(fd, randomBytes(MESH_KEY_BYTES));
      fs.fsyncSync(fd);
    } finally {
      fs.closeSync(fd);
    }
    try {
      fs.linkSync(tmp, file);
      return { ok: true, value: { file, created: true } };
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== 'EEXIST') throw e;
    } finally {
      fs.rmSync(tmp, { force: true });
    }
  } catch (e) {
    return {
      ok: false,
      error: `cannot make the mesh key ${file}: ${(e as NodeJS.ErrnoException).code ?? (e as Error).message}`,
    };
  }
  let st: fs.Stats;
  try {
    st = fs.lstatSync(file);
  } catch (e) {
    return { ok: false, error: `mesh key ${file}: ${(e as NodeJS.ErrnoException).code ?? (e as Error).message}` };
  }
  const uid = process.getuid?.();
  if (!st.isFile())
    return { ok: false, error: `mesh key ${file}: not a regular file (remove it; ernicctl makes a new one)` };
  if (uid !== undefined && st.uid !== uid)
    return {
      ok: false,
      error: `mesh key ${file}: owned by uid ${st.uid}, not us (remove it; ernicctl makes a new one)`,
    };
  if ((st.mode & 0o077) !== 0)
    return {
      ok: false,
      error: `mesh key ${file}: open to group or others (mode ${(st.mode & 0o777).toString(8)}); chmod 600 it, or remove it for a new one`,
    };
  if (st.size < MESH_KEY_BYTES || st.size > 256)
    return { ok: false, error: `mesh key ${file}: ${st.size} bytes, not a key (remove it; ernicctl makes a new one)` };
  return { ok: true, value: { file, created: false } };
}

/** Start the instances, record them in instances.json. On any failure, what was started is stopped again. */
export async function startInstances(o: StartOptions): Promise<OpResult<Manifest>> {
  const say = o.progress ?? ((): void => {});
  // Every instance of a mesh gets the host's key: links are TLS, and nothing without the key joins.
  const meshPsk = o.tcpPort === null ? null : meshKeyPath(o.runDir);
  const plan = planInstances({ ...o, meshPsk });
  if (!plan.ok) return plan;
  const prior = readManifest(o.runDir);
  if (!prior.ok) return { ok: false, error: `${prior.error} (remove it, or run ernicctl stop)` };
  if (prior.manifest) {
    const live = liveInstances(prior.manifest);
    if (live.length > 0)
      return {
        ok: false,
        error: `${manifestPath(o.runDir)} lists ${live.length} running instance(s) (ids ${live.map((i) => i.id).join(', ')}): run ernicctl stop first`,
      };
    say(`cleaning up after a previous run whose instances are gone (${manifestPath(o.runDir)})`);
    const s = await stopInstances(o.runDir, { timeoutMs: 1000 });
    if (!s.ok) return s;
  }
  try {
    fs.mkdirSync(o.runDir, { recursive: true, mode: 0o755 });
    fs.mkdirSync(o.logDir, { recursive: true, mode: 0o750 });
  } catch (e) {
    return { ok: false, error: `cannot create ${o.runDir} or ${o.logDir}: ${(e as Error).message}` };
  }
  if (meshPsk !== null) {
    const k = ensureMeshKey(meshPsk);
    if (!k.ok) return k;
    say(`mesh key ${k.value.file} ${k.value.created ? 'created' : 'reused'}`);
  }
  for (const p of plan.instances) {
    if (fs.existsSync(p.socket)) {
      if (!isSocket(p.socket)) return { ok: false, error: `${p.socket} exists and is not a socket` };
      fs.rmSync(p.socket, { force: true }); // a stale socket of a server that is gone (checked above)
    }
  }

  const manifest: Manifest = {
    format: MANIFEST_FORMAT,
    created: new Date().toISOString(),
    host: os.hostname(),
    run_dir: o.runDir,
    log_dir: o.logDir,
    tcp_port: o.tcpPort,
    manager_ip: o.tcpPort === null ? null : o.managerIp,
    bridge: null,
    socket_mode: o.socketMode,
    socket_group: o.socketGroup,
    instances: [],
  };
  const undo = async (error: string): Promise<OpResult<Manifest>> => {
    writeManifest(o.runDir, manifest);
    await stopInstances(o.runDir, { timeoutMs: 3000 });
    return { ok: false, error };
  };

  if (o.bridge !== null) {
    const b = ensureBridge(o.bridge);
    if (!b.ok) return { ok: false, error: b.error };
    manifest.bridge = { name: o.bridge, created: b.created };
    writeManifest(o.runDir, manifest);
    say(`bridge ${o.bridge} ${b.created ? 'created' : 'already there'}`);
  }

  for (const p of plan.instances) {
    const r = await startOne(o, p, manifest, say);
    if (!r.ok) return undo(r.error);
  }
  writeManifest(o.runDir, manifest);
  return { ok: true, value: manifest };
}

/**
 * Until the server listens: its stats file says `state : listening`. A
 * server that reports no state (no stats file, or an older one without the
 * line) is taken to listen once its socket file exists.
 */
async function waitListening(o: StartOptions, p: InstancePlan, child: Spawned): Promise<boolean> {
  const r = await waitFor(
    (): boolean | null => {
      if (child.exited() !== null) return false;
      const st = o.statsFile ? readInstanceState(p.stats) : null;
      if (st?.phase === 'listening') return true;
      if (st?.phase) return null; // starting: not yet (stopped: its exit ends the wait)
      return isSocket(p.socket) ? true : null;
    },
    { dirs: [path.dirname(p.socket), path.dirname(p.stats)], timeoutMs: o.startTimeoutMs, also: child.onExit },
  );
  return r === true;
}

async function startOne(
  o: StartOptions,
  p: InstancePlan,
  manifest: Manifest,
  say: (l: string) => void,
): Promise<OpResult<InstanceRecord>> {
  let tapCreated = false;
  if (p.tap !== null) {
    const t = ensureTap(p.tap, { bridge: o.bridge, ...(o.tapUser ? { user: o.tapUser } : {}) });
    if (!t.ok) return { ok: false, error: `instance ${p.id}: ${t.error}` };
    tapCreated = t.created;
  }
  const child = spawnDetached({ command: o.server, args: p.args, env: p.env, log: p.log, pidFile: p.pidFile });
  if (!child.pid) {
    if (tapCreated && p.tap !== null) removeLink(p.tap);
    return {
      ok: false,
      error: `instance ${p.id}: cannot run ${o.server.join(' ')}: ${child.exited() ?? 'no process'}`,
    };
  }
  const record: InstanceRecord = {
    id: p.id,
    role: p.role,
    pid: child.pid,
    mac: p.mac,
    gid: p.gid,
    socket: p.socket,
    tap: p.tap,
    tap_created: tapCreated,
    backend: p.backend,
    profile: p.profile,
    pid_file: p.pidFile,
    stats: p.stats,
    log: p.log,
    mesh_node: p.role === 'manager' ? 0 : null,
    started: new Date().toISOString(),
    vm: null,
  };
  manifest.instances.push(record);
  writeManifest(o.runDir, manifest);
  const why = (): string => {
    const tail = tailLines(p.log, 5)
      .split('\n')
      .filter((l) => l.trim())
      .map((l) => `  | ${l}`)
      .join('\n');
    return tail ? `\n${tail}` : '';
  };
  const listening = await waitListening(o, p, child);
  if (child.exited() !== null) return { ok: false, error: `instance ${p.id}: rocm-ernic ${child.exited()}${why()}` };
  if (!listening)
    return { ok: false, error: `instance ${p.id}: not listening on ${p.socket} after ${o.startTimeoutMs} ms${why()}` };
  if (p.role === 'worker' && o.meshTimeoutMs > 0) {
    if (!o.statsFile) {
      say(`instance ${p.id}: mesh registration not checked (the server writes no stats file)`);
    } else {
      const node = await waitFor(
        () => (child.exited() !== null ? -1 : (readInstanceState(p.stats)?.meshNode ?? null)),
        { dirs: [path.dirname(p.stats)], timeoutMs: o.meshTimeoutMs, also: child.onExit },
      );
      if (child.exited() !== null)
        return { ok: false, error: `instance ${p.id}: rocm-ernic ${child.exited()}${why()}` };
      if (node === null)
        return {
          ok: false,
          error: `instance ${p.id}: not registered with the mesh manager after ${o.meshTimeoutMs} ms (no mesh_node in ${p.stats})${why()}`,
        };
      record.mesh_node = node;
    }
  }
  writeManifest(o.runDir, manifest);
  say(
    `instance ${p.id} (${p.role}) pid ${child.pid} socket ${p.socket}${p.tap ? ` tap ${p.tap}` : ''} mac ${p.mac}${record.mesh_node !== null ? ` mesh node ${record.mesh_node}` : ''}`,
  );
  return { ok: true, value: record };
}

interface StopOptions {
  /** How long the servers have to exit after SIGTERM before SIGKILL. */
  readonly timeoutMs: number;
  readonly progress?: (line: string) => void;
}

interface StopReport {
  readonly instances: { id: number; pid: number; ended: 'stopped' | 'killed' | 'not running' | 'would not die' }[];
  readonly tapsRemoved: string[];
  readonly bridgeRemoved: string | null;
  /** Problems that did not stop the rest of the clean-up. */
  readonly problems: string[];
}

/** Stop what instances.json lists (SIGTERM, wait, SIGKILL), then remove its TAPs, bridge, sockets, pid files and the manifest. */
export async function stopInstances(runDir: string, o: StopOptions): Promise<OpResult<StopReport | null>> {
  const say = o.progress ?? ((): void => {});
  const read = readManifest(runDir);
  if (!read.ok) return read;
  const m = read.manifest;
  if (!m) return { ok: true, value: null };
  const report: StopReport = { instances: [], tapsRemoved: [], bridgeRemoved: null, problems: [] };
  // Workers first, the manager last: the workers' goodbyes reach a manager that is still there.
  const order = [...m.instances].sort((a, b) => b.id - a.id);
  const live = order.filter((i) => isOurServer(i.pid, i.socket));
  for (const i of live) signal(i.pid, 'SIGTERM');
  await waitUntil(() => live.every((i) => !isOurServer(i.pid, i.socket)), o.timeoutMs);
  const stubborn = live.filter((i) => isOurServer(i.pid, i.socket));
  for (const i of stubborn) signal(i.pid, 'SIGKILL');
  if (stubborn.length) await waitUntil(() => stubborn.every((i) => !isOurServer(i.pid, i.socket)), 3000);
  for (const i of order) {
    const wasLive = live.includes(i);
    const ended = !wasLive
      ? 'not running'
      : !stubborn.includes(i)
        ? 'stopped'
        : isOurServer(i.pid, i.socket)
          ? 'would not die'
          : 'killed';
    report.instances.push({ id: i.id, pid: i.pid, ended });
    if (ended === 'would not die') report.problems.push(`instance ${i.id}: pid ${i.pid} survived SIGKILL`);
    say(`instance ${i.id} (pid ${i.pid}): ${ended}`);
  }
  // Files and links, even for instances that were already gone.
  for (const i of order) {
    if (isSocket(i.socket)) fs.rmSync(i.socket, { force: true });
    fs.rmSync(i.pid_file, { force: true });
    fs.rmSync(i.stats, { force: true });
    if (i.tap !== null && i.tap_created && linkExists(i.tap)) {
      const r = removeLink(i.tap);
      if (r.ok) report.tapsRemoved.push(i.tap);
      else report.problems.push(r.error);
    }
  }
  if (m.bridge?.created && linkExists(m.bridge.name)) {
    const others = bridgePorts(m.bridge.name);
    if (others.length === 0) {
      const r = removeLink(m.bridge.name);
      if (r.ok) (report as { bridgeRemoved: string | null }).bridgeRemoved = m.bridge.name;
      else report.problems.push(r.error);
    } else {
      report.problems.push(`bridge ${m.bridge.name} kept: other links are still in it (${others.join(', ')})`);
    }
  }
  if (report.tapsRemoved.length) say(`TAPs removed: ${report.tapsRemoved.join(', ')}`);
  if (report.bridgeRemoved) say(`bridge ${report.bridgeRemoved} removed`);
  if (report.instances.some((i) => i.ended === 'would not die')) {
    return { ok: false, error: report.problems.join('; ') };
  }
  removeManifest(runDir);
  return { ok: true, value: report };
}

// ---- status, stats, logs -------------------------------------------------------

interface InstanceStatus {
  readonly id: number;
  readonly role: InstanceRecord['role'];
  readonly pid: number;
  readonly running: boolean;
  readonly socket: string;
  /** The socket's mode (octal text), owner uid and group gid, or null when the file is missing. */
  readonly socket_file: { mode: string; uid: number; gid: number } | null;
  /** VMs connected to the socket right now (from /proc/net/unix). */
  readonly clients: number;
  readonly tap: string | null;
  readonly tap_up: boolean | null;
  readonly mac: string;
  readonly gid: string;
  readonly backend: string;
  readonly mesh_node: number | null;
  /** The server's phase from its stats file (starting, listening, stopped), or null. */
  readonly state: string | null;
  readonly uptime_s: number | null;
  readonly log: string;
}

export interface HostStatus {
  readonly run_dir: string;
  readonly manifest: string;
  readonly bridge: string | null;
  readonly instances: InstanceStatus[];
}

/** Connected peers of a listening UNIX socket: accepted sockets carry the listener's path in /proc/net/unix. */
export function connectedClients(socketPath: string, procNetUnix?: string): number {
  let text = procNetUnix;
  if (text === undefined) {
    try {
      text = fs.readFileSync('/proc/net/unix', 'utf8');
    } catch {
      return 0;
    }
  }
  let n = 0;
  for (const line of text.split('\n').slice(1)) {
    const f = line.trim().split(/\s+/);
    // Num RefCount Protocol Flags Type St Inode Path; St 03 = connected.
    if (f.length >= 8 && f[7] === socketPath && f[5] === '03') n++;
  }
  return n;
}

function uptimeOf(pid: number): number | null {
  const u = processUsage(pid);
  if (!u) return null;
  try {
    const sysUp = Number(fs.readFileSync('/proc/uptime', 'utf8').split(' ')[0]);
    return Math.max(0, Math.round(sysUp - u.startedTicks / 100));
  } catch {
    return null;
  }
}

export function hostStatus(runDir: string): OpResult<HostStatus | null> {
  const read = readManifest(runDir);
  if (!read.ok) return read;
  const m = read.manifest;
  if (!m) return { ok: true, value: null };
  const instances = m.instances.map((i): InstanceStatus => {
    const running = isOurServer(i.pid, i.socket);
    let socketFile: InstanceStatus['socket_file'] = null;
    try {
      const st = fs.statSync(i.socket);
      socketFile = { mode: (st.mode & 0o7777).toString(8).padStart(4, '0'), uid: st.uid, gid: st.gid };
    } catch {
      /* missing */
    }
    let tapUp: boolean | null = null;
    if (i.tap !== null) {
      try {
        tapUp = (parseInt(fs.readFileSync(`/sys/class/net/${i.tap}/flags`, 'utf8'), 16) & 1) === 1;
      } catch {
        tapUp = null;
      }
    }
    const st = running ? readInstanceState(i.stats) : null;
    return {
      id: i.id,
      role: i.role,
      pid: i.pid,
      running,
      socket: i.socket,
      socket_file: socketFile,
      clients: running ? connectedClients(i.socket) : 0,
      tap: i.tap,
      tap_up: tapUp,
      mac: i.mac,
      gid: i.gid,
      backend: i.backend,
      mesh_node: st?.meshNode ?? i.mesh_node,
      state: st?.phase ?? null,
      uptime_s: running ? uptimeOf(i.pid) : null,
      log: i.log,
    };
  });
  return {
    ok: true,
    value: { run_dir: runDir, manifest: manifestPath(runDir), bridge: m.bridge?.name ?? null, instances },
  };
}

export interface InstanceStats {
  readonly id: number;
  readonly running: boolean;
  readonly rss_bytes: number | null;
  readonly cpu_seconds: number | null;
  /** The TAP's kernel counters (rx_* is what the server sent towards the host). */
  readonly tap: Record<string, number> | null;
  readonly stats_file: string;
  /** The server's stats file, when it writes one. */
  readonly stats_text: string | null;
}

/** The manifest's instances (all, or the one with `id`); null when nothing runs here. */
function selectInstances(runDir: string, id: number | undefined): OpResult<InstanceRecord[] | null> {
  const read = readManifest(runDir);
  if (!read.ok) return read;
  const m = read.manifest;
  if (!m) return { ok: true, value: null };
  const chosen = id === undefined ? m.instances : m.instances.filter((i) => i.id === id);
  if (id !== undefined && chosen.length === 0)
    return { ok: false, error: `no instance ${id} (ids: ${m.instances.map((i) => i.id).join(', ')})` };
  return { ok: true, value: chosen };
}

export function hostStats(runDir: string, id?: number): OpResult<InstanceStats[] | null> {
  const sel = selectInstances(runDir, id);
  if (!sel.ok) return sel;
  if (sel.value === null) return { ok: true, value: null };
  const chosen = sel.value;
  return {
    ok: true,
    value: chosen.map((i) => {
      const running = isOurServer(i.pid, i.socket);
      const u = running ? processUsage(i.pid) : null;
      let statsText: string | null = null;
      try {
        statsText = fs.readFileSync(i.stats, 'utf8');
      } catch {
        /* the server writes none */
      }
      return {
        id: i.id,
        running,
        rss_bytes: u?.rssBytes ?? null,
        cpu_seconds: u?.cpuSeconds ?? null,
        tap: i.tap !== null ? linkCounters(i.tap) : null,
        stats_file: i.stats,
        stats_text: statsText,
      };
    }),
  };
}

interface InstanceLog {
  readonly id: number;
  readonly role: InstanceRecord['role'];
  readonly file: string;
  readonly text: string;
}

export function hostLogs(runDir: string, id: number | undefined, lines: number): OpResult<InstanceLog[] | null> {
  const sel = selectInstances(runDir, id);
  if (!sel.ok) return sel;
  if (sel.value === null) return { ok: true, value: null };
  const chosen = sel.value;
  return {
    ok: true,
    value: chosen.map((i) => ({ id: i.id, role: i.role, file: i.log, text: tailLines(i.log, lines) })),
  };
}

/** True when `server --help` lists `option` (e.g. --stats-file, which older servers lack). */
export function serverHasOption(server: readonly string[], option: string): boolean {
  const r = spawnSync(server[0]!, [...server.slice(1), '--help'], { encoding: 'utf8', timeout: 20_000 });
  return typeof r.stdout === 'string' && r.stdout.includes(option);
}

/** Where ernicctl finds rocm-ernic by default: the compiled bin next to its own. */
export function defaultServerCommand(binDir: string): string[] {
  return [process.execPath, path.join(binDir, 'rocm-ernic.js')];
}
