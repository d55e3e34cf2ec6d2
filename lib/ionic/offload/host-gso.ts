// What a NIC's receive side does with a GSO buffer the host kernel handed the
// TAP whole (IFF_VNET_HDR): cut it into the frames the guest takes. A TCP
// super-frame goes in segments of the guest's MTU (the driver posts MTU-sized
// buffers: it takes no large receives); a UDP GSO buffer (UDP_L4) goes as the
// datagrams it carries, each as the kernel's UDP segmentation makes it. Each
// piece is offered in order; the cut stops at the first one refused (no
// receive buffer) and says which, so the caller can keep the buffer and go on
// from there later.

import { IPPROTO_TCP, IPPROTO_UDP, iphdr } from '../../net/headers';
import type { FrameOffload } from '../../net/vnet';
import { PacketInfo } from './packet';
import { cutUdpSegmentInPlace, MIN_MSS, segmentCount, writeTcpSegment, writeUdpSegment } from './segment';
import { MAX_SEGMENT } from './transmit';

/** All pieces were taken. */
export const CUT_DONE = -1;
/** Not a buffer this offload can describe (dropped as an error). */
export const CUT_BAD = -2;

export class HostGsoCutter {
  readonly #info = new PacketInfo();
  readonly #seg = Buffer.alloc(MAX_SEGMENT);

  /**
   * Offer the pieces of frame from piece `from` on to `offer` (false: refused,
   * stop). Returns CUT_DONE, CUT_BAD, or the index of the refused piece. The
   * frame's bytes may be changed (UDP datagrams are cut in place).
   */
  cut(frame: Buffer, offload: FrameOffload, from: number, mtu: number, offer: (piece: Buffer) => boolean): number {
    const p = this.#info.parse(frame, frame.length);
    const seg = this.#seg;
    if (offload.tcpGso) {
      const hdr = p.headersEnd;
      // Segments that fit the guest's MTU; the host's MSS when smaller.
      const mss = Math.min(offload.gsoSize, mtu - (hdr - p.l3), MAX_SEGMENT - hdr);
      if (p.proto !== IPPROTO_TCP || mss < MIN_MSS) return CUT_BAD;
      const count = segmentCount(frame.length, p, mss);
      for (let i = from; i < count; i++)
        if (!offer(seg.subarray(0, writeTcpSegment(frame, frame.length, p, mss, i, seg)))) return i;
      return CUT_DONE;
    }
    const size = offload.gsoSize;
    if (p.proto !== IPPROTO_UDP || size < 1 || p.headersEnd + size > seg.length) return CUT_BAD;
    const count = segmentCount(frame.length, p, size);
    // In place when the headers fit in front of each datagram (RoCE's 4 KiB ones): no copy of the payload.
    const inPlace = size >= p.headersEnd;
    const baseId = p.ipVersion === 4 ? frame.readUInt16BE(p.l3 + iphdr.id.off) : 0;
    for (let i = from; i < count; i++) {
      let piece: Buffer;
      if (inPlace) {
        const c = cutUdpSegmentInPlace(frame, frame.length, p, size, i, baseId);
        piece = frame.subarray(c.at, c.at + c.len);
      } else piece = seg.subarray(0, writeUdpSegment(frame, frame.length, p, size, i, seg));
      if (!offer(piece)) return i;
    }
    return CUT_DONE;
  }
}
