// Writing the stats file (`rocm-ernic -S PATH`), event driven:
//
//   - a change (DeviceActivity: an access, attach, detach) marks the file
//     dirty and, if none is armed, arms one unref'd timer of `intervalMs`;
//   - when it fires the file is rewritten if its content changed, and one
//     follow-up check is armed (work the access started may finish later on
//     its own: a frame, an RNR retry, a mesh answer); a check that finds
//     nothing new writes nothing and arms nothing, so an idle device has no
//     timer;
//   - a device reset, and the server stopping (SIGINT/SIGTERM), write at once.
//
// Each write is whole and atomic: a temporary file in the same directory,
// then rename(2) over the old one, so a reader sees the old file or the new
// one, never half of one. Writes are synchronous (a few KiB, at most once per
// interval) so the file is final before the process exits.
//
// The stats directory may be writable by others (/run/rocm-ernic is shared by
// every instance, ernicctl's --run-dir can be anywhere): the temporary name is
// random and opened O_CREAT|O_EXCL|O_NOFOLLOW, so a file or symlink planted
// there is refused, never written through; rename(2) replaces a symlink at
// the final name, it does not follow it. Not the npm package
// write-file-atomic (8.0.0): its temporary name is a hash of the pid and a
// call count (predictable), it opens it with 'w' (no O_EXCL, follows a
// symlink), it realpath()s the target (writes through a symlink planted at
// the final name), and its sync path fsyncs, which can stall the event loop
// on a slow disk for a file nobody needs to survive a crash.

import { randomBytes } from 'crypto';
import * as fs from 'fs';
import * as path from 'path';
import { guardedTimeout } from '../guard';
import { Logger, nullLogger, RateLimiter, warnLimited } from '../log';
import type { ActivityKind, DeviceActivity } from './activity';
import { formatStatsFile, StatsSnapshot } from './stats-format';

const STATS_INTERVAL_MS = 1000;

interface StatsFileOptions {
  readonly path: string;
  /** A snapshot of the counters now, numbered `writeCount`. */
  readonly snapshot: (writeCount: number) => StatsSnapshot;
  readonly intervalMs?: number;
  readonly log?: Logger;
}

export class StatsFileWriter {
  readonly path: string;
  readonly #snapshot: (writeCount: number) => StatsSnapshot;
  readonly #intervalMs: number;
  readonly #log: Logger;
  readonly #limiter = new RateLimiter();
  #timer: NodeJS.Timeout | null = null;
  #dirty = false;
  #closed = false;
  /** The last file's content with its write count left out: what "changed" compares. */
  #last = '';
  /** Files written. */
  writes = 0;
  /** Timer firings that found nothing new (tests). */
  idleChecks = 0;

  constructor(opts: StatsFileOptions) {
    this.path = path.resolve(opts.path);
    this.#snapshot = opts.snapshot;
    this.#intervalMs = opts.intervalMs ?? STATS_INTERVAL_MS;
    this.#log = opts.log ?? nullLogger;
  }

  /** Follow a device: accesses mark the file dirty, a reset writes it at once. */
  follow(activity: DeviceActivity): void {
    activity.onActivity((kind: ActivityKind) => {
      if (kind === 'reset' || kind === 'phase') this.writeNow();
      else this.markDirty();
    });
  }

  /** Something changed: make sure one write is scheduled. */
  markDirty(): void {
    this.#dirty = true;
    if (this.#timer !== null || this.#closed) return;
    this.#timer = guardedTimeout(this.#log, 'stats file write', this.#intervalMs, () => this.#tick());
    this.#timer.unref();
  }

  #tick(): void {
    this.#timer = null;
    if (!this.#dirty || this.#closed) return;
    this.#dirty = false;
    if (this.#write(false))
      this.markDirty(); // one follow-up check
    else this.idleChecks++;
  }

  /**
   * Write now whatever the content (startup, reset, shutdown). Throws only
   * when `strict` (the CLI's first write: a path that cannot be written stops
   * the server before QEMU connects); otherwise failures are logged.
   */
  writeNow(strict = false): boolean {
    if (this.#timer !== null) {
      clearTimeout(this.#timer);
      this.#timer = null;
    }
    this.#dirty = false;
    return this.#write(true, strict);
  }

  /** Write if the content changed (or `force`); true when a file was written. */
  #write(force: boolean, strict = false): boolean {
    const key = formatStatsFile(this.#snapshot(0));
    if (!force && key === this.#last) return false;
    const text = formatStatsFile(this.#snapshot(this.writes + 1));
    try {
      writeReplacing(this.path, text);
    } catch (e) {
      if (strict) throw e;
      warnLimited(
        this.#log,
        this.#limiter,
        'stats-file',
        `rocm-ernic: cannot write the stats file ${this.path}: ${(e as Error).message}`,
      );
      return false;
    }
    this.#last = key;
    this.writes++;
    return true;
  }

  /** Whether a write is scheduled (an idle device has none). */
  get scheduled(): boolean {
    return this.#timer !== null;
  }

  /** Stop scheduling; the file stays. */
  close(): void {
    this.#closed = true;
    if (this.#timer !== null) clearTimeout(this.#timer);
    this.#timer = null;
  }
}

const CREATE_NEW = fs.constants.O_WRONLY | fs.constants.O_CREAT | fs.constants.O_EXCL | fs.constants.O_NOFOLLOW;

/** A temporary name beside `file` nobody can guess (64 random bits). */
export function temporaryName(file: string): string {
  return path.join(path.dirname(file), `.${path.basename(file)}.${randomBytes(8).toString('hex')}.tmp`);
}

/**
 * Replace `file` with `text` atomically: a new file under a random name,
 * created exclusively without following a symlink, then renamed over `file`.
 * Only a temporary file this call created is removed on failure.
 */
export function writeReplacing(file: string, text: string, mode = 0o644): void {
  const tmp = temporaryName(file);
  const fd = fs.openSync(tmp, CREATE_NEW, mode);
  try {
    try {
      const buf = Buffer.from(text, 'utf8');
      for (let at = 0; at < buf.length;) at += fs.writeSync(fd, buf, at, buf.length - at);
    } finally {
      fs.closeSync(fd);
    }
    fs.renameSync(tmp, file);
  } catch (e) {
    try {
      fs.unlinkSync(tmp);
    } catch {
      /* already renamed or gone */
    }
    throw e;
  }
}
