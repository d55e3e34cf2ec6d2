// The Ethernet LIF: its queues, MAC filters and receive mode, and the data
// path between the queues and the wire.
//
// TX runs inside the doorbell write (lowest latency), up to QUEUE_BUDGET
// descriptors per pass; the rest is rescheduled with setImmediate so one queue
// cannot starve the socket or the other queues. RX is driven by frames
// arriving from the wire, steered by a fixed flow hash to an enabled queue.

import type { Logger } from '../log';
import { RateLimiter, warnLimited } from '../log';
import { guardedImmediate } from '../guard';
import type { GuestMemory } from '../vfio-user/guest-memory';
import { QType } from './constants';
import type { FaultInjector } from './fault-injection';
import { AddrKind, destinationKind, flowHash } from './frames';
import { RxFilters } from './rx-filters';
import type { FrameEndpoint, HostLink } from '../net/frame-endpoint';
import type { InterruptController } from './interrupts';
import { ionic_lif_stats } from './layouts';
import {
  AdminQueue,
  EthQueue,
  NotifyQueue,
  QUEUE_BUDGET,
  RxCsumFlag,
  RxMeta,
  RxQueue,
  RxResult,
  TxPacket,
  TxQueue,
  TxResult,
} from './queues';
import { onesSum } from './offload/checksum';
import { EthHw } from './offload/features';
import { PacketInfo, rxPktType } from './offload/packet';
import { finishPartialChecksum } from './offload/segment';
import { CUT_BAD, CUT_DONE, HostGsoCutter } from './offload/host-gso';
import { MAX_SEGMENT, TxOffload, TxSink, TxVerdict } from './offload/transmit';
import { FrameOffload } from '../net/vnet';
import { ETH_P_8021Q, ethhdr, vlan_ethhdr } from '../net/headers';
import type { DeviceStats } from './stats';

interface LifContext {
  memory(): GuestMemory | undefined;
  readonly interrupts: InterruptController;
  readonly stats: DeviceStats;
  readonly faults: FaultInjector;
  readonly log: Logger;
  /** Run an admin command (shared with the BAR0 device-command path). */
  execute(cmd: Buffer, comp: Buffer): void;
}

/** The largest frame the host link hands us (a 64 KiB GSO frame with its link header). */
const HELD_FRAME_MAX = 65536 + 1024;

/** What became of a frame offered to the guest. */
const enum RxFate {
  DONE,
  /** Its queue is enabled but has no buffer posted: the frame may wait. */
  NO_BUFFER,
}

/** Frames queued for the guest by in-process endpoints wait at most this many (then the oldest go). */
const MAX_PENDING_TO_GUEST = 4096;

export class Lif {
  adminq: AdminQueue | null = null;
  notifyq: NotifyQueue | null = null;
  readonly txqs: (TxQueue | null)[] = [];
  readonly rxqs: (RxQueue | null)[] = [];
  mac: Buffer;
  mtu = 1500;
  readonly rxFilters = new RxFilters();
  link: HostLink | null = null;
  readonly endpoints: FrameEndpoint[] = [];
  /** Frames from in-process endpoints waiting for an RX buffer, in order. */
  readonly #toGuest: Buffer[] = [];
  /** Each waiting frame's sum after the Ethernet header, or -1 (sendToGuest's l3Sum). */
  readonly #toGuestSums: number[] = [];
  #txScheduled = new Set<TxQueue>();
  #adminScheduled: AdminQueue | null = null;
  readonly #limiter = new RateLimiter();
  readonly #pkt = new TxPacket();
  readonly #txOffload = new TxOffload();
  readonly #txSink: TxSink;
  readonly #rxMeta = new RxMeta();
  readonly #rxInfo = new PacketInfo();
  /** A segment cut from a host GSO frame, or a frame with its VLAN tag stripped. */
  readonly #hostGso = new HostGsoCutter();
  readonly #offerPiece = (piece: Buffer): boolean => this.#receiveOne(piece) !== RxFate.NO_BUFFER;
  readonly #rxStrip = Buffer.alloc(MAX_SEGMENT);
  /** A frame from the host link that found its RX queue without a buffer: kept (the link paused) until the guest posts some. */
  readonly #held = Buffer.alloc(HELD_FRAME_MAX);
  readonly #heldOffload = new FrameOffload();
  #heldLen = 0;
  /** The next segment of a held GSO frame to deliver; -1: nothing held. */
  #heldSeg = -1;
  #heldSince = 0;
  /** Offloads in force: what the driver asked for with LIF_SETATTR FEATURES, AND what the profile offers (EthHw bits). */
  features = 0;
  /** The LIF was initialised (LIF_INIT) and not reset since. */
  initialized = false;

  constructor(
    private readonly ctx: LifContext,
    readonly queues: number,
    mac: Buffer,
  ) {
    this.mac = Buffer.from(mac);
    for (let i = 0; i < queues; i++) {
      this.txqs.push(null);
      this.rxqs.push(null);
    }
    this.#txSink = {
      frame: (frame) => this.#transmit(frame, destinationKind(frame)),
      whole: (frame, o, wireFrames) => this.#transmitWhole(frame, o, wireFrames),
    };
  }

  /** Forget every queue and filter (LIF_RESET, RESET, disconnect). */
  reset(): void {
    this.adminq = null;
    this.notifyq = null;
    this.txqs.fill(null);
    this.rxqs.fill(null);
    this.rxFilters.clear();
    this.#toGuest.length = 0;
    this.#toGuestSums.length = 0;
    this.#txScheduled.clear();
    this.#adminScheduled = null;
    this.initialized = false;
    this.features = 0;
    this.releaseHeld();
  }

  /** Drop the held frame, if any, and let the host link deliver again (a reset, or an RX queue disabled). */
  releaseHeld(): void {
    if (this.#heldSeg < 0) return;
    this.#heldSeg = -1;
    this.link?.resume?.();
  }

  queue(type: number, index: number): EthQueue | null {
    switch (type) {
      case QType.ADMINQ:
        return index === 0 ? this.adminq : null;
      case QType.NOTIFYQ:
        return index === 0 ? this.notifyq : null;
      case QType.RXQ:
        return this.rxqs[index] ?? null;
      case QType.TXQ:
        return this.txqs[index] ?? null;
      default:
        return null;
    }
  }

  // ---- admin queue --------------------------------------------------------------------------

  adminDoorbell(pIndex: number): void {
    const q = this.adminq;
    const mem = this.ctx.memory();
    if (!q || !mem) return;
    if (pIndex >= q.size) {
      warnLimited(
        this.ctx.log,
        this.#limiter,
        'adminq-pindex',
        `ionic: admin queue doorbell index ${pIndex} past the ring (${q.size})`,
      );
      return;
    }
    q.ring.pi = pIndex;
    this.runAdmin(q);
  }

  /** Run posted admin commands, up to the budget; reschedule the rest (a full ring is 32,768 commands). */
  runAdmin(q: AdminQueue): void {
    const mem = this.ctx.memory();
    if (!mem || this.adminq !== q) return;
    const n = q.process(mem, QUEUE_BUDGET, (cmd, comp) => this.ctx.execute(cmd, comp));
    if (n < 0)
      warnLimited(
        this.ctx.log,
        this.#limiter,
        'adminq-dma',
        'ionic: admin queue ring or CQ outside guest memory; queue stopped',
      );
    if (n > 0 && q.cfg.irq) this.ctx.interrupts.assert(q.cfg.intr, n);
    if (n > 0 && !q.ring.empty && this.#adminScheduled !== q) {
      this.#adminScheduled = q;
      guardedImmediate(
        this.ctx.log,
        'ionic admin queue',
        () => {
          if (this.#adminScheduled === q) this.#adminScheduled = null;
          this.runAdmin(q);
        },
        () => {
          if (this.adminq === q) this.adminq = null;
        },
      );
    }
  }

  // ---- TX -------------------------------------------------------------------------------------

  txDoorbell(index: number, pIndex: number): void {
    const q = this.txqs[index];
    if (!q) return;
    if (pIndex >= q.size) {
      warnLimited(
        this.ctx.log,
        this.#limiter,
        'txq-pindex',
        `ionic: TX queue ${index} doorbell index ${pIndex} past the ring (${q.size})`,
      );
      return;
    }
    // Doorbells before ENABLE are latched; duplicates are harmless.
    q.ring.pi = pIndex;
    if (q.enabled) this.runTx(q);
  }

  /** Send posted frames, up to the budget; reschedule the rest. */
  runTx(q: TxQueue): void {
    const mem = this.ctx.memory();
    if (!mem || !q.enabled) return;
    const stats = this.ctx.stats;
    let done = 0;
    const endpoints = this.endpoints;
    // One interrupt for the pass: TX completions and whatever the endpoints answer into RX. Released
    // whatever happens, or the device would never interrupt again.
    const irq = this.ctx.interrupts;
    irq.hold();
    try {
      for (const e of endpoints) e.txPass?.(true);
      try {
        while (!q.ring.empty && done < QUEUE_BUDGET) {
          const pkt = this.#pkt;
          const r = q.gather(mem, pkt);
          if (r === TxResult.INCOMPLETE) break;
          if (r === TxResult.DMA_ERROR) {
            stats.count(ionic_lif_stats.tx_desc_fetch_error);
            this.#stopOnDmaError(q, 'TX');
            break;
          }
          if (r === TxResult.BAD_DESC || pkt.len < ethhdr.SIZE) {
            this.#txMalformed(q, pkt.len);
          } else if (this.ctx.faults.fail('tx-drop')) {
            // Injected: completed to the guest as sent, but never leaves.
            stats.txFrame(AddrKind.UNICAST, pkt.len);
          } else if (this.#txOffload.send(q.buf, pkt, this.#txSink) === TxVerdict.MALFORMED) {
            this.#txMalformed(q, pkt.len);
          }
          if (!q.complete(mem, 0, Math.max(1, pkt.descs))) {
            q.enabled = false;
            break;
          }
          done++;
        }
      } finally {
        // Always closed, or an endpoint would hold its answers for ever.
        for (const e of endpoints) e.txPass?.(false);
      }
    } finally {
      if (done > 0 && q.cfg.irq) irq.assert(q.cfg.intr, done);
      irq.release();
    }
    if (!q.ring.empty && q.enabled && !this.#txScheduled.has(q)) {
      this.#txScheduled.add(q);
      guardedImmediate(
        this.ctx.log,
        `ionic TX queue ${q.cfg.index}`,
        () => {
          this.#txScheduled.delete(q);
          if (this.txqs[q.cfg.index] === q) this.runTx(q);
        },
        () => {
          q.enabled = false;
        },
      );
    }
  }

  /** A queue whose descriptors or buffers lie outside guest memory stops (logged, rate limited per direction). */
  #stopOnDmaError(q: TxQueue | RxQueue, dir: 'TX' | 'RX'): void {
    warnLimited(
      this.ctx.log,
      this.#limiter,
      dir === 'TX' ? 'txq-dma' : 'rxq-dma',
      `ionic: ${dir} queue ${q.cfg.index}: descriptor or buffer outside guest memory; queue stopped`,
    );
    q.enabled = false;
  }

  #txMalformed(q: TxQueue, len: number): void {
    this.ctx.stats.txDrop(AddrKind.UNICAST, len, 'desc');
    warnLimited(
      this.ctx.log,
      this.#limiter,
      'txq-desc',
      `ionic: TX queue ${q.cfg.index}: malformed descriptor at ${q.ring.ci}; frame dropped`,
    );
  }

  /**
   * A frame left unfinished (partial checksum, super-frame), offered whole:
   * to the endpoints in order while they take offloads (the first that does
   * not gets it finished, with everything after it), then to a host link
   * that finishes frames itself. Counted as the frames it becomes on the wire.
   */
  #transmitWhole(frame: Buffer, o: FrameOffload, wireFrames: number): boolean {
    for (const e of this.endpoints) {
      if (!e.takesOffloads) return false;
      if (e.claimTx?.(frame, o)) {
        this.#countWhole(frame, o, wireFrames, true);
        return true;
      }
    }
    // Without a link the frame is completed and discarded, as on an unplugged port: nothing to finish.
    if (this.link && !this.link.offloads) return false;
    this.#countWhole(frame, o, wireFrames, this.link ? this.link.send(frame, o) : true);
    return true;
  }

  #countWhole(frame: Buffer, o: FrameOffload, wireFrames: number, ok: boolean): void {
    const kind = destinationKind(frame);
    const perFrame = wireFrames > 1 ? o.hdrLen + Math.ceil((frame.length - o.hdrLen) / wireFrames) : frame.length;
    for (let i = 0; i < wireFrames; i++) {
      if (ok) this.ctx.stats.txFrame(kind, perFrame);
      else this.ctx.stats.txDrop(kind, perFrame, 'error');
    }
  }

  #transmit(frame: Buffer, kind: AddrKind): void {
    for (const e of this.endpoints) {
      if (e.claimTx?.(frame)) {
        this.ctx.stats.txFrame(kind, frame.length);
        return;
      }
    }
    if (this.link && !this.link.send(frame)) {
      this.ctx.stats.txDrop(kind, frame.length, 'error');
      return;
    }
    // Without a link the frame is completed and discarded, as on an unplugged port.
    this.ctx.stats.txFrame(kind, frame.length);
  }

  // ---- RX --------------------------------------------------------------------------------------

  rxDoorbell(index: number, pIndex: number): void {
    const q = this.rxqs[index];
    if (!q) return;
    if (pIndex >= q.size) {
      warnLimited(
        this.ctx.log,
        this.#limiter,
        'rxq-pindex',
        `ionic: RX queue ${index} doorbell index ${pIndex} past the ring (${q.size})`,
      );
      return;
    }
    q.ring.pi = pIndex;
    if (this.#toGuest.length) this.#drainToGuest();
    if (this.#heldSeg >= 0) {
      const from = this.#heldSeg;
      this.#heldSeg = -1;
      this.receive(this.#held.subarray(0, this.#heldLen), this.#heldOffload, from);
      if (this.#heldSeg < 0) {
        const waited = Date.now() - this.#heldSince;
        // A second without RX buffers is the guest's driver stuck, not a burst: worth saying.
        if (waited >= 1000) this.ctx.log.info(`ionic: RX queue ${index}: no RX buffer posted for ${waited} ms`);
        this.link?.resume?.();
      }
    }
  }

  /**
   * A frame from the host wire, with what the host left unfinished: a GSO
   * buffer is cut into the frames the guest takes (offload/host-gso.ts), a
   * partial checksum is finished. Then filters, endpoints, steering, injected
   * faults.
   */
  receive(frame: Buffer, offload: FrameOffload | null = null, fromSegment = 0): void {
    if (offload?.tcpGso || offload?.udpGso) {
      const r = this.#hostGso.cut(frame, offload, fromSegment, this.mtu, this.#offerPiece);
      if (r === CUT_BAD) this.ctx.stats.rxDrop(destinationKind(frame), frame.length, 'error');
      else if (r !== CUT_DONE) this.#hold(frame, offload, r);
      return;
    }
    if (offload?.needsCsum) {
      if (!finishPartialChecksum(frame, frame.length, offload.csumStart, offload.csumOffset)) {
        this.ctx.stats.rxDrop(destinationKind(frame), frame.length, 'error');
        return;
      }
      offload.needsCsum = false; // finished: a held copy must not be finished twice
    }
    if (this.#receiveOne(frame) === RxFate.NO_BUFFER) this.#hold(frame, offload, 0);
  }

  /**
   * Keep a frame from the host link (from segment `seg` on) and pause the
   * link, so the host queues the rest instead of us dropping them. Without a
   * link that pauses, the frame is dropped as a NIC without buffers does.
   */
  #hold(frame: Buffer, offload: FrameOffload | null, seg: number): void {
    if (!this.link?.pause || frame.length > this.#held.length) {
      this.ctx.stats.rxDrop(destinationKind(frame), frame.length, 'no-buffer');
      return;
    }
    if (frame.buffer !== this.#held.buffer || frame.byteOffset !== this.#held.byteOffset) frame.copy(this.#held, 0);
    this.#heldLen = frame.length;
    if (offload) Object.assign(this.#heldOffload, offload);
    else this.#heldOffload.clear();
    this.#heldSeg = seg;
    this.#heldSince = Date.now();
    // An endpoint that must see every host frame (RoCE) keeps the link read; the guest's frames wait no longer.
    if (!this.endpoints.some((e) => e.needsHostFrames === true)) this.link.pause();
  }

  #receiveOne(frame: Buffer): RxFate {
    const kind = destinationKind(frame);
    for (const e of this.endpoints) if (e.claimRx?.(frame)) return RxFate.DONE;
    if (this.#heldSeg >= 0) {
      // The link kept reading for an endpoint (needsHostFrames) while an older frame waits for a buffer.
      this.ctx.stats.rxDrop(kind, frame.length, 'no-buffer');
      return RxFate.DONE;
    }
    if (!this.rxFilters.accepts(frame, kind, this.mac)) return RxFate.DONE;
    if (this.ctx.faults.fail('rx-lost')) return RxFate.DONE;
    const hash = flowHash(frame);
    const q = this.#steer(hash);
    if (!q) {
      this.ctx.stats.rxDrop(kind, frame.length, 'disabled');
      return RxFate.DONE;
    }
    if (this.ctx.faults.fail('rx-nobuf')) {
      this.ctx.stats.rxDrop(kind, frame.length, 'no-buffer');
      return RxFate.DONE;
    }
    if (!q.hasBuffer && this.link?.pause) return RxFate.NO_BUFFER;
    this.#deliver(q, frame, kind, hash);
    return RxFate.DONE;
  }

  /**
   * An in-process endpoint sends a frame to the guest: delivered at once when
   * a buffer is posted and nothing waits before it, else copied to wait for
   * one (so `frame` is the caller's again when this returns). `l3Sum`, when
   * the sender knows it: the ones'-complement sum of everything after the
   * Ethernet header (the RX checksum then needs no pass over the frame).
   */
  sendToGuest(frame: Buffer, l3Sum = -1): void {
    if (this.#toGuest.length === 0) {
      const hash = flowHash(frame);
      const q = this.#steer(hash);
      if (q?.hasBuffer) {
        this.#deliver(q, frame, destinationKind(frame), hash, l3Sum);
        return;
      }
    }
    if (this.#toGuest.length >= MAX_PENDING_TO_GUEST) {
      this.#toGuest.shift();
      this.#toGuestSums.shift();
    }
    this.#toGuest.push(Buffer.from(frame));
    this.#toGuestSums.push(l3Sum);
    this.#drainToGuest();
  }

  #drainToGuest(): void {
    while (this.#toGuest.length) {
      const frame = this.#toGuest[0]!;
      const hash = flowHash(frame);
      const q = this.#steer(hash);
      if (!q || !q.hasBuffer) return;
      this.#toGuest.shift();
      this.#deliver(q, frame, destinationKind(frame), hash, this.#toGuestSums.shift()!);
    }
  }

  #deliver(q: RxQueue, frame: Buffer, kind: AddrKind, hash: number, l3Sum = -1): void {
    const mem = this.ctx.memory();
    if (!mem) return;
    if (!q.hasBuffer) {
      this.ctx.stats.rxDrop(kind, frame.length, 'no-buffer');
      return;
    }
    const meta = this.#rxMeta;
    frame = this.#rxOffloads(frame, meta, hash, l3Sum);
    const r = q.deliver(mem, frame, meta);
    switch (r) {
      case RxResult.DELIVERED:
        this.ctx.stats.rxFrame(kind, frame.length);
        break;
      case RxResult.NO_BUFFER:
        this.ctx.stats.rxDrop(kind, frame.length, 'no-buffer');
        return;
      case RxResult.TOO_BIG:
        this.ctx.stats.rxDrop(kind, frame.length, 'error');
        break;
      case RxResult.DMA_ERROR:
        this.ctx.stats.rxDrop(kind, frame.length, 'error');
        this.#stopOnDmaError(q, 'RX');
        return;
    }
    if (q.cfg.irq) this.ctx.interrupts.assert(q.cfg.intr, 1);
  }

  /**
   * Fill the completion's offload fields for a frame: hash and packet type,
   * the VLAN tag stripped (the frame returned is then a copy without it),
   * and the complete sum of everything after the Ethernet header (`l3Sum`
   * when the sender gave it and the frame kept its layout).
   */
  #rxOffloads(frame: Buffer, meta: RxMeta, hash: number, l3Sum: number): Buffer {
    meta.rssHash = hash;
    meta.csum = 0;
    meta.csumFlags = 0;
    meta.vlanTci = 0;
    meta.pktType = 0;
    const f = this.features;
    if (f === 0 || frame.length < ethhdr.SIZE) return frame;
    let out = frame;
    if (
      f & EthHw.VLAN_RX_STRIP &&
      frame.length >= vlan_ethhdr.SIZE &&
      frame.readUInt16BE(ethhdr.h_proto.off) === ETH_P_8021Q
    ) {
      meta.vlanTci = frame.readUInt16BE(vlan_ethhdr.h_vlan_TCI.off);
      meta.csumFlags |= RxCsumFlag.VLAN;
      const vlanLen = vlan_ethhdr.SIZE - ethhdr.SIZE;
      frame.copy(this.#rxStrip, 0, 0, ethhdr.h_proto.off);
      frame.copy(this.#rxStrip, ethhdr.h_proto.off, ethhdr.h_proto.off + vlanLen);
      out = this.#rxStrip.subarray(0, frame.length - vlanLen);
    }
    // The packet type only picks the hash type, which the driver reads only with RX_HASH.
    if (f & EthHw.RX_HASH) meta.pktType = rxPktType(this.#rxInfo.parse(out, out.length));
    if (f & EthHw.RX_CSUM) {
      meta.csum = l3Sum >= 0 && out === frame ? l3Sum : onesSum(out, ethhdr.SIZE, out.length - ethhdr.SIZE);
      meta.csumFlags |= RxCsumFlag.CALC;
    }
    return out;
  }

  /** The enabled RX queue a flow lands on: a fixed hash over the enabled queues, in index order. */
  #steer(hash: number): RxQueue | null {
    const qs = this.rxqs;
    let n = 0;
    for (let i = 0; i < qs.length; i++) if (qs[i]?.enabled) n++;
    if (n === 0) return null;
    let pick = hash % n;
    for (let i = 0; i < qs.length; i++) {
      const q = qs[i];
      if (!q?.enabled) continue;
      if (pick-- === 0) return q;
    }
    return null;
  }
}
