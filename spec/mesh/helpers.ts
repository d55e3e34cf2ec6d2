// Test helpers for the mesh: a logger that keeps what it is told, meshes on
// loopback, waiting for events, a raw peer that speaks frames by hand, and a
// deliberately simple big-endian byte builder for golden bytes (it shares no
// code with the codec under test).

import { EventEmitter } from 'node:events';
import * as net from 'node:net';
import { Logger } from '../../lib/log';
import { encodeFrameHeader } from '../../lib/mesh/codec';
import { FrameParser } from '../../lib/mesh/frame-parser';
import { Mesh } from '../../lib/mesh/mesh';
import type { MeshStartOptions } from '../../lib/mesh/exposure';
import type { MeshOptions } from '../../lib/mesh/mesh-types';
import { FrameHeader } from '../../lib/mesh/messages';
import { MeshError } from '../../lib/mesh/errors';
import { MeshCredentials, MeshTls } from '../../lib/mesh/tls';
import { ipv4Gid } from '../../lib/rdma/address';
import { Cq, Cqe, v4, VerbsGuest } from '../support/ionic/rdma-verbs';
import { MeshBackend } from '../../lib/backends/mesh';

export class Be {
  private readonly parts: number[] = [];
  u8(v: number): this {
    this.parts.push(v & 0xff);
    return this;
  }
  u16(v: number): this {
    return this.u8(v >>> 8).u8(v);
  }
  u32(v: number): this {
    return this.u16((v >>> 16) & 0xffff).u16(v & 0xffff);
  }
  le16(v: number): this {
    return this.u8(v).u8(v >>> 8);
  }
  le32(v: number): this {
    return this.le16(v & 0xffff).le16((v >>> 16) & 0xffff);
  }
  le64(v: bigint): this {
    return this.le32(Number(v & 0xffffffffn)).le32(Number((v >> 32n) & 0xffffffffn));
  }
  raw(bytes: Iterable<number>): this {
    for (const x of bytes) this.u8(x);
    return this;
  }
  hex(h: string): this {
    return this.raw(Buffer.from(h, 'hex'));
  }
  text(s: string, width: number): this {
    const b = Buffer.from(s, 'ascii');
    this.raw(b);
    for (let i = b.length; i < width; i++) this.u8(0);
    return this;
  }
  zeros(n: number): this {
    for (let i = 0; i < n; i++) this.u8(0);
    return this;
  }
  build(): Buffer {
    return Buffer.from(this.parts);
  }
}

interface LogLine {
  readonly level: 'error' | 'warn' | 'info' | 'debug';
  readonly message: string;
}

/** A Logger that keeps every line (and can print them with MESH_TEST_LOG=1). */
export class MemoryLog implements Logger {
  readonly lines: LogLine[] = [];
  readonly debugEnabled = true;
  constructor(private readonly name = '') {}
  #add(level: LogLine['level'], message: string): void {
    this.lines.push({ level, message });
    if (this.lines.length > 5000) this.lines.splice(0, 1000);
    if (process.env['MESH_TEST_LOG'] === '1') process.stderr.write(`[${this.name}] ${level}: ${message}\n`);
  }
  error(m: string): void {
    this.#add('error', m);
  }
  warn(m: string): void {
    this.#add('warn', m);
  }
  info(m: string): void {
    this.#add('info', m);
  }
  debug(m: string): void {
    this.#add('debug', m);
  }
  has(re: RegExp, level?: LogLine['level']): boolean {
    return this.lines.some((l) => re.test(l.message) && (level === undefined || l.level === level));
  }
}

/** Resolve on the first `event` whose arguments pass `pred`; reject after `ms` (wall clock, only as a hang guard). */
export function waitFor<A extends unknown[]>(
  emitter: EventEmitter,
  event: string,
  pred: (...args: A) => boolean = () => true,
  ms = 8000,
): Promise<A> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      emitter.removeListener(event, on);
      reject(new Error(`timed out waiting for '${event}'`));
    }, ms);
    function on(...args: unknown[]): void {
      if (!pred(...(args as A))) return;
      clearTimeout(timer);
      emitter.removeListener(event, on);
      resolve(args as A);
    }
    emitter.on(event, on);
  });
}

/** Resolve once `cond()` holds, checking after each turn of I/O (a hang guard only; no timing is asserted). */
export async function until(cond: () => boolean, what: string, ms = 8000): Promise<void> {
  const start = Date.now();
  while (!cond()) {
    if (Date.now() - start > ms) throw new Error(`timed out waiting until ${what}`);
    await new Promise((r) => setTimeout(r, 5));
  }
}

/** Wait until `cq` of guest `v` has given `n` CQEs (appended to `got`; the model is polled after each turn of I/O; a hang guard only). */
export async function cqesOf(v: VerbsGuest, cq: Cq, n: number, got: Cqe[] = []): Promise<Cqe[]> {
  await until(
    () => {
      got.push(...v.drain(cq));
      return got.length >= n;
    },
    `${n} CQEs on CQ ${cq.id}`,
    10_000,
  );
  return got;
}

export const LOCAL = '127.0.0.1';

export async function startManager(extra: Partial<MeshStartOptions> = {}, host = LOCAL): Promise<Mesh> {
  return Mesh.start({
    config: { role: 'manager', listen: { host, port: 0 } },
    log: new MemoryLog('manager'),
    ...extra,
  });
}

export async function startWorker(
  managerPort: number,
  extra: Partial<MeshStartOptions> = {},
  host = LOCAL,
): Promise<Mesh> {
  return Mesh.start({
    config: { role: 'worker', manager: { kind: host.includes(':') ? 'ipv6' : 'ipv4', host, port: managerPort } },
    peerListen: { host },
    log: new MemoryLog('worker'),
    ...extra,
  });
}

/** Two servers in one process joined by the mesh, each with its own device and guest model. */
export interface MeshGuests {
  readonly manager: Mesh;
  readonly worker: Mesh;
  /** The manager's guest (IPv4 `ipA`) and the worker's (`ipB`). */
  readonly a: VerbsGuest;
  readonly b: VerbsGuest;
  /** Closes the guests, then the meshes. */
  close(): Promise<void>;
}

/**
 * A manager and a worker advertising `ipA` and `ipB` as their guests' GIDs,
 * once each knows the other's, and a guest model booted on each (lost-peer
 * deadline 1.5 s, RNR 1 s, so the specs reach them quickly). Whatever was
 * started is closed again if a later step fails.
 */
export async function meshGuests(
  ipA: string,
  ipB: string,
  arenaPages?: number,
  credentials: MeshCredentials | null = null,
): Promise<MeshGuests> {
  const made: { close(): Promise<void> }[] = [];
  const closeAll = async (): Promise<void> => {
    for (const m of made.reverse()) await m.close();
    made.length = 0;
  };
  try {
    const manager = await startManager({ guestGids: [ipv4Gid(v4(ipA))], credentials });
    made.push(manager);
    const worker = await startWorker(manager.listenPort, { guestGids: [ipv4Gid(v4(ipB))], credentials });
    made.push(worker);
    await until(
      () => manager.lookupGid(ipv4Gid(v4(ipB))) === 1 && worker.lookupGid(ipv4Gid(v4(ipA))) === 0,
      'GIDs fanned out',
    );
    const options = { lostPeerMs: 1500, rnrMs: 1000 };
    const a = await VerbsGuest.boot({
      rdmaBackend: new MeshBackend(manager, options),
      ...(arenaPages ? { arenaPages } : {}),
    });
    made.push(a);
    const b = await VerbsGuest.boot({
      rdmaBackend: new MeshBackend(worker, options),
      ...(arenaPages ? { arenaPages } : {}),
    });
    made.push(b);
    return { manager, worker, a, b, close: closeAll };
  } catch (e) {
    await closeAll();
    throw e;
  }
}

/** Start a worker and wait until it is registered. */
export async function joinWorker(managerPort: number, extra: Partial<MeshOptions> = {}, host = LOCAL): Promise<Mesh> {
  const w = await startWorker(managerPort, extra, host);
  if (w.nodeId === undefined) await waitFor(w, 'registered');
  return w;
}

/** A hand-driven peer: a socket plus a parser, frames collected as they come. */
export class RawPeer {
  readonly frames: { header: FrameHeader; body: Buffer }[] = [];
  error: MeshError | undefined;
  closed = false;
  readonly events = new EventEmitter();
  readonly parser: FrameParser;

  private constructor(readonly socket: net.Socket) {
    this.parser = new FrameParser({
      onFrame: (header, body) => {
        this.frames.push({ header, body: Buffer.from(body) });
        this.events.emit('frame', header, body);
        return true;
      },
      onError: (e) => {
        this.error = e;
      },
    });
    socket.on('data', (c: Buffer) => this.parser.push(c));
    socket.on('close', () => {
      // Its bodies count against the process-wide budget the meshes in this process share.
      this.parser.destroy();
      this.closed = true;
      this.events.emit('close');
    });
    socket.on('error', () => undefined);
  }

  /**
   * `localAddress`: another loopback source (127.0.0.2, ...) to play a second
   * host; `credentials`: a peer that holds the mesh's key (TLS as the mesh
   * speaks it), i.e. an authenticated one.
   */
  static connect(port: number, host = LOCAL, localAddress?: string, credentials?: MeshCredentials): Promise<RawPeer> {
    return new Promise((resolve, reject) => {
      const s = net.connect({ host, port, ...(localAddress ? { localAddress } : {}) }, () => {
        if (!credentials) return resolve(new RawPeer(s));
        const t = new MeshTls(credentials).secure(s);
        t.once('secureConnect', () => {
          t.off('error', reject);
          resolve(new RawPeer(t));
        });
        t.once('error', reject);
      });
      s.once('error', reject);
    });
  }

  send(type: number, body: Buffer, fields: { src?: number; dst?: number; seq?: number } = {}): void {
    this.socket.write(
      Buffer.concat([
        encodeFrameHeader({
          type,
          length: body.length,
          seq: fields.seq ?? 1,
          src: fields.src ?? 0,
          dst: fields.dst ?? 0,
        }),
        body,
      ]),
    );
  }

  write(bytes: Buffer): void {
    this.socket.write(bytes);
  }

  waitFrame(type: number): Promise<{ header: FrameHeader; body: Buffer }> {
    const have = this.frames.find((f) => f.header.type === type);
    if (have) return Promise.resolve(have);
    return waitFor<[FrameHeader, Buffer]>(this.events, 'frame', (h) => h.type === type).then(([header, body]) => ({
      header,
      body: Buffer.from(body),
    }));
  }

  waitClose(): Promise<void> {
    if (this.closed) return Promise.resolve();
    return waitFor(this.events, 'close').then(() => undefined);
  }

  destroy(): void {
    this.socket.destroy();
  }
}
