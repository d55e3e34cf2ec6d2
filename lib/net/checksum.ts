// The Internet checksum (RFC 1071), the one definition for every header the
// device writes or checks: IPv4 headers (the NVMe-oF target's and the TCP/IP
// host's replies, the GRH of a UD receive), ICMP, and TCP over the IPv4
// pseudo-header.

import { setField, setRawBytes } from '../../protocol/field';
import { ipv4_pseudo_header } from './headers';

/** The ones'-complement sum of buf[at, at + len) as 16-bit big-endian words, folded onto `initial` (a partial sum). */
export function inetSum(buf: Buffer, at: number, len: number, initial = 0): number {
  let sum = initial;
  let i = 0;
  for (; i + 1 < len; i += 2) sum += buf.readUInt16BE(at + i);
  if (i < len) sum += buf[at + i]! << 8;
  while (sum > 0xffff) sum = (sum & 0xffff) + (sum >>> 16);
  return sum;
}

/** The checksum of buf[at, at + len) (its own checksum field zero when writing; 0 when checking a correct one). */
export function inetChecksum(buf: Buffer, at: number, len: number, initial = 0): number {
  return ~inetSum(buf, at, len, initial) & 0xffff;
}

const pseudo = Buffer.alloc(ipv4_pseudo_header.SIZE);

/** Partial sum of the IPv4 pseudo-header for a TCP or UDP checksum. */
export function pseudoSum(saddr: Buffer, daddr: Buffer, protocol: number, len: number): number {
  setRawBytes(pseudo, 0, ipv4_pseudo_header.saddr, saddr);
  setRawBytes(pseudo, 0, ipv4_pseudo_header.daddr, daddr);
  setField(pseudo, 0, ipv4_pseudo_header.zero, 0);
  setField(pseudo, 0, ipv4_pseudo_header.protocol, protocol);
  setField(pseudo, 0, ipv4_pseudo_header.len, len);
  return inetSum(pseudo, 0, pseudo.length);
}
