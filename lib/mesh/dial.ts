// Outgoing connections and listening, for the mesh (the C rocm-ernic's "peer
// connect" and "accept" threads become these asynchronous functions).
//
// A host name is resolved and each address it resolves to is tried in turn,
// each attempt bounded by CONNECT_TIMEOUT_MS; an IP literal (an IPv6 one
// possibly with a %zone) is tried as is. A listener with no host takes every
// address of both families, or IPv4 alone when the host has no IPv6.

import * as dns from 'node:dns';
import * as fs from 'node:fs';
import * as net from 'node:net';
import * as native from '../native';
import { formatHostPort, parseHost } from './address';
import { CONNECT_TIMEOUT_MS, MAX_RESOLVED_ADDRESSES } from './limits';

/**
 * Host name -> addresses, in the order to try them. `admit`, when the
 * resolver carries one, vets every address (resolved or literal) before it
 * is dialled: null to go ahead, else why not (the mesh without credentials
 * dials loopback only).
 */
export type Resolver = ((host: string) => Promise<string[]>) & {
  readonly admit?: (address: string, port: number) => string | null;
  /**
   * Opens the socket to an admitted address (a TLS client socket when the
   * mesh has credentials: made by tls.connect itself, so that its decrypted
   * bytes too are read where the connection asks). net.connect when absent.
   */
  readonly open?: SocketOpener;
};

/** Opens a socket to address:port whose reads go through `onread`. */
type SocketOpener = (address: string, port: number, onread: OnRead) => net.Socket;

/** The system resolver (getaddrinfo), in the order it answers. */
export const systemResolver: Resolver = async (host) => {
  const found = await dns.promises.lookup(host, { all: true, verbatim: true });
  return found.map((a) => a.address);
};

type DialResult =
  | { readonly ok: true; readonly socket: net.Socket; readonly address: string }
  | { readonly ok: false; readonly error: string };

/** Lets a caller abandon a dial in progress (the mesh is closing, the node died). */
export interface DialCancel {
  cancelled: boolean;
}

/** Connect to host:port, trying each address; never rejects. */
export async function dial(
  host: string,
  port: number,
  resolve: Resolver,
  cancel: DialCancel,
  timeoutMs = CONNECT_TIMEOUT_MS,
): Promise<DialResult> {
  const parsed = parseHost(host);
  if (!parsed) return { ok: false, error: `'${host}' is not a host` };
  let addresses: string[];
  if (parsed.kind === 'name') {
    try {
      addresses = (await resolve(parsed.host)).slice(0, MAX_RESOLVED_ADDRESSES);
    } catch (e) {
      return { ok: false, error: `cannot resolve '${host}': ${(e as NodeJS.ErrnoException).code ?? String(e)}` };
    }
    if (addresses.length === 0) return { ok: false, error: `'${host}' resolves to no address` };
  } else {
    addresses = [parsed.host];
  }
  const errors: string[] = [];
  for (const address of addresses) {
    if (cancel.cancelled) return { ok: false, error: 'cancelled' };
    const refused = resolve.admit?.(address, port) ?? null;
    if (refused !== null) {
      errors.push(`${formatHostPort(address, port)}: ${refused}`);
      continue;
    }
    const r = await connectOnce(address, port, timeoutMs, resolve.open);
    if (typeof r !== 'string') {
      if (cancel.cancelled) {
        r.destroy();
        return { ok: false, error: 'cancelled' };
      }
      return { ok: true, socket: r, address };
    }
    errors.push(`${formatHostPort(address, port)}: ${r}`);
  }
  return { ok: false, error: errors.join('; ') };
}

/** Where a dialled socket's reads go (set by the connection that takes it). */
interface ReadSink {
  /** Bytes read into the socket's own reused buffer. */
  fn: ((chunk: Buffer) => void) | null;
  /** Where the next read should land instead (the rest of a large frame body), or null for the reused buffer. */
  target: (() => Buffer | null) | null;
  /** `n` bytes were read into the buffer `target` gave. */
  inPlace: ((n: number) => void) | null;
  /**
   * The most the next read into the reused buffer should take, or 0 for all
   * of it: after a frame read in place, just the next frame's head, so that
   * a large frame's body goes in place from its first byte instead of
   * arriving in the reused buffer (and being copied out of it).
   */
  limit: (() => number) | null;
  /** Bytes read before `fn` was set, copied, for `fn` to take first. */
  readonly early: { chunks: Buffer[]; bytes: number };
}

export const READ_SINK = Symbol('mesh read sink');
export type SocketWithSink = net.Socket & { [READ_SINK]?: ReadSink };
/** One reused read buffer per dialled socket. */
const READ_BUFFER_BYTES = 256 * 1024;

export type OnRead = { buffer: () => Uint8Array; callback: (n: number, buf: Uint8Array) => boolean };

/**
 * A socket made by `make` that reads where its connection asks. Reads land in
 * one reused buffer (no fresh 64 KiB buffer per read for the GC to chase); the
 * connection that takes the socket sets where they go (READ_SINK) and its
 * parser copies what it keeps. While a large frame body is being assembled,
 * Node asks (after each read) where the next read goes: straight into that
 * body, so its bytes are copied by the kernel only.
 */
function withSink(make: (onread: OnRead) => net.Socket): net.Socket {
  const sink: ReadSink = { fn: null, target: null, inPlace: null, limit: null, early: { chunks: [], bytes: 0 } };
  // Its own ArrayBuffer (larger than Buffer's pool slabs): a read landed here iff its buffer is this one's.
  const readBuffer = Buffer.allocUnsafe(READ_BUFFER_BYTES);
  const store = readBuffer.buffer;
  let head = readBuffer;
  const socket = make({
    buffer: () => {
      const t = sink.target?.();
      if (t) return t;
      const k = sink.limit?.() ?? 0;
      if (k <= 0 || k >= READ_BUFFER_BYTES) return readBuffer;
      if (head.length !== k) head = readBuffer.subarray(0, k);
      return head;
    },
    callback: (n: number, buf: Uint8Array) => {
      if (buf.buffer !== store) sink.inPlace?.(n);
      else if (sink.fn) sink.fn(Buffer.from(store, buf.byteOffset, n));
      else if (sink.early.bytes + n <= READ_BUFFER_BYTES) {
        // Before the connection reads (a TLS peer's first frames can come with its handshake's last flight).
        sink.early.chunks.push(Buffer.from(buf.subarray(0, n)));
        sink.early.bytes += n;
      } else socket.destroy(new Error('the peer sent over 256 KiB before its link was open'));
      return true;
    },
  });
  (socket as SocketWithSink)[READ_SINK] = sink;
  return socket;
}

/** A plain TCP socket. */
export const openPlain: SocketOpener = (address, port, onread) =>
  net.connect({ host: address, port, onread } as net.NetConnectOpts);

/**
 * An accepted socket (from a listener with pauseOnConnect, nothing read yet)
 * as one that reads where its connection asks: Node offers `onread` only to
 * sockets it creates itself, so a duplicate of the fd goes into a new Socket
 * and the accepted one is closed (closing a descriptor does not end the TCP
 * connection while another refers to it). Null when that failed: use the
 * accepted socket as it is.
 */
export function rewrapAccepted(accepted: net.Socket): net.Socket | null {
  const fd = (accepted as unknown as { _handle?: { fd?: unknown } })._handle?.fd;
  if (typeof fd !== 'number' || fd < 0) return null;
  let dup: number;
  try {
    dup = native.dupFd(fd);
  } catch {
    return null;
  }
  let socket: net.Socket;
  try {
    socket = withSink(
      (onread) => new net.Socket({ fd: dup, readable: true, writable: true, onread } as net.SocketConstructorOpts),
    );
  } catch {
    fs.closeSync(dup);
    return null;
  }
  accepted.destroy();
  return socket;
}

/** One attempt at one address: the connected socket, or why not. */
function connectOnce(
  address: string,
  port: number,
  timeoutMs: number,
  open: SocketOpener = openPlain,
): Promise<net.Socket | string> {
  return new Promise((resolve) => {
    const socket = withSink((onread) => open(address, port, onread));
    const timer = setTimeout(() => {
      socket.destroy();
      finish(`no answer in ${timeoutMs} ms`);
    }, timeoutMs);
    timer.unref();
    let done = false;
    function finish(result: net.Socket | string): void {
      if (done) return;
      done = true;
      clearTimeout(timer);
      socket.removeListener('connect', onConnect);
      socket.removeListener('error', onError);
      resolve(result);
    }
    function onConnect(): void {
      finish(socket);
    }
    function onError(err: NodeJS.ErrnoException): void {
      socket.destroy();
      finish(err.code ?? err.message);
    }
    socket.once('connect', onConnect);
    socket.once('error', onError);
  });
}

/** Listen on host:port, or on every address of both families when host is undefined. Resolves with the bound port. */
export async function listen(
  server: net.Server,
  host: string | undefined,
  port: number,
  backlog: number,
): Promise<number> {
  const attempt = (h: string, ipv6Only: boolean): Promise<NodeJS.ErrnoException | undefined> =>
    new Promise((resolve) => {
      const onError = (err: NodeJS.ErrnoException): void => {
        server.removeListener('listening', onListening);
        resolve(err);
      };
      const onListening = (): void => {
        server.removeListener('error', onError);
        resolve(undefined);
      };
      server.once('error', onError);
      server.once('listening', onListening);
      server.listen({ host: h, port, backlog, ipv6Only });
    });
  let err: NodeJS.ErrnoException | undefined;
  if (host === undefined) {
    err = await attempt('::', false);
    if (err && (err.code === 'EAFNOSUPPORT' || err.code === 'EADDRNOTAVAIL')) err = await attempt('0.0.0.0', false);
  } else {
    err = await attempt(host, false);
  }
  if (err) throw new Error(`cannot listen on ${formatHostPort(host ?? '*', port)}: ${err.code ?? err.message}`);
  const a = server.address();
  return typeof a === 'object' && a ? a.port : port;
}

/** '::ffff:10.0.0.1' -> '10.0.0.1' (what a dual-stack listener reports for an IPv4 peer). */
export function unmapAddress(address: string): string {
  const m = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(address);
  return m ? m[1]! : address;
}
