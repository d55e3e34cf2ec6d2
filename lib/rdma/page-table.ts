// A buffer the driver described with a page table (an MR, or a CQ/SQ/RQ
// ring), kept as runs of contiguous guest (bus) addresses.
//
// The driver gives either one address (map_count 1: a contiguous block, or a
// single page already offset to the first byte) or the guest address of an
// array of map_count LE64 page addresses (ionic RDMA R3.1). That array is freed
// by the host as soon as the command completes, so it is read once, at
// registration, and physically adjacent pages are merged into one run: a
// large transfer through a table is then split only where the guest's pages
// really are discontiguous.
//
// A table covers the logical bytes [0, length): logical offset 0 is the first
// byte of the buffer (for an MR, its iova; the first page may start before it).
// `translate` turns a logical range into guest address segments; it never
// throws. Run storage is charged against a RunBudget, so no guest can make
// the server keep more than RDMA_MAX_PT_RUNS runs in all.

import type { GuestMemory } from '../vfio-user/guest-memory';
import { MemStatus } from '../vfio-user/guest-memory';
import { getField, le, U64_UNSAFE } from '../../protocol/field';
import { RDMA_PT_READ_CHUNK } from './limits';

/** One entry of a page list in guest memory (CREATE_MR, REG_MR): a page's bus address, LE64. */
const page_list_entry = { addr: le(0, 8), SIZE: 8 } as const;

/** Result of a translation. */
export const enum PtStatus {
  OK = 0,
  /** The range is not inside [0, length). */
  BOUNDS = 1,
  /** The range's length is negative, not an integer, or it wraps. */
  BAD_RANGE = 2,
}

/** Why a table could not be built. */
type PageTableError =
  /** The page-address array is not readable guest memory. */
  | 'unreadable'
  /** A page address is not aligned to the page size, or is past 2^53. */
  | 'misaligned'
  /** Keeping the runs would pass the run budget. */
  | 'too-many-runs'
  /** Addresses or lengths that wrap or pass 2^53. */
  | 'bad-range';

/** Runs charged against one limit (all MRs and rings of a device share one). */
export class RunBudget {
  used = 0;
  constructor(readonly limit: number) {}

  take(n: number): boolean {
    if (this.used + n > this.limit) return false;
    this.used += n;
    return true;
  }

  give(n: number): void {
    this.used = Math.max(0, this.used - n);
  }
}

export class PageTable {
  /** Logical bytes covered. */
  readonly length: number;
  /** Page-table entries it was built from (the command's map_count). */
  readonly entries: number;
  /** Logical start offset of each run, ascending, the first 0. */
  readonly #off: Float64Array;
  /** Guest address of each run's first byte. */
  readonly #addr: Float64Array;

  private constructor(length: number, entries: number, off: Float64Array, addr: Float64Array) {
    this.length = length;
    this.entries = entries;
    this.#off = off;
    this.#addr = addr;
  }

  /** One contiguous block of guest memory at `addr`. Null if it wraps or passes 2^53. */
  static contiguous(addr: number, length: number, entries = 1): PageTable | null {
    if (!isAddrRange(addr, length)) return null;
    return new PageTable(length, entries, Float64Array.of(0), Float64Array.of(addr));
  }

  /** Runs (merged pages) in the table. */
  get runs(): number {
    return this.#off.length;
  }

  /** Guest address and length of run `i` (for logs and tests). */
  run(i: number): { addr: number; len: number } {
    const end = i + 1 < this.#off.length ? this.#off[i + 1]! : this.length;
    return { addr: this.#addr[i]!, len: end - this.#off[i]! };
  }

  /**
   * Append the guest segments of logical [offset, offset + len) to `out` as
   * flat pairs: out.push(addr0, len0, addr1, len1, ...). Nothing is appended on
   * error. A zero-length range inside the table succeeds with no segments.
   */
  translate(offset: number, len: number, out: number[]): PtStatus {
    if (!Number.isSafeInteger(offset) || !Number.isSafeInteger(len) || offset < 0 || len < 0) return PtStatus.BAD_RANGE;
    if (offset > this.length || len > this.length - offset) return PtStatus.BOUNDS;
    if (len === 0) return PtStatus.OK;
    const off = this.#off;
    // The last run starting at or before `offset`.
    let lo = 0;
    let hi = off.length - 1;
    while (lo < hi) {
      const mid = (lo + hi + 1) >>> 1;
      if (off[mid]! <= offset) lo = mid;
      else hi = mid - 1;
    }
    let at = offset;
    let left = len;
    for (let i = lo; left > 0; i++) {
      const runEnd = i + 1 < off.length ? off[i + 1]! : this.length;
      const n = Math.min(left, runEnd - at);
      out.push(this.#addr[i]! + (at - off[i]!), n);
      at += n;
      left -= n;
    }
    return PtStatus.OK;
  }

  /** The single guest address of logical [offset, offset + len) if it lies in one run, else -1. */
  addressOf(offset: number, len: number): number {
    const seg: number[] = [];
    if (len === 0 || this.translate(offset, len, seg) !== PtStatus.OK || seg.length !== 2) return -1;
    return seg[0]!;
  }

  /** @internal used by PageTableBuilder. */
  static fromRuns(length: number, entries: number, off: number[], addr: number[]): PageTable {
    return new PageTable(length, entries, Float64Array.from(off), Float64Array.from(addr));
  }
}

/** A guest address range [addr, addr + len) that neither wraps nor passes 2^53. */
export function isAddrRange(addr: number, len: number): boolean {
  return (
    Number.isSafeInteger(addr) &&
    Number.isSafeInteger(len) &&
    addr >= 0 &&
    len >= 0 &&
    addr <= Number.MAX_SAFE_INTEGER - len
  );
}

/** Builds a PageTable from page addresses, merging adjacent pages as they come. */
export class PageTableBuilder {
  readonly #off: number[] = [];
  readonly #addr: number[] = [];
  readonly #pageSize: number;
  #pages = 0;
  /** Logical offset where the next page's bytes start. */
  #next = 0;
  /** End address of the last run, for merging. */
  #runEnd = -1;

  /**
   * @param length     logical bytes the table covers
   * @param pageShift  log2 of the page size
   * @param firstOffset byte offset of logical 0 within the first page
   */
  constructor(
    readonly length: number,
    readonly pageShift: number,
    readonly firstOffset: number,
  ) {
    this.#pageSize = 2 ** pageShift;
  }

  /** Pages needed: ceil((firstOffset + length) / pageSize). */
  static pagesNeeded(length: number, pageShift: number, firstOffset: number): number {
    return Math.ceil((firstOffset + length) / 2 ** pageShift);
  }

  get runs(): number {
    return this.#off.length;
  }

  /** Add the next page. False if it is misaligned or past 2^53 (the table is then unusable). */
  addPage(page: number): boolean {
    if (
      !Number.isSafeInteger(page) ||
      page < 0 ||
      page % this.#pageSize !== 0 ||
      page > Number.MAX_SAFE_INTEGER - this.#pageSize
    )
      return false;
    const skip = this.#pages === 0 ? this.firstOffset : 0;
    this.#pages++;
    const start = this.#next;
    if (start >= this.length) return true; // a page past the end contributes nothing
    const addr = page + skip;
    const bytes = Math.min(this.#pageSize - skip, this.length - start);
    this.#next = start + bytes;
    if (addr === this.#runEnd) {
      this.#runEnd += bytes;
      return true;
    }
    this.#off.push(start);
    this.#addr.push(addr);
    this.#runEnd = addr + bytes;
    return true;
  }

  finish(): PageTable {
    return PageTable.fromRuns(this.length, this.#pages, this.#off, this.#addr);
  }
}

export interface PageListSource {
  /** Guest address of the LE64 page-address array. */
  readonly listAddr: number;
  /** Entries in the array (> 1). */
  readonly count: number;
  readonly pageShift: number;
  /** Offset of logical byte 0 within the first page. */
  readonly firstOffset: number;
  /** Logical bytes the table covers. */
  readonly length: number;
}

/**
 * A page-address array read a bounded number of entries at a time, so that
 * a list of up to 2^30 entries (a 4 TiB MR of 4 KiB pages, which the device
 * allows) never holds the event loop for more than one chunk: the caller
 * runs `step` once per turn and yields in between. The runs are charged to
 * `budget` as they appear (a hostile list is refused before it has cost much
 * memory) and given back on failure or `abort`; the finished table's runs are
 * the caller's to give back when it drops the table.
 */
export class PageListLoader {
  readonly #src: PageListSource;
  readonly #budget: RunBudget;
  readonly #builder: PageTableBuilder;
  readonly #chunk: Buffer;
  #done = 0;
  #charged = 0;
  #over = false;

  constructor(src: PageListSource, budget: RunBudget) {
    this.#src = src;
    this.#budget = budget;
    this.#builder = new PageTableBuilder(src.length, src.pageShift, src.firstOffset);
    this.#chunk = Buffer.alloc(Math.min(src.count, RDMA_PT_READ_CHUNK) * page_list_entry.SIZE);
  }

  /** Entries read so far. */
  get entriesRead(): number {
    return this.#done;
  }

  /**
   * Read up to `maxEntries` more entries (at least one chunk's worth is never
   * split): the table when the list is complete, an error (runs given back),
   * or null when more remains.
   */
  step(mem: GuestMemory, maxEntries: number): PageTable | PageTableError | null {
    const src = this.#src;
    if (this.#over) return 'bad-range';
    if (this.#done === 0 && !isAddrRange(src.listAddr, src.count * page_list_entry.SIZE))
      return this.#fail('bad-range');
    const stop = Math.min(src.count, this.#done + Math.max(1, maxEntries));
    const b = this.#builder;
    while (this.#done < stop) {
      const n = Math.min(stop - this.#done, RDMA_PT_READ_CHUNK);
      const view = this.#chunk.subarray(0, n * page_list_entry.SIZE);
      if (mem.read(src.listAddr + this.#done * page_list_entry.SIZE, view) !== MemStatus.OK)
        return this.#fail('unreadable');
      for (let i = 0; i < n; i++) {
        const addr = getField(view, i * page_list_entry.SIZE, page_list_entry.addr);
        if (addr === U64_UNSAFE || !b.addPage(addr)) return this.#fail('misaligned');
      }
      this.#done += n;
      if (b.runs > this.#charged) {
        if (!this.#budget.take(b.runs - this.#charged)) return this.#fail('too-many-runs');
        this.#charged = b.runs;
      }
    }
    if (this.#done < src.count) return null;
    this.#over = true;
    return b.finish();
  }

  /** Stop early and give back what was charged (the caller drops the loader). */
  abort(): void {
    if (this.#over) return;
    this.#fail('bad-range');
  }

  #fail(e: PageTableError): PageTableError {
    this.#budget.give(this.#charged);
    this.#charged = 0;
    this.#over = true;
    return e;
  }
}

/**
 * Read a whole guest page-address array and build its table in one call (for
 * lists short enough to read at once; long ones go through PageListLoader
 * step by step). The runs are charged to `budget` (and given back on
 * failure); the caller gives them back with `budget.give(table.runs)` when the
 * table is dropped.
 */
export function loadPageList(mem: GuestMemory, src: PageListSource, budget: RunBudget): PageTable | PageTableError {
  const r = new PageListLoader(src, budget).step(mem, src.count);
  return r ?? 'bad-range';
}
