// The case table of spec/protocol/codec.spec.ts: every vfio-user command and
// reply as header, typed body and the bytes docs/vfio-user-protocol.md (sections
// 1, 2 and 4) gives for it, built with the test-only builder.

import type { Body, Header } from '../../protocol';
import { Bytes, msg } from '../support/bytes';
import { CMD, FLAG_COMMAND, FLAG_ERROR_REPLY, FLAG_NO_REPLY, FLAG_REPLY, SAFE_MAX } from './codec-helpers';
import {
  dmaAccess,
  dmaMapPayload,
  dmaUnmapPayload,
  multiEntry,
  QEMU_VERSION_JSON,
  regionAccess,
  regionInfo,
  SPARSE_AREAS,
  sparseCap,
  typeCap,
} from './codec-payloads';

type Head = Omit<Header, 'size'>;

interface Case {
  readonly name: string;
  readonly header: Head;
  readonly body: Body;
  readonly bytes: Buffer;
}

function head(id: number, command: number, flags: number, error = 0): Head {
  return { id, command, flags, error };
}

const SERVER_VERSION_JSON = '{"capabilities":{"max_msg_fds":8,"max_data_xfer_size":1048576}}';

const SPARSE_BODY = {
  id: 1,
  version: 1,
  areas: [
    { offset: 0x0, size: 0x1000 },
    { offset: 0x2000, size: 0x1000 },
  ],
} as const;

// 40-byte ioeventfd entry of docs/vfio-user-protocol.md 2.6: offset, size, fd_index, type, flags (DATAMATCH), padding, datamatch.
const IOEVENTFD_ENTRY = new Bytes().u64(0x100).u64(4).u32(0).u32(0).u32(1).u32(0).u64(0xabcd).build();

export const CASES: Case[] = [
  // 2.1 VERSION
  {
    name: 'VERSION request as QEMU sends it (v0.0, JSON + NUL)',
    header: head(0, CMD.VERSION, FLAG_COMMAND),
    body: { kind: 'version', major: 0, minor: 0, json: QEMU_VERSION_JSON },
    bytes: msg(0, 1, 0x0, new Bytes().u16(0).u16(0).text(QEMU_VERSION_JSON).u8(0).build()),
  },
  {
    name: 'VERSION request without JSON (v0.2)',
    header: head(7, CMD.VERSION, FLAG_COMMAND),
    body: { kind: 'version', major: 0, minor: 2, json: undefined },
    bytes: Buffer.from('0700' + '0100' + '14000000' + '00000000' + '00000000' + '0000' + '0200', 'hex'),
  },
  {
    name: 'VERSION reply whose JSON holds non-ASCII text (UTF-8 on the wire)',
    header: head(1, CMD.VERSION, FLAG_REPLY),
    body: { kind: 'versionReply', major: 0, minor: 0, json: '{"vendor":"caf\u00e9 \u2713"}' },
    // é = c3 a9, ✓ = e2 9c 93
    bytes: msg(
      1,
      1,
      0x1,
      new Bytes()
        .u16(0)
        .u16(0)
        .text('{"vendor":"caf')
        .raw([0xc3, 0xa9, 0x20, 0xe2, 0x9c, 0x93])
        .text('"}')
        .u8(0)
        .build(),
    ),
  },
  {
    name: 'VERSION reply with a short server JSON',
    header: head(0, CMD.VERSION, FLAG_REPLY),
    body: { kind: 'versionReply', major: 0, minor: 0, json: SERVER_VERSION_JSON },
    bytes: msg(0, 1, 0x1, new Bytes().u16(0).u16(0).text(SERVER_VERSION_JSON).u8(0).build()),
  },
  // 2.2 DMA_MAP
  {
    name: 'DMA_MAP request (READ|WRITE, fd offset, IOVA above 4 GiB)',
    header: head(0x1234, CMD.DMA_MAP, FLAG_COMMAND),
    body: { kind: 'dmaMap', argsz: 32, flags: 0x3, offset: 0x8000_0000, address: 0x1_0000_0000, size: 0x4000_0000 },
    bytes: msg(0x1234, 2, 0, dmaMapPayload(32, 0x3, 0x8000_0000, 0x1_0000_0000, 0x4000_0000)),
  },
  {
    name: 'DMA_MAP request with u64 fields at 2^53-1',
    header: head(2, CMD.DMA_MAP, FLAG_COMMAND),
    body: { kind: 'dmaMap', argsz: 32, flags: 0x1, offset: SAFE_MAX, address: SAFE_MAX, size: SAFE_MAX },
    bytes: msg(2, 2, 0, dmaMapPayload(32, 0x1, SAFE_MAX, SAFE_MAX, SAFE_MAX)),
  },
  {
    name: 'DMA_MAP reply (header only)',
    header: head(0x1234, CMD.DMA_MAP, FLAG_REPLY),
    body: { kind: 'dmaMapReply' },
    bytes: Buffer.from('3412' + '0200' + '10000000' + '01000000' + '00000000', 'hex'),
  },
  // 2.3 DMA_UNMAP
  {
    name: 'DMA_UNMAP request',
    header: head(3, CMD.DMA_UNMAP, FLAG_COMMAND),
    body: { kind: 'dmaUnmap', argsz: 24, flags: 0, address: 0xc0000, size: 0x40000 },
    bytes: msg(3, 3, 0, dmaUnmapPayload(24, 0, 0xc0000, 0x40000).build()),
  },
  {
    name: 'DMA_UNMAP reply (echoes the 24-byte struct, msg_size 40)',
    header: head(3, CMD.DMA_UNMAP, FLAG_REPLY),
    body: { kind: 'dmaUnmapReply', argsz: 24, flags: 0, address: 0xc0000, size: 0x40000 },
    bytes: msg(3, 3, 1, dmaUnmapPayload(24, 0, 0xc0000, 0x40000).build()),
  },
  {
    name: 'DMA_UNMAP request with UNMAP_ALL (address = size = 0)',
    header: head(4, CMD.DMA_UNMAP, FLAG_COMMAND),
    body: { kind: 'dmaUnmap', argsz: 24, flags: 0x2, address: 0, size: 0 },
    bytes: Buffer.from(
      '0400' +
        '0300' +
        '28000000' +
        '00000000' +
        '00000000' +
        '18000000' +
        '02000000' +
        '0000000000000000' +
        '0000000000000000',
      'hex',
    ),
  },
  {
    name: 'DMA_UNMAP request with GET_DIRTY_BITMAP (bitmap struct, no data)',
    header: head(5, CMD.DMA_UNMAP, FLAG_COMMAND),
    body: {
      kind: 'dmaUnmap',
      argsz: 48,
      flags: 0x1,
      address: 0x10000,
      size: 0x10000,
      bitmap: { pgsize: 4096, size: 8, data: Buffer.alloc(0) },
    },
    bytes: msg(5, 3, 0, dmaUnmapPayload(48, 0x1, 0x10000, 0x10000).u64(4096).u64(8).build()),
  },
  {
    name: 'DMA_UNMAP reply with GET_DIRTY_BITMAP (bitmap struct + 8 bitmap bytes)',
    header: head(5, CMD.DMA_UNMAP, FLAG_REPLY),
    body: {
      kind: 'dmaUnmapReply',
      argsz: 48,
      flags: 0x1,
      address: 0x10000,
      size: 0x10000,
      bitmap: { pgsize: 4096, size: 8, data: Buffer.from([0x05, 0x80, 0, 0, 0, 0, 0, 0]) },
    },
    bytes: msg(
      5,
      3,
      1,
      dmaUnmapPayload(48, 0x1, 0x10000, 0x10000).u64(4096).u64(8).raw([0x05, 0x80, 0, 0, 0, 0, 0, 0]).build(),
    ),
  },
  // 2.4 DEVICE_GET_INFO
  {
    name: 'DEVICE_GET_INFO request',
    header: head(6, CMD.DEVICE_GET_INFO, FLAG_COMMAND),
    body: { kind: 'deviceGetInfo', argsz: 16, flags: 0, numRegions: 0, numIrqs: 0 },
    bytes: msg(6, 4, 0, new Bytes().u32(16).u32(0).u32(0).u32(0).build()),
  },
  {
    name: 'DEVICE_GET_INFO reply (PCI|RESET, 9 regions, 5 irqs)',
    header: head(6, CMD.DEVICE_GET_INFO, FLAG_REPLY),
    body: { kind: 'deviceGetInfoReply', argsz: 16, flags: 0x3, numRegions: 9, numIrqs: 5 },
    bytes: Buffer.from(
      '0600' + '0400' + '20000000' + '01000000' + '00000000' + '10000000' + '03000000' + '09000000' + '05000000',
      'hex',
    ),
  },
  // 2.5 DEVICE_GET_REGION_INFO
  {
    name: 'DEVICE_GET_REGION_INFO request (argsz 32, index 1)',
    header: head(8, CMD.DEVICE_GET_REGION_INFO, FLAG_COMMAND),
    body: { kind: 'deviceGetRegionInfo', argsz: 32, flags: 0, index: 1, capOffset: 0, size: 0, offset: 0 },
    bytes: msg(8, 5, 0, regionInfo(32, 0, 1, 0, 0, 0).build()),
  },
  {
    name: 'DEVICE_GET_REGION_INFO request padded to argsz (trailing bytes kept)',
    header: head(9, CMD.DEVICE_GET_REGION_INFO, FLAG_COMMAND),
    body: {
      kind: 'deviceGetRegionInfo',
      argsz: 80,
      flags: 0,
      index: 1,
      capOffset: 0,
      size: 0,
      offset: 0,
      trailing: Buffer.alloc(48),
    },
    bytes: msg(9, 5, 0, regionInfo(80, 0, 1, 0, 0, 0).zeros(48).build()),
  },
  {
    name: 'DEVICE_GET_REGION_INFO reply without caps (client argsz too small: argsz 80 needed, CAPS clear, cap_offset 0)',
    header: head(8, CMD.DEVICE_GET_REGION_INFO, FLAG_REPLY),
    body: {
      kind: 'deviceGetRegionInfoReply',
      argsz: 80,
      flags: 0x7,
      index: 1,
      capOffset: 0,
      size: 0x3000,
      offset: 0,
      caps: [],
    },
    bytes: msg(8, 5, 1, regionInfo(80, 0x7, 1, 0, 0x3000, 0).build()),
  },
  {
    name: 'DEVICE_GET_REGION_INFO reply with a SPARSE_MMAP cap of 2 areas',
    header: head(9, CMD.DEVICE_GET_REGION_INFO, FLAG_REPLY),
    body: {
      kind: 'deviceGetRegionInfoReply',
      argsz: 80,
      flags: 0xf,
      index: 1,
      capOffset: 32,
      size: 0x3000,
      offset: 0,
      caps: [SPARSE_BODY],
    },
    bytes: msg(9, 5, 1, sparseCap(regionInfo(80, 0xf, 1, 32, 0x3000, 0), 0, SPARSE_AREAS).build()),
  },
  {
    name: 'DEVICE_GET_REGION_INFO reply with SPARSE_MMAP then a chained TYPE cap',
    header: head(10, CMD.DEVICE_GET_REGION_INFO, FLAG_REPLY),
    body: {
      kind: 'deviceGetRegionInfoReply',
      argsz: 96,
      flags: 0xf,
      index: 9,
      capOffset: 32,
      size: 0x3000,
      offset: 0x10000,
      caps: [SPARSE_BODY, { id: 2, version: 1, type: 0x8086, subtype: 3 }],
    },
    // sparse cap at 32 (48 bytes) -> next = 80; TYPE cap at 80 (16 bytes), next 0; argsz 96.
    bytes: msg(
      10,
      5,
      1,
      typeCap(sparseCap(regionInfo(96, 0xf, 9, 32, 0x3000, 0x10000), 80, SPARSE_AREAS), 0, 0x8086, 3).build(),
    ),
  },
  // 2.6 DEVICE_GET_REGION_IO_FDS
  {
    name: 'DEVICE_GET_REGION_IO_FDS request',
    header: head(11, CMD.DEVICE_GET_REGION_IO_FDS, FLAG_COMMAND),
    body: { kind: 'deviceGetRegionIoFds', argsz: 56, flags: 0, index: 0, count: 0 },
    bytes: msg(11, 6, 0, new Bytes().u32(56).u32(0).u32(0).u32(0).build()),
  },
  {
    name: 'DEVICE_GET_REGION_IO_FDS reply with one 40-byte ioeventfd entry',
    header: head(11, CMD.DEVICE_GET_REGION_IO_FDS, FLAG_REPLY),
    body: { kind: 'deviceGetRegionIoFdsReply', argsz: 56, flags: 0, index: 0, count: 1, entries: IOEVENTFD_ENTRY },
    bytes: msg(11, 6, 1, new Bytes().u32(56).u32(0).u32(0).u32(1).raw(IOEVENTFD_ENTRY).build()),
  },
  // 2.7 DEVICE_GET_IRQ_INFO
  {
    name: 'DEVICE_GET_IRQ_INFO request (MSIX)',
    header: head(12, CMD.DEVICE_GET_IRQ_INFO, FLAG_COMMAND),
    body: { kind: 'deviceGetIrqInfo', argsz: 16, flags: 0, index: 2, count: 0 },
    bytes: msg(12, 7, 0, new Bytes().u32(16).u32(0).u32(2).u32(0).build()),
  },
  {
    name: 'DEVICE_GET_IRQ_INFO reply (EVENTFD|NORESIZE, 8 vectors)',
    header: head(12, CMD.DEVICE_GET_IRQ_INFO, FLAG_REPLY),
    body: { kind: 'deviceGetIrqInfoReply', argsz: 16, flags: 0x9, index: 2, count: 8 },
    bytes: msg(12, 7, 1, new Bytes().u32(16).u32(0x9).u32(2).u32(8).build()),
  },
  // 2.8 DEVICE_SET_IRQS
  {
    name: 'DEVICE_SET_IRQS request, TRIGGER|DATA_BOOL with 3 bool bytes (argsz 23)',
    header: head(13, CMD.DEVICE_SET_IRQS, FLAG_COMMAND),
    body: { kind: 'deviceSetIrqs', argsz: 23, flags: 0x22, index: 2, start: 1, count: 3, data: Buffer.from([1, 0, 1]) },
    bytes: msg(13, 8, 0, new Bytes().u32(23).u32(0x22).u32(2).u32(1).u32(3).raw([1, 0, 1]).build()),
  },
  {
    name: 'DEVICE_SET_IRQS request, TRIGGER|EVENTFD as QEMU sends it (argsz 20, msg_size 36, no data)',
    header: head(14, CMD.DEVICE_SET_IRQS, FLAG_COMMAND),
    body: { kind: 'deviceSetIrqs', argsz: 20, flags: 0x24, index: 0, start: 0, count: 1, data: Buffer.alloc(0) },
    bytes: Buffer.from(
      '0e00' +
        '0800' +
        '24000000' +
        '00000000' +
        '00000000' +
        '14000000' +
        '24000000' +
        '00000000' +
        '00000000' +
        '01000000',
      'hex',
    ),
  },
  {
    name: 'DEVICE_SET_IRQS reply (header only)',
    header: head(14, CMD.DEVICE_SET_IRQS, FLAG_REPLY),
    body: { kind: 'deviceSetIrqsReply' },
    bytes: msg(14, 8, 1),
  },
  // 2.9 REGION_READ / REGION_WRITE
  {
    name: 'REGION_READ request (config space, 4 bytes @0x10)',
    header: head(15, CMD.REGION_READ, FLAG_COMMAND),
    body: { kind: 'regionRead', offset: 0x10, region: 7, count: 4 },
    bytes: msg(15, 9, 0, regionAccess(0x10, 7, 4)),
  },
  {
    name: 'REGION_READ reply with 4 data bytes',
    header: head(15, CMD.REGION_READ, FLAG_REPLY),
    body: { kind: 'regionReadReply', offset: 0x10, region: 7, count: 4, data: Buffer.from([0x0c, 0x00, 0x00, 0xfe]) },
    bytes: msg(15, 9, 1, regionAccess(0x10, 7, 4, [0x0c, 0x00, 0x00, 0xfe])),
  },
  {
    name: 'REGION_WRITE request (posted, NO_REPLY, 8 bytes to BAR0 above 4 GiB)',
    header: head(16, CMD.REGION_WRITE, FLAG_NO_REPLY),
    body: {
      kind: 'regionWrite',
      offset: 0x1_0000_0008,
      region: 0,
      count: 8,
      data: Buffer.from([1, 2, 3, 4, 5, 6, 7, 8]),
    },
    bytes: msg(16, 10, 0x10, regionAccess(0x1_0000_0008, 0, 8, [1, 2, 3, 4, 5, 6, 7, 8])),
  },
  {
    name: 'REGION_WRITE reply (16 bytes, no data)',
    header: head(17, CMD.REGION_WRITE, FLAG_REPLY),
    body: { kind: 'regionWriteReply', offset: 0x4, region: 7, count: 2 },
    bytes: Buffer.from(
      '1100' + '0a00' + '20000000' + '01000000' + '00000000' + '0400000000000000' + '07000000' + '02000000',
      'hex',
    ),
  },
  // 2.10 DMA_READ / DMA_WRITE (server to client, spec layout)
  {
    name: 'DMA_READ request (server to client)',
    header: head(18, CMD.DMA_READ, FLAG_COMMAND),
    body: { kind: 'dmaRead', address: 0x1000_0000, count: 8 },
    bytes: msg(18, 11, 0, dmaAccess(0x1000_0000, 8)),
  },
  {
    name: 'DMA_READ reply (client to server, data @16)',
    header: head(18, CMD.DMA_READ, FLAG_REPLY),
    body: { kind: 'dmaReadReply', address: 0x1000_0000, count: 8, data: Buffer.from([9, 8, 7, 6, 5, 4, 3, 2]) },
    bytes: msg(18, 11, 1, dmaAccess(0x1000_0000, 8, [9, 8, 7, 6, 5, 4, 3, 2])),
  },
  {
    name: 'DMA_WRITE request (server to client, data @16)',
    header: head(19, CMD.DMA_WRITE, FLAG_COMMAND),
    body: { kind: 'dmaWrite', address: 0x2_0000_0000, count: 4, data: Buffer.from([0xde, 0xad, 0xbe, 0xef]) },
    bytes: msg(19, 12, 0, dmaAccess(0x2_0000_0000, 4, [0xde, 0xad, 0xbe, 0xef])),
  },
  {
    name: 'DMA_WRITE reply (address + u64 count, 16 bytes)',
    header: head(19, CMD.DMA_WRITE, FLAG_REPLY),
    body: { kind: 'dmaWriteReply', address: 0x2_0000_0000, count: 4 },
    bytes: msg(19, 12, 1, dmaAccess(0x2_0000_0000, 4)),
  },
  // 2.11 DEVICE_RESET
  {
    name: 'DEVICE_RESET request (msg_size 16)',
    header: head(20, CMD.DEVICE_RESET, FLAG_COMMAND),
    body: { kind: 'deviceReset' },
    bytes: Buffer.from('1400' + '0d00' + '10000000' + '00000000' + '00000000', 'hex'),
  },
  {
    name: 'DEVICE_RESET reply (header only)',
    header: head(20, CMD.DEVICE_RESET, FLAG_REPLY),
    body: { kind: 'deviceResetReply' },
    bytes: Buffer.from('1400' + '0d00' + '10000000' + '01000000' + '00000000', 'hex'),
  },
  // legacy 14 DIRTY_PAGES: argsz, flags, then (GET_BITMAP) iova, size, pgsize, bitmap size; the reply adds the bitmap
  {
    name: 'DIRTY_PAGES request (legacy, GET_BITMAP with its range)',
    header: head(24, CMD.DIRTY_PAGES, FLAG_COMMAND),
    body: {
      kind: 'dirtyPages',
      argsz: 48,
      flags: 4,
      data: new Bytes().u64(0x100000).u64(0x2000).u64(4096).u64(8).build(),
    },
    bytes: msg(24, 14, 0, new Bytes().u32(48).u32(4).u64(0x100000).u64(0x2000).u64(4096).u64(8).build()),
  },
  {
    name: 'DIRTY_PAGES reply (legacy, with the bitmap)',
    header: head(24, CMD.DIRTY_PAGES, FLAG_REPLY),
    body: {
      kind: 'dirtyPagesReply',
      argsz: 48,
      flags: 4,
      data: new Bytes().u64(0x100000).u64(0x2000).u64(4096).u64(8).u64(3).build(),
    },
    bytes: msg(24, 14, 1, new Bytes().u32(48).u32(4).u64(0x100000).u64(0x2000).u64(4096).u64(8).u64(3).build()),
  },
  // 2.12 REGION_WRITE_MULTI
  {
    name: 'REGION_WRITE_MULTI request with 2 entries (NO_REPLY, msg_size 24 + 24*2)',
    header: head(21, CMD.REGION_WRITE_MULTI, FLAG_NO_REPLY),
    body: {
      kind: 'regionWriteMulti',
      entries: [
        { offset: 0x100, region: 0, count: 4, data: Buffer.from([0x11, 0x22, 0x33, 0x44, 0, 0, 0, 0]) },
        { offset: 0x108, region: 2, count: 8, data: Buffer.from([1, 2, 3, 4, 5, 6, 7, 8]) },
      ],
    },
    bytes: msg(
      21,
      15,
      0x10,
      multiEntry(
        multiEntry(new Bytes().u64(2), 0x100, 0, 4, [0x11, 0x22, 0x33, 0x44, 0, 0, 0, 0]),
        0x108,
        2,
        8,
        [1, 2, 3, 4, 5, 6, 7, 8],
      ).build(),
    ),
  },
  {
    name: 'REGION_WRITE_MULTI reply (wr_cnt u64)',
    header: head(21, CMD.REGION_WRITE_MULTI, FLAG_REPLY),
    body: { kind: 'regionWriteMultiReply', wrCnt: 2 },
    bytes: msg(21, 15, 1, new Bytes().u64(2).build()),
  },
  // 2.13 DEVICE_FEATURE
  {
    name: 'DEVICE_FEATURE request: PROBE|GET MIGRATION (flags 0x50001)',
    header: head(22, CMD.DEVICE_FEATURE, FLAG_COMMAND),
    body: { kind: 'deviceFeature', argsz: 16, flags: 0x50001, data: Buffer.alloc(8) },
    bytes: msg(
      22,
      16,
      0,
      new Bytes()
        .u32(16)
        .u32((1 << 18) | (1 << 16) | 1)
        .u64(0)
        .build(),
    ),
  },
  {
    name: 'DEVICE_FEATURE reply: GET MIGRATION = STOP_COPY|PRE_COPY',
    header: head(23, CMD.DEVICE_FEATURE, FLAG_REPLY),
    body: { kind: 'deviceFeatureReply', argsz: 16, flags: 0x10001, data: Buffer.from([5, 0, 0, 0, 0, 0, 0, 0]) },
    bytes: msg(
      23,
      16,
      1,
      new Bytes()
        .u32(16)
        .u32((1 << 16) | 1)
        .u64(5)
        .build(),
    ),
  },
  {
    name: 'DEVICE_FEATURE request: SET MIG_DEVICE_STATE = PRE_COPY',
    header: head(24, CMD.DEVICE_FEATURE, FLAG_COMMAND),
    body: { kind: 'deviceFeature', argsz: 16, flags: 0x20002, data: Buffer.from([6, 0, 0, 0, 0, 0, 0, 0]) },
    bytes: msg(
      24,
      16,
      0,
      new Bytes()
        .u32(16)
        .u32((1 << 17) | 2)
        .u32(6)
        .u32(0)
        .build(),
    ),
  },
  {
    name: 'DEVICE_FEATURE reply: DMA_LOGGING_START echo (24 bytes)',
    header: head(25, CMD.DEVICE_FEATURE, FLAG_REPLY),
    body: { kind: 'deviceFeatureReply', argsz: 24, flags: 0x20006, data: new Bytes().u64(4096).u32(0).u32(0).build() },
    bytes: msg(
      25,
      16,
      1,
      new Bytes()
        .u32(24)
        .u32((1 << 17) | 6)
        .u64(4096)
        .u32(0)
        .u32(0)
        .build(),
    ),
  },
  // 2.14 MIG_DATA_READ / MIG_DATA_WRITE
  {
    name: 'MIG_DATA_READ request (argsz 16, size 8)',
    header: head(26, CMD.MIG_DATA_READ, FLAG_COMMAND),
    body: { kind: 'migDataRead', argsz: 16, size: 8 },
    bytes: msg(26, 17, 0, new Bytes().u32(16).u32(8).build()),
  },
  {
    name: 'MIG_DATA_READ reply (size 8, data @8)',
    header: head(26, CMD.MIG_DATA_READ, FLAG_REPLY),
    body: { kind: 'migDataReadReply', argsz: 16, size: 8, data: Buffer.from('0123456789abcdef', 'hex') },
    bytes: msg(26, 17, 1, new Bytes().u32(16).u32(8).raw(Buffer.from('0123456789abcdef', 'hex')).build()),
  },
  {
    name: 'MIG_DATA_READ reply at end of stream (size 3, zero padded to the requested 8 as libvfio-user does)',
    header: head(27, CMD.MIG_DATA_READ, FLAG_REPLY),
    body: { kind: 'migDataReadReply', argsz: 16, size: 3, data: Buffer.from([0xaa, 0xbb, 0xcc, 0, 0, 0, 0, 0]) },
    bytes: msg(27, 17, 1, new Bytes().u32(16).u32(3).raw([0xaa, 0xbb, 0xcc]).zeros(5).build()),
  },
  {
    name: 'MIG_DATA_WRITE request (size 4, data @8)',
    header: head(28, CMD.MIG_DATA_WRITE, FLAG_COMMAND),
    body: { kind: 'migDataWrite', argsz: 12, size: 4, data: Buffer.from([4, 3, 2, 1]) },
    bytes: msg(28, 18, 0, new Bytes().u32(12).u32(4).raw([4, 3, 2, 1]).build()),
  },
  {
    name: 'MIG_DATA_WRITE reply (header only)',
    header: head(28, CMD.MIG_DATA_WRITE, FLAG_REPLY),
    body: { kind: 'migDataWriteReply' },
    bytes: msg(28, 18, 1),
  },
  // 1.2 error replies
  {
    name: 'error reply to REGION_READ (flags 0x21, EINVAL)',
    header: head(29, CMD.REGION_READ, FLAG_ERROR_REPLY, 22),
    body: { kind: 'error', errno: 22 },
    bytes: Buffer.from('1d00' + '0900' + '10000000' + '21000000' + '16000000', 'hex'),
  },
  {
    name: 'error reply to DEVICE_FEATURE (ENOTTY 25)',
    header: head(30, CMD.DEVICE_FEATURE, FLAG_ERROR_REPLY, 25),
    body: { kind: 'error', errno: 25 },
    bytes: msg(30, 16, 0x21, Buffer.alloc(0), 25),
  },
  {
    name: 'error reply with errno 0 (allowed by the spec)',
    header: head(31, CMD.DMA_MAP, FLAG_ERROR_REPLY, 0),
    body: { kind: 'error', errno: 0 },
    bytes: msg(31, 2, 0x21),
  },
];
