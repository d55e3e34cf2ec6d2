// vfio-user payloads built straight from the offset
// tables of docs/vfio-user-protocol.md with the test-only builder (spec/support/bytes.ts), never with the
// codec under test; shared by the codec specs and their case table.

import { expect } from 'chai';
import { Bytes } from '../support/bytes';

export const QEMU_VERSION_JSON =
  '{"capabilities": {"pgsizes": 4096, "max_msg_fds": 16, "max_dma_maps": 65535, "max_data_xfer_size": 1048576, ' +
  '"migration": {"max_bitmap_size": 268435456, "pgsize": 4096}, "write_multiple": true}}';

/** 2.2 DMA_MAP request: argsz @0, flags @4, offset @8, address @16, size @24. */
export function dmaMapPayload(
  argsz: number,
  flags: number,
  offset: number | bigint,
  address: number | bigint,
  size: number | bigint,
): Buffer {
  return new Bytes().u32(argsz).u32(flags).u64(offset).u64(address).u64(size).build();
}

/** 2.3 DMA_UNMAP: argsz @0, flags @4, address @8, size @16. */
export function dmaUnmapPayload(argsz: number, flags: number, address: number | bigint, size: number | bigint): Bytes {
  return new Bytes().u32(argsz).u32(flags).u64(address).u64(size);
}

/** 2.5 region info: argsz @0, flags @4, index @8, cap_offset @12, size @16, offset @24. */
export function regionInfo(
  argsz: number,
  flags: number,
  index: number,
  capOffset: number,
  size: number | bigint,
  offset: number | bigint,
): Bytes {
  return new Bytes().u32(argsz).u32(flags).u32(index).u32(capOffset).u64(size).u64(offset);
}

/** 2.5 SPARSE_MMAP capability: id 1, version 1, next; nr_areas @+8, reserved @+12, areas @+16. */
export function sparseCap(
  b: Bytes,
  next: number,
  areas: ReadonlyArray<readonly [number, number]>,
  nrAreas = areas.length,
): Bytes {
  b.u16(1).u16(1).u32(next).u32(nrAreas).u32(0);
  for (const [off, size] of areas) b.u64(off).u64(size);
  return b;
}

/** 2.5 TYPE capability (linux/vfio.h): id 2, version 1, next; type @+8, subtype @+12. */
export function typeCap(b: Bytes, next: number, type: number, subtype: number): Bytes {
  return b.u16(2).u16(1).u32(next).u32(type).u32(subtype);
}

/** 2.9 region access: offset u64 @0, region u32 @8, count u32 @12, data @16. */
export function regionAccess(
  offset: number | bigint,
  region: number,
  count: number,
  data: readonly number[] = [],
): Buffer {
  return new Bytes().u64(offset).u32(region).u32(count).raw(data).build();
}

/** 2.10 DMA access (spec layout): address u64 @0, count u64 @8, data @16. */
export function dmaAccess(address: number | bigint, count: number | bigint, data: readonly number[] = []): Buffer {
  return new Bytes().u64(address).u64(count).raw(data).build();
}

/** 2.12 REGION_WRITE_MULTI entry: offset u64 @0, region u32 @8, count u32 @12, data[8] @16. */
export function multiEntry(b: Bytes, offset: number, region: number, count: number, data8: readonly number[]): Bytes {
  expect(data8.length).to.equal(8);
  return b.u64(offset).u32(region).u32(count).raw(data8);
}

export const SPARSE_AREAS: ReadonlyArray<readonly [number, number]> = [
  [0x0, 0x1000],
  [0x2000, 0x1000],
];
