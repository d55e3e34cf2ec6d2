// Datagrams (ionic RDMA R5.6; architecture "Datagrams (UD and GSI)"): the Q_Key
// rules and the 40-byte network header a UD receive starts with. Shared by the
// loopback path and, later, the mesh, which attaches the header before sending.

import { setField } from '../../../protocol/field';
import { inetChecksum } from '../../net/checksum';
import { ipv4_mapped_gid } from '../address';
import type { AddressVector } from '../address';
import {
  IP_DF,
  iphdr,
  IPPROTO_UDP,
  IPV4_IHL_UNIT,
  IPV4_VERSION_SHIFT,
  IPV6_FLOW_MASK,
  IPV6_TC_MASK,
  IPV6_TC_SHIFT,
  IPV6_VERSION_SHIFT,
  ipv6hdr,
} from '../../net/headers';

/** Bytes of network header (GRH) that start every UD receive; counted in the byte count. */
export const GRH_SIZE = 40;

/** A Q_Key with this bit set in a UD WQE is "controlled": use the sending QP's own Q_Key. */
export const CONTROLLED_QKEY_BIT = 0x80000000;

/** UDP + BTH + DETH + ICRC: what a RoCEv2 UD packet carries besides the IP header and payload. */
const UD_OVERHEAD = 8 + 12 + 8 + 4;

/**
 * The Q_Key a UD send carries: the WQE's dest_qkey, or (high bit set) the
 * sending QP's own Q_Key; -1 when the WQE asks for the QP's and it has none
 * (the datagram is refused).
 */
export function effectiveQkey(wqeQkey: number, senderQkey: number | null): number {
  if (wqeQkey >>> 0 >= CONTROLLED_QKEY_BIT) return senderQkey === null ? -1 : senderQkey >>> 0;
  return wqeQkey >>> 0;
}

/** Whether a destination takes a datagram: it must be UD/GSI and, if it has a Q_Key, match. */
export function datagramAccepted(destIsDatagram: boolean, destQkey: number | null, qkey: number): boolean {
  if (!destIsDatagram || qkey < 0) return false;
  return destQkey === null || destQkey >>> 0 === qkey;
}

/** Where the IPv4 header sits in the GRH area (RoCEv2: after 20 zero bytes). */
const GRH_IPV4_OFFSET = GRH_SIZE - iphdr.SIZE;
/** iphdr.version_ihl of a header without options. */
const IPV4_VERSION_IHL = (4 << IPV4_VERSION_SHIFT) | (iphdr.SIZE / IPV4_IHL_UNIT);
const IPV6_VERSION = 6;
/** The IPv4 address inside a GID. */
const GID_V4 = ipv4_mapped_gid.addr;

/**
 * Write the network header of a `payloadLen`-byte datagram sent with `av` into
 * out[0..40): for IPv4, 20 zero bytes then the IPv4 header (checksummed); for
 * IPv6, the IPv6 header. This is what the receiving host's stack parses.
 */
export function writeGrh(av: AddressVector, payloadLen: number, out: Buffer): void {
  out.fill(0, 0, GRH_SIZE);
  if (av.ipVersion === 4) {
    const h = iphdr;
    const at = GRH_IPV4_OFFSET;
    setField(out, at, h.version_ihl, IPV4_VERSION_IHL);
    setField(out, at, h.tos, av.trafficClass & 0xff);
    setField(out, at, h.tot_len, (h.SIZE + UD_OVERHEAD + payloadLen) & 0xffff);
    setField(out, at, h.frag_off, IP_DF);
    setField(out, at, h.ttl, av.hopLimit & 0xff);
    setField(out, at, h.protocol, IPPROTO_UDP);
    av.sgid.copy(out, at + h.saddr.off, GID_V4.off, GID_V4.off + GID_V4.size);
    av.dgid.copy(out, at + h.daddr.off, GID_V4.off, GID_V4.off + GID_V4.size);
    setField(out, at, h.check, inetChecksum(out, at, h.SIZE));
    return;
  }
  const h = ipv6hdr;
  setField(
    out,
    0,
    h.version_tc_flow,
    ((IPV6_VERSION << IPV6_VERSION_SHIFT) |
      ((av.trafficClass & IPV6_TC_MASK) << IPV6_TC_SHIFT) |
      (av.flowLabel & IPV6_FLOW_MASK)) >>>
      0,
  );
  setField(out, 0, h.payload_len, (UD_OVERHEAD + payloadLen) & 0xffff);
  setField(out, 0, h.nexthdr, IPPROTO_UDP);
  setField(out, 0, h.hop_limit, av.hopLimit & 0xff);
  av.sgid.copy(out, h.saddr.off, 0, h.saddr.size);
  av.dgid.copy(out, h.daddr.off, 0, h.daddr.size);
}
