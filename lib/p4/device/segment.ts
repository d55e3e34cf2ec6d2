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

import { FrameEndpoint } from '../../net/frame-endpoint';
import { OutputMode, P4Engine } from '../engine/engine';

/** No port to send to (a multicast frame when the guest and host ports are one). */
const NO_PORT = -1;

interface P4SegmentOptions {
  guestPort?: number;
  hostPort?: number;
  /** Sends a frame to the host link; false when it could not. `frame` is valid during the call only (the engine's buffer). */
  toHost(frame: Buffer): boolean;
  /** Queues a frame for the guest; `frame` is valid during the call only (copied by the callee if it keeps it). */
  toGuest(frame: Buffer): void;
  /** Digests (generate_digest) of each frame, for a control plane. */
  onDigest?(digests: { list: number; values: bigint[] }[]): void;
}

interface P4SegmentStats {
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
  readonly stats: P4SegmentStats = {
    fromGuest: 0,
    fromHost: 0,
    dropped: 0,
    toHost: 0,
    toHostErrors: 0,
    toGuest: 0,
    passed: 0,
    unknownPort: 0,
  };
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
    // processReused: the result and its frame are the engine's, rewritten by its next call, so
    // everything is read before anything is called out (a digest handler or a send could reach the
    // engine again). The input is never written (the caller may reuse it, and an unchanged frame
    // is left to the device). `out` is handed on only to toHost/toGuest, which use it during the
    // call (a TAP write, a copy queued for the guest).
    const r = this.engine!.processReused(frame, inPort, OutputMode.ENGINE_BUFFER);
    const digests = r.digests;
    const out = r.frame;
    const dropped = r.dropped || !out;
    // multicast: both sides but the one the frame came from (the other one; none if both are one port)
    const port =
      r.multicastGroup === 0
        ? r.egressPort
        : this.guestPort === this.hostPort
          ? NO_PORT
          : inPort === this.guestPort
            ? this.hostPort
            : this.guestPort;
    if (digests.length > 0) this.opts.onDigest?.(digests);
    if (dropped) {
      this.stats.dropped++;
      return true;
    }
    if (port === naturalPort && out.equals(frame)) {
      this.stats.passed++;
      return false;
    }
    if (port === this.hostPort) {
      if (this.opts.toHost(out)) this.stats.toHost++;
      else this.stats.toHostErrors++;
    } else if (port === this.guestPort) {
      this.opts.toGuest(out);
      this.stats.toGuest++;
    } else if (port !== NO_PORT) {
      this.stats.unknownPort++;
    }
    return true;
  }
}
