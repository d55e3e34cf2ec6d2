// One readable line per message: the text sidecar of a capture (FORMAT.md
// section 5) and the output of `ernic-vfu show`. Fields: frame, seconds,
// direction, connection, id, command, type, size, flags, error, then for
// non-error messages the fds and a short decode of the payload.

import { Command, errnoName, HeaderFlag, SetIrqsFlag, DeviceFeatureFlag } from '../../protocol/constants';
import type { CapturedFd, PacketComment } from './pcapng';

const REGION_NAMES = ['BAR0', 'BAR1', 'BAR2', 'BAR3', 'BAR4', 'BAR5', 'ROM', 'CFG', 'VGA'];
const IRQ_NAMES = ['INTX', 'MSI', 'MSIX', 'ERR', 'REQ'];

const hex = (n: number): string => `0x${n.toString(16)}`;
const region = (i: number): string => `${i}(${REGION_NAMES[i] ?? '?'})`;
const irq = (i: number): string => `${i}(${IRQ_NAMES[i] ?? '?'})`;

/** u64 as hex, exact even above 2^53. */
function u64hex(b: Buffer, at: number): string {
  return `0x${b.readBigUInt64LE(at).toString(16)}`;
}

function dataHex(b: Buffer, at: number, count: number): string {
  const n = Math.max(0, Math.min(count, 16, b.length - at));
  return `data=${b.toString('hex', at, at + n)}${count > 16 ? '..' : ''}`;
}

function fdsText(fds: readonly CapturedFd[]): string {
  if (fds.length === 0) return '-';
  return fds.map((f) => (f.size !== undefined && f.size !== null ? `${f.kind}:${f.size}` : f.kind)).join(',');
}

function regionFlags(f: number): string {
  const s = (f & 1 ? 'R' : '') + (f & 2 ? 'W' : '') + (f & 4 ? 'M' : '') + (f & 8 ? 'C' : '');
  return s || '0';
}

/** Decode of a message payload (after the 16-byte header); empty when there is nothing to say. */
export function decodeSummary(cmd: number, reply: boolean, m: Buffer): string {
  const p = m.subarray(16);
  const has = (n: number): boolean => p.length >= n;
  switch (cmd) {
    case Command.VERSION:
      if (!has(4)) return '';
      return `v${p.readUInt16LE(0)}.${p.readUInt16LE(2)}${p.length > 4 ? ' ' + p.toString('utf8', 4, p[p.length - 1] === 0 ? p.length - 1 : p.length) : ''}`;
    case Command.DMA_MAP: {
      if (reply || !has(32)) return '';
      const flags = p.readUInt32LE(4);
      const prot = (flags & 1 ? 'R' : '') + (flags & 2 ? 'W' : '');
      return `addr=${u64hex(p, 16)} size=${u64hex(p, 24)} off=${u64hex(p, 8)} prot=${prot || '-'} flags=${hex(flags)}`;
    }
    case Command.DMA_UNMAP:
      return has(24) ? `addr=${u64hex(p, 8)} size=${u64hex(p, 16)} flags=${hex(p.readUInt32LE(4))}` : '';
    case Command.DEVICE_GET_INFO:
      return reply && has(16) ? `flags=${hex(p.readUInt32LE(4))} regions=${p.readUInt32LE(8)} irqs=${p.readUInt32LE(12)}` : '';
    case Command.DEVICE_GET_REGION_INFO: {
      if (!has(32)) return '';
      const base = `index=${region(p.readUInt32LE(8))} argsz=${p.readUInt32LE(0)}`;
      if (!reply) return base;
      return `${base} flags=${regionFlags(p.readUInt32LE(4))} size=${u64hex(p, 16)} offset=${u64hex(p, 24)} cap_offset=${p.readUInt32LE(12)}`;
    }
    case Command.DEVICE_GET_IRQ_INFO: {
      if (!has(16)) return '';
      const base = `index=${irq(p.readUInt32LE(8))}`;
      return reply ? `${base} flags=${hex(p.readUInt32LE(4))} count=${p.readUInt32LE(12)}` : base;
    }
    case Command.DEVICE_SET_IRQS: {
      if (reply || !has(20)) return '';
      const f = p.readUInt32LE(4);
      const names: string[] = [];
      if (f & SetIrqsFlag.DATA_NONE) names.push('NONE');
      if (f & SetIrqsFlag.DATA_BOOL) names.push('BOOL');
      if (f & SetIrqsFlag.DATA_EVENTFD) names.push('EVENTFD');
      if (f & SetIrqsFlag.ACTION_MASK) names.push('MASK');
      if (f & SetIrqsFlag.ACTION_UNMASK) names.push('UNMASK');
      if (f & SetIrqsFlag.ACTION_TRIGGER) names.push('TRIGGER');
      const bools = p.length > 20 ? ` data=${p.toString('hex', 20)}` : '';
      return `index=${irq(p.readUInt32LE(8))} ${names.join('|') || hex(f)} start=${p.readUInt32LE(12)} count=${p.readUInt32LE(16)}${bools}`;
    }
    case Command.REGION_READ:
    case Command.REGION_WRITE: {
      if (!has(16)) return '';
      const count = p.readUInt32LE(12);
      const base = `region=${region(p.readUInt32LE(8))} offset=${u64hex(p, 0)} count=${count}`;
      const withData = (cmd === Command.REGION_READ) === reply;
      return withData ? `${base} ${dataHex(p, 16, count)}` : base;
    }
    case Command.DMA_READ:
    case Command.DMA_WRITE: {
      if (!has(16)) return '';
      const count = Number(p.readBigUInt64LE(8));
      const base = `addr=${u64hex(p, 0)} count=${count}`;
      const withData = (cmd === Command.DMA_READ) === reply;
      return withData ? `${base} ${dataHex(p, 16, count)}` : base;
    }
    case Command.DEVICE_FEATURE: {
      if (!has(8)) return '';
      const f = p.readUInt32LE(4);
      const ops = [f & DeviceFeatureFlag.GET ? 'GET' : '', f & DeviceFeatureFlag.SET ? 'SET' : '', f & DeviceFeatureFlag.PROBE ? 'PROBE' : ''].filter(Boolean).join('|');
      return `feature=${f & DeviceFeatureFlag.FEATURE_MASK} ${ops}${p.length > 8 ? ' ' + dataHex(p, 8, p.length - 8) : ''}`;
    }
    case Command.MIG_DATA_READ:
    case Command.MIG_DATA_WRITE:
      return has(8) ? `argsz=${p.readUInt32LE(0)} size=${p.readUInt32LE(4)}` : '';
    default:
      return '';
  }
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
  if (c.incomplete) return `${head} ${fields} INCOMPLETE(msg_size=${bytes.length >= 8 ? bytes.readUInt32LE(4) : '?'})`;
  if (c.flags & HeaderFlag.ERROR) return `${head} ${fields}`;
  return `${head} ${fields} fds=${fdsText(c.fds)} ${c.cmd === null ? '' : decodeSummary(c.cmd, isReply, bytes)}`;
}
