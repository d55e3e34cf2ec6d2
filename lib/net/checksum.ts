// The Internet checksum (RFC 1071): the ones' complement of the ones'-complement
// sum of 16-bit big-endian words. The one definition for every header the
// device writes or checks: IPv4 headers (the NVMe-oF target's and the TCP/IP
// host's replies, the GRH of a UD receive, RoCEv2's), ICMP, TCP over the IPv4
// pseudo-header, UDP over IPv6.

import { setField, setRawBytes } from '../../protocol/field';
import { ipv4_pseudo_header } from './headers';

/** Add buf[start, end) to a ones'-complement sum as 16-bit big-endian words (an odd last byte is padded with zero). Folded to 16 bits. */
export function onesComplementSum(buf: Uint8Array, start: number, end: number, sum = 0): number {
  let s = sum;
  let i = start;
  for (; i + 1 < end; i += 2) {
    s += (buf[i]! << 8) | buf[i + 1]!;
    // Fold now and then so the sum stays a small integer.
    if (s > 0x7fffffff) s = (s & 0xffff) + (s >>> 16);
  }
  if (i < end) s += buf[i]! << 8;
  while (s > 0xffff) s = (s & 0xffff) + (s >>> 16);
  return s;
}

/** The checksum field value for a folded sum. */
export function checksumOf(sum: number): number {
  return ~sum & 0xffff;
}

/** The checksum of buf[at, at + len) over a partial sum `initial` (its own field zero when writing; 0 when checking a correct one). */
export function inetChecksum(buf: Uint8Array, at: number, len: number, initial = 0): number {
  return checksumOf(onesComplementSum(buf, at, at + len, initial));
}

const pseudo = Buffer.alloc(ipv4_pseudo_header.SIZE);

/** Partial sum of the IPv4 pseudo-header for a TCP or UDP checksum. */
export function pseudoSum(saddr: Buffer, daddr: Buffer, protocol: number, len: number): number {
  setRawBytes(pseudo, 0, ipv4_pseudo_header.saddr, saddr);
  setRawBytes(pseudo, 0, ipv4_pseudo_header.daddr, daddr);
  setField(pseudo, 0, ipv4_pseudo_header.zero, 0);
  setField(pseudo, 0, ipv4_pseudo_header.protocol, protocol);
  setField(pseudo, 0, ipv4_pseudo_header.len, len);
  return onesComplementSum(pseudo, 0, pseudo.length);
}
