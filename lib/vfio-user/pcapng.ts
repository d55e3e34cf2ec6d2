// Reader for vfio-user captures (fixtures/vfio-user/FORMAT.md): pcapng with one
// message per Enhanced Packet Block, wrapped in synthetic Ethernet/IPv4/TCP
// headers, and a JSON comment describing the message and its fds.

import * as fs from 'fs';

/** How a recorded fd was recognised (FORMAT.md section 4). */
export interface CapturedFd {
  readonly kind: 'memfd' | 'eventfd' | 'socket' | 'file' | 'other';
  readonly size?: number | null;
  readonly name?: string;
  readonly path?: string;
  readonly link?: string;
}

/** The comment of one packet. */
export interface PacketComment {
  readonly dir: 'c2s' | 's2c';
  readonly conn: number;
  readonly id: number;
  readonly cmd: number | null;
  readonly name: string;
  readonly type: 'command' | 'reply';
  readonly size: number;
  readonly flags: number;
  readonly error: number;
  readonly fds: readonly CapturedFd[];
  readonly seg?: number;
  readonly nseg?: number;
  readonly incomplete?: boolean;
  readonly raw?: boolean;
}

/** One whole message of a capture (segments joined). */
export interface CapturedMessage {
  /** Frame number of its first packet, counting from 1 as Wireshark does. */
  readonly frame: number;
  /** Microseconds since the Unix epoch. */
  readonly timestampUs: number;
  readonly comment: PacketComment;
  readonly bytes: Buffer;
}

const BLOCK_SHB = 0x0a0d0d0a;
const BLOCK_EPB = 6;
const OPT_END = 0;
const OPT_COMMENT = 1;
/** Ethernet (14) + IPv4 (20) + TCP (20). */
export const SYNTHETIC_HEADERS = 54;

export class CaptureFormatError extends Error {}

/** Parse a capture file into its messages, in file order. */
export function readCapture(path: string): CapturedMessage[] {
  return parseCapture(fs.readFileSync(path));
}

export function parseCapture(data: Buffer): CapturedMessage[] {
  if (data.length < 12 || data.readUInt32LE(0) !== BLOCK_SHB) throw new CaptureFormatError('not a pcapng file (no section header)');
  if (data.readUInt32LE(8) !== 0x1a2b3c4d) throw new CaptureFormatError('only little-endian pcapng is supported');
  const out: CapturedMessage[] = [];
  let pending: { frame: number; timestampUs: number; comment: PacketComment; parts: Buffer[] } | null = null;
  let frame = 0;
  let off = 0;
  while (off < data.length) {
    if (off + 12 > data.length) throw new CaptureFormatError(`truncated block at ${off}`);
    const type = data.readUInt32LE(off);
    const len = data.readUInt32LE(off + 4);
    if (len < 12 || len % 4 !== 0 || off + len > data.length) throw new CaptureFormatError(`bad block length ${len} at ${off}`);
    if (type === BLOCK_EPB) {
      frame++;
      const tsHigh = data.readUInt32LE(off + 12);
      const tsLow = data.readUInt32LE(off + 16);
      const caplen = data.readUInt32LE(off + 20);
      const pkt = data.subarray(off + 28, off + 28 + caplen);
      if (28 + caplen > len) throw new CaptureFormatError(`packet ${frame} overruns its block`);
      const comment = readComment(data, off + 28 + caplen + ((4 - (caplen % 4)) % 4), off + len - 4, frame);
      const payload = pkt.subarray(SYNTHETIC_HEADERS);
      const timestampUs = tsHigh * 0x100000000 + tsLow;
      if (comment.seg === undefined || comment.seg === 0) {
        pending = { frame, timestampUs, comment, parts: [payload] };
      } else if (pending) {
        pending.parts.push(payload);
      } else {
        throw new CaptureFormatError(`packet ${frame} is segment ${comment.seg} without a first segment`);
      }
      const last = comment.nseg === undefined || (comment.seg ?? 0) === comment.nseg - 1;
      if (last && pending) {
        out.push({ frame: pending.frame, timestampUs: pending.timestampUs, comment: pending.comment, bytes: Buffer.concat(pending.parts) });
        pending = null;
      }
    }
    off += len;
  }
  return out;
}

function readComment(data: Buffer, at: number, end: number, frame: number): PacketComment {
  while (at + 4 <= end) {
    const code = data.readUInt16LE(at);
    const olen = data.readUInt16LE(at + 2);
    if (code === OPT_END) break;
    if (code === OPT_COMMENT) {
      const text = data.toString('utf8', at + 4, at + 4 + olen);
      try {
        return JSON.parse(text) as PacketComment;
      } catch {
        throw new CaptureFormatError(`packet ${frame}: comment is not JSON`);
      }
    }
    at += 4 + olen + ((4 - (olen % 4)) % 4);
  }
  throw new CaptureFormatError(`packet ${frame} has no comment`);
}
