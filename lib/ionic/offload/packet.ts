// Where the headers of an Ethernet frame are, as the offloads need them: the
// L3 offset (after an optional 802.1Q tag), IPv4 or IPv6, and the TCP or UDP
// header when it follows the IP header directly. IPv6 extension headers and
// IPv4 fragments leave the L4 header unknown: such frames get no L4 offload.
// One reusable record per caller: parsing allocates nothing.

import {
  ETH_P_8021Q,
  ETH_P_IP,
  ETH_P_IPV6,
  ethhdr,
  iphdr,
  IPPROTO_TCP,
  IPPROTO_UDP,
  IPV4_IHL_MASK,
  IPV4_IHL_UNIT,
  ipv6hdr,
  tcphdr,
  udphdr,
  vlan_ethhdr,
} from '../../net/headers';

/** IPv4 flag and offset bits that mark a fragment (MF and the 13-bit offset). */
const IPV4_FRAGMENT_MASK = 0x3fff;
/** TCP data offset: the top 4 bits of byte 12, in 32-bit words. */
const TCP_DOFF_SHIFT = 4;
const TCP_DOFF_UNIT = 4;

export class PacketInfo {
  /** Offset of the IP header (14, or 18 behind a VLAN tag); 0 when the frame is not IP. */
  l3 = 0;
  /** 4, 6, or 0 when not IP. */
  ipVersion = 0;
  /** The frame carries an 802.1Q tag. */
  vlan = false;
  /** IPPROTO_TCP or IPPROTO_UDP when the L4 header is known, else -1. */
  proto = -1;
  /** Offset of the TCP or UDP header, when proto is known. */
  l4 = 0;
  /** Length of the TCP header (with options) or 8 for UDP. */
  l4HdrLen = 0;

  /** Offset of the first payload byte after the L4 header. */
  get headersEnd(): number {
    return this.l4 + this.l4HdrLen;
  }

  /** Parse frame[0, len). Never reads past len. */
  parse(frame: Buffer, len: number): this {
    this.l3 = 0;
    this.ipVersion = 0;
    this.vlan = false;
    this.proto = -1;
    this.l4 = 0;
    this.l4HdrLen = 0;
    if (len < ethhdr.SIZE) return this;
    let type = frame.readUInt16BE(ethhdr.h_proto.off);
    let l3: number = ethhdr.SIZE;
    if (type === ETH_P_8021Q) {
      if (len < vlan_ethhdr.SIZE) return this;
      this.vlan = true;
      type = frame.readUInt16BE(vlan_ethhdr.h_vlan_encapsulated_proto.off);
      l3 = vlan_ethhdr.SIZE;
    }
    let proto: number;
    let l4: number;
    if (type === ETH_P_IP && len >= l3 + iphdr.SIZE && frame[l3]! >>> 4 === 4) {
      const ihl = (frame[l3]! & IPV4_IHL_MASK) * IPV4_IHL_UNIT;
      if (ihl < iphdr.SIZE || len < l3 + ihl) return this;
      this.l3 = l3;
      this.ipVersion = 4;
      if (frame.readUInt16BE(l3 + iphdr.frag_off.off) & IPV4_FRAGMENT_MASK) return this;
      proto = frame[l3 + iphdr.protocol.off]!;
      l4 = l3 + ihl;
    } else if (type === ETH_P_IPV6 && len >= l3 + ipv6hdr.SIZE && frame[l3]! >>> 4 === 6) {
      this.l3 = l3;
      this.ipVersion = 6;
      proto = frame[l3 + ipv6hdr.nexthdr.off]!;
      l4 = l3 + ipv6hdr.SIZE;
    } else {
      return this;
    }
    if (proto === IPPROTO_TCP && len >= l4 + tcphdr.SIZE) {
      const doff = (frame[l4 + tcphdr.doff_res.off]! >>> TCP_DOFF_SHIFT) * TCP_DOFF_UNIT;
      if (doff < tcphdr.SIZE || len < l4 + doff) return this;
      this.proto = proto;
      this.l4 = l4;
      this.l4HdrLen = doff;
    } else if (proto === IPPROTO_UDP && len >= l4 + udphdr.SIZE) {
      this.proto = proto;
      this.l4 = l4;
      this.l4HdrLen = udphdr.SIZE;
    }
    return this;
  }
}

/** ionic_rxq_comp pkt_type (bits 0..6 of pkt_type_color): what the driver picks the RSS hash type by. */
export const enum RxPktType {
  NON_IP = 0x00,
  IPV4 = 0x01,
  IPV4_TCP = 0x03,
  IPV4_UDP = 0x05,
  IPV6 = 0x08,
  IPV6_TCP = 0x18,
  IPV6_UDP = 0x28,
}

export function rxPktType(p: PacketInfo): RxPktType {
  if (p.ipVersion === 4)
    return p.proto === IPPROTO_TCP ? RxPktType.IPV4_TCP : p.proto === IPPROTO_UDP ? RxPktType.IPV4_UDP : RxPktType.IPV4;
  if (p.ipVersion === 6)
    return p.proto === IPPROTO_TCP ? RxPktType.IPV6_TCP : p.proto === IPPROTO_UDP ? RxPktType.IPV6_UDP : RxPktType.IPV6;
  return RxPktType.NON_IP;
}
