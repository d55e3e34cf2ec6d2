// A test-only guest for the S3 store's TCP endpoint: builds Ethernet/IPv4
// frames byte by byte (its own checksum, not the code under test's) and
// decodes what the endpoint sends back into plain records.

export const GUEST_MAC = Buffer.from([0x52, 0x54, 0x00, 0x12, 0x34, 0x56]);
export const GUEST_IP = Buffer.from([192, 168, 200, 10]);
export const STORE_IP = Buffer.from([192, 168, 200, 1]);
export const STORE_MAC = Buffer.from([0x02, 0x53, 192, 168, 200, 1]);

export const FIN = 0x01,
  SYN = 0x02,
  RST = 0x04,
  PSH = 0x08,
  ACK = 0x10;

function sum16(b: Buffer, init = 0): number {
  let s = init;
  for (let i = 0; i < b.length; i += 2) s += (b[i]! << 8) | (i + 1 < b.length ? b[i + 1]! : 0);
  return fold(s);
}

function csum(b: Buffer, init = 0): number {
  return ~sum16(b, init) & 0xffff;
}

function eth(dst: Buffer, type: number, body: Buffer): Buffer {
  const h = Buffer.alloc(14);
  dst.copy(h, 0);
  GUEST_MAC.copy(h, 6);
  h.writeUInt16BE(type, 12);
  return Buffer.concat([h, body]);
}

function ipv4(proto: number, l4: Buffer, src = GUEST_IP, dst = STORE_IP): Buffer {
  const h = Buffer.alloc(20);
  h[0] = 0x45;
  h.writeUInt16BE(20 + l4.length, 2);
  h.writeUInt16BE(0x4000, 6);
  h[8] = 64;
  h[9] = proto;
  src.copy(h, 12);
  dst.copy(h, 16);
  h.writeUInt16BE(csum(h), 10);
  return eth(STORE_MAC, 0x0800, Buffer.concat([h, l4]));
}

export function arpRequest(target: Buffer): Buffer {
  const a = Buffer.alloc(28);
  a.writeUInt16BE(1, 0);
  a.writeUInt16BE(0x0800, 2);
  a[4] = 6;
  a[5] = 4;
  a.writeUInt16BE(1, 6);
  GUEST_MAC.copy(a, 8);
  GUEST_IP.copy(a, 14);
  target.copy(a, 24);
  return eth(Buffer.alloc(6, 0xff), 0x0806, a);
}

export function echoRequest(id: number, seq: number, data: Buffer): Buffer {
  const i = Buffer.alloc(8);
  i[0] = 8;
  i.writeUInt16BE(id, 4);
  i.writeUInt16BE(seq, 6);
  const m = Buffer.concat([i, data]);
  m.writeUInt16BE(csum(m), 2);
  return ipv4(1, m);
}

interface Seg {
  sport: number;
  dport: number;
  seq: number;
  ack: number;
  flags: number;
  window: number;
  mss?: number;
  /** Window-scale shift: the option goes after the MSS, behind a NOP. */
  wscale?: number;
  data?: Buffer;
}

/** A TCP/IPv4 segment's fields, read into a reused record (viewTcp): what a fast receiver needs. */
export class TcpView {
  /** Both checksums good. */
  ok = false;
  dport = 0;
  seq = 0;
  ack = 0;
  flags = 0;
  window = 0;
  /** Where the payload starts in the frame, and its length. */
  dataAt = 0;
  dataLen = 0;
}

/**
 * Read a TCP/IPv4 frame into `v` without allocating, checking the IPv4
 * header's checksum by summing it and the TCP checksum by the NIC's complete
 * sum after the Ethernet header (CHECKSUM_COMPLETE, as Linux checks it):
 * a valid IPv4 header sums to all ones, so the complete sum is the TCP
 * segment's own, and with the pseudo-header it must be all ones too. False
 * when the frame is not TCP/IPv4.
 */
export function viewTcp(f: Buffer, complete: number, v: TcpView): boolean {
  if (f.length < 14 + 20 || f.readUInt16BE(12) !== 0x0800 || f[14 + 9] !== 6) return false;
  const ihl = (f[14]! & 0xf) * 4;
  const total = f.readUInt16BE(14 + 2);
  if (ihl < 20 || total < ihl + 20 || 14 + total > f.length) return false;
  let ip = 0;
  for (let i = 14; i < 14 + ihl; i += 2) ip += f.readUInt16BE(i);
  const tcpLen = total - ihl;
  // pseudo-header: source and destination address, protocol, TCP length
  let s = complete + 6 + tcpLen;
  for (let i = 14 + 12; i < 14 + 20; i += 2) s += f.readUInt16BE(i);
  v.ok = fold(ip) === 0xffff && fold(s) === 0xffff;
  const t = 14 + ihl;
  v.dport = f.readUInt16BE(t + 2);
  v.seq = f.readUInt32BE(t + 4);
  v.ack = f.readUInt32BE(t + 8);
  v.flags = f[t + 13]!;
  v.window = f.readUInt16BE(t + 14);
  v.dataAt = t + (f[t + 12]! >> 4) * 4;
  v.dataLen = 14 + total - v.dataAt;
  return v.dataLen >= 0;
}

function fold(s: number): number {
  while (s > 0xffff) s = (s & 0xffff) + (s >>> 16);
  return s;
}

export function tcp(s: Seg): Buffer {
  const opt = Buffer.concat([
    s.mss !== undefined ? Buffer.from([2, 4, s.mss >> 8, s.mss & 0xff]) : Buffer.alloc(0),
    s.wscale !== undefined ? Buffer.from([1, 3, 3, s.wscale]) : Buffer.alloc(0),
  ]);
  const h = Buffer.alloc(20);
  h.writeUInt16BE(s.sport, 0);
  h.writeUInt16BE(s.dport, 2);
  h.writeUInt32BE(s.seq >>> 0, 4);
  h.writeUInt32BE(s.ack >>> 0, 8);
  h[12] = ((20 + opt.length) / 4) << 4;
  h[13] = s.flags;
  h.writeUInt16BE(s.window, 14);
  const seg = Buffer.concat([h, opt, s.data ?? Buffer.alloc(0)]);
  const ph = Buffer.alloc(12);
  GUEST_IP.copy(ph, 0);
  STORE_IP.copy(ph, 4);
  ph[9] = 6;
  ph.writeUInt16BE(seg.length, 10);
  seg.writeUInt16BE(csum(seg, sum16(ph)), 16);
  return ipv4(6, seg);
}

/** A frame the endpoint sent, decoded (TCP fields when it is TCP). */
export interface Out {
  dst: Buffer;
  src: Buffer;
  type: number;
  ipOk?: boolean;
  proto?: number;
  tcpOk?: boolean;
  sport?: number;
  dport?: number;
  seq?: number;
  ack?: number;
  flags?: number;
  window?: number;
  mss?: number;
  /** The window-scale option's shift, when present. */
  wscale?: number;
  data?: Buffer;
  body: Buffer;
}

export function decode(f: Buffer): Out {
  return decodeFrame(f, true);
}

/**
 * decode(), with `tcpSum` false leaving tcpOk undefined (the caller checks
 * the TCP checksum another way, as a host given CHECKSUM_COMPLETE does).
 */
export function decodeFrame(f: Buffer, tcpSum: boolean): Out {
  const o: Out = { dst: f.subarray(0, 6), src: f.subarray(6, 12), type: f.readUInt16BE(12), body: f.subarray(14) };
  if (o.type !== 0x0800) return o;
  const ip = f.subarray(14);
  const ihl = (ip[0]! & 0xf) * 4;
  const total = ip.readUInt16BE(2);
  o.ipOk = csum(ip.subarray(0, ihl)) === 0;
  o.proto = ip[9]!;
  const l4 = ip.subarray(ihl, total);
  o.body = l4;
  if (o.proto !== 6) return o;
  const ph = Buffer.alloc(12);
  ip.copy(ph, 0, 12, 20);
  ph[9] = 6;
  ph.writeUInt16BE(l4.length, 10);
  if (tcpSum) o.tcpOk = csum(l4, sum16(ph)) === 0;
  o.sport = l4.readUInt16BE(0);
  o.dport = l4.readUInt16BE(2);
  o.seq = l4.readUInt32BE(4);
  o.ack = l4.readUInt32BE(8);
  o.flags = l4[13]!;
  o.window = l4.readUInt16BE(14);
  const doff = (l4[12]! >> 4) * 4;
  for (let i = 20; i < doff;) {
    const kind = l4[i]!;
    if (kind === 0) break;
    if (kind === 1) {
      i++;
      continue;
    }
    const len = l4[i + 1]!;
    if (kind === 2 && len === 4) o.mss = l4.readUInt16BE(i + 2);
    if (kind === 3 && len === 3) o.wscale = l4[i + 2]!;
    if (len < 2) break;
    i += len;
  }
  o.data = l4.subarray(doff);
  return o;
}
