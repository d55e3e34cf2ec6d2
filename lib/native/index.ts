/**
 * TypeScript face of the `ernic_native` addon (lib/native/ernic_native.c).
 *
 * The addon only contains what Node.js lacks: AF_UNIX sockets with fd passing
 * (SCM_RIGHTS), libuv fd polling, mmap/munmap of shared memory, memfd with
 * seals, eventfd and TAP devices. Closing, reading and writing fds, fstat and
 * the like are done with Node's `fs` module.
 *
 * Conventions shared by all functions:
 * - A failing syscall throws a {@link NativeError}: message `"<syscall>: <strerror>"`,
 *   `code` (`'EBADF'`, ...), `errno` (positive number) and `syscall`.
 * - Wrong argument types throw `TypeError`, out-of-range values `RangeError`
 *   (programmer errors).
 * - `EINTR` is always retried internally. Where documented, `EAGAIN` is
 *   reported as the return value `-1` instead of an exception.
 * - Every fd created here is close-on-exec; sockets are non-blocking.
 *
 * @packageDocumentation
 */
import * as fs from 'fs';
import * as path from 'path';

/** An error thrown by a failing syscall of the native addon. */
export type NativeError = Error & {
  /** errno name, e.g. `'EBADF'`; `'E<number>'` for errnos without a known name. */
  code: string;
  /** The positive errno number. */
  errno: number;
  /** The failing syscall, e.g. `'recvmsg'` or `'ioctl(TUNSETIFF)'`. */
  syscall: string;
};

/** True when `e` is an error thrown by a failing syscall ({@link NativeError}). */
export function isNativeError(e: unknown): e is NativeError {
  if (!(e instanceof Error)) return false;
  const r = e as Error & Record<string, unknown>;
  return typeof r.code === 'string' && typeof r.errno === 'number' && typeof r.syscall === 'string';
}

/** A libuv poll handle on an fd, returned by {@link watch}. */
export interface Watcher {
  /**
   * Changes the set of watched events (a mask of {@link READABLE},
   * {@link WRITABLE}, {@link DISCONNECT}); `0` stops polling (the watcher
   * stays open and may be restarted). Throws if the watcher is closed.
   */
  update(events: number): void;
  /**
   * Stops polling and releases the handle. Idempotent; may be called from
   * inside the callback. After `close()` the callback is never called again.
   * Close the watcher before closing its fd.
   */
  close(): void;
}

/**
 * Callback of {@link watch}; `this` is the {@link Watcher}.
 * @param status - 0, or a negative libuv error code (e.g. -9 for EBADF).
 * @param events - mask of {@link READABLE} / {@link WRITABLE} / {@link DISCONNECT} that are ready.
 */
export type WatchCallback = (this: Watcher, status: number, events: number) => void;

/** A TAP device opened by {@link openTap}. */
export interface TapDevice {
  /** Non-blocking, close-on-exec fd of /dev/net/tun bound to the interface. */
  fd: number;
  /** The actual interface name (the kernel expands `%d` patterns). */
  name: string;
}

/** The raw shape of the addon's exports. */
interface Binding {
  listen(path: string, backlog: number): number;
  accept(fd: number): number;
  connect(path: string): number;
  socketPair(): [number, number];
  recvmsg(fd: number, buf: Uint8Array, offset: number, length: number, fdsOut: Int32Array): number;
  sendmsg(fd: number, buf: Uint8Array, offset: number, length: number, fds: ArrayLike<number> | null): number;
  watch(fd: number, events: number, callback: WatchCallback): Watcher;
  mmap(fd: number, offset: number, length: number, writable: boolean): ArrayBuffer;
  munmap(ab: ArrayBuffer): void;
  memfdCreate(name: string, size: number, seal: boolean): number;
  getSeals(fd: number): number;
  eventfd(initval: number, nonblock: boolean): number;
  openTap(name: string): TapDevice;
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

/** Where the addon may live: compiled layout (dist/lib/native) and source layout (lib/native). */
function candidatePaths(): string[] {
  const fromDist = path.join(__dirname, '..', '..', '..', 'lib', 'native', ADDON_FILE);
  const fromSource = path.join(__dirname, ADDON_FILE);
  return fromDist === fromSource ? [fromDist] : [fromDist, fromSource];
}

function loadBinding(): Binding {
  const tried = candidatePaths();
  const file = tried.find((p) => fs.existsSync(p));
  if (file === undefined) {
    throw new Error(
      `rocm-ernic: native addon ernic_native.node not found (looked in: ${tried.join(', ')}). ` +
        'Build it by running `npm ci` (or `npm run build`) in the package root.',
    );
  }
  let mod: unknown;
  try {
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    mod = require(file) as unknown;
  } catch (err) {
    throw new Error(
      `rocm-ernic: failed to load native addon ${file}: ${(err as Error).message}. ` +
        'Rebuild it with `npm ci` (or `npm run build`) in the package root.',
      { cause: err },
    );
  }
  const b = mod as Partial<Record<keyof Binding, unknown>> | null;
  const fns: (keyof Binding)[] = ['listen', 'accept', 'connect', 'socketPair', 'recvmsg', 'sendmsg',
    'watch', 'mmap', 'munmap', 'memfdCreate', 'getSeals', 'eventfd', 'openTap'];
  const missing = fns.filter((k) => b === null || typeof b[k] !== 'function');
  if (missing.length > 0) {
    throw new Error(`rocm-ernic: native addon ${file} is stale (missing ${missing.join(', ')}); ` +
      'rebuild it with `npm run build`.');
  }
  return mod as Binding;
}

const binding = loadBinding();

/** libuv `UV_READABLE`: the fd is readable (or a listening socket has a pending connection). */
export const READABLE: number = binding.READABLE;
/** libuv `UV_WRITABLE`: the fd is writable. */
export const WRITABLE: number = binding.WRITABLE;
/** libuv `UV_DISCONNECT`: the peer hung up (EPOLLRDHUP); may arrive together with READABLE. */
export const DISCONNECT: number = binding.DISCONNECT;
/** `F_SEAL_SEAL`: no further seals can be added. */
export const F_SEAL_SEAL: number = binding.F_SEAL_SEAL;
/** `F_SEAL_SHRINK`: the file cannot shrink. */
export const F_SEAL_SHRINK: number = binding.F_SEAL_SHRINK;
/** `F_SEAL_GROW`: the file cannot grow. */
export const F_SEAL_GROW: number = binding.F_SEAL_GROW;
/** `F_SEAL_WRITE`: the contents cannot be modified. */
export const F_SEAL_WRITE: number = binding.F_SEAL_WRITE;
/** Maximum number of fds in one message (the kernel's SCM_MAX_FD, 253). */
export const MAX_FDS: number = binding.MAX_FDS;
/** Minimum length of the `fdsOut` array passed to {@link recvmsg} (MAX_FDS + 1). */
export const FDS_OUT_LENGTH: number = binding.MAX_FDS + 1;

/**
 * Creates a listening AF_UNIX stream socket (non-blocking, close-on-exec):
 * `socket` + `bind` + `listen`. The caller removes a stale socket file first
 * and sets its mode/owner with `fs` afterwards.
 * @param path - filesystem path; at most 107 bytes (else ENAMETOOLONG).
 * @param backlog - listen backlog.
 * @returns the listening fd.
 * @throws NativeError e.g. EADDRINUSE when `path` exists, ENAMETOOLONG.
 */
export const listen: (path: string, backlog: number) => number = binding.listen;

/**
 * Accepts one pending connection (`accept4`, non-blocking + close-on-exec).
 * @param fd - a listening socket from {@link listen}.
 * @returns the connected fd, or -1 when nothing is pending (EAGAIN).
 */
export const accept: (fd: number) => number = binding.accept;

/**
 * Connects to an AF_UNIX stream socket (blocking connect), then switches the
 * fd to non-blocking. Close-on-exec.
 * @returns the connected fd.
 * @throws NativeError e.g. ENOENT when `path` does not exist, ECONNREFUSED.
 */
export const connect: (path: string) => number = binding.connect;

/** Creates a connected pair of non-blocking, close-on-exec AF_UNIX stream sockets. */
export const socketPair: () => [number, number] = binding.socketPair;

/**
 * One non-blocking `recvmsg` into `buf[offset, offset + length)`, collecting
 * every passed fd (SCM_RIGHTS, close-on-exec) in order into the caller-owned
 * `fdsOut`: `fdsOut[0]` = count n, `fdsOut[1..n]` = the fds. The caller owns
 * the received fds and must close the ones it does not keep. fds arrive with
 * the call that reads the first byte of the `sendmsg` that carried them.
 * @param fdsOut - Int32Array of length >= {@link FDS_OUT_LENGTH} (else TypeError);
 *   `fdsOut[0]` is set to 0 when nothing was received.
 * @param length - at least 1.
 * @returns bytes read; 0 on EOF; -1 when nothing is available (EAGAIN).
 * @throws NativeError on failure; EMSGSIZE if control data was truncated
 *   (MSG_CTRUNC; all fds received by that call are closed).
 */
export const recvmsg: (fd: number, buf: Buffer | Uint8Array, offset: number, length: number,
  fdsOut: Int32Array) => number = binding.recvmsg;

/**
 * One non-blocking `sendmsg` (MSG_NOSIGNAL, so EPIPE is thrown instead of
 * raising SIGPIPE) of `buf[offset, offset + length)`, with `fds` (if
 * non-empty, at most {@link MAX_FDS}; then `length` must be >= 1) attached as
 * one SCM_RIGHTS message. The fds stay open in this process.
 * @returns bytes sent (may be less than `length`; the fds then went with the
 *   first part), or -1 when the socket buffer is full (EAGAIN, nothing sent).
 */
export const sendmsg: (fd: number, buf: Buffer | Uint8Array, offset: number, length: number,
  fds: ArrayLike<number> | null) => number = binding.sendmsg;

/**
 * Polls `fd` on Node's libuv loop and calls `callback(status, events)` when
 * it is ready. The callback runs in its own async context (exceptions become
 * uncaught exceptions, microtasks run afterwards). An active watcher keeps the
 * process alive and stays alive itself even if the returned object is dropped,
 * until {@link Watcher.close}. Only one watcher per fd; close it before
 * closing the fd.
 * @param events - mask of {@link READABLE} / {@link WRITABLE} / {@link DISCONNECT};
 *   0 creates a stopped watcher (start it with `update`).
 * @throws NativeError (`syscall` 'uv_poll_init') e.g. EEXIST when the fd is
 *   already watched, EPERM for regular files.
 */
export const watch: (fd: number, events: number, callback: WatchCallback) => Watcher = binding.watch;

/**
 * Maps `length` bytes of `fd` at `offset` (MAP_SHARED; PROT_READ, plus
 * PROT_WRITE if `writable`) and returns an ArrayBuffer over the mapping.
 * Never write through a read-only mapping: that is a SIGSEGV, not an exception.
 * Release it with {@link munmap}; a mapping whose ArrayBuffer is garbage
 * collected first is unmapped by its finalizer.
 * @param offset - must be page aligned (EINVAL otherwise).
 * @param length - 1 .. 2^31 (RangeError otherwise).
 */
export const mmap: (fd: number, offset: number, length: number, writable: boolean) => ArrayBuffer = binding.mmap;

/**
 * Detaches `ab` (every view of it becomes length 0) and unmaps its memory
 * immediately.
 * @throws Error (code 'ERR_NOT_MAPPED') if `ab` does not come from {@link mmap}
 *   or was already unmapped.
 */
export const munmap: (ab: ArrayBuffer) => void = binding.munmap;

/**
 * Creates a close-on-exec memfd of `size` bytes (`memfd_create` + `ftruncate`).
 * With `seal`, adds F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL so the size can
 * never change (safe to mmap from another process).
 * @param name - a debugging name (shown in /proc/PID/fd as `memfd:<name>`).
 * @param size - a safe non-negative integer; may exceed 4 GiB.
 * @returns the fd.
 */
export const memfdCreate: (name: string, size: number, seal: boolean) => number = binding.memfdCreate;

/**
 * `fcntl(F_GET_SEALS)`: the mask of F_SEAL_* bits of `fd`, or -1 if the fd
 * does not support sealing at all (EINVAL, e.g. a regular file or socket).
 * Note: a memfd created with `seal = false` (no MFD_ALLOW_SEALING) reports
 * exactly {@link F_SEAL_SEAL} (sealing is forbidden), not 0; one created with
 * `seal = true` reports F_SEAL_SEAL | F_SEAL_SHRINK | F_SEAL_GROW.
 */
export const getSeals: (fd: number) => number = binding.getSeals;

/**
 * Creates a close-on-exec eventfd (`eventfd2`), non-blocking if `nonblock`.
 * Read/write its 8-byte little-endian counter with `fs.readSync`/`fs.writeSync`.
 * @param initval - initial counter value, 0 .. 2^32-1.
 */
export const eventfd: (initval: number, nonblock: boolean) => number = binding.eventfd;

/**
 * Opens /dev/net/tun (O_RDWR | O_NONBLOCK | O_CLOEXEC) and attaches a TAP
 * interface (IFF_TAP | IFF_NO_PI). Needs CAP_NET_ADMIN unless the interface
 * already exists and is owned by the caller.
 * @param name - interface name or pattern like `'tap%d'`, at most 15 bytes
 *   (ENAMETOOLONG otherwise); `''` lets the kernel choose.
 */
export const openTap: (name: string) => TapDevice = binding.openTap;
