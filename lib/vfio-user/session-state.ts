// What one client's session holds and what every command handler shares: the
// transport with its reply writer, the device and its regions, the client's DMA
// table and interrupt eventfds, limits, counters, and the reply and refusal
// helpers. The handlers live by job in negotiation.ts, dma-commands.ts,
// device-info.ts, irq-commands.ts and region-access.ts; session.ts routes.

import { commandName, errnoName, HeaderFlag } from '../../protocol/constants';
import { ProtocolError, protocolError } from '../../protocol/errors';
import { MAX_DATA_XFER_SIZE, MAX_DMA_REGIONS } from '../../protocol/limits';
import { replyFlags, writeErrorReply } from '../../protocol/serializer';
import { Logger, RateLimiter, warnLimited } from '../log';
import type { RegionHandler, VfioUserDevice } from './device';
import type { DmaTable } from './dma-table';
import { closeQuietly } from './irq-table';
import type { IrqTable } from './irq-table';
import type { RawHeader, Transport } from './transport';
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

/** Session counters, for tests and stats. */
export interface SessionStats {
  commands: number;
  errors: number;
  regionReads: number;
  regionWrites: number;
  fdsClosed: number;
}

interface SessionStateOptions {
  readonly transport: Transport;
  readonly device: VfioUserDevice;
  readonly limits: SessionLimits;
  readonly log: Logger;
  readonly stats: SessionStats;
  readonly dma: DmaTable;
  readonly irqs: IrqTable;
  readonly regions: readonly (RegionHandler | undefined)[];
}

/** The state the command handlers share (one per session; not part of the library's API). */
export class SessionState {
  readonly transport: Transport;
  readonly device: VfioUserDevice;
  readonly limits: SessionLimits;
  readonly log: Logger;
  readonly limiter = new RateLimiter();
  readonly stats: SessionStats;
  readonly dma: DmaTable;
  readonly irqs: IrqTable;
  /** The device's regions by vfio region index (undefined: absent). */
  readonly regions: readonly (RegionHandler | undefined)[];
  /** REGION_WRITE data views (no view object per write: see view-cache.ts). */
  readonly writeData = new ViewCache();
  /** Stops the guest-memory fault subscription (dma-commands.ts), once one was made. */
  unwatchBus: (() => void) | null = null;

  constructor(opts: SessionStateOptions) {
    this.transport = opts.transport;
    this.device = opts.device;
    this.limits = opts.limits;
    this.log = opts.log;
    this.stats = opts.stats;
    this.dma = opts.dma;
    this.irqs = opts.irqs;
    this.regions = opts.regions;
  }

  close(reason: string): void {
    this.transport.close(reason);
  }

  /** A reply with no payload. */
  headerOnly(h: RawHeader): void {
    this.transport.writer.begin(h.id, h.command, replyFlags(false)).end();
  }

  error(id: number, command: number, errno: number): void {
    this.stats.errors++;
    writeErrorReply(this.transport.writer, id, command, errno);
  }

  /** Error reply (unless NO_REPLY), close the message's fds, log rate limited. */
  reject(h: RawHeader, fds: readonly number[], e: ProtocolError): void {
    for (const fd of fds) this.closeFd(fd);
    warnLimited(this.log, this.limiter, e.code, `vfio-user: ${commandName(h.command)} refused: ${e.detail}`, {
      id: h.id,
      code: e.code,
      errno: errnoName(e.errno),
    });
    if (h.flags & HeaderFlag.NO_REPLY) {
      this.stats.errors++;
      return;
    }
    this.error(h.id, h.command, e.errno);
  }

  /** Refuse, send the refusal now, and close the connection. */
  rejectAndClose(h: RawHeader, e: ProtocolError): void {
    this.reject(h, NO_FDS, e);
    this.transport.flush();
    this.close(e.detail);
  }

  closeFd(fd: number): void {
    this.stats.fdsClosed++;
    closeQuietly(fd);
  }
}

export const NO_FDS: readonly number[] = Object.freeze([]);

export function isReplyType(flags: number): boolean {
  return (flags & HeaderFlag.TYPE_MASK) === HeaderFlag.TYPE_REPLY;
}

export function unexpectedFds(command: number): ProtocolError {
  return protocolError('UNEXPECTED_FDS', `${commandName(command)} takes no fds`);
}
