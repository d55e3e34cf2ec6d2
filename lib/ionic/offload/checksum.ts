// The Internet checksum (RFC 1071) as the Ethernet offloads use it: the
// ones'-complement sum of a span of big-endian 16-bit words, and the
// pseudo-header sums of TCP and UDP over IPv4 and IPv6. Sums are kept folded
// to 16 bits so they can be added in any order (the sum is commutative).

import { addSums, fold, onesComplementSum } from '../../net/checksum';

/**
 * Ones'-complement sum of buf[at, at + len) taken as big-endian 16-bit words
 * (an odd last byte is padded with a zero), added to `initial`, folded to 16
 * bits. Not inverted: a checksum field takes `~sum & 0xffff`. (lib/net's sum, by offset and length.)
 */
export function onesSum(buf: Uint8Array, at: number, len: number, initial = 0): number {
  return onesComplementSum(buf, at, at + len, initial);
}

export { addSums, fold };

/** The checksum field for a folded sum. */
export function checksumOf(sum: number): number {
  return ~sum & 0xffff;
}

/** Pseudo-header sum of TCP/UDP over IPv4: addresses at frame[l3 + 12, l3 + 20), protocol, L4 length. */
export function ipv4PseudoSum(frame: Uint8Array, l3: number, proto: number, l4Len: number): number {
  return onesSum(frame, l3 + 12, 8, proto + l4Len);
}

/** Pseudo-header sum of TCP/UDP over IPv6: addresses at frame[l3 + 8, l3 + 40), next header, L4 length (32 bits). */
export function ipv6PseudoSum(frame: Uint8Array, l3: number, proto: number, l4Len: number): number {
  return onesSum(frame, l3 + 8, 32, proto + (l4Len % 0x10000) + Math.floor(l4Len / 0x10000));
}
