// What any host of ours on the guest's Ethernet segment answers besides its
// own protocol: ARP for its IPv4 address and ICMP echo to it, so the guest
// resolves the address as on a real fabric and `ping` works. One definition
// for the NVMe-oF target (ArpEchoHost, an endpoint on the device's frame
// hooks) and the TCP/IP host (lib/net/tcp-host, which calls the two answers).
// A reply is built from the request: the same framing (a VLAN tag kept), the
// addresses swapped.

import { getField, setField, setRawBytes, viewRaw } from '../../protocol/field';
import { inetChecksum } from './checksum';
import type { FrameEndpoint } from './frame-endpoint';
import {
  arp_ipv4,
  ARPHRD_ETHER,
  ARPOP_REPLY,
  ARPOP_REQUEST,
  ETH_ALEN,
  ETH_P_8021Q,
  ETH_P_ARP,
  ETH_P_IP,
  ethhdr,
  ICMP_ECHO,
  ICMP_ECHOREPLY,
  icmphdr,
  iphdr,
  IPV4_ALEN,
  IPPROTO_ICMP,
  IPV4_IHL_MASK,
  IPV4_IHL_UNIT,
  IPV4_VERSION_SHIFT,
  vlan_ethhdr,
} from './headers';

const IPV4_VERSION = 4;
/** TTL of the replies (Linux's default). */
const REPLY_TTL = 64;
/** iphdr.frag_off: the fragment offset and more-fragments bits (fragments are not reassembled). */
const IP_FRAGMENT_BITS = 0x3fff;

/** arpAnswer: an ARP packet about our address that asks nothing (a reply or an announcement). */
const ARP_OURS_NO_ANSWER = 'ours';

/**
 * The answer to an ARP packet at frame[l3]: the reply to send (same framing,
 * to the asker) when it is a request for `ip`; ARP_OURS_NO_ANSWER for any
 * other Ethernet/IPv4 ARP about `ip`; null when it is not about `ip` or is
 * malformed.
 */
export function arpAnswer(
  frame: Buffer,
  l3: number,
  ip: Buffer,
  mac: Buffer,
): Buffer | typeof ARP_OURS_NO_ANSWER | null {
  if (frame.length < l3 + arp_ipv4.SIZE) return null;
  if (
    getField(frame, l3, arp_ipv4.ar_hrd) !== ARPHRD_ETHER ||
    getField(frame, l3, arp_ipv4.ar_pro) !== ETH_P_IP ||
    getField(frame, l3, arp_ipv4.ar_hln) !== ETH_ALEN ||
    getField(frame, l3, arp_ipv4.ar_pln) !== IPV4_ALEN
  )
    return null;
  if (!viewRaw(frame, l3, arp_ipv4.ar_tip).equals(ip)) return null;
  if (getField(frame, l3, arp_ipv4.ar_op) !== ARPOP_REQUEST) return ARP_OURS_NO_ANSWER;
  const out = Buffer.from(frame.subarray(0, l3 + arp_ipv4.SIZE));
  const asker = viewRaw(frame, l3, arp_ipv4.ar_sha);
  setRawBytes(out, 0, ethhdr.h_dest, asker);
  setRawBytes(out, 0, ethhdr.h_source, mac);
  setField(out, l3, arp_ipv4.ar_op, ARPOP_REPLY);
  setRawBytes(out, l3, arp_ipv4.ar_sha, mac);
  setRawBytes(out, l3, arp_ipv4.ar_sip, ip);
  setRawBytes(out, l3, arp_ipv4.ar_tha, asker);
  setRawBytes(out, l3, arp_ipv4.ar_tip, viewRaw(frame, l3, arp_ipv4.ar_sip));
  return out;
}

/** IPv4 header length and total length of the packet at frame[l3] when the frame holds it whole, unfragmented; else null. */
function ipv4Extent(frame: Buffer, l3: number): { readonly ihl: number; readonly total: number } | null {
  if (frame.length < l3 + iphdr.SIZE) return null;
  const vihl = getField(frame, l3, iphdr.version_ihl);
  const ihl = (vihl & IPV4_IHL_MASK) * IPV4_IHL_UNIT;
  const total = getField(frame, l3, iphdr.tot_len);
  if (vihl >>> IPV4_VERSION_SHIFT !== IPV4_VERSION || ihl < iphdr.SIZE || total < ihl || l3 + total > frame.length)
    return null;
  if ((getField(frame, l3, iphdr.frag_off) & IP_FRAGMENT_BITS) !== 0) return null;
  return { ihl, total };
}

/**
 * The echo reply to an ICMP echo request in the IPv4 packet at frame[l3]
 * (header length `ihl`, total length `total`, both checked by the caller)
 * when it is addressed to `ip` and its ICMP checksum holds; else null. The
 * reply keeps the request's IP header (TTL reset) and ICMP identifier,
 * sequence and data.
 */
export function echoAnswer(
  frame: Buffer,
  l3: number,
  ihl: number,
  total: number,
  ip: Buffer,
  mac: Buffer,
): Buffer | null {
  if (!viewRaw(frame, l3, iphdr.daddr).equals(ip) || getField(frame, l3, iphdr.protocol) !== IPPROTO_ICMP) return null;
  const l4 = l3 + ihl;
  const icmpLen = total - ihl;
  if (
    icmpLen < icmphdr.SIZE ||
    getField(frame, l4, icmphdr.type) !== ICMP_ECHO ||
    getField(frame, l4, icmphdr.code) !== 0
  )
    return null;
  if (inetChecksum(frame, l4, icmpLen) !== 0) return null;
  const out = Buffer.from(frame.subarray(0, l3 + total));
  setRawBytes(out, 0, ethhdr.h_dest, viewRaw(frame, 0, ethhdr.h_source));
  setRawBytes(out, 0, ethhdr.h_source, mac);
  setRawBytes(out, l3, iphdr.daddr, viewRaw(frame, l3, iphdr.saddr));
  setRawBytes(out, l3, iphdr.saddr, ip);
  setField(out, l3, iphdr.ttl, REPLY_TTL);
  setField(out, l3, iphdr.check, 0);
  setField(out, l3, iphdr.check, inetChecksum(out, l3, ihl));
  setField(out, l4, icmphdr.type, ICMP_ECHOREPLY);
  setField(out, l4, icmphdr.checksum, 0);
  setField(out, l4, icmphdr.checksum, inetChecksum(out, l4, icmpLen));
  return out;
}

/** Replies a host sent the guest. */
interface ArpEchoCounts {
  arpReplies: number;
  echoReplies: number;
}

/**
 * A host that only answers ARP and ICMP echo for its address, as an endpoint
 * on the device's frame hooks: a frame it answers is claimed (it goes no
 * further) and the answer queued for the guest; everything else passes.
 */
export class ArpEchoHost implements FrameEndpoint {
  readonly #ip: Buffer;
  readonly #mac: Buffer;
  readonly #send: (frame: Buffer) => void;
  readonly counts: ArpEchoCounts = { arpReplies: 0, echoReplies: 0 };

  /** `ip`: 4 bytes; `mac`: 6; `send` queues a frame for the guest. */
  constructor(ip: Buffer, mac: Buffer, send: (frame: Buffer) => void) {
    this.#ip = Buffer.from(ip);
    this.#mac = Buffer.from(mac);
    this.#send = send;
  }

  claimTx(frame: Buffer): boolean {
    if (frame.length < ethhdr.SIZE) return false;
    let l3: number = ethhdr.SIZE;
    let type = getField(frame, 0, ethhdr.h_proto);
    if (type === ETH_P_8021Q) {
      if (frame.length < vlan_ethhdr.SIZE) return false;
      type = getField(frame, 0, vlan_ethhdr.h_vlan_encapsulated_proto);
      l3 = vlan_ethhdr.SIZE;
    }
    if (type === ETH_P_ARP) {
      const reply = arpAnswer(frame, l3, this.#ip, this.#mac);
      if (!(reply instanceof Buffer)) return false;
      this.counts.arpReplies++;
      this.#send(reply);
      return true;
    }
    if (type !== ETH_P_IP) return false;
    const extent = ipv4Extent(frame, l3);
    const reply = extent ? echoAnswer(frame, l3, extent.ihl, extent.total, this.#ip, this.#mac) : null;
    if (!reply) return false;
    this.counts.echoReplies++;
    this.#send(reply);
    return true;
  }
}
