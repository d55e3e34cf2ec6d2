// The Internet checksum (RFC 1071): the ones' complement of the ones'-complement
// sum of 16-bit big-endian words. Used for IPv4 headers and UDP over IPv6.

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
