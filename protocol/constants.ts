// Numbers of the vfio-user wire protocol (QEMU's docs/interop/vfio-user.rst;
// docs/vfio-user-protocol.md sections 1 and 2). Values only: no behaviour here.

/** Command numbers (header field `command`). */
export const enum Command {
  VERSION = 1,
  DMA_MAP = 2,
  DMA_UNMAP = 3,
  DEVICE_GET_INFO = 4,
  DEVICE_GET_REGION_INFO = 5,
  DEVICE_GET_REGION_IO_FDS = 6,
  DEVICE_GET_IRQ_INFO = 7,
  DEVICE_SET_IRQS = 8,
  REGION_READ = 9,
  REGION_WRITE = 10,
  DMA_READ = 11,
  DMA_WRITE = 12,
  DEVICE_RESET = 13,
  /** Removed from the spec; never valid. */
  DIRTY_PAGES = 14,
  REGION_WRITE_MULTI = 15,
  DEVICE_FEATURE = 16,
  MIG_DATA_READ = 17,
  MIG_DATA_WRITE = 18,
}

const COMMAND_NAMES: readonly string[] = [
  '',
  'VERSION',
  'DMA_MAP',
  'DMA_UNMAP',
  'DEVICE_GET_INFO',
  'DEVICE_GET_REGION_INFO',
  'DEVICE_GET_REGION_IO_FDS',
  'DEVICE_GET_IRQ_INFO',
  'DEVICE_SET_IRQS',
  'REGION_READ',
  'REGION_WRITE',
  'DMA_READ',
  'DMA_WRITE',
  'DEVICE_RESET',
  'DIRTY_PAGES',
  'REGION_WRITE_MULTI',
  'DEVICE_FEATURE',
  'MIG_DATA_READ',
  'MIG_DATA_WRITE',
];

/** The name used in captures and logs: `DMA_MAP`, or `CMDnn` for unknown numbers. */
export function commandName(command: number): string {
  return command >= 1 && command < COMMAND_NAMES.length ? COMMAND_NAMES[command]! : `CMD${command}`;
}

/** Header `flags` bits. Bits 0-3 are the message type. */
export const enum HeaderFlag {
  TYPE_MASK = 0xf,
  TYPE_COMMAND = 0x0,
  TYPE_REPLY = 0x1,
  NO_REPLY = 0x10,
  ERROR = 0x20,
}

/** DMA_MAP flags. */
export const enum DmaMapFlag {
  READ = 0x1,
  WRITE = 0x2,
  /** libvfio-user-only extensions (2026); QEMU never sends them. */
  MMAP = 0x4,
  FILE_IO = 0x8,
}

/** DMA_UNMAP flags. */
export const enum DmaUnmapFlag {
  GET_DIRTY_BITMAP = 0x1,
  ALL = 0x2,
}

/** DEVICE_GET_INFO flags. */
export const enum DeviceInfoFlag {
  RESET = 0x1,
  PCI = 0x2,
}

/** DEVICE_GET_REGION_INFO flags. */
export const enum RegionInfoFlag {
  READ = 0x1,
  WRITE = 0x2,
  MMAP = 0x4,
  CAPS = 0x8,
}

/** Region-info capability ids (linux/vfio.h). */
export const enum RegionCapId {
  SPARSE_MMAP = 1,
  TYPE = 2,
  MSIX_MAPPABLE = 3,
}

/** DEVICE_GET_IRQ_INFO flags. */
export const enum IrqInfoFlag {
  EVENTFD = 0x1,
  MASKABLE = 0x2,
  AUTOMASKED = 0x4,
  NORESIZE = 0x8,
}

/** DEVICE_SET_IRQS flags: exactly one DATA_* and one ACTION_*. */
export const enum SetIrqsFlag {
  DATA_NONE = 0x1,
  DATA_BOOL = 0x2,
  DATA_EVENTFD = 0x4,
  DATA_MASK = 0x7,
  ACTION_MASK = 0x8,
  ACTION_UNMASK = 0x10,
  ACTION_TRIGGER = 0x20,
  ACTION_MASK_ALL = 0x38,
}

/** DEVICE_FEATURE flags: feature index in bits 0-15 plus operation bits. */
export const enum DeviceFeatureFlag {
  FEATURE_MASK = 0xffff,
  GET = 1 << 16,
  SET = 1 << 17,
  PROBE = 1 << 18,
}

/** errno values used in error replies (Linux numbering). */
export const enum Errno {
  EPERM = 1,
  ENOENT = 2,
  EIO = 5,
  E2BIG = 7,
  EBADF = 9,
  EAGAIN = 11,
  ENOMEM = 12,
  EFAULT = 14,
  EBUSY = 16,
  EEXIST = 17,
  EINVAL = 22,
  ENOSPC = 28,
  ERANGE = 34,
  ENOSYS = 38,
  EPROTO = 71,
  EOVERFLOW = 75,
  EMSGSIZE = 90,
  ENOTSUP = 95,
}

const ERRNO_NAMES: Readonly<Record<number, string>> = {
  1: 'EPERM',
  2: 'ENOENT',
  5: 'EIO',
  7: 'E2BIG',
  9: 'EBADF',
  11: 'EAGAIN',
  12: 'ENOMEM',
  14: 'EFAULT',
  16: 'EBUSY',
  17: 'EEXIST',
  22: 'EINVAL',
  28: 'ENOSPC',
  34: 'ERANGE',
  38: 'ENOSYS',
  71: 'EPROTO',
  75: 'EOVERFLOW',
  90: 'EMSGSIZE',
  95: 'ENOTSUP',
};

export function errnoName(errno: number): string {
  return ERRNO_NAMES[errno] ?? `E${errno}`;
}
