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
 * Argument validation lives here: the exported functions check their
 * arguments, then call the raw binding, which assumes well-typed arguments
 * (it still throws a generic TypeError instead of crashing on a bad one). The
 * addon's errors carry `errno` and `syscall`; `code` (the errno name, from
 * Node's own `os.constants.errno`) is added here, in the error path only.
 *
 * The addon is loaded on the first call that needs it, not on import: the CLIs'
 * --help, the protocol codec and the exporter work where it was never built
 * (an install without a C compiler). That first call then throws one line
 * (code 'ERR_ERNIC_NATIVE') saying how to build it.
 *
 * @packageDocumentation
 */
import * as os from 'os';
import { types } from 'util';

/** An error thrown by a failing syscall of the native addon. */
type NativeError = Error & {
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

/** The raw shape of the addon's exports (arguments are validated by the wrappers below). */
import { ABI, binding } from './binding';

export { ADDON_ENV, buildAdvice, loadNative, nativeAvailable } from './binding';

/** libuv `UV_READABLE`: the fd is readable (or a listening socket has a pending connection). */
export const READABLE: number = ABI.READABLE;
/** libuv `UV_WRITABLE`: the fd is writable. */
export const WRITABLE: number = ABI.WRITABLE;
/** libuv `UV_DISCONNECT`: the peer hung up (EPOLLRDHUP); may arrive together with READABLE. */
export const DISCONNECT: number = ABI.DISCONNECT;
/** `F_SEAL_SEAL`: no further seals can be added. */
export const F_SEAL_SEAL: number = ABI.F_SEAL_SEAL;
/** `F_SEAL_SHRINK`: the file cannot shrink. */
export const F_SEAL_SHRINK: number = ABI.F_SEAL_SHRINK;
/** `F_SEAL_GROW`: the file cannot grow. */
export const F_SEAL_GROW: number = ABI.F_SEAL_GROW;
/** Maximum number of fds in one message (the kernel's SCM_MAX_FD, 253). */
export const MAX_FDS: number = ABI.MAX_FDS;
/** Minimum length of the `fdsOut` array passed to {@link recvmsg} (MAX_FDS + 1). */
export const FDS_OUT_LENGTH: number = ABI.MAX_FDS + 1;

// ------------------------------------------------------------------ errors

/** errno number -> name, from Node's own table (first name wins: EAGAIN over EWOULDBLOCK). */
const ERRNO_NAMES = new Map<number, string>();
for (const [name, num] of Object.entries(os.constants.errno)) {
  if (!ERRNO_NAMES.has(num)) ERRNO_NAMES.set(num, name);
}
// glibc (and this addon, historically) name 95 EOPNOTSUPP; Node lists ENOTSUP first.
ERRNO_NAMES.set(os.constants.errno.EOPNOTSUPP, 'EOPNOTSUPP');

function errnoName(errno: number): string {
  return ERRNO_NAMES.get(errno) ?? `E${errno}`;
}

/**
 * Cold path only (in `catch`): gives an error thrown by the addon for a
 * failing syscall (it carries `errno` and `syscall`) its `code`, the errno
 * name. Other errors pass through unchanged.
 */
function withCode(e: unknown): unknown {
  if (e instanceof Error) {
    const r = e as Error & { code?: unknown; errno?: unknown; syscall?: unknown };
    if (typeof r.errno === 'number' && typeof r.syscall === 'string' && r.code === undefined) {
      r.code = errnoName(r.errno);
    }
  }
  return e;
}

/** A {@link NativeError} raised here rather than by the addon (e.g. ENAMETOOLONG). */
function nativeError(syscall: string, errno: number, detail: string): NativeError {
  return Object.assign(new Error(`${syscall}: ${detail}`), { code: errnoName(errno), errno, syscall });
}

// --------------------------------------------------------------- arguments

const INT32_MAX = 0x7fffffff;
const UINT32_MAX = 0xffffffff;
const MAX_MAP_LENGTH = 2 ** 31;
const ALL_EVENTS = READABLE | WRITABLE | DISCONNECT;
const ENAMETOOLONG = os.constants.errno.ENAMETOOLONG;
const SUN_PATH_SIZE = 108; // sizeof(sockaddr_un.sun_path), including the NUL
const MEMFD_NAME_SIZE = 256;
const IFNAMSIZ = 16;

function typeError(fn: string, what: string): TypeError {
  return Object.assign(new TypeError(`${fn}: ${what}`), { code: 'ERR_INVALID_ARG_TYPE' });
}

function rangeError(fn: string, what: string): RangeError {
  return Object.assign(new RangeError(`${fn}: ${what}`), { code: 'ERR_OUT_OF_RANGE' });
}

/** An integer number in [min, max] (TypeError if not an integer, RangeError if outside). */
function checkInt(fn: string, name: string, v: unknown, min: number, max: number): number {
  if (typeof v !== 'number' || !Number.isInteger(v)) throw typeError(fn, `${name} must be an integer number`);
  if (v < min || v > max) throw rangeError(fn, `${name} is out of range [${min}, ${max}]`);
  return v;
}

function checkFd(fn: string, fd: unknown): void {
  checkInt(fn, 'fd', fd, 0, INT32_MAX);
}

function checkBool(fn: string, name: string, v: unknown): void {
  if (typeof v !== 'boolean') throw typeError(fn, `${name} must be a boolean`);
}

/**
 * A string without NUL characters shorter than `size` UTF-8 bytes (the C
 * buffer, including its terminator); a longer one is the syscall's
 * ENAMETOOLONG (with `detail` as the message, strerror's text by default).
 * @returns its length in bytes.
 */
function checkName(
  fn: string,
  name: string,
  v: unknown,
  size: number,
  syscall: string,
  detail?: (len: number) => string,
): number {
  if (typeof v !== 'string') throw typeError(fn, `${name} must be a string`);
  const len = Buffer.byteLength(v);
  if (len >= size) throw nativeError(syscall, ENAMETOOLONG, detail ? detail(len) : 'File name too long');
  if (v.includes('\0')) throw typeError(fn, `${name} must not contain NUL characters`);
  return len;
}

function checkUnixPath(fn: string, syscall: string, p: unknown): void {
  const len = checkName(
    fn,
    'path',
    p,
    SUN_PATH_SIZE,
    syscall,
    (n) => `socket path is ${n} bytes, at most ${SUN_PATH_SIZE - 1} allowed`,
  );
  if (len === 0) throw typeError(fn, 'path must be a non-empty string');
}

/** `buf[offset, offset + length)` lies inside the Buffer/Uint8Array `buf`; length >= minLength. */
function checkSpan(fn: string, buf: unknown, offset: unknown, length: unknown, minLength: number): void {
  if (!ArrayBuffer.isView(buf)) throw typeError(fn, 'buf must be a Buffer or Uint8Array');
  const off = checkInt(fn, 'offset', offset, 0, buf.byteLength);
  checkInt(fn, 'length', length, minLength, buf.byteLength - off);
}

// ----------------------------------------------------------------- sockets

/**
 * Creates a listening AF_UNIX stream socket (non-blocking, close-on-exec):
 * `socket` + `bind` + `listen`. The caller removes a stale socket file first
 * and sets its mode/owner with `fs` afterwards.
 * @param path - filesystem path; at most 107 bytes (else ENAMETOOLONG).
 * @param backlog - listen backlog.
 * @returns the listening fd.
 * @throws NativeError e.g. EADDRINUSE when `path` exists, ENAMETOOLONG.
 */
export function listen(path: string, backlog: number): number {
  checkUnixPath('listen', 'bind', path);
  checkInt('listen', 'backlog', backlog, 0, INT32_MAX);
  try {
    return binding().unixSocket(path, backlog);
  } catch (e) {
    throw withCode(e);
  }
}

/**
 * Accepts one pending connection (`accept4`, non-blocking + close-on-exec).
 * @param fd - a listening socket from {@link listen}.
 * @returns the connected fd, or -1 when nothing is pending (EAGAIN).
 */
export function accept(fd: number): number {
  checkFd('accept', fd);
  try {
    return binding().accept(fd);
  } catch (e) {
    throw withCode(e);
  }
}

/**
 * Connects to an AF_UNIX stream socket (blocking connect), then switches the
 * fd to non-blocking. Close-on-exec.
 * @returns the connected fd.
 * @throws NativeError e.g. ENOENT when `path` does not exist, ECONNREFUSED.
 */
export function connect(path: string): number {
  checkUnixPath('connect', 'connect', path);
  try {
    return binding().unixSocket(path, -1);
  } catch (e) {
    throw withCode(e);
  }
}

const pairOut = new Int32Array(2);

/** Creates a connected pair of non-blocking, close-on-exec AF_UNIX stream sockets. */
export function socketPair(): [number, number] {
  try {
    binding().socketPair(pairOut);
  } catch (e) {
    throw withCode(e);
  }
  return [pairOut[0] as number, pairOut[1] as number];
}

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
export function recvmsg(
  fd: number,
  buf: Buffer | Uint8Array,
  offset: number,
  length: number,
  fdsOut: Int32Array,
): number {
  checkFd('recvmsg', fd);
  checkSpan('recvmsg', buf, offset, length, 1);
  if (!types.isInt32Array(fdsOut) || fdsOut.length < FDS_OUT_LENGTH) {
    throw typeError('recvmsg', `fdsOut must be an Int32Array of length >= ${FDS_OUT_LENGTH}`);
  }
  try {
    return binding().recvmsg(fd, buf, offset, length, fdsOut);
  } catch (e) {
    throw withCode(e);
  }
}

/** The fds of a sendmsg() given as a plain array-like are copied here. */
const sendFds = new Int32Array(MAX_FDS);

/**
 * One non-blocking `sendmsg` (MSG_NOSIGNAL, so EPIPE is thrown instead of
 * raising SIGPIPE) of `buf[offset, offset + length)`, with `fds` (if
 * non-empty, at most {@link MAX_FDS}; then `length` must be >= 1) attached as
 * one SCM_RIGHTS message. The fds stay open in this process.
 * @returns bytes sent (may be less than `length`; the fds then went with the
 *   first part), or -1 when the socket buffer is full (EAGAIN, nothing sent).
 */
export function sendmsg(
  fd: number,
  buf: Buffer | Uint8Array,
  offset: number,
  length: number,
  fds: ArrayLike<number> | null,
): number {
  checkFd('sendmsg', fd);
  checkSpan('sendmsg', buf, offset, length, 0);
  let arr: Int32Array | null = null;
  let n = 0;
  if (fds !== null && fds !== undefined) {
    if (typeof fds !== 'object') throw typeError('sendmsg', 'fds must be an array-like of numbers or null');
    if (types.isInt32Array(fds)) {
      if (fds.length > MAX_FDS) throw rangeError('sendmsg', `at most ${MAX_FDS} fds per message`);
      for (let i = 0; i < fds.length; i++) {
        if ((fds[i] as number) < 0) throw rangeError('sendmsg', 'fds must be non-negative');
      }
      arr = fds;
      n = fds.length;
    } else {
      n = checkInt('sendmsg', 'fds.length', fds.length, 0, MAX_FDS);
      for (let i = 0; i < n; i++) sendFds[i] = checkInt('sendmsg', 'fds[i]', fds[i], 0, INT32_MAX);
      arr = sendFds;
    }
    if (n > 0 && length === 0) throw rangeError('sendmsg', 'fds need at least one byte of data');
  }
  try {
    return binding().sendmsg(fd, buf, offset, length, n > 0 ? arr : null, n);
  } catch (e) {
    throw withCode(e);
  }
}

// ------------------------------------------------------------------- watch

/** The object returned by {@link watch}; the addon wraps its poll handle into it. */
class PollWatcher implements Watcher {
  update(events: number): void {
    checkInt('Watcher.update', 'events', events, 0, ALL_EVENTS);
    try {
      binding().pollCtl(this, events);
    } catch (e) {
      throw withCode(e);
    }
  }

  close(): void {
    binding().pollCtl(this, -1);
  }
}

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
export function watch(fd: number, events: number, callback: WatchCallback): Watcher {
  checkFd('watch', fd);
  checkInt('watch', 'events', events, 0, ALL_EVENTS);
  if (typeof callback !== 'function') throw typeError('watch', 'callback must be a function');
  const w = new PollWatcher();
  try {
    binding().watch(w, fd, events, callback);
  } catch (e) {
    throw withCode(e);
  }
  return w;
}

// ---------------------------------------------------------- shared memory

/**
 * Maps `length` bytes of `fd` at `offset` (MAP_SHARED; PROT_READ, plus
 * PROT_WRITE if `writable`) and returns an ArrayBuffer over the mapping.
 * Never write through a read-only mapping: that is a SIGSEGV, not an exception.
 * Release it with {@link munmap}; a mapping whose ArrayBuffer is garbage
 * collected first is unmapped by its finalizer.
 * @param offset - must be page aligned (EINVAL otherwise).
 * @param length - 1 .. 2^31 (RangeError otherwise).
 */
export function mmap(fd: number, offset: number, length: number, writable: boolean): ArrayBuffer {
  checkFd('mmap', fd);
  checkInt('mmap', 'offset', offset, 0, Number.MAX_SAFE_INTEGER);
  checkInt('mmap', 'length', length, 1, MAX_MAP_LENGTH);
  checkBool('mmap', 'writable', writable);
  try {
    return binding().mmap(fd, offset, length, writable);
  } catch (e) {
    throw withCode(e);
  }
}

/**
 * The bus-error guard over every {@link mmap} mapping: a page the backing file
 * no longer has (the client shrank it) is replaced by a zero page instead of
 * ending the process with SIGBUS. The first call installs the handler;
 * `notifyFd` (an eventfd, or -1 for none) is written at every fault, and
 * `out` receives [faults so far, the last faulting address].
 */
export function busGuard(notifyFd: number, out: Float64Array): void {
  checkInt('busGuard', 'notifyFd', notifyFd, -1, INT32_MAX);
  if (!(out instanceof Float64Array) || out.length < 2) throw typeError('busGuard', 'out must be a Float64Array(2)');
  try {
    binding().busGuard(notifyFd, out);
  } catch (e) {
    throw withCode(e);
  }
}

/** [faults so far, the last faulting address] of the bus-error guard, without changing it. */
export function busGuardStatus(out: Float64Array): void {
  if (!(out instanceof Float64Array) || out.length < 2)
    throw typeError('busGuardStatus', 'out must be a Float64Array(2)');
  binding().busGuard(-2, out);
}

/** The address an {@link mmap} ArrayBuffer starts at (to place a bus-guard fault). */
export function mappingAddress(ab: ArrayBuffer): number {
  if (!types.isArrayBuffer(ab)) throw typeError('mappingAddress', 'argument must be an ArrayBuffer');
  return binding().mappingAddress(ab);
}

/**
 * Detaches `ab` (every view of it becomes length 0) and unmaps its memory
 * immediately.
 * @throws Error (code 'ERR_NOT_MAPPED') if `ab` does not come from {@link mmap}
 *   or was already unmapped.
 */
export function munmap(ab: ArrayBuffer): void {
  if (!types.isArrayBuffer(ab)) throw typeError('munmap', 'argument must be an ArrayBuffer');
  try {
    binding().munmap(ab);
  } catch (e) {
    throw withCode(e);
  }
}

/**
 * Creates a close-on-exec memfd of `size` bytes (`memfd_create` + `ftruncate`).
 * With `seal`, adds F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL so the size can
 * never change (safe to mmap from another process).
 * @param name - a debugging name (shown in /proc/PID/fd as `memfd:<name>`).
 * @param size - a safe non-negative integer; may exceed 4 GiB.
 * @returns the fd.
 */
export function memfdCreate(name: string, size: number, seal: boolean): number {
  checkName('memfdCreate', 'name', name, MEMFD_NAME_SIZE, 'memfd_create');
  checkInt('memfdCreate', 'size', size, 0, Number.MAX_SAFE_INTEGER);
  checkBool('memfdCreate', 'seal', seal);
  try {
    return binding().memfdCreate(name, size, seal);
  } catch (e) {
    throw withCode(e);
  }
}

/**
 * `fcntl(F_GET_SEALS)`: the mask of F_SEAL_* bits of `fd`, or -1 if the fd
 * does not support sealing at all (EINVAL, e.g. a regular file or socket).
 * Note: a memfd created with `seal = false` (no MFD_ALLOW_SEALING) reports
 * exactly {@link F_SEAL_SEAL} (sealing is forbidden), not 0; one created with
 * `seal = true` reports F_SEAL_SEAL | F_SEAL_SHRINK | F_SEAL_GROW.
 */
export function getSeals(fd: number): number {
  checkFd('getSeals', fd);
  try {
    return binding().getSeals(fd);
  } catch (e) {
    throw withCode(e);
  }
}

/**
 * Creates a close-on-exec eventfd (`eventfd2`), non-blocking if `nonblock`.
 * Read/write its 8-byte little-endian counter with `fs.readSync`/`fs.writeSync`.
 * @param initval - initial counter value, 0 .. 2^32-1.
 */
export function eventfd(initval: number, nonblock: boolean): number {
  checkInt('eventfd', 'initval', initval, 0, UINT32_MAX);
  checkBool('eventfd', 'nonblock', nonblock);
  try {
    return binding().eventfd(initval, nonblock);
  } catch (e) {
    throw withCode(e);
  }
}

/**
 * Duplicates `fd` (`fcntl(F_DUPFD_CLOEXEC)`): a second descriptor of the same
 * open socket or file, close-on-exec.
 * @throws NativeError e.g. EBADF, EMFILE.
 */
export function dupFd(fd: number): number {
  checkFd('dupFd', fd);
  try {
    return binding().dupFd(fd);
  } catch (e) {
    throw withCode(e);
  }
}

/**
 * Opens /dev/net/tun (O_RDWR | O_NONBLOCK | O_CLOEXEC) and attaches a TAP
 * interface (IFF_TAP | IFF_NO_PI). Needs CAP_NET_ADMIN unless the interface
 * already exists and is owned by the caller.
 * @param name - interface name or pattern like `'tap%d'`, at most 15 bytes
 *   (ENAMETOOLONG otherwise); `''` lets the kernel choose.
 * @param offloads - omitted: a plain TAP. A TUN_F_* mask (0..0xffff): the TAP
 *   also gets IFF_VNET_HDR (every frame read or written starts with a 10-byte
 *   virtio_net_hdr) and TUNSETOFFLOAD with these bits.
 */
export function openTap(name: string, offloads?: number): TapDevice {
  checkName('openTap', 'name', name, IFNAMSIZ, 'ioctl(TUNSETIFF)');
  if (offloads !== undefined && (!Number.isInteger(offloads) || offloads < 0 || offloads > 0xffff)) {
    throw new TypeError(`openTap: offloads must be a TUN_F_* mask (0..0xffff), got ${String(offloads)}`);
  }
  const ifname = Buffer.alloc(IFNAMSIZ); // in: the requested name; out: the actual one
  ifname.write(name);
  let fd: number;
  try {
    fd = binding().openTap(ifname, offloads ?? -1);
  } catch (e) {
    throw withCode(e);
  }
  return { fd, name: ifname.toString('utf8', 0, ifname.indexOf(0)) };
}
