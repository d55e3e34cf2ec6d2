// One readable line per message: the text sidecar of a capture (FORMAT.md
// section 5) and the output of `ernic-vfu show`. Fields: frame, seconds,
// direction, connection, id, command, type, size, flags, error, then for
// non-error messages the fds and a short decode of the payload.

import {
  Command,
  errnoName,
  HeaderFlag,
  SetIrqsFlag,
  DeviceFeatureFlag,
  DmaMapFlag,
  RegionInfoFlag,
} from '../../protocol/constants';
import {
  Field,
  getField,
  vfio_irq_info,
  vfio_irq_set,
  vfio_region_info,
  vfio_user_device_feature,
  vfio_user_device_info,
  vfio_user_dma_map,
  vfio_user_dma_rw,
  vfio_user_dma_unmap,
  vfio_user_header,
  vfio_user_mig_data,
  vfio_user_region_access,
  vfio_user_version,
} from '../../protocol/layouts';
import { getFieldBig } from '../../protocol/field';
import type { CapturedFd, PacketComment } from './pcapng';

const REGION_NAMES = ['BAR0', 'BAR1', 'BAR2', 'BAR3', 'BAR4', 'BAR5', 'ROM', 'CFG', 'VGA'];
const IRQ_NAMES = ['INTX', 'MSI', 'MSIX', 'ERR', 'REQ'];
/** Bytes of data shown per message. */
const DATA_SHOWN = 16;

const hex = (n: number): string => `0x${n.toString(16)}`;
const region = (i: number): string => `${i}(${REGION_NAMES[i] ?? '?'})`;
const irq = (i: number): string => `${i}(${IRQ_NAMES[i] ?? '?'})`;

/** A u64 field exactly, even above 2^53 (a listing shows what was sent). */
function u64(b: Buffer, field: Field): bigint {
  return getFieldBig(b, 0, field);
}

/** A u64 field as hex. */
function u64hex(b: Buffer, field: Field): string {
  return `0x${u64(b, field).toString(16)}`;
}

/** A field of the struct at the start of the payload. */
function u(b: Buffer, field: Field): number {
  return getField(b, 0, field);
}

function dataHex(b: Buffer, at: number, count: number): string {
  const n = Math.max(0, Math.min(count, DATA_SHOWN, b.length - at));
  return `data=${b.toString('hex', at, at + n)}${count > DATA_SHOWN ? '..' : ''}`;
}

function fdsText(fds: readonly CapturedFd[]): string {
  if (fds.length === 0) return '-';
  return fds.map((f) => (f.size !== undefined && f.size !== null ? `${f.kind}:${f.size}` : f.kind)).join(',');
}

function regionFlags(f: number): string {
  const s =
    (f & RegionInfoFlag.READ ? 'R' : '') +
    (f & RegionInfoFlag.WRITE ? 'W' : '') +
    (f & RegionInfoFlag.MMAP ? 'M' : '') +
    (f & RegionInfoFlag.CAPS ? 'C' : '');
  return s || '0';
}

/** Decode of a message payload (after the header); empty when there is nothing to say. */
function decodeSummary(cmd: number, reply: boolean, m: Buffer): string {
  const p = m.subarray(vfio_user_header.SIZE);
  const has = (n: number): boolean => p.length >= n;
  switch (cmd) {
    case Command.VERSION: {
      if (!has(vfio_user_version.SIZE)) return '';
      const json =
        p.length > vfio_user_version.SIZE
          ? ' ' + p.toString('utf8', vfio_user_version.SIZE, p[p.length - 1] === 0 ? p.length - 1 : p.length)
          : '';
      return `v${u(p, vfio_user_version.major)}.${u(p, vfio_user_version.minor)}${json}`;
    }
    case Command.DMA_MAP: {
      if (reply || !has(vfio_user_dma_map.SIZE)) return '';
      const flags = u(p, vfio_user_dma_map.flags);
      const prot = (flags & DmaMapFlag.READ ? 'R' : '') + (flags & DmaMapFlag.WRITE ? 'W' : '');
      return `addr=${u64hex(p, vfio_user_dma_map.addr)} size=${u64hex(p, vfio_user_dma_map.size)} off=${u64hex(p, vfio_user_dma_map.offset)} prot=${prot || '-'} flags=${hex(flags)}`;
    }
    case Command.DMA_UNMAP: {
      return has(vfio_user_dma_unmap.SIZE)
        ? `addr=${u64hex(p, vfio_user_dma_unmap.addr)} size=${u64hex(p, vfio_user_dma_unmap.size)} flags=${hex(u(p, vfio_user_dma_unmap.flags))}`
        : '';
    }
    case Command.DEVICE_GET_INFO: {
      return reply && has(vfio_user_device_info.SIZE)
        ? `flags=${hex(u(p, vfio_user_device_info.flags))} regions=${u(p, vfio_user_device_info.num_regions)} irqs=${u(p, vfio_user_device_info.num_irqs)}`
        : '';
    }
    case Command.DEVICE_GET_REGION_INFO: {
      if (!has(vfio_region_info.SIZE)) return '';
      const base = `index=${region(u(p, vfio_region_info.index))} argsz=${u(p, vfio_region_info.argsz)}`;
      if (!reply) return base;
      return `${base} flags=${regionFlags(u(p, vfio_region_info.flags))} size=${u64hex(p, vfio_region_info.size)} offset=${u64hex(p, vfio_region_info.offset)} cap_offset=${u(p, vfio_region_info.cap_offset)}`;
    }
    case Command.DEVICE_GET_IRQ_INFO: {
      if (!has(vfio_irq_info.SIZE)) return '';
      const base = `index=${irq(u(p, vfio_irq_info.index))}`;
      return reply ? `${base} flags=${hex(u(p, vfio_irq_info.flags))} count=${u(p, vfio_irq_info.count)}` : base;
    }
    case Command.DEVICE_SET_IRQS: {
      if (reply || !has(vfio_irq_set.SIZE)) return '';
      const f = u(p, vfio_irq_set.flags);
      const names: string[] = [];
      if (f & SetIrqsFlag.DATA_NONE) names.push('NONE');
      if (f & SetIrqsFlag.DATA_BOOL) names.push('BOOL');
      if (f & SetIrqsFlag.DATA_EVENTFD) names.push('EVENTFD');
      if (f & SetIrqsFlag.ACTION_MASK) names.push('MASK');
      if (f & SetIrqsFlag.ACTION_UNMASK) names.push('UNMASK');
      if (f & SetIrqsFlag.ACTION_TRIGGER) names.push('TRIGGER');
      const bools = p.length > vfio_irq_set.SIZE ? ` data=${p.toString('hex', vfio_irq_set.SIZE)}` : '';
      return `index=${irq(u(p, vfio_irq_set.index))} ${names.join('|') || hex(f)} start=${u(p, vfio_irq_set.start)} count=${u(p, vfio_irq_set.count)}${bools}`;
    }
    case Command.REGION_READ:
    case Command.REGION_WRITE: {
      if (!has(vfio_user_region_access.SIZE)) return '';
      const count = u(p, vfio_user_region_access.count);
      const base = `region=${region(u(p, vfio_user_region_access.region))} offset=${u64hex(p, vfio_user_region_access.offset)} count=${count}`;
      const withData = (cmd === Command.REGION_READ) === reply;
      return withData ? `${base} ${dataHex(p, vfio_user_region_access.SIZE, count)}` : base;
    }
    case Command.DMA_READ:
    case Command.DMA_WRITE: {
      if (!has(vfio_user_dma_rw.SIZE)) return '';
      const count = Number(u64(p, vfio_user_dma_rw.count));
      const base = `addr=${u64hex(p, vfio_user_dma_rw.addr)} count=${count}`;
      const withData = (cmd === Command.DMA_READ) === reply;
      return withData ? `${base} ${dataHex(p, vfio_user_dma_rw.SIZE, count)}` : base;
    }
    case Command.DEVICE_FEATURE: {
      if (!has(vfio_user_device_feature.SIZE)) return '';
      const f = u(p, vfio_user_device_feature.flags);
      const ops = [
        f & DeviceFeatureFlag.GET ? 'GET' : '',
        f & DeviceFeatureFlag.SET ? 'SET' : '',
        f & DeviceFeatureFlag.PROBE ? 'PROBE' : '',
      ]
        .filter(Boolean)
        .join('|');
      return `feature=${f & DeviceFeatureFlag.FEATURE_MASK} ${ops}${p.length > vfio_user_device_feature.SIZE ? ' ' + dataHex(p, vfio_user_device_feature.SIZE, p.length - vfio_user_device_feature.SIZE) : ''}`;
    }
    case Command.MIG_DATA_READ:
    case Command.MIG_DATA_WRITE: {
      return has(vfio_user_mig_data.SIZE)
        ? `argsz=${u(p, vfio_user_mig_data.argsz)} size=${u(p, vfio_user_mig_data.size)}`
        : '';
    }
    default:
      return '';
  }
}

/** The short decode at the end of a listing line; '' for raw, incomplete and error messages, or when there is nothing to say. */
export function captureDecode(c: PacketComment, bytes: Buffer): string {
  if (c.raw || c.incomplete || c.flags & HeaderFlag.ERROR || c.cmd === null) return '';
  return decodeSummary(c.cmd, c.type === 'reply', bytes);
}

/** The sidecar line for one message. */
export function formatCaptureLine(frame: number, seconds: number, c: PacketComment, bytes: Buffer): string {
  const isReply = c.type === 'reply';
  let type = isReply ? 'reply' : 'cmd';
  if (c.flags & HeaderFlag.NO_REPLY) type += '/NR';
  if (c.flags & HeaderFlag.ERROR) type += '/ERR';
  const head = `${String(frame).padStart(5)} ${seconds.toFixed(6).padStart(10)} ${c.dir} c${c.conn} id=0x${c.id.toString(16).padStart(4, '0')} ${c.name.padEnd(22)} ${type.padEnd(9)}`;
  if (c.raw) return `${head} RAW size=${bytes.length}`;
  const err = c.error ? `${c.error}(${errnoName(c.error)})` : '0';
  const fields = `size=${c.size} flags=${hex(c.flags)} err=${err}`;
  const S = vfio_user_header.msg_size;
  if (c.incomplete)
    return `${head} ${fields} INCOMPLETE(msg_size=${bytes.length >= S.off + S.size ? getField(bytes, 0, S) : '?'})`;
  if (c.flags & HeaderFlag.ERROR) return `${head} ${fields}`;
  return `${head} ${fields} fds=${fdsText(c.fds)} ${captureDecode(c, bytes)}`;
}
