// Test-only helpers for the vfio-user server specs: a raw socket peer with its
// own tiny framer (it shares no code with lib/vfio-user/transport.ts, so a
// framing bug there cannot hide here), message builders on top of the
// independent Bytes builder, and server setup.

import * as fs from 'fs';
import * as native from '../../lib/native';
import { VfioUserServer } from '../../lib/vfio-user/server';
import type { Logger } from '../../lib/log';
import type { SessionLimits } from '../../lib/vfio-user/session';
import { Bytes, msg } from '../support/bytes';
import { ScratchDevice } from '../support/scratch-device';
import { tempSocketPath } from '../support/fds';
import { CMD, FLAG_REPLY } from '../protocol/codec-helpers';

// ---- numbers, written out from docs/vfio-user-protocol.md (not imported from the code under test) ----

// Command numbers, reply flags and EINVAL: the protocol specs' (../protocol/codec-helpers.ts).
export { CMD, EINVAL, FLAG_NO_REPLY, FLAG_REPLY } from '../protocol/codec-helpers';

export const FLAG_ERROR = 0x20;

export const ENOENT = 2;
export const EIO = 5;
export const ENOSPC = 28;

export const IRQ = {
  DATA_NONE: 0x1,
  DATA_BOOL: 0x2,
  DATA_EVENTFD: 0x4,
  ACTION_MASK: 0x8,
  ACTION_UNMASK: 0x10,
  ACTION_TRIGGER: 0x20,
} as const;

/** The JSON QEMU 10.1-11.x sends with VERSION (vfio-user-protocol.md 3.3): QEMU's spaced compact form. */
export const QEMU_VERSION_JSON =
  '{"capabilities": {"max_msg_fds": 16, "max_data_xfer_size": 1048576, "pgsizes": 4096, ' +
  '"max_dma_maps": 65535, "write_multiple": true, "migration": {"pgsize": 4096, "max_bitmap_size": 268435456}}}';

// ---- payload builders ------------------------------------------------------------------

export function versionPayload(major: number, minor: number, json?: string, nul = true): Buffer {
  const b = new Bytes().u16(major).u16(minor);
  if (json !== undefined) {
    b.text(json);
    if (nul) b.u8(0);
  }
  return b.build();
}

export function dmaMapPayload(
  flags: number,
  offset: number | bigint,
  address: number | bigint,
  size: number | bigint,
  argsz = 32,
): Buffer {
  return new Bytes().u32(argsz).u32(flags).u64(offset).u64(address).u64(size).build();
}

export function dmaUnmapPayload(flags: number, address: number | bigint, size: number | bigint, argsz = 24): Buffer {
  return new Bytes().u32(argsz).u32(flags).u64(address).u64(size).build();
}

/** The 16-byte argsz/flags/a/b struct of GET_INFO, GET_IRQ_INFO and GET_REGION_IO_FDS. */
export function info16(argsz: number, flags: number, a: number, b: number): Buffer {
  return new Bytes().u32(argsz).u32(flags).u32(a).u32(b).build();
}

export function regionInfoPayload(argsz: number, index: number): Buffer {
  return new Bytes().u32(argsz).u32(0).u32(index).u32(0).u64(0).u64(0).build();
}

export function setIrqsPayload(
  flags: number,
  index: number,
  start: number,
  count: number,
  data: number[] = [],
  argsz = 20 + data.length,
): Buffer {
  return new Bytes().u32(argsz).u32(flags).u32(index).u32(start).u32(count).raw(data).build();
}

export function regionAccessPayload(offset: number | bigint, region: number, count: number, data?: Buffer): Buffer {
  const b = new Bytes().u64(offset).u32(region).u32(count);
  if (data) b.raw(data);
  return b.build();
}

// ---- a raw peer ---------------------------------------------------------------------------

/** One message as it came off the socket (copies). */
export interface Msg {
  readonly id: number;
  readonly command: number;
  readonly size: number;
  readonly flags: number;
  readonly error: number;
  readonly payload: Buffer;
}

/**
 * A client end that sends exact bytes (with fds on exactly the sendmsg asked for)
 * and parses the server's messages with its own minimal framer.
 */
export class RawPeer {
  readonly fd: number;
  readonly inbox: Msg[] = [];
  /** fds the server sent us (it never should): kept to assert on. */
  readonly receivedFds: number[] = [];
  /** When set, messages go here (payload is a view valid during the call) instead of the inbox. */
  sink: ((m: Msg) => void) | null = null;
  eof = false;
  #watcher: native.Watcher | null;
  #buf = Buffer.alloc(1 << 16);
  #start = 0;
  #end = 0;
  readonly #fdsOut = new Int32Array(native.FDS_OUT_LENGTH);
  #wake: (() => void)[] = [];
  #closed = false;

  constructor(fd: number) {
    this.fd = fd;
    const self = this;
    this.#watcher = native.watch(fd, native.READABLE, function onPeerReadable() {
      self.#read();
    });
  }

  static connect(path: string): RawPeer {
    return new RawPeer(native.connect(path));
  }

  /** Connect and negotiate VERSION (QEMU's JSON, minor 0). */
  static async negotiated(path: string): Promise<RawPeer> {
    const p = RawPeer.connect(path);
    const r = await p.request(0xfff0, CMD.VERSION, versionPayload(0, 0, QEMU_VERSION_JSON));
    if (r.flags & FLAG_ERROR) throw new Error(`VERSION failed: errno ${r.error}`);
    return p;
  }

  /** Stop reading (the server's replies pile up in the socket). */
  pause(): void {
    this.#watcher?.update(0);
  }

  resume(): void {
    this.#watcher?.update(native.READABLE);
  }

  /** One sendmsg of all of `bytes`, fds attached; throws if the socket did not take it all at once. */
  send(bytes: Buffer, fds: readonly number[] = []): void {
    const n = native.sendmsg(this.fd, bytes, 0, bytes.length, fds.length ? fds : null);
    if (n !== bytes.length) throw new Error(`short send: ${n} of ${bytes.length}`);
  }

  /** Send all of `bytes` (fds on the first sendmsg), waiting while the socket is full. */
  async sendAll(bytes: Buffer, fds: readonly number[] = []): Promise<void> {
    let at = 0;
    let first = true;
    while (at < bytes.length) {
      const n = native.sendmsg(this.fd, bytes, at, bytes.length - at, first && fds.length ? fds : null);
      if (n < 0) {
        await new Promise((r) => setTimeout(r, 1));
        continue;
      }
      first = false;
      at += n;
    }
  }

  /** Send a command and wait for the next message, which must answer it. */
  async request(
    id: number,
    command: number,
    payload: Buffer = Buffer.alloc(0),
    fds: readonly number[] = [],
    flags = 0,
  ): Promise<Msg> {
    this.send(msg(id, command, flags, payload), fds);
    const m = await this.next();
    if (m.id !== id || m.command !== command) {
      throw new Error(`expected the reply to id ${id} cmd ${command}, got id ${m.id} cmd ${m.command}`);
    }
    return m;
  }

  /** The next message from the server. */
  async next(timeoutMs = 3000): Promise<Msg> {
    await this.until(() => this.inbox.length > 0 || this.eof, timeoutMs, 'a message');
    const m = this.inbox.shift();
    if (!m) throw new Error('the server closed the connection instead of replying');
    return m;
  }

  /** Resolve when the server has closed the connection (EOF seen). */
  async waitEof(timeoutMs = 3000): Promise<void> {
    await this.until(() => this.eof, timeoutMs, 'EOF');
  }

  /** Wait until `cond` holds, re-checking after every read and every few ms. */
  async until(cond: () => boolean, timeoutMs: number, what: string): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (!cond()) {
      if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
      await new Promise<void>((resolve) => {
        const t = setTimeout(resolve, 5);
        this.#wake.push(() => {
          clearTimeout(t);
          resolve();
        });
      });
    }
  }

  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    this.#watcher?.close();
    this.#watcher = null;
    fs.closeSync(this.fd);
    for (const fd of this.receivedFds) fs.closeSync(fd);
    this.receivedFds.length = 0;
  }

  #read(): void {
    for (;;) {
      if (this.#buf.length - this.#end < 4096) this.#compact();
      let n: number;
      try {
        n = native.recvmsg(this.fd, this.#buf, this.#end, this.#buf.length - this.#end, this.#fdsOut);
      } catch {
        n = 0;
      }
      if (n < 0) break;
      for (let k = 1; k <= this.#fdsOut[0]!; k++) this.receivedFds.push(this.#fdsOut[k]!);
      if (n === 0) {
        this.eof = true;
        this.#watcher?.close();
        this.#watcher = null;
        break;
      }
      this.#end += n;
      this.#parse();
    }
    const wake = this.#wake;
    this.#wake = [];
    for (const w of wake) w();
  }

  #parse(): void {
    for (;;) {
      const avail = this.#end - this.#start;
      if (avail < 16) return;
      const b = this.#buf;
      const s = this.#start;
      const size = b.readUInt32LE(s + 4);
      if (size < 16) throw new Error(`server sent msg_size ${size}`);
      if (avail < size) {
        if (size > this.#buf.length) this.#grow(size);
        return;
      }
      const m: Msg = {
        id: b.readUInt16LE(s),
        command: b.readUInt16LE(s + 2),
        size,
        flags: b.readUInt32LE(s + 8),
        error: b.readUInt32LE(s + 12),
        payload: this.sink ? b.subarray(s + 16, s + size) : Buffer.from(b.subarray(s + 16, s + size)),
      };
      this.#start += size;
      if (this.sink) this.sink(m);
      else this.inbox.push(m);
    }
  }

  #compact(): void {
    this.#buf.copy(this.#buf, 0, this.#start, this.#end);
    this.#end -= this.#start;
    this.#start = 0;
  }

  #grow(size: number): void {
    const next = Buffer.alloc(Math.max(size * 2, this.#buf.length));
    this.#buf.copy(next, 0, this.#start, this.#end);
    this.#end -= this.#start;
    this.#start = 0;
    this.#buf = next;
  }
}

// ---- assertions helpers --------------------------------------------------------------------

/** True for a header-only error reply to (id, command) with this errno. */
export function isErrorReply(m: Msg, id: number, command: number, errno: number): boolean {
  return (
    m.id === id && m.command === command && m.size === 16 && m.flags === (FLAG_REPLY | FLAG_ERROR) && m.error === errno
  );
}

export function describeMsg(m: Msg): string {
  return `id ${m.id} cmd ${m.command} size ${m.size} flags 0x${m.flags.toString(16)} error ${m.error}`;
}

/** The eventfd's counter (read and reset), 0 when it was not signalled. */
export function eventfdRead(fd: number): number {
  const b = Buffer.alloc(8);
  try {
    fs.readSync(fd, b, 0, 8, null);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'EAGAIN') return 0;
    throw e;
  }
  return Number(b.readBigUInt64LE(0));
}

// ---- server setup --------------------------------------------------------------------------

export interface TestServer {
  readonly server: VfioUserServer;
  readonly device: ScratchDevice;
  readonly path: string;
}

export async function startServer(tag: string, limits?: Partial<SessionLimits>, log?: Logger): Promise<TestServer> {
  const path = tempSocketPath(tag);
  const device = new ScratchDevice();
  const server = new VfioUserServer({
    socketPath: path,
    device,
    ...(limits ? { limits } : {}),
    ...(log ? { log } : {}),
  });
  await server.listen();
  return { server, device, path };
}

/** Wait until the server has no attached session (the previous client is fully cleaned up). */
export async function waitDetached(server: VfioUserServer, timeoutMs = 3000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (server.session !== null) {
    if (Date.now() > deadline) throw new Error('the server kept the session');
    await new Promise((r) => setTimeout(r, 2));
  }
}
