// TCP frames over IPv4 and IPv6 built by hand for the offload tests, and a
// plain RFC 1071 checksum to check the device's against: a word at a time,
// folded after every addition, nothing clever.

/** RFC 1071: the ones'-complement sum of 16-bit big-endian words (odd byte padded), folded after each add. Not inverted. */
export function rfc1071Sum(b: Buffer): number {
  let sum = 0;
  for (let i = 0; i < b.length; i += 2) {
    sum += (b[i]! << 8) | (i + 1 < b.length ? b[i + 1]! : 0);
    sum = (sum & 0xffff) + (sum >>> 16);
  }
  return sum;
}

const MAC_A = Buffer.from([0x02, 0x00, 0x00, 0x00, 0x00, 0x0a]);
const MAC_B = Buffer.from([0x02, 0x00, 0x00, 0x00, 0x00, 0x0b]);

export interface TcpSpec {
  readonly v6?: boolean;
  readonly vlan?: number;
  readonly payload: Buffer;
  readonly seq?: number;
  readonly id?: number;
  /** TCP flags byte (default ACK|PSH). */
  readonly flags?: number;
  /** TCP option bytes (a multiple of 4). */
  readonly options?: Buffer;
  /** IPv6 only: a hop-by-hop extension header before TCP. */
  readonly hopByHop?: boolean;
  /** IPv4 addresses (default 10.78.0.2 -> 10.78.0.1) and destination MAC (default MAC_B). */
  readonly src?: Buffer;
  readonly dst?: Buffer;
  readonly dstMac?: Buffer;
  /** Leave the checksums as the driver's TSO leaves them (IPv4 0, TCP a zero-length pseudo seed). Default: valid. */
  readonly tsoSeed?: boolean;
}

export const TCP_ACK = 0x10;
export const TCP_PSH = 0x08;
export const TCP_FIN = 0x01;
export const TCP_CWR = 0x80;

/** A TCP frame (valid checksums unless tsoSeed). Returns the frame and where its headers are. */
export function tcpFrame(s: TcpSpec): { frame: Buffer; l3: number; l4: number; hdrLen: number } {
  const opts = s.options ?? Buffer.alloc(0);
  const tcp = Buffer.alloc(20 + opts.length);
  tcp.writeUInt16BE(40000, 0);
  tcp.writeUInt16BE(5201, 2);
  tcp.writeUInt32BE(s.seq ?? 1000, 4);
  tcp.writeUInt32BE(77, 8);
  tcp[12] = ((20 + opts.length) / 4) << 4;
  tcp[13] = s.flags ?? TCP_ACK | TCP_PSH;
  tcp.writeUInt16BE(512, 14);
  opts.copy(tcp, 20);
  const l4Len = tcp.length + s.payload.length;
  let ip: Buffer;
  if (s.v6) {
    const ext = s.hopByHop ? Buffer.from([6, 0, 1, 4, 0, 0, 0, 0]) : Buffer.alloc(0); // next TCP, PadN
    ip = Buffer.alloc(40 + ext.length);
    ip.writeUInt32BE(0x60000000, 0);
    ip.writeUInt16BE(ext.length + l4Len, 4);
    ip[6] = s.hopByHop ? 0 : 6;
    ip[7] = 64;
    Buffer.from('fd780000000000000000000000000001', 'hex').copy(ip, 8);
    Buffer.from('fd780000000000000000000000000002', 'hex').copy(ip, 24);
    ext.copy(ip, 40);
  } else {
    ip = Buffer.alloc(20);
    ip[0] = 0x45;
    ip.writeUInt16BE(20 + l4Len, 2);
    ip.writeUInt16BE(s.id ?? 0x1234, 4);
    ip.writeUInt16BE(0x4000, 6);
    ip[8] = 64;
    ip[9] = 6;
    (s.src ?? Buffer.from([10, 78, 0, 2])).copy(ip, 12);
    (s.dst ?? Buffer.from([10, 78, 0, 1])).copy(ip, 16);
  }
  const eth = Buffer.alloc(s.vlan !== undefined ? 18 : 14);
  (s.dstMac ?? MAC_B).copy(eth, 0);
  MAC_A.copy(eth, 6);
  if (s.vlan !== undefined) {
    eth.writeUInt16BE(0x8100, 12);
    eth.writeUInt16BE(s.vlan, 14);
    eth.writeUInt16BE(s.v6 ? 0x86dd : 0x0800, 16);
  } else {
    eth.writeUInt16BE(s.v6 ? 0x86dd : 0x0800, 12);
  }
  const frame = Buffer.concat([eth, ip, tcp, s.payload]);
  const l3 = eth.length;
  const l4 = l3 + ip.length;
  if (s.tsoSeed) {
    // As ionic_tx_tso leaves them: the TCP field holds the zero-length pseudo-header sum, IPv4's checksum is 0, IPv6's length 0.
    frame.writeUInt16BE(rfc1071Sum(pseudo(frame, l3, 0)), l4 + 16);
    if (s.v6) frame.writeUInt16BE(0, l3 + 4);
  } else {
    if (!s.v6) frame.writeUInt16BE(~rfc1071Sum(frame.subarray(l3, l4)) & 0xffff, l3 + 10);
    frame.writeUInt16BE(
      ~rfc1071Sum(Buffer.concat([pseudo(frame, l3, frame.length - l4), frame.subarray(l4)])) & 0xffff,
      l4 + 16,
    );
  }
  return { frame, l3, l4, hdrLen: l4 + tcp.length };
}

/** The pseudo-header bytes of a TCP segment of l4Len bytes (IPv4 or IPv6 by the IP version nibble). */
export function pseudo(frame: Buffer, l3: number, l4Len: number): Buffer {
  if (frame[l3]! >>> 4 === 4) {
    const p = Buffer.alloc(12);
    frame.copy(p, 0, l3 + 12, l3 + 20);
    p[9] = 6;
    p.writeUInt16BE(l4Len, 10);
    return p;
  }
  const p = Buffer.alloc(40);
  frame.copy(p, 0, l3 + 8, l3 + 40);
  p.writeUInt32BE(l4Len, 32);
  p[39] = 6;
  return p;
}

/** Whether the TCP checksum of the frame verifies (sum with the pseudo-header is all ones). */
export function tcpChecksumOk(frame: Buffer, l3: number, l4: number): boolean {
  return rfc1071Sum(Buffer.concat([pseudo(frame, l3, frame.length - l4), frame.subarray(l4)])) === 0xffff;
}

/** Whether the IPv4 header checksum verifies. */
export function ipv4ChecksumOk(frame: Buffer, l3: number): boolean {
  return rfc1071Sum(frame.subarray(l3, l3 + (frame[l3]! & 0xf) * 4)) === 0xffff;
}

/** A payload of n bytes of a pattern. */
export function pattern(n: number, tag = 0): Buffer {
  const b = Buffer.alloc(n);
  for (let i = 0; i < n; i++) b[i] = (i * 13 + tag) & 0xff;
  return b;
}
