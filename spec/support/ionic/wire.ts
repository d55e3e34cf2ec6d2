// Ethernet frames built and parsed by hand for the device tests (ARP, IPv4,
// ICMP echo, UDP), and a HostLink stand-in that records what the device sends
// and lets a test inject frames as if they came from the host TAP.

import type { HostLink } from '../../../lib/net/frame-endpoint';
import { FrameOffload } from '../../../lib/net/vnet';
import { rfc1071Sum } from './tcp-frames';

export const BROADCAST = Buffer.from([0xff, 0xff, 0xff, 0xff, 0xff, 0xff]);
const ETH_ARP = 0x0806;
export const ETH_IPV4 = 0x0800;

export function mac(text: string): Buffer {
  return Buffer.from(text.split(':').map((h) => parseInt(h, 16)));
}

export function ip(text: string): Buffer {
  return Buffer.from(text.split('.').map(Number));
}

export function macText(b: Buffer): string {
  return [...b.subarray(0, 6)].map((x) => x.toString(16).padStart(2, '0')).join(':');
}

export function ethernet(dst: Buffer, src: Buffer, type: number, payload: Buffer): Buffer {
  const h = Buffer.alloc(14);
  dst.copy(h, 0, 0, 6);
  src.copy(h, 6, 0, 6);
  h.writeUInt16BE(type, 12);
  return Buffer.concat([h, payload]);
}

/** RFC 1071 ones'-complement checksum. */
function inetChecksum(b: Buffer): number {
  return ~rfc1071Sum(b) & 0xffff;
}

/** ARP request (op 1) or reply (op 2) for IPv4 over Ethernet. */
export function arp(op: 1 | 2, srcMac: Buffer, srcIp: Buffer, dstMac: Buffer, dstIp: Buffer): Buffer {
  const a = Buffer.alloc(28);
  a.writeUInt16BE(1, 0); // Ethernet
  a.writeUInt16BE(ETH_IPV4, 2);
  a[4] = 6;
  a[5] = 4;
  a.writeUInt16BE(op, 6);
  srcMac.copy(a, 8);
  srcIp.copy(a, 14);
  (op === 1 ? Buffer.alloc(6) : dstMac).copy(a, 18);
  dstIp.copy(a, 24);
  return ethernet(op === 1 ? BROADCAST : dstMac, srcMac, ETH_ARP, a);
}

interface ArpInfo {
  op: number;
  senderMac: Buffer;
  senderIp: string;
  targetMac: Buffer;
  targetIp: string;
}

export function parseArp(f: Buffer): ArpInfo | null {
  if (f.length < 42 || f.readUInt16BE(12) !== ETH_ARP) return null;
  return {
    op: f.readUInt16BE(20),
    senderMac: f.subarray(22, 28),
    senderIp: [...f.subarray(28, 32)].join('.'),
    targetMac: f.subarray(32, 38),
    targetIp: [...f.subarray(38, 42)].join('.'),
  };
}

export function ipv4(src: Buffer, dst: Buffer, proto: number, payload: Buffer, id = 1): Buffer {
  const h = Buffer.alloc(20);
  h[0] = 0x45;
  h.writeUInt16BE(20 + payload.length, 2);
  h.writeUInt16BE(id, 4);
  h.writeUInt16BE(0x4000, 6); // DF
  h[8] = 64;
  h[9] = proto;
  src.copy(h, 12);
  dst.copy(h, 16);
  h.writeUInt16BE(inetChecksum(h), 10);
  return Buffer.concat([h, payload]);
}

export function icmpEcho(type: 8 | 0, id: number, seq: number, data: Buffer): Buffer {
  const m = Buffer.alloc(8 + data.length);
  m[0] = type;
  m.writeUInt16BE(id, 4);
  m.writeUInt16BE(seq, 6);
  data.copy(m, 8);
  m.writeUInt16BE(inetChecksum(m), 2);
  return m;
}

function udp(srcPort: number, dstPort: number, data: Buffer): Buffer {
  // Checksum 0: "none" for UDP over IPv4.
  const u = Buffer.alloc(8 + data.length);
  u.writeUInt16BE(srcPort, 0);
  u.writeUInt16BE(dstPort, 2);
  u.writeUInt16BE(8 + data.length, 4);
  data.copy(u, 8);
  return u;
}

interface Ipv4Info {
  src: string;
  dst: string;
  proto: number;
  payload: Buffer;
  headerOk: boolean;
}

export function parseIpv4(f: Buffer): Ipv4Info | null {
  if (f.length < 34 || f.readUInt16BE(12) !== ETH_IPV4 || f[14]! >> 4 !== 4) return null;
  const ihl = (f[14]! & 0xf) * 4;
  const total = f.readUInt16BE(16);
  return {
    src: [...f.subarray(26, 30)].join('.'),
    dst: [...f.subarray(30, 34)].join('.'),
    proto: f[23]!,
    payload: f.subarray(14 + ihl, 14 + total),
    headerOk: inetChecksum(f.subarray(14, 14 + ihl)) === 0,
  };
}

interface EchoInfo {
  type: number;
  id: number;
  seq: number;
  data: Buffer;
  checksumOk: boolean;
}

export function parseEcho(f: Buffer): EchoInfo | null {
  const p = parseIpv4(f);
  if (!p || p.proto !== 1 || p.payload.length < 8) return null;
  return {
    type: p.payload[0]!,
    id: p.payload.readUInt16BE(4),
    seq: p.payload.readUInt16BE(6),
    data: p.payload.subarray(8),
    checksumOk: inetChecksum(p.payload) === 0,
  };
}

interface UdpInfo {
  src: string;
  dst: string;
  srcPort: number;
  dstPort: number;
  data: Buffer;
}

export function parseUdp(f: Buffer): UdpInfo | null {
  const p = parseIpv4(f);
  if (!p || p.proto !== 17 || p.payload.length < 8) return null;
  return {
    src: p.src,
    dst: p.dst,
    srcPort: p.payload.readUInt16BE(0),
    dstPort: p.payload.readUInt16BE(2),
    data: p.payload.subarray(8),
  };
}

/** A UDP/IPv4 frame whose payload is `payloadLen` bytes of a pattern seeded by `tag`. */
export function udpFrame(
  dstMac: Buffer,
  srcMac: Buffer,
  srcIp: string,
  dstIp: string,
  srcPort: number,
  dstPort: number,
  payloadLen: number,
  tag = 0,
): Buffer {
  const data = Buffer.alloc(payloadLen);
  for (let i = 0; i < payloadLen; i++) data[i] = (i * 7 + tag) & 0xff;
  return ethernet(dstMac, srcMac, ETH_IPV4, ipv4(ip(srcIp), ip(dstIp), 17, udp(srcPort, dstPort, data)));
}

/** The host side of the device's wire, in process: records sent frames, injects received ones. */
export class FakeLink implements HostLink {
  readonly name = 'fake0';
  readonly sent: Buffer[] = [];
  /** With `offloads`: what the host was left to do with each sent frame (null: nothing). */
  readonly sentOffloads: (FrameOffload | null)[] = [];
  #onFrame: ((frame: Buffer, offload?: FrameOffload | null) => void) | null = null;
  closed = false;

  /** offloads: the link takes partial checksums and TCP super-frames, as a TAP with IFF_VNET_HDR does. */
  constructor(readonly offloads = false) {}

  send(frame: Buffer, offload?: FrameOffload): boolean {
    this.sent.push(Buffer.from(frame));
    this.sentOffloads.push(offload ? Object.assign(new FrameOffload(), offload) : null);
    return true;
  }

  start(onFrame: (frame: Buffer, offload?: FrameOffload | null) => void): void {
    this.#onFrame = onFrame;
  }

  /** A frame "from the host TAP", delivered synchronously as the TAP watcher does (with its virtio_net_hdr, if any). */
  inject(frame: Buffer, offload: FrameOffload | null = null): void {
    if (!this.#onFrame) throw new Error('FakeLink: device did not start the link');
    this.#onFrame(frame, offload);
  }

  close(): void {
    this.closed = true;
  }
}
