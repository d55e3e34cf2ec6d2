// Memory regions as the data path sees them, and (key, va, len) -> guest
// memory translation. Independent of the resource manager: it hands us MRs
// through the small MrTable interface, we never reach into its bookkeeping.
//
// An MR is an address range in the consumer's space (iova .. iova+length, or
// 0 .. length for ZERO_BASED) backed by guest-physical runs: the page table the
// driver gave (reference/ionic-rdma-contract.md 3.1) with physically adjacent
// pages merged, so a large transfer is not split at every page. A translation
// checks access, range arithmetic and bounds first, then asks GuestMemory for
// views of each run piece; it never throws and allocates only the views.
//
// Key 0 is the driver's DMA key (contract 3.2): no MR lookup, the address is a
// guest bus address, the only limit is which guest RAM vfio-user shared. Who
// may use it is an explicit policy here (see resolveKey / dmaKeyAllowed).

import { GuestMemory, MemStatus } from '../../vfio-user/guest-memory';
import { MAX_MSG_BYTES, MrFlag, QpFlag, readU64LE } from './layouts';

// ---------------------------------------------------------------------------
// Model

/** A physically contiguous piece of an MR in guest memory. */
export interface PageRun {
  readonly guestAddr: number;
  readonly len: number;
}

/** A memory region (or memory window) as the data path needs it. */
export interface MemoryRegion {
  /** Full key: (index << 8) | tag. 0 only for DMA_MR. */
  readonly key: number;
  /** Protection domain; the QP using the key must be in the same PD. -1 matches any (DMA_MR). */
  readonly pd: number;
  /** First address of the region as the consumer names it (0 when ZERO_BASED). */
  readonly base: number;
  readonly length: number;
  /** MR flags (enum ionic_mr_flags); bits 0-11 are the access rights. */
  readonly flags: number;
  /** Guest runs in address order, their lengths adding up to `length`. */
  readonly runs: readonly PageRun[];
  /** runOffsets[i] = offset of runs[i] from `base` (prefix sums, for binary search). */
  readonly runOffsets: readonly number[];
  /** True only for the DMA key: addresses are guest bus addresses, no runs, no bounds. */
  readonly identity: boolean;
}

/** 2^64: one past the largest address. */
export const ADDRESS_SPACE_END = 2 ** 64;

/** The DMA key's region: identity mapping of guest bus addresses with every access right. */
export const DMA_MR: MemoryRegion = Object.freeze({
  key: 0,
  pd: -1,
  base: 0,
  length: ADDRESS_SPACE_END,
  flags: MrFlag.LOCAL_WRITE | MrFlag.REMOTE_WRITE | MrFlag.REMOTE_READ | MrFlag.REMOTE_ATOMIC,
  runs: Object.freeze([]) as readonly PageRun[],
  runOffsets: Object.freeze([]) as readonly number[],
  identity: true,
});

/**
 * The access a translation needs. The values are the MR flag bits that grant
 * them (LOCAL_READ needs none: IB always allows local reads).
 */
export const enum Access {
  LOCAL_READ = 0,
  /** MrFlag.LOCAL_WRITE */
  LOCAL_WRITE = 1 << 0,
  /** MrFlag.REMOTE_WRITE */
  REMOTE_WRITE = 1 << 1,
  /** MrFlag.REMOTE_READ */
  REMOTE_READ = 1 << 2,
  /** MrFlag.REMOTE_ATOMIC */
  REMOTE_ATOMIC = 1 << 3,
}

/** Whether an access writes guest memory. */
export function accessWrites(a: Access): boolean {
  return (a & (MrFlag.LOCAL_WRITE | MrFlag.REMOTE_WRITE | MrFlag.REMOTE_ATOMIC)) !== 0;
}

// ---------------------------------------------------------------------------
// Building MRs

/** Result of building an MR (0 is never returned: success answers the region). */
export const enum MrBuildError {
  /** length not a safe non-negative integer. */
  BAD_LENGTH = 1,
  /** base + length past 2^64 (or past what a JS number addresses exactly). */
  WRAP = 2,
  /** page_size_log2 outside MIN_PAGE_SHIFT..MAX_PAGE_SHIFT. */
  BAD_PAGE_SIZE = 3,
  /** First-page offset not below the page size. */
  BAD_OFFSET = 4,
  /** The page table has more or fewer entries than the region needs. */
  PAGE_COUNT = 5,
  /** A page address that is not page-aligned. */
  PAGE_MISALIGNED = 6,
  /** A page (or direct) address that is not a safe integer or whose page runs past 2^53. */
  BAD_ADDRESS = 7,
  /** The page-table array could not be read from guest memory. */
  TABLE_UNREADABLE = 8,
  /** More table entries than MAX_PAGE_TABLE_ENTRIES. */
  TABLE_TOO_BIG = 9,
}

const MR_BUILD_NAMES = ['', 'bad-length', 'wrap', 'bad-page-size', 'bad-offset', 'page-count', 'page-misaligned',
  'bad-address', 'table-unreadable', 'table-too-big'];

export function mrBuildErrorName(e: MrBuildError): string {
  return MR_BUILD_NAMES[e] ?? `mr-error-${e as number}`;
}

/** Smallest page a page table may describe (4 KiB). */
export const MIN_PAGE_SHIFT = 12;
/** Largest page a page table may describe (1 TiB; user MRs use up to 1 GiB). */
export const MAX_PAGE_SHIFT = 40;
/** Most page-table entries one region may have (1 TiB of 4 KiB pages); a geometry bound on the work of one registration. */
export const MAX_PAGE_TABLE_ENTRIES = 2 ** 28;
/** Page-table entries read from guest memory per step (one 4 KiB read). */
const TABLE_CHUNK_ENTRIES = 512;

/** What a region is, apart from where its pages are. */
export interface MrSpec {
  readonly key: number;
  readonly pd: number;
  /** The region's address (va / iova). Ignored (base 0) when flags has ZERO_BASED. */
  readonly iova: number;
  readonly length: number;
  readonly flags: number;
}

/** Page-table geometry for map_count > 1. */
export interface PageGeometry {
  readonly pageSizeLog2: number;
  /** In-page offset of the region's first byte in pages[0] (CREATE_MR: va mod page size; REG_MR: the WQE's offset). */
  readonly firstPageOffset: number;
}

/** va mod 2^shift, exact for any safe integer (no 32-bit masking). */
export function inPageOffset(va: number, shift: number): number {
  return va % 2 ** shift;
}

function isAddr(v: number): boolean {
  return Number.isSafeInteger(v) && v >= 0;
}

/** The region's base address, or a negated MrBuildError. */
function specBase(spec: MrSpec): number {
  if (!isAddr(spec.length)) return -MrBuildError.BAD_LENGTH;
  const base = (spec.flags & MrFlag.ZERO_BASED) !== 0 ? 0 : spec.iova;
  if (!isAddr(base) || base + spec.length > Number.MAX_SAFE_INTEGER) return -MrBuildError.WRAP;
  return base;
}

function region(spec: MrSpec, base: number, runs: PageRun[]): MemoryRegion {
  const runOffsets: number[] = [];
  let off = 0;
  for (const r of runs) { runOffsets.push(off); off += r.len; }
  return { key: spec.key >>> 0, pd: spec.pd, base, length: spec.length, flags: spec.flags, runs, runOffsets, identity: false };
}

/** A region with nothing mapped yet (map_count 0: FRMR or MW before registration/bind); its length reads 0. */
export function mrUnmapped(spec: MrSpec): MemoryRegion | MrBuildError {
  const empty = { ...spec, length: 0 };
  const base = specBase(empty);
  return base < 0 ? (-base as MrBuildError) : region(empty, base, []);
}

/** A physically contiguous region (map_count 1): `dmaAddr` is the bus address of the first byte. */
export function mrFromDirect(spec: MrSpec, dmaAddr: number): MemoryRegion | MrBuildError {
  const base = specBase(spec);
  if (base < 0) return -base as MrBuildError;
  if (!isAddr(dmaAddr) || dmaAddr + spec.length > Number.MAX_SAFE_INTEGER) return MrBuildError.BAD_ADDRESS;
  return region(spec, base, spec.length > 0 ? [{ guestAddr: dmaAddr, len: spec.length }] : []);
}

/** Entries a region of `length` bytes starting `firstPageOffset` into its first page needs. */
export function pagesNeeded(length: number, geom: PageGeometry): number {
  return Math.ceil((geom.firstPageOffset + length) / 2 ** geom.pageSizeLog2);
}

function checkGeometry(spec: MrSpec, geom: PageGeometry, count: number): MrBuildError | 0 {
  const shift = geom.pageSizeLog2;
  if (!Number.isInteger(shift) || shift < MIN_PAGE_SHIFT || shift > MAX_PAGE_SHIFT) return MrBuildError.BAD_PAGE_SIZE;
  const off = geom.firstPageOffset;
  if (!Number.isSafeInteger(off) || off < 0 || off >= 2 ** shift) return MrBuildError.BAD_OFFSET;
  if (!Number.isSafeInteger(count) || count < 0) return MrBuildError.PAGE_COUNT;
  if (count > MAX_PAGE_TABLE_ENTRIES) return MrBuildError.TABLE_TOO_BIG;
  if (spec.length > 0 && count !== pagesNeeded(spec.length, geom)) return MrBuildError.PAGE_COUNT;
  return 0;
}

/** Incremental run builder: feed page addresses in order, merging adjacent pages. */
class RunMerger {
  readonly runs: PageRun[] = [];
  #start = 0;
  #len = 0;
  #index = 0;
  readonly #pageSize: number;
  #left: number;
  readonly #firstOffset: number;

  constructor(pageSizeLog2: number, firstOffset: number, length: number) {
    this.#pageSize = 2 ** pageSizeLog2;
    this.#firstOffset = firstOffset;
    this.#left = length;
  }

  /** Add the next page; returns an error for a bad address. */
  add(page: number): MrBuildError | 0 {
    if (!isAddr(page) || page + this.#pageSize > Number.MAX_SAFE_INTEGER) return MrBuildError.BAD_ADDRESS;
    if (page % this.#pageSize !== 0) return MrBuildError.PAGE_MISALIGNED;
    const skip = this.#index++ === 0 ? this.#firstOffset : 0;
    const take = Math.min(this.#pageSize - skip, this.#left);
    if (take <= 0) return 0;
    const addr = page + skip;
    if (this.#len > 0 && this.#start + this.#len === addr) {
      this.#len += take;
    } else {
      this.#flush();
      this.#start = addr;
      this.#len = take;
    }
    this.#left -= take;
    return 0;
  }

  finish(): PageRun[] {
    this.#flush();
    return this.runs;
  }

  #flush(): void {
    if (this.#len > 0) this.runs.push({ guestAddr: this.#start, len: this.#len });
    this.#len = 0;
  }
}

/**
 * A region from a page list (map_count > 1): `pages` are the page bus
 * addresses in order, each 2^pageSizeLog2 bytes and page-aligned; the list must
 * have exactly the entries the region needs. Adjacent pages merge into runs.
 */
export function mrFromPages(spec: MrSpec, geom: PageGeometry, pages: ArrayLike<number>): MemoryRegion | MrBuildError {
  const base = specBase(spec);
  if (base < 0) return -base as MrBuildError;
  const bad = checkGeometry(spec, geom, pages.length);
  if (bad) return bad;
  const m = new RunMerger(geom.pageSizeLog2, geom.firstPageOffset, spec.length);
  for (let i = 0; i < pages.length; i++) {
    const e = m.add(pages[i]!);
    if (e) return e;
  }
  return region(spec, base, m.finish());
}

/**
 * A region described the way CREATE_MR / REG_MR describe it (contract 3.1):
 * map_count 0 = nothing mapped, 1 = `dmaAddr` is the first byte's bus address,
 * > 1 = `dmaAddr` points to map_count LE64 page addresses in guest memory,
 * read here (in 4 KiB steps, merging as it goes) and not kept.
 */
export function mrFromTable(mem: GuestMemory, spec: MrSpec, geom: PageGeometry, mapCount: number, dmaAddr: number): MemoryRegion | MrBuildError {
  if (mapCount === 0) return mrUnmapped(spec);
  if (mapCount === 1) return mrFromDirect(spec, dmaAddr);
  const base = specBase(spec);
  if (base < 0) return -base as MrBuildError;
  const bad = checkGeometry(spec, geom, mapCount);
  if (bad) return bad;
  if (!isAddr(dmaAddr) || dmaAddr + mapCount * 8 > Number.MAX_SAFE_INTEGER) return MrBuildError.TABLE_UNREADABLE;
  const m = new RunMerger(geom.pageSizeLog2, geom.firstPageOffset, spec.length);
  const chunk = Buffer.allocUnsafe(Math.min(mapCount, TABLE_CHUNK_ENTRIES) * 8);
  for (let done = 0; done < mapCount;) {
    const n = Math.min(mapCount - done, TABLE_CHUNK_ENTRIES);
    const view = chunk.subarray(0, n * 8);
    if (mem.read(dmaAddr + done * 8, view) !== MemStatus.OK) return MrBuildError.TABLE_UNREADABLE;
    for (let i = 0; i < n; i++) {
      const e = m.add(readU64LE(view, i * 8));
      if (e) return e;
    }
    done += n;
  }
  return region(spec, base, m.finish());
}

// ---------------------------------------------------------------------------
// Keys and the DMA-key policy

/** Where the data path finds MRs and MWs: by index (key >> 8). */
export interface MrTable {
  /** The region registered at `index`, whatever its current tag; undefined if none (or invalidated). */
  mrByIndex(index: number): MemoryRegion | undefined;
}

/** Who presents a key. */
export const enum KeyUse {
  /** An lkey in a WQE of the QP described by the context. */
  LOCAL = 0,
  /** An rkey from a QP of the same guest, checked against the responder QP's context. */
  REMOTE = 1,
  /** An rkey from outside the guest's own QPs: a peer server, or a request to an in-process target (NVMe-oF, S3, P4). */
  UNTRUSTED = 2,
}

/** The QP side of a key check (the requester for LOCAL, the responder for REMOTE/UNTRUSTED). */
export interface KeyContext {
  /** The QP's protection domain. */
  readonly pd: number;
  /** CREATE_QP priv_flags and MODIFY_QP access bits (QpFlag): PRIVILEGED, REMOTE_PRIVILEGED, REMOTE_WRITE/READ/ATOMIC. */
  readonly qpFlags: number;
}

/** Translation outcome. 0 is success. */
export const enum Xlate {
  OK = 0,
  /** No region at the key's index, or its tag differs. */
  BAD_KEY = 1,
  /** The region belongs to another PD. */
  PD_MISMATCH = 2,
  /** Key 0 used where the DMA-key policy refuses it. */
  DMA_KEY_REFUSED = 3,
  /** The region (or the responder QP) lacks the access right. */
  ACCESS = 4,
  /** The range is not inside the region. */
  BOUNDS = 5,
  /** The range wraps past 2^64 or past what a JS number addresses exactly. */
  WRAP = 6,
  /** Longer than MAX_MSG_BYTES. */
  TOO_LONG = 7,
  /** Address or length not a non-negative integer (e.g. an undecodable u64). */
  BAD_VALUE = 8,
  /** Guest memory: some byte is not mapped. */
  UNMAPPED = 9,
  /** Guest memory: the range was shared read-only and the access writes. */
  READ_ONLY = 10,
}

const XLATE_NAMES = ['ok', 'bad-key', 'pd-mismatch', 'dma-key-refused', 'access', 'bounds', 'wrap', 'too-long',
  'bad-value', 'unmapped', 'read-only'];

export function xlateName(x: Xlate): string {
  return XLATE_NAMES[x] ?? `xlate-${x as number}`;
}

/**
 * The DMA-key (key 0) policy, contract 3.2 and architecture "Trust Boundaries":
 * - LOCAL: only a PRIVILEGED QP (every kernel QP; never a user QP) may post
 *   lkey 0; it then names guest bus addresses with no bounds.
 * - REMOTE: rkey 0 reaches memory only on a responder QP flagged
 *   REMOTE_PRIVILEGED (a PD created with IB_PD_UNSAFE_GLOBAL_RKEY).
 * - UNTRUSTED (peer servers, in-process targets): never, unless the access is
 *   zero-length (which touches nothing).
 * What key 0 may reach once allowed: any guest RAM QEMU shared with the
 * server (GuestMemory decides), nothing else.
 */
export function dmaKeyAllowed(use: KeyUse, ctx: KeyContext, len: number): boolean {
  if (len === 0) return true;
  switch (use) {
    case KeyUse.LOCAL: return (ctx.qpFlags & QpFlag.PRIVILEGED) !== 0;
    case KeyUse.REMOTE: return (ctx.qpFlags & QpFlag.REMOTE_PRIVILEGED) !== 0;
    default: return false;
  }
}

/**
 * Resolve a key to its region: key 0 through the DMA-key policy, any other by
 * index with the tag byte and the PD checked. Answers the region or an Xlate
 * error (a number). `len` is the access length (the policy lets zero-length
 * accesses through).
 */
export function resolveKey(table: MrTable, key: number, use: KeyUse, ctx: KeyContext, len: number): MemoryRegion | Xlate {
  if (!Number.isInteger(key) || key < 0 || key > 0xffffffff) return Xlate.BAD_KEY;
  if (key === 0) return dmaKeyAllowed(use, ctx, len) ? DMA_MR : Xlate.DMA_KEY_REFUSED;
  const mr = table.mrByIndex(key >>> 8);
  if (!mr || mr.key !== key) return Xlate.BAD_KEY;
  if (mr.pd !== ctx.pd && mr.pd !== -1) return Xlate.PD_MISMATCH;
  return mr;
}

/** The QP access bit a remote access needs (responder check: QP bit and MR bit). */
export function qpAllows(ctx: KeyContext, access: Access): boolean {
  switch (access) {
    case Access.REMOTE_WRITE: return (ctx.qpFlags & QpFlag.REMOTE_WRITE) !== 0;
    case Access.REMOTE_READ: return (ctx.qpFlags & QpFlag.REMOTE_READ) !== 0;
    case Access.REMOTE_ATOMIC: return (ctx.qpFlags & QpFlag.REMOTE_ATOMIC) !== 0;
    default: return true;
  }
}

// ---------------------------------------------------------------------------
// Translation

function fromMem(st: MemStatus): Xlate {
  switch (st) {
    case MemStatus.OK: return Xlate.OK;
    case MemStatus.READ_ONLY: return Xlate.READ_ONLY;
    case MemStatus.BAD_RANGE: return Xlate.WRAP;
    default: return Xlate.UNMAPPED;
  }
}

/** Index of the run containing offset `o` (0 <= o < mr.length). */
function findRun(mr: MemoryRegion, o: number): number {
  const offs = mr.runOffsets;
  let lo = 0;
  let hi = offs.length - 1;
  while (lo < hi) {
    const mid = (lo + hi + 1) >>> 1;
    if (offs[mid]! <= o) lo = mid; else hi = mid - 1;
  }
  return lo;
}

/**
 * Translate [va, va + len) of `mr` for `access` into guest-memory views
 * appended to `out` (in order). On any error `out` is left as it was. A
 * zero-length range succeeds with no views and no checks (it touches nothing).
 * Checks, in order: values, length limit, wrap, access right, bounds, then
 * guest memory for each run piece.
 */
export function translate(mr: MemoryRegion, va: number, len: number, access: Access, mem: GuestMemory, out: Buffer[]): Xlate {
  if (!isAddr(va) || !Number.isSafeInteger(len) || len < 0) return Xlate.BAD_VALUE;
  if (len === 0) return Xlate.OK;
  if (len > MAX_MSG_BYTES) return Xlate.TOO_LONG;
  if (va + len > Number.MAX_SAFE_INTEGER) return Xlate.WRAP;
  if ((mr.flags & access) !== access) return Xlate.ACCESS;
  const write = accessWrites(access);
  if (mr.identity) return fromMem(mem.slices(va, len, write, out));
  if (va < mr.base || va + len > mr.base + mr.length) return Xlate.BOUNDS;

  const start = out.length;
  let o = va - mr.base;
  let left = len;
  let i = findRun(mr, o);
  while (left > 0) {
    const run = mr.runs[i];
    if (!run) { out.length = start; return Xlate.BOUNDS; }
    const within = o - mr.runOffsets[i]!;
    const n = Math.min(left, run.len - within);
    const st = mem.slices(run.guestAddr + within, n, write, out);
    if (st !== MemStatus.OK) { out.length = start; return fromMem(st); }
    o += n;
    left -= n;
    i++;
  }
  return Xlate.OK;
}
