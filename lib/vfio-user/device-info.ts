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
  if (req.argsz < vfio_user_device_info.SIZE)
    return protocolError('ARGSZ_TOO_SMALL', `DEVICE_GET_INFO argsz ${req.argsz} < ${vfio_user_device_info.SIZE}`);
  if (!noReply) {
    const w = s.transport.writer.begin(h.id, h.command, replyFlags(false));
    const at = w.reserve(vfio_user_device_info.SIZE);
    const flags = DeviceInfoFlag.PCI | (s.device.resetSupported ? DeviceInfoFlag.RESET : 0);
    w.field(at, vfio_user_device_info.argsz, vfio_user_device_info.SIZE)
      .field(at, vfio_user_device_info.flags, flags)
      .field(at, vfio_user_device_info.num_regions, PCI_NUM_REGIONS)
      .field(at, vfio_user_device_info.num_irqs, PCI_NUM_IRQS);
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
  if (req.argsz < vfio_region_info.SIZE)
    return protocolError('ARGSZ_TOO_SMALL', `DEVICE_GET_REGION_INFO argsz ${req.argsz} < ${vfio_region_info.SIZE}`);
  if (req.index >= PCI_NUM_REGIONS)
    return protocolError('BAD_INDEX', `region index ${req.index} (device has ${PCI_NUM_REGIONS})`);
  if (!noReply) {
    const region = s.regions[req.index];
    const flags = region
      ? (region.readable ? RegionInfoFlag.READ : 0) | (region.writable ? RegionInfoFlag.WRITE : 0)
      : 0;
    const w = s.transport.writer.begin(h.id, h.command, replyFlags(false));
    const at = w.reserve(vfio_region_info.SIZE);
    w.field(at, vfio_region_info.argsz, vfio_region_info.SIZE)
      .field(at, vfio_region_info.flags, region && region.size ? flags : 0)
      .field(at, vfio_region_info.index, req.index)
      .field(at, vfio_region_info.cap_offset, 0)
      .field(at, vfio_region_info.size, region?.size ?? 0)
      .field(at, vfio_region_info.offset, 0);
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
  if (req.flags !== 0) return protocolError('BAD_FLAGS', `GET_REGION_IO_FDS flags ${req.flags} (must be 0)`);
  if (req.count !== 0) return protocolError('BAD_FLAGS', `GET_REGION_IO_FDS count ${req.count} (must be 0)`);
  if (req.argsz < vfio_user_region_io_fds_request.SIZE)
    return protocolError(
      'ARGSZ_TOO_SMALL',
      `GET_REGION_IO_FDS argsz ${req.argsz} < ${vfio_user_region_io_fds_request.SIZE}`,
    );
  if (req.argsz > s.limits.maxDataXferSize)
    return protocolError('ARGSZ_TOO_LARGE', `GET_REGION_IO_FDS argsz ${req.argsz}`);
  if (req.index >= PCI_NUM_REGIONS) return protocolError('BAD_INDEX', `region index ${req.index}`);
  if (!noReply) {
    // No region has ioeventfds: the answer is an empty list.
    const w = s.transport.writer.begin(h.id, h.command, replyFlags(false));
    const at = w.reserve(vfio_user_region_io_fds_request.SIZE);
    w.field(at, vfio_user_region_io_fds_request.argsz, vfio_user_region_io_fds_request.SIZE)
      .field(at, vfio_user_region_io_fds_request.flags, 0)
      .field(at, vfio_user_region_io_fds_request.index, req.index)
      .field(at, vfio_user_region_io_fds_request.count, 0);
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
  if (req.argsz < vfio_irq_info.SIZE)
    return protocolError('ARGSZ_TOO_SMALL', `DEVICE_GET_IRQ_INFO argsz ${req.argsz} < ${vfio_irq_info.SIZE}`);
  if (req.index >= PCI_NUM_IRQS)
    return protocolError('BAD_INDEX', `irq index ${req.index} (device has ${PCI_NUM_IRQS})`);
  if (!noReply) {
    const w = s.transport.writer.begin(h.id, h.command, replyFlags(false));
    const at = w.reserve(vfio_irq_info.SIZE);
    w.field(at, vfio_irq_info.argsz, vfio_irq_info.SIZE)
      .field(at, vfio_irq_info.flags, IrqInfoFlag.EVENTFD)
      .field(at, vfio_irq_info.index, req.index)
      .field(at, vfio_irq_info.count, s.irqs.count(req.index));
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
