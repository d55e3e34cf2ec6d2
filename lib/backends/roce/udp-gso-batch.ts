// RoCE packets to the TAP fifteen at a time. Every packet of a message to one
// QP is one UDP flow, and all but the last have the same length, so
// consecutive packets laid end to end after one set of headers are a UDP GSO
// buffer (UDP_L4): one write, which the kernel cuts back into the same
// datagrams (or hands whole to a TAP that takes USO, whose reader cuts it the
// same way: LifRx's UDP segmentation). A TAP write costs about as much for
// 60 KiB as for one 4 KiB packet, so this is what lets RoCE go faster than
// one packet per system call.
//
// The cut gives datagram k the buffer's IPv4 identification plus k. The ICRC
// covers the identification (IBTA A17 masks only TOS, TTL and the
// checksums), so a packet that becomes datagram k has its ICRC changed to
// the one of the header it will carry: the CRC is linear, so that change is
// the CRC of k alone at the identification's place, XORed in (four bits of k,
// four precomputed values per packet length). Lengths need nothing: each
// packet was encoded with its own, and the cut gives it the same.

import { crc32Update } from '../../net/crc32';
import { iphdr, IPPROTO_UDP, udphdr } from '../../net/headers';
import { FrameOffload, VirtioGso } from '../../net/vnet';
import { PacketInfo } from '../../ionic/offload/packet';
import { prepareUdpGso } from '../../ionic/offload/segment';

/** Packets per buffer: 15 path-MTU (4 KiB) packets stay within IPv4's 65,535-byte packet. */
const UDP_GSO_MAX_SEGMENTS = 15;
/** The largest buffer: one IP packet of 64 KiB and a VLAN-tagged Ethernet header. */
const MAX_BUFFER = 0xffff + 18;
/** Bytes of the masked LRH the ICRC starts with (icrc.ts). */
const ICRC_LRH_BYTES = 8;
const ICRC_BYTES = 4;
/** Bits of k that change: k < 16. */
const ID_BITS = 4;
/** Packet lengths whose ICRC corrections are kept (a QP's full-size and last packets, a few path MTUs). */
const MAX_CACHED_LENGTHS = 64;

/** Sends a finished frame, or a UDP GSO buffer with its offload; false when it could not go. */
type FrameSender = (frame: Buffer, len: number, offload: FrameOffload | null) => boolean;

export class UdpGsoBatch {
  readonly #buf = Buffer.allocUnsafe(MAX_BUFFER);
  readonly #first = new PacketInfo();
  readonly #next = new PacketInfo();
  readonly #offload = new FrameOffload();
  /** Per CRC'd message length: the ICRC change of each of the low ID_BITS bits of the identification. */
  readonly #corrections = new Map<number, Uint32Array>();
  #zeros = Buffer.alloc(0);
  #len = 0;
  #count = 0;
  #segSize = 0;
  /** A shorter datagram ended the run: nothing may follow it in this buffer. */
  #ended = false;
  #flushQueued = false;
  /** Buffers (of two or more packets) and packets written. */
  buffers = 0;
  packets = 0;
  /** Called for each write the sender refused. */
  onFailure: (() => void) | null = null;

  constructor(private readonly send: FrameSender) {}

  /**
   * Send the RoCE frame frame[0, len) (IPv4 identification 0, as frame.ts
   * writes it): with the packets before it when it continues their flow, else
   * after them. What is gathered goes at the end of this turn's work
   * (a microtask), or as soon as the buffer is full.
   */
  add(frame: Buffer, len: number): boolean {
    const p = this.#next.parse(frame, len);
    if (p.proto !== IPPROTO_UDP || p.l4 + udphdr.SIZE >= len) {
      this.flush();
      return this.#out(frame, len, null);
    }
    const payload = len - p.headersEnd;
    if (this.#count > 0 && this.#continues(frame, p, payload)) {
      const at = this.#len;
      frame.copy(this.#buf, at, p.headersEnd, len);
      this.#len += payload;
      if (p.ipVersion === 4) this.#correctIcrc(this.#buf, at + payload - ICRC_BYTES, len - p.l3, this.#count);
      this.#count++;
      this.packets++;
      if (payload < this.#segSize) this.#ended = true;
      if (this.#count === UDP_GSO_MAX_SEGMENTS) this.flush();
      return true;
    }
    // A message's first packet carries the RETH (16 bytes more than the middle ones): it goes alone, and
    // the run starts at the second.
    this.flush();
    frame.copy(this.#buf, 0, 0, len);
    this.#first.parse(this.#buf, len);
    this.#len = len;
    this.#count = 1;
    this.#segSize = payload;
    this.#ended = false;
    this.packets++;
    if (!this.#flushQueued) {
      this.#flushQueued = true;
      queueMicrotask(this.#flushLater);
    }
    return true;
  }

  readonly #flushLater = (): void => {
    this.#flushQueued = false;
    this.flush();
  };

  /** Send what is gathered: a lone packet as itself, two or more as one GSO buffer. */
  flush(): boolean {
    const n = this.#count;
    if (n === 0) return true;
    this.#count = 0;
    if (n === 1) return this.#out(this.#buf, this.#len, null);
    const p = this.#first;
    if (!prepareUdpGso(this.#buf, this.#len, p)) return this.#out(this.#buf, 0, null);
    const o = this.#offload.clear();
    o.needsCsum = true;
    o.gsoType = VirtioGso.UDP_L4;
    o.hdrLen = p.headersEnd;
    o.gsoSize = this.#segSize;
    o.csumStart = p.l4;
    o.csumOffset = udphdr.check.off;
    this.buffers++;
    return this.#out(this.#buf, this.#len, o);
  }

  #out(frame: Buffer, len: number, offload: FrameOffload | null): boolean {
    const ok = len > 0 && this.send(frame, len, offload);
    if (!ok) this.onFailure?.();
    return ok;
  }

  /** Whether a packet of `payload` bytes of UDP payload, headers as p says, goes at the end of the open run. */
  #continues(frame: Buffer, p: PacketInfo, payload: number): boolean {
    const f = this.#first;
    if (this.#ended || payload > this.#segSize || p.ipVersion !== f.ipVersion || p.l4 !== f.l4) return false;
    // Shorter than a lone first packet: a new size, not the last datagram of this one's run.
    if (payload < this.#segSize && this.#count === 1) return false;
    if (this.#len + payload > 0xffff + f.l3) return false;
    const b = this.#buf;
    // The flow: link header, version and class, (IPv4) identification to protocol, addresses and ports.
    if (b.compare(frame, 0, p.l3 + 2, 0, f.l3 + 2) !== 0) return false;
    if (p.ipVersion === 4) {
      if (b.compare(frame, p.l3 + iphdr.id.off, p.l3 + iphdr.check.off, f.l3 + iphdr.id.off, f.l3 + iphdr.check.off))
        return false;
      return b.compare(frame, p.l3 + iphdr.saddr.off, p.l4 + 4, f.l3 + iphdr.saddr.off, f.l4 + 4) === 0;
    }
    // IPv6: flow label through the hop limit, then addresses and ports (payload_len differs on the last).
    if (b.compare(frame, p.l3 + 2, p.l3 + 4, f.l3 + 2, f.l3 + 4) !== 0) return false;
    return b.compare(frame, p.l3 + 6, p.l4 + 4, f.l3 + 6, f.l4 + 4) === 0;
  }

  /** The ICRC at buf[icrcAt] of a packet whose IP packet is ipLen bytes, for identification k instead of 0. */
  #correctIcrc(buf: Buffer, icrcAt: number, ipLen: number, k: number): void {
    const m = ICRC_LRH_BYTES + ipLen - ICRC_BYTES;
    let c = this.#corrections.get(m);
    if (!c) {
      c = this.#computeCorrections(m);
      if (this.#corrections.size >= MAX_CACHED_LENGTHS) this.#corrections.clear();
      this.#corrections.set(m, c);
    }
    let delta = 0;
    for (let b = 0; b < ID_BITS; b++) if (k & (1 << b)) delta ^= c[b]!;
    buf.writeUInt32LE((buf.readUInt32LE(icrcAt) ^ delta) >>> 0, icrcAt);
  }

  /** For a CRC'd message of m bytes: the CRC of a message that is zero but for one bit of the identification's low byte. */
  #computeCorrections(m: number): Uint32Array {
    if (this.#zeros.length < m) this.#zeros = Buffer.alloc(m);
    const z = this.#zeros;
    const at = ICRC_LRH_BYTES + iphdr.id.off + 1;
    const out = new Uint32Array(ID_BITS);
    for (let b = 0; b < ID_BITS; b++) {
      z[at] = 1 << b;
      out[b] = crc32Update(0, z, 0, m);
    }
    z[at] = 0;
    return out;
  }
}
