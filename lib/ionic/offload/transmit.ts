// What the device does with a gathered TX packet before it leaves: insert the
// VLAN tag the descriptor carries, then per opcode: send as is (CSUM_NONE),
// finish the partial checksum (CSUM_PARTIAL), compute the checksums
// (CSUM_HW), or cut the TCP super-frame into segments (TSO). A partial
// checksum or a super-frame is first offered whole, with a FrameOffload
// saying what is left to do, to whoever can finish it (an in-process TCP
// host, a TAP with IFF_VNET_HDR): the cheapest path. Only when nobody takes
// it do we finish and segment it here.

import { TxOpcode } from '../constants';
import { ethhdr, tcphdr, vlan_ethhdr, ETH_P_8021Q } from '../../net/headers';
import { TxFlag, TX_HEADROOM } from '../queues';
import type { TxPacket } from '../queues';
import { PacketInfo } from './packet';
import {
  fillIpv4Checksum,
  fillL4Checksum,
  finishPartialChecksum,
  GsoPrep,
  l4Known,
  MIN_MSS,
  prepareGso,
  segmentCount,
  tsoCapable,
  writeTcpSegment,
} from './segment';
import { FrameOffload, VirtioGso } from '../../net/vnet';

/** Largest segment we cut (max MTU 9194 + 14 header + 4 VLAN, rounded up): what a descriptor may carry. */
export const MAX_SEGMENT = 9216 + 18;
const VLAN_HLEN = vlan_ethhdr.SIZE - ethhdr.SIZE;

export interface TxSink {
  /** A finished frame: valid during the call only. */
  frame(frame: Buffer): void;
  /**
   * A frame left unfinished (partial checksum, segmentation), offered whole:
   * true when taken (it becomes `wireFrames` frames on the wire); false and
   * the packet is finished here and goes to frame(). Valid during the call only.
   */
  whole(frame: Buffer, o: FrameOffload, wireFrames: number): boolean;
}

export const enum TxVerdict {
  SENT,
  /** Offsets, MSS or headers the opcode cannot work with: the packet is dropped. */
  MALFORMED,
}

export class TxOffload {
  readonly #p = new PacketInfo();
  readonly #o = new FrameOffload();
  readonly #gso: GsoPrep = { ecn: false };
  readonly #seg = Buffer.alloc(MAX_SEGMENT);

  /** Send the packet at buf[TX_HEADROOM, +pkt.len). */
  send(buf: Buffer, pkt: TxPacket, sink: TxSink): TxVerdict {
    let start = TX_HEADROOM;
    let len = pkt.len;
    let csumStart = pkt.csumStart;
    if (pkt.flags & TxFlag.VLAN) {
      if (len < ethhdr.SIZE) return TxVerdict.MALFORMED;
      // The tag goes after the two addresses; the offsets the driver gave count from the untagged frame.
      buf.copy(buf, start - VLAN_HLEN, start, start + ethhdr.h_proto.off);
      start -= VLAN_HLEN;
      buf.writeUInt16BE(ETH_P_8021Q, start + vlan_ethhdr.h_vlan_proto.off);
      buf.writeUInt16BE(pkt.vlanTci, start + vlan_ethhdr.h_vlan_TCI.off);
      len += VLAN_HLEN;
      csumStart += VLAN_HLEN;
    }
    const frame = buf.subarray(start, start + len);
    switch (pkt.opcode) {
      case TxOpcode.CSUM_NONE:
        sink.frame(frame);
        return TxVerdict.SENT;
      case TxOpcode.CSUM_PARTIAL:
        return this.#partial(frame, csumStart, pkt.csumOffset, sink);
      case TxOpcode.CSUM_HW:
        return this.#full(frame, pkt.flags, sink);
      case TxOpcode.TSO:
        if (pkt.flags & TxFlag.ENCAP) return TxVerdict.MALFORMED; // tunnel TSO is never offered
        return this.#tso(frame, csumStart, pkt.csumOffset, sink);
      default:
        return TxVerdict.MALFORMED;
    }
  }

  #partial(frame: Buffer, csumStart: number, csumOffset: number, sink: TxSink): TxVerdict {
    if (csumStart >= frame.length || csumStart + csumOffset + 2 > frame.length) return TxVerdict.MALFORMED;
    const o = this.#o.clear();
    o.needsCsum = true;
    o.csumStart = csumStart;
    o.csumOffset = csumOffset;
    if (sink.whole(frame, o, 1)) return TxVerdict.SENT;
    finishPartialChecksum(frame, frame.length, csumStart, csumOffset);
    sink.frame(frame);
    return TxVerdict.SENT;
  }

  #full(frame: Buffer, flags: number, sink: TxSink): TxVerdict {
    const p = this.#p.parse(frame, frame.length);
    if (flags & TxFlag.CSUM_L3) fillIpv4Checksum(frame, p);
    if (flags & TxFlag.CSUM_L4 && l4Known(p)) fillL4Checksum(frame, frame.length, p);
    sink.frame(frame);
    return TxVerdict.SENT;
  }

  #tso(frame: Buffer, hdrLen: number, mss: number, sink: TxSink): TxVerdict {
    const p = this.#p.parse(frame, frame.length);
    if (!tsoCapable(p, hdrLen) || mss < MIN_MSS || hdrLen + mss > MAX_SEGMENT) return TxVerdict.MALFORMED;
    const count = segmentCount(frame.length, p, mss);
    // Made whole first (lengths of the whole frame, the IPv4 header checksum, the TCP seed over the whole length):
    // a super-frame of one segment is then just a partial checksum. Segmenting below rewrites all of it per segment.
    if (prepareGso(frame, frame.length, p, this.#gso)) {
      const o = this.#o.clear();
      o.needsCsum = true;
      o.csumStart = p.l4;
      o.csumOffset = tcphdr.check.off;
      if (count > 1) {
        o.gsoType = (p.ipVersion === 4 ? VirtioGso.TCPV4 : VirtioGso.TCPV6) | (this.#gso.ecn ? VirtioGso.ECN : 0);
        o.gsoSize = mss;
        o.hdrLen = hdrLen;
      }
      if (sink.whole(frame, o, count)) return TxVerdict.SENT;
    }
    for (let i = 0; i < count; i++)
      sink.frame(this.#seg.subarray(0, writeTcpSegment(frame, frame.length, p, mss, i, this.#seg)));
    return TxVerdict.SENT;
  }
}
