// DEVICE_SET_IRQS: the client wires interrupt vectors to eventfds, unwires
// them, asks us to fire them, or masks and unmasks them. validateSetIrqs is the
// rule list; setIrqs applies a request that passed it. Signalling is a write on
// the event loop, so only an eventfd is accepted as a vector's fd.

import { Errno, SetIrqsFlag } from '../../protocol/constants';
import { ProtocolError, protocolError } from '../../protocol/errors';
import { vfio_irq_set } from '../../protocol/layouts';
import type { DeviceSetIrqs } from '../../protocol/messages';
import { IrqIndex, PCI_NUM_IRQS } from './device';
import { isEventfd } from './irq-table';
import type { SessionState } from './session-state';
import type { RawHeader } from './transport';

export function setIrqs(
  s: SessionState,
  h: RawHeader,
  req: DeviceSetIrqs,
  fds: number[],
  noReply: boolean,
): ProtocolError | null {
  const err = validateSetIrqs(req, fds.length, s.irqs.count(req.index));
  if (err) return err;
  const data = req.flags & SetIrqsFlag.DATA_MASK;
  const action = req.flags & SetIrqsFlag.ACTION_MASK_ALL;
  const dev = s.device;
  if (action === SetIrqsFlag.ACTION_TRIGGER) {
    if (data === SetIrqsFlag.DATA_EVENTFD) {
      // Signalling is a write on the loop: only an eventfd is sure never to block it (a FIFO or socket could).
      const notEventfd = fds.findIndex((fd) => !isEventfd(fd));
      if (notEventfd >= 0) {
        return protocolError('BAD_FD', `SET_IRQS fd ${notEventfd} of ${fds.length} is not an eventfd`, Errno.EINVAL);
      }
      if (fds.length) {
        s.irqs.assign(req.index, req.start, fds);
        dev.irqChanged?.({ index: req.index, start: req.start, count: req.count, kind: 'wired' });
      } else {
        s.irqs.unassign(req.index, req.start, req.count);
        dev.irqChanged?.({ index: req.index, start: req.start, count: req.count, kind: 'unwired' });
      }
    } else if (req.count === 0) {
      s.irqs.unassign(req.index, 0, s.irqs.count(req.index));
      dev.irqChanged?.({ index: req.index, start: 0, count: s.irqs.count(req.index), kind: 'unwired' });
    } else {
      // The client asks us to fire these vectors (DATA_NONE: all; DATA_BOOL: those set).
      for (let i = 0; i < req.count; i++) {
        if (data === SetIrqsFlag.DATA_NONE || req.data[i]) s.irqs.signal(req.index, req.start + i);
      }
      dev.irqChanged?.({ index: req.index, start: req.start, count: req.count, kind: 'trigger' });
    }
  } else {
    // MASK/UNMASK. An eventfd here is a notifier (INTx resample): we do not use it.
    for (const fd of fds) s.closeFd(fd);
    dev.irqChanged?.({
      index: req.index,
      start: req.start,
      count: req.count,
      kind: action === SetIrqsFlag.ACTION_MASK ? 'mask' : 'unmask',
    });
  }
  if (!noReply) s.headerOnly(h);
  return null;
}

/**
 * SET_IRQS rules, one per statement (libvfio-user's checklist, docs/vfio-user-protocol.md 2.8),
 * with QEMU's quirks allowed: argsz 20 whatever the fd count, and EVENTFD with no fds
 * meaning "de-assign".
 */
function validateSetIrqs(req: DeviceSetIrqs, nfds: number, irqCount: number): ProtocolError | null {
  const data = req.flags & SetIrqsFlag.DATA_MASK;
  const action = req.flags & SetIrqsFlag.ACTION_MASK_ALL;
  const bad = (code: Parameters<typeof protocolError>[0], detail: string): ProtocolError =>
    protocolError(
      code,
      `SET_IRQS index ${req.index} start ${req.start} count ${req.count} flags 0x${req.flags.toString(16)}: ${detail}`,
    );
  if (req.argsz < vfio_irq_set.SIZE) return bad('ARGSZ_TOO_SMALL', `argsz ${req.argsz} < ${vfio_irq_set.SIZE}`);
  if (req.index >= PCI_NUM_IRQS) return bad('BAD_INDEX', 'no such irq index');
  if (req.flags & ~(SetIrqsFlag.DATA_MASK | SetIrqsFlag.ACTION_MASK_ALL)) return bad('BAD_FLAGS', 'unknown flag bits');
  if (data !== SetIrqsFlag.DATA_NONE && data !== SetIrqsFlag.DATA_BOOL && data !== SetIrqsFlag.DATA_EVENTFD)
    return bad('BAD_FLAGS', 'needs exactly one DATA type');
  if (
    action !== SetIrqsFlag.ACTION_MASK &&
    action !== SetIrqsFlag.ACTION_UNMASK &&
    action !== SetIrqsFlag.ACTION_TRIGGER
  )
    return bad('BAD_FLAGS', 'needs exactly one ACTION');
  if (data !== SetIrqsFlag.DATA_EVENTFD && nfds > 0) return bad('FD_COUNT', 'fds come only with DATA_EVENTFD');
  if (data === SetIrqsFlag.DATA_BOOL && req.data.length !== req.count)
    return bad('PAYLOAD_MISMATCH', `DATA_BOOL needs ${req.count} bytes, got ${req.data.length}`);
  if (data !== SetIrqsFlag.DATA_BOOL && req.data.length !== 0)
    return bad('PAYLOAD_MISMATCH', `${req.data.length} unexpected data bytes`);
  if (req.count === 0) {
    if (req.start !== 0 || action !== SetIrqsFlag.ACTION_TRIGGER || data !== SetIrqsFlag.DATA_NONE)
      return bad('OUT_OF_RANGE', 'count 0 only disables the whole index (TRIGGER|NONE, start 0)');
    return null;
  }
  if (req.start >= irqCount || req.count > irqCount - req.start)
    return bad('OUT_OF_RANGE', `vectors outside the ${irqCount} of this index`);
  if (
    (req.index === IrqIndex.ERR || req.index === IrqIndex.REQ) &&
    (action !== SetIrqsFlag.ACTION_TRIGGER || req.count > 1)
  )
    return bad('BAD_FLAGS', 'ERR and REQ take only TRIGGER of one vector');
  if (data === SetIrqsFlag.DATA_EVENTFD && action === SetIrqsFlag.ACTION_TRIGGER && nfds !== 0 && nfds !== req.count)
    return bad('FD_COUNT', `${nfds} fds for ${req.count} vectors`);
  if (data === SetIrqsFlag.DATA_EVENTFD && action !== SetIrqsFlag.ACTION_TRIGGER && nfds > 1)
    return bad('FD_COUNT', `${nfds} notifier fds`);
  return null;
}
