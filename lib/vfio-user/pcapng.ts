// Reader for vfio-user captures (fixtures/vfio-user/FORMAT.md): pcapng with one
// message per Enhanced Packet Block, wrapped in synthetic Ethernet/IPv4/TCP
// headers, and a JSON comment describing the message and its fds.

import * as fs from 'fs';
import { z } from 'zod';
import { getField, le, setField, setFieldBig, setRawBytes } from '../../protocol/field';
import {
  ETH_P_IP,
  ethhdr,
  IP_DF,
  iphdr,
  IPPROTO_TCP,
  ipv4_pseudo_header,
  IPV4_IHL_UNIT,
  IPV4_VERSION_SHIFT,
  TCP_DOFF_SHIFT,
  TCP_FLAG_ACK,
  TCP_FLAG_PSH,
  tcphdr,
} from '../net/headers';

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

// pcapng structures (draft-ietf-opsawg-pcapng) as named-offset tables, all
// little-endian (we write and read only that byte order). Each block is the
// 8-byte header, a body, and the total length again in its last 4 bytes.

/** Block header: type and total length (header, body and trailer). */
const pcapng_block = { block_type: le(0, 4), block_total_length: le(4, 4), SIZE: 8 } as const;
/** Block trailer: the total length again, in the block's last 4 bytes. */
const pcapng_block_trailer = { block_total_length: le(0, 4), SIZE: 4 } as const;
/** Section Header Block body; options follow. */
const pcapng_shb = {
  byte_order_magic: le(0, 4),
  major_version: le(4, 2),
  minor_version: le(6, 2),
  section_length: le(8, 8),
  SIZE: 16,
} as const;
/** Interface Description Block body; options follow. */
const pcapng_idb = { linktype: le(0, 2), reserved: le(2, 2), snaplen: le(4, 4), SIZE: 8 } as const;
/** Enhanced Packet Block body; the packet (padded to 4 bytes) and options follow. */
const pcapng_epb = {
  interface_id: le(0, 4),
  timestamp_high: le(4, 4),
  timestamp_low: le(8, 4),
  captured_len: le(12, 4),
  original_len: le(16, 4),
  SIZE: 20,
} as const;
/** Option header; the value (padded to 4 bytes) follows. */
const pcapng_option = { option_code: le(0, 2), option_length: le(2, 2), SIZE: 4 } as const;

const BLOCK_SHB = 0x0a0d0d0a;
const BLOCK_IDB = 1;
const BLOCK_EPB = 6;
const BYTE_ORDER_MAGIC = 0x1a2b3c4d;
/** section_length -1: not specified. */
const SECTION_LENGTH_UNSPECIFIED = 0xffffffffffffffffn;
const OPT_END = 0;
const OPT_COMMENT = 1;
const SHB_USERAPPL = 4;
const IF_NAME = 2;
const IF_DESCRIPTION = 3;
const IF_TSRESOL = 9;
/** Smallest block: header and trailer, no body. */
const MIN_BLOCK = pcapng_block.SIZE + pcapng_block_trailer.SIZE;
/** Where an EPB's packet starts, from the start of the block. */
const EPB_PACKET = pcapng_block.SIZE + pcapng_epb.SIZE;
/** Ethernet (14) + IPv4 (20) + TCP (20). */
const SYNTHETIC_HEADERS = ethhdr.SIZE + iphdr.SIZE + tcphdr.SIZE;

export class CaptureFormatError extends Error {}

/** Parse a capture file into its messages, in file order. */
export function readCapture(path: string): CapturedMessage[] {
  return parseCapture(fs.readFileSync(path));
}

export function parseCapture(data: Buffer): CapturedMessage[] {
  if (
    data.length < pcapng_block.SIZE + pcapng_shb.byte_order_magic.size ||
    getField(data, 0, pcapng_block.block_type) !== BLOCK_SHB
  ) {
    throw new CaptureFormatError('not a pcapng file (no section header)');
  }
  if (getField(data, pcapng_block.SIZE, pcapng_shb.byte_order_magic) !== BYTE_ORDER_MAGIC) {
    throw new CaptureFormatError('only little-endian pcapng is supported');
  }
  const out: CapturedMessage[] = [];
  let pending: { frame: number; timestampUs: number; comment: PacketComment; parts: Buffer[] } | null = null;
  let frame = 0;
  let off = 0;
  while (off < data.length) {
    if (off + MIN_BLOCK > data.length) throw new CaptureFormatError(`truncated block at ${off}`);
    const type = getField(data, off, pcapng_block.block_type);
    const len = getField(data, off, pcapng_block.block_total_length);
    if (len < MIN_BLOCK || len % 4 !== 0 || off + len > data.length)
      throw new CaptureFormatError(`bad block length ${len} at ${off}`);
    if (type === BLOCK_EPB) {
      frame++;
      const body = off + pcapng_block.SIZE;
      if (len < EPB_PACKET + pcapng_block_trailer.SIZE)
        throw new CaptureFormatError(`packet ${frame} overruns its block`);
      const tsHigh = getField(data, body, pcapng_epb.timestamp_high);
      const tsLow = getField(data, body, pcapng_epb.timestamp_low);
      const caplen = getField(data, body, pcapng_epb.captured_len);
      const pkt = data.subarray(off + EPB_PACKET, off + EPB_PACKET + caplen);
      if (EPB_PACKET + caplen > len) throw new CaptureFormatError(`packet ${frame} overruns its block`);
      const comment = readComment(
        data,
        off + EPB_PACKET + caplen + pad4(caplen),
        off + len - pcapng_block_trailer.SIZE,
        frame,
      );
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
        out.push({
          frame: pending.frame,
          timestampUs: pending.timestampUs,
          comment: pending.comment,
          bytes: Buffer.concat(pending.parts),
        });
        pending = null;
      }
    }
    off += len;
  }
  return out;
}

function readComment(data: Buffer, at: number, end: number, frame: number): PacketComment {
  while (at + pcapng_option.SIZE <= end) {
    const code = getField(data, at, pcapng_option.option_code);
    const olen = getField(data, at, pcapng_option.option_length);
    if (code === OPT_END) break;
    if (at + pcapng_option.SIZE + olen > end)
      throw new CaptureFormatError(`packet ${frame}: option ${code} overruns its block`);
    if (code === OPT_COMMENT) {
      const text = data.toString('utf8', at + pcapng_option.SIZE, at + pcapng_option.SIZE + olen);
      let value: unknown;
      try {
        value = JSON.parse(text);
      } catch {
        throw new CaptureFormatError(`packet ${frame}: comment is not JSON`);
      }
      return checkComment(value, frame);
    }
    at += pcapng_option.SIZE + olen + pad4(olen);
  }
  throw new CaptureFormatError(`packet ${frame} has no comment`);
}

/** The writer gives connection n the client port 40000 + n. */
const MAX_CONN = 0xffff - 40000;
/** A name, path or link from a capture; far more than Linux gives (PATH_MAX 4096). */
const MAX_TEXT = 4096;
/** SCM_RIGHTS carries at most 253 descriptors (SCM_MAX_FD). */
const MAX_FDS = 253;
const uint = (max: number) => z.number().int().min(0).max(max);
const capturedFdSchema = z.object({
  kind: z.enum(['memfd', 'eventfd', 'socket', 'file', 'other']),
  size: uint(Number.MAX_SAFE_INTEGER).nullable().optional(),
  name: z.string().max(MAX_TEXT).optional(),
  path: z.string().max(MAX_TEXT).optional(),
  link: z.string().max(MAX_TEXT).optional(),
});
const commentSchema = z
  .object({
    dir: z.enum(['c2s', 's2c']),
    conn: uint(MAX_CONN),
    id: uint(0xffff),
    cmd: uint(0xffff).nullable(),
    // Printed by `show`: letters, digits and _ only, so a capture cannot put control characters on a terminal.
    name: z.string().regex(/^[A-Za-z0-9_]{1,40}$/),
    type: z.enum(['command', 'reply']),
    size: uint(0xffffffff),
    flags: uint(0xffffffff),
    error: uint(0xffffffff),
    fds: z.array(capturedFdSchema).max(MAX_FDS),
    seg: uint(0xffff).optional(),
    nseg: uint(0xffff).min(1).optional(),
    incomplete: z.boolean().optional(),
    raw: z.boolean().optional(),
  })
  .refine((c) => c.seg === undefined || (c.nseg !== undefined && c.seg < c.nseg), {
    message: 'seg must be below nseg',
  });

/**
 * A packet comment from a file: every field checked (type and range) before
 * anything reads it. The object itself is kept, so that a rewrite is byte for byte.
 */
function checkComment(value: unknown, frame: number): PacketComment {
  const r = commentSchema.safeParse(value);
  if (!r.success) {
    const i = r.error.issues[0]!;
    throw new CaptureFormatError(
      `packet ${frame}: comment${i.path.length ? ` ${i.path.join('.')}` : ''}: ${i.message}`,
    );
  }
  return value as PacketComment;
}

// ---- writer ---------------------------------------------------------------------

const LINKTYPE_ETHERNET = 1;
const SERVER_PORT = 50000;
const CLIENT_PORT_BASE = 40000;
/** Messages larger than this are cut into several packets (FORMAT.md section 3). */
const MAX_SEGMENT = 65000;
const CLIENT_MAC = Buffer.from([2, 0, 0, 0, 0, 1]);
const SERVER_MAC = Buffer.from([2, 0, 0, 0, 0, 2]);
/** 127.0.0.1, both ends of every synthetic frame. */
const LOOPBACK = Buffer.from([127, 0, 0, 1]);
const IPV4_HEADER = (4 << IPV4_VERSION_SHIFT) | (iphdr.SIZE / IPV4_IHL_UNIT);
const TTL = 64;
const TCP_DOFF = (tcphdr.SIZE / 4) << TCP_DOFF_SHIFT;
const TCP_WINDOW = 65535;

function pad4(n: number): number {
  return (4 - (n % 4)) % 4;
}

function option(code: number, value: Buffer): Buffer {
  const b = Buffer.alloc(pcapng_option.SIZE + value.length + pad4(value.length));
  setField(b, 0, pcapng_option.option_code, code);
  setField(b, 0, pcapng_option.option_length, value.length);
  value.copy(b, pcapng_option.SIZE);
  return b;
}

function block(type: number, body: Buffer): Buffer {
  const len = MIN_BLOCK + body.length;
  const b = Buffer.alloc(len);
  setField(b, 0, pcapng_block.block_type, type);
  setField(b, 0, pcapng_block.block_total_length, len);
  body.copy(b, pcapng_block.SIZE);
  setField(b, len - pcapng_block_trailer.SIZE, pcapng_block_trailer.block_total_length, len);
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
    const shb = Buffer.alloc(pcapng_shb.SIZE);
    setField(shb, 0, pcapng_shb.byte_order_magic, BYTE_ORDER_MAGIC);
    setField(shb, 0, pcapng_shb.major_version, 1);
    setField(shb, 0, pcapng_shb.minor_version, 0);
    setFieldBig(shb, 0, pcapng_shb.section_length, SECTION_LENGTH_UNSPECIFIED);
    const shbOpts = Buffer.concat([option(SHB_USERAPPL, Buffer.from(application)), option(OPT_END, Buffer.alloc(0))]);
    this.#write(block(BLOCK_SHB, Buffer.concat([shb, shbOpts])));
    const idb = Buffer.alloc(pcapng_idb.SIZE);
    setField(idb, 0, pcapng_idb.linktype, LINKTYPE_ETHERNET);
    setField(idb, 0, pcapng_idb.snaplen, 0);
    const idbOpts = Buffer.concat([
      option(IF_NAME, Buffer.from('vfio-user')),
      option(IF_DESCRIPTION, Buffer.from(description)),
      option(IF_TSRESOL, Buffer.from([6])),
      option(OPT_END, Buffer.alloc(0)),
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
    if (!s) {
      s = { c2s: 1, s2c: 1 };
      this.#seq.set(conn, s);
    }
    const c2s = comment.dir === 'c2s';
    const seq = c2s ? s.c2s : s.s2c;
    const ack = c2s ? s.s2c : s.c2s;
    if (c2s) s.c2s = (s.c2s + payload.length) >>> 0;
    else s.s2c = (s.s2c + payload.length) >>> 0;
    const frame = Buffer.alloc(SYNTHETIC_HEADERS + payload.length);
    // Ethernet II
    setRawBytes(frame, 0, ethhdr.h_dest, c2s ? SERVER_MAC : CLIENT_MAC);
    setRawBytes(frame, 0, ethhdr.h_source, c2s ? CLIENT_MAC : SERVER_MAC);
    setField(frame, 0, ethhdr.h_proto, ETH_P_IP);
    // IPv4: 127.0.0.1 both ways, DF, TTL 64, TCP
    const ip = ethhdr.SIZE;
    const tcpLen = tcphdr.SIZE + payload.length;
    setField(frame, ip, iphdr.version_ihl, IPV4_HEADER);
    setField(frame, ip, iphdr.tot_len, iphdr.SIZE + tcpLen);
    setField(frame, ip, iphdr.id, this.#packets % 65536);
    setField(frame, ip, iphdr.frag_off, IP_DF);
    setField(frame, ip, iphdr.ttl, TTL);
    setField(frame, ip, iphdr.protocol, IPPROTO_TCP);
    setRawBytes(frame, ip, iphdr.saddr, LOOPBACK);
    setRawBytes(frame, ip, iphdr.daddr, LOOPBACK);
    setField(frame, ip, iphdr.check, ~onesSum(frame, ip, ip + iphdr.SIZE) & 0xffff);
    // TCP: PSH+ACK, window 65535
    const tcp = ip + iphdr.SIZE;
    const clientPort = CLIENT_PORT_BASE + conn;
    setField(frame, tcp, tcphdr.source, c2s ? clientPort : SERVER_PORT);
    setField(frame, tcp, tcphdr.dest, c2s ? SERVER_PORT : clientPort);
    setField(frame, tcp, tcphdr.seq, seq);
    setField(frame, tcp, tcphdr.ack_seq, ack);
    setField(frame, tcp, tcphdr.doff_res, TCP_DOFF);
    setField(frame, tcp, tcphdr.flags, TCP_FLAG_PSH | TCP_FLAG_ACK);
    setField(frame, tcp, tcphdr.window, TCP_WINDOW);
    payload.copy(frame, SYNTHETIC_HEADERS);
    const pseudo = Buffer.alloc(ipv4_pseudo_header.SIZE);
    setRawBytes(pseudo, 0, ipv4_pseudo_header.saddr, LOOPBACK);
    setRawBytes(pseudo, 0, ipv4_pseudo_header.daddr, LOOPBACK);
    setField(pseudo, 0, ipv4_pseudo_header.protocol, IPPROTO_TCP);
    setField(pseudo, 0, ipv4_pseudo_header.len, tcpLen);
    const sum = onesSum(frame, tcp, tcp + tcpLen, onesSum(pseudo, 0, ipv4_pseudo_header.SIZE));
    setField(frame, tcp, tcphdr.check, ~sum & 0xffff || 0xffff);
    // Enhanced Packet Block
    const head = Buffer.alloc(pcapng_epb.SIZE);
    setField(head, 0, pcapng_epb.interface_id, 0);
    setField(head, 0, pcapng_epb.timestamp_high, Math.floor(timestampUs / 0x100000000));
    setField(head, 0, pcapng_epb.timestamp_low, timestampUs % 0x100000000);
    setField(head, 0, pcapng_epb.captured_len, frame.length);
    setField(head, 0, pcapng_epb.original_len, frame.length);
    const opts = Buffer.concat([
      option(OPT_COMMENT, Buffer.from(JSON.stringify(comment))),
      option(OPT_END, Buffer.alloc(0)),
    ]);
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
  try {
    link = fs.readlinkSync(`/proc/self/fd/${fd}`);
  } catch {
    /* closed */
  }
  let st: fs.Stats | null = null;
  try {
    st = fs.fstatSync(fd);
  } catch {
    /* closed */
  }
  if (link.startsWith('/memfd:'))
    return { kind: 'memfd', size: st ? st.size : null, name: link.slice(7).replace(/ \(deleted\)$/, '') };
  if (link === 'anon_inode:[eventfd]') return { kind: 'eventfd', size: null };
  if (st?.isSocket()) return { kind: 'socket', size: null };
  if (st?.isFile()) return { kind: 'file', size: st.size, path: link };
  return { kind: 'other', size: null, link };
}
