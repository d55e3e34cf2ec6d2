// Logging. Library code takes a Logger (a tiny interface) so embedders can
// plug in their own; the CLIs build one with winston. Warnings caused by
// untrusted input go through a RateLimiter so a hostile peer cannot flood logs.

import * as fs from 'fs';
import * as winston from 'winston';

export type LogLevel = 'none' | 'error' | 'warn' | 'info' | 'debug';
export const LOG_LEVELS: readonly LogLevel[] = ['none', 'error', 'warn', 'info', 'debug'];

export interface Logger {
  error(message: string, meta?: Record<string, unknown>): void;
  warn(message: string, meta?: Record<string, unknown>): void;
  info(message: string, meta?: Record<string, unknown>): void;
  debug(message: string, meta?: Record<string, unknown>): void;
  /** True when debug messages are kept: check it before building a costly message on a hot path. */
  readonly debugEnabled: boolean;
}

/** A logger that drops everything. */
export const nullLogger: Logger = {
  error() {},
  warn() {},
  info() {},
  debug() {},
  debugEnabled: false,
};

export type LogFormat = 'text' | 'json';
export const LOG_FORMATS: readonly LogFormat[] = ['text', 'json'];

export interface LoggerOptions {
  readonly level: LogLevel;
  /** text (default): `TIME level: message {meta}`; json: one JSON object a line (time, level, message, meta keys). */
  readonly format?: LogFormat;
  /** Prefix text lines with an ISO timestamp (default true; off under journald, which stamps lines itself). */
  readonly timestamps?: boolean;
  /** Also append to this file. */
  readonly file?: string;
  /** Write to stderr (default true). */
  readonly console?: boolean;
}

/** A winston logger behind the Logger interface. */
export function createLogger(opts: LoggerOptions): Logger {
  const transports: winston.transport[] = [];
  const stamped = opts.timestamps !== false;
  const format =
    opts.format === 'json'
      ? winston.format.combine(
          winston.format.timestamp(),
          winston.format.printf((info) => {
            const { timestamp, level, message, ...meta } = info;
            return JSON.stringify({ ...meta, time: timestamp, level, message });
          }),
        )
      : winston.format.combine(
          winston.format.timestamp(),
          winston.format.printf((info) => {
            const { timestamp, level, message, ...meta } = info;
            const extra = Object.keys(meta).length ? ' ' + JSON.stringify(meta) : '';
            return `${stamped ? `${String(timestamp)} ` : ''}${level}: ${String(message)}${extra}`;
          }),
        );
  if (opts.console !== false)
    transports.push(new winston.transports.Console({ stderrLevels: ['error', 'warn', 'info', 'debug'] }));
  if (opts.file) transports.push(new winston.transports.File({ filename: opts.file }));
  const w = winston.createLogger({
    level: opts.level === 'none' ? 'error' : opts.level,
    silent: opts.level === 'none',
    format,
    transports,
  });
  return {
    error: (m, meta) => {
      w.error(m, meta);
    },
    warn: (m, meta) => {
      w.warn(m, meta);
    },
    info: (m, meta) => {
      w.info(m, meta);
    },
    debug: (m, meta) => {
      w.debug(m, meta);
    },
    debugEnabled: opts.level === 'debug',
  };
}

/**
 * True when stderr is the journal's stream (systemd sets JOURNAL_STREAM to the
 * device and inode of the stream it connected): the journal stamps each line,
 * so a timestamp of ours would only repeat it.
 */
export function stderrIsJournal(
  env: NodeJS.ProcessEnv = process.env,
  stat: () => { dev: number; ino: number } = () => fs.fstatSync(2),
): boolean {
  const js = env.JOURNAL_STREAM;
  if (!js) return false;
  const m = /^(\d+):(\d+)$/.exec(js);
  if (!m) return false;
  try {
    const st = stat();
    return String(st.dev) === m[1] && String(st.ino) === m[2];
  } catch {
    return false;
  }
}

/**
 * Lets through at most `burst` events per key per `intervalMs`, then one summary
 * of how many were suppressed when the next window opens. Driven by the events
 * themselves (timestamps), never by a timer, so an idle process stays idle.
 */
export class RateLimiter {
  readonly #windows = new Map<string, { start: number; count: number; suppressed: number }>();

  constructor(
    private readonly burst = 10,
    private readonly intervalMs = 10_000,
    private readonly now: () => number = Date.now,
  ) {}

  /** Returns the number of events suppressed since the last one let through, or -1 to suppress this one. */
  allow(key: string): number {
    const t = this.now();
    let w = this.#windows.get(key);
    if (!w || t - w.start >= this.intervalMs) {
      const suppressed = w ? w.suppressed : 0;
      w = { start: t, count: 0, suppressed: 0 };
      if (this.#windows.size > 1024) this.#windows.clear();
      this.#windows.set(key, w);
      w.count = 1;
      return suppressed;
    }
    if (w.count < this.burst) {
      w.count++;
      return 0;
    }
    w.suppressed++;
    return -1;
  }
}

/** Log a warning about untrusted input, rate limited per key. */
export function warnLimited(
  log: Logger,
  limiter: RateLimiter,
  key: string,
  message: string,
  meta?: Record<string, unknown>,
): void {
  const s = limiter.allow(key);
  if (s < 0) return;
  log.warn(s > 0 ? `${message} (${s} similar suppressed)` : message, meta);
}
