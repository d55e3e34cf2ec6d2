// The network headers RoCEv2 puts in front of a packet, as named-offset
// tables (Linux's struct names; all network byte order), and the few values
// their fields take here. The control path parses them out of the header
// templates the driver builds (lib/ionic/rdma/header-template.ts); the data
// path writes them as the GRH a UD receive starts with (datapath/datagram.ts).

import { be, raw } from '../../protocol/field';

/** struct ethhdr. */
export const ethhdr = { h_dest: raw(0, 6), h_source: raw(6, 6), h_proto: be(12, 2), SIZE: 14 } as const;

/** struct vlan_ethhdr: an Ethernet header with an 802.1Q tag. */
export const vlan_ethhdr = {
  h_dest: raw(0, 6), h_source: raw(6, 6), h_vlan_proto: be(12, 2), h_vlan_TCI: be(14, 2), h_vlan_encapsulated_proto: be(16, 2),
  SIZE: 18,
} as const;

/** struct iphdr (without options). */
export const iphdr = {
  version_ihl: be(0, 1), tos: be(1, 1), tot_len: be(2, 2), id: be(4, 2), frag_off: be(6, 2), ttl: be(8, 1),
  protocol: be(9, 1), check: be(10, 2), saddr: raw(12, 4), daddr: raw(16, 4),
  SIZE: 20,
} as const;

/** struct ipv6hdr. */
export const ipv6hdr = {
  version_tc_flow: be(0, 4), payload_len: be(4, 2), nexthdr: be(6, 1), hop_limit: be(7, 1), saddr: raw(8, 16), daddr: raw(24, 16),
  SIZE: 40,
} as const;

/** struct udphdr. */
export const udphdr = { source: be(0, 2), dest: be(2, 2), len: be(4, 2), check: be(6, 2), SIZE: 8 } as const;

/** A RoCEv2 GID holding an IPv4 address: ::ffff:a.b.c.d. */
export const ipv4_mapped_gid = { zero: raw(0, 10), ffff: be(10, 2), addr: raw(12, 4), SIZE: 16 } as const;
export const IPV4_MAPPED_MARK = 0xffff;

export const ETH_P_IP = 0x0800;
export const ETH_P_IPV6 = 0x86dd;
export const ETH_P_8021Q = 0x8100;
export const IPPROTO_UDP = 17;

/** iphdr.version_ihl: version in the high nibble, header length in 4-byte words in the low one. */
export const IPV4_VERSION_SHIFT = 4;
export const IPV4_IHL_MASK = 0xf;
export const IPV4_IHL_UNIT = 4;
/** iphdr.frag_off: don't fragment. */
export const IP_DF = 0x4000;

/** ipv6hdr.version_tc_flow: version (4 bits), traffic class (8), flow label (20). */
export const IPV6_VERSION_SHIFT = 28;
export const IPV6_TC_SHIFT = 20;
export const IPV6_TC_MASK = 0xff;
export const IPV6_FLOW_MASK = 0xfffff;
