// Building page tables from the (map_count, dma_addr, page_size_log2) triple
// of a command (ionic RDMA R3.1), with the geometry checks of the trust
// boundary: a table has exactly the entries its region needs, pages are
// aligned, nothing wraps or passes 2^53, and a ring's pages are guest memory
// the device can reach. Failures are an AdminStatus, never a throw.

import { RDMA_MAX_DEPTH_LOG2, RDMA_MAX_MR_PAGES, RDMA_MIN_DEPTH_LOG2, RDMA_MR_PAGE_SHIFTS } from '../../rdma/limits';
import {
  isAddrRange,
  loadPageList,
  PageListSource,
  PageTable,
  PageTableBuilder,
  RunBudget,
} from '../../rdma/page-table';
import type { GuestMemory } from '../../vfio-user/guest-memory';
import { MemStatus } from '../../vfio-user/guest-memory';
import { AdminStatus } from './constants';
import { U64_UNSAFE } from '../../../protocol/field';

/** Page sizes a ring's table may use: 4 KiB (what both host stacks use) up to 1 GiB. */
const RING_PAGE_SHIFT_MIN = 12;
const RING_PAGE_SHIFT_MAX = 30;

interface RingDesc {
  readonly depthLog2: number;
  readonly strideLog2: number;
  /** 0 with map_count 1 = one physically contiguous block (kernel rings). */
  readonly pageSizeLog2: number;
  readonly mapCount: number;
  readonly dmaAddr: number;
}

const scratch: Buffer[] = [];

/** Is every byte of every run reachable guest memory (writable when `write`)? */
function tableReachable(mem: GuestMemory, t: PageTable, write: boolean): boolean {
  for (let i = 0; i < t.runs; i++) {
    const r = t.run(i);
    scratch.length = 0;
    const st = mem.slices(r.addr, r.len, write, scratch);
    scratch.length = 0;
    if (st !== MemStatus.OK) return false;
  }
  return true;
}

/**
 * The table of a ring of 2^depth slots of 2^stride bytes. `strides` bounds
 * the stride (exact for CQ/EQ/AQ, a range for SQ/RQ). The runs are charged to
 * `budget`; the caller owns the table (and gives the runs back if it drops it).
 */
export function loadRing(
  mem: GuestMemory,
  d: RingDesc,
  strides: readonly [number, number],
  write: boolean,
  budget: RunBudget,
): PageTable | AdminStatus {
  if (d.depthLog2 < RDMA_MIN_DEPTH_LOG2 || d.depthLog2 > RDMA_MAX_DEPTH_LOG2) return AdminStatus.BAD_ATTR;
  if (d.strideLog2 < strides[0] || d.strideLog2 > strides[1]) return AdminStatus.BAD_ATTR;
  if (d.mapCount < 1 || d.dmaAddr === U64_UNSAFE || d.dmaAddr <= 0) return AdminStatus.BAD_ATTR;
  const size = 2 ** (d.depthLog2 + d.strideLog2);
  let t: PageTable | null;
  if (d.mapCount === 1) {
    if (d.pageSizeLog2 !== 0) {
      // One page of a user ring: the ring must fit in it, and start it.
      if (d.pageSizeLog2 < RING_PAGE_SHIFT_MIN || d.pageSizeLog2 > RING_PAGE_SHIFT_MAX) return AdminStatus.BAD_ATTR;
      if (size > 2 ** d.pageSizeLog2 || d.dmaAddr % 2 ** d.pageSizeLog2 !== 0) return AdminStatus.BAD_ATTR;
    }
    t = PageTable.contiguous(d.dmaAddr, size);
    if (!t) return AdminStatus.BAD_ATTR;
    if (!budget.take(1)) return AdminStatus.BAD_ATTR;
  } else {
    if (d.pageSizeLog2 < RING_PAGE_SHIFT_MIN || d.pageSizeLog2 > RING_PAGE_SHIFT_MAX) return AdminStatus.BAD_ATTR;
    if (d.mapCount !== PageTableBuilder.pagesNeeded(size, d.pageSizeLog2, 0)) return AdminStatus.BAD_ATTR;
    const r = loadPageList(
      mem,
      { listAddr: d.dmaAddr, count: d.mapCount, pageShift: d.pageSizeLog2, firstOffset: 0, length: size },
      budget,
    );
    if (typeof r === 'string') return AdminStatus.BAD_ATTR;
    t = r;
  }
  if (!tableReachable(mem, t, write)) {
    budget.give(t.runs);
    return AdminStatus.BAD_ATTR;
  }
  return t;
}

interface MrDesc {
  readonly iova: number;
  readonly length: number;
  readonly pageSizeLog2: number;
  readonly mapCount: number;
  readonly dmaAddr: number;
}

/**
 * The table of a user MR (ionic RDMA R3.1): map_count 1 = dma_addr already
 * points at the first byte (page + in-page offset of iova); map_count > 1 =
 * dma_addr is the page list, the first page starting before iova by
 * iova & (page - 1). The page size is one of 4 KiB, 2 MiB, 1 GiB, and the
 * list holds exactly the pages [iova, iova + length) touches. Pages are not
 * checked against guest memory here (an MR may name memory the device only
 * reaches later, or never); each access is.
 *
 * Returns the table itself when it is one block (its run charged), the page
 * list to read (through PageListLoader, over several turns when long), or the
 * refusal.
 */
export function mrTableSource(d: MrDesc, budget: RunBudget): PageTable | PageListSource | AdminStatus {
  if (!RDMA_MR_PAGE_SHIFTS.includes(d.pageSizeLog2)) return AdminStatus.BAD_ATTR;
  if (d.length < 1 || !isAddrRange(d.iova, d.length)) return AdminStatus.BAD_ATTR;
  if (d.dmaAddr === U64_UNSAFE || d.dmaAddr <= 0) return AdminStatus.BAD_ATTR;
  const pageSize = 2 ** d.pageSizeLog2;
  const firstOffset = d.iova % pageSize;
  const needed = PageTableBuilder.pagesNeeded(d.length, d.pageSizeLog2, firstOffset);
  if (d.mapCount !== needed || d.mapCount > RDMA_MAX_MR_PAGES) return AdminStatus.BAD_ATTR;
  if (d.mapCount === 1) {
    if (d.dmaAddr % pageSize !== firstOffset) return AdminStatus.BAD_ATTR;
    const t = PageTable.contiguous(d.dmaAddr, d.length);
    if (!t || !budget.take(1)) return AdminStatus.BAD_ATTR;
    return t;
  }
  return { listAddr: d.dmaAddr, count: d.mapCount, pageShift: d.pageSizeLog2, firstOffset, length: d.length };
}
