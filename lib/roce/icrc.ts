// The RoCEv2 invariant CRC (IBTA Annex A17.3.2; rxe_icrc.c does the same):
// CRC-32 over eight 0xff bytes standing for the LRH RoCEv2 lacks, then the IP
// header, UDP header and BTH with the fields routers may change masked to
// ones (IPv4 TOS, TTL and header checksum; IPv6 traffic class, flow label and
// hop limit; UDP checksum; the BTH byte holding FECN/BECN), then the rest of
// the packet up to the ICRC itself. It goes on the wire least significant
// byte first, the byte order every RoCE HCA uses.

import { crc32Finish, crc32Update, crc32UpdateMasked, CRC32_INIT } from '../net/crc32';
import { iphdr, ipv6hdr, udphdr } from '../net/headers';
import { BTH_BYTES } from './opcodes';

/** The CRC state after the eight 0xff bytes of the masked LRH. */
const AFTER_LRH = crc32Update(CRC32_INIT, Buffer.alloc(8, 0xff), 0, 8);
/** Offset of the FECN/BECN/reserved byte in the BTH. */
const BTH_ECN_BYTE = 4;

/** Per byte of IP + UDP + BTH: 0xff where the ICRC counts the byte as all ones, else 0. */
function maskOf(ipVersion: 4 | 6): Uint8Array {
  const ipLen = ipVersion === 4 ? iphdr.SIZE : ipv6hdr.SIZE;
  const m = new Uint8Array(ipLen + udphdr.SIZE + BTH_BYTES);
  if (ipVersion === 4) {
    m[iphdr.tos.off] = 0xff;
    m[iphdr.ttl.off] = 0xff;
    m.fill(0xff, iphdr.check.off, iphdr.check.off + iphdr.check.size);
  } else {
    // Keep the version nibble; traffic class and flow label become ones.
    m[0] = 0x0f;
    m.fill(0xff, 1, 4);
    m[ipv6hdr.hop_limit.off] = 0xff;
  }
  m.fill(0xff, ipLen + udphdr.check.off, ipLen + udphdr.check.off + udphdr.check.size);
  m[ipLen + udphdr.SIZE + BTH_ECN_BYTE] = 0xff;
  return m;
}
const MASK_V4 = maskOf(4);
const MASK_V6 = maskOf(6);

/**
 * The ICRC of the packet whose IP header starts at buf[ipOff] (version 4
 * without options, or 6) and whose ICRC starts at buf[icrcOff]. The caller
 * has checked that the headers lie inside the buffer.
 */
export function computeIcrc(buf: Buffer, ipOff: number, ipVersion: 4 | 6, icrcOff: number): number {
  const mask = ipVersion === 4 ? MASK_V4 : MASK_V6;
  let c = crc32UpdateMasked(AFTER_LRH, buf, ipOff, mask);
  c = crc32Update(c, buf, ipOff + mask.length, icrcOff);
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
