// A RoCE port: the GIDs it answers to and the QPs behind it. Every frame from
// the wire comes in here: decoded once into a reused view, checked to be for
// one of our GIDs and an existing QP, handed to that QP, and counted (each
// drop by its reason). Nothing a peer sends makes this throw.

import { DROP_NONE, DROP_NOT_OUR_GID, DROP_UNKNOWN_QPN, RoceCounters } from '../counters';
import { decodeFrame, gidEquals, RoceFrame } from '../frame';
import { RoceQp } from './qp';
import type { RoceQpConfig, RoceQpDeps } from './types';

/** GIDs a port holds at most (the ionic GID table size). */
const MAX_GIDS = 256;

export class RocePort {
  readonly counters = new RoceCounters();
  readonly #qps = new Map<number, RoceQp>();
  readonly #gids: Buffer[] = [];
  readonly #frame = new RoceFrame();

  /** Answer to this GID (a copy is kept). */
  addGid(gid: Buffer): void {
    if (this.#gids.length >= MAX_GIDS || this.hasGid(gid)) return;
    this.#gids.push(Buffer.from(gid.subarray(0, 16)));
  }

  removeGid(gid: Buffer): void {
    const i = this.#gids.findIndex((g) => g.equals(gid));
    if (i >= 0) this.#gids.splice(i, 1);
  }

  hasGid(gid: Buffer): boolean {
    for (const g of this.#gids) if (gidEquals(g, gid)) return true;
    return false;
  }

  createQp(cfg: RoceQpConfig, deps: RoceQpDeps): RoceQp {
    if (this.#qps.has(cfg.qpn)) throw new Error(`QP ${cfg.qpn} exists`);
    const qp = new RoceQp(cfg, deps, this.counters);
    this.#qps.set(cfg.qpn, qp);
    return qp;
  }

  destroyQp(qpn: number): void {
    const qp = this.#qps.get(qpn);
    if (!qp) return;
    qp.destroy();
    this.#qps.delete(qpn);
  }

  /** The last frame received, as decoded (valid as far as decoding went; for logging a drop). */
  get lastFrame(): RoceFrame {
    return this.#frame;
  }

  qp(qpn: number): RoceQp | undefined {
    return this.#qps.get(qpn);
  }

  /** A frame from the wire (buf[0, len)); returns DROP_NONE or the reason it was dropped (also counted). */
  receive(buf: Buffer, len: number): number {
    const f = this.#frame;
    let reason = decodeFrame(buf, len, f);
    if (reason === DROP_NONE) {
      this.counters.rxPackets++;
      this.counters.rxBytes += len;
      if (!this.hasGid(f.dstGid)) reason = DROP_NOT_OUR_GID;
      else {
        const qp = this.#qps.get(f.headers.destQp);
        reason = qp ? qp.receive(buf, f) : DROP_UNKNOWN_QPN;
      }
    }
    if (reason !== DROP_NONE) this.counters.drop(reason);
    return reason;
  }
}
