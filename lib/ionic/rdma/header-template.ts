// Header templates (contract 5.5): CREATE_AH and the AV of MODIFY_QP point
// at a prebuilt Ethernet [802.1Q] IPv4|IPv6 UDP header, the prefix the
// hardware would put on each RoCEv2 packet. The device is never told the
// destination GID as a field; it is parsed out of the IP header here:
// IPv6 -> the destination address, IPv4 -> ::ffff:a.b.c.d.
//
//   Ethernet  dst MAC @0, src MAC @6, ethertype @12 (0x8100: TCI @14, inner type @16, +4)
//   IPv4      0x45, TOS @1, TTL @8, protocol 17 @9, src @12, dst @16
//   IPv6      version 6, traffic class, flow label, next header 17 @6, hop limit @7, src @8, dst @24
//   UDP       source port @0, destination port @2

import type { AddressVector } from '../../rdma/address';
import { ipv4Gid } from '../../rdma/address';

const ETH_HLEN = 14;
const ETH_P_IP = 0x0800;
const ETH_P_IPV6 = 0x86dd;
const ETH_P_8021Q = 0x8100;
const IPPROTO_UDP = 17;
const IPV6_HLEN = 40;
const UDP_HLEN = 8;

/** Why a template was refused. */
export type TemplateError = 'short' | 'ethertype' | 'ip-header' | 'not-udp';

/** Parse a template (the bytes the driver built; `tpl` is copied into the result). */
export function parseHeaderTemplate(tpl: Buffer): AddressVector | TemplateError {
  if (tpl.length < ETH_HLEN) return 'short';
  let type = tpl.readUInt16BE(12);
  let l3 = ETH_HLEN;
  let vlanTci = -1;
  if (type === ETH_P_8021Q) {
    if (tpl.length < ETH_HLEN + 4) return 'short';
    vlanTci = tpl.readUInt16BE(14);
    type = tpl.readUInt16BE(16);
    l3 += 4;
  }
  const dmac = Buffer.from(tpl.subarray(0, 6));
  const smac = Buffer.from(tpl.subarray(6, 12));
  if (type === ETH_P_IP) {
    if (tpl.length < l3 + 20) return 'short';
    const vihl = tpl[l3]!;
    const ihl = (vihl & 0xf) * 4;
    if (vihl >> 4 !== 4 || ihl < 20) return 'ip-header';
    if (tpl[l3 + 9] !== IPPROTO_UDP) return 'not-udp';
    const l4 = l3 + ihl;
    if (tpl.length < l4 + UDP_HLEN) return 'short';
    return {
      ipVersion: 4, dmac, smac, vlanTci,
      sgid: ipv4Gid(tpl.subarray(l3 + 12, l3 + 16)), dgid: ipv4Gid(tpl.subarray(l3 + 16, l3 + 20)),
      hopLimit: tpl[l3 + 8]!, trafficClass: tpl[l3 + 1]!, flowLabel: 0,
      udpSrcPort: tpl.readUInt16BE(l4), udpDstPort: tpl.readUInt16BE(l4 + 2), template: Buffer.from(tpl),
    };
  }
  if (type === ETH_P_IPV6) {
    if (tpl.length < l3 + IPV6_HLEN) return 'short';
    const w = tpl.readUInt32BE(l3);
    if (w >>> 28 !== 6) return 'ip-header';
    if (tpl[l3 + 6] !== IPPROTO_UDP) return 'not-udp';
    const l4 = l3 + IPV6_HLEN;
    if (tpl.length < l4 + UDP_HLEN) return 'short';
    return {
      ipVersion: 6, dmac, smac, vlanTci,
      sgid: Buffer.from(tpl.subarray(l3 + 8, l3 + 24)), dgid: Buffer.from(tpl.subarray(l3 + 24, l3 + 40)),
      hopLimit: tpl[l3 + 7]!, trafficClass: (w >>> 20) & 0xff, flowLabel: w & 0xfffff,
      udpSrcPort: tpl.readUInt16BE(l4), udpDstPort: tpl.readUInt16BE(l4 + 2), template: Buffer.from(tpl),
    };
  }
  return 'ethertype';
}
