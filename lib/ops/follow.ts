// `ernicctl logs -f`: print what is appended to the instances' log files as
// it is written, like tail -f. Event driven: fs.watch on each log's directory
// (so a log that is created, truncated or replaced later is still followed);
// each event reads from where the last read ended. No timer.

import * as fs from 'node:fs';
import * as path from 'node:path';

interface FollowedFile {
  /** What the header names (e.g. "instance 1 (worker)"). */
  readonly label: string;
  readonly file: string;
}

/** Most bytes one read takes; the rest is read on the next turn. */
const CHUNK = 1 << 16;
/** A line longer than this is printed in pieces (a log is never held whole). */
const MAX_LINE = 1 << 16;

interface Follower {
  /** Stop watching; what was read is printed. */
  close(): void;
}

interface Tail {
  readonly f: FollowedFile;
  offset: number;
  /** The inode read last: another one at the same name is a new file (rotation). */
  ino: number;
  partial: string;
  reading: boolean;
  again: boolean;
}

/**
 * Follow `files` from their current ends. `out` gets whole lines (no
 * newline); with more than one file a header line `==> LABEL FILE <==` comes
 * before lines from a file other than the last one printed.
 */
export function followFiles(files: readonly FollowedFile[], out: (line: string) => void): Follower {
  const tails = new Map<string, Tail>();
  const byDir = new Map<string, Tail[]>();
  let lastShown: Tail | null = null;
  let closed = false;
  for (const f of files) {
    const full = path.resolve(f.file);
    if (tails.has(full)) continue;
    let offset = 0;
    let ino = 0;
    try {
      const st = fs.statSync(full);
      offset = st.size;
      ino = st.ino;
    } catch {
      /* not there yet: read from its start once it appears */
    }
    const t: Tail = { f: { ...f, file: full }, offset, ino, partial: '', reading: false, again: false };
    tails.set(full, t);
    const dir = path.dirname(full);
    byDir.set(dir, [...(byDir.get(dir) ?? []), t]);
  }

  const print = (t: Tail, line: string): void => {
    if (tails.size > 1 && lastShown !== t) out(`==> ${t.f.label} ${t.f.file} <==`);
    lastShown = t;
    out(line);
  };

  const read = async (t: Tail): Promise<void> => {
    if (t.reading) {
      t.again = true;
      return;
    }
    t.reading = true;
    try {
      do {
        t.again = false;
        let fh: fs.promises.FileHandle;
        try {
          fh = await fs.promises.open(t.f.file, fs.constants.O_RDONLY | fs.constants.O_NONBLOCK);
        } catch {
          continue; // gone for now (rotated away): its successor's creation is another event
        }
        try {
          const st = await fh.stat();
          if (!st.isFile()) continue;
          // A new file at the name, or the old one truncated: start from its beginning.
          if (st.ino !== t.ino || st.size < t.offset) {
            t.ino = st.ino;
            t.offset = 0;
            t.partial = '';
          }
          while (!closed && t.offset < st.size) {
            const buf = Buffer.alloc(Math.min(CHUNK, st.size - t.offset));
            const { bytesRead } = await fh.read(buf, 0, buf.length, t.offset);
            if (bytesRead === 0) break;
            t.offset += bytesRead;
            const lines = (t.partial + buf.subarray(0, bytesRead).toString('utf8')).split('\n');
            t.partial = lines.pop() ?? '';
            for (const l of lines) print(t, l);
            while (t.partial.length > MAX_LINE) {
              print(t, t.partial.slice(0, MAX_LINE));
              t.partial = t.partial.slice(MAX_LINE);
            }
          }
        } finally {
          await fh.close();
        }
      } while (t.again && !closed);
    } finally {
      t.reading = false;
    }
  };

  const watchers: fs.FSWatcher[] = [];
  for (const [dir, list] of byDir) {
    try {
      const w = fs.watch(dir, { persistent: true }, (_event, name) => {
        if (closed) return;
        // No name (some file systems): any of this directory's logs may have changed.
        const hit = name ? list.filter((t) => path.basename(t.f.file) === String(name)) : list;
        for (const t of hit) void read(t);
      });
      w.on('error', () => w.close());
      watchers.push(w);
    } catch (e) {
      out(`(cannot watch ${dir}: ${(e as Error).message})`);
    }
  }
  // Anything written between the stat above and the watch.
  for (const t of tails.values()) void read(t);

  return {
    close(): void {
      closed = true;
      for (const w of watchers) w.close();
    },
  };
}
