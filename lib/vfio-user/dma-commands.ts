// DMA_MAP and DMA_UNMAP: the client's guest memory, kept in the session's DMA
// table (dma-table.ts), and the guard against a client that truncates the file
// behind a mapping (bus-guard.ts): the session subscribes to guest-memory
// faults once it holds a mapped region, and closes the client whose mapping
// faulted.

import { DmaUnmapFlag, Errno } from '../../protocol/constants';
import { ProtocolError, protocolError } from '../../protocol/errors';
import { vfio_user_dma_map, vfio_user_dma_unmap } from '../../protocol/layouts';
import type { DmaMap, DmaUnmap } from '../../protocol/messages';
import { replyFlags } from '../../protocol/serializer';
import { contain } from '../guard';
import { onBusFault } from './bus-guard';
import type { SessionState } from './session-state';
import type { RawHeader } from './transport';

/** DMA_MAP carries at most one fd (the file behind the region). */
const DMA_MAP_MAX_FDS = 1;

export function dmaMap(
  s: SessionState,
  h: RawHeader,
  req: DmaMap,
  fds: number[],
  noReply: boolean,
): ProtocolError | null {
  if (fds.length > DMA_MAP_MAX_FDS)
    return protocolError('FD_COUNT', `DMA_MAP with ${fds.length} fds (at most ${DMA_MAP_MAX_FDS})`);
  if (req.argsz < vfio_user_dma_map.SIZE)
    return protocolError('ARGSZ_TOO_SMALL', `DMA_MAP argsz ${req.argsz} < ${vfio_user_dma_map.SIZE}`);
  const fd = fds.length ? fds[0]! : -1;
  const r = s.dma.add({ address: req.address, size: req.size, flags: req.flags, offset: req.offset, fd });
  if ('error' in r) return r.error;
  if ('duplicate' in r) {
    if (fd >= 0) s.closeFd(fd);
  } else {
    if (r.region.mapped) watchBusFaults(s);
    s.device.dmaMapped?.(r.region);
    if (s.log.debugEnabled)
      s.log.debug(
        `vfio-user: DMA_MAP 0x${req.address.toString(16)}+0x${req.size.toString(16)}${fd >= 0 ? ' (fd)' : ''}`,
      );
  }
  if (!noReply) s.headerOnly(h);
  return null;
}

export function dmaUnmap(s: SessionState, h: RawHeader, req: DmaUnmap, noReply: boolean): ProtocolError | null {
  if (req.argsz < vfio_user_dma_unmap.SIZE)
    return protocolError('ARGSZ_TOO_SMALL', `DMA_UNMAP argsz ${req.argsz} < ${vfio_user_dma_unmap.SIZE}`);
  if (req.argsz > s.limits.maxDataXferSize) return protocolError('ARGSZ_TOO_LARGE', `DMA_UNMAP argsz ${req.argsz}`);
  if (req.flags & DmaUnmapFlag.GET_DIRTY_BITMAP)
    return protocolError('NOT_SUPPORTED', 'DMA_UNMAP dirty bitmap: dirty logging is not active');
  if (req.flags & ~DmaUnmapFlag.ALL) return protocolError('BAD_FLAGS', `DMA_UNMAP flags 0x${req.flags.toString(16)}`);
  if (req.flags & DmaUnmapFlag.ALL) {
    if (req.address !== 0 || req.size !== 0)
      return protocolError('BAD_FLAGS', 'DMA_UNMAP ALL needs address and size 0');
    const all = [...s.dma.regions];
    for (const r of all) s.device.dmaUnmapped?.(r);
    s.dma.clear();
  } else {
    const r = s.dma.findExact(req.address, req.size);
    if (!r)
      return protocolError(
        'NOT_FOUND',
        `DMA_UNMAP 0x${req.address.toString(16)}+0x${req.size.toString(16)} matches no mapping`,
        Errno.ENOENT,
      );
    // The device drops its references first; then the windows are detached and unmapped.
    s.device.dmaUnmapped?.(r);
    s.dma.remove(r);
  }
  if (!noReply) {
    const w = s.transport.writer.begin(h.id, h.command, replyFlags(false));
    const at = w.reserve(vfio_user_dma_unmap.SIZE);
    w.field(at, vfio_user_dma_unmap.argsz, vfio_user_dma_unmap.SIZE)
      .field(at, vfio_user_dma_unmap.flags, req.flags)
      .field(at, vfio_user_dma_unmap.addr, req.address)
      .field(at, vfio_user_dma_unmap.size, req.size);
    w.end();
  }
  return null;
}

/** Subscribe the session to guest-memory faults (once). */
function watchBusFaults(s: SessionState): void {
  if (s.unwatchBus) return;
  s.unwatchBus = onBusFault((address) => {
    contain(s.log, 'vfio-user: guest-memory fault handler', () => busFault(s, address));
  });
}

/** A guarded access hit a page the client truncated away (lib/vfio-user/bus-guard.ts). */
function busFault(s: SessionState, address: number): void {
  if (s.transport.closed || !s.dma.ownsAddress(address)) return;
  s.log.error(
    'vfio-user: the client shrank the file behind a DMA_MAP region (an access past its end was caught); closing the client',
  );
  s.close('guest memory truncated under a mapping');
}
