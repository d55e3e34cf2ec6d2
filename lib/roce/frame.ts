// RoCEv2 framing: Ethernet (optionally 802.1Q tagged) / IPv4 or IPv6 / UDP to
// port 4791 / transport headers / payload / pad / ICRC. encodeFrame writes a
// whole frame into the caller's buffer around a payload already in place;
// decodeFrame checks every length and field of a frame from the wire into a
// reused RoceFrame and returns a drop reason instead of throwing.

import { getField, setField } from '../../protocol/field';
import { checksumOf, onesComplementSum } from '../net/checksum';
import {
  ETH_P_8021Q,
  ETH_P_IP,
  ETH_P_IPV6,
  ethhdr,
  IP_DF,
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
} from '../net/headers';
import {
  DROP_ICRC,
  DROP_IP_CHECKSUM,
  DROP_IP_HEADER,
  DROP_IP_LENGTH,
  DROP_NONE,
  DROP_NOT_IP,
  DROP_NOT_ROCE_PORT,
  DROP_NOT_UDP,
  DROP_TOO_SHORT,
  DROP_UDP_LENGTH,
} from './counters';
import { ROCE_V2_UDP_PORT } from './headers';
import { icrcMatches, writeIcrc } from './icrc';
import { BTH_BYTES, ICRC_BYTES, OPCODE_HEADER_BYTES } from './opcodes';
import { decodeTransport, encodeTransport, TransportHeaders } from './packet';

/** Where a QP's packets go: what the driver's header template says (addresses, VLAN, DSCP, hop limit) and the UDP source port. */
export class RocePath {
  readonly srcMac = Buffer.alloc(6);
  readonly dstMac = Buffer.alloc(6);
  /** 802.1Q TCI (priority and VLAN id), or -1 for an untagged frame. */
  vlanTci = -1;
  ipVersion: 4 | 6 = 4;
  /** GIDs; for IPv4, ::ffff:a.b.c.d. */
  readonly srcGid = Buffer.alloc(16);
  readonly dstGid = Buffer.alloc(16);
  /** DSCP (high six bits) and ECN (low two). */
  trafficClass = 0;
  hopLimit = 64;
  /** IPv6 flow label (20 bits). */
  flowLabel = 0;
  /** UDP source port: the flow's entropy (the driver's flow label or a hash of the QPNs). */
  udpSrcPort = 0xc000;
}

/** A frame from the wire, decoded: offsets into its buffer, the network fields a receiver reports, and the transport headers. */
export class RoceFrame {
  vlanTci = -1;
  ipVersion: 4 | 6 = 4;
  ipOff = 0;
  udpOff = 0;
  bthOff = 0;
  icrcOff = 0;
  trafficClass = 0;
  hopLimit = 0;
  flowLabel = 0;
  udpSrcPort = 0;
  readonly srcMac = Buffer.alloc(6);
  readonly srcGid = Buffer.alloc(16);
  readonly dstGid = Buffer.alloc(16);
  readonly headers = new TransportHeaders();
}

const IPV4_VERSION = 4;
const IPV6_VERSION = 6;
const IPV4_VERSION_IHL = (IPV4_VERSION << IPV4_VERSION_SHIFT) | (iphdr.SIZE / IPV4_IHL_UNIT);
/** iphdr.frag_off: more-fragments bit and fragment offset; a RoCE packet is never a fragment. */
const IP_FRAGMENT_MASK = 0x3fff;
/** Where the IPv4 address sits in a mapped GID. */
const V4_IN_GID = 12;

function l2Bytes(path: RocePath): number {
  return path.vlanTci >= 0 ? vlan_ethhdr.SIZE : ethhdr.SIZE;
}

function l3Bytes(ipVersion: 4 | 6): number {
  return ipVersion === 4 ? iphdr.SIZE : ipv6hdr.SIZE;
}

/** Where the payload of a packet with this opcode goes in a frame for this path: everything before it. */
export function frameHeaderBytes(path: RocePath, opcode: number): number {
  return l2Bytes(path) + l3Bytes(path.ipVersion) + udphdr.SIZE + OPCODE_HEADER_BYTES[opcode & 0xff]!;
}

/** The length of the frame encodeFrame will write. */
export function frameBytes(path: RocePath, opcode: number, payloadLen: number): number {
  return frameHeaderBytes(path, opcode) + ((payloadLen + 3) & ~3) + ICRC_BYTES;
}

/** Six bytes (a MAC) from src[from] to dst[at], word by word: per packet, a small native copy costs more. */
function copy6(src: Buffer, from: number, dst: Buffer, at: number): void {
  dst.writeInt32LE(src.readInt32LE(from), at);
  dst.writeUInt16LE(src.readUInt16LE(from + 4), at + 4);
}

/** gid = ::ffff:a.b.c.d, the address given as the little-endian read of its four bytes (per packet: no fill, no copy). */
export function writeV4Gid(gid: Buffer, addrLE: number): void {
  gid.writeInt32LE(0, 0);
  gid.writeInt32LE(0, 4);
  gid.writeInt32LE(-65536, 8); // bytes 00 00 ff ff
  gid.writeInt32LE(addrLE, V4_IN_GID);
}

/** Whether two 16-byte GIDs are equal (four word reads: cheaper per packet than Buffer.equals' native call). */
export function gidEquals(a: Buffer, b: Buffer): boolean {
  return (
    a.readInt32LE(12) === b.readInt32LE(12) &&
    a.readInt32LE(0) === b.readInt32LE(0) &&
    a.readInt32LE(4) === b.readInt32LE(4) &&
    a.readInt32LE(8) === b.readInt32LE(8)
  );
}

/** Write a GID's IPv4-mapped form. */
export function gidFromIpv4(out: Buffer, a: number, b: number, c: number, d: number): void {
  out.fill(0, 0, 10);
  out[10] = 0xff;
  out[11] = 0xff;
  out[12] = a;
  out[13] = b;
  out[14] = c;
  out[15] = d;
}

/**
 * Write the frame of h (h.payloadLen bytes of payload already at
 * buf[frameHeaderBytes(path, h.opcode)]) for path into buf from offset 0:
 * headers, pad, lengths, checksums and ICRC. Returns the frame length.
 */
export function encodeFrame(buf: Buffer, path: RocePath, h: TransportHeaders, payloadLen: number): number {
  h.payloadLen = payloadLen;
  const total = frameBytes(path, h.opcode, payloadLen);
  if (total > buf.length) throw new RangeError(`frame of ${total} bytes does not fit a ${buf.length}-byte buffer`);
  copy6(path.dstMac, 0, buf, ethhdr.h_dest.off);
  copy6(path.srcMac, 0, buf, ethhdr.h_source.off);
  const l3 = path.ipVersion === 4 ? ETH_P_IP : ETH_P_IPV6;
  let ipOff: number;
  if (path.vlanTci >= 0) {
    setField(buf, 0, vlan_ethhdr.h_vlan_proto, ETH_P_8021Q);
    setField(buf, 0, vlan_ethhdr.h_vlan_TCI, path.vlanTci & 0xffff);
    setField(buf, 0, vlan_ethhdr.h_vlan_encapsulated_proto, l3);
    ipOff = vlan_ethhdr.SIZE;
  } else {
    setField(buf, 0, ethhdr.h_proto, l3);
    ipOff = ethhdr.SIZE;
  }
  const udpOff = ipOff + l3Bytes(path.ipVersion);
  const bthOff = udpOff + udphdr.SIZE;
  const hdrBytes = encodeTransport(buf, bthOff, h);
  const payloadEnd = bthOff + hdrBytes + payloadLen;
  const icrcOff = payloadEnd + h.padCount;
  buf.fill(0, payloadEnd, icrcOff);
  const udpLen = icrcOff + ICRC_BYTES - udpOff;
  if (path.ipVersion === 4) {
    setField(buf, ipOff, iphdr.version_ihl, IPV4_VERSION_IHL);
    setField(buf, ipOff, iphdr.tos, path.trafficClass & 0xff);
    setField(buf, ipOff, iphdr.tot_len, iphdr.SIZE + udpLen);
    setField(buf, ipOff, iphdr.id, 0);
    setField(buf, ipOff, iphdr.frag_off, IP_DF);
    setField(buf, ipOff, iphdr.ttl, path.hopLimit & 0xff);
    setField(buf, ipOff, iphdr.protocol, IPPROTO_UDP);
    setField(buf, ipOff, iphdr.check, 0);
    buf.writeInt32LE(path.srcGid.readInt32LE(V4_IN_GID), ipOff + iphdr.saddr.off);
    buf.writeInt32LE(path.dstGid.readInt32LE(V4_IN_GID), ipOff + iphdr.daddr.off);
    setField(buf, ipOff, iphdr.check, checksumOf(onesComplementSum(buf, ipOff, ipOff + iphdr.SIZE)));
  } else {
    setField(
      buf,
      ipOff,
      ipv6hdr.version_tc_flow,
      ((IPV6_VERSION << IPV6_VERSION_SHIFT) |
        ((path.trafficClass & IPV6_TC_MASK) << IPV6_TC_SHIFT) |
        (path.flowLabel & IPV6_FLOW_MASK)) >>>
        0,
    );
    setField(buf, ipOff, ipv6hdr.payload_len, udpLen);
    setField(buf, ipOff, ipv6hdr.nexthdr, IPPROTO_UDP);
    setField(buf, ipOff, ipv6hdr.hop_limit, path.hopLimit & 0xff);
    path.srcGid.copy(buf, ipOff + ipv6hdr.saddr.off, 0, 16);
    path.dstGid.copy(buf, ipOff + ipv6hdr.daddr.off, 0, 16);
  }
  setField(buf, udpOff, udphdr.source, path.udpSrcPort & 0xffff);
  setField(buf, udpOff, udphdr.dest, ROCE_V2_UDP_PORT);
  setField(buf, udpOff, udphdr.len, udpLen);
  setField(buf, udpOff, udphdr.check, 0);
  writeIcrc(buf, ipOff, path.ipVersion, icrcOff);
  // IPv4 lets UDP go without a checksum (zero), as RoCE NICs send it; IPv6 does not.
  if (path.ipVersion === 6) setField(buf, udpOff, udphdr.check, udpChecksumV6(buf, ipOff, udpOff, udpLen));
  return total;
}

/** The UDP checksum over the IPv6 pseudo-header and the datagram (RFC 8200 8.1); 0 is sent as 0xffff. */
function udpChecksumV6(buf: Buffer, ipOff: number, udpOff: number, udpLen: number): number {
  let s = onesComplementSum(buf, ipOff + ipv6hdr.saddr.off, ipOff + ipv6hdr.daddr.off + ipv6hdr.daddr.size);
  s = onesComplementSum(buf, udpOff, udpOff + udpLen, s + udpLen + IPPROTO_UDP);
  const c = checksumOf(s);
  return c === 0 ? 0xffff : c;
}

/**
 * Decode frame buf[0, len) into f. Returns DROP_NONE for a well-formed
 * RoCEv2 packet with a good ICRC, else the reason it is not one. Never
 * throws, whatever the bytes.
 */
export function decodeFrame(buf: Buffer, len: number, f: RoceFrame): number {
  if (len > buf.length || len < ethhdr.SIZE) return DROP_TOO_SHORT;
  let proto = getField(buf, 0, ethhdr.h_proto);
  let ipOff: number = ethhdr.SIZE;
  f.vlanTci = -1;
  if (proto === ETH_P_8021Q) {
    if (len < vlan_ethhdr.SIZE) return DROP_TOO_SHORT;
    f.vlanTci = getField(buf, 0, vlan_ethhdr.h_vlan_TCI);
    proto = getField(buf, 0, vlan_ethhdr.h_vlan_encapsulated_proto);
    ipOff = vlan_ethhdr.SIZE;
  }
  copy6(buf, ethhdr.h_source.off, f.srcMac, 0);
  let udpOff: number;
  let ipEnd: number;
  if (proto === ETH_P_IP) {
    if (len < ipOff + iphdr.SIZE) return DROP_TOO_SHORT;
    const vi = getField(buf, ipOff, iphdr.version_ihl);
    if (vi >>> IPV4_VERSION_SHIFT !== IPV4_VERSION) return DROP_IP_HEADER;
    // RoCE packets carry no IP options; a fragment cannot be a RoCE packet.
    if ((vi & IPV4_IHL_MASK) * IPV4_IHL_UNIT !== iphdr.SIZE) return DROP_IP_HEADER;
    if ((getField(buf, ipOff, iphdr.frag_off) & IP_FRAGMENT_MASK) !== 0) return DROP_IP_HEADER;
    const totLen = getField(buf, ipOff, iphdr.tot_len);
    if (totLen < iphdr.SIZE + udphdr.SIZE || ipOff + totLen > len) return DROP_IP_LENGTH;
    if (getField(buf, ipOff, iphdr.protocol) !== IPPROTO_UDP) return DROP_NOT_UDP;
    if (onesComplementSum(buf, ipOff, ipOff + iphdr.SIZE) !== 0xffff) return DROP_IP_CHECKSUM;
    f.ipVersion = 4;
    f.trafficClass = getField(buf, ipOff, iphdr.tos);
    f.hopLimit = getField(buf, ipOff, iphdr.ttl);
    f.flowLabel = 0;
    writeV4Gid(f.srcGid, buf.readInt32LE(ipOff + iphdr.saddr.off));
    writeV4Gid(f.dstGid, buf.readInt32LE(ipOff + iphdr.daddr.off));
    udpOff = ipOff + iphdr.SIZE;
    ipEnd = ipOff + totLen;
  } else if (proto === ETH_P_IPV6) {
    if (len < ipOff + ipv6hdr.SIZE) return DROP_TOO_SHORT;
    const w = getField(buf, ipOff, ipv6hdr.version_tc_flow);
    if (w >>> IPV6_VERSION_SHIFT !== IPV6_VERSION) return DROP_IP_HEADER;
    // Extension headers are not RoCE: the UDP header must follow directly.
    if (getField(buf, ipOff, ipv6hdr.nexthdr) !== IPPROTO_UDP) return DROP_NOT_UDP;
    const payloadLen = getField(buf, ipOff, ipv6hdr.payload_len);
    if (payloadLen < udphdr.SIZE || ipOff + ipv6hdr.SIZE + payloadLen > len) return DROP_IP_LENGTH;
    f.ipVersion = 6;
    f.trafficClass = (w >>> IPV6_TC_SHIFT) & IPV6_TC_MASK;
    f.flowLabel = w & IPV6_FLOW_MASK;
    f.hopLimit = getField(buf, ipOff, ipv6hdr.hop_limit);
    buf.copy(f.srcGid, 0, ipOff + ipv6hdr.saddr.off, ipOff + ipv6hdr.saddr.off + 16);
    buf.copy(f.dstGid, 0, ipOff + ipv6hdr.daddr.off, ipOff + ipv6hdr.daddr.off + 16);
    udpOff = ipOff + ipv6hdr.SIZE;
    ipEnd = udpOff + payloadLen;
  } else {
    return DROP_NOT_IP;
  }
  if (getField(buf, udpOff, udphdr.dest) !== ROCE_V2_UDP_PORT) return DROP_NOT_ROCE_PORT;
  const udpLen = getField(buf, udpOff, udphdr.len);
  if (udpOff + udpLen !== ipEnd || udpLen < udphdr.SIZE + BTH_BYTES + ICRC_BYTES) return DROP_UDP_LENGTH;
  f.udpSrcPort = getField(buf, udpOff, udphdr.source);
  f.ipOff = ipOff;
  f.udpOff = udpOff;
  f.bthOff = udpOff + udphdr.SIZE;
  f.icrcOff = ipEnd - ICRC_BYTES;
  const reason = decodeTransport(buf, f.bthOff, f.icrcOff, f.headers);
  if (reason !== DROP_NONE) return reason;
  if (!icrcMatches(buf, ipOff, f.ipVersion, f.icrcOff)) return DROP_ICRC;
  return DROP_NONE;
}

/**
 * Whether an Ethernet frame is UDP to port 4791 (RoCEv2), without checking
 * more: what a TAP reader needs to send it here rather than to the guest.
 */
export function isRoceV2(buf: Buffer, len: number): boolean {
  if (len > buf.length || len < ethhdr.SIZE) return false;
  let proto = getField(buf, 0, ethhdr.h_proto);
  let ipOff: number = ethhdr.SIZE;
  if (proto === ETH_P_8021Q) {
    if (len < vlan_ethhdr.SIZE) return false;
    proto = getField(buf, 0, vlan_ethhdr.h_vlan_encapsulated_proto);
    ipOff = vlan_ethhdr.SIZE;
  }
  let udpOff: number;
  if (proto === ETH_P_IP) {
    if (len < ipOff + iphdr.SIZE) return false;
    if (getField(buf, ipOff, iphdr.protocol) !== IPPROTO_UDP) return false;
    udpOff = ipOff + (getField(buf, ipOff, iphdr.version_ihl) & IPV4_IHL_MASK) * IPV4_IHL_UNIT;
  } else if (proto === ETH_P_IPV6) {
    if (len < ipOff + ipv6hdr.SIZE || getField(buf, ipOff, ipv6hdr.nexthdr) !== IPPROTO_UDP) return false;
    udpOff = ipOff + ipv6hdr.SIZE;
  } else {
    return false;
  }
  return len >= udpOff + udphdr.SIZE && getField(buf, udpOff, udphdr.dest) === ROCE_V2_UDP_PORT;
}

/** Bytes of GRH in front of a UD receive. */
export const GRH_BYTES = 40;

/** The 40-byte GRH of a decoded RoCEv2 datagram into `out`: the IPv6 header, or 20 zero bytes then the IPv4 header. */
export function grhOf(buf: Buffer, f: RoceFrame, out: Buffer): Buffer {
  if (f.ipVersion === 6) {
    buf.copy(out, 0, f.ipOff, f.ipOff + GRH_BYTES);
  } else {
    out.fill(0, 0, GRH_BYTES - 20);
    buf.copy(out, GRH_BYTES - 20, f.ipOff, f.ipOff + 20);
  }
  return out;
}
