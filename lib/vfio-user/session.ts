// One client's protocol session on the server side: negotiation, then every
// command routed to a named handler that validates and then applies.
//
// The session owns the client's DMA table and interrupt eventfds. It answers
// every command with exactly one reply, except NO_REPLY commands, which never
// get one (not even an error): a stray reply desynchronises QEMU. Bad input
// gets an error reply and the session stays up; only a stream that cannot be
// trusted any more (bad header, first message not VERSION, bad VERSION) is
// closed.
//
// This file frames the checks every message goes through and routes; the
// handlers live by job: negotiation.ts (VERSION and its deadline),
// dma-commands.ts (DMA_MAP/UNMAP, guest-memory faults), device-info.ts (the
// GET_*_INFO commands, reset), irq-commands.ts (SET_IRQS), region-access.ts
// (REGION_READ/WRITE/WRITE_MULTI), with the state they share in
// session-state.ts.

import { Command, commandName, Errno, HeaderFlag } from '../../protocol/constants';
import { ProtocolError, protocolError } from '../../protocol/errors';
import { vfio_user_header, vfio_user_region_access } from '../../protocol/layouts';
import type { Request, Version } from '../../protocol/messages';
import { decodeRequest } from '../../protocol/parser';
import type { Capabilities, PeerLimits } from '../../protocol/version';
import { Logger, warnLimited } from '../log';
import { reportBug } from '../guard';
import { DeviceContext, IrqIndex, PCI_NUM_IRQS, PCI_NUM_REGIONS, RegionHandler, VfioUserDevice } from './device';
import { getDeviceInfo, getIrqInfo, getRegionInfo, getRegionIoFds, resetDevice } from './device-info';
import { dmaMap, dmaUnmap } from './dma-commands';
import { DmaTable } from './dma-table';
import { setIrqs } from './irq-commands';
import { IrqTable } from './irq-table';
import { handleVersion, Negotiation } from './negotiation';
import { regionRead, regionWrite, writeMulti } from './region-access';
import { isReplyType, SessionLimits, SessionState, SessionStats, unexpectedFds } from './session-state';
import { RawHeader, Transport, TransportHandler } from './transport';

export { DEFAULT_SESSION_LIMITS } from './session-state';
export type { SessionLimits, SessionStats } from './session-state';

/** Largest guest-memory region one DMA_MAP may cover (8 TiB). */
const MAX_DMA_REGION_SIZE = 2 ** 43;

export class Session implements TransportHandler {
  readonly transport: Transport;
  readonly dma: DmaTable;
  readonly irqs: IrqTable;
  readonly stats: SessionStats = { commands: 0, errors: 0, regionReads: 0, regionWrites: 0, fdsClosed: 0 };
  readonly #negotiation = new Negotiation();
  #attached = false;
  readonly #device: VfioUserDevice;
  readonly #s: SessionState;
  readonly #onClosed: (session: Session, reason: string) => void;
  readonly #context: DeviceContext;

  constructor(
    fd: number,
    device: VfioUserDevice,
    limits: SessionLimits,
    log: Logger,
    onClosed: (s: Session, reason: string) => void,
  ) {
    this.#device = device;
    this.#onClosed = onClosed;
    this.dma = new DmaTable({ maxRegions: limits.maxDmaRegions, maxRegionSize: MAX_DMA_REGION_SIZE });
    const counts: number[] = [];
    for (let i = 0; i < PCI_NUM_IRQS; i++) counts.push(device.irqCount(i));
    this.irqs = new IrqTable(counts);
    const regions: (RegionHandler | undefined)[] = [];
    for (let i = 0; i < PCI_NUM_REGIONS; i++) regions.push(device.region(i));
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
    this.#s = new SessionState({
      transport: this.transport,
      device,
      limits,
      log,
      stats: this.stats,
      dma: this.dma,
      irqs: this.irqs,
      regions,
    });
  }

  /** The client's capabilities after VERSION (empty before). */
  get peerCapabilities(): Capabilities {
    return this.#negotiation.capabilities;
  }

  get peerLimits(): PeerLimits | null {
    return this.#negotiation.peer;
  }

  start(): void {
    const ms = this.#s.limits.negotiationTimeoutMs;
    this.#negotiation.arm(ms, () => {
      if (this.transport.closed) return;
      this.#s.log.warn(`vfio-user: no VERSION within ${ms} ms of connecting; closing the client`);
      this.close('negotiation timed out');
    });
    this.transport.start();
  }

  close(reason = 'server closed the session'): void {
    this.transport.close(reason);
  }

  // ---- TransportHandler --------------------------------------------------------

  badHeader(h: RawHeader, error: ProtocolError): void {
    warnLimited(this.#s.log, this.#s.limiter, error.code, `vfio-user: ${error.detail}; closing the connection`, {
      id: h.id,
      command: h.command,
    });
    if (!isReplyType(h.flags) && !(h.flags & HeaderFlag.NO_REPLY)) this.#s.error(h.id, h.command, error.errno);
  }

  closed(reason: string): void {
    this.#negotiation.disarm();
    this.#s.unwatchBus?.();
    this.#s.unwatchBus = null;
    this.#s.log.info(`vfio-user: client disconnected (${reason})`);
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
      reportBug(this.#s.log, `vfio-user ${commandName(h.command)} handler`, e);
      if (this.transport.writer.ended === replies && !(h.flags & HeaderFlag.NO_REPLY) && !isReplyType(h.flags)) {
        this.#s.error(h.id, h.command, Errno.EIO);
      }
    }
    // Until a VERSION succeeds, any refused message ends the connection
    // (docs/vfio-user-protocol.md 4.1: first message not VERSION, short payload, bad
    // JSON, fds on VERSION...). Flush first so the EINVAL reply goes out before
    // the close: closing with the reply still batched in the writer dropped it.
    if (!this.#negotiation.negotiated && !this.transport.closed) {
      this.transport.flush();
      this.close('negotiation failed');
    }
  }

  #handle(h: RawHeader, payload: Buffer, fds: number[]): void {
    this.stats.commands++;
    const noReply = (h.flags & HeaderFlag.NO_REPLY) !== 0;
    if (isReplyType(h.flags)) {
      // We never send commands to the client, so any reply is unsolicited.
      this.#s.reject(
        h,
        fds,
        protocolError('UNSOLICITED_REPLY', `unsolicited reply (id ${h.id}, ${commandName(h.command)})`),
      );
      return;
    }
    if ((h.flags & HeaderFlag.TYPE_MASK) !== HeaderFlag.TYPE_COMMAND) {
      // Types 2-15 are neither command nor reply: refuse them rather than serve
      // them as commands (docs/vfio-user-protocol.md 4.2: only commands are taken).
      this.#s.reject(
        h,
        fds,
        protocolError(
          'BAD_FLAGS',
          `message type ${h.flags & HeaderFlag.TYPE_MASK} is not a command (id ${h.id}, ${commandName(h.command)})`,
        ),
      );
      return;
    }
    if (fds.length > this.#s.limits.maxMsgFds) {
      this.#s.reject(
        h,
        fds,
        protocolError(
          'TOO_MANY_FDS',
          `${fds.length} fds on ${commandName(h.command)} (limit ${this.#s.limits.maxMsgFds})`,
        ),
      );
      return;
    }
    if (!this.#negotiation.negotiated && h.command !== Command.VERSION) {
      // message() flushes this reply and closes the connection.
      this.#s.reject(h, fds, protocolError('FIRST_NOT_VERSION', `${commandName(h.command)} before VERSION`));
      return;
    }
    // Hot path: region accesses are decoded in place, without building objects.
    if (h.command === Command.REGION_WRITE) {
      if (fds.length) {
        this.#s.reject(h, fds, unexpectedFds(h.command));
        return;
      }
      regionWrite(this.#s, h, payload, noReply);
      return;
    }
    if (h.command === Command.REGION_READ) {
      if (fds.length) {
        this.#s.reject(h, fds, unexpectedFds(h.command));
        return;
      }
      regionRead(this.#s, h, payload, noReply);
      return;
    }
    if (h.command === Command.DEVICE_RESET && payload.length !== 0) {
      this.#s.reject(h, fds, protocolError('PAYLOAD_MISMATCH', 'DEVICE_RESET carries a payload'));
      return;
    }
    if (h.command !== Command.DEVICE_RESET && payload.length === 0) {
      this.#s.reject(h, fds, protocolError('HEADER_ONLY', `${commandName(h.command)} without a payload`));
      return;
    }
    const d = decodeRequest(h.command, payload);
    if (!d.ok) {
      this.#s.reject(h, fds, d.error);
      return;
    }
    const err = this.#dispatch(h, d.value, fds, noReply);
    if (err) this.#s.reject(h, fds, err);
  }

  // ---- routing -------------------------------------------------------------------

  /** Route a decoded command. Returns an error to reply with (fds then closed), or null when handled. */
  #dispatch(h: RawHeader, req: Request, fds: number[], noReply: boolean): ProtocolError | null {
    const takesFds = req.kind === 'dmaMap' || req.kind === 'deviceSetIrqs';
    if (!takesFds && fds.length) return unexpectedFds(h.command);
    const s = this.#s;
    switch (req.kind) {
      case 'version':
        return this.#version(h, req, noReply);
      case 'dmaMap':
        return dmaMap(s, h, req, fds, noReply);
      case 'dmaUnmap':
        return dmaUnmap(s, h, req, noReply);
      case 'deviceGetInfo':
        return getDeviceInfo(s, h, req, noReply);
      case 'deviceGetRegionInfo':
        return getRegionInfo(s, h, req, noReply);
      case 'deviceGetRegionIoFds':
        return getRegionIoFds(s, h, req, noReply);
      case 'deviceGetIrqInfo':
        return getIrqInfo(s, h, req, noReply);
      case 'deviceSetIrqs':
        return setIrqs(s, h, req, fds, noReply);
      case 'deviceReset':
        return resetDevice(s, h, noReply);
      case 'regionWriteMulti':
        return writeMulti(s, h, req, noReply);
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

  /** VERSION; once accepted, the device is attached to this client. */
  #version(h: RawHeader, req: Version, noReply: boolean): ProtocolError | null {
    const r = handleVersion(this.#s, this.#negotiation, h, req, noReply);
    switch (r.kind) {
      case 'refused':
        return r.error;
      case 'fatal':
        this.#s.rejectAndClose(h, r.error);
        return null;
      case 'accepted':
        this.#attached = true;
        this.#device.attach(this.#context);
        return null;
    }
  }
}
