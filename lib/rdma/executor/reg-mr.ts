// REG_MR WQEs (kernel fast registration, ionic RDMA R4.2): re-key the FRMR whose
// index imm_data_key names to num_sge_key's tag over the pages the WQE gives,
// read now (the host may rewrite its page list for the next registration).
// One page: dma_addr is that page plus the offset; more: dma_addr is an LE64
// page-address list and `offset` the in-page offset of va. A list longer than
// one turn's share (RDMA_PT_ENTRIES_PER_TURN) is read over several turns by a
// PageListLoader, kept on the QP while its WQE is at the head. Any refusal
// changes nothing and completes with MEM_MGMT_OPER.

import { DeviceCounter } from '../counters';
import type { DataPathDevice } from '../hooks';
import { RDMA_MAX_MR_PAGES, RDMA_PT_ENTRIES_PER_TURN } from '../limits';
import { retagKey } from '../memory-keys';
import { PageListLoader, PageTable, PageTableBuilder } from '../page-table';
import { KeyStatus } from '../resources';
import type { QpRecord } from '../resources';
import { MrFlag } from '../types';
import type { GuestMemory } from '../../vfio-user/guest-memory';
import { IonicStatus } from '../datapath/cqe';
import type { SendWqe } from '../datapath/wqe-decode';
import type { PendingRegMr, QpDp } from './qp-state';
import type { Scheduler } from './scheduler';
import { cqRoom } from '../datapath/cq-ring';

/** Page sizes a REG_MR may name (4 KiB to 1 GiB; ib_map_mr_sg picks any power of two). */
const REG_MR_MIN_PAGE_SHIFT = 12;
const REG_MR_MAX_PAGE_SHIFT = 30;

export class FastRegistration {
  readonly #dev: DataPathDevice;
  readonly #sched: Scheduler;

  constructor(dev: DataPathDevice, sched: Scheduler) {
    this.#dev = dev;
    this.#sched = sched;
  }

  /** Start a REG_MR: its status, or 'yield' when its page list is read over later turns (s.regMr). */
  start(mem: GuestMemory, w: SendWqe, s: QpDp): number | 'yield' {
    const rm = this.#dev.rm;
    const r = w.regMr;
    const newKey = retagKey(w.immDataKey, w.numSgeKey);
    const shift = r.pageSizeLog2;
    if (shift < REG_MR_MIN_PAGE_SHIFT || shift > REG_MR_MAX_PAGE_SHIFT || r.dirSizeLog2 !== 0)
      return IonicStatus.MEM_MGMT_OPER;
    if (r.length < 1 || !Number.isSafeInteger(r.va) || r.va < 0 || !Number.isSafeInteger(r.dmaAddr) || r.dmaAddr <= 0)
      return IonicStatus.MEM_MGMT_OPER;
    if (r.mapCount < 1 || r.mapCount > RDMA_MAX_MR_PAGES) return IonicStatus.MEM_MGMT_OPER;
    const pageSize = 2 ** shift;
    if (r.mapCount === 1) {
      const firstOffset = r.dmaAddr % pageSize;
      if (PageTableBuilder.pagesNeeded(r.length, shift, firstOffset) !== 1) return IonicStatus.MEM_MGMT_OPER;
      const t = PageTable.contiguous(r.dmaAddr, r.length);
      if (!t || !rm.budget.take(1)) return IonicStatus.MEM_MGMT_OPER;
      return this.#register(w.immDataKey, newKey, r.va, r.length, r.flags, t);
    }
    if (!Number.isSafeInteger(r.offset) || r.offset < 0 || r.offset >= pageSize) return IonicStatus.MEM_MGMT_OPER;
    if (PageTableBuilder.pagesNeeded(r.length, shift, r.offset) !== r.mapCount) return IonicStatus.MEM_MGMT_OPER;
    const loader = new PageListLoader(
      { listAddr: r.dmaAddr, count: r.mapCount, pageShift: shift, firstOffset: r.offset, length: r.length },
      rm.budget,
    );
    const t = loader.step(mem, RDMA_PT_ENTRIES_PER_TURN);
    if (t === null) {
      s.regMr = {
        generation: this.#sched.generation,
        loader,
        key: w.immDataKey,
        newKey,
        va: r.va,
        length: r.length,
        flags: r.flags,
        wqeIdLo: w.wqeIdLo,
        wqeIdHi: w.wqeIdHi,
        table: null,
      };
      return 'yield';
    }
    if (typeof t === 'string') return IonicStatus.MEM_MGMT_OPER;
    return this.#register(w.immDataKey, newKey, r.va, r.length, r.flags, t);
  }

  /**
   * The next share of a long page list; at the end, the registration: its
   * status ('yield' while the list is being read; 'wait' while the CQ has no
   * room for its completion, keeping the table). Clears s.regMr when done.
   */
  resume(mem: GuestMemory, qp: QpRecord, s: QpDp, p: PendingRegMr): number | 'yield' | 'wait' {
    if (!p.table) {
      const t = p.loader.step(mem, RDMA_PT_ENTRIES_PER_TURN);
      if (t === null) return 'yield';
      if (typeof t !== 'string') p.table = t;
    }
    // The CQ may have filled while the list was read: keep the table and wait for room.
    if (cqRoom(this.#dev.rm, qp.sqCqId) === 0) {
      this.#dev.counters.inc(DeviceCounter.cq_full_waits);
      return 'wait';
    }
    s.regMr = null;
    return p.table ? this.#register(p.key, p.newKey, p.va, p.length, p.flags, p.table) : IonicStatus.MEM_MGMT_OPER;
  }

  /** Give back a REG_MR in progress (its QP left RTS, was destroyed, or the device reset). */
  drop(s: QpDp): void {
    const p = s.regMr;
    if (!p) return;
    s.regMr = null;
    // After a device reset the budget was zeroed with everything else: nothing to give back.
    if (p.generation !== this.#sched.generation) return;
    p.loader.abort();
    if (p.table) this.#dev.rm.releaseTable(p.table);
  }

  #register(key: number, newKey: number, va: number, length: number, flags: number, table: PageTable): number {
    const zeroBased = (flags & MrFlag.ZERO_BASED) !== 0;
    // fastRegister finds the FRMR by index and gives the table back itself when it refuses.
    return this.#dev.rm.fastRegister(key, newKey, va, length, flags, zeroBased, table) === KeyStatus.OK
      ? IonicStatus.OK
      : IonicStatus.MEM_MGMT_OPER;
  }
}
