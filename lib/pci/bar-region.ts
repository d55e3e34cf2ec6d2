// A BAR as a vfio region: routes each access to the window it falls in.
//
// Windows are ranges the PCI function itself implements (the MSI-X table and
// PBA); everything else goes to the device's BarHandler with the BAR offset.
// An access that straddles a window edge is cut into pieces, each sent to its
// owner in order, so odd-sized or unaligned guest accesses never fail.

import { Errno } from '../../protocol/constants';
import type { RegionHandler } from '../vfio-user/device';
import type { BarHandler } from './bars';
import { accessInRange } from './config-space';

/** A range of the BAR served by `handler`, which sees offsets relative to `start`. */
export interface BarWindow {
  readonly start: number;
  readonly size: number;
  readonly handler: BarHandler;
}

/** Default device side: reads as zeros, writes dropped (no register there). */
export const EMPTY_BAR_HANDLER: BarHandler = {
  read(_offset: number, dst: Buffer): number {
    dst.fill(0);
    return 0;
  },
  write(): number {
    return 0;
  },
};

export class BarRegion implements RegionHandler {
  readonly readable = true;
  readonly writable = true;
  readonly #windows: readonly BarWindow[];

  /** `windows` must lie inside the BAR and not overlap (checked by the caller's validation). */
  constructor(
    readonly size: number,
    readonly handler: BarHandler,
    windows: readonly BarWindow[],
  ) {
    this.#windows = [...windows].sort((a, b) => a.start - b.start);
  }

  read(offset: number, dst: Buffer): number {
    if (!accessInRange(offset, dst.length, this.size)) {
      dst.fill(0);
      return Errno.EINVAL;
    }
    return this.#route(offset, dst, false);
  }

  write(offset: number, src: Buffer): number {
    if (!accessInRange(offset, src.length, this.size)) return Errno.EINVAL;
    return this.#route(offset, src, true);
  }

  #route(offset: number, buf: Buffer, isWrite: boolean): number {
    const end = offset + buf.length;
    let at = offset;
    while (at < end) {
      let handler = this.handler;
      let base = 0;
      let stop = end;
      for (const w of this.#windows) {
        if (at >= w.start && at < w.start + w.size) {
          handler = w.handler;
          base = w.start;
          stop = Math.min(end, w.start + w.size);
          break;
        }
        if (w.start > at) {
          stop = Math.min(end, w.start);
          break;
        }
      }
      // The usual access lies in one window: pass it whole (no view object per access).
      const piece = at === offset && stop === end ? buf : buf.subarray(at - offset, stop - offset);
      const err = isWrite ? handler.write(at - base, piece) : handler.read(at - base, piece);
      if (err !== 0) return err;
      at = stop;
    }
    return 0;
  }
}
