// The RoCEv2 invariant CRC (IBTA Annex A17.3.2; rxe_icrc.c does the same):
// CRC-32 over eight 0xff bytes standing for the LRH RoCEv2 lacks, then the IP
// header, UDP header and BTH with the fields routers may change masked to
// ones (IPv4 TOS, TTL and header checksum; IPv6 traffic class, flow label and
// hop limit; UDP checksum; the BTH byte holding FECN/BECN), then the rest of
// the packet up to the ICRC itself. It goes on the wire least significant
// byte first, the byte order every RoCE HCA uses.

import { crc32Finish, crc32Update, CRC32_INIT } from '../net/crc32';
import { iphdr, ipv6hdr, udphdr } from '../net/headers';
import { BTH_BYTES } from './opcodes';

/** Where the masked copy of IP + UDP + BTH is made; the longest is IPv6's. */
const scratch = Buffer.alloc(ipv6hdr.SIZE + udphdr.SIZE + BTH_BYTES);
/** The CRC state after the eight 0xff bytes of the masked LRH. */
const AFTER_LRH = crc32Update(CRC32_INIT, Buffer.alloc(8, 0xff), 0, 8);
/** Offset of the FECN/BECN/reserved byte in the BTH. */
const BTH_ECN_BYTE = 4;

/**
 * The ICRC of the packet whose IP header starts at buf[ipOff] (version 4
 * without options, or 6) and whose ICRC starts at buf[icrcOff]. The caller
 * has checked that the headers lie inside the buffer.
 */
export function computeIcrc(buf: Buffer, ipOff: number, ipVersion: 4 | 6, icrcOff: number): number {
  const ipLen = ipVersion === 4 ? iphdr.SIZE : ipv6hdr.SIZE;
  const n = ipLen + udphdr.SIZE + BTH_BYTES;
  buf.copy(scratch, 0, ipOff, ipOff + n);
  if (ipVersion === 4) {
    scratch[iphdr.tos.off] = 0xff;
    scratch[iphdr.ttl.off] = 0xff;
    scratch.fill(0xff, iphdr.check.off, iphdr.check.off + iphdr.check.size);
  } else {
    // Keep the version nibble; traffic class and flow label become ones.
    scratch[0] |= 0x0f;
    scratch.fill(0xff, 1, 4);
    scratch[ipv6hdr.hop_limit.off] = 0xff;
  }
  const udpAt = ipLen;
  scratch.fill(0xff, udpAt + udphdr.check.off, udpAt + udphdr.check.off + udphdr.check.size);
  scratch[udpAt + udphdr.SIZE + BTH_ECN_BYTE] = 0xff;
  let c = crc32Update(AFTER_LRH, scratch, 0, n);
  c = crc32Update(c, buf, ipOff + n, icrcOff);
  return crc32Finish(c);
}

/** Write the ICRC of the packet into its last four bytes, buf[icrcOff, icrcOff + 4). */
export function writeIcrc(buf: Buffer, ipOff: number, ipVersion: 4 | 6, icrcOff: number): void {
  buf.writeUInt32LE(computeIcrc(buf, ipOff, ipVersion, icrcOff), icrcOff);
}

/** Whether the ICRC the packet carries is right. */
export function icrcMatches(buf: Buffer, ipOff: number, ipVersion: 4 | 6, icrcOff: number): boolean {
  return buf.readUInt32LE(icrcOff) === computeIcrc(buf, ipOff, ipVersion, icrcOff);
}
