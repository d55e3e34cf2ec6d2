// Messages -> bytes. A MessageWriter appends whole messages to one growable
// buffer: begin() reserves the header, the body is appended, end() fills in
// msg_size. Several messages can be batched and taken at once (one sendmsg).
// take() hands the filled bytes out as a view and rewinds: the caller must be
// done with that view (the socket has copied it) before the next begin(), or
// use takeCopy(). A sender that wants no view at all reads `buffer` up to
// `length` and calls clear(). A message abandoned half way is dropped by abort().

import { Command, DmaUnmapFlag, HeaderFlag, RegionInfoFlag } from './constants';
import {
  Field,
  setField,
  vfio_info_cap_header,
  vfio_irq_info,
  vfio_irq_set,
  vfio_region_info,
  vfio_region_info_cap_sparse_mmap,
  vfio_region_info_cap_type,
  vfio_region_sparse_mmap_area,
  vfio_user_bitmap,
  vfio_user_device_feature,
  vfio_user_device_info,
  vfio_user_dirty_pages,
  vfio_user_dma_map,
  vfio_user_dma_rw,
  vfio_user_dma_unmap,
  vfio_user_header,
  vfio_user_mig_data,
  vfio_user_region_access,
  vfio_user_region_io_fds_request,
  vfio_user_version,
  vfio_user_write_multi,
  vfio_user_write_multi_data,
} from './layouts';
import { HEADER_SIZE } from './limits';
import type { Body, Header, RegionCap } from './messages';

export class MessageWriter {
  #buf: Buffer;
  #len = 0;
  /** Offset of the message being written, or -1 between messages. */
  #start = -1;
  /** Messages ended so far (a caller can tell whether a reply was written). */
  ended = 0;
  /**
   * The last view() handed out, reused when the same bytes are asked for
   * again: a server answering one request per read writes each reply at the
   * same place, so its hot path makes no new view object per message.
   */
  #view: Buffer | null = null;

  constructor(initialSize = 4096) {
    this.#buf = Buffer.allocUnsafe(initialSize);
  }

  /** Bytes of complete messages waiting to be taken. */
  get length(): number {
    return this.#start >= 0 ? this.#start : this.#len;
  }

  /** Start a message; the header's msg_size is filled in by end(). */
  begin(id: number, command: number, flags: number, error = 0): this {
    if (this.#start >= 0) throw new Error('MessageWriter.begin: previous message not ended');
    this.#start = this.#len;
    this.#ensure(HEADER_SIZE);
    const b = this.#buf;
    const s = this.#start;
    setField(b, s, vfio_user_header.msg_id, id);
    setField(b, s, vfio_user_header.command, command);
    setField(b, s, vfio_user_header.flags, flags);
    setField(b, s, vfio_user_header.error, error);
    this.#len += HEADER_SIZE;
    return this;
  }

  /** Finish the current message; returns its size. */
  end(): number {
    const s = this.#start;
    if (s < 0) throw new Error('MessageWriter.end: no message begun');
    const size = this.#len - s;
    setField(this.#buf, s, vfio_user_header.msg_size, size);
    this.#start = -1;
    this.ended++;
    return size;
  }

  /** Drop a half-written message (for example when encoding threw). */
  abort(): void {
    if (this.#start >= 0) {
      this.#len = this.#start;
      this.#start = -1;
    }
  }

  /** Reserve `size` zeroed payload bytes and return the payload offset where they start. */
  reserve(size: number): number {
    this.#ensure(size);
    const at = this.#len;
    this.#buf.fill(0, at, at + size);
    this.#len += size;
    return at - this.#start - HEADER_SIZE;
  }

  /** Write a field of the struct that starts at payload offset `base`. */
  field(base: number, field: Field, value: number): this {
    setField(this.#buf, this.#start + HEADER_SIZE + base, field, value);
    return this;
  }

  /** Append raw bytes to the payload. */
  bytes(src: Buffer | Uint8Array): this {
    this.#ensure(src.length);
    this.#buf.set(src, this.#len);
    this.#len += src.length;
    return this;
  }

  /** A writable view of `size` payload bytes at payload offset `base` (for handlers that fill data in place). */
  view(base: number, size: number): Buffer {
    const at = this.#start + HEADER_SIZE + base;
    const v = this.#view;
    if (v !== null && v.byteOffset === this.#buf.byteOffset + at && v.length === size && v.buffer === this.#buf.buffer)
      return v;
    return (this.#view = this.#buf.subarray(at, at + size));
  }

  /** The internal buffer: the complete messages are its first `length` bytes. Valid until the next write. */
  get buffer(): Buffer {
    return this.#buf;
  }

  /** Forget the complete messages (once they were sent from `buffer`). */
  clear(): void {
    if (this.#start >= 0) throw new Error('MessageWriter.clear: a message is still open');
    this.#len = 0;
  }

  /** The complete messages as a view of the internal buffer, and rewind. */
  take(): Buffer {
    if (this.#start >= 0) throw new Error('MessageWriter.take: a message is still open');
    const out = this.#buf.subarray(0, this.#len);
    this.#len = 0;
    return out;
  }

  /** The complete messages as a fresh copy, and rewind. */
  takeCopy(): Buffer {
    return Buffer.from(this.take());
  }

  #ensure(extra: number): void {
    const need = this.#len + extra;
    if (need <= this.#buf.length) return;
    let size = Math.max(this.#buf.length, 1) * 2;
    while (size < need) size *= 2;
    const next = Buffer.allocUnsafe(size);
    this.#buf.copy(next, 0, 0, this.#len);
    this.#buf = next;
  }
}

/** Header flags for a reply. */
export function replyFlags(error: boolean): number {
  return HeaderFlag.TYPE_REPLY | (error ? HeaderFlag.ERROR : 0);
}

/** Append a header-only error reply. */
export function writeErrorReply(w: MessageWriter, id: number, command: number, errno: number): void {
  w.begin(id, command, replyFlags(true), errno);
  w.end();
}

/**
 * Append any message. `header.size` is ignored (computed); the header's flags
 * and error are written as given, so callers decide command, reply and NO_REPLY.
 */
export function writeMessage(w: MessageWriter, header: Omit<Header, 'size'>, body: Body): void {
  w.begin(header.id, header.command, header.flags, header.error);
  try {
    writeBody(w, body);
  } catch (e) {
    w.abort();
    throw e;
  }
  w.end();
}

/** Encode a whole message into a fresh Buffer (tests, tools). */
export function encodeMessage(header: Omit<Header, 'size'>, body: Body): Buffer {
  const w = new MessageWriter(64);
  writeMessage(w, header, body);
  return w.takeCopy();
}

/** The command number a body kind belongs to (undefined for 'error', which carries it in the header). */
export function commandOfBody(body: Body): Command | undefined {
  switch (body.kind) {
    case 'version':
    case 'versionReply':
      return Command.VERSION;
    case 'dmaMap':
    case 'dmaMapReply':
      return Command.DMA_MAP;
    case 'dmaUnmap':
    case 'dmaUnmapReply':
      return Command.DMA_UNMAP;
    case 'deviceGetInfo':
    case 'deviceGetInfoReply':
      return Command.DEVICE_GET_INFO;
    case 'deviceGetRegionInfo':
    case 'deviceGetRegionInfoReply':
      return Command.DEVICE_GET_REGION_INFO;
    case 'deviceGetRegionIoFds':
    case 'deviceGetRegionIoFdsReply':
      return Command.DEVICE_GET_REGION_IO_FDS;
    case 'deviceGetIrqInfo':
    case 'deviceGetIrqInfoReply':
      return Command.DEVICE_GET_IRQ_INFO;
    case 'deviceSetIrqs':
    case 'deviceSetIrqsReply':
      return Command.DEVICE_SET_IRQS;
    case 'regionRead':
    case 'regionReadReply':
      return Command.REGION_READ;
    case 'regionWrite':
    case 'regionWriteReply':
      return Command.REGION_WRITE;
    case 'dmaRead':
    case 'dmaReadReply':
      return Command.DMA_READ;
    case 'dmaWrite':
    case 'dmaWriteReply':
      return Command.DMA_WRITE;
    case 'deviceReset':
    case 'deviceResetReply':
      return Command.DEVICE_RESET;
    case 'dirtyPages':
    case 'dirtyPagesReply':
      return Command.DIRTY_PAGES;
    case 'regionWriteMulti':
    case 'regionWriteMultiReply':
      return Command.REGION_WRITE_MULTI;
    case 'deviceFeature':
    case 'deviceFeatureReply':
      return Command.DEVICE_FEATURE;
    case 'migDataRead':
    case 'migDataReadReply':
      return Command.MIG_DATA_READ;
    case 'migDataWrite':
    case 'migDataWriteReply':
      return Command.MIG_DATA_WRITE;
    case 'error':
      return undefined;
  }
}

/** vfio_irq_info and vfio_user_region_io_fds_request: argsz, flags, index, count. */
function writeIndexCount(
  w: MessageWriter,
  L: typeof vfio_irq_info | typeof vfio_user_region_io_fds_request,
  body: { argsz: number; flags: number; index: number; count: number },
): void {
  const at = w.reserve(L.SIZE);
  w.field(at, L.argsz, body.argsz)
    .field(at, L.flags, body.flags)
    .field(at, L.index, body.index)
    .field(at, L.count, body.count);
}

/** Append the payload of `body` to the open message. */
export function writeBody(w: MessageWriter, body: Body): void {
  writeStruct(w, body);
  if ('trailing' in body && body.trailing) w.bytes(body.trailing);
}

function writeStruct(w: MessageWriter, body: Body): void {
  switch (body.kind) {
    case 'version':
    case 'versionReply': {
      const at = w.reserve(vfio_user_version.SIZE);
      w.field(at, vfio_user_version.major, body.major).field(at, vfio_user_version.minor, body.minor);
      if (body.json !== undefined) {
        w.bytes(Buffer.from(body.json, 'utf8'));
        w.bytes(NUL);
      }
      return;
    }
    case 'dmaMap': {
      const at = w.reserve(vfio_user_dma_map.SIZE);
      w.field(at, vfio_user_dma_map.argsz, body.argsz)
        .field(at, vfio_user_dma_map.flags, body.flags)
        .field(at, vfio_user_dma_map.offset, body.offset)
        .field(at, vfio_user_dma_map.addr, body.address)
        .field(at, vfio_user_dma_map.size, body.size);
      return;
    }
    case 'dmaUnmap':
    case 'dmaUnmapReply': {
      const at = w.reserve(vfio_user_dma_unmap.SIZE);
      w.field(at, vfio_user_dma_unmap.argsz, body.argsz)
        .field(at, vfio_user_dma_unmap.flags, body.flags)
        .field(at, vfio_user_dma_unmap.addr, body.address)
        .field(at, vfio_user_dma_unmap.size, body.size);
      if (body.bitmap && body.flags & DmaUnmapFlag.GET_DIRTY_BITMAP) {
        const bt = w.reserve(vfio_user_bitmap.SIZE);
        w.field(bt, vfio_user_bitmap.pgsize, body.bitmap.pgsize).field(bt, vfio_user_bitmap.size, body.bitmap.size);
        w.bytes(body.bitmap.data);
      }
      return;
    }
    case 'deviceGetInfo':
    case 'deviceGetInfoReply': {
      const at = w.reserve(vfio_user_device_info.SIZE);
      w.field(at, vfio_user_device_info.argsz, body.argsz)
        .field(at, vfio_user_device_info.flags, body.flags)
        .field(at, vfio_user_device_info.num_regions, body.numRegions)
        .field(at, vfio_user_device_info.num_irqs, body.numIrqs);
      return;
    }
    case 'deviceGetRegionInfo':
      writeRegionInfoStruct(w, body.argsz, body.flags, body.index, body.capOffset, body.size, body.offset);
      return;
    case 'deviceGetRegionInfoReply': {
      const base = writeRegionInfoStruct(w, body.argsz, body.flags, body.index, body.capOffset, body.size, body.offset);
      if (body.caps.length > 0 && body.flags & RegionInfoFlag.CAPS) writeRegionCaps(w, base, body.caps);
      return;
    }
    case 'deviceGetRegionIoFds':
      writeIndexCount(w, vfio_user_region_io_fds_request, body);
      return;
    case 'deviceGetRegionIoFdsReply':
      // The reply starts with the request's four fields; the sub-region array follows.
      writeIndexCount(w, vfio_user_region_io_fds_request, body);
      w.bytes(body.entries);
      return;
    case 'deviceGetIrqInfo':
    case 'deviceGetIrqInfoReply':
      writeIndexCount(w, vfio_irq_info, body);
      return;
    case 'deviceSetIrqs': {
      const at = w.reserve(vfio_irq_set.SIZE);
      w.field(at, vfio_irq_set.argsz, body.argsz)
        .field(at, vfio_irq_set.flags, body.flags)
        .field(at, vfio_irq_set.index, body.index)
        .field(at, vfio_irq_set.start, body.start)
        .field(at, vfio_irq_set.count, body.count);
      w.bytes(body.data);
      return;
    }
    case 'regionRead':
    case 'regionWriteReply':
      writeRegionAccess(w, body.offset, body.region, body.count);
      return;
    case 'regionReadReply':
    case 'regionWrite':
      writeRegionAccess(w, body.offset, body.region, body.count);
      w.bytes(body.data);
      return;
    case 'dmaRead':
    case 'dmaWriteReply':
      writeDmaAccess(w, body.address, body.count);
      return;
    case 'dmaReadReply':
    case 'dmaWrite':
      writeDmaAccess(w, body.address, body.count);
      w.bytes(body.data);
      return;
    case 'regionWriteMulti': {
      w.field(w.reserve(vfio_user_write_multi.SIZE), vfio_user_write_multi.wr_cnt, body.entries.length);
      for (const e of body.entries) {
        const at = w.reserve(vfio_user_write_multi_data.SIZE);
        w.field(at, vfio_user_write_multi_data.offset, e.offset)
          .field(at, vfio_user_write_multi_data.region, e.region)
          .field(at, vfio_user_write_multi_data.count, e.count);
        w.view(at + vfio_user_write_multi_data.data.off, vfio_user_write_multi_data.data.size).set(
          e.data.subarray(0, vfio_user_write_multi_data.data.size),
        );
      }
      return;
    }
    case 'regionWriteMultiReply':
      w.field(w.reserve(vfio_user_write_multi.SIZE), vfio_user_write_multi.wr_cnt, body.wrCnt);
      return;
    case 'dirtyPages':
    case 'dirtyPagesReply':
    case 'deviceFeature':
    case 'deviceFeatureReply': {
      // vfio_user_dirty_pages and vfio_user_device_feature share this head.
      const L =
        body.kind === 'dirtyPages' || body.kind === 'dirtyPagesReply'
          ? vfio_user_dirty_pages
          : vfio_user_device_feature;
      const at = w.reserve(L.SIZE);
      w.field(at, L.argsz, body.argsz).field(at, L.flags, body.flags);
      w.bytes(body.data);
      return;
    }
    case 'migDataRead': {
      const at = w.reserve(vfio_user_mig_data.SIZE);
      w.field(at, vfio_user_mig_data.argsz, body.argsz).field(at, vfio_user_mig_data.size, body.size);
      return;
    }
    case 'migDataReadReply':
    case 'migDataWrite': {
      const at = w.reserve(vfio_user_mig_data.SIZE);
      w.field(at, vfio_user_mig_data.argsz, body.argsz).field(at, vfio_user_mig_data.size, body.size);
      w.bytes(body.data);
      return;
    }
    case 'dmaMapReply':
    case 'deviceSetIrqsReply':
    case 'deviceReset':
    case 'deviceResetReply':
    case 'migDataWriteReply':
    case 'error':
      return;
  }
}

const NUL = Buffer.from([0]);

function writeRegionInfoStruct(
  w: MessageWriter,
  argsz: number,
  flags: number,
  index: number,
  capOffset: number,
  size: number,
  offset: number,
): number {
  const at = w.reserve(vfio_region_info.SIZE);
  w.field(at, vfio_region_info.argsz, argsz)
    .field(at, vfio_region_info.flags, flags)
    .field(at, vfio_region_info.index, index)
    .field(at, vfio_region_info.cap_offset, capOffset)
    .field(at, vfio_region_info.size, size)
    .field(at, vfio_region_info.offset, offset);
  return at;
}

/** Size in bytes of a capability as encoded (header included). */
export function regionCapSize(cap: RegionCap): number {
  if ('areas' in cap)
    return vfio_region_info_cap_sparse_mmap.SIZE + cap.areas.length * vfio_region_sparse_mmap_area.SIZE;
  if ('subtype' in cap) return vfio_region_info_cap_type.SIZE;
  return vfio_info_cap_header.SIZE + cap.raw.length;
}

/** Capabilities are laid out back to back; each `next` is relative to the region-info struct at `base`. */
function writeRegionCaps(w: MessageWriter, base: number, caps: readonly RegionCap[]): void {
  for (let i = 0; i < caps.length; i++) {
    const cap = caps[i]!;
    const size = regionCapSize(cap);
    const at = w.reserve(size);
    const next = i + 1 < caps.length ? at - base + size : 0;
    w.field(at, vfio_info_cap_header.id, cap.id)
      .field(at, vfio_info_cap_header.version, cap.version)
      .field(at, vfio_info_cap_header.next, next);
    if ('areas' in cap) {
      w.field(at, vfio_region_info_cap_sparse_mmap.nr_areas, cap.areas.length);
      cap.areas.forEach((a, k) => {
        const e = at + vfio_region_info_cap_sparse_mmap.SIZE + k * vfio_region_sparse_mmap_area.SIZE;
        w.field(e, vfio_region_sparse_mmap_area.offset, a.offset).field(e, vfio_region_sparse_mmap_area.size, a.size);
      });
    } else if ('subtype' in cap) {
      w.field(at, vfio_region_info_cap_type.type, cap.type).field(at, vfio_region_info_cap_type.subtype, cap.subtype);
    } else {
      w.view(at + vfio_info_cap_header.SIZE, cap.raw.length).set(cap.raw);
    }
  }
}

function writeRegionAccess(w: MessageWriter, offset: number, region: number, count: number): void {
  const at = w.reserve(vfio_user_region_access.SIZE);
  w.field(at, vfio_user_region_access.offset, offset)
    .field(at, vfio_user_region_access.region, region)
    .field(at, vfio_user_region_access.count, count);
}

function writeDmaAccess(w: MessageWriter, address: number, count: number): void {
  const at = w.reserve(vfio_user_dma_rw.SIZE);
  w.field(at, vfio_user_dma_rw.addr, address).field(at, vfio_user_dma_rw.count, count);
}
