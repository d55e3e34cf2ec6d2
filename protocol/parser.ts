// Bytes -> messages. Pure functions over Buffers: no sockets, no fds, no logs.
//
// decodeHeader reads the fixed 16 bytes; checkHeader applies the limits that
// must hold before a body is buffered; decodeBody turns a payload into a typed
// body. Payload buffers handed out in bodies (`data`) are views, not copies:
// they are valid as long as the caller keeps the payload's memory untouched.

import { Command, DmaUnmapFlag, HeaderFlag, RegionCapId, RegionInfoFlag } from './constants';
import { Decoded, fail, ok, ProtocolError, protocolError } from './errors';
import {
  Field,
  getField,
  U64_UNSAFE,
  vfio_info_cap_header,
  vfio_irq_info,
  vfio_irq_set,
  vfio_region_info,
  vfio_region_info_cap_sparse_mmap,
  vfio_region_info_cap_type,
  vfio_region_sparse_mmap_area,
  vfio_user_bitmap,
  vfio_user_device_feature,
  vfio_user_dirty_pages,
  vfio_user_device_info,
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
import { HEADER_SIZE, MAX_WRITE_MULTI_ENTRIES, WRITE_MULTI_DATA_SIZE } from './limits';
import type { Body, Header, Message, RegionCap, Reply, Request, WriteMultiEntry } from './messages';

/** Read the 16-byte header at `off`. The caller guarantees 16 bytes are there. */
export function decodeHeader(buf: Buffer, off = 0): Header {
  return {
    id: getField(buf, off, vfio_user_header.msg_id),
    command: getField(buf, off, vfio_user_header.command),
    size: getField(buf, off, vfio_user_header.msg_size),
    flags: getField(buf, off, vfio_user_header.flags),
    error: getField(buf, off, vfio_user_header.error),
  };
}

export function isReply(header: Header): boolean {
  return (header.flags & HeaderFlag.TYPE_MASK) === HeaderFlag.TYPE_REPLY;
}

/** Limits a header must meet before its body is read. */
export function checkHeader(header: Header, maxMessageSize: number): ProtocolError | null {
  if (header.size < HEADER_SIZE) {
    return protocolError('HEADER_TOO_SMALL', `msg_size ${header.size} is below the 16-byte header`);
  }
  if (header.size > maxMessageSize) {
    return protocolError('MESSAGE_TOO_LARGE', `msg_size ${header.size} exceeds the limit ${maxMessageSize}`);
  }
  return null;
}

/** Decode a whole message (header and body) from a buffer holding exactly one message. */
export function decodeMessage(buf: Buffer): Decoded<Message> {
  if (buf.length < HEADER_SIZE) return fail('HEADER_TOO_SMALL', `${buf.length} bytes is less than a header`);
  const header = decodeHeader(buf, 0);
  if (header.size !== buf.length) {
    return fail('PAYLOAD_MISMATCH', `msg_size ${header.size} but the message has ${buf.length} bytes`);
  }
  const body = decodeBody(header, buf.subarray(HEADER_SIZE));
  return body.ok ? ok({ header, body: body.value }) : body;
}

/** Decode a payload (the bytes after the header) according to the header's command and type. */
export function decodeBody(header: Header, payload: Buffer): Decoded<Body> {
  if (isReply(header)) {
    if (header.flags & HeaderFlag.ERROR) {
      if (payload.length !== 0) return fail('ERROR_WITH_BODY', `error reply carries ${payload.length} payload bytes`);
      return ok({ kind: 'error', errno: header.error });
    }
    return decodeReply(header.command, payload);
  }
  return decodeRequest(header.command, payload);
}

// ---- helpers -------------------------------------------------------------

/** Attach the bytes after a fixed struct, if any (see Trailing). */
function withTrailing<T extends object>(body: T, p: Buffer, structSize: number): T & { trailing?: Buffer } {
  return p.length > structSize ? { ...body, trailing: p.subarray(structSize) } : body;
}

/** Read fields of a struct at `base`; `unsafe` collects the first u64 that does not fit. */
class Fields {
  bad: string | null = null;
  constructor(
    private readonly buf: Buffer,
    private readonly base = 0,
  ) {}
  get(field: Field, name: string): number {
    const v = getField(this.buf, this.base, field);
    if (v === U64_UNSAFE && field.size === 8 && this.bad === null) this.bad = name;
    return v;
  }
}

function short<T>(what: string, need: number, have: number): Decoded<T> {
  return fail('SHORT_PAYLOAD', `${what} needs ${need} payload bytes, got ${have}`);
}

function u64Range<T>(what: string, field: string): Decoded<T> {
  return fail('U64_RANGE', `${what}: ${field} is above 2^53-1`);
}

// ---- requests ------------------------------------------------------------

export function decodeRequest(command: number, p: Buffer): Decoded<Request> {
  switch (command) {
    case Command.VERSION: {
      const v = decodeVersionBody(p);
      return v.ok ? ok({ kind: 'version', ...v.value }) : v;
    }
    case Command.DMA_MAP: {
      if (p.length < vfio_user_dma_map.SIZE) return short('DMA_MAP', vfio_user_dma_map.SIZE, p.length);
      const r = new Fields(p);
      const body = {
        kind: 'dmaMap' as const,
        argsz: r.get(vfio_user_dma_map.argsz, 'argsz'),
        flags: r.get(vfio_user_dma_map.flags, 'flags'),
        offset: r.get(vfio_user_dma_map.offset, 'offset'),
        address: r.get(vfio_user_dma_map.addr, 'address'),
        size: r.get(vfio_user_dma_map.size, 'size'),
      };
      return r.bad ? u64Range('DMA_MAP', r.bad) : ok(withTrailing(body, p, vfio_user_dma_map.SIZE));
    }
    case Command.DMA_UNMAP: {
      const u = decodeUnmapBody(p, false);
      return u.ok ? ok({ kind: 'dmaUnmap', ...u.value }) : u;
    }
    case Command.DEVICE_GET_INFO: {
      const d = decodeDeviceInfo(p, 'DEVICE_GET_INFO');
      return d.ok ? ok(withTrailing({ kind: 'deviceGetInfo' as const, ...d.value }, p, vfio_user_device_info.SIZE)) : d;
    }
    case Command.DEVICE_GET_REGION_INFO: {
      const r = decodeRegionInfoStruct(p);
      return r.ok
        ? ok(withTrailing({ kind: 'deviceGetRegionInfo' as const, ...r.value }, p, vfio_region_info.SIZE))
        : r;
    }
    case Command.DEVICE_GET_REGION_IO_FDS: {
      const d = decodeIndexCount(p, vfio_user_region_io_fds_request, 'DEVICE_GET_REGION_IO_FDS');
      return d.ok
        ? ok(
            withTrailing(
              { kind: 'deviceGetRegionIoFds' as const, ...d.value },
              p,
              vfio_user_region_io_fds_request.SIZE,
            ),
          )
        : d;
    }
    case Command.DEVICE_GET_IRQ_INFO: {
      const d = decodeIndexCount(p, vfio_irq_info, 'DEVICE_GET_IRQ_INFO');
      return d.ok ? ok(withTrailing({ kind: 'deviceGetIrqInfo' as const, ...d.value }, p, vfio_irq_info.SIZE)) : d;
    }
    case Command.DEVICE_SET_IRQS: {
      if (p.length < vfio_irq_set.SIZE) return short('DEVICE_SET_IRQS', vfio_irq_set.SIZE, p.length);
      return ok({
        kind: 'deviceSetIrqs',
        argsz: getField(p, 0, vfio_irq_set.argsz),
        flags: getField(p, 0, vfio_irq_set.flags),
        index: getField(p, 0, vfio_irq_set.index),
        start: getField(p, 0, vfio_irq_set.start),
        count: getField(p, 0, vfio_irq_set.count),
        data: p.subarray(vfio_irq_set.SIZE),
      });
    }
    case Command.REGION_READ: {
      const a = decodeRegionAccess(p, 'REGION_READ');
      if (!a.ok) return a;
      return ok(withTrailing({ kind: 'regionRead' as const, ...a.value }, p, vfio_user_region_access.SIZE));
    }
    case Command.REGION_WRITE: {
      const a = decodeRegionAccess(p, 'REGION_WRITE');
      if (!a.ok) return a;
      const data = p.subarray(vfio_user_region_access.SIZE);
      if (data.length !== a.value.count) {
        return fail('PAYLOAD_MISMATCH', `REGION_WRITE count ${a.value.count} but ${data.length} data bytes`);
      }
      return ok({ kind: 'regionWrite', ...a.value, data });
    }
    case Command.DMA_READ: {
      const a = decodeDmaAccess(p, 'DMA_READ');
      return a.ok ? ok(withTrailing({ kind: 'dmaRead' as const, ...a.value }, p, vfio_user_dma_rw.SIZE)) : a;
    }
    case Command.DMA_WRITE: {
      const a = decodeDmaAccess(p, 'DMA_WRITE');
      if (!a.ok) return a;
      const data = p.subarray(vfio_user_dma_rw.SIZE);
      if (data.length !== a.value.count) {
        return fail('PAYLOAD_MISMATCH', `DMA_WRITE count ${a.value.count} but ${data.length} data bytes`);
      }
      return ok({ kind: 'dmaWrite', ...a.value, data });
    }
    case Command.DEVICE_RESET:
      return ok({ kind: 'deviceReset' });
    case Command.DIRTY_PAGES: {
      if (p.length < vfio_user_dirty_pages.SIZE) return short('DIRTY_PAGES', vfio_user_dirty_pages.SIZE, p.length);
      return ok({
        kind: 'dirtyPages',
        argsz: getField(p, 0, vfio_user_dirty_pages.argsz),
        flags: getField(p, 0, vfio_user_dirty_pages.flags),
        data: p.subarray(vfio_user_dirty_pages.SIZE),
      });
    }
    case Command.REGION_WRITE_MULTI: {
      const m = decodeWriteMulti(p);
      return m.ok ? ok({ kind: 'regionWriteMulti', entries: m.value }) : m;
    }
    case Command.DEVICE_FEATURE: {
      if (p.length < vfio_user_device_feature.SIZE)
        return short('DEVICE_FEATURE', vfio_user_device_feature.SIZE, p.length);
      return ok({
        kind: 'deviceFeature',
        argsz: getField(p, 0, vfio_user_device_feature.argsz),
        flags: getField(p, 0, vfio_user_device_feature.flags),
        data: p.subarray(vfio_user_device_feature.SIZE),
      });
    }
    case Command.MIG_DATA_READ: {
      if (p.length < vfio_user_mig_data.SIZE) return short('MIG_DATA_READ', vfio_user_mig_data.SIZE, p.length);
      return ok(
        withTrailing(
          {
            kind: 'migDataRead' as const,
            argsz: getField(p, 0, vfio_user_mig_data.argsz),
            size: getField(p, 0, vfio_user_mig_data.size),
          },
          p,
          vfio_user_mig_data.SIZE,
        ),
      );
    }
    case Command.MIG_DATA_WRITE: {
      if (p.length < vfio_user_mig_data.SIZE) return short('MIG_DATA_WRITE', vfio_user_mig_data.SIZE, p.length);
      const size = getField(p, 0, vfio_user_mig_data.size);
      const data = p.subarray(vfio_user_mig_data.SIZE);
      if (data.length < size)
        return fail('PAYLOAD_MISMATCH', `MIG_DATA_WRITE size ${size} but ${data.length} data bytes`);
      return ok({ kind: 'migDataWrite', argsz: getField(p, 0, vfio_user_mig_data.argsz), size, data });
    }
    default:
      return fail('UNKNOWN_COMMAND', `command ${command} is not a vfio-user request`);
  }
}

// ---- replies -------------------------------------------------------------

export function decodeReply(command: number, p: Buffer): Decoded<Reply> {
  switch (command) {
    case Command.VERSION: {
      const v = decodeVersionBody(p);
      return v.ok ? ok({ kind: 'versionReply', ...v.value }) : v;
    }
    case Command.DMA_MAP:
      return p.length === 0
        ? ok({ kind: 'dmaMapReply' })
        : fail('PAYLOAD_MISMATCH', 'DMA_MAP reply must be header only');
    case Command.DMA_UNMAP: {
      const u = decodeUnmapBody(p, true);
      return u.ok ? ok({ kind: 'dmaUnmapReply', ...u.value }) : u;
    }
    case Command.DEVICE_GET_INFO: {
      const d = decodeDeviceInfo(p, 'DEVICE_GET_INFO reply');
      return d.ok ? ok({ kind: 'deviceGetInfoReply', ...d.value }) : d;
    }
    case Command.DEVICE_GET_REGION_INFO: {
      const r = decodeRegionInfoStruct(p);
      if (!r.ok) return r;
      const caps = decodeRegionCaps(p, r.value.flags, r.value.capOffset);
      return caps.ok ? ok({ kind: 'deviceGetRegionInfoReply', ...r.value, caps: caps.value }) : caps;
    }
    case Command.DEVICE_GET_REGION_IO_FDS: {
      const d = decodeIndexCount(p, vfio_user_region_io_fds_request, 'DEVICE_GET_REGION_IO_FDS reply');
      if (!d.ok) return d;
      return ok({
        kind: 'deviceGetRegionIoFdsReply',
        ...d.value,
        entries: p.subarray(vfio_user_region_io_fds_request.SIZE),
      });
    }
    case Command.DEVICE_GET_IRQ_INFO: {
      const d = decodeIndexCount(p, vfio_irq_info, 'DEVICE_GET_IRQ_INFO reply');
      return d.ok ? ok({ kind: 'deviceGetIrqInfoReply', ...d.value }) : d;
    }
    case Command.DEVICE_SET_IRQS:
      return p.length === 0
        ? ok({ kind: 'deviceSetIrqsReply' })
        : fail('PAYLOAD_MISMATCH', 'DEVICE_SET_IRQS reply must be header only');
    case Command.REGION_READ: {
      const a = decodeRegionAccess(p, 'REGION_READ reply');
      if (!a.ok) return a;
      const data = p.subarray(vfio_user_region_access.SIZE);
      if (data.length !== a.value.count) {
        return fail('PAYLOAD_MISMATCH', `REGION_READ reply count ${a.value.count} but ${data.length} data bytes`);
      }
      return ok({ kind: 'regionReadReply', ...a.value, data });
    }
    case Command.REGION_WRITE: {
      const a = decodeRegionAccess(p, 'REGION_WRITE reply');
      return a.ok ? ok({ kind: 'regionWriteReply', ...a.value }) : a;
    }
    case Command.DMA_READ: {
      const a = decodeDmaAccess(p, 'DMA_READ reply');
      if (!a.ok) return a;
      const data = p.subarray(vfio_user_dma_rw.SIZE);
      if (data.length !== a.value.count) {
        return fail('PAYLOAD_MISMATCH', `DMA_READ reply count ${a.value.count} but ${data.length} data bytes`);
      }
      return ok({ kind: 'dmaReadReply', ...a.value, data });
    }
    case Command.DMA_WRITE: {
      const a = decodeDmaAccess(p, 'DMA_WRITE reply');
      return a.ok ? ok({ kind: 'dmaWriteReply', ...a.value }) : a;
    }
    case Command.DEVICE_RESET:
      return p.length === 0
        ? ok({ kind: 'deviceResetReply' })
        : fail('PAYLOAD_MISMATCH', 'DEVICE_RESET reply must be header only');
    case Command.DIRTY_PAGES: {
      if (p.length < vfio_user_dirty_pages.SIZE)
        return short('DIRTY_PAGES reply', vfio_user_dirty_pages.SIZE, p.length);
      return ok({
        kind: 'dirtyPagesReply',
        argsz: getField(p, 0, vfio_user_dirty_pages.argsz),
        flags: getField(p, 0, vfio_user_dirty_pages.flags),
        data: p.subarray(vfio_user_dirty_pages.SIZE),
      });
    }
    case Command.REGION_WRITE_MULTI: {
      if (p.length < vfio_user_write_multi.SIZE)
        return short('REGION_WRITE_MULTI reply', vfio_user_write_multi.SIZE, p.length);
      const wrCnt = getField(p, 0, vfio_user_write_multi.wr_cnt);
      return wrCnt === U64_UNSAFE
        ? u64Range('REGION_WRITE_MULTI reply', 'wr_cnt')
        : ok({ kind: 'regionWriteMultiReply', wrCnt });
    }
    case Command.DEVICE_FEATURE: {
      if (p.length < vfio_user_device_feature.SIZE)
        return short('DEVICE_FEATURE reply', vfio_user_device_feature.SIZE, p.length);
      return ok({
        kind: 'deviceFeatureReply',
        argsz: getField(p, 0, vfio_user_device_feature.argsz),
        flags: getField(p, 0, vfio_user_device_feature.flags),
        data: p.subarray(vfio_user_device_feature.SIZE),
      });
    }
    case Command.MIG_DATA_READ: {
      if (p.length < vfio_user_mig_data.SIZE) return short('MIG_DATA_READ reply', vfio_user_mig_data.SIZE, p.length);
      const size = getField(p, 0, vfio_user_mig_data.size);
      const data = p.subarray(vfio_user_mig_data.SIZE);
      if (data.length < size)
        return fail('PAYLOAD_MISMATCH', `MIG_DATA_READ reply size ${size} but ${data.length} data bytes`);
      return ok({ kind: 'migDataReadReply', argsz: getField(p, 0, vfio_user_mig_data.argsz), size, data });
    }
    case Command.MIG_DATA_WRITE:
      return p.length === 0
        ? ok({ kind: 'migDataWriteReply' })
        : fail('PAYLOAD_MISMATCH', 'MIG_DATA_WRITE reply must be header only');
    default:
      return fail('UNKNOWN_COMMAND', `command ${command} is not a vfio-user reply`);
  }
}

// ---- shared pieces ---------------------------------------------------------

function decodeVersionBody(p: Buffer): Decoded<{ major: number; minor: number; json: string | undefined }> {
  if (p.length < vfio_user_version.SIZE) return short('VERSION', vfio_user_version.SIZE, p.length);
  const major = getField(p, 0, vfio_user_version.major);
  const minor = getField(p, 0, vfio_user_version.minor);
  if (p.length === vfio_user_version.SIZE) return ok({ major, minor, json: undefined });
  const text = p.subarray(vfio_user_version.SIZE);
  if (text[text.length - 1] !== 0) return fail('BAD_JSON', 'VERSION JSON is not NUL-terminated');
  const nul = text.indexOf(0);
  if (nul !== text.length - 1) return fail('BAD_JSON', 'VERSION JSON has a NUL inside');
  return ok({ major, minor, json: text.toString('utf8', 0, nul) });
}

function decodeUnmapBody(
  p: Buffer,
  reply: boolean,
): Decoded<{
  argsz: number;
  flags: number;
  address: number;
  size: number;
  bitmap?: { pgsize: number; size: number; data: Buffer };
}> {
  const what = reply ? 'DMA_UNMAP reply' : 'DMA_UNMAP';
  if (p.length < vfio_user_dma_unmap.SIZE) return short(what, vfio_user_dma_unmap.SIZE, p.length);
  const r = new Fields(p);
  const argsz = r.get(vfio_user_dma_unmap.argsz, 'argsz');
  const flags = r.get(vfio_user_dma_unmap.flags, 'flags');
  const address = r.get(vfio_user_dma_unmap.addr, 'address');
  const size = r.get(vfio_user_dma_unmap.size, 'size');
  if (r.bad) return u64Range(what, r.bad);
  if (flags & DmaUnmapFlag.GET_DIRTY_BITMAP && p.length >= vfio_user_dma_unmap.SIZE + vfio_user_bitmap.SIZE) {
    const b = new Fields(p, vfio_user_dma_unmap.SIZE);
    const pgsize = b.get(vfio_user_bitmap.pgsize, 'bitmap.pgsize');
    const bsize = b.get(vfio_user_bitmap.size, 'bitmap.size');
    if (b.bad) return u64Range(what, b.bad);
    return ok({
      argsz,
      flags,
      address,
      size,
      bitmap: { pgsize, size: bsize, data: p.subarray(vfio_user_dma_unmap.SIZE + vfio_user_bitmap.SIZE) },
    });
  }
  if (p.length !== vfio_user_dma_unmap.SIZE)
    return fail('PAYLOAD_MISMATCH', `${what} has ${p.length - vfio_user_dma_unmap.SIZE} unexpected bytes`);
  return ok({ argsz, flags, address, size });
}

function decodeDeviceInfo(
  p: Buffer,
  what: string,
): Decoded<{ argsz: number; flags: number; numRegions: number; numIrqs: number }> {
  if (p.length < vfio_user_device_info.SIZE) return short(what, vfio_user_device_info.SIZE, p.length);
  return ok({
    argsz: getField(p, 0, vfio_user_device_info.argsz),
    flags: getField(p, 0, vfio_user_device_info.flags),
    numRegions: getField(p, 0, vfio_user_device_info.num_regions),
    numIrqs: getField(p, 0, vfio_user_device_info.num_irqs),
  });
}

/** vfio_irq_info and vfio_user_region_io_fds_request: argsz, flags, index, count. */
type IndexCountLayout = typeof vfio_irq_info | typeof vfio_user_region_io_fds_request;

function decodeIndexCount(
  p: Buffer,
  L: IndexCountLayout,
  what: string,
): Decoded<{ argsz: number; flags: number; index: number; count: number }> {
  if (p.length < L.SIZE) return short(what, L.SIZE, p.length);
  return ok({
    argsz: getField(p, 0, L.argsz),
    flags: getField(p, 0, L.flags),
    index: getField(p, 0, L.index),
    count: getField(p, 0, L.count),
  });
}

function decodeRegionInfoStruct(
  p: Buffer,
): Decoded<{ argsz: number; flags: number; index: number; capOffset: number; size: number; offset: number }> {
  if (p.length < vfio_region_info.SIZE) return short('DEVICE_GET_REGION_INFO', vfio_region_info.SIZE, p.length);
  const r = new Fields(p);
  const v = {
    argsz: r.get(vfio_region_info.argsz, 'argsz'),
    flags: r.get(vfio_region_info.flags, 'flags'),
    index: r.get(vfio_region_info.index, 'index'),
    capOffset: r.get(vfio_region_info.cap_offset, 'cap_offset'),
    size: r.get(vfio_region_info.size, 'size'),
    offset: r.get(vfio_region_info.offset, 'offset'),
  };
  return r.bad ? u64Range('DEVICE_GET_REGION_INFO', r.bad) : ok(v);
}

/** Largest capability chain we walk (a loop guard; real chains have one or two). */
const MAX_REGION_CAPS = 16;

function decodeRegionCaps(p: Buffer, flags: number, capOffset: number): Decoded<RegionCap[]> {
  const caps: RegionCap[] = [];
  if (!(flags & RegionInfoFlag.CAPS) || capOffset === 0) return ok(caps);
  let at = capOffset;
  while (at !== 0) {
    if (caps.length === MAX_REGION_CAPS) return fail('BAD_CAP_CHAIN', 'region-info capability chain is too long');
    if (at < vfio_region_info.SIZE || at + vfio_info_cap_header.SIZE > p.length)
      return fail('BAD_CAP_CHAIN', `capability at ${at} lies outside the reply`);
    const id = getField(p, at, vfio_info_cap_header.id);
    const version = getField(p, at, vfio_info_cap_header.version);
    const next = getField(p, at, vfio_info_cap_header.next);
    if (next !== 0 && next <= at) return fail('BAD_CAP_CHAIN', `capability at ${at} points back to ${next}`);
    const end = next !== 0 ? next : p.length;
    if (end > p.length) return fail('BAD_CAP_CHAIN', `capability at ${at} runs past the reply`);
    if (id === RegionCapId.SPARSE_MMAP) {
      if (at + vfio_region_info_cap_sparse_mmap.SIZE > end)
        return fail('BAD_CAP_CHAIN', 'sparse-mmap capability is truncated');
      const n = getField(p, at, vfio_region_info_cap_sparse_mmap.nr_areas);
      if (at + vfio_region_info_cap_sparse_mmap.SIZE + n * vfio_region_sparse_mmap_area.SIZE > end)
        return fail('BAD_CAP_CHAIN', `sparse-mmap capability claims ${n} areas`);
      const areas = [];
      for (let i = 0; i < n; i++) {
        const r = new Fields(p, at + vfio_region_info_cap_sparse_mmap.SIZE + i * vfio_region_sparse_mmap_area.SIZE);
        const area = {
          offset: r.get(vfio_region_sparse_mmap_area.offset, 'offset'),
          size: r.get(vfio_region_sparse_mmap_area.size, 'size'),
        };
        if (r.bad) return u64Range('sparse-mmap area', r.bad);
        areas.push(area);
      }
      caps.push({ id: RegionCapId.SPARSE_MMAP, version, areas });
    } else if (id === RegionCapId.TYPE && at + vfio_region_info_cap_type.SIZE <= end) {
      caps.push({
        id: RegionCapId.TYPE,
        version,
        type: getField(p, at, vfio_region_info_cap_type.type),
        subtype: getField(p, at, vfio_region_info_cap_type.subtype),
      });
    } else {
      caps.push({ id, version, raw: p.subarray(at + vfio_info_cap_header.SIZE, end) });
    }
    at = next;
  }
  return ok(caps);
}

function decodeRegionAccess(p: Buffer, what: string): Decoded<{ offset: number; region: number; count: number }> {
  if (p.length < vfio_user_region_access.SIZE) return short(what, vfio_user_region_access.SIZE, p.length);
  const offset = getField(p, 0, vfio_user_region_access.offset);
  if (offset === U64_UNSAFE) return u64Range(what, 'offset');
  return ok({
    offset,
    region: getField(p, 0, vfio_user_region_access.region),
    count: getField(p, 0, vfio_user_region_access.count),
  });
}

function decodeDmaAccess(p: Buffer, what: string): Decoded<{ address: number; count: number }> {
  if (p.length < vfio_user_dma_rw.SIZE) return short(what, vfio_user_dma_rw.SIZE, p.length);
  const r = new Fields(p);
  const v = { address: r.get(vfio_user_dma_rw.addr, 'address'), count: r.get(vfio_user_dma_rw.count, 'count') };
  return r.bad ? u64Range(what, r.bad) : ok(v);
}

function decodeWriteMulti(p: Buffer): Decoded<WriteMultiEntry[]> {
  if (p.length < vfio_user_write_multi.SIZE) return short('REGION_WRITE_MULTI', vfio_user_write_multi.SIZE, p.length);
  const n = getField(p, 0, vfio_user_write_multi.wr_cnt);
  if (n === U64_UNSAFE || n > MAX_WRITE_MULTI_ENTRIES)
    return fail('COUNT_TOO_LARGE', `REGION_WRITE_MULTI wr_cnt ${n} is above ${MAX_WRITE_MULTI_ENTRIES}`);
  if (p.length !== vfio_user_write_multi.SIZE + n * vfio_user_write_multi_data.SIZE)
    return fail('PAYLOAD_MISMATCH', `REGION_WRITE_MULTI wr_cnt ${n} but ${p.length} payload bytes`);
  const entries: WriteMultiEntry[] = [];
  for (let i = 0; i < n; i++) {
    const base = vfio_user_write_multi.SIZE + i * vfio_user_write_multi_data.SIZE;
    const offset = getField(p, base, vfio_user_write_multi_data.offset);
    if (offset === U64_UNSAFE) return u64Range('REGION_WRITE_MULTI', 'offset');
    const count = getField(p, base, vfio_user_write_multi_data.count);
    if (count > WRITE_MULTI_DATA_SIZE)
      return fail('COUNT_TOO_LARGE', `REGION_WRITE_MULTI entry ${i} count ${count} is above 8`);
    entries.push({
      offset,
      region: getField(p, base, vfio_user_write_multi_data.region),
      count,
      data: p.subarray(base + vfio_user_write_multi_data.data.off, base + vfio_user_write_multi_data.SIZE),
    });
  }
  return ok(entries);
}
