// The one way devices reach guest memory.
//
// Implemented by the DMA table (memory the client shared with DMA_MAP) and by
// BufferMemory (a plain Buffer standing in for guest RAM in unit tests and
// in-process targets). Every call is bounds checked and answers with an error
// code instead of throwing: guest addresses are untrusted.

/** Result of a guest-memory access. 0 is success. */
export const enum MemStatus {
  OK = 0,
  /** Some byte of the range is not inside any mapped region. */
  UNMAPPED = 1,
  /** The range is read-only for the device (DMA_MAP without WRITE). */
  READ_ONLY = 2,
  /** The range wraps past 2^64 or its length is negative or not an integer. */
  BAD_RANGE = 3,
  /** The range is known but was shared without an fd, so it is not reachable by mmap. */
  NO_FD = 4,
}

export interface GuestMemory {
  /**
   * A Buffer aliasing guest memory for [iova, iova + len) when the whole range lies
   * in one mapped window, else null (use read/write/slices, which span windows).
   * The view is only valid until the next DMA_UNMAP: never keep it across turns.
   */
  view(iova: number, len: number, write: boolean): Buffer | null;
  /** Copy guest bytes at `iova` into `dst`. */
  read(iova: number, dst: Buffer): MemStatus;
  /** Copy `src` into guest memory at `iova`. */
  write(iova: number, src: Buffer): MemStatus;
  /**
   * Append to `out` the views covering [iova, iova + len), in order; a range that
   * crosses windows or adjacent regions gives several. On error `out` is left as
   * it was on entry.
   */
  slices(iova: number, len: number, write: boolean, out: Buffer[]): MemStatus;
  /** Copy `len` bytes from guest `src` to guest `dst` directly (no bounce buffer). */
  copy(dst: number, src: number, len: number): MemStatus;
}

/** Human-readable name of a MemStatus, for logs. */
export function memStatusName(status: MemStatus): string {
  switch (status) {
    case MemStatus.OK:
      return 'ok';
    case MemStatus.UNMAPPED:
      return 'unmapped';
    case MemStatus.READ_ONLY:
      return 'read-only';
    case MemStatus.BAD_RANGE:
      return 'bad-range';
    case MemStatus.NO_FD:
      return 'no-fd';
    default:
      return `status-${status as number}`;
  }
}
