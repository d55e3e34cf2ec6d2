// One client's protocol session on the server side: negotiation, then every
// command routed to a named handler that validates and then applies.
//
// The session owns the client's DMA table and interrupt eventfds. It answers
// every command with exactly one reply, except NO_REPLY commands, which never
// get one (not even an error): a stray reply desynchronises QEMU. Bad input
// gets an error reply and the session stays up; only a stream that cannot be
// trusted any more (bad header, first message not VERSION, bad VERSION) is
// closed.

import {
  Command, commandName, DeviceInfoFlag, DmaUnmapFlag, Errno, errnoName, HeaderFlag, IrqInfoFlag,
  RegionInfoFlag, SetIrqsFlag,
} from '../../protocol/constants';
import { ProtocolError, protocolError } from '../../protocol/errors';
import {
  getField, U64_UNSAFE, vfio_irq_info, vfio_irq_set, vfio_region_info, vfio_user_device_info, vfio_user_dma_map,
  vfio_user_dma_unmap, vfio_user_header, vfio_user_region_access, vfio_user_region_io_fds_request, vfio_user_version,
  vfio_user_write_multi,
} from '../../protocol/layouts';
import { MAX_DATA_XFER_SIZE, MAX_DMA_REGIONS, DMA_PAGE_SIZE } from '../../protocol/limits';
import type {
  DeviceGetInfo, DeviceGetIrqInfo, DeviceGetRegionInfo, DeviceGetRegionIoFds, DeviceSetIrqs, DmaMap,
  DmaUnmap, RegionWriteMulti, Request, Version,
} from '../../protocol/messages';
import { decodeRequest } from '../../protocol/parser';
import { replyFlags, writeErrorReply } from '../../protocol/serializer';
import { Capabilities, parseCapabilities, PeerLimits, peerLimits, serverCapabilitiesJson } from '../../protocol/version';
import { Logger, RateLimiter, warnLimited } from '../log';
import { DmaTable } from './dma-table';
import { DeviceContext, IrqIndex, PCI_NUM_IRQS, PCI_NUM_REGIONS, RegionHandler, VfioUserDevice } from './device';
import { IrqTable, closeQuietly, isEventfd } from './irq-table';
import { onBusFault } from './bus-guard';
import { contain, reportBug } from '../guard';
import { RawHeader, Transport, TransportHandler } from './transport';
import { ViewCache } from './view-cache';

/** What the server advertises and enforces for each client. */
export interface SessionLimits {
  readonly maxDataXferSize: number;
  readonly maxMsgFds: number;
  readonly maxDmaRegions: number;
  /**
   * A client must negotiate (VERSION) within this many milliseconds of
   * connecting, or it is closed: the server serves one client at a time, and
   * one that connects and says nothing would hold the device from QEMU.
   */
  readonly negotiationTimeoutMs: number;
}

export const DEFAULT_SESSION_LIMITS: SessionLimits = {
  maxDataXferSize: MAX_DATA_XFER_SIZE,
  maxMsgFds: 16,
  maxDmaRegions: MAX_DMA_REGIONS,
  negotiationTimeoutMs: 10_000,
};

/** The highest minor version we answer (libvfio-user's; QEMU proposes 0 and gets 0). */
const SUPPORTED_MINOR = 2;

/** Session counters, for tests and stats. */
export interface SessionStats {
  commands: number;
  errors: number;
  regionReads: number;
  regionWrites: number;
  fdsClosed: number;
}

export class Session implements TransportHandler {
  readonly transport: Transport;
  readonly dma: DmaTable;
  readonly irqs: IrqTable;
  readonly stats: SessionStats = { commands: 0, errors: 0, regionReads: 0, regionWrites: 0, fdsClosed: 0 };
  #negotiated = false;
  #peer: PeerLimits | null = null;
  #peerCaps: Capabilities = {};
  #attached = false;
  readonly #device: VfioUserDevice;
  readonly #limits: SessionLimits;
  readonly #log: Logger;
  readonly #limiter = new RateLimiter();
  readonly #onClosed: (session: Session, reason: string) => void;
  readonly #context: DeviceContext;
  readonly #regions: (RegionHandler | undefined)[] = [];
  #negotiationTimer: NodeJS.Timeout | null = null;
  #unwatchBus: (() => void) | null = null;
  /** REGION_WRITE data views (no view object per write: see view-cache.ts). */
  readonly #writeData = new ViewCache();

  constructor(fd: number, device: VfioUserDevice, limits: SessionLimits, log: Logger, onClosed: (s: Session, reason: string) => void) {
    this.#device = device;
    this.#limits = limits;
    this.#log = log;
    this.#onClosed = onClosed;
    this.dma = new DmaTable({ maxRegions: limits.maxDmaRegions, maxRegionSize: 2 ** 43 });
    const counts: number[] = [];
    for (let i = 0; i < PCI_NUM_IRQS; i++) counts.push(device.irqCount(i));
    this.irqs = new IrqTable(counts);
    for (let i = 0; i < PCI_NUM_REGIONS; i++) this.#regions.push(device.region(i));
    const irqs = this.irqs;
    this.#context = {
      memory: this.dma,
      signalIrq: (index: IrqIndex, sub: number) => irqs.signal(index, sub),
      irqWired: (index: IrqIndex, sub: number) => irqs.fd(index, sub) >= 0,
    };
    this.transport = new Transport(fd, this, {
      // The largest message: a REGION_WRITE of maxDataXferSize bytes.
      maxMessageSize: vfio_user_header.SIZE + vfio_user_region_access.SIZE + limits.maxDataXferSize,
      maxFdsPerMessage: limits.maxMsgFds,
    });
  }

  /** The client's capabilities after VERSION (empty before). */
  get peerCapabilities(): Capabilities {
    return this.#peerCaps;
  }

  get peerLimits(): PeerLimits | null {
    return this.#peer;
  }

  start(): void {
    this.#negotiationTimer = setTimeout(() => {
      this.#negotiationTimer = null;
      if (this.#negotiated || this.transport.closed) return;
      this.#log.warn(`vfio-user: no VERSION within ${this.#limits.negotiationTimeoutMs} ms of connecting; closing the client`);
      this.close('negotiation timed out');
    }, this.#limits.negotiationTimeoutMs);
    this.#negotiationTimer.unref();
    this.transport.start();
  }

  close(reason = 'server closed the session'): void {
    this.transport.close(reason);
  }

  // ---- TransportHandler --------------------------------------------------------

  badHeader(h: RawHeader, error: ProtocolError): void {
    warnLimited(this.#log, this.#limiter, error.code, `vfio-user: ${error.detail}; closing the connection`, { id: h.id, command: h.command });
    if (!this.#isReplyType(h.flags) && !(h.flags & HeaderFlag.NO_REPLY)) this.#error(h.id, h.command, error.errno);
  }

  closed(reason: string): void {
    if (this.#negotiationTimer) { clearTimeout(this.#negotiationTimer); this.#negotiationTimer = null; }
    this.#unwatchBus?.();
    this.#unwatchBus = null;
    this.#log.info(`vfio-user: client disconnected (${reason})`);
    // Drop every reference to guest memory and interrupts; device state stays.
    if (this.#attached) {
      for (const r of this.dma.regions) this.#device.dmaUnmapped?.(r);
    }
    this.dma.clear();
    this.irqs.clear();
    if (this.#attached) {
      this.#attached = false;
      this.#device.detach();
    }
    this.#onClosed(this, reason);
  }

  message(h: RawHeader, payload: Buffer, fds: number[]): void {
    const replies = this.transport.writer.ended;
    try {
      this.#handle(h, payload, fds);
    } catch (e) {
      // Our bug (client input is refused with an error, never thrown): the
      // command fails with EIO, logged with its stack; the session and the
      // device stay up.
      this.transport.writer.abort();
      reportBug(this.#log, `vfio-user ${commandName(h.command)} handler`, e);
      if (this.transport.writer.ended === replies && !(h.flags & HeaderFlag.NO_REPLY) && !this.#isReplyType(h.flags)) {
        this.#error(h.id, h.command, Errno.EIO);
      }
    }
    // Until a VERSION succeeds, any refused message ends the connection
    // (reference/vfio-user.md 4.1: first message not VERSION, short payload, bad
    // JSON, fds on VERSION...). Flush first so the EINVAL reply goes out before
    // the close: closing with the reply still batched in the writer dropped it.
    if (!this.#negotiated && !this.transport.closed) {
      this.transport.flush();
      this.close('negotiation failed');
    }
  }

  #handle(h: RawHeader, payload: Buffer, fds: number[]): void {
    this.stats.commands++;
    const noReply = (h.flags & HeaderFlag.NO_REPLY) !== 0;
    if (this.#isReplyType(h.flags)) {
      // We never send commands to the client, so any reply is unsolicited.
      this.#reject(h, fds, protocolError('UNSOLICITED_REPLY', `unsolicited reply (id ${h.id}, ${commandName(h.command)})`));
      return;
    }
    if ((h.flags & HeaderFlag.TYPE_MASK) !== HeaderFlag.TYPE_COMMAND) {
      // Types 2-15 are neither command nor reply: refuse them rather than serve
      // them as commands (reference/vfio-user.md 4.2, "type is command").
      this.#reject(h, fds, protocolError('BAD_FLAGS', `message type ${h.flags & HeaderFlag.TYPE_MASK} is not a command (id ${h.id}, ${commandName(h.command)})`));
      return;
    }
    if (fds.length > this.#limits.maxMsgFds) {
      this.#reject(h, fds, protocolError('TOO_MANY_FDS', `${fds.length} fds on ${commandName(h.command)} (limit ${this.#limits.maxMsgFds})`));
      return;
    }
    if (!this.#negotiated && h.command !== Command.VERSION) {
      // message() flushes this reply and closes the connection.
      this.#reject(h, fds, protocolError('FIRST_NOT_VERSION', `${commandName(h.command)} before VERSION`));
      return;
    }
    // Hot path: region accesses are decoded in place, without building objects.
    if (h.command === Command.REGION_WRITE) {
      if (fds.length) { this.#reject(h, fds, unexpectedFds(h.command)); return; }
      this.#regionWrite(h, payload, noReply);
      return;
    }
    if (h.command === Command.REGION_READ) {
      if (fds.length) { this.#reject(h, fds, unexpectedFds(h.command)); return; }
      this.#regionRead(h, payload, noReply);
      return;
    }
    if (h.command === Command.DEVICE_RESET && payload.length !== 0) {
      this.#reject(h, fds, protocolError('PAYLOAD_MISMATCH', 'DEVICE_RESET carries a payload'));
      return;
    }
    if (h.command !== Command.DEVICE_RESET && payload.length === 0) {
      this.#reject(h, fds, protocolError('HEADER_ONLY', `${commandName(h.command)} without a payload`));
      return;
    }
    const d = decodeRequest(h.command, payload);
    if (!d.ok) {
      this.#reject(h, fds, d.error);
      return;
    }
    const err = this.#dispatch(h, d.value, fds, noReply);
    if (err) this.#reject(h, fds, err);
  }

  // ---- routing -------------------------------------------------------------------

  /** Route a decoded command. Returns an error to reply with (fds then closed), or null when handled. */
  #dispatch(h: RawHeader, req: Request, fds: number[], noReply: boolean): ProtocolError | null {
    const takesFds = req.kind === 'dmaMap' || req.kind === 'deviceSetIrqs';
    if (!takesFds && fds.length) return unexpectedFds(h.command);
    switch (req.kind) {
      case 'version': return this.#version(h, req, noReply);
      case 'dmaMap': return this.#dmaMap(h, req, fds, noReply);
      case 'dmaUnmap': return this.#dmaUnmap(h, req, noReply);
      case 'deviceGetInfo': return this.#getInfo(h, req, noReply);
      case 'deviceGetRegionInfo': return this.#getRegionInfo(h, req, noReply);
      case 'deviceGetRegionIoFds': return this.#getRegionIoFds(h, req, noReply);
      case 'deviceGetIrqInfo': return this.#getIrqInfo(h, req, noReply);
      case 'deviceSetIrqs': return this.#setIrqs(h, req, fds, noReply);
      case 'deviceReset': return this.#reset(h, noReply);
      case 'regionWriteMulti': return this.#writeMulti(h, req, noReply);
      case 'dmaRead':
      case 'dmaWrite':
        return protocolError('NOT_SUPPORTED', `${commandName(h.command)} goes from server to client only`);
      case 'deviceFeature':
        // No migration and no dirty tracking: QEMU 11.1 treats the error as "feature absent".
        return protocolError('NOT_SUPPORTED', 'DEVICE_FEATURE: no features are supported');
      case 'migDataRead':
      case 'migDataWrite':
        return protocolError('NOT_SUPPORTED', `${commandName(h.command)}: migration is not supported`);
      case 'dirtyPages':
        return protocolError('NOT_SUPPORTED', 'DIRTY_PAGES (removed from the spec): no dirty logging');
      default:
        return protocolError('UNKNOWN_COMMAND', `${commandName(h.command)} is not handled`);
    }
  }

  // ---- VERSION ---------------------------------------------------------------------

  #version(h: RawHeader, req: Version, noReply: boolean): ProtocolError | null {
    if (this.#negotiated) return protocolError('BAD_VERSION', 'VERSION sent twice');
    if (req.major !== 0) {
      const e = protocolError('BAD_VERSION', `client proposes major ${req.major}; only 0 is supported`);
      this.#rejectAndClose(h, e);
      return null;
    }
    const caps = parseCapabilities(req.json);
    if (!caps.ok) {
      this.#rejectAndClose(h, caps.error);
      return null;
    }
    this.#peerCaps = caps.value;
    this.#peer = peerLimits(caps.value);
    this.#negotiated = true;
    if (this.#negotiationTimer) { clearTimeout(this.#negotiationTimer); this.#negotiationTimer = null; }
    if (!noReply) {
      const json = serverCapabilitiesJson({
        maxMsgFds: this.#limits.maxMsgFds,
        maxDataXferSize: this.#limits.maxDataXferSize,
        maxDmaMaps: this.#limits.maxDmaRegions,
        pgsizes: DMA_PAGE_SIZE,
      });
      const w = this.transport.writer.begin(h.id, h.command, replyFlags(false));
      const at = w.reserve(vfio_user_version.SIZE);
      w.field(at, vfio_user_version.major, 0).field(at, vfio_user_version.minor, Math.min(req.minor, SUPPORTED_MINOR));
      w.bytes(Buffer.from(json + '\0', 'utf8'));
      w.end();
    }
    this.#log.info('vfio-user: client negotiated', { minor: Math.min(req.minor, SUPPORTED_MINOR), capabilities: caps.value });
    this.#attached = true;
    this.#device.attach(this.#context);
    return null;
  }

  // ---- DMA -------------------------------------------------------------------------

  #dmaMap(h: RawHeader, req: DmaMap, fds: number[], noReply: boolean): ProtocolError | null {
    if (fds.length > 1) return protocolError('FD_COUNT', `DMA_MAP with ${fds.length} fds (at most 1)`);
    if (req.argsz < vfio_user_dma_map.SIZE) return protocolError('ARGSZ_TOO_SMALL', `DMA_MAP argsz ${req.argsz} < ${vfio_user_dma_map.SIZE}`);
    const fd = fds.length ? fds[0]! : -1;
    const r = this.dma.add({ address: req.address, size: req.size, flags: req.flags, offset: req.offset, fd });
    if ('error' in r) return r.error;
    if ('duplicate' in r) {
      if (fd >= 0) this.#closeFd(fd);
    } else {
      if (r.region.mapped && !this.#unwatchBus) this.#unwatchBus = onBusFault((address) => {
        contain(this.#log, 'vfio-user: guest-memory fault handler', () => this.#busFault(address));
      });
      this.#device.dmaMapped?.(r.region);
      if (this.#log.debugEnabled) this.#log.debug(`vfio-user: DMA_MAP 0x${req.address.toString(16)}+0x${req.size.toString(16)}${fd >= 0 ? ' (fd)' : ''}`);
    }
    if (!noReply) this.#headerOnly(h);
    return null;
  }

  /** A guarded access hit a page the client truncated away (lib/vfio-user/bus-guard.ts). */
  #busFault(address: number): void {
    if (this.transport.closed || !this.dma.ownsAddress(address)) return;
    this.#log.error('vfio-user: the client shrank the file behind a DMA_MAP region (an access past its end was caught); closing the client');
    this.close('guest memory truncated under a mapping');
  }

  #dmaUnmap(h: RawHeader, req: DmaUnmap, noReply: boolean): ProtocolError | null {
    const L = vfio_user_dma_unmap;
    if (req.argsz < L.SIZE) return protocolError('ARGSZ_TOO_SMALL', `DMA_UNMAP argsz ${req.argsz} < ${L.SIZE}`);
    if (req.argsz > this.#limits.maxDataXferSize) return protocolError('ARGSZ_TOO_LARGE', `DMA_UNMAP argsz ${req.argsz}`);
    if (req.flags & DmaUnmapFlag.GET_DIRTY_BITMAP) return protocolError('NOT_SUPPORTED', 'DMA_UNMAP dirty bitmap: dirty logging is not active');
    if (req.flags & ~DmaUnmapFlag.ALL) return protocolError('BAD_FLAGS', `DMA_UNMAP flags 0x${req.flags.toString(16)}`);
    if (req.flags & DmaUnmapFlag.ALL) {
      if (req.address !== 0 || req.size !== 0) return protocolError('BAD_FLAGS', 'DMA_UNMAP ALL needs address and size 0');
      const all = [...this.dma.regions];
      for (const r of all) this.#device.dmaUnmapped?.(r);
      this.dma.clear();
    } else {
      const r = this.dma.findExact(req.address, req.size);
      if (!r) return protocolError('NOT_FOUND', `DMA_UNMAP 0x${req.address.toString(16)}+0x${req.size.toString(16)} matches no mapping`, Errno.ENOENT);
      // The device drops its references first; then the windows are detached and unmapped.
      this.#device.dmaUnmapped?.(r);
      this.dma.remove(r);
    }
    if (!noReply) {
      const w = this.transport.writer.begin(h.id, h.command, replyFlags(false));
      const at = w.reserve(L.SIZE);
      w.field(at, L.argsz, L.SIZE).field(at, L.flags, req.flags).field(at, L.addr, req.address).field(at, L.size, req.size);
      w.end();
    }
    return null;
  }

  // ---- device information ------------------------------------------------------------

  #getInfo(h: RawHeader, req: DeviceGetInfo, noReply: boolean): ProtocolError | null {
    const L = vfio_user_device_info;
    if (req.argsz < L.SIZE) return protocolError('ARGSZ_TOO_SMALL', `DEVICE_GET_INFO argsz ${req.argsz} < ${L.SIZE}`);
    if (!noReply) {
      const w = this.transport.writer.begin(h.id, h.command, replyFlags(false));
      const at = w.reserve(L.SIZE);
      const flags = DeviceInfoFlag.PCI | (this.#device.resetSupported ? DeviceInfoFlag.RESET : 0);
      w.field(at, L.argsz, L.SIZE).field(at, L.flags, flags).field(at, L.num_regions, PCI_NUM_REGIONS).field(at, L.num_irqs, PCI_NUM_IRQS);
      w.end();
    }
    return null;
  }

  #getRegionInfo(h: RawHeader, req: DeviceGetRegionInfo, noReply: boolean): ProtocolError | null {
    const L = vfio_region_info;
    if (req.argsz < L.SIZE) return protocolError('ARGSZ_TOO_SMALL', `DEVICE_GET_REGION_INFO argsz ${req.argsz} < ${L.SIZE}`);
    if (req.index >= PCI_NUM_REGIONS) return protocolError('BAD_INDEX', `region index ${req.index} (device has ${PCI_NUM_REGIONS})`);
    if (!noReply) {
      const region = this.#regions[req.index];
      const flags = region ? (region.readable ? RegionInfoFlag.READ : 0) | (region.writable ? RegionInfoFlag.WRITE : 0) : 0;
      const w = this.transport.writer.begin(h.id, h.command, replyFlags(false));
      const at = w.reserve(L.SIZE);
      w.field(at, L.argsz, L.SIZE).field(at, L.flags, region && region.size ? flags : 0).field(at, L.index, req.index)
        .field(at, L.cap_offset, 0).field(at, L.size, region?.size ?? 0).field(at, L.offset, 0);
      w.end();
    }
    return null;
  }

  #getRegionIoFds(h: RawHeader, req: DeviceGetRegionIoFds, noReply: boolean): ProtocolError | null {
    // The reply starts with the same four fields as the request, then the sub-region array.
    const L = vfio_user_region_io_fds_request;
    if (req.flags !== 0) return protocolError('BAD_FLAGS', `GET_REGION_IO_FDS flags ${req.flags} (must be 0)`);
    if (req.count !== 0) return protocolError('BAD_FLAGS', `GET_REGION_IO_FDS count ${req.count} (must be 0)`);
    if (req.argsz < L.SIZE) return protocolError('ARGSZ_TOO_SMALL', `GET_REGION_IO_FDS argsz ${req.argsz} < ${L.SIZE}`);
    if (req.argsz > this.#limits.maxDataXferSize) return protocolError('ARGSZ_TOO_LARGE', `GET_REGION_IO_FDS argsz ${req.argsz}`);
    if (req.index >= PCI_NUM_REGIONS) return protocolError('BAD_INDEX', `region index ${req.index}`);
    if (!noReply) {
      // No region has ioeventfds: the answer is an empty list.
      const w = this.transport.writer.begin(h.id, h.command, replyFlags(false));
      const at = w.reserve(L.SIZE);
      w.field(at, L.argsz, L.SIZE).field(at, L.flags, 0).field(at, L.index, req.index).field(at, L.count, 0);
      w.end();
    }
    return null;
  }

  #getIrqInfo(h: RawHeader, req: DeviceGetIrqInfo, noReply: boolean): ProtocolError | null {
    const L = vfio_irq_info;
    if (req.argsz < L.SIZE) return protocolError('ARGSZ_TOO_SMALL', `DEVICE_GET_IRQ_INFO argsz ${req.argsz} < ${L.SIZE}`);
    if (req.index >= PCI_NUM_IRQS) return protocolError('BAD_INDEX', `irq index ${req.index} (device has ${PCI_NUM_IRQS})`);
    if (!noReply) {
      const w = this.transport.writer.begin(h.id, h.command, replyFlags(false));
      const at = w.reserve(L.SIZE);
      w.field(at, L.argsz, L.SIZE).field(at, L.flags, IrqInfoFlag.EVENTFD).field(at, L.index, req.index)
        .field(at, L.count, this.irqs.count(req.index));
      w.end();
    }
    return null;
  }

  // ---- interrupts ----------------------------------------------------------------------

  #setIrqs(h: RawHeader, req: DeviceSetIrqs, fds: number[], noReply: boolean): ProtocolError | null {
    const err = validateSetIrqs(req, fds.length, this.irqs.count(req.index));
    if (err) return err;
    const data = req.flags & SetIrqsFlag.DATA_MASK;
    const action = req.flags & SetIrqsFlag.ACTION_MASK_ALL;
    const dev = this.#device;
    if (action === SetIrqsFlag.ACTION_TRIGGER) {
      if (data === SetIrqsFlag.DATA_EVENTFD) {
        // Signalling is a write on the loop: only an eventfd is sure never to block it (a FIFO or socket could).
        const notEventfd = fds.findIndex((fd) => !isEventfd(fd));
        if (notEventfd >= 0) {
          return protocolError('BAD_FD', `SET_IRQS fd ${notEventfd} of ${fds.length} is not an eventfd`, Errno.EINVAL);
        }
        if (fds.length) {
          this.irqs.assign(req.index, req.start, fds);
          dev.irqChanged?.({ index: req.index, start: req.start, count: req.count, kind: 'wired' });
        } else {
          this.irqs.unassign(req.index, req.start, req.count);
          dev.irqChanged?.({ index: req.index, start: req.start, count: req.count, kind: 'unwired' });
        }
      } else if (req.count === 0) {
        this.irqs.unassign(req.index, 0, this.irqs.count(req.index));
        dev.irqChanged?.({ index: req.index, start: 0, count: this.irqs.count(req.index), kind: 'unwired' });
      } else {
        // The client asks us to fire these vectors (DATA_NONE: all; DATA_BOOL: those set).
        for (let i = 0; i < req.count; i++) {
          if (data === SetIrqsFlag.DATA_NONE || req.data[i]) this.irqs.signal(req.index, req.start + i);
        }
        dev.irqChanged?.({ index: req.index, start: req.start, count: req.count, kind: 'trigger' });
      }
    } else {
      // MASK/UNMASK. An eventfd here is a notifier (INTx resample): we do not use it.
      for (const fd of fds) this.#closeFd(fd);
      dev.irqChanged?.({ index: req.index, start: req.start, count: req.count, kind: action === SetIrqsFlag.ACTION_MASK ? 'mask' : 'unmask' });
    }
    if (!noReply) this.#headerOnly(h);
    return null;
  }

  // ---- reset -----------------------------------------------------------------------------

  #reset(h: RawHeader, noReply: boolean): ProtocolError | null {
    // DMA maps and interrupt fds stay, as libvfio-user does (QEMU re-wires them anyway).
    this.#device.reset('device-reset');
    if (!noReply) this.#headerOnly(h);
    return null;
  }

  // ---- region access (hot path) --------------------------------------------------------------

  #regionCheck(region: number, offset: number, count: number, write: boolean): ProtocolError | RegionHandler {
    if (offset === U64_UNSAFE) return protocolError('OUT_OF_RANGE', 'region offset above 2^53-1');
    const r = region < PCI_NUM_REGIONS ? this.#regions[region] : undefined;
    if (!r || r.size === 0) return protocolError('BAD_INDEX', `region ${region} does not exist`);
    if (count > this.#limits.maxDataXferSize) return protocolError('COUNT_TOO_LARGE', `region access of ${count} bytes (limit ${this.#limits.maxDataXferSize})`);
    if (offset > r.size || count > r.size - offset) return protocolError('OUT_OF_RANGE', `region ${region} access 0x${offset.toString(16)}+${count} outside its 0x${r.size.toString(16)} bytes`);
    if (write ? !r.writable : !r.readable) return protocolError('NOT_SUPPORTED', `region ${region} is not ${write ? 'writable' : 'readable'}`, Errno.EINVAL);
    return r;
  }

  #regionRead(h: RawHeader, p: Buffer, noReply: boolean): void {
    const A = vfio_user_region_access;
    if (p.length < A.SIZE) { this.#reject(h, NO_FDS, protocolError('SHORT_PAYLOAD', `REGION_READ payload ${p.length} < ${A.SIZE}`)); return; }
    const offset = getField(p, 0, A.offset);
    const region = getField(p, 0, A.region);
    const count = getField(p, 0, A.count);
    const r = this.#regionCheck(region, offset, count, false);
    if (!('read' in r)) { this.#reject(h, NO_FDS, r); return; }
    this.stats.regionReads++;
    const w = this.transport.writer.begin(h.id, h.command, replyFlags(false));
    const at = w.reserve(A.SIZE + count);
    w.field(at, A.offset, offset).field(at, A.region, region).field(at, A.count, count);
    const errno = count ? safeRead(r, offset, w.view(at + A.SIZE, count)) : 0;
    if (errno !== 0 || noReply) {
      w.abort();
      if (errno !== 0) this.#reject(h, NO_FDS, protocolError('DEVICE_ERROR', `region ${region} read at 0x${offset.toString(16)} failed: ${errnoName(errno)}`, errno));
      return;
    }
    w.end();
  }

  #regionWrite(h: RawHeader, p: Buffer, noReply: boolean): void {
    const A = vfio_user_region_access;
    if (p.length < A.SIZE) { this.#reject(h, NO_FDS, protocolError('SHORT_PAYLOAD', `REGION_WRITE payload ${p.length} < ${A.SIZE}`)); return; }
    const offset = getField(p, 0, A.offset);
    const region = getField(p, 0, A.region);
    const count = getField(p, 0, A.count);
    if (p.length - A.SIZE !== count) {
      this.#reject(h, NO_FDS, protocolError('PAYLOAD_MISMATCH', `REGION_WRITE count ${count} but ${p.length - A.SIZE} data bytes`));
      return;
    }
    const r = this.#regionCheck(region, offset, count, true);
    if (!('write' in r)) { this.#reject(h, NO_FDS, r); return; }
    this.stats.regionWrites++;
    const errno = count ? safeWrite(r, offset, this.#writeData.get(p, A.SIZE, count)) : 0;
    if (errno !== 0) {
      this.#reject(h, NO_FDS, protocolError('DEVICE_ERROR', `region ${region} write at 0x${offset.toString(16)} failed: ${errnoName(errno)}`, errno));
      return;
    }
    if (!noReply) {
      const w = this.transport.writer.begin(h.id, h.command, replyFlags(false));
      const at = w.reserve(A.SIZE);
      w.field(at, A.offset, offset).field(at, A.region, region).field(at, A.count, count);
      w.end();
    }
  }

  #writeMulti(h: RawHeader, req: RegionWriteMulti, noReply: boolean): ProtocolError | null {
    // Validate every entry before applying any, so a bad batch changes nothing.
    const handlers: RegionHandler[] = [];
    for (const e of req.entries) {
      const r = this.#regionCheck(e.region, e.offset, e.count, true);
      if (!('write' in r)) return r;
      handlers.push(r);
    }
    req.entries.forEach((e, i) => {
      this.stats.regionWrites++;
      const errno = safeCall(() => handlers[i]!.write(e.offset, e.data.subarray(0, e.count)));
      if (errno !== 0) warnLimited(this.#log, this.#limiter, 'write-multi', `REGION_WRITE_MULTI entry ${i} failed: ${errnoName(errno)}`);
    });
    if (!noReply) {
      const w = this.transport.writer.begin(h.id, h.command, replyFlags(false));
      w.field(w.reserve(vfio_user_write_multi.SIZE), vfio_user_write_multi.wr_cnt, req.entries.length);
      w.end();
    }
    return null;
  }

  // ---- replies and errors -----------------------------------------------------------------------

  #headerOnly(h: RawHeader): void {
    this.transport.writer.begin(h.id, h.command, replyFlags(false)).end();
  }

  #error(id: number, command: number, errno: number): void {
    this.stats.errors++;
    writeErrorReply(this.transport.writer, id, command, errno);
  }

  /** Error reply (unless NO_REPLY), close the message's fds, log rate limited. */
  #reject(h: RawHeader, fds: readonly number[], e: ProtocolError): void {
    for (const fd of fds) this.#closeFd(fd);
    warnLimited(this.#log, this.#limiter, e.code, `vfio-user: ${commandName(h.command)} refused: ${e.detail}`, { id: h.id, code: e.code, errno: errnoName(e.errno) });
    if (h.flags & HeaderFlag.NO_REPLY) { this.stats.errors++; return; }
    this.#error(h.id, h.command, e.errno);
  }

  #rejectAndClose(h: RawHeader, e: ProtocolError): void {
    this.#reject(h, NO_FDS, e);
    this.transport.flush();
    this.close(e.detail);
  }

  #closeFd(fd: number): void {
    this.stats.fdsClosed++;
    closeQuietly(fd);
  }

  #isReplyType(flags: number): boolean {
    return (flags & HeaderFlag.TYPE_MASK) === HeaderFlag.TYPE_REPLY;
  }
}

const NO_FDS: readonly number[] = Object.freeze([]);

function unexpectedFds(command: number): ProtocolError {
  return protocolError('UNEXPECTED_FDS', `${commandName(command)} takes no fds`);
}

/** safeCall for the region hot paths, without a closure per access (garbage: see transport.ts). */
function safeRead(r: RegionHandler, offset: number, dst: Buffer): number {
  try {
    const e = r.read(offset, dst);
    return Number.isInteger(e) && e >= 0 ? e : Errno.EIO;
  } catch {
    return Errno.EIO;
  }
}

function safeWrite(r: RegionHandler, offset: number, src: Buffer): number {
  try {
    const e = r.write(offset, src);
    return Number.isInteger(e) && e >= 0 ? e : Errno.EIO;
  } catch {
    return Errno.EIO;
  }
}

/** A device handler that throws is our bug, not the guest's: answer EIO and keep serving. */
function safeCall(fn: () => number): number {
  try {
    const r = fn();
    return Number.isInteger(r) && r >= 0 ? r : Errno.EIO;
  } catch {
    return Errno.EIO;
  }
}

/**
 * SET_IRQS rules, one per statement (libvfio-user's checklist, reference/vfio-user.md 2.8),
 * with QEMU's quirks allowed: argsz 20 whatever the fd count, and EVENTFD with no fds
 * meaning "de-assign".
 */
export function validateSetIrqs(req: DeviceSetIrqs, nfds: number, irqCount: number): ProtocolError | null {
  const data = req.flags & SetIrqsFlag.DATA_MASK;
  const action = req.flags & SetIrqsFlag.ACTION_MASK_ALL;
  const bad = (code: Parameters<typeof protocolError>[0], detail: string): ProtocolError =>
    protocolError(code, `SET_IRQS index ${req.index} start ${req.start} count ${req.count} flags 0x${req.flags.toString(16)}: ${detail}`);
  if (req.argsz < vfio_irq_set.SIZE) return bad('ARGSZ_TOO_SMALL', `argsz ${req.argsz} < ${vfio_irq_set.SIZE}`);
  if (req.index >= PCI_NUM_IRQS) return bad('BAD_INDEX', 'no such irq index');
  if (req.flags & ~(SetIrqsFlag.DATA_MASK | SetIrqsFlag.ACTION_MASK_ALL)) return bad('BAD_FLAGS', 'unknown flag bits');
  if (data !== SetIrqsFlag.DATA_NONE && data !== SetIrqsFlag.DATA_BOOL && data !== SetIrqsFlag.DATA_EVENTFD) return bad('BAD_FLAGS', 'needs exactly one DATA type');
  if (action !== SetIrqsFlag.ACTION_MASK && action !== SetIrqsFlag.ACTION_UNMASK && action !== SetIrqsFlag.ACTION_TRIGGER) return bad('BAD_FLAGS', 'needs exactly one ACTION');
  if (data !== SetIrqsFlag.DATA_EVENTFD && nfds > 0) return bad('FD_COUNT', 'fds come only with DATA_EVENTFD');
  if (data === SetIrqsFlag.DATA_BOOL && req.data.length !== req.count) return bad('PAYLOAD_MISMATCH', `DATA_BOOL needs ${req.count} bytes, got ${req.data.length}`);
  if (data !== SetIrqsFlag.DATA_BOOL && req.data.length !== 0) return bad('PAYLOAD_MISMATCH', `${req.data.length} unexpected data bytes`);
  if (req.count === 0) {
    if (req.start !== 0 || action !== SetIrqsFlag.ACTION_TRIGGER || data !== SetIrqsFlag.DATA_NONE) return bad('OUT_OF_RANGE', 'count 0 only disables the whole index (TRIGGER|NONE, start 0)');
    return null;
  }
  if (req.start >= irqCount || req.count > irqCount - req.start) return bad('OUT_OF_RANGE', `vectors outside the ${irqCount} of this index`);
  if ((req.index === IrqIndex.ERR || req.index === IrqIndex.REQ) && (action !== SetIrqsFlag.ACTION_TRIGGER || req.count > 1)) return bad('BAD_FLAGS', 'ERR and REQ take only TRIGGER of one vector');
  if (data === SetIrqsFlag.DATA_EVENTFD && action === SetIrqsFlag.ACTION_TRIGGER && nfds !== 0 && nfds !== req.count) return bad('FD_COUNT', `${nfds} fds for ${req.count} vectors`);
  if (data === SetIrqsFlag.DATA_EVENTFD && action !== SetIrqsFlag.ACTION_TRIGGER && nfds > 1) return bad('FD_COUNT', `${nfds} notifier fds`);
  return null;
}
