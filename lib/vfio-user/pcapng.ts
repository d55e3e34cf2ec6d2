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

// ---- writer ---------------------------------------------------------------------

const BLOCK_IDB = 1;
const LINKTYPE_ETHERNET = 1;
const SERVER_PORT = 50000;
const CLIENT_PORT_BASE = 40000;
/** Messages larger than this are cut into several packets (FORMAT.md section 3). */
export const MAX_SEGMENT = 65000;
const CLIENT_MAC = Buffer.from([2, 0, 0, 0, 0, 1]);
const SERVER_MAC = Buffer.from([2, 0, 0, 0, 0, 2]);

function pad4(n: number): number {
  return (4 - (n % 4)) % 4;
}

function option(code: number, value: Buffer): Buffer {
  const b = Buffer.alloc(4 + value.length + pad4(value.length));
  b.writeUInt16LE(code, 0);
  b.writeUInt16LE(value.length, 2);
  value.copy(b, 4);
  return b;
}

function block(type: number, body: Buffer): Buffer {
  const len = 12 + body.length;
  const b = Buffer.alloc(len);
  b.writeUInt32LE(type, 0);
  b.writeUInt32LE(len, 4);
  body.copy(b, 8);
  b.writeUInt32LE(len, len - 4);
  return b;
}

/** One's-complement sum of 16-bit big-endian words (IPv4/TCP checksums). */
function onesSum(buf: Buffer, start: number, end: number, sum = 0): number {
  for (let i = start; i + 1 < end; i += 2) sum += buf.readUInt16BE(i);
  if ((end - start) % 2) sum += buf[end - 1]! << 8;
  while (sum > 0xffff) sum = (sum & 0xffff) + (sum >>> 16);
  return sum;
}

/** Wraps messages in synthetic Ethernet/IPv4/TCP frames and writes the pcapng (FORMAT.md). */
export class CaptureWriter {
  readonly #fd: number;
  #packets = 0;
  /** Per connection: next sequence number of each direction. */
  readonly #seq = new Map<number, { c2s: number; s2c: number }>();

  constructor(path: string, description: string, application = 'ernic-vfu record') {
    this.#fd = fs.openSync(path, 'w');
    const shb = Buffer.alloc(16);
    shb.writeUInt32LE(0x1a2b3c4d, 0);
    shb.writeUInt16LE(1, 4);
    shb.writeUInt16LE(0, 6);
    shb.writeInt32LE(-1, 8);
    shb.writeInt32LE(-1, 12);
    const shbOpts = Buffer.concat([option(4 /* shb_userappl */, Buffer.from(application)), option(0, Buffer.alloc(0))]);
    this.#write(block(BLOCK_SHB, Buffer.concat([shb, shbOpts])));
    const idb = Buffer.alloc(8);
    idb.writeUInt16LE(LINKTYPE_ETHERNET, 0);
    idb.writeUInt32LE(0, 4);
    const idbOpts = Buffer.concat([
      option(2 /* if_name */, Buffer.from('vfio-user')),
      option(3 /* if_description */, Buffer.from(description)),
      option(9 /* if_tsresol */, Buffer.from([6])),
      option(0, Buffer.alloc(0)),
    ]);
    this.#write(block(BLOCK_IDB, Buffer.concat([idb, idbOpts])));
  }

  /** Frames written so far. */
  get packets(): number {
    return this.#packets;
  }

  /**
   * Record one message (or, for `incomplete`/`raw`, the bytes that came). `comment`
   * is written as the packet's JSON comment; segments get seg/nseg added.
   */
  writeMessage(comment: PacketComment, bytes: Buffer, timestampUs: number): void {
    const nseg = Math.max(1, Math.ceil(bytes.length / MAX_SEGMENT));
    for (let seg = 0; seg < nseg; seg++) {
      const part = bytes.subarray(seg * MAX_SEGMENT, Math.min(bytes.length, (seg + 1) * MAX_SEGMENT));
      const c: PacketComment = nseg > 1 ? { ...comment, seg, nseg, fds: seg === 0 ? comment.fds : [] } : comment;
      this.#writePacket(c, part, timestampUs);
    }
  }

  close(): void {
    fs.closeSync(this.#fd);
  }

  #writePacket(comment: PacketComment, payload: Buffer, timestampUs: number): void {
    const conn = comment.conn;
    let s = this.#seq.get(conn);
    if (!s) { s = { c2s: 1, s2c: 1 }; this.#seq.set(conn, s); }
    const c2s = comment.dir === 'c2s';
    const seq = c2s ? s.c2s : s.s2c;
    const ack = c2s ? s.s2c : s.c2s;
    if (c2s) s.c2s = (s.c2s + payload.length) >>> 0; else s.s2c = (s.s2c + payload.length) >>> 0;
    const frame = Buffer.alloc(SYNTHETIC_HEADERS + payload.length);
    // Ethernet II
    (c2s ? SERVER_MAC : CLIENT_MAC).copy(frame, 0);
    (c2s ? CLIENT_MAC : SERVER_MAC).copy(frame, 6);
    frame.writeUInt16BE(0x0800, 12);
    // IPv4: 127.0.0.1 both ways, DF, TTL 64, TCP
    const ip = 14;
    frame[ip] = 0x45;
    frame.writeUInt16BE(20 + 20 + payload.length, ip + 2);
    frame.writeUInt16BE(this.#packets % 65536, ip + 4);
    frame.writeUInt16BE(0x4000, ip + 6);
    frame[ip + 8] = 64;
    frame[ip + 9] = 6;
    frame.writeUInt32BE(0x7f000001, ip + 12);
    frame.writeUInt32BE(0x7f000001, ip + 16);
    frame.writeUInt16BE(~onesSum(frame, ip, ip + 20) & 0xffff, ip + 10);
    // TCP: PSH+ACK, window 65535
    const tcp = 34;
    const clientPort = CLIENT_PORT_BASE + conn;
    frame.writeUInt16BE(c2s ? clientPort : SERVER_PORT, tcp);
    frame.writeUInt16BE(c2s ? SERVER_PORT : clientPort, tcp + 2);
    frame.writeUInt32BE(seq, tcp + 4);
    frame.writeUInt32BE(ack, tcp + 8);
    frame[tcp + 12] = 5 << 4;
    frame[tcp + 13] = 0x18;
    frame.writeUInt16BE(65535, tcp + 14);
    payload.copy(frame, SYNTHETIC_HEADERS);
    const tcpLen = 20 + payload.length;
    const pseudo = Buffer.alloc(12);
    pseudo.writeUInt32BE(0x7f000001, 0);
    pseudo.writeUInt32BE(0x7f000001, 4);
    pseudo[9] = 6;
    pseudo.writeUInt16BE(tcpLen, 10);
    const sum = onesSum(frame, tcp, tcp + tcpLen, onesSum(pseudo, 0, 12));
    frame.writeUInt16BE(~sum & 0xffff || 0xffff, tcp + 16);
    // Enhanced Packet Block
    const head = Buffer.alloc(20);
    head.writeUInt32LE(0, 0);
    head.writeUInt32LE(Math.floor(timestampUs / 0x100000000), 4);
    head.writeUInt32LE(timestampUs % 0x100000000, 8);
    head.writeUInt32LE(frame.length, 12);
    head.writeUInt32LE(frame.length, 16);
    const opts = Buffer.concat([option(OPT_COMMENT, Buffer.from(JSON.stringify(comment))), option(OPT_END, Buffer.alloc(0))]);
    this.#write(block(BLOCK_EPB, Buffer.concat([head, frame, Buffer.alloc(pad4(frame.length)), opts])));
    this.#packets++;
  }

  #write(b: Buffer): void {
    fs.writeSync(this.#fd, b);
  }
}

/** Describe an fd the way captures do (FORMAT.md section 4): fstat and its /proc link. */
export function describeFd(fd: number): CapturedFd {
  let link = '';
  try { link = fs.readlinkSync(`/proc/self/fd/${fd}`); } catch { /* closed */ }
  let st: fs.Stats | null = null;
  try { st = fs.fstatSync(fd); } catch { /* closed */ }
  if (link.startsWith('/memfd:')) return { kind: 'memfd', size: st ? st.size : null, name: link.slice(7).replace(/ \(deleted\)$/, '') };
  if (link === 'anon_inode:[eventfd]') return { kind: 'eventfd', size: null };
  if (st?.isSocket()) return { kind: 'socket', size: null };
  if (st?.isFile()) return { kind: 'file', size: st.size, path: link };
  return { kind: 'other', size: null, link };
}
