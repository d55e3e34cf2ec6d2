// The DMA region table: guest memory the client shared with DMA_MAP.
//
// Regions sit in an array sorted by IOVA (binary search) with a last-hit cache
// that a generation counter invalidates on every map and unmap. fd-backed
// regions are mapped MAP_SHARED through the native helper in windows of 1 GiB
// (Node Buffers stop at 4 GiB, and smaller windows keep virtual memory tidy).
// Consecutive windows overlap by WINDOW_OVERLAP bytes, so any access up to that
// size lies inside one window and gets a single Buffer view.
//
// Every lookup is bounds checked and answers with a MemStatus: addresses come
// from the guest. Nothing here throws because of guest or client input; the
// map/unmap validation lives in validateMap/validateUnmap and returns errors.

import * as fs from 'fs';
import { DmaMapFlag, Errno } from '../../protocol/constants';
import { ProtocolError, protocolError } from '../../protocol/errors';
import { DMA_PAGE_SIZE, MAX_DMA_REGION_SIZE, MAX_DMA_REGIONS } from '../../protocol/limits';
import * as native from '../native';
import type { DmaRange } from './device';
import { GuestMemory, MemStatus } from './guest-memory';
import { releaseWhenReturned } from './lent-views';

/** Size of one mapping window. */
export const WINDOW_SIZE = 1 << 30;
/** Reads and writes up to this many bytes are copied in a loop (no view made). */
const SMALL_COPY = 64;
/** Extra bytes each window maps past its end (see the file comment). */
export const WINDOW_OVERLAP = 4 << 20;

interface DmaRegion extends DmaRange {
  /** First byte past the region. */
  readonly end: number;
  /** The fd (owned by the table) or -1. */
  readonly fd: number;
  /** Offset of the region's first byte in the fd. */
  readonly fdOffset: number;
  /** Mapped windows, window k starting at region offset k * WINDOW_SIZE. Empty without fd. */
  readonly windows: readonly Buffer[];
  /** The ArrayBuffers behind `windows`, for munmap. */
  readonly mappings: readonly ArrayBuffer[];
  /** Identity of the backing file, to recognise an exact duplicate map. */
  readonly fileKey: string;
}

interface MapRequest {
  readonly address: number;
  readonly size: number;
  readonly flags: number;
  readonly offset: number;
  /** The fd that came with DMA_MAP, or -1. Ownership passes to the table on success. */
  readonly fd: number;
}

interface DmaTableLimits {
  readonly maxRegions: number;
  readonly maxRegionSize: number;
}

const DEFAULT_DMA_LIMITS: DmaTableLimits = { maxRegions: MAX_DMA_REGIONS, maxRegionSize: MAX_DMA_REGION_SIZE };

/** Result of add(): the new region, or 'duplicate' when an identical one exists (the new fd is the caller's to close). */
type AddResult = { readonly region: DmaRegion } | { readonly duplicate: DmaRegion } | { readonly error: ProtocolError };

export class DmaTable implements GuestMemory {
  #regions: DmaRegion[] = [];
  #generation = 0;
  #hint: DmaRegion | null = null;
  #hintGeneration = -1;
  readonly #limits: DmaTableLimits;

  constructor(limits: DmaTableLimits = DEFAULT_DMA_LIMITS) {
    this.#limits = limits;
  }

  get regions(): readonly DmaRegion[] {
    return this.#regions;
  }

  /** Bumped on every map and unmap; views taken before a change may be dead. */
  get generation(): number {
    return this.#generation;
  }

  /**
   * Validate and add a region. On success the table owns `req.fd`. On error or
   * duplicate, the fd is still the caller's.
   */
  add(req: MapRequest): AddResult {
    const known = DmaMapFlag.READ | DmaMapFlag.WRITE;
    if (req.flags & ~known)
      return { error: protocolError('BAD_FLAGS', `DMA_MAP flags 0x${req.flags.toString(16)} has unknown bits`) };
    if (req.size === 0) return { error: protocolError('OUT_OF_RANGE', 'DMA_MAP of size 0') };
    if (req.size > this.#limits.maxRegionSize) {
      return {
        error: protocolError(
          'TOO_BIG',
          `DMA_MAP size 0x${req.size.toString(16)} exceeds 0x${this.#limits.maxRegionSize.toString(16)}`,
          Errno.ENOSPC,
        ),
      };
    }
    if (req.address > Number.MAX_SAFE_INTEGER - req.size) {
      return {
        error: protocolError('OUT_OF_RANGE', `DMA_MAP 0x${req.address.toString(16)}+0x${req.size.toString(16)} wraps`),
      };
    }
    const end = req.address + req.size;
    let fileKey = '';
    // Guest memory comes in whole pages (QEMU maps page-aligned sections; libvfio-user refuses the rest).
    if (req.address % DMA_PAGE_SIZE !== 0 || req.size % DMA_PAGE_SIZE !== 0) {
      return {
        error: protocolError(
          'BAD_ALIGNMENT',
          `DMA_MAP 0x${req.address.toString(16)}+0x${req.size.toString(16)} is not page aligned`,
        ),
      };
    }
    if (req.fd >= 0) {
      if (req.offset % DMA_PAGE_SIZE !== 0)
        return {
          error: protocolError('BAD_ALIGNMENT', `DMA_MAP fd offset 0x${req.offset.toString(16)} is not page aligned`),
        };
      let st: fs.Stats;
      try {
        st = fs.fstatSync(req.fd);
      } catch (e) {
        return { error: protocolError('BAD_FD', `DMA_MAP fd: ${(e as Error).message}`, Errno.EBADF) };
      }
      // Mapping past the end of the file would turn a guest access into SIGBUS.
      if (st.isFile() && req.offset + req.size > st.size) {
        return {
          error: protocolError(
            'OUT_OF_RANGE',
            `DMA_MAP of 0x${req.size.toString(16)} at fd offset 0x${req.offset.toString(16)} runs past the file (0x${st.size.toString(16)} bytes)`,
          ),
        };
      }
      if (!st.isFile())
        return { error: protocolError('BAD_FD', 'DMA_MAP fd is not a regular file or memfd', Errno.EBADF) };
      fileKey = `${st.dev}:${st.ino}`;
    }
    const i = this.#lowerBound(req.address);
    // Neighbours that could overlap: the one before i (it may extend past address) and the one at i.
    const prev = i > 0 ? this.#regions[i - 1]! : null;
    const next = i < this.#regions.length ? this.#regions[i]! : null;
    for (const r of [prev, next]) {
      if (r && r.iova < end && req.address < r.end) {
        const same =
          r.iova === req.address &&
          r.size === req.size &&
          r.fdOffset === (req.fd >= 0 ? req.offset : 0) &&
          r.fileKey === fileKey &&
          r.readable === !!(req.flags & DmaMapFlag.READ) &&
          r.writable === !!(req.flags & DmaMapFlag.WRITE);
        if (same) return { duplicate: r };
        return {
          error: protocolError(
            'OVERLAP',
            `DMA_MAP 0x${req.address.toString(16)}+0x${req.size.toString(16)} overlaps 0x${r.iova.toString(16)}+0x${r.size.toString(16)}`,
          ),
        };
      }
    }
    if (this.#regions.length >= this.#limits.maxRegions) {
      return {
        error: protocolError('TABLE_FULL', `DMA table holds the maximum of ${this.#limits.maxRegions} regions`),
      };
    }
    const writable = !!(req.flags & DmaMapFlag.WRITE);
    const windows: Buffer[] = [];
    const mappings: ArrayBuffer[] = [];
    if (req.fd >= 0) {
      try {
        for (let start = 0; start < req.size; start += WINDOW_SIZE) {
          const len = Math.min(req.size - start, WINDOW_SIZE + WINDOW_OVERLAP);
          const ab = native.mmap(req.fd, req.offset + start, len, writable);
          mappings.push(ab);
          windows.push(Buffer.from(ab));
        }
      } catch (e) {
        for (const ab of mappings) native.munmap(ab);
        const errno = native.isNativeError(e) ? e.errno : Errno.EINVAL;
        return { error: protocolError('BAD_FD', `DMA_MAP mmap failed: ${(e as Error).message}`, errno) };
      }
    }
    const region: DmaRegion = {
      iova: req.address,
      size: req.size,
      end,
      readable: !!(req.flags & DmaMapFlag.READ),
      writable,
      mapped: req.fd >= 0,
      fd: req.fd,
      fdOffset: req.fd >= 0 ? req.offset : 0,
      windows,
      mappings,
      fileKey,
    };
    this.#regions.splice(i, 0, region);
    this.#generation++;
    return { region };
  }

  /** Find the region mapped exactly at [address, address + size). */
  findExact(address: number, size: number): DmaRegion | null {
    const i = this.#lowerBound(address);
    const r = this.#regions[i];
    return r && r.iova === address && r.size === size ? r : null;
  }

  /** Whether a process address (a bus-guard fault) lies in one of this table's mappings. */
  ownsAddress(address: number): boolean {
    for (const r of this.#regions) {
      for (const ab of r.mappings) {
        const at = native.mappingAddress(ab);
        if (address >= at && address < at + ab.byteLength) return true;
      }
    }
    return false;
  }

  /** Remove a region: munmap its windows (detaching every view; later for a mapping with views lent to the kernel) and close its fd. */
  remove(region: DmaRegion): void {
    const i = this.#regions.indexOf(region);
    if (i < 0) return;
    this.#regions.splice(i, 1);
    this.#generation++;
    this.#hint = null;
    release(region);
  }

  /** Remove every region (UNMAP_ALL, disconnect). Returns what was removed. */
  clear(): DmaRegion[] {
    const all = this.#regions;
    this.#regions = [];
    this.#generation++;
    this.#hint = null;
    for (const r of all) release(r);
    return all;
  }

  /** The region containing `iova`, or null. */
  lookup(iova: number): DmaRegion | null {
    const h = this.#hint;
    if (h && this.#hintGeneration === this.#generation && iova >= h.iova && iova < h.end) return h;
    const i = this.#lowerBound(iova + 1) - 1;
    const r = i >= 0 ? this.#regions[i]! : null;
    if (r && iova >= r.iova && iova < r.end) {
      this.#hint = r;
      this.#hintGeneration = this.#generation;
      return r;
    }
    return null;
  }

  // ---- GuestMemory ---------------------------------------------------------

  view(iova: number, len: number, write: boolean): Buffer | null {
    const win = this.#window(iova, len, write);
    return win ? win.subarray(this.#at, this.#at + len) : null;
  }

  /** Where [iova, iova + len) lies whole in one mapped window: the window (offset in #at), or null. No allocation. */
  #window(iova: number, len: number, write: boolean): Buffer | null {
    if (!validRange(iova, len)) return null;
    const r = this.lookup(iova);
    if (!r || !r.mapped || iova + len > r.end || (write ? !r.writable : !r.readable)) return null;
    const rel = iova - r.iova;
    const k = Math.floor(rel / WINDOW_SIZE);
    const at = rel - k * WINDOW_SIZE;
    const win = r.windows[k]!;
    if (at + len > win.length) return null;
    this.#at = at;
    return win;
  }

  /** The offset #window found (read at once: the next call overwrites it). */
  #at = 0;

  slices(iova: number, len: number, write: boolean, out: Buffer[]): MemStatus {
    if (!validRange(iova, len)) return MemStatus.BAD_RANGE;
    const mark = out.length;
    let at = iova;
    let left = len;
    while (left > 0) {
      const r = this.lookup(at);
      if (!r) {
        out.length = mark;
        return MemStatus.UNMAPPED;
      }
      if (!r.mapped) {
        out.length = mark;
        return MemStatus.NO_FD;
      }
      if (write ? !r.writable : !r.readable) {
        out.length = mark;
        return MemStatus.READ_ONLY;
      }
      const rel = at - r.iova;
      const k = Math.floor(rel / WINDOW_SIZE);
      const inWin = rel - k * WINDOW_SIZE;
      const win = r.windows[k]!;
      // Take up to the end of this window's own span (the overlap belongs to the next window) or the region.
      const n = Math.min(left, r.end - at, win.length - inWin);
      out.push(win.subarray(inWin, inWin + n));
      at += n;
      left -= n;
    }
    return MemStatus.OK;
  }

  read(iova: number, dst: Buffer): MemStatus {
    // Per descriptor and per frame: copied straight from the window, with no view made.
    const win = this.#window(iova, dst.length, false);
    if (win) {
      const at = this.#at;
      // A descriptor or completion (16 to 64 bytes) byte by byte: Buffer.copy of a range makes a view first.
      if (dst.length <= SMALL_COPY) for (let i = 0; i < dst.length; i++) dst[i] = win[at + i]!;
      else win.copy(dst, 0, at, at + dst.length);
      return MemStatus.OK;
    }
    const parts: Buffer[] = [];
    const st = this.slices(iova, dst.length, false, parts);
    if (st !== MemStatus.OK) return st;
    let o = 0;
    for (const p of parts) o += p.copy(dst, o);
    return MemStatus.OK;
  }

  write(iova: number, src: Buffer): MemStatus {
    const win = this.#window(iova, src.length, true);
    if (win) {
      const at = this.#at;
      if (src.length <= SMALL_COPY) for (let i = 0; i < src.length; i++) win[at + i] = src[i]!;
      else src.copy(win, at);
      return MemStatus.OK;
    }
    const parts: Buffer[] = [];
    const st = this.slices(iova, src.length, true, parts);
    if (st !== MemStatus.OK) return st;
    let o = 0;
    for (const p of parts) {
      src.copy(p, 0, o, o + p.length);
      o += p.length;
    }
    return MemStatus.OK;
  }

  copy(dst: number, src: number, len: number): MemStatus {
    const s = this.view(src, len, false);
    const d = this.view(dst, len, true);
    if (s && d) {
      s.copy(d);
      return MemStatus.OK;
    }
    const sp: Buffer[] = [];
    const dp: Buffer[] = [];
    let st = this.slices(src, len, false, sp);
    if (st !== MemStatus.OK) return st;
    st = this.slices(dst, len, true, dp);
    if (st !== MemStatus.OK) return st;
    copySlices(dp, sp);
    return MemStatus.OK;
  }

  /** Index of the first region with iova >= address. */
  #lowerBound(address: number): number {
    let lo = 0;
    let hi = this.#regions.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (this.#regions[mid]!.iova < address) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  }
}

function validRange(iova: number, len: number): boolean {
  return (
    Number.isInteger(iova) && Number.isInteger(len) && iova >= 0 && len >= 0 && iova <= Number.MAX_SAFE_INTEGER - len
  );
}

function release(r: DmaRegion): void {
  for (const ab of r.mappings) {
    // A view lent to a socket write keeps its mapping until the write is done (lent-views.ts).
    releaseWhenReturned(ab, () => {
      try {
        native.munmap(ab);
      } catch {
        /* already unmapped: nothing left to release */
      }
    });
  }
  if (r.fd >= 0) {
    try {
      fs.closeSync(r.fd);
    } catch {
      /* the fd is ours; a failure here leaves nothing to do */
    }
  }
}

/** Copy between two slice lists of equal total length (guest to guest, no bounce buffer). */
function copySlices(dst: readonly Buffer[], src: readonly Buffer[]): void {
  let di = 0,
    si = 0,
    doff = 0,
    soff = 0;
  while (di < dst.length && si < src.length) {
    const d = dst[di]!;
    const s = src[si]!;
    const n = Math.min(d.length - doff, s.length - soff);
    s.copy(d, doff, soff, soff + n);
    doff += n;
    soff += n;
    if (doff === d.length) {
      di++;
      doff = 0;
    }
    if (soff === s.length) {
      si++;
      soff = 0;
    }
  }
}
