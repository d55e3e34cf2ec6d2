// Wire structures of vfio-user as named-offset tables, one per struct, named
// after the spec's C structs. Offsets are relative to the payload (the byte
// after the 16-byte header) except for vfio_user_header itself. All integers
// are little-endian. Handlers never use numeric offsets: they go through these.

import { le as f } from './field';
// The field codec (one for the whole project) lives in ./field; re-exported for the codec's users.
export { getField, setField, U64_UNSAFE } from './field';
export type { Field } from './field';

export const vfio_user_header = {
  msg_id: f(0, 2),
  command: f(2, 2),
  msg_size: f(4, 4),
  flags: f(8, 4),
  error: f(12, 4),
  SIZE: 16,
} as const;

export const vfio_user_version = {
  major: f(0, 2),
  minor: f(2, 2),
  /** JSON text with its NUL follows. */
  SIZE: 4,
} as const;

export const vfio_user_dma_map = {
  argsz: f(0, 4),
  flags: f(4, 4),
  offset: f(8, 8),
  addr: f(16, 8),
  size: f(24, 8),
  SIZE: 32,
} as const;

export const vfio_user_dma_unmap = {
  argsz: f(0, 4),
  flags: f(4, 4),
  addr: f(8, 8),
  size: f(16, 8),
  SIZE: 24,
} as const;

/** Follows vfio_user_dma_unmap when GET_DIRTY_BITMAP is set (legacy). */
export const vfio_user_bitmap = {
  pgsize: f(0, 8),
  size: f(8, 8),
  SIZE: 16,
} as const;

export const vfio_user_device_info = {
  argsz: f(0, 4),
  flags: f(4, 4),
  num_regions: f(8, 4),
  num_irqs: f(12, 4),
  SIZE: 16,
} as const;

export const vfio_region_info = {
  argsz: f(0, 4),
  flags: f(4, 4),
  index: f(8, 4),
  cap_offset: f(12, 4),
  size: f(16, 8),
  offset: f(24, 8),
  SIZE: 32,
} as const;

/** Header of every region-info capability; `next` counts from the start of vfio_region_info. */
export const vfio_info_cap_header = {
  id: f(0, 2),
  version: f(2, 2),
  next: f(4, 4),
  SIZE: 8,
} as const;

export const vfio_region_info_cap_sparse_mmap = {
  nr_areas: f(8, 4),
  reserved: f(12, 4),
  /** nr_areas × vfio_region_sparse_mmap_area follow. */
  SIZE: 16,
} as const;

export const vfio_region_sparse_mmap_area = {
  offset: f(0, 8),
  size: f(8, 8),
  SIZE: 16,
} as const;

export const vfio_region_info_cap_type = {
  type: f(8, 4),
  subtype: f(12, 4),
  SIZE: 16,
} as const;

export const vfio_user_region_io_fds_request = {
  argsz: f(0, 4),
  flags: f(4, 4),
  index: f(8, 4),
  count: f(12, 4),
  SIZE: 16,
} as const;

export const vfio_irq_info = {
  argsz: f(0, 4),
  flags: f(4, 4),
  index: f(8, 4),
  count: f(12, 4),
  SIZE: 16,
} as const;

export const vfio_irq_set = {
  argsz: f(0, 4),
  flags: f(4, 4),
  index: f(8, 4),
  start: f(12, 4),
  count: f(16, 4),
  /** DATA_BOOL: `count` bytes follow. */
  SIZE: 20,
} as const;

export const vfio_user_region_access = {
  offset: f(0, 8),
  region: f(8, 4),
  count: f(12, 4),
  /** data follows (REGION_WRITE request, REGION_READ reply). */
  SIZE: 16,
} as const;

/** Spec layout of DMA_READ/DMA_WRITE (QEMU differs: docs/vfio-user-protocol.md 6.1). */
export const vfio_user_dma_rw = {
  addr: f(0, 8),
  count: f(8, 8),
  SIZE: 16,
} as const;

/** Legacy DIRTY_PAGES (14) head; a bitmap range may follow. */
export const vfio_user_dirty_pages = {
  argsz: f(0, 4),
  flags: f(4, 4),
  SIZE: 8,
} as const;

export const vfio_user_write_multi = {
  wr_cnt: f(0, 8),
  SIZE: 8,
} as const;

export const vfio_user_write_multi_data = {
  offset: f(0, 8),
  region: f(8, 4),
  count: f(12, 4),
  data: f(16, 8),
  SIZE: 24,
} as const;

export const vfio_user_device_feature = {
  argsz: f(0, 4),
  flags: f(4, 4),
  /** feature data follows. */
  SIZE: 8,
} as const;

export const vfio_user_mig_data = {
  argsz: f(0, 4),
  size: f(4, 4),
  /** data follows. */
  SIZE: 8,
} as const;
