// Guest memory as the loopback data path sees it. One translation model:
// every key goes through the resource manager's `rm.translate` (flat
// (addr, len) pairs), turned here into views of guest memory; copySlices
// (../copy.ts) moves the bytes between views (no bounce buffer). Ring slots
// are copied out instead (the guest may rewrite its ring while we work).

import { RDMA_MAX_STRIDE_LOG2 } from '../limits';
import { KeyStatus } from '../resources';
import type { QpRecord, QueueRing, ResourceManager } from '../resources';
import { MrFlag } from '../types';
import { MemStatus } from '../../vfio-user/guest-memory';
import type { GuestMemory } from '../../vfio-user/guest-memory';
import type { Sge } from '../datapath/wqe-decode';

/** One scratch buffer per WQE stride (index strideLog2), views of a single allocation: no allocation per WQE. */
export function slotViews(): Buffer[] {
  const whole = Buffer.alloc(1 << RDMA_MAX_STRIDE_LOG2);
  const out: Buffer[] = [];
  for (let log2 = 0; log2 <= RDMA_MAX_STRIDE_LOG2; log2++) out.push(whole.subarray(0, 1 << log2));
  return out;
}

export class GuestViews {
  readonly #rm: ResourceManager;
  /** Translation output and options, reused: no allocation per access. */
  readonly #pairs: number[] = [];
  readonly #opts = { dmaKey: false, pdId: 0 };

  constructor(rm: ResourceManager) {
    this.#rm = rm;
  }

  /**
   * Ring slot `index` copied into `scratch` (slotViews), or null when it is
   * not guest memory. WQEs never cross a page.
   */
  slot(mem: GuestMemory, ring: QueueRing, index: number, scratch: readonly Buffer[]): Buffer | null {
    const out = scratch[ring.strideLog2];
    if (!out) return null;
    const size = out.length;
    const p = this.#pairs;
    p.length = 0;
    if (ring.table.translate(index << ring.strideLog2, size, p) !== 0 || p.length !== 2) return null;
    return mem.read(p[0]!, out) === MemStatus.OK ? out : null;
  }

  /** Views of (key, va, len) with `need` under the QP's PD, appended to `out`; KeyStatus, or -1 for unusable guest memory. */
  views(
    mem: GuestMemory,
    key: number,
    va: number,
    len: number,
    need: number,
    dmaKey: boolean,
    pdId: number,
    write: boolean,
    out: Buffer[],
  ): number {
    if (len === 0) return KeyStatus.OK;
    const p = this.#pairs;
    p.length = 0;
    const opts = this.#opts;
    opts.dmaKey = dmaKey;
    opts.pdId = pdId;
    const st = this.#rm.translate(key, va, len, need, opts, p);
    if (st !== KeyStatus.OK) return st;
    for (let i = 0; i < p.length; i += 2) {
      if (mem.slices(p[i]!, p[i + 1]!, write, out) !== MemStatus.OK) return -1;
    }
    return KeyStatus.OK;
  }

  /** Views of the first `len` bytes of an SGL (a QP's own buffers: lkeys). */
  sgl(
    mem: GuestMemory,
    qp: QpRecord,
    sges: readonly Sge[],
    count: number,
    len: number,
    write: boolean,
    out: Buffer[],
  ): number {
    let left = len;
    for (let i = 0; i < count && left > 0; i++) {
      const sge = sges[i]!;
      const n = Math.min(sge.len, left);
      if (n === 0) continue;
      const st = this.views(
        mem,
        sge.lkey,
        sge.va,
        n,
        write ? MrFlag.LOCAL_WRITE : 0,
        qp.privileged,
        qp.pdId,
        write,
        out,
      );
      if (st !== KeyStatus.OK) return st;
      left -= n;
    }
    return left > 0 ? KeyStatus.BOUNDS : KeyStatus.OK;
  }
}
