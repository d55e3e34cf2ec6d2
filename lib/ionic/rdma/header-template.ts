// Header templates (ionic RDMA R5.5): CREATE_AH and the AV of MODIFY_QP point
// at a prebuilt Ethernet [802.1Q] IPv4|IPv6 UDP header, the prefix the
// hardware would put on each RoCEv2 packet. The device is never told the
// destination GID as a field; it is parsed out of the IP header here:
// IPv6 -> the destination address, IPv4 -> ::ffff:a.b.c.d.
//
// The header tables (ethhdr, vlan_ethhdr, iphdr, ipv6hdr, udphdr) are in
// lib/net/headers.ts.

import { getField, viewRaw } from '../../../protocol/field';
import type { AddressVector } from '../../rdma/address';
import { ipv4Gid } from '../../rdma/address';
import {
  ETH_P_8021Q,
  ETH_P_IP,
  ETH_P_IPV6,
  ethhdr,
  iphdr,
  IPPROTO_UDP,
  IPV4_IHL_MASK,
  IPV4_IHL_UNIT,
  IPV4_VERSION_SHIFT,
  IPV6_FLOW_MASK,
  IPV6_TC_MASK,
  IPV6_TC_SHIFT,
  IPV6_VERSION_SHIFT,
  ipv6hdr,
  udphdr,
  vlan_ethhdr,
} from '../../net/headers';

/** Why a template was refused. */
type TemplateError = 'short' | 'ethertype' | 'ip-header' | 'not-udp';

/** Parse a template (the bytes the driver built; `tpl` is copied into the result). */
export function parseHeaderTemplate(tpl: Buffer): AddressVector | TemplateError {
  if (tpl.length < ethhdr.SIZE) return 'short';
  let type = getField(tpl, 0, ethhdr.h_proto);
  let l3: number = ethhdr.SIZE;
  let vlanTci = -1;
  if (type === ETH_P_8021Q) {
    if (tpl.length < vlan_ethhdr.SIZE) return 'short';
    vlanTci = getField(tpl, 0, vlan_ethhdr.h_vlan_TCI);
    type = getField(tpl, 0, vlan_ethhdr.h_vlan_encapsulated_proto);
    l3 = vlan_ethhdr.SIZE;
  }
  const dmac = Buffer.from(viewRaw(tpl, 0, ethhdr.h_dest));
  const smac = Buffer.from(viewRaw(tpl, 0, ethhdr.h_source));
  if (type === ETH_P_IP) {
    const ip = iphdr;
    if (tpl.length < l3 + ip.SIZE) return 'short';
    const vihl = getField(tpl, l3, ip.version_ihl);
    const ihl = (vihl & IPV4_IHL_MASK) * IPV4_IHL_UNIT;
    if (vihl >> IPV4_VERSION_SHIFT !== 4 || ihl < ip.SIZE) return 'ip-header';
    if (getField(tpl, l3, ip.protocol) !== IPPROTO_UDP) return 'not-udp';
    const l4 = l3 + ihl;
    if (tpl.length < l4 + udphdr.SIZE) return 'short';
    return {
      ipVersion: 4,
      dmac,
      smac,
      vlanTci,
      sgid: ipv4Gid(viewRaw(tpl, l3, ip.saddr)),
      dgid: ipv4Gid(viewRaw(tpl, l3, ip.daddr)),
      hopLimit: getField(tpl, l3, ip.ttl),
      trafficClass: getField(tpl, l3, ip.tos),
      flowLabel: 0,
      udpSrcPort: getField(tpl, l4, udphdr.source),
      udpDstPort: getField(tpl, l4, udphdr.dest),
      template: Buffer.from(tpl),
    };
  }
  if (type === ETH_P_IPV6) {
    const ip = ipv6hdr;
    if (tpl.length < l3 + ip.SIZE) return 'short';
    const w = getField(tpl, l3, ip.version_tc_flow);
    if (w >>> IPV6_VERSION_SHIFT !== 6) return 'ip-header';
    if (getField(tpl, l3, ip.nexthdr) !== IPPROTO_UDP) return 'not-udp';
    const l4 = l3 + ip.SIZE;
    if (tpl.length < l4 + udphdr.SIZE) return 'short';
    return {
      ipVersion: 6,
      dmac,
      smac,
      vlanTci,
      sgid: Buffer.from(viewRaw(tpl, l3, ip.saddr)),
      dgid: Buffer.from(viewRaw(tpl, l3, ip.daddr)),
      hopLimit: getField(tpl, l3, ip.hop_limit),
      trafficClass: (w >>> IPV6_TC_SHIFT) & IPV6_TC_MASK,
      flowLabel: w & IPV6_FLOW_MASK,
      udpSrcPort: getField(tpl, l4, udphdr.source),
      udpDstPort: getField(tpl, l4, udphdr.dest),
      template: Buffer.from(tpl),
    };
  }
  return 'ethertype';
}
