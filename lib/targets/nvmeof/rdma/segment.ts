// The target as a host on the guest's Ethernet segment (beyond the C design,
// which needs a static neighbour): it answers ARP for its IPv4 address and
// ICMP echo to it, so `nvme connect -t rdma -a <ip>` resolves the address the
// way it would on a real fabric, and `ping <ip>` works. It sits on the
// device's frame hooks (lib/ionic/frames.ts): a transmitted frame it answers
// is claimed (it goes no further), and the answer is queued for the guest,
// where it waits for a receive buffer. Everything else passes untouched.

import { getField, setField, setRawBytes, viewRaw } from '../../../../protocol/field';
import type { FrameEndpoint } from '../../../ionic/frames';
import {
  arp_ipv4, ARPHRD_ETHER, ARPOP_REPLY, ARPOP_REQUEST, ETH_P_8021Q, ETH_P_ARP, ETH_P_IP, ethhdr, ICMP_ECHO, ICMP_ECHOREPLY, icmphdr,
  iphdr, IPPROTO_ICMP, IPV4_IHL_MASK, IPV4_IHL_UNIT, vlan_ethhdr,
} from '../../../net/headers';

/** Frames the target sent the guest, and requests it answered. */
export interface SegmentCounts {
  arpReplies: number;
  echoReplies: number;
}

/** IPv4 header length in bytes, and the header and total lengths the frame really holds, or -1. */
function ipv4Lengths(frame: Buffer, l3: number): { ihl: number; total: number } | null {
  if (frame.length < l3 + iphdr.SIZE) return null;
  const vihl = getField(frame, l3, iphdr.version_ihl);
  const ihl = (vihl & IPV4_IHL_MASK) * IPV4_IHL_UNIT;
  const total = getField(frame, l3, iphdr.tot_len);
  if (vihl >>> 4 !== 4 || ihl < iphdr.SIZE || total < ihl || l3 + total > frame.length) return null;
  return { ihl, total };
}

/** The Internet checksum of buf[at, at + len). */
export function inetChecksum(buf: Buffer, at: number, len: number): number {
  let sum = 0;
  let i = 0;
  for (; i + 1 < len; i += 2) sum += buf.readUInt16BE(at + i);
  if (i < len) sum += buf[at + i]! << 8;
  while (sum > 0xffff) sum = (sum & 0xffff) + (sum >>> 16);
  return ~sum & 0xffff;
}

export class TargetSegment implements FrameEndpoint {
  readonly #ip: Buffer;
  readonly #mac: Buffer;
  readonly #send: (frame: Buffer) => void;
  readonly counts: SegmentCounts = { arpReplies: 0, echoReplies: 0 };

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
    if (type === ETH_P_ARP) return this.#arp(frame, l3);
    if (type === ETH_P_IP) return this.#icmp(frame, l3);
    return false;
  }

  /** An ARP request for our address: the reply, same framing (VLAN tag kept), to the asker. */
  #arp(frame: Buffer, l3: number): boolean {
    const a = arp_ipv4;
    if (frame.length < l3 + a.SIZE) return false;
    if (getField(frame, l3, a.ar_hrd) !== ARPHRD_ETHER || getField(frame, l3, a.ar_pro) !== ETH_P_IP
      || getField(frame, l3, a.ar_hln) !== 6 || getField(frame, l3, a.ar_pln) !== 4 || getField(frame, l3, a.ar_op) !== ARPOP_REQUEST) {
      return false;
    }
    if (!viewRaw(frame, l3, a.ar_tip).equals(this.#ip)) return false;
    const out = Buffer.from(frame.subarray(0, l3 + a.SIZE));
    const asker = Buffer.from(viewRaw(frame, l3, a.ar_sha));
    const askerIp = Buffer.from(viewRaw(frame, l3, a.ar_sip));
    setRawBytes(out, 0, ethhdr.h_dest, asker);
    setRawBytes(out, 0, ethhdr.h_source, this.#mac);
    setField(out, l3, a.ar_op, ARPOP_REPLY);
    setRawBytes(out, l3, a.ar_sha, this.#mac);
    setRawBytes(out, l3, a.ar_sip, this.#ip);
    setRawBytes(out, l3, a.ar_tha, asker);
    setRawBytes(out, l3, a.ar_tip, askerIp);
    this.counts.arpReplies++;
    this.#send(out);
    return true;
  }

  /** An ICMP echo request to our address: the echo reply (same identifier, sequence and data). */
  #icmp(frame: Buffer, l3: number): boolean {
    const len = ipv4Lengths(frame, l3);
    if (!len || !viewRaw(frame, l3, iphdr.daddr).equals(this.#ip) || getField(frame, l3, iphdr.protocol) !== IPPROTO_ICMP) return false;
    // Fragments are not answered (an echo of that size is not worth reassembly).
    if ((getField(frame, l3, iphdr.frag_off) & 0x3fff) !== 0) return false;
    const l4 = l3 + len.ihl;
    const icmpLen = len.total - len.ihl;
    if (icmpLen < icmphdr.SIZE || getField(frame, l4, icmphdr.type) !== ICMP_ECHO || getField(frame, l4, icmphdr.code) !== 0) return false;
    const out = Buffer.from(frame.subarray(0, l3 + len.total));
    setRawBytes(out, 0, ethhdr.h_dest, viewRaw(frame, 0, ethhdr.h_source));
    setRawBytes(out, 0, ethhdr.h_source, this.#mac);
    setRawBytes(out, l3, iphdr.daddr, viewRaw(frame, l3, iphdr.saddr));
    setRawBytes(out, l3, iphdr.saddr, this.#ip);
    setField(out, l3, iphdr.ttl, 64);
    setField(out, l3, iphdr.check, 0);
    setField(out, l3, iphdr.check, inetChecksum(out, l3, len.ihl));
    setField(out, l4, icmphdr.type, ICMP_ECHOREPLY);
    setField(out, l4, icmphdr.checksum, 0);
    setField(out, l4, icmphdr.checksum, inetChecksum(out, l4, icmpLen));
    this.counts.echoReplies++;
    this.#send(out);
    return true;
  }
}
