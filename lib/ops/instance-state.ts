// What ernicctl knows of a running instance comes from its stats file (the
// `state` and `mesh_node` lines of its Instance section, stats-source.ts),
// never from its log: a log line is for people and may change wording or
// level. Waiting for a state is event driven: fs.watch on the directories
// where the server writes (every stats file write is a rename there), a
// re-check on each event and when the child exits, and one timer for the
// time limit.

import * as fs from 'node:fs';
import { MAX_NODE_ID } from '../mesh/limits';
import { SERVER_PHASES, ServerPhase } from './activity';
import { MESH_NODE_KEY, parseStatsFile, STATE_KEY } from './stats-format';

/** The Instance section is first: this much of the file holds it with room to spare. */
const HEAD_BYTES = 8192;

interface InstanceState {
  /** The server's phase, or null when its stats file has no valid state line (an older server). */
  readonly phase: ServerPhase | null;
  /** The mesh node id once registered; null otherwise (no mesh, not yet, or a value out of range). */
  readonly meshNode: number | null;
}

/** The state lines of a stats file's text; values outside their sets count as absent. */
export function instanceStateOf(text: string): InstanceState {
  const inst = parseStatsFile(text).instance;
  const phase = SERVER_PHASES.find((p) => p === inst[STATE_KEY]) ?? null;
  const node = inst[MESH_NODE_KEY];
  const meshNode =
    typeof node === 'number' && Number.isSafeInteger(node) && node >= 0 && node <= MAX_NODE_ID ? node : null;
  return { phase, meshNode };
}

/** The state in `file` now, or null when there is no such file (yet). Reads the head only. */
export function readInstanceState(file: string): InstanceState | null {
  let fd: number;
  try {
    fd = fs.openSync(file, fs.constants.O_RDONLY | fs.constants.O_NOFOLLOW | fs.constants.O_NONBLOCK);
  } catch {
    return null;
  }
  try {
    if (!fs.fstatSync(fd).isFile()) return null;
    const buf = Buffer.alloc(HEAD_BYTES);
    const n = fs.readSync(fd, buf, 0, buf.length, 0);
    return instanceStateOf(buf.subarray(0, n).toString('utf8'));
  } catch {
    return null;
  } finally {
    fs.closeSync(fd);
  }
}

interface WaitOptions {
  /** Directories whose changes may change the answer (watched with fs.watch). */
  readonly dirs: readonly string[];
  readonly timeoutMs: number;
  /** Registers a callback for an event outside those directories (the child exiting). */
  readonly also?: (wake: () => void) => void;
}

/**
 * Resolve with check()'s first non-null answer, checked now and on every
 * change in `dirs`; null when `timeoutMs` passes first. No polling: between
 * events nothing runs but the one timeout timer.
 */
export function waitFor<T>(check: () => T | null, o: WaitOptions): Promise<T | null> {
  return new Promise((resolve) => {
    let done = false;
    const watchers: fs.FSWatcher[] = [];
    const finish = (v: T | null): void => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      for (const w of watchers) w.close();
      resolve(v);
    };
    const test = (): void => {
      if (done) return;
      const v = check();
      if (v !== null) finish(v);
    };
    const timer = setTimeout(() => finish(check()), o.timeoutMs);
    for (const d of new Set(o.dirs)) {
      try {
        const w = fs.watch(d, { persistent: true }, test);
        // A directory removed under us: the time limit still ends the wait.
        w.on('error', () => w.close());
        watchers.push(w);
      } catch {
        /* no such directory: the other events and the time limit remain */
      }
    }
    o.also?.(test);
    // After the watchers exist, so a change between the first look and the watch is not missed.
    test();
  });
}
