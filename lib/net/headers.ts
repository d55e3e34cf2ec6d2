// Network headers as named-offset tables (Linux's struct names; all network
// byte order), and the few values their fields take here. One home for every
// user: the Ethernet function's flow hash (lib/ionic/frames.ts), the RoCEv2
// header templates and GRH (lib/rdma: address.ts adds the RoCE GID), the
// hosts on the guest's segment (this folder), and the synthetic frames of
// vfio-user captures (lib/vfio-user/pcapng.ts).

import { be, raw } from '../../protocol/field';

/** struct ethhdr. */
export const ethhdr = { h_dest: raw(0, 6), h_source: raw(6, 6), h_proto: be(12, 2), SIZE: 14 } as const;

/** struct vlan_ethhdr: an Ethernet header with an 802.1Q tag. */
export const vlan_ethhdr = {
  h_dest: raw(0, 6),
  h_source: raw(6, 6),
  h_vlan_proto: be(12, 2),
  h_vlan_TCI: be(14, 2),
  h_vlan_encapsulated_proto: be(16, 2),
  SIZE: 18,
} as const;

/** struct iphdr (without options). */
export const iphdr = {
  version_ihl: be(0, 1),
  tos: be(1, 1),
  tot_len: be(2, 2),
  id: be(4, 2),
  frag_off: be(6, 2),
  ttl: be(8, 1),
  protocol: be(9, 1),
  check: be(10, 2),
  saddr: raw(12, 4),
  daddr: raw(16, 4),
  SIZE: 20,
} as const;

/** struct ipv6hdr. */
export const ipv6hdr = {
  version_tc_flow: be(0, 4),
  payload_len: be(4, 2),
  nexthdr: be(6, 1),
  hop_limit: be(7, 1),
  saddr: raw(8, 16),
  daddr: raw(24, 16),
  SIZE: 40,
} as const;

/** struct udphdr. */
export const udphdr = { source: be(0, 2), dest: be(2, 2), len: be(4, 2), check: be(6, 2), SIZE: 8 } as const;

/** struct tcphdr (without options); doff_flags is doff (4 bits), reserved, then the flag bits (CWR..FIN). */
export const tcphdr = {
  source: be(0, 2),
  dest: be(2, 2),
  seq: be(4, 4),
  ack_seq: be(8, 4),
  doff_res: be(12, 1),
  flags: be(13, 1),
  window: be(14, 2),
  check: be(16, 2),
  urg_ptr: be(18, 2),
  SIZE: 20,
} as const;

/** Multicast bit of the first byte of a MAC address (the I/G bit). */
export const ETH_MULTICAST_BIT = 0x01;
/** Bytes of a MAC address, of an IPv4 address. */
export const ETH_ALEN = 6;
export const IPV4_ALEN = 4;
/** The broadcast MAC address. */
export const ETH_BROADCAST = Buffer.from([0xff, 0xff, 0xff, 0xff, 0xff, 0xff]);

/** ARP for IPv4 over Ethernet (RFC 826). */
export const arp_ipv4 = {
  ar_hrd: be(0, 2),
  ar_pro: be(2, 2),
  ar_hln: be(4, 1),
  ar_pln: be(5, 1),
  ar_op: be(6, 2),
  ar_sha: raw(8, 6),
  ar_sip: raw(14, 4),
  ar_tha: raw(18, 6),
  ar_tip: raw(24, 4),
  SIZE: 28,
} as const;
/** arp_ipv4 values: Ethernet hardware, request and reply. */
export const ARPHRD_ETHER = 1;
export const ARPOP_REQUEST = 1;
export const ARPOP_REPLY = 2;

/** struct icmphdr, as an echo request or reply carries it (RFC 792). */
export const icmphdr = {
  type: be(0, 1),
  code: be(1, 1),
  checksum: be(2, 2),
  id: be(4, 2),
  sequence: be(6, 2),
  SIZE: 8,
} as const;
export const ICMP_ECHOREPLY = 0;
export const ICMP_ECHO = 8;

export const ETH_P_ARP = 0x0806;
export const ETH_P_IP = 0x0800;
export const ETH_P_IPV6 = 0x86dd;
export const ETH_P_8021Q = 0x8100;
export const IPPROTO_ICMP = 1;
export const IPPROTO_TCP = 6;
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

/** tcphdr.doff_res: data offset in 4-byte words in the high nibble. */
export const TCP_DOFF_SHIFT = 4;
/** tcphdr.flags bits. */
export const TCP_FLAG_FIN = 0x01;
export const TCP_FLAG_SYN = 0x02;
export const TCP_FLAG_RST = 0x04;
export const TCP_FLAG_PSH = 0x08;
export const TCP_FLAG_ACK = 0x10;

/** The IPv4 pseudo-header a TCP or UDP checksum covers (RFC 793 section 3.1, RFC 768). */
export const ipv4_pseudo_header = {
  saddr: raw(0, 4),
  daddr: raw(4, 4),
  zero: be(8, 1),
  protocol: be(9, 1),
  len: be(10, 2),
  SIZE: 12,
} as const;
