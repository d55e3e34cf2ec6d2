// Loading the `ernic_native` addon: where its .node file may be (the
// compiled and the source layout, or ERNIC_NATIVE_ADDON), the check that it is
// the one this code was written against (its functions and the kernel and
// libuv constants), and the one-line error saying how to build it. Loaded on
// first use, so the CLIs' --help, the protocol codec and the exporter work
// where it was never built. The functions that use it are in index.ts.

import * as fs from 'fs';
import * as path from 'path';

/** The values the addon exports, as uv.h (enum uv_poll_event), linux/fcntl.h and SCM_MAX_FD define them. */
export const ABI = {
  READABLE: 1,
  WRITABLE: 2,
  DISCONNECT: 4,
  F_SEAL_SEAL: 1,
  F_SEAL_SHRINK: 2,
  F_SEAL_GROW: 4,
  F_SEAL_WRITE: 8,
  MAX_FDS: 253,
} as const;

interface Binding {
  /** `backlog` >= 0: listening socket; -1: connected socket. */
  unixSocket(path: string, backlog: number): number;
  accept(fd: number): number;
  socketPair(out: Int32Array): void;
  recvmsg(fd: number, buf: ArrayBufferView, offset: number, length: number, fdsOut: Int32Array): number;
  sendmsg(
    fd: number,
    buf: ArrayBufferView,
    offset: number,
    length: number,
    fds: Int32Array | null,
    nfds: number,
  ): number;
  /** Wraps the poll handle into `watcher`, which becomes the callback's `this`. */
  watch<W extends object>(
    watcher: W,
    fd: number,
    events: number,
    callback: (this: W, status: number, events: number) => void,
  ): void;
  /** `events` >= 0: update (0 stops polling); -1: close. */
  pollCtl(watcher: object, events: number): void;
  mmap(fd: number, offset: number, length: number, writable: boolean): ArrayBuffer;
  munmap(ab: ArrayBuffer): void;
  /** efd >= -1 sets the fd the SIGBUS guard signals (-1: none), -2 leaves it; out = [faults, last address]. */
  busGuard(efd: number, out: Float64Array): void;
  mappingAddress(ab: ArrayBuffer): number;
  memfdCreate(name: string, size: number, seal: boolean): number;
  getSeals(fd: number): number;
  eventfd(initval: number, nonblock: boolean): number;
  dupFd(fd: number): number;
  /** `name`: IFNAMSIZ (16) bytes, NUL-terminated; receives the actual name. `offloads` -1: plain; else IFF_VNET_HDR + TUNSETOFFLOAD. */
  openTap(name: Buffer, offloads: number): number;
  READABLE: number;
  WRITABLE: number;
  DISCONNECT: number;
  F_SEAL_SEAL: number;
  F_SEAL_SHRINK: number;
  F_SEAL_GROW: number;
  F_SEAL_WRITE: number;
  MAX_FDS: number;
}

const ADDON_FILE = path.join('build', 'Release', 'ernic_native.node');
/** Names the one .node file to load instead of the built one (a separate build; the specs use a missing one). */
export const ADDON_ENV = 'ERNIC_NATIVE_ADDON';

/** The package root (the folder with package.json): lib/native is two levels down, dist/lib/native three. */
function packageRoot(): string {
  const fromDist = path.join(__dirname, '..', '..', '..');
  return fs.existsSync(path.join(fromDist, 'package.json')) ? fromDist : path.join(__dirname, '..', '..');
}

/** Where the addon may live: compiled layout (dist/lib/native) and source layout (lib/native). */
function candidatePaths(): string[] {
  const override = process.env[ADDON_ENV];
  if (override !== undefined && override !== '') return [path.resolve(override)];
  const fromDist = path.join(__dirname, '..', '..', '..', 'lib', 'native', ADDON_FILE);
  const fromSource = path.join(__dirname, ADDON_FILE);
  return fromDist === fromSource ? [fromDist] : [fromDist, fromSource];
}

/**
 * How to build the addon, for the one-line error: an installed dependency
 * (the package sits in a node_modules folder) is rebuilt by npm; a checkout
 * builds it with its own scripts.
 */
export function buildAdvice(root = packageRoot()): string {
  if (path.basename(path.dirname(root)) === 'node_modules') {
    return 'build it with `npm rebuild rocm-ernic` (needs g++, make and python3)';
  }
  return `build it with \`npm ci\` or \`npm run build\` in ${root} (needs g++, make and python3)`;
}

/** The addon is missing, unloadable or stale; the message is one line that says how to build it. */
function addonError(what: string, cause?: unknown): Error {
  const e = new Error(`${what}; ${buildAdvice()}`, cause === undefined ? undefined : { cause });
  return Object.assign(e, { code: 'ERR_ERNIC_NATIVE' });
}

function loadBinding(): Binding {
  const tried = candidatePaths();
  const file = tried.find((p) => fs.existsSync(p));
  if (file === undefined) {
    throw addonError(`rocm-ernic's native helper ernic_native.node is not built (looked in ${tried.join(', ')})`);
  }
  let mod: unknown;
  try {
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    mod = require(file) as unknown;
  } catch (err) {
    throw addonError(
      `cannot load rocm-ernic's native helper ${file} (${String((err as Error).message).split('\n')[0]})`,
      err,
    );
  }
  const b = mod as Partial<Record<keyof Binding, unknown>> | null;
  const fns: (keyof Binding)[] = [
    'unixSocket',
    'accept',
    'socketPair',
    'recvmsg',
    'sendmsg',
    'watch',
    'pollCtl',
    'mmap',
    'munmap',
    'memfdCreate',
    'getSeals',
    'eventfd',
    'openTap',
  ];
  const missing = fns.filter((k) => b === null || typeof b[k] !== 'function');
  if (missing.length > 0)
    throw addonError(`rocm-ernic's native helper ${file} is stale (missing ${missing.join(', ')})`);
  // The constants below are fixed by the kernel and libuv ABIs; an addon that disagrees was built against something else.
  const wrong = (Object.keys(ABI) as (keyof typeof ABI)[]).filter((k) => (mod as Binding)[k] !== ABI[k]);
  if (wrong.length > 0) throw addonError(`rocm-ernic's native helper ${file} disagrees on ${wrong.join(', ')}`);
  return mod as Binding;
}

let loaded: Binding | undefined;
let loadFailure: Error | undefined;

/**
 * The addon, loaded on first use: importing this module costs nothing, so
 * --help, the protocol codec and the exporter run where it was never built.
 * A failure is kept and thrown again (one line, no retry per call).
 */
export function binding(): Binding {
  if (loaded !== undefined) return loaded;
  if (loadFailure !== undefined) throw loadFailure;
  try {
    loaded = loadBinding();
  } catch (e) {
    loadFailure = e as Error;
    throw e;
  }
  return loaded;
}

/**
 * Loads the addon now, so a server fails before it starts on the one-line
 * error (code 'ERR_ERNIC_NATIVE') instead of part way through.
 */
export function loadNative(): void {
  binding();
}

/** True when the addon loads (loading it if it was not yet); never throws. */
export function nativeAvailable(): boolean {
  try {
    binding();
    return true;
  } catch {
    return false;
  }
}
