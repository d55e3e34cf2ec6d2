// Which RoCE GIDs the guest uses, learned from what it transmits, so a server
// in the mesh needs no launcher to tell it (ERNIC_TCP_GUEST_GIDS stays the
// way to fix them). The guest kernel builds its GID table from the
// interface's addresses: the IPv6 link-local address made from the MAC, and
// each IPv4 (as ::ffff:a.b.c.d) and IPv6 address. Those show up as the
// source of its ARP and IP frames, and every AV the driver gives us names
// one as its source GID. Each new one is added to the mesh's local set
// (advertised to the other nodes; at most 8 per node).

import { getField, viewRaw } from '../../../../protocol/field';
import {
  arp_ipv4,
  ETH_P_8021Q,
  ETH_P_ARP,
  ETH_P_IP,
  ETH_P_IPV6,
  ethhdr,
  iphdr,
  ipv6hdr,
  vlan_ethhdr,
} from '../../../net/headers';
import { ipv4Gid } from '../../address';

/** fe80::/64 with the modified EUI-64 of `mac` (RFC 4291 appendix A). */
export function linkLocalGid(mac: Buffer): Buffer {
  const g = Buffer.alloc(16);
  g[0] = 0xfe;
  g[1] = 0x80;
  g[8] = mac[0]! ^ 0x02;
  g[9] = mac[1]!;
  g[10] = mac[2]!;
  g[11] = 0xff;
  g[12] = 0xfe;
  g[13] = mac[3]!;
  g[14] = mac[4]!;
  g[15] = mac[5]!;
  return g;
}

function allZero(b: Buffer): boolean {
  for (const x of b) if (x !== 0) return false;
  return true;
}

/** A unicast IPv6 source worth learning: not unspecified, not multicast. */
function usableIpv6(a: Buffer): boolean {
  return !allZero(a) && a[0] !== 0xff;
}

/**
 * The GIDs a transmitted frame shows the guest owns (source MAC's link-local,
 * the ARP sender or IPv4/IPv6 source), appended to `out`. Never throws on a
 * short or odd frame: what cannot be read is skipped.
 */
export function gidsFromFrame(frame: Buffer, out: Buffer[]): void {
  if (frame.length < ethhdr.SIZE) return;
  const src = viewRaw(frame, 0, ethhdr.h_source);
  if ((src[0]! & 1) === 0 && !allZero(src)) out.push(linkLocalGid(src));
  let l3: number = ethhdr.SIZE;
  let type = getField(frame, 0, ethhdr.h_proto);
  if (type === ETH_P_8021Q && frame.length >= vlan_ethhdr.SIZE) {
    type = getField(frame, 0, vlan_ethhdr.h_vlan_encapsulated_proto);
    l3 = vlan_ethhdr.SIZE;
  }
  if (type === ETH_P_ARP && frame.length >= l3 + arp_ipv4.SIZE) {
    const ip = viewRaw(frame, l3, arp_ipv4.ar_sip);
    if (!allZero(ip)) out.push(ipv4Gid(ip));
  } else if (type === ETH_P_IP && frame.length >= l3 + iphdr.SIZE) {
    const ip = viewRaw(frame, l3, iphdr.saddr);
    if (!allZero(ip)) out.push(ipv4Gid(ip));
  } else if (type === ETH_P_IPV6 && frame.length >= l3 + ipv6hdr.SIZE) {
    const ip = viewRaw(frame, l3, ipv6hdr.saddr);
    if (usableIpv6(ip)) out.push(Buffer.from(ip));
  }
}
