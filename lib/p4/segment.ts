// The P4 engine as an endpoint on the device's Ethernet segment (the
// FrameEndpoint of lib/ionic/frames.ts), ready for the device to add after
// the endpoints that claim frames first (the S3 store): every frame the
// guest sends and every frame from the host link goes through the program.
//
// Ports: the guest side is `guestPort`, the host link `hostPort` (1 and 2
// by default, as in simple_router's commands.txt). The program's egress port
// (or multicast group: both sides but the one it came from) decides where the
// result goes. A frame that leaves unchanged on the side it was going to
// anyway is left to the device (claim returns false, so the device's own
// RX filters and link accounting apply); otherwise the endpoint sends the
// program's frame itself and claims the original. Dropped frames and frames
// for other ports are claimed and counted. Added to the device by ./attach.ts (--p4 options).

import { FrameEndpoint } from '../ionic/frames';
import { P4Engine } from './compile';

export interface P4SegmentOptions {
  guestPort?: number;
  hostPort?: number;
  /** Sends a frame to the host link; false when it could not. */
  toHost(frame: Buffer): boolean;
  /** Queues a frame for the guest (copied by the callee if it keeps it). */
  toGuest(frame: Buffer): void;
  /** Digests (generate_digest) of each frame, for a control plane. */
  onDigest?(digests: { list: number; values: bigint[] }[]): void;
}

export interface P4SegmentStats {
  fromGuest: number;
  fromHost: number;
  dropped: number;
  toHost: number;
  toHostErrors: number;
  toGuest: number;
  passed: number;
  unknownPort: number;
}

export class P4Segment implements FrameEndpoint {
  readonly stats: P4SegmentStats = { fromGuest: 0, fromHost: 0, dropped: 0, toHost: 0, toHostErrors: 0, toGuest: 0, passed: 0, unknownPort: 0 };
  readonly guestPort: number;
  readonly hostPort: number;

  /** The program frames run through; null: every frame passes (--p4 alone, before a guest P4_LOAD). */
  engine: P4Engine | null;

  constructor(
    engine: P4Engine | null,
    private readonly opts: P4SegmentOptions,
  ) {
    this.engine = engine;
    this.guestPort = opts.guestPort ?? 1;
    this.hostPort = opts.hostPort ?? 2;
  }

  claimTx(frame: Buffer): boolean {
    if (!this.engine) return false;
    this.stats.fromGuest++;
    return this.#route(frame, this.guestPort, this.hostPort);
  }

  claimRx(frame: Buffer): boolean {
    if (!this.engine) return false;
    this.stats.fromHost++;
    return this.#route(frame, this.hostPort, this.guestPort);
  }

  /** Runs the program; returns true when the frame was handled here (claimed). */
  #route(frame: Buffer, inPort: number, naturalPort: number): boolean {
    const r = this.engine!.process(frame, inPort);
    if (r.digests.length > 0) this.opts.onDigest?.(r.digests);
    if (r.dropped || !r.frame) {
      this.stats.dropped++;
      return true;
    }
    const out = r.frame;
    let ports: number[];
    if (r.multicastGroup !== 0) ports = [this.guestPort, this.hostPort].filter((p) => p !== inPort);
    else ports = [r.egressPort];
    if (ports.length === 1 && ports[0] === naturalPort && out.equals(frame)) {
      this.stats.passed++;
      return false;
    }
    for (const p of ports) {
      if (p === this.hostPort) {
        if (this.opts.toHost(out)) this.stats.toHost++;
        else this.stats.toHostErrors++;
      } else if (p === this.guestPort) {
        this.opts.toGuest(out);
        this.stats.toGuest++;
      } else {
        this.stats.unknownPort++;
      }
    }
    return true;
  }
}
