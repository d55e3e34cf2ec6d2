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
import { QType, RxMode } from './constants';
import type { FaultInjector } from './fault-injection';
import { AddrKind, destinationKind, flowHash } from './frames';
import type { FrameEndpoint, HostLink } from '../net/frame-endpoint';
import type { InterruptController } from './interrupts';
import { ionic_lif_stats } from './layouts';
import { AdminQueue, EthQueue, NotifyQueue, QUEUE_BUDGET, RxQueue, RxResult, TxQueue, TxResult } from './queues';
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

/** Frames queued for the guest by in-process endpoints wait at most this many (then the oldest go). */
const MAX_PENDING_TO_GUEST = 4096;

export class Lif {
  adminq: AdminQueue | null = null;
  notifyq: NotifyQueue | null = null;
  readonly txqs: (TxQueue | null)[] = [];
  readonly rxqs: (RxQueue | null)[] = [];
  mac: Buffer;
  mtu = 1500;
  rxMode = 0;
  readonly filters = new Map<number, { match: number; mac?: string; vlan?: number }>();
  #nextFilterId = 1;
  readonly #macFilters = new Set<string>();
  link: HostLink | null = null;
  readonly endpoints: FrameEndpoint[] = [];
  /** Frames from in-process endpoints waiting for an RX buffer, in order. */
  readonly #toGuest: Buffer[] = [];
  #txScheduled = new Set<TxQueue>();
  #adminScheduled: AdminQueue | null = null;
  readonly #limiter = new RateLimiter();
  readonly #gather = { len: 0 };
  /** The LIF was initialised (LIF_INIT) and not reset since. */
  initialized = false;

  constructor(private readonly ctx: LifContext, readonly queues: number, mac: Buffer) {
    this.mac = Buffer.from(mac);
    for (let i = 0; i < queues; i++) { this.txqs.push(null); this.rxqs.push(null); }
  }

  /** Forget every queue and filter (LIF_RESET, RESET, disconnect). */
  reset(): void {
    this.adminq = null;
    this.notifyq = null;
    this.txqs.fill(null);
    this.rxqs.fill(null);
    this.filters.clear();
    this.#macFilters.clear();
    this.rxMode = 0;
    this.#toGuest.length = 0;
    this.#txScheduled.clear();
    this.#adminScheduled = null;
    this.initialized = false;
  }

  queue(type: number, index: number): EthQueue | null {
    switch (type) {
      case QType.ADMINQ: return index === 0 ? this.adminq : null;
      case QType.NOTIFYQ: return index === 0 ? this.notifyq : null;
      case QType.RXQ: return this.rxqs[index] ?? null;
      case QType.TXQ: return this.txqs[index] ?? null;
      default: return null;
    }
  }

  // ---- filters and modes ------------------------------------------------------------------

  hasMacFilter(mac: Buffer): boolean {
    const key = mac.toString('hex');
    for (const f of this.filters.values()) if (f.match === 1 && f.mac === key) return true;
    return false;
  }

  addMacFilter(mac: Buffer): number {
    const id = this.#nextFilterId++;
    const key = mac.toString('hex');
    this.filters.set(id, { match: 1, mac: key });
    this.#macFilters.add(key);
    return id;
  }

  addOtherFilter(match: number, vlan?: number): number {
    const id = this.#nextFilterId++;
    this.filters.set(id, { match, ...(vlan !== undefined ? { vlan } : {}) });
    return id;
  }

  delFilter(id: number): boolean {
    const f = this.filters.get(id);
    if (!f) return false;
    this.filters.delete(id);
    if (f.mac && ![...this.filters.values()].some((o) => o.mac === f.mac)) this.#macFilters.delete(f.mac);
    return true;
  }

  /** Does the receive mode and filter set accept a frame with this destination? */
  accepts(frame: Buffer, kind: AddrKind): boolean {
    if (this.rxMode & RxMode.PROMISC) return true;
    if (kind === AddrKind.BROADCAST) return (this.rxMode & RxMode.BROADCAST) !== 0;
    const dst = frame.toString('hex', 0, 6);
    if (kind === AddrKind.MULTICAST) return (this.rxMode & RxMode.ALLMULTI) !== 0 || this.#macFilters.has(dst);
    return (this.rxMode & RxMode.UNICAST) !== 0 && (this.#macFilters.has(dst) || dst === this.mac.toString('hex'));
  }

  // ---- admin queue --------------------------------------------------------------------------

  adminDoorbell(pIndex: number): void {
    const q = this.adminq;
    const mem = this.ctx.memory();
    if (!q || !mem) return;
    if (pIndex >= q.size) {
      warnLimited(this.ctx.log, this.#limiter, 'adminq-pindex', `ionic: admin queue doorbell index ${pIndex} past the ring (${q.size})`);
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
    if (n < 0) warnLimited(this.ctx.log, this.#limiter, 'adminq-dma', 'ionic: admin queue ring or CQ outside guest memory; queue stopped');
    if (n > 0 && q.cfg.irq) this.ctx.interrupts.assert(q.cfg.intr, n);
    if (n > 0 && !q.ring.empty && this.#adminScheduled !== q) {
      this.#adminScheduled = q;
      guardedImmediate(this.ctx.log, 'ionic admin queue', () => {
        if (this.#adminScheduled === q) this.#adminScheduled = null;
        this.runAdmin(q);
      }, () => { if (this.adminq === q) this.adminq = null; });
    }
  }

  // ---- TX -------------------------------------------------------------------------------------

  txDoorbell(index: number, pIndex: number): void {
    const q = this.txqs[index];
    if (!q) return;
    if (pIndex >= q.size) {
      warnLimited(this.ctx.log, this.#limiter, 'txq-pindex', `ionic: TX queue ${index} doorbell index ${pIndex} past the ring (${q.size})`);
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
    while (!q.ring.empty && done < QUEUE_BUDGET) {
      const r = q.gather(mem, this.#gather);
      if (r === TxResult.DMA_ERROR) {
        stats.count(ionic_lif_stats.tx_desc_fetch_error);
        warnLimited(this.ctx.log, this.#limiter, 'txq-dma', `ionic: TX queue ${q.cfg.index}: descriptor or buffer outside guest memory; queue stopped`);
        q.enabled = false;
        break;
      }
      const frame = q.frame.subarray(0, r === TxResult.SENT ? this.#gather.len : 0);
      const kind = destinationKind(frame);
      if (r === TxResult.BAD_DESC || frame.length < 14) {
        stats.txDrop(kind, frame.length, 'desc');
        warnLimited(this.ctx.log, this.#limiter, 'txq-desc', `ionic: TX queue ${q.cfg.index}: malformed descriptor at ${q.ring.ci}; frame dropped`);
      } else if (this.ctx.faults.fail('tx-drop')) {
        // Injected: completed to the guest as sent, but never leaves.
        stats.txFrame(kind, frame.length);
      } else {
        this.#transmit(frame, kind);
      }
      if (!q.complete(mem, 0)) { q.enabled = false; break; }
      done++;
    }
    if (done > 0 && q.cfg.irq) this.ctx.interrupts.assert(q.cfg.intr, done);
    if (!q.ring.empty && q.enabled && !this.#txScheduled.has(q)) {
      this.#txScheduled.add(q);
      guardedImmediate(this.ctx.log, `ionic TX queue ${q.cfg.index}`, () => {
        this.#txScheduled.delete(q);
        if (this.txqs[q.cfg.index] === q) this.runTx(q);
      }, () => { q.enabled = false; });
    }
  }

  #transmit(frame: Buffer, kind: AddrKind): void {
    for (const e of this.endpoints) {
      if (e.claimTx?.(frame)) { this.ctx.stats.txFrame(kind, frame.length); return; }
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
      warnLimited(this.ctx.log, this.#limiter, 'rxq-pindex', `ionic: RX queue ${index} doorbell index ${pIndex} past the ring (${q.size})`);
      return;
    }
    q.ring.pi = pIndex;
    if (this.#toGuest.length) this.#drainToGuest();
  }

  /** A frame from the host wire: filters, endpoints, steering, injected faults. */
  receive(frame: Buffer): void {
    const kind = destinationKind(frame);
    for (const e of this.endpoints) if (e.claimRx?.(frame)) return;
    if (!this.accepts(frame, kind)) return;
    if (this.ctx.faults.fail('rx-lost')) return;
    const q = this.#steer(frame);
    if (!q) { this.ctx.stats.rxDrop(kind, frame.length, 'disabled'); return; }
    if (this.ctx.faults.fail('rx-nobuf')) { this.ctx.stats.rxDrop(kind, frame.length, 'no-buffer'); return; }
    this.#deliver(q, frame, kind);
  }

  /** An in-process endpoint sends a frame to the guest: it waits for a buffer if none is posted. */
  sendToGuest(frame: Buffer): void {
    if (this.#toGuest.length >= MAX_PENDING_TO_GUEST) this.#toGuest.shift();
    this.#toGuest.push(Buffer.from(frame));
    this.#drainToGuest();
  }

  #drainToGuest(): void {
    while (this.#toGuest.length) {
      const frame = this.#toGuest[0]!;
      const q = this.#steer(frame);
      if (!q || !q.hasBuffer) return;
      this.#toGuest.shift();
      this.#deliver(q, frame, destinationKind(frame));
    }
  }

  #deliver(q: RxQueue, frame: Buffer, kind: AddrKind): void {
    const mem = this.ctx.memory();
    if (!mem) return;
    const r = q.deliver(mem, frame, flowHash(frame));
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
        warnLimited(this.ctx.log, this.#limiter, 'rxq-dma', `ionic: RX queue ${q.cfg.index}: descriptor or buffer outside guest memory; queue stopped`);
        q.enabled = false;
        return;
    }
    if (q.cfg.irq) this.ctx.interrupts.assert(q.cfg.intr, 1);
  }

  /** The enabled RX queue a flow lands on: a fixed hash over the enabled queues, in index order. */
  #steer(frame: Buffer): RxQueue | null {
    let n = 0;
    for (const q of this.rxqs) if (q?.enabled) n++;
    if (n === 0) return null;
    let pick = flowHash(frame) % n;
    for (const q of this.rxqs) {
      if (!q?.enabled) continue;
      if (pick-- === 0) return q;
    }
    return null;
  }
}
