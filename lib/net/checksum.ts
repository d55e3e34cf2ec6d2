// The Internet checksum (RFC 1071): the ones' complement of the ones'-complement
// sum of 16-bit big-endian words. The one definition for every header the
// device writes or checks: IPv4 headers (the NVMe-oF target's and the TCP/IP
// host's replies, the GRH of a UD receive, RoCEv2's), ICMP, TCP over the IPv4
// pseudo-header, UDP over IPv6.

import { setField, setRawBytes } from '../../protocol/field';
import { ipv4_pseudo_header } from './headers';

const HOST_LITTLE_ENDIAN = new Uint8Array(new Uint16Array([1]).buffer)[0] === 1;

/** Spans at least this long are summed through a 32-bit view (shorter ones byte by byte: the view costs more). */
const VIEW_MIN = 64;

/** The 16-bit word at b[i, i + 2) in host order. */
function hostWord(b: Uint8Array, i: number): number {
  return HOST_LITTLE_ENDIAN ? b[i]! | (b[i + 1]! << 8) : (b[i]! << 8) | b[i + 1]!;
}

/** Add buf[start, end) to a ones'-complement sum as 16-bit big-endian words (an odd last byte is padded with zero). Folded to 16 bits. */
export function onesComplementSum(buf: Uint8Array, start: number, end: number, sum = 0): number {
  let s = sum;
  let i = start;
  const at = buf.byteOffset + start;
  if (end - start >= VIEW_MIN && (at & 1) === 0) {
    // Host-order words, then the byte swap once at the end: the ones'-complement sum of byte-swapped words is
    // the byte-swapped sum (RFC 1071 2(B)). Read 32 bits at a time, four sums side by side: a 32-bit word is
    // hi * 2^16 + lo, and 2^16 = 1 modulo 2^16 - 1, so its value adds the same as its two halves. Plain numbers
    // hold exact integers to 2^53: no carry is lost before the fold.
    let host = 0;
    if (at & 2) {
      host += hostWord(buf, i); // to a 4-byte boundary
      i += 2;
    }
    const n = (end - i) >>> 2;
    const w = new Uint32Array(buf.buffer, buf.byteOffset + i, n);
    let a0 = 0;
    let a1 = 0;
    let a2 = 0;
    let a3 = 0;
    let k = 0;
    for (const n4 = n - 3; k < n4; k += 4) {
      a0 += w[k]!;
      a1 += w[k + 1]!;
      a2 += w[k + 2]!;
      a3 += w[k + 3]!;
    }
    for (; k < n; k++) a0 += w[k]!;
    i += n * 4;
    if (i + 1 < end) {
      host += hostWord(buf, i);
      i += 2;
    }
    host = fold(host + a0 + a1 + a2 + a3);
    s += HOST_LITTLE_ENDIAN ? ((host & 0xff) << 8) | (host >>> 8) : host;
  }
  for (; i + 1 < end; i += 2) s += (buf[i]! << 8) | buf[i + 1]!;
  if (i < end) s += buf[i]! << 8;
  return fold(s);
}

/** A non-negative sum below 2^53 folded to 16 bits with end-around carry. */
export function fold(sum: number): number {
  let s = sum;
  // At most four rounds for any s below 2^53 (53 -> 37 -> 21 -> 17 -> 16 bits).
  for (let round = 0; round < 5 && s > 0xffff; round++) s = (s % 0x10000) + Math.floor(s / 0x10000);
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

/** Two folded sums added. */
export function addSums(a: number, b: number): number {
  return fold(a + b);
}
