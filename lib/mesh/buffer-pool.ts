// Reusable buffers for large mesh frames. A 1 MiB RDMA WRITE used to cost a
// fresh 1 MiB buffer on each side (the sender's frame, the receiver's
// assembled body): V8 counts such buffers as external memory and ran a full
// collection every few dozen frames, and each fresh buffer page-faulted in.
// Frames of MIN_POOLED bytes or more now come from here and go back when
// the frame has been written (sender) or the message released (receiver).
//
// Slabs are sized in MIN_POOLED steps, allocated once (allocUnsafeSlow: each
// its own ArrayBuffer, so a view finds its slab), and at most
// MAX_POOLED_BYTES of free slabs are kept; beyond that a returned slab is
// left to the GC. A buffer that did not come from here is ignored by give(),
// and giving a slab twice is a no-op, so a stray call cannot hand one
// buffer to two users.

const KiB = 1024;
const MiB = 1024 * KiB;

/** Smallest frame served from the pool, and the slab size step. */
export const MIN_POOLED = 64 * KiB;
/** Free slabs kept at most (bytes). */
const MAX_POOLED_BYTES = 64 * MiB;

interface Slab {
  readonly size: number;
  free: boolean;
}

export class BufferPool {
  readonly #free = new Map<number, Buffer[]>();
  readonly #slabs = new WeakMap<ArrayBufferLike, Slab>();
  #freeBytes = 0;
  /** Slabs made (for tests and figures). */
  allocated = 0;

  constructor(private readonly maxFreeBytes = MAX_POOLED_BYTES) {}

  get freeBytes(): number {
    return this.#freeBytes;
  }

  /** A buffer of `len` bytes (contents undefined). */
  take(len: number): Buffer {
    if (len < MIN_POOLED) return Buffer.allocUnsafe(len);
    const size = Math.ceil(len / MIN_POOLED) * MIN_POOLED;
    const list = this.#free.get(size);
    let slab = list?.pop();
    if (slab) {
      this.#freeBytes -= size;
      this.#slabs.get(slab.buffer)!.free = false;
    } else {
      slab = Buffer.allocUnsafeSlow(size);
      this.#slabs.set(slab.buffer, { size, free: false });
      this.allocated++;
    }
    return slab.subarray(0, len);
  }

  /** `buf` (or a view of it) is no longer used by anyone: its slab may be handed out again. */
  give(buf: Buffer): void {
    const s = this.#slabs.get(buf.buffer);
    if (!s || s.free || this.#freeBytes + s.size > this.maxFreeBytes) return;
    s.free = true;
    this.#freeBytes += s.size;
    let list = this.#free.get(s.size);
    if (!list) {
      list = [];
      this.#free.set(s.size, list);
    }
    list.push(Buffer.from(buf.buffer, 0, s.size));
  }
}

/** The process's pool for mesh frames (the parser's bodies, the data path's messages). */
export const meshBufferPool = new BufferPool();
