// Guest-memory views lent to the kernel.
//
// A large mesh frame is written straight out of guest memory (no gather copy):
// the socket keeps the views' addresses until the write completes, which may
// be turns later when the peer reads slowly. A DMA_UNMAP in between must not
// munmap under such a write (the kernel would fault, or read whatever gets
// mapped at that address next). So a mapping with views on loan is unmapped
// when the last one comes back; the region itself leaves the DMA table at
// once, so nothing new can reach it. The loan is bounded by the mesh's send
// timeout: a connection that writes nothing for that long is closed, and
// closing it returns its frames' views.

const onLoan = new Map<ArrayBufferLike, number>();
const releaseLater = new Map<ArrayBufferLike, () => void>();

/** `views` are handed to the kernel: their mappings stay until returned. */
export function lendViews(views: readonly Uint8Array[]): void {
  for (const v of views) onLoan.set(v.buffer, (onLoan.get(v.buffer) ?? 0) + 1);
}

/** The kernel is done with `views` (written, or the write was dropped). */
export function returnViews(views: readonly Uint8Array[]): void {
  for (const v of views) {
    const n = onLoan.get(v.buffer);
    if (n === undefined) continue;
    if (n > 1) {
      onLoan.set(v.buffer, n - 1);
      continue;
    }
    onLoan.delete(v.buffer);
    const release = releaseLater.get(v.buffer);
    if (release) {
      releaseLater.delete(v.buffer);
      release();
    }
  }
}

/** Run `release` (the munmap of `mapping`) now, or when its last lent view comes back. */
export function releaseWhenReturned(mapping: ArrayBufferLike, release: () => void): void {
  if (onLoan.has(mapping)) releaseLater.set(mapping, release);
  else release();
}

/** Mappings with views on loan (for tests and figures). */
export function mappingsOnLoan(): number {
  return onLoan.size;
}

/** Mappings whose munmap waits for a loan to end (for tests and figures). */
export function releasesWaiting(): number {
  return releaseLater.size;
}
