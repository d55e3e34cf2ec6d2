// The server processes ernicctl runs: spawned detached (they outlive
// ernicctl), output appended to a log file, pid written to a pid file. A pid
// read back is only trusted while /proc/PID/cmdline still names the
// instance's socket, so a recycled pid is never signalled.

import { spawn } from 'node:child_process';
import * as fs from 'node:fs';

interface SpawnSpec {
  /** Program and leading arguments (e.g. [node, dist/bin/rocm-ernic.js]). */
  readonly command: readonly string[];
  readonly args: readonly string[];
  readonly env: Readonly<Record<string, string>>;
  readonly log: string;
  readonly pidFile: string;
}

export interface Spawned {
  readonly pid: number;
  /** Set when the process has exited (its code or signal). */
  exited(): string | null;
  /** Call `fn` when the process exits (at once if it already has). */
  onExit(fn: () => void): void;
}

/** Start a server detached from this process, its stdout and stderr appended to spec.log. */
export function spawnDetached(spec: SpawnSpec): Spawned {
  const out = fs.openSync(spec.log, 'a', 0o640);
  let exit: string | null = null;
  const waiting: (() => void)[] = [];
  const ended = (why: string): void => {
    exit ??= why;
    for (const fn of waiting.splice(0)) fn();
  };
  const onExit = (fn: () => void): void => {
    if (exit !== null) fn();
    else waiting.push(fn);
  };
  try {
    const child = spawn(spec.command[0]!, [...spec.command.slice(1), ...spec.args], {
      detached: true,
      stdio: ['ignore', out, out],
      env: { ...process.env, ...spec.env },
    });
    child.on('error', (e) => ended(`could not start: ${e.message}`));
    child.on('exit', (code, signal) => ended(signal ? `killed by ${signal}` : `exited with status ${code}`));
    child.unref();
    if (child.pid === undefined) return { pid: 0, exited: () => exit ?? 'could not start', onExit };
    fs.writeFileSync(spec.pidFile, `${child.pid}\n`, { mode: 0o644 });
    return { pid: child.pid, exited: () => exit, onExit };
  } finally {
    fs.closeSync(out);
  }
}

/** The process's command line, or null when it is gone (or a zombie with none). */
function cmdlineOf(pid: number): string[] | null {
  try {
    const raw = fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8');
    if (!raw) return null;
    return raw.split('\0').filter((s) => s.length > 0);
  } catch {
    return null;
  }
}

/** True while pid is a live process whose command line carries `--socket SOCKET`. */
export function isOurServer(pid: number, socket: string): boolean {
  const argv = cmdlineOf(pid);
  if (!argv) return false;
  if (isZombie(pid)) return false;
  for (let i = 0; i < argv.length - 1; i++) {
    if ((argv[i] === '--socket' || argv[i] === '-s') && argv[i + 1] === socket) return true;
  }
  return argv.includes(`--socket=${socket}`);
}

function isZombie(pid: number): boolean {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2).startsWith('Z');
  } catch {
    return true;
  }
}

export function signal(pid: number, sig: NodeJS.Signals): boolean {
  try {
    process.kill(pid, sig);
    return true;
  } catch {
    return false;
  }
}

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/**
 * Wait until check() is true or ms pass; true if it became true. Checks every
 * `step` ms: only for what has no event to wait on (another process's exit,
 * in stop); a server's state is waited for with instance-state.ts waitFor.
 */
export async function waitUntil(check: () => boolean, ms: number, step = 50): Promise<boolean> {
  const end = Date.now() + ms;
  for (;;) {
    if (check()) return true;
    if (Date.now() >= end) return false;
    await sleep(step);
  }
}

/** Resident memory (bytes) and CPU time (s) of a process from /proc, or null. */
export function processUsage(pid: number): { rssBytes: number; cpuSeconds: number; startedTicks: number } | null {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    // Fields after the command: state is f[0], so field N (1-based in proc(5)) is f[N - 3].
    const ticks = 100; // USER_HZ: 100 on every Linux architecture Node runs on
    const utime = Number(f[14 - 3]);
    const stime = Number(f[15 - 3]);
    const start = Number(f[22 - 3]);
    const rssPages = Number(f[24 - 3]);
    return {
      rssBytes: rssPages * 4096, // x86-64 and most arm64 kernels: 4 KiB pages
      cpuSeconds: (utime + stime) / ticks,
      startedTicks: start,
    };
  } catch {
    return null;
  }
}

/** The last `n` lines of a text file ('' when it cannot be read). Reads at most the file's last 1 MiB. */
export function tailLines(file: string, n: number): string {
  // slice(-0) would be every line.
  if (n <= 0) return '';
  let fd: number;
  try {
    fd = fs.openSync(file, 'r');
  } catch {
    return '';
  }
  try {
    const size = fs.fstatSync(fd).size;
    const len = Math.min(size, 1 << 20);
    const buf = Buffer.alloc(len);
    fs.readSync(fd, buf, 0, len, size - len);
    const lines = buf.toString('utf8').split('\n');
    if (lines[lines.length - 1] === '') lines.pop();
    return lines.slice(-n).join('\n');
  } finally {
    fs.closeSync(fd);
  }
}
