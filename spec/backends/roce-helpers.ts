// Test helpers for `--backend roce`: two devices whose Ethernet ports are
// joined by an in-process wire (each frame copied and delivered on a later
// turn, as a TAP would), with hooks to lose, change or inject frames; and two
// guest models booted on them.

import type { HostLink } from '../../lib/net/frame-endpoint';
import { ipv4Gid } from '../../lib/rdma/address';
import { RoceBackend } from '../../lib/backends/roce';
import { isRoceV2 } from '../../lib/roce/frame';
import { v4, VerbsGuest } from '../support/ionic/rdma-verbs';

/** What the wire does to a frame on its way: deliver it (possibly changed), or drop it (null). */
type WireTap = (frame: Buffer, from: 'a' | 'b') => Buffer | null;

/** One end of the wire, as the device sees its host link. */
class PipeEnd implements HostLink {
  readonly offloads = false;
  onFrame: ((frame: Buffer) => void) | null = null;
  peer: PipeEnd | null = null;
  /** Frames sent, and those of them that were RoCEv2. */
  sent = 0;
  roceSent = 0;

  constructor(
    readonly name: string,
    private readonly wire: FramePipe,
  ) {}

  send(frame: Buffer): boolean {
    this.sent++;
    if (isRoceV2(frame, frame.length)) this.roceSent++;
    const copy = Buffer.from(frame);
    const out = this.wire.tap ? this.wire.tap(copy, this.name === 'a' ? 'a' : 'b') : copy;
    if (!out) return true;
    setImmediate(() => this.peer?.onFrame?.(out));
    return true;
  }

  start(onFrame: (frame: Buffer) => void): void {
    this.onFrame = onFrame;
  }

  /** A frame arriving from the wire, as if the peer had sent it. */
  inject(frame: Buffer): void {
    this.onFrame?.(frame);
  }

  close(): void {
    this.onFrame = null;
  }
}

/** Two host links joined back to back. */
class FramePipe {
  readonly a = new PipeEnd('a', this);
  readonly b = new PipeEnd('b', this);
  tap: WireTap | null = null;

  constructor() {
    this.a.peer = this.b;
    this.b.peer = this.a;
  }
}

export interface RoceGuests {
  readonly pipe: FramePipe;
  readonly a: VerbsGuest;
  readonly b: VerbsGuest;
  readonly backendA: RoceBackend;
  readonly backendB: RoceBackend;
  close(): Promise<void>;
}

/**
 * Two servers with `--backend roce`, each with its guest model, their ports
 * joined by a FramePipe. Each side is told its guest's GID, as the guest's
 * netdev traffic would tell it.
 */
export async function roceGuests(ipA: string, ipB: string, arenaPages?: number): Promise<RoceGuests> {
  const pipe = new FramePipe();
  const backendA = new RoceBackend();
  const backendB = new RoceBackend();
  const a = await VerbsGuest.boot({ rdmaBackend: backendA, link: pipe.a, ...(arenaPages ? { arenaPages } : {}) });
  let b: VerbsGuest | undefined;
  try {
    b = await VerbsGuest.boot({ rdmaBackend: backendB, link: pipe.b, ...(arenaPages ? { arenaPages } : {}) });
  } catch (e) {
    await a.close();
    throw e;
  }
  backendA.dataPath!.addLocalGid(ipv4Gid(v4(ipA)));
  backendB.dataPath!.addLocalGid(ipv4Gid(v4(ipB)));
  const bb = b;
  return {
    pipe,
    a,
    b: bb,
    backendA,
    backendB,
    close: async () => {
      await a.close();
      await bb.close();
    },
  };
}

/** A byte pattern. */
export function pattern(n: number, seed: number): Buffer {
  const b = Buffer.alloc(n);
  for (let i = 0; i < n; i++) b[i] = (i * 31 + seed) & 0xff;
  return b;
}
