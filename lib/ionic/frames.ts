// What the Ethernet function reads of a frame to place it: the hash of its
// flow (RSS steering) and the kind of its destination address (RX filtering
// and the ucast/mcast/bcast counters).
//
// Where frames go outside the device (lib/net/frame-endpoint.ts): TX, the
// device offers each transmitted frame to the endpoints in order; the first
// that claims it keeps it; otherwise it goes to the TAP, or is counted and
// discarded without one. RX: a frame from the TAP is offered to the endpoints
// too, then steered to a guest RX queue. Endpoints can also queue frames for
// the guest; unlike TAP frames, those wait for a buffer, in order.

import { Field, getField, RawField } from '../../protocol/field';
import {
  ETH_BROADCAST,
  ETH_MULTICAST_BIT,
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
  vlan_ethhdr,
} from '../net/headers';

/** Hash of the flow a frame belongs to (addresses and ports when present), stable for the life of the process. */
export function flowHash(frame: Buffer): number {
  // FNV-1a over the fields that name the flow. Non-IP frames hash their MAC addresses.
  let h = 0x811c9dc5;
  const mix = (at: number, f: Field | RawField): void => {
    for (let i = at + f.off, end = at + f.off + f.size; i < end && i < frame.length; i++) {
      h ^= frame[i]!;
      h = Math.imul(h, 0x01000193) >>> 0;
    }
  };
  if (frame.length < ethhdr.SIZE) return h;
  let l3: number = ethhdr.SIZE;
  let type = getField(frame, 0, ethhdr.h_proto);
  if (type === ETH_P_8021Q && frame.length >= vlan_ethhdr.SIZE) {
    type = getField(frame, 0, vlan_ethhdr.h_vlan_encapsulated_proto);
    l3 = vlan_ethhdr.SIZE;
  }
  if (type === ETH_P_IP && frame.length >= l3 + iphdr.SIZE) {
    const ihl = (getField(frame, l3, iphdr.version_ihl) & IPV4_IHL_MASK) * IPV4_IHL_UNIT;
    const proto = getField(frame, l3, iphdr.protocol);
    mix(l3, iphdr.saddr);
    mix(l3, iphdr.daddr);
    mix(l3, iphdr.protocol);
    if (carriesPorts(proto) && frame.length >= l3 + ihl + PORTS_END) mixPorts(mix, l3 + ihl);
    return h;
  }
  if (type === ETH_P_IPV6 && frame.length >= l3 + ipv6hdr.SIZE) {
    const next = getField(frame, l3, ipv6hdr.nexthdr);
    mix(l3, ipv6hdr.saddr);
    mix(l3, ipv6hdr.daddr);
    mix(l3, ipv6hdr.nexthdr);
    if (carriesPorts(next) && frame.length >= l3 + ipv6hdr.SIZE + PORTS_END) mixPorts(mix, l3 + ipv6hdr.SIZE);
    return h;
  }
  mix(0, ethhdr.h_dest);
  mix(0, ethhdr.h_source);
  return h;
}

/** TCP and UDP both start with the source and destination port (tcphdr and udphdr agree on these offsets). */
const PORTS_END = tcphdr.dest.off + tcphdr.dest.size;

function carriesPorts(proto: number): boolean {
  return proto === IPPROTO_TCP || proto === IPPROTO_UDP;
}

function mixPorts(mix: (at: number, f: Field) => void, l4: number): void {
  mix(l4, tcphdr.source);
  mix(l4, tcphdr.dest);
}

/** Kind of destination address: for RX filtering and the ucast/mcast/bcast counters. */
export const enum AddrKind {
  UNICAST,
  MULTICAST,
  BROADCAST,
}

export function destinationKind(frame: Buffer): AddrKind {
  const dest = ethhdr.h_dest;
  if (frame.length < dest.off + dest.size) return AddrKind.UNICAST;
  if (ETH_BROADCAST.compare(frame, dest.off, dest.off + dest.size) === 0) return AddrKind.BROADCAST;
  return frame[dest.off]! & ETH_MULTICAST_BIT ? AddrKind.MULTICAST : AddrKind.UNICAST;
}
