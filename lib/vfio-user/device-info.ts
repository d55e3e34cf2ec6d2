// What the client asks about the device: DEVICE_GET_INFO, DEVICE_GET_REGION_INFO,
// DEVICE_GET_REGION_IO_FDS and DEVICE_GET_IRQ_INFO, and DEVICE_RESET. Each
// checks argsz against its struct's SIZE and an index against the device's
// counts before answering.

import { DeviceInfoFlag, IrqInfoFlag, RegionInfoFlag } from '../../protocol/constants';
import { ProtocolError, protocolError } from '../../protocol/errors';
import {
  vfio_irq_info,
  vfio_region_info,
  vfio_user_device_info,
  vfio_user_region_io_fds_request,
} from '../../protocol/layouts';
import type {
  DeviceGetInfo,
  DeviceGetIrqInfo,
  DeviceGetRegionInfo,
  DeviceGetRegionIoFds,
} from '../../protocol/messages';
import { replyFlags } from '../../protocol/serializer';
import { PCI_NUM_IRQS, PCI_NUM_REGIONS } from './device';
import type { SessionState } from './session-state';
import type { RawHeader } from './transport';

export function getDeviceInfo(
  s: SessionState,
  h: RawHeader,
  req: DeviceGetInfo,
  noReply: boolean,
): ProtocolError | null {
  const L = vfio_user_device_info;
  if (req.argsz < L.SIZE) return protocolError('ARGSZ_TOO_SMALL', `DEVICE_GET_INFO argsz ${req.argsz} < ${L.SIZE}`);
  if (!noReply) {
    const w = s.transport.writer.begin(h.id, h.command, replyFlags(false));
    const at = w.reserve(L.SIZE);
    const flags = DeviceInfoFlag.PCI | (s.device.resetSupported ? DeviceInfoFlag.RESET : 0);
    w.field(at, L.argsz, L.SIZE)
      .field(at, L.flags, flags)
      .field(at, L.num_regions, PCI_NUM_REGIONS)
      .field(at, L.num_irqs, PCI_NUM_IRQS);
    w.end();
  }
  return null;
}

export function getRegionInfo(
  s: SessionState,
  h: RawHeader,
  req: DeviceGetRegionInfo,
  noReply: boolean,
): ProtocolError | null {
  const L = vfio_region_info;
  if (req.argsz < L.SIZE)
    return protocolError('ARGSZ_TOO_SMALL', `DEVICE_GET_REGION_INFO argsz ${req.argsz} < ${L.SIZE}`);
  if (req.index >= PCI_NUM_REGIONS)
    return protocolError('BAD_INDEX', `region index ${req.index} (device has ${PCI_NUM_REGIONS})`);
  if (!noReply) {
    const region = s.regions[req.index];
    const flags = region
      ? (region.readable ? RegionInfoFlag.READ : 0) | (region.writable ? RegionInfoFlag.WRITE : 0)
      : 0;
    const w = s.transport.writer.begin(h.id, h.command, replyFlags(false));
    const at = w.reserve(L.SIZE);
    w.field(at, L.argsz, L.SIZE)
      .field(at, L.flags, region && region.size ? flags : 0)
      .field(at, L.index, req.index)
      .field(at, L.cap_offset, 0)
      .field(at, L.size, region?.size ?? 0)
      .field(at, L.offset, 0);
    w.end();
  }
  return null;
}

export function getRegionIoFds(
  s: SessionState,
  h: RawHeader,
  req: DeviceGetRegionIoFds,
  noReply: boolean,
): ProtocolError | null {
  // The reply starts with the same four fields as the request, then the sub-region array.
  const L = vfio_user_region_io_fds_request;
  if (req.flags !== 0) return protocolError('BAD_FLAGS', `GET_REGION_IO_FDS flags ${req.flags} (must be 0)`);
  if (req.count !== 0) return protocolError('BAD_FLAGS', `GET_REGION_IO_FDS count ${req.count} (must be 0)`);
  if (req.argsz < L.SIZE) return protocolError('ARGSZ_TOO_SMALL', `GET_REGION_IO_FDS argsz ${req.argsz} < ${L.SIZE}`);
  if (req.argsz > s.limits.maxDataXferSize)
    return protocolError('ARGSZ_TOO_LARGE', `GET_REGION_IO_FDS argsz ${req.argsz}`);
  if (req.index >= PCI_NUM_REGIONS) return protocolError('BAD_INDEX', `region index ${req.index}`);
  if (!noReply) {
    // No region has ioeventfds: the answer is an empty list.
    const w = s.transport.writer.begin(h.id, h.command, replyFlags(false));
    const at = w.reserve(L.SIZE);
    w.field(at, L.argsz, L.SIZE).field(at, L.flags, 0).field(at, L.index, req.index).field(at, L.count, 0);
    w.end();
  }
  return null;
}

export function getIrqInfo(
  s: SessionState,
  h: RawHeader,
  req: DeviceGetIrqInfo,
  noReply: boolean,
): ProtocolError | null {
  const L = vfio_irq_info;
  if (req.argsz < L.SIZE) return protocolError('ARGSZ_TOO_SMALL', `DEVICE_GET_IRQ_INFO argsz ${req.argsz} < ${L.SIZE}`);
  if (req.index >= PCI_NUM_IRQS)
    return protocolError('BAD_INDEX', `irq index ${req.index} (device has ${PCI_NUM_IRQS})`);
  if (!noReply) {
    const w = s.transport.writer.begin(h.id, h.command, replyFlags(false));
    const at = w.reserve(L.SIZE);
    w.field(at, L.argsz, L.SIZE)
      .field(at, L.flags, IrqInfoFlag.EVENTFD)
      .field(at, L.index, req.index)
      .field(at, L.count, s.irqs.count(req.index));
    w.end();
  }
  return null;
}

export function resetDevice(s: SessionState, h: RawHeader, noReply: boolean): ProtocolError | null {
  // DMA maps and interrupt fds stay, as libvfio-user does (QEMU re-wires them anyway).
  s.device.reset('device-reset');
  if (!noReply) s.headerOnly(h);
  return null;
}
