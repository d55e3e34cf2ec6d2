// A vfio-user client in TypeScript, for tests, tools and benchmarks: connect,
// negotiate, share memfd guest RAM, access regions, wire interrupt eventfds.
// Requests are matched to replies by msg_id; several may be in flight.

import * as fs from 'fs';
import { Command, DmaMapFlag, Errno, HeaderFlag, SetIrqsFlag } from '../../protocol/constants';
import {
  vfio_irq_info,
  vfio_irq_set,
  vfio_region_info,
  vfio_user_device_info,
  vfio_user_dma_map,
  vfio_user_dma_unmap,
} from '../../protocol/layouts';
import { MAX_FDS_PER_MSG, MAX_MSG_SIZE } from '../../protocol/limits';
import type { Body, Header, Message, Reply, Request } from '../../protocol/messages';
import { decodeBody } from '../../protocol/parser';
import { commandOfBody, writeErrorReply, writeMessage } from '../../protocol/serializer';
import { checkVersionReply, parseCapabilities, PeerLimits, peerLimits } from '../../protocol/version';
import { errnoName } from '../../protocol/constants';
import * as native from '../native';
import { ProtocolError } from '../../protocol/errors';
import { RawHeader, Transport, TransportHandler } from './transport';

/** An error reply from the server, or a reply that did not decode. */
export class VfioUserError extends Error {
  constructor(
    message: string,
    readonly errno: number,
    readonly command: number,
  ) {
    super(message);
  }
}

export interface ClientOptions {
  /** Capabilities JSON object sent with VERSION (default: QEMU 11.1's). */
  readonly capabilities?: Record<string, unknown>;
  readonly minor?: number;
}

/** The capabilities QEMU 11.1 proposes (docs/vfio-user-protocol.md 3.3). */
export const QEMU_CAPABILITIES = {
  pgsizes: 4096,
  max_msg_fds: 16,
  max_dma_maps: 65535,
  max_data_xfer_size: 1048576,
  migration: { max_bitmap_size: 268435456, pgsize: 4096 },
  write_multiple: true,
};

interface Pending {
  resolve(m: Message<Reply>): void;
  reject(e: Error): void;
}

export class VfioUserClient implements TransportHandler {
  readonly transport: Transport;
  #nextId = 0;
  readonly #pending = new Map<number, Pending>();
  #closedReason: string | null = null;
  #server: PeerLimits | null = null;
  /** Called for each server-to-client command (we answer them with an error). */
  onServerCommand: ((h: RawHeader) => void) | null = null;
  /** Called once when the connection closes. */
  onClose: ((reason: string) => void) | null = null;

  private constructor(fd: number) {
    this.transport = new Transport(fd, this, { maxMessageSize: MAX_MSG_SIZE, maxFdsPerMessage: MAX_FDS_PER_MSG });
  }

  /** Connect without negotiating (tests that send their own first message). */
  static connectRaw(path: string): VfioUserClient {
    const c = new VfioUserClient(native.connect(path));
    c.transport.start();
    return c;
  }

  /** Connect and negotiate VERSION. */
  static async connect(path: string, opts: ClientOptions = {}): Promise<VfioUserClient> {
    const c = VfioUserClient.connectRaw(path);
    try {
      await c.negotiate(opts);
    } catch (e) {
      c.close();
      throw e;
    }
    return c;
  }

  get serverLimits(): PeerLimits | null {
    return this.#server;
  }

  get isClosed(): boolean {
    return this.#closedReason !== null;
  }

  async negotiate(opts: ClientOptions = {}): Promise<void> {
    const minor = opts.minor ?? 0;
    const json = JSON.stringify({ capabilities: opts.capabilities ?? QEMU_CAPABILITIES });
    const r = await this.request({ kind: 'version', major: 0, minor, json });
    if (r.body.kind !== 'versionReply') throw new VfioUserError('VERSION: unexpected reply', 0, Command.VERSION);
    const problem = checkVersionReply(0, minor, r.body.major, r.body.minor);
    if (problem) throw new VfioUserError(`VERSION: ${problem}`, 0, Command.VERSION);
    const caps = parseCapabilities(r.body.json);
    if (!caps.ok) throw new VfioUserError(`VERSION: ${caps.error.detail}`, 0, Command.VERSION);
    this.#server = peerLimits(caps.value);
  }

  /** Send a request and wait for its reply. Error replies reject with VfioUserError. */
  request(body: Request, fds: readonly number[] = []): Promise<Message<Reply>> {
    if (this.#closedReason) return Promise.reject(new Error(`connection closed: ${this.#closedReason}`));
    const id = this.#allocId();
    const command = commandOf(body);
    const p = new Promise<Message<Reply>>((resolve, reject) => this.#pending.set(id, { resolve, reject }));
    try {
      this.#write(id, command, 0, body, fds);
    } catch (e) {
      // Nothing was sent: forget the request so its id is not held forever.
      this.#pending.delete(id);
      throw e;
    }
    return p;
  }

  /** Send a request with NO_REPLY set (a posted write). Batched until flush() or the next request. */
  post(body: Request, fds: readonly number[] = []): void {
    if (this.#closedReason) throw new Error(`connection closed: ${this.#closedReason}`);
    this.#write(this.#allocId(), commandOf(body), HeaderFlag.NO_REPLY, body, fds, false);
  }

  /** Send raw bytes (with optional fds): for bad-input tests. */
  sendRaw(bytes: Buffer, fds: readonly number[] = []): void {
    this.transport.flush();
    this.transport.sendWithFds(bytes, fds);
  }

  /** Wait for the reply to a raw message with this id. */
  waitReply(id: number): Promise<Message<Reply>> {
    return new Promise((resolve, reject) => this.#pending.set(id, { resolve, reject }));
  }

  flush(): void {
    this.transport.flush();
  }

  close(): void {
    this.transport.close('client closed');
  }

  // ---- typed helpers -----------------------------------------------------------------

  async dmaMap(
    address: number,
    size: number,
    fd: number,
    offset = 0,
    flags = DmaMapFlag.READ | DmaMapFlag.WRITE,
  ): Promise<void> {
    await this.request(
      { kind: 'dmaMap', argsz: vfio_user_dma_map.SIZE, flags, offset: fd >= 0 ? offset : 0, address, size },
      fd >= 0 ? [fd] : [],
    );
  }

  async dmaUnmap(address: number, size: number, flags = 0): Promise<void> {
    await this.request({ kind: 'dmaUnmap', argsz: vfio_user_dma_unmap.SIZE, flags, address, size });
  }

  async getInfo(): Promise<{ flags: number; numRegions: number; numIrqs: number }> {
    const r = await this.request({
      kind: 'deviceGetInfo',
      argsz: vfio_user_device_info.SIZE,
      flags: 0,
      numRegions: 0,
      numIrqs: 0,
    });
    if (r.body.kind !== 'deviceGetInfoReply') throw new Error('unexpected reply');
    return r.body;
  }

  async getRegionInfo(
    index: number,
    argsz: number = vfio_region_info.SIZE,
  ): Promise<{ flags: number; size: number; offset: number; argsz: number }> {
    const r = await this.request({
      kind: 'deviceGetRegionInfo',
      argsz,
      flags: 0,
      index,
      capOffset: 0,
      size: 0,
      offset: 0,
    });
    if (r.body.kind !== 'deviceGetRegionInfoReply') throw new Error('unexpected reply');
    return r.body;
  }

  async getIrqInfo(index: number): Promise<{ flags: number; count: number }> {
    const r = await this.request({ kind: 'deviceGetIrqInfo', argsz: vfio_irq_info.SIZE, flags: 0, index, count: 0 });
    if (r.body.kind !== 'deviceGetIrqInfoReply') throw new Error('unexpected reply');
    return r.body;
  }

  /** Wire eventfds to vectors start.. (QEMU style: argsz the bare vfio_irq_set, fds in SCM_RIGHTS). Empty `fds` with count de-assigns. */
  async setIrqEventfds(index: number, start: number, fds: readonly number[], count = fds.length): Promise<void> {
    await this.request(
      {
        kind: 'deviceSetIrqs',
        argsz: vfio_irq_set.SIZE,
        flags: SetIrqsFlag.DATA_EVENTFD | SetIrqsFlag.ACTION_TRIGGER,
        index,
        start,
        count,
        data: EMPTY,
      },
      fds,
    );
  }

  async setIrqs(index: number, flags: number, start: number, count: number, data: Buffer = EMPTY): Promise<void> {
    await this.request({
      kind: 'deviceSetIrqs',
      argsz: vfio_irq_set.SIZE + data.length,
      flags,
      index,
      start,
      count,
      data,
    });
  }

  async regionRead(region: number, offset: number, count: number): Promise<Buffer> {
    const r = await this.request({ kind: 'regionRead', offset, region, count });
    if (r.body.kind !== 'regionReadReply') throw new Error('unexpected reply');
    return Buffer.from(r.body.data);
  }

  async regionWrite(region: number, offset: number, data: Buffer): Promise<void> {
    await this.request({ kind: 'regionWrite', offset, region, count: data.length, data });
  }

  /** A posted write (NO_REPLY): batched until flush() or the next request. */
  postRegionWrite(region: number, offset: number, data: Buffer): void {
    this.post({ kind: 'regionWrite', offset, region, count: data.length, data });
  }

  async reset(): Promise<void> {
    await this.request({ kind: 'deviceReset' });
  }

  // ---- TransportHandler -----------------------------------------------------------------

  message(h: RawHeader, payload: Buffer, fds: number[]): void {
    for (const fd of fds) {
      try {
        fs.closeSync(fd);
      } catch {
        /* ignore */
      }
    }
    if ((h.flags & HeaderFlag.TYPE_MASK) !== HeaderFlag.TYPE_REPLY) {
      this.onServerCommand?.(h);
      if (!(h.flags & HeaderFlag.NO_REPLY)) writeErrorReply(this.transport.writer, h.id, h.command, Errno.ENOTSUP);
      return;
    }
    const p = this.#pending.get(h.id);
    if (!p) return;
    this.#pending.delete(h.id);
    const header: Header = { ...h };
    const d = decodeBody(header, Buffer.from(payload));
    if (!d.ok) {
      p.reject(new VfioUserError(`reply to ${h.command} did not decode: ${d.error.detail}`, 0, h.command));
      return;
    }
    const body = d.value as Reply;
    if (body.kind === 'error') {
      p.reject(new VfioUserError(`command ${h.command} failed: ${errnoName(body.errno)}`, body.errno, h.command));
      return;
    }
    p.resolve({ header, body });
  }

  badHeader(_h: RawHeader, error: ProtocolError): void {
    this.#failAll(new Error(`bad header from server: ${error.detail}`));
  }

  closed(reason: string): void {
    this.#closedReason = reason;
    this.#failAll(new Error(`connection closed: ${reason}`));
    this.onClose?.(reason);
  }

  // ---- internals --------------------------------------------------------------------------

  #allocId(): number {
    // 16-bit ids that are not in flight.
    for (let i = 0; i < 0x10000; i++) {
      const id = this.#nextId;
      this.#nextId = (this.#nextId + 1) & 0xffff;
      if (!this.#pending.has(id)) return id;
    }
    throw new Error('65536 requests in flight');
  }

  #write(id: number, command: number, flags: number, body: Body, fds: readonly number[], flush = true): void {
    const w = this.transport.writer;
    // A message with fds goes alone, so its fds ride on its own bytes.
    if (fds.length) this.transport.flush();
    // writeMessage drops a half-written message when encoding throws (or every later begin() would throw).
    writeMessage(w, { id, command, flags, error: 0 }, body);
    if (fds.length) this.transport.sendWithFds(w.take(), fds);
    else if (flush) this.transport.flush();
  }

  #failAll(e: Error): void {
    const all = [...this.#pending.values()];
    this.#pending.clear();
    for (const p of all) p.reject(e);
  }
}

const EMPTY = Buffer.alloc(0);

/** The command number of a request (the serializer knows every body kind). */
function commandOf(body: Request): number {
  return commandOfBody(body)!;
}

/** Guest RAM for a test client: a sealed memfd mapped into this process (up to 1 GiB). */
export class GuestRam {
  readonly fd: number;
  readonly buffer: Buffer;
  readonly #ab: ArrayBuffer;

  /** `sealed` false leaves the memfd shrinkable (as a hostile or careless client might share it). */
  constructor(
    readonly size: number,
    name = 'guest-ram',
    sealed = true,
  ) {
    if (size > 1 << 30) throw new RangeError('GuestRam maps at most 1 GiB');
    this.fd = native.memfdCreate(name, size, sealed);
    this.#ab = native.mmap(this.fd, 0, size, true);
    this.buffer = Buffer.from(this.#ab);
  }

  close(): void {
    try {
      native.munmap(this.#ab);
    } catch {
      /* already unmapped */
    }
    try {
      fs.closeSync(this.fd);
    } catch {
      /* already closed */
    }
  }
}
