// What a NIC does to a frame the stack left unfinished: fill in a partial
// checksum (CSUM_PARTIAL), compute the IP and L4 checksums (CSUM_HW), cut a
// TCP super-frame into MSS-sized segments (TSO), or make a super-frame ready
// for a host kernel that segments it itself (a TAP's GSO).
//
// Segments: every one carries the super-frame's headers with the IPv4 id
// counted up, the IP length, the sequence number and the TCP checksum its
// own; FIN and PSH stay on the last segment only, CWR on the first only (what
// Linux's own GSO does). The TCP checksum field of the super-frame is ignored
// (the driver seeds it with a pseudo-header) and computed whole.

import {
  iphdr,
  IPPROTO_TCP,
  IPV4_IHL_MASK,
  IPV4_IHL_UNIT,
  IPPROTO_UDP,
  ipv6hdr,
  tcphdr,
  udphdr,
} from '../../net/headers';
import { checksumOf, ipv4PseudoSum, ipv6PseudoSum, onesSum } from './checksum';
import type { PacketInfo } from './packet';

const TCP_FLAG_FIN = 0x01;
const TCP_FLAG_PSH = 0x08;
const TCP_FLAG_CWR = 0x80;
/** The smallest MSS we segment with (Linux never goes below 88; a tiny one would turn one descriptor into thousands of frames). */
export const MIN_MSS = 64;
/** A UDP checksum that computes to 0 is sent as 0xffff (0 means "none", RFC 768). */
const CSUM_MANGLED_0 = 0xffff;

/** Pseudo-header sum for the L4 header at p.l4 carrying l4Len bytes. */
function pseudoSum(frame: Buffer, p: PacketInfo, l4Len: number): number {
  return p.ipVersion === 4 ? ipv4PseudoSum(frame, p.l3, p.proto, l4Len) : ipv6PseudoSum(frame, p.l3, p.proto, l4Len);
}

/** Fill in the IPv4 header checksum of frame (a no-op for IPv6, which has none). */
export function fillIpv4Checksum(frame: Buffer, p: PacketInfo): void {
  if (p.ipVersion !== 4) return;
  const ihl = (frame[p.l3]! & IPV4_IHL_MASK) * IPV4_IHL_UNIT;
  frame.writeUInt16BE(0, p.l3 + iphdr.check.off);
  frame.writeUInt16BE(checksumOf(onesSum(frame, p.l3, ihl)), p.l3 + iphdr.check.off);
}

/** Compute the TCP or UDP checksum of frame[0, len) from scratch (p.proto must be known). */
export function fillL4Checksum(frame: Buffer, len: number, p: PacketInfo): void {
  const at = p.l4 + (p.proto === IPPROTO_TCP ? tcphdr.check.off : udphdr.check.off);
  const l4Len = len - p.l4;
  frame.writeUInt16BE(0, at);
  const c = checksumOf(onesSum(frame, p.l4, l4Len, pseudoSum(frame, p, l4Len)));
  frame.writeUInt16BE(c === 0 && p.proto === IPPROTO_UDP ? CSUM_MANGLED_0 : c, at);
}

/**
 * CSUM_PARTIAL: sum frame[start, len) (the field at start + offset holds the
 * stack's pseudo-header seed) and store the checksum at start + offset.
 * False when the offsets do not fit the frame (the caller drops it).
 */
export function finishPartialChecksum(frame: Buffer, len: number, start: number, offset: number): boolean {
  const at = start + offset;
  if (start >= len || at + 2 > len) return false;
  const c = checksumOf(onesSum(frame, start, len - start));
  frame.writeUInt16BE(c === 0 ? CSUM_MANGLED_0 : c, at);
  return true;
}

/** Segments a TCP super-frame of `len` bytes makes at this MSS (at least one). */
export function segmentCount(len: number, p: PacketInfo, mss: number): number {
  const payload = len - p.headersEnd;
  return payload <= 0 ? 1 : Math.ceil(payload / mss);
}

/**
 * Write segment `index` of the TCP super-frame src[0, len) into out (from 0)
 * and return its length. p describes src (TCP over IPv4 or IPv6); out must
 * hold headersEnd + mss bytes. Payload offsets are even (TCP headers are
 * whole words), so every checksum span starts on a word.
 */
export function writeTcpSegment(
  src: Buffer,
  len: number,
  p: PacketInfo,
  mss: number,
  index: number,
  out: Buffer,
): number {
  const hdr = p.headersEnd;
  const count = segmentCount(len, p, mss);
  const from = hdr + index * mss;
  const n = Math.max(0, Math.min(mss, len - from));
  src.copy(out, 0, 0, hdr);
  if (n > 0) src.copy(out, hdr, from, from + n);
  const segLen = hdr + n;
  if (p.ipVersion === 4) {
    out.writeUInt16BE(segLen - p.l3, p.l3 + iphdr.tot_len.off);
    out.writeUInt16BE((src.readUInt16BE(p.l3 + iphdr.id.off) + index) & 0xffff, p.l3 + iphdr.id.off);
    fillIpv4Checksum(out, p);
  } else {
    out.writeUInt16BE(segLen - p.l3 - ipv6hdr.SIZE, p.l3 + ipv6hdr.payload_len.off);
  }
  const t = p.l4;
  out.writeUInt32BE((src.readUInt32BE(t + tcphdr.seq.off) + index * mss) >>> 0, t + tcphdr.seq.off);
  let flags = src[t + tcphdr.flags.off]!;
  if (index !== count - 1) flags &= ~(TCP_FLAG_FIN | TCP_FLAG_PSH);
  if (index !== 0) flags &= ~TCP_FLAG_CWR;
  out[t + tcphdr.flags.off] = flags;
  fillL4Checksum(out, segLen, p);
  return segLen;
}

/** How a super-frame goes to a host kernel that segments it itself. */
export interface GsoPrep {
  /** The TCP header carries CWR: the kernel must keep it on the first segment only. */
  ecn: boolean;
}

/**
 * Make the TCP super-frame frame[0, len) what a kernel takes as one GSO
 * buffer: IP lengths of the whole frame, a valid IPv4 header checksum, and the
 * TCP checksum field seeded with the pseudo-header over the whole L4 length
 * (the checksum is then partial: the kernel finishes it per segment).
 * False when the frame is too long for the IP length field.
 */
export function prepareGso(frame: Buffer, len: number, p: PacketInfo, out: GsoPrep): boolean {
  const l4Len = len - p.l4;
  if (p.ipVersion === 4) {
    if (len - p.l3 > 0xffff) return false;
    frame.writeUInt16BE(len - p.l3, p.l3 + iphdr.tot_len.off);
    fillIpv4Checksum(frame, p);
  } else {
    if (len - p.l3 - ipv6hdr.SIZE > 0xffff) return false;
    frame.writeUInt16BE(len - p.l3 - ipv6hdr.SIZE, p.l3 + ipv6hdr.payload_len.off);
  }
  frame.writeUInt16BE(pseudoSum(frame, p, l4Len), p.l4 + tcphdr.check.off);
  out.ecn = (frame[p.l4 + tcphdr.flags.off]! & TCP_FLAG_CWR) !== 0;
  return true;
}

/** Whether p is a TCP frame over IPv4 or IPv6 whose headers end at hdrLen (what TSO needs). */
export function tsoCapable(p: PacketInfo, hdrLen: number): boolean {
  return p.proto === IPPROTO_TCP && p.headersEnd === hdrLen;
}

/** UDP and TCP both: is the L4 header known, so a checksum can be computed whole? */
export function l4Known(p: PacketInfo): boolean {
  return p.proto === IPPROTO_TCP || p.proto === IPPROTO_UDP;
}

/**
 * Write datagram `index` of the UDP GSO buffer src[0, len) (UDP_L4: the
 * payload cut every `size` bytes, the last piece possibly shorter) into out
 * (from 0) and return its length: the buffer's headers with the IPv4 id
 * counted up, its own IP and UDP lengths, what a kernel's UDP segmentation
 * gives each datagram (finishUdpSegment).
 */
export function writeUdpSegment(
  src: Buffer,
  len: number,
  p: PacketInfo,
  size: number,
  index: number,
  out: Buffer,
): number {
  const hdr = p.headersEnd;
  const from = hdr + index * size;
  const n = Math.max(0, Math.min(size, len - from));
  src.copy(out, 0, 0, hdr);
  if (n > 0) src.copy(out, hdr, from, from + n);
  const segLen = hdr + n;
  finishUdpSegment(out, segLen, p, src.readUInt16BE(p.l3 + iphdr.id.off) + index);
  return segLen;
}

/**
 * writeUdpSegment without copying the payload: datagram `index` of the UDP
 * GSO buffer frame[0, len) made where it lies, its headers written over the
 * end of the datagram before it (which must be done with: datagrams are cut
 * in order). Returns the datagram's offset in frame and its length. Needs
 * size >= p.headersEnd, so the headers never cover their own payload.
 */
export function cutUdpSegmentInPlace(
  frame: Buffer,
  len: number,
  p: PacketInfo,
  size: number,
  index: number,
  baseId: number,
): { at: number; len: number } {
  const hdr = p.headersEnd;
  const at = index * size;
  const n = Math.max(0, Math.min(size, len - hdr - at));
  if (index > 0) frame.copyWithin(at, 0, hdr);
  finishUdpSegment(frame.subarray(at, at + hdr + n), hdr + n, p, baseId + index);
  return { at, len: hdr + n };
}

/**
 * A datagram cut from a UDP GSO buffer, seg[0, segLen) with the buffer's
 * headers, made whole: its UDP and IP lengths, the IPv4 id `id` and header
 * checksum; the UDP checksum 0 over IPv4 ("none", RFC 768: no pass over the
 * payload), computed over IPv6, which requires one.
 */
function finishUdpSegment(seg: Buffer, segLen: number, p: PacketInfo, id: number): void {
  seg.writeUInt16BE(segLen - p.l4, p.l4 + udphdr.len.off);
  if (p.ipVersion === 4) {
    seg.writeUInt16BE(segLen - p.l3, p.l3 + iphdr.tot_len.off);
    seg.writeUInt16BE(id & 0xffff, p.l3 + iphdr.id.off);
    fillIpv4Checksum(seg, p);
    seg.writeUInt16BE(0, p.l4 + udphdr.check.off);
  } else {
    seg.writeUInt16BE(segLen - p.l3 - ipv6hdr.SIZE, p.l3 + ipv6hdr.payload_len.off);
    fillL4Checksum(seg, segLen, p);
  }
}

/**
 * Make the UDP frame frame[0, len) (datagrams laid end to end after one set
 * of headers) what a kernel takes as one UDP GSO buffer: IP and UDP lengths
 * of the whole, a valid IPv4 header checksum, the UDP checksum field seeded
 * with the pseudo-header over the whole UDP length (partial: the kernel
 * finishes each datagram's). False when it is too long for the length fields.
 */
export function prepareUdpGso(frame: Buffer, len: number, p: PacketInfo): boolean {
  const l4Len = len - p.l4;
  if (l4Len > 0xffff) return false;
  if (p.ipVersion === 4) {
    if (len - p.l3 > 0xffff) return false;
    frame.writeUInt16BE(len - p.l3, p.l3 + iphdr.tot_len.off);
    fillIpv4Checksum(frame, p);
  } else {
    frame.writeUInt16BE(len - p.l3 - ipv6hdr.SIZE, p.l3 + ipv6hdr.payload_len.off);
  }
  frame.writeUInt16BE(l4Len, p.l4 + udphdr.len.off);
  frame.writeUInt16BE(pseudoSum(frame, p, l4Len), p.l4 + udphdr.check.off);
  return true;
}
