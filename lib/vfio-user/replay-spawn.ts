// The server `ernic-vfu replay --spawn` starts: a shell command run in its own
// process group, so that stopping it ends everything it started. A wrapper such
// as `npm run start -- ...` does not pass SIGTERM on to its child; signalling
// the group reaches the real server whatever sits in between.

import { ChildProcess, spawn } from 'child_process';
import * as fs from 'fs';

/** How much of the server's stderr is kept, to explain why it did not start. */
const STDERR_TAIL = 4096;
/** How often the group and the socket are looked at. */
const POLL_MS = 50;

class SpawnError extends Error {}

/** A server command running in a process group of its own. */
export class SpawnedServer {
  /** The process group: the shell's pid (it leads a new session). */
  readonly pgid: number;
  #tail = '';
  #exit: string | null = null;
  #stopping: Promise<boolean> | null = null;

  private constructor(child: ChildProcess, pgid: number) {
    this.pgid = pgid;
    child.stderr?.setEncoding('utf8');
    child.stderr?.on('data', (s: string) => {
      this.#tail = (this.#tail + s).slice(-STDERR_TAIL);
    });
    child.on('exit', (code, signal) => {
      this.#exit = signal ? `was killed by ${signal}` : `exited with status ${code}`;
    });
  }

  /**
   * Starts `command` with /bin/sh in a new session (detached: its own process
   * group). Not `exec`: a compound command (`cd DIR && npm start`) must work,
   * and the group reaches whatever the shell starts.
   */
  static async start(command: string): Promise<SpawnedServer> {
    const child = spawn('/bin/sh', ['-c', command], { detached: true, stdio: ['ignore', 'ignore', 'pipe'] });
    // spawn() reports a failure to start asynchronously, as 'error' instead of 'spawn'.
    await new Promise<void>((resolve, reject) => {
      child.once('spawn', resolve);
      child.once('error', (e) => reject(new SpawnError(`cannot start /bin/sh: ${e.message}`)));
    });
    return new SpawnedServer(child, child.pid!);
  }

  /** The last lines the server wrote on stderr (at most STDERR_TAIL bytes). */
  get stderrTail(): string {
    return this.#tail.trimEnd();
  }

  /** Resolves once `socketPath` is a socket; throws if the server ends first or `timeoutMs` passes. */
  async waitForSocket(socketPath: string, timeoutMs: number): Promise<void> {
    const end = Date.now() + timeoutMs;
    for (;;) {
      if (this.#exit !== null)
        throw new SpawnError(`the spawned server ${this.#exit} before listening${this.#explain()}`);
      try {
        if ((await fs.promises.stat(socketPath)).isSocket()) return;
      } catch {
        /* not there yet */
      }
      if (Date.now() >= end)
        throw new SpawnError(
          `the spawned server did not create ${socketPath} within ${timeoutMs} ms${this.#explain()}`,
        );
      await sleep(POLL_MS);
    }
  }

  #explain(): string {
    const t = this.stderrTail;
    return t ? `; its stderr ended with:\n${t}` : '';
  }

  /**
   * Ends the whole process group: SIGTERM, then SIGKILL to whatever is left after
   * `graceMs`, and waits for it to be gone (`killWaitMs` at most after SIGKILL).
   * Returns false if something of the group still runs. Calling it again returns
   * the same promise.
   */
  stop(graceMs = 3000, killWaitMs = 2000): Promise<boolean> {
    this.#stopping ??= this.#stop(graceMs, killWaitMs);
    return this.#stopping;
  }

  async #stop(graceMs: number, killWaitMs: number): Promise<boolean> {
    if (!signalGroup(this.pgid, 'SIGTERM')) return true;
    if (await waitGone(this.pgid, graceMs)) return true;
    if (!signalGroup(this.pgid, 'SIGKILL')) return true;
    return waitGone(this.pgid, killWaitMs);
  }
}

function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}

/** Sends `signal` to every process of the group; false when the group no longer exists. */
function signalGroup(pgid: number, signal: NodeJS.Signals | 0): boolean {
  try {
    process.kill(-pgid, signal);
    return true;
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ESRCH') return false;
    throw e;
  }
}

async function waitGone(pgid: number, ms: number): Promise<boolean> {
  const end = Date.now() + ms;
  for (;;) {
    if (!(await groupRuns(pgid))) return true;
    if (Date.now() >= end) return false;
    await sleep(POLL_MS);
  }
}

/**
 * True while a process of the group runs. A zombie does not count: it has ended
 * and only waits for its parent (for an orphan, init, which may take its time)
 * to collect its status; no signal can do more to it.
 */
async function groupRuns(pgid: number): Promise<boolean> {
  if (!signalGroup(pgid, 0)) return false;
  let entries: string[];
  try {
    entries = await fs.promises.readdir('/proc');
  } catch {
    return true; // no /proc: trust kill(2), which counts zombies
  }
  for (const name of entries) {
    if (!/^\d+$/.test(name)) continue;
    let stat: string;
    try {
      stat = await fs.promises.readFile(`/proc/${name}/stat`, 'latin1');
    } catch {
      continue; // ended meanwhile
    }
    const s = parseStat(stat);
    if (s && s.pgrp === pgid && s.state !== 'Z' && s.state !== 'X') return true;
  }
  return false;
}

/** State and process group from /proc/PID/stat: `pid (comm) state ppid pgrp ...`; comm may hold spaces and parentheses. */
function parseStat(text: string): { state: string; pgrp: number } | null {
  const close = text.lastIndexOf(')');
  if (close < 0) return null;
  const f = text.slice(close + 2).split(' ');
  if (f.length < 3 || !/^\d+$/.test(f[2]!)) return null;
  return { state: f[0]!, pgrp: Number(f[2]) };
}
