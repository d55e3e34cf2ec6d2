// Wire tables and helpers of the TCP/IP host: the headers it reads and
// writes beyond lib/net/headers.ts (the MSS and window-scale options) and
// frame builders. Every header field goes through protocol/field.ts; the
// checksums are lib/net/checksum.ts's.

import { be, getField, setField, setRawBytes } from '../../../protocol/field';
import { addSums, checksumOf, inetChecksum, onesComplementSum, pseudoSum } from '../checksum';
import {
  ETH_P_IP,
  ethhdr,
  iphdr,
  IPPROTO_TCP,
  IPV4_ALEN,
  IPV4_IHL_UNIT,
  IPV4_VERSION_SHIFT,
  IP_DF,
  tcphdr,
  TCP_DOFF_SHIFT,
} from '../headers';

/** TCP options: end, no-op, MSS (kind 2, length 4, value) and window scale (RFC 7323: kind 3, length 3, shift). */
const TCPOPT_EOL = 0;
const TCPOPT_NOP = 1;
const TCPOPT_MSS = 2;
const TCPOPT_WSCALE = 3;
const tcp_opt_mss = { kind: be(0, 1), len: be(1, 1), mss: be(2, 2), SIZE: 4 } as const;
const tcp_opt_wscale = { kind: be(0, 1), len: be(1, 1), shift: be(2, 1), SIZE: 3 } as const;
/** Largest shift a peer may use (RFC 7323 2.3: larger values are taken as 14). */
const TCP_MAX_WSCALE = 14;

const IPV4_DEFAULT_TTL = 64;
const IPV4_VERSION = 4;

/** MAC of an endpoint at `ip`: 02:53 followed by the four address bytes. */
export function endpointMac(ip: Buffer): Buffer {
  return Buffer.from([0x02, 0x53, ip[0]!, ip[1]!, ip[2]!, ip[3]!]);
}

/** A parsed IPv4 packet inside an Ethernet frame (no VLAN tag; no fragments). */
interface Ipv4View {
  readonly l3: number;
  readonly ihl: number;
  /** Total length from the header (checked against the frame). */
  readonly total: number;
  readonly protocol: number;
  readonly saddr: Buffer;
  readonly daddr: Buffer;
}

/**
 * The IPv4 header of an Ethernet frame if it is whole, unfragmented and its
 * checksum holds (not looked at with `checkHeader` false: a TSO super-frame's
 * header is the device's to fill); else null.
 */
export function parseIpv4(frame: Buffer, checkHeader = true): Ipv4View | null {
  const l3 = ethhdr.SIZE;
  if (frame.length < l3 + iphdr.SIZE || getField(frame, 0, ethhdr.h_proto) !== ETH_P_IP) return null;
  const vihl = getField(frame, l3, iphdr.version_ihl);
  const ihl = (vihl & 0xf) * IPV4_IHL_UNIT;
  const total = getField(frame, l3, iphdr.tot_len);
  if (vihl >>> IPV4_VERSION_SHIFT !== IPV4_VERSION || ihl < iphdr.SIZE || total < ihl || l3 + total > frame.length)
    return null;
  if ((getField(frame, l3, iphdr.frag_off) & ~IP_DF) !== 0) return null; // fragments are not reassembled
  if (checkHeader && inetChecksum(frame, l3, ihl) !== 0) return null;
  return {
    l3,
    ihl,
    total,
    protocol: getField(frame, l3, iphdr.protocol),
    saddr: frame.subarray(l3 + iphdr.saddr.off, l3 + iphdr.saddr.off + IPV4_ALEN),
    daddr: frame.subarray(l3 + iphdr.daddr.off, l3 + iphdr.daddr.off + IPV4_ALEN),
  };
}

/** Write an Ethernet + IPv4 header (no options) at the start of `out`, checksum included. */
function writeEthIpv4(
  out: Buffer,
  dmac: Buffer,
  smac: Buffer,
  saddr: Buffer,
  daddr: Buffer,
  protocol: number,
  l4len: number,
  id: number,
): void {
  setRawBytes(out, 0, ethhdr.h_dest, dmac);
  setRawBytes(out, 0, ethhdr.h_source, smac);
  setField(out, 0, ethhdr.h_proto, ETH_P_IP);
  const l3 = ethhdr.SIZE;
  setField(out, l3, iphdr.version_ihl, (IPV4_VERSION << IPV4_VERSION_SHIFT) | (iphdr.SIZE / IPV4_IHL_UNIT));
  setField(out, l3, iphdr.tos, 0);
  setField(out, l3, iphdr.tot_len, iphdr.SIZE + l4len);
  setField(out, l3, iphdr.id, id & 0xffff);
  setField(out, l3, iphdr.frag_off, IP_DF);
  setField(out, l3, iphdr.ttl, IPV4_DEFAULT_TTL);
  setField(out, l3, iphdr.protocol, protocol);
  setField(out, l3, iphdr.check, 0);
  setRawBytes(out, l3, iphdr.saddr, saddr);
  setRawBytes(out, l3, iphdr.daddr, daddr);
  setField(out, l3, iphdr.check, inetChecksum(out, l3, iphdr.SIZE));
}

/** A TCP segment to build: addresses, ports, sequence numbers, flags, window, an optional MSS option and payload. */
interface TcpSegmentSpec {
  readonly dmac: Buffer;
  readonly smac: Buffer;
  readonly saddr: Buffer;
  readonly daddr: Buffer;
  readonly sport: number;
  readonly dport: number;
  readonly seq: number;
  readonly ack: number;
  readonly flags: number;
  readonly window: number;
  readonly mss?: number;
  /** Our window-scale shift, sent (after a NOP) with the MSS option of a SYN-ACK whose SYN offered scaling. */
  readonly wscale?: number;
  readonly payload?: Buffer;
  readonly ipId?: number;
}

/** Bytes of TCP header (options included) a segment of this spec carries. */
export function tcpHeaderLength(s: TcpSegmentSpec): number {
  return (
    tcphdr.SIZE + (s.mss !== undefined ? tcp_opt_mss.SIZE : 0) + (s.wscale !== undefined ? 1 + tcp_opt_wscale.SIZE : 0)
  );
}

/**
 * Write the Ethernet, IPv4 and TCP headers of a segment carrying
 * `payloadLen` bytes at out[0, ...) and return where the payload goes. The
 * caller puts the payload there, then seals the frame (sealTcpFrame).
 */
export function writeTcpHeaders(out: Buffer, s: TcpSegmentSpec, payloadLen: number): number {
  const hdr = tcpHeaderLength(s);
  const l4len = hdr + payloadLen;
  writeEthIpv4(out, s.dmac, s.smac, s.saddr, s.daddr, IPPROTO_TCP, l4len, s.ipId ?? 0);
  const l4 = ethhdr.SIZE + iphdr.SIZE;
  setField(out, l4, tcphdr.source, s.sport);
  setField(out, l4, tcphdr.dest, s.dport);
  setField(out, l4, tcphdr.seq, s.seq >>> 0);
  setField(out, l4, tcphdr.ack_seq, s.ack >>> 0);
  setField(out, l4, tcphdr.doff_res, (hdr / 4) << TCP_DOFF_SHIFT);
  setField(out, l4, tcphdr.flags, s.flags);
  setField(out, l4, tcphdr.window, s.window);
  setField(out, l4, tcphdr.check, 0);
  setField(out, l4, tcphdr.urg_ptr, 0);
  if (s.mss !== undefined) {
    const o = l4 + tcphdr.SIZE;
    setField(out, o, tcp_opt_mss.kind, TCPOPT_MSS);
    setField(out, o, tcp_opt_mss.len, tcp_opt_mss.SIZE);
    setField(out, o, tcp_opt_mss.mss, s.mss);
  }
  if (s.wscale !== undefined) {
    const o = l4 + hdr - tcp_opt_wscale.SIZE;
    out[o - 1] = TCPOPT_NOP; // keeps the header a whole number of words
    setField(out, o, tcp_opt_wscale.kind, TCPOPT_WSCALE);
    setField(out, o, tcp_opt_wscale.len, tcp_opt_wscale.SIZE);
    setField(out, o, tcp_opt_wscale.shift, s.wscale);
  }
  return l4 + hdr;
}

/**
 * Fill in the TCP checksum of the frame out[0, len) written by
 * writeTcpHeaders, and return the ones'-complement sum of everything after
 * the Ethernet header (what a NIC's CHECKSUM_COMPLETE reports), found
 * without a second pass: a valid IPv4 header sums to 0xffff, and the TCP
 * segment's own sum follows from its checksum.
 */
export function sealTcpFrame(out: Buffer, len: number, saddr: Buffer, daddr: Buffer): number {
  const l4 = ethhdr.SIZE + iphdr.SIZE;
  const l4len = len - l4;
  const segment = onesComplementSum(out, l4, len); // the checksum field is 0 here
  const check = checksumOf(addSums(segment, pseudoSum(saddr, daddr, IPPROTO_TCP, l4len)));
  setField(out, l4, tcphdr.check, check);
  return addSums(0xffff, addSums(segment, check));
}

/** A whole Ethernet/IPv4/TCP frame with both checksums, in a buffer of its own. */
export function buildTcpFrame(s: TcpSegmentSpec): Buffer {
  const payload = s.payload ?? Buffer.alloc(0);
  const out = Buffer.alloc(ethhdr.SIZE + iphdr.SIZE + tcpHeaderLength(s) + payload.length);
  payload.copy(out, writeTcpHeaders(out, s, payload.length));
  sealTcpFrame(out, out.length, s.saddr, s.daddr);
  return out;
}

/** A received TCP segment, decoded once. */
export interface TcpSegment {
  readonly sport: number;
  readonly dport: number;
  readonly seq: number;
  readonly ack: number;
  readonly flags: number;
  readonly window: number;
  /** The peer's MSS option, or 0 when absent. */
  readonly mss: number;
  /** The peer's window-scale shift (capped at 14), or -1 when absent. */
  readonly wscale: number;
  readonly payload: Buffer;
}

/**
 * Decode the TCP segment of an IPv4 packet whose checksum holds; null
 * otherwise. `checkSum` false: the sender left the checksum to the NIC (a
 * partial checksum or a TSO super-frame), so there is none to check yet.
 */
export function parseTcp(frame: Buffer, ip: Ipv4View, checkSum = true): TcpSegment | null {
  const l4 = ip.l3 + ip.ihl;
  const l4len = ip.total - ip.ihl;
  if (l4len < tcphdr.SIZE) return null;
  const doff = (getField(frame, l4, tcphdr.doff_res) >>> TCP_DOFF_SHIFT) * 4;
  if (doff < tcphdr.SIZE || doff > l4len) return null;
  if (checkSum && inetChecksum(frame, l4, l4len, pseudoSum(ip.saddr, ip.daddr, IPPROTO_TCP, l4len)) !== 0) return null;
  let mss = 0;
  let wscale = -1;
  for (let o = l4 + tcphdr.SIZE, end = l4 + doff; o < end;) {
    const kind = frame[o]!;
    if (kind === TCPOPT_EOL) break;
    if (kind === TCPOPT_NOP) {
      o++;
      continue;
    }
    if (o + 1 >= end) break;
    const len = frame[o + 1]!;
    if (len < 2 || o + len > end) break;
    if (kind === TCPOPT_MSS && len === tcp_opt_mss.SIZE) mss = getField(frame, o, tcp_opt_mss.mss);
    if (kind === TCPOPT_WSCALE && len === tcp_opt_wscale.SIZE)
      wscale = Math.min(TCP_MAX_WSCALE, getField(frame, o, tcp_opt_wscale.shift));
    o += len;
  }
  return {
    sport: getField(frame, l4, tcphdr.source),
    dport: getField(frame, l4, tcphdr.dest),
    seq: getField(frame, l4, tcphdr.seq),
    ack: getField(frame, l4, tcphdr.ack_seq),
    flags: getField(frame, l4, tcphdr.flags),
    window: getField(frame, l4, tcphdr.window),
    mss,
    wscale,
    payload: frame.subarray(l4 + doff, ip.l3 + ip.total),
  };
}

/** Bytes of Ethernet, IPv4 and TCP header of a segment without options. */
const PLAIN_HEADERS = ethhdr.SIZE + iphdr.SIZE + tcphdr.SIZE;

/**
 * One connection's headers for segments without options (its data and
 * ACKs), written once by writeTcpHeaders: a segment copies them and sets
 * only what changes (lengths, IP id, sequence numbers, flags, window), and
 * both checksums start from sums taken here, so nothing about the
 * addresses is written or summed again per segment.
 */
export class TcpHeaderTemplate {
  readonly #bytes = Buffer.alloc(PLAIN_HEADERS);
  /** Sum of the IPv4 header with tot_len, id and check zero. */
  readonly #ipSum: number;
  /** Sum of the pseudo-header without its length. */
  readonly #pseudo: number;

  constructor(dmac: Buffer, smac: Buffer, saddr: Buffer, daddr: Buffer, sport: number, dport: number) {
    const b = this.#bytes;
    writeTcpHeaders(b, { dmac, smac, saddr, daddr, sport, dport, seq: 0, ack: 0, flags: 0, window: 0, ipId: 0 }, 0);
    setField(b, ethhdr.SIZE, iphdr.tot_len, 0);
    setField(b, ethhdr.SIZE, iphdr.check, 0);
    this.#ipSum = onesComplementSum(b, ethhdr.SIZE, ethhdr.SIZE + iphdr.SIZE);
    this.#pseudo = pseudoSum(saddr, daddr, IPPROTO_TCP, 0);
  }

  /** Write the headers of a segment carrying `payloadLen` bytes at out[0, ...); returns where the payload goes. */
  write(
    out: Buffer,
    seq: number,
    ack: number,
    flags: number,
    window: number,
    ipId: number,
    payloadLen: number,
  ): number {
    this.#bytes.copy(out, 0);
    const l3 = ethhdr.SIZE;
    const l4 = l3 + iphdr.SIZE;
    const total = iphdr.SIZE + tcphdr.SIZE + payloadLen;
    out.writeUInt16BE(total, l3 + iphdr.tot_len.off);
    out.writeUInt16BE(ipId, l3 + iphdr.id.off);
    out.writeUInt16BE(checksumOf(addSums(this.#ipSum, total + ipId)), l3 + iphdr.check.off);
    out.writeUInt32BE(seq >>> 0, l4 + tcphdr.seq.off);
    out.writeUInt32BE(ack >>> 0, l4 + tcphdr.ack_seq.off);
    out[l4 + tcphdr.flags.off] = flags;
    out.writeUInt16BE(window, l4 + tcphdr.window.off);
    return PLAIN_HEADERS;
  }

  /** Fill in the TCP checksum of out[0, len) and return the complete sum after the Ethernet header (sealTcpFrame). */
  seal(out: Buffer, len: number): number {
    const l4 = ethhdr.SIZE + iphdr.SIZE;
    const segment = onesComplementSum(out, l4, len);
    const check = checksumOf(addSums(segment, addSums(this.#pseudo, len - l4)));
    out.writeUInt16BE(check, l4 + tcphdr.check.off);
    return addSums(0xffff, addSums(segment, check));
  }
}
