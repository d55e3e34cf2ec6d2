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

import { getField } from '../../protocol/field';
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

const FNV_OFFSET = 0x811c9dc5;
const FNV_PRIME = 0x01000193;

/** FNV-1a over frame[at, at + size), clipped to the frame, continuing from `h`. */
function mix(frame: Buffer, h: number, at: number, size: number): number {
  for (let i = at, end = Math.min(at + size, frame.length); i < end; i++) h = Math.imul(h ^ frame[i]!, FNV_PRIME) >>> 0;
  return h;
}

/** Hash of the flow a frame belongs to (addresses and ports when present), stable for the life of the process. */
export function flowHash(frame: Buffer): number {
  // FNV-1a over the fields that name the flow. Non-IP frames hash their MAC addresses. Called per frame:
  // no closures or views.
  let h = FNV_OFFSET;
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
    h = mix(frame, h, l3 + iphdr.saddr.off, iphdr.saddr.size);
    h = mix(frame, h, l3 + iphdr.daddr.off, iphdr.daddr.size);
    h = mix(frame, h, l3 + iphdr.protocol.off, iphdr.protocol.size);
    if (carriesPorts(proto) && frame.length >= l3 + ihl + PORTS_END) h = mixPorts(frame, h, l3 + ihl);
    return h;
  }
  if (type === ETH_P_IPV6 && frame.length >= l3 + ipv6hdr.SIZE) {
    const next = getField(frame, l3, ipv6hdr.nexthdr);
    h = mix(frame, h, l3 + ipv6hdr.saddr.off, ipv6hdr.saddr.size);
    h = mix(frame, h, l3 + ipv6hdr.daddr.off, ipv6hdr.daddr.size);
    h = mix(frame, h, l3 + ipv6hdr.nexthdr.off, ipv6hdr.nexthdr.size);
    if (carriesPorts(next) && frame.length >= l3 + ipv6hdr.SIZE + PORTS_END) h = mixPorts(frame, h, l3 + ipv6hdr.SIZE);
    return h;
  }
  h = mix(frame, h, ethhdr.h_dest.off, ethhdr.h_dest.size);
  return mix(frame, h, ethhdr.h_source.off, ethhdr.h_source.size);
}

/** TCP and UDP both start with the source and destination port (tcphdr and udphdr agree on these offsets). */
const PORTS_END = tcphdr.dest.off + tcphdr.dest.size;

function carriesPorts(proto: number): boolean {
  return proto === IPPROTO_TCP || proto === IPPROTO_UDP;
}

function mixPorts(frame: Buffer, h: number, l4: number): number {
  h = mix(frame, h, l4 + tcphdr.source.off, tcphdr.source.size);
  return mix(frame, h, l4 + tcphdr.dest.off, tcphdr.dest.size);
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
  // The group bit first: a unicast frame (nearly all of them) needs no compare.
  if (!(frame[dest.off]! & ETH_MULTICAST_BIT)) return AddrKind.UNICAST;
  return ETH_BROADCAST.compare(frame, dest.off, dest.off + dest.size) === 0 ? AddrKind.BROADCAST : AddrKind.MULTICAST;
}
