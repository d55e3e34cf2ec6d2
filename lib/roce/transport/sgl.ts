// Moving bytes between a work request's scatter/gather list and a packet
// buffer, at a byte offset into the message: the requester gathers each
// segment's payload, the completer scatters READ responses and atomic results,
// the responder scatters SEND payload into a receive WQE. Every element goes
// through RoceMemory with its L_Key, which checks bounds and rights.

import { ACCESS_LOCAL_WRITE, type RoceMemory, type Sge } from './types';

/**
 * Copy message bytes [offset, offset + len) out of `sgl` (or `inline`) into
 * dst[dstOff..]. False when the range runs past the list or a key refuses.
 */
export function gather(
  mem: RoceMemory,
  sgl: readonly Sge[],
  inline: Buffer | null,
  offset: number,
  len: number,
  dst: Buffer,
  dstOff: number,
): boolean {
  if (inline) {
    if (offset + len > inline.length) return false;
    inline.copy(dst, dstOff, offset, offset + len);
    return true;
  }
  return walk(mem, sgl, offset, len, dst, dstOff, false);
}

/** Copy src[srcOff, srcOff + len) into message bytes [offset, offset + len) of `sgl` (local write rights needed). */
export function scatter(
  mem: RoceMemory,
  sgl: readonly Sge[],
  offset: number,
  len: number,
  src: Buffer,
  srcOff: number,
): boolean {
  return walk(mem, sgl, offset, len, src, srcOff, true);
}

function walk(
  mem: RoceMemory,
  sgl: readonly Sge[],
  offset: number,
  len: number,
  buf: Buffer,
  bufOff: number,
  toSgl: boolean,
): boolean {
  let skip = offset;
  let left = len;
  let at = bufOff;
  for (let i = 0; i < sgl.length && left > 0; i++) {
    const sge = sgl[i]!;
    if (skip >= sge.length) {
      skip -= sge.length;
      continue;
    }
    const n = Math.min(sge.length - skip, left);
    const ok = toSgl
      ? mem.write(sge.lkey, sge.addr + skip, n, false, ACCESS_LOCAL_WRITE, buf, at)
      : mem.read(sge.lkey, sge.addr + skip, n, false, 0, buf, at);
    if (!ok) return false;
    skip = 0;
    left -= n;
    at += n;
  }
  return left === 0;
}
