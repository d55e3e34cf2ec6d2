// The Internet checksum (RFC 1071) as the Ethernet offloads use it: the
// ones'-complement sum of a span of big-endian 16-bit words, and the
// pseudo-header sums of TCP and UDP over IPv4 and IPv6. Sums are kept folded
// to 16 bits so they can be added in any order (the sum is commutative).

/**
 * Ones'-complement sum of buf[at, at + len) taken as big-endian 16-bit words
 * (an odd last byte is padded with a zero), added to `initial`, folded to 16
 * bits. Not inverted: a checksum field takes `~sum & 0xffff`.
 */
export function onesSum(buf: Uint8Array, at: number, len: number, initial = 0): number {
  // Plain numbers hold exact integers to 2^53: a 64 KiB span adds up to 2^31 at most, so fold once at the end.
  let sum = initial;
  const end = at + len;
  let i = at;
  for (const end8 = end - 7; i < end8; i += 8) {
    sum +=
      ((buf[i]! << 8) | buf[i + 1]!) +
      ((buf[i + 2]! << 8) | buf[i + 3]!) +
      ((buf[i + 4]! << 8) | buf[i + 5]!) +
      ((buf[i + 6]! << 8) | buf[i + 7]!);
  }
  for (; i + 1 < end; i += 2) sum += (buf[i]! << 8) | buf[i + 1]!;
  if (i < end) sum += buf[i]! << 8;
  return fold(sum);
}

/** A non-negative sum (below 2^53) folded to 16 bits with end-around carry. */
export function fold(sum: number): number {
  let s = sum;
  // At most three rounds for any s below 2^53 (48 -> 33 -> 17 -> 16 bits).
  for (let round = 0; round < 4 && s > 0xffff; round++) s = (s % 0x10000) + Math.floor(s / 0x10000);
  return s;
}

/** Two folded sums added. */
export function addSums(a: number, b: number): number {
  return fold(a + b);
}

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
