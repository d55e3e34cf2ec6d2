// What the stats file needs to know about the device from outside it: when
// something may have changed, and whether a client is connected. The device
// itself is not touched: DeviceActivity wraps the VfioUserDevice the server
// serves (`server.device = activity.wrap(device.pci)`), so every region
// access (BAR0 registers, doorbells: each one moves a counter), attach,
// detach and reset passes through it on its way to the device.
//
// The cost on the request path is one call and a flag test per access, and
// only when a stats file is asked for. Work that finishes later on its own
// (a TAP frame, an RNR timer, a mesh answer) is seen by the writer's one
// follow-up check after each write (stats-file.ts).

import type { ConnectionState } from './metric-families';
import type {
  DeviceContext,
  DmaRange,
  IrqEvent,
  RegionHandler,
  ResetReason,
  VfioUserDevice,
} from '../vfio-user/device';

/** What happened: the writer rewrites at once on a reset and a phase change, otherwise within its interval. */
export type ActivityKind = 'access' | 'attach' | 'detach' | 'reset' | 'phase';

type ActivityListener = (kind: ActivityKind) => void;

/**
 * Where the server is in its life, for tools (ernicctl waits for
 * 'listening'): starting until its socket accepts clients, listening while
 * it serves, stopped once it has been told to stop.
 */
export type ServerPhase = 'starting' | 'listening' | 'stopped';
export const SERVER_PHASES: readonly ServerPhase[] = ['starting', 'listening', 'stopped'];

/** The connection line of the stats file and the connection_up gauge. */
export interface ConnectionView {
  readonly connected: boolean;
  /** "connected", "connected (device reset)", "disconnected (lost connection)", ... (free text, for people). */
  readonly state: string;
  /** The server's phase; absent or null when the server does not report one (the stats file then has no state line). */
  readonly phase?: ServerPhase | null;
}

/** The state label of connection_up: one of CONNECTION_STATES, never free text. */
export function connectionState(v: ConnectionView): ConnectionState {
  if (v.phase === 'stopped') return 'stopped';
  return v.connected ? 'connected' : 'disconnected';
}

const RESET_STATE: Readonly<Record<ResetReason, string>> = {
  'device-reset': 'connected (device reset)',
  flr: 'connected (FLR)',
  'lost-connection': 'disconnected (lost connection)',
};

export class DeviceActivity implements ConnectionView {
  connected = false;
  state = 'disconnected (no client yet)';
  /** Null until the server reports one (setPhase). */
  phase: ServerPhase | null = null;
  readonly #listeners: ActivityListener[] = [];

  /** Be told of every access, attach, detach and reset. */
  onActivity(fn: ActivityListener): void {
    this.#listeners.push(fn);
  }

  /** Record a state the device cannot see (the server stopping). */
  setState(state: string, connected = this.connected): void {
    this.state = state;
    this.connected = connected;
  }

  /**
   * Record the server's phase: 'starting' before its first stats file,
   * 'listening' once server.listen() resolved, 'stopped' on SIGTERM/SIGINT.
   */
  setPhase(phase: ServerPhase): void {
    if (this.phase === phase) return;
    this.phase = phase;
    // At once: ernicctl is waiting for 'listening'.
    this.#emit('phase');
  }

  #emit(kind: ActivityKind): void {
    for (const fn of this.#listeners) fn(kind);
  }

  /** The same device, observed. */
  wrap(device: VfioUserDevice): VfioUserDevice {
    return new ObservedDevice(device, this, (kind) => this.#emit(kind));
  }
}

/** Forwards everything to the device, reporting as it goes. */
class ObservedDevice implements VfioUserDevice {
  readonly #regions = new Map<number, RegionHandler | undefined>();
  readonly dmaMapped?: (range: DmaRange) => void;
  readonly dmaUnmapped?: (range: DmaRange) => void;
  readonly irqChanged?: (event: IrqEvent) => void;

  constructor(
    private readonly inner: VfioUserDevice,
    private readonly view: DeviceActivity,
    private readonly emit: (kind: ActivityKind) => void,
  ) {
    if (inner.dmaMapped) this.dmaMapped = (r) => inner.dmaMapped!(r);
    if (inner.dmaUnmapped) this.dmaUnmapped = (r) => inner.dmaUnmapped!(r);
    if (inner.irqChanged) this.irqChanged = (e) => inner.irqChanged!(e);
  }

  get resetSupported(): boolean {
    return this.inner.resetSupported;
  }

  region(index: number): RegionHandler | undefined {
    // One wrapper per region, made once: the session keeps what it gets.
    if (!this.#regions.has(index)) {
      const h = this.inner.region(index);
      this.#regions.set(index, h && new ObservedRegion(h, this.emit));
    }
    return this.#regions.get(index);
  }

  irqCount(index: number): number {
    return this.inner.irqCount(index);
  }

  attach(ctx: DeviceContext): void {
    this.inner.attach(ctx);
    this.view.setState('connected', true);
    this.emit('attach');
  }

  detach(): void {
    this.inner.detach();
    this.view.setState(RESET_STATE['lost-connection'], false);
    this.emit('detach');
  }

  reset(reason: ResetReason): void {
    this.inner.reset(reason);
    this.view.setState(RESET_STATE[reason] ?? `connected (${String(reason)})`, reason !== 'lost-connection');
    this.emit('reset');
  }
}

class ObservedRegion implements RegionHandler {
  readonly size: number;
  readonly readable: boolean;
  readonly writable: boolean;

  constructor(
    private readonly inner: RegionHandler,
    private readonly emit: (kind: ActivityKind) => void,
  ) {
    this.size = inner.size;
    this.readable = inner.readable;
    this.writable = inner.writable;
  }

  read(offset: number, dst: Buffer): number {
    const r = this.inner.read(offset, dst);
    this.emit('access');
    return r;
  }

  write(offset: number, src: Buffer): number {
    const r = this.inner.write(offset, src);
    this.emit('access');
    return r;
  }
}
