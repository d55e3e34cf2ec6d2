// pcapng files for spec/tools/wireshark.spec.ts, read and written here so that the expectations do not come from
// tshark: the packets of a capture with their comments, a synthetic capture of TCP segments on loopback, and the
// vfio-user messages (and their recorder comments) to fill one with.

import { expect } from 'chai';
import * as fs from 'fs';

export interface Packet {
  frame: number;
  comment: string | null;
  payload: Buffer;
}

export function readPcapng(file: string): Packet[] {
  const data = fs.readFileSync(file);
  const out: Packet[] = [];
  let off = 0;
  while (off + 12 <= data.length) {
    const type = data.readUInt32LE(off);
    const len = data.readUInt32LE(off + 4);
    expect(len, `block length at ${off}`).to.be.greaterThanOrEqual(12);
    if (type === 0x0a0d0d0a) {
      expect(data.readUInt32LE(off + 8), 'byte-order magic').to.equal(0x1a2b3c4d);
    } else if (type === 6) {
      const caplen = data.readUInt32LE(off + 20);
      const frame = data.subarray(off + 28, off + 28 + caplen);
      let opt = off + 28 + caplen + ((4 - (caplen % 4)) % 4);
      let comment: string | null = null;
      while (opt + 4 <= off + len - 4) {
        const code = data.readUInt16LE(opt);
        const olen = data.readUInt16LE(opt + 2);
        if (code === 0) break;
        if (code === 1 && comment === null) comment = data.subarray(opt + 4, opt + 4 + olen).toString('utf8');
        opt += 4 + olen + ((4 - (olen % 4)) % 4);
      }
      out.push({ frame: out.length + 1, comment, payload: frame.subarray(54) });
    }
    off += len;
  }
  return out;
}

function pad4(b: Buffer): Buffer {
  const p = (4 - (b.length % 4)) % 4;
  return p ? Buffer.concat([b, Buffer.alloc(p)]) : b;
}

function block(type: number, body: Buffer): Buffer {
  const b = pad4(body);
  const head = Buffer.alloc(8);
  head.writeUInt32LE(type, 0);
  head.writeUInt32LE(b.length + 12, 4);
  const tail = Buffer.alloc(4);
  tail.writeUInt32LE(b.length + 12, 0);
  return Buffer.concat([head, b, tail]);
}

function option(code: number, value: Buffer): Buffer {
  const h = Buffer.alloc(4);
  h.writeUInt16LE(code, 0);
  h.writeUInt16LE(value.length, 2);
  return pad4(Buffer.concat([h, value]));
}

const END_OPT = Buffer.alloc(4);

function ipChecksum(b: Buffer): number {
  let sum = 0;
  for (let i = 0; i < b.length; i += 2) sum += b.readUInt16BE(i);
  while (sum > 0xffff) sum = (sum & 0xffff) + (sum >>> 16);
  return ~sum & 0xffff;
}

export interface SynthPacket {
  conn: number;
  dir: 'c2s' | 's2c';
  payload: Buffer;
  comment?: string | null;
  clientPort?: number;
  serverPort?: number;
}

export function writePcapng(file: string, packets: SynthPacket[]): void {
  const shbBody = Buffer.alloc(16);
  shbBody.writeUInt32LE(0x1a2b3c4d, 0);
  shbBody.writeUInt16LE(1, 4);
  shbBody.writeUInt16LE(0, 6);
  shbBody.writeBigInt64LE(-1n, 8);
  const idbHead = Buffer.alloc(8);
  idbHead.writeUInt16LE(1, 0); // LINKTYPE_ETHERNET
  const parts = [
    block(0x0a0d0d0a, Buffer.concat([shbBody, END_OPT])),
    block(1, Buffer.concat([idbHead, option(9, Buffer.from([6])), END_OPT])),
  ];
  const next = new Map<string, number>(); // `${conn}/${dir}` -> next seq
  let t = 1_700_000_000_000_000n;
  packets.forEach((p, i) => {
    const cport = p.clientPort ?? 40000 + p.conn;
    const sport = p.serverPort ?? 50000;
    const key = `${p.conn}/${p.dir}`;
    const other = `${p.conn}/${p.dir === 'c2s' ? 's2c' : 'c2s'}`;
    const seq = next.get(key) ?? 1;
    const ack = next.get(other) ?? 1;
    next.set(key, seq + p.payload.length);
    const eth = Buffer.alloc(14);
    const client = Buffer.from([2, 0, 0, 0, 0, 1]);
    const server = Buffer.from([2, 0, 0, 0, 0, 2]);
    (p.dir === 'c2s' ? server : client).copy(eth, 0);
    (p.dir === 'c2s' ? client : server).copy(eth, 6);
    eth.writeUInt16BE(0x0800, 12);
    const ip = Buffer.alloc(20);
    ip[0] = 0x45;
    ip.writeUInt16BE(40 + p.payload.length, 2);
    ip.writeUInt16BE(i & 0xffff, 4);
    ip.writeUInt16BE(0x4000, 6);
    ip[8] = 64;
    ip[9] = 6;
    Buffer.from([127, 0, 0, 1]).copy(ip, 12);
    Buffer.from([127, 0, 0, 1]).copy(ip, 16);
    ip.writeUInt16BE(ipChecksum(ip), 10);
    const tcp = Buffer.alloc(20);
    tcp.writeUInt16BE(p.dir === 'c2s' ? cport : sport, 0);
    tcp.writeUInt16BE(p.dir === 'c2s' ? sport : cport, 2);
    tcp.writeUInt32BE(seq >>> 0, 4);
    tcp.writeUInt32BE(ack >>> 0, 8);
    tcp[12] = 0x50;
    tcp[13] = 0x18; // PSH+ACK
    tcp.writeUInt16BE(65535, 14);
    const frame = Buffer.concat([eth, ip, tcp, p.payload]);
    const epb = Buffer.alloc(20);
    epb.writeUInt32LE(0, 0);
    epb.writeUInt32LE(Number(t >> 32n), 4);
    epb.writeUInt32LE(Number(t & 0xffffffffn), 8);
    epb.writeUInt32LE(frame.length, 12);
    epb.writeUInt32LE(frame.length, 16);
    t += 100n;
    const opts =
      p.comment === null || p.comment === undefined ? [END_OPT] : [option(1, Buffer.from(p.comment, 'utf8')), END_OPT];
    parts.push(block(6, Buffer.concat([epb, pad4(frame), ...opts])));
  });
  fs.writeFileSync(file, Buffer.concat(parts));
}

/** One vfio-user message: header (msg_size = 16 + payload unless given) + payload. */
export function msg(
  id: number,
  cmd: number,
  flags: number,
  payload: Buffer,
  opts: { size?: number; error?: number } = {},
): Buffer {
  const h = Buffer.alloc(16);
  h.writeUInt16LE(id, 0);
  h.writeUInt16LE(cmd, 2);
  h.writeUInt32LE(opts.size ?? 16 + payload.length, 4);
  h.writeUInt32LE(flags, 8);
  h.writeUInt32LE(opts.error ?? 0, 12);
  return Buffer.concat([h, payload]);
}

export function le(...fieldsSpec: Array<[number, number | bigint]>): Buffer {
  const out: Buffer[] = [];
  for (const [size, v] of fieldsSpec) {
    const b = Buffer.alloc(size);
    if (size === 1) b.writeUInt8(Number(v), 0);
    else if (size === 2) b.writeUInt16LE(Number(v), 0);
    else if (size === 4) b.writeUInt32LE(Number(v), 0);
    else if (size === 8) b.writeBigUInt64LE(BigInt(v), 0);
    else throw new Error(`bad size ${size}`);
    out.push(b);
  }
  return Buffer.concat(out);
}

export function comment(dir: string, conn: number, m: Buffer, extra: Record<string, unknown> = {}): string {
  return JSON.stringify({
    dir,
    conn,
    id: m.readUInt16LE(0),
    cmd: m.readUInt16LE(2),
    name: 'X',
    type: (m.readUInt32LE(8) & 0xf) === 1 ? 'reply' : 'command',
    size: m.readUInt32LE(4),
    flags: m.readUInt32LE(8),
    error: m.readUInt32LE(12),
    fds: [],
    ...extra,
  });
}
