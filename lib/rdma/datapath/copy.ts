// Byte moving for the data path: copies straight between views of guest
// memory (no bounce buffer). A guest buffer reaches us as a list of views, one
// per run of contiguous guest pages; source and destination split differently.

/**
 * Copy `len` bytes from the views `src` (starting `srcOff` bytes in) to the
 * views `dst` (starting `dstOff` bytes in). Answers the bytes copied (less
 * than `len` only if either side runs out).
 */
export function copySlices(
  dst: readonly Buffer[],
  dstOff: number,
  src: readonly Buffer[],
  srcOff: number,
  len: number,
): number {
  let di = 0;
  let si = 0;
  let doff = dstOff;
  let soff = srcOff;
  while (di < dst.length && doff >= dst[di]!.length) {
    doff -= dst[di]!.length;
    di++;
  }
  while (si < src.length && soff >= src[si]!.length) {
    soff -= src[si]!.length;
    si++;
  }
  let left = len;
  while (left > 0 && di < dst.length && si < src.length) {
    const d = dst[di]!;
    const s = src[si]!;
    const n = Math.min(left, d.length - doff, s.length - soff);
    s.copy(d, doff, soff, soff + n);
    doff += n;
    soff += n;
    left -= n;
    if (doff >= d.length) {
      di++;
      doff = 0;
    }
    if (soff >= s.length) {
      si++;
      soff = 0;
    }
  }
  return len - left;
}
