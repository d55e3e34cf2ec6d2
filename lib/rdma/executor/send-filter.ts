// The loopback data path's side of the send filter (hooks.sendFilter, the
// P4 engine on RDMA send WQEs): the WQE's own memory is checked the way its
// verb will use it (lkeys of the SGL, the 8-byte result buffer of an atomic;
// inline bytes need none); a WQE that fails its checks is not shown to the
// filter and fails in its own path as before. Otherwise the filter sees the
// WQE with its local bytes as views and may ask for the destination's range
// by the WQE's rkey, resolved on this device with the responder's checks.
// One input object, refilled per WQE: nothing is allocated per WQE here.

import { MrFlag, QpFlag, QpState } from '../types';
import { KeyStatus } from '../resources';
import type { QpRecord } from '../resources';
import type { SendFilter, SendFilterInput } from '../hooks';
import type { GuestMemory } from '../../vfio-user/guest-memory';
import { IonicStatus } from '../datapath/cqe';
import type { SendWqe } from '../datapath/wqe-decode';
import { ATOMIC_SIZE, SendVerb } from '../datapath/wqe-layout';
import type { GuestViews } from './guest-views';
import type { Verbs } from './verbs';

class Input implements SendFilterInput {
  qp!: QpRecord;
  wqe!: SendWqe;
  datagram = false;
  dest: QpRecord | undefined = undefined;
  remoteNode = false;
  readonly src: Buffer[] = [];
  readonly dst: Buffer[] = [];
  mem: GuestMemory | undefined = undefined;
  constructor(private readonly verbs: Verbs) {}

  resolveRemoteWrite(len: number): number {
    this.dst.length = 0;
    const w = this.wqe;
    if (this.remoteNode || w.rdma.rkey >>> 0 === 0 || !this.mem) return IonicStatus.REMOTE_ACC;
    const dest = this.dest;
    // As rcOp: a missing or unready responder never answers.
    if (
      !dest ||
      dest.type !== this.qp.type ||
      (dest.state !== QpState.RTR && dest.state !== QpState.RTS && dest.state !== QpState.SQD)
    ) {
      return IonicStatus.RETRY_EXCEEDED;
    }
    const v = this.verbs;
    v.clear();
    const st = v.remote(
      this.mem,
      dest,
      w.rdma.rkey,
      w.rdma.remoteVa,
      len,
      MrFlag.REMOTE_WRITE,
      QpFlag.REMOTE_WRITE,
      true,
    );
    if (st === IonicStatus.OK) for (const b of v.dst) this.dst.push(b);
    v.clear();
    return st;
  }

  written(len: number): void {
    this.verbs.written(this.qp, len);
  }

  release(): void {
    this.src.length = 0;
    this.dst.length = 0;
    this.mem = undefined;
    this.dest = undefined;
  }
}

export class SendFiltering {
  readonly #views: GuestViews;
  readonly #input: Input;
  /** Views of buffers checked but not shown (a READ's destination, an atomic's result word). */
  readonly #scratch: Buffer[] = [];

  constructor(views: GuestViews, verbs: Verbs) {
    this.#views = views;
    this.#input = new Input(verbs);
  }

  /**
   * Checks the WQE's own memory, then runs the filter: SEND_FILTER_PASS when
   * the checks fail (the WQE fails in its own path) or the filter passes it,
   * else what the filter answered.
   */
  run(
    filter: SendFilter,
    mem: GuestMemory,
    qp: QpRecord,
    w: SendWqe,
    buf: Buffer,
    datagram: boolean,
    dest: QpRecord | undefined,
    remoteNode: boolean,
  ): number {
    const x = this.#input;
    x.release();
    if (!this.#ownMemory(mem, qp, w, buf, x.src)) {
      x.release();
      return -1;
    }
    x.qp = qp;
    x.wqe = w;
    x.datagram = datagram;
    x.dest = dest;
    x.remoteNode = remoteNode;
    x.mem = mem;
    try {
      return filter.filter(x);
    } finally {
      x.release();
    }
  }

  /** The local buffers of `w` checked as its verb uses them; a SEND's or WRITE's source views go to `src`. */
  #ownMemory(mem: GuestMemory, qp: QpRecord, w: SendWqe, buf: Buffer, src: Buffer[]): boolean {
    const scratch = this.#scratch;
    scratch.length = 0;
    let st: number;
    switch (w.verb) {
      case SendVerb.RDMA_READ:
        st = this.#views.sgl(mem, qp, w.sges, w.sgeCount, w.sgeTotal, true, scratch);
        break;
      case SendVerb.ATOMIC_CS:
      case SendVerb.ATOMIC_FA: {
        const a = w.atomic;
        st =
          a.localLen !== ATOMIC_SIZE
            ? KeyStatus.BOUNDS
            : this.#views.views(
                mem,
                a.localLkey,
                a.localVa,
                ATOMIC_SIZE,
                MrFlag.LOCAL_WRITE,
                qp.privileged,
                qp.pdId,
                true,
                scratch,
              );
        break;
      }
      default:
        if (w.inline) {
          if (w.inlineLength > 0) src.push(buf.subarray(w.inlineOffset, w.inlineOffset + w.inlineLength));
          st = KeyStatus.OK;
        } else st = this.#views.sgl(mem, qp, w.sges, w.sgeCount, w.sgeTotal, false, src);
    }
    scratch.length = 0;
    return st === KeyStatus.OK;
  }
}

/**
 * A 32-bit signature (FNV-1a over 32-bit words) of a WQE slot's bytes: a WQE
 * that passed the filter and waits is filtered again if the guest rewrote its
 * slot before it ran (else a slot rewritten after the check would run
 * unchecked).
 */
export function slotSignature(buf: Buffer): number {
  let h = 0x811c9dc5;
  const n = buf.length & ~3;
  for (let i = 0; i < n; i += 4) h = Math.imul(h ^ buf.readUInt32LE(i), 0x01000193);
  return h >>> 0;
}
