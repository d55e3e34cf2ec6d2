// TCP segmentation and checksum completion as the device does them: every
// segment's headers (IPv4 id, lengths, sequence, flags) and checksums checked
// against the RFC 1071 reference, the payload reassembled, and the cases at
// the edges (a short last segment, an exact multiple, one segment, options,
// IPv6 with and without an extension header, sequence and id wrap).

import { expect } from 'chai';
import { PacketInfo, rxPktType, RxPktType } from '../../../lib/ionic/offload/packet';
import {
  finishPartialChecksum,
  fillL4Checksum,
  prepareGso,
  segmentCount,
  tsoCapable,
  writeTcpSegment,
} from '../../../lib/ionic/offload/segment';
import { onesSum } from '../../../lib/ionic/offload/checksum';
import {
  ipv4ChecksumOk,
  pattern,
  pseudo,
  rfc1071Sum,
  TCP_ACK,
  TCP_CWR,
  TCP_FIN,
  TCP_PSH,
  tcpChecksumOk,
  tcpFrame,
  TcpSpec,
} from '../../support/ionic/tcp-frames';

/** Cut a TSO-seeded super-frame and check every segment; returns them. */
function segmentAndCheck(spec: TcpSpec, mss: number): Buffer[] {
  const { frame, l3, l4, hdrLen } = tcpFrame({ ...spec, tsoSeed: true });
  const p = new PacketInfo().parse(frame, frame.length);
  expect(tsoCapable(p, hdrLen)).to.equal(true);
  const count = segmentCount(frame.length, p, mss);
  expect(count).to.equal(Math.max(1, Math.ceil(spec.payload.length / mss)));
  const out = Buffer.alloc(hdrLen + mss);
  const segs: Buffer[] = [];
  for (let i = 0; i < count; i++)
    segs.push(Buffer.from(out.subarray(0, writeTcpSegment(frame, frame.length, p, mss, i, out))));
  const flags = spec.flags ?? TCP_ACK | TCP_PSH;
  segs.forEach((s, i) => {
    const last = i === count - 1;
    expect(s.length, `segment ${i} length`).to.equal(hdrLen + (last ? spec.payload.length - i * mss : mss));
    if (spec.v6) {
      expect(s.readUInt16BE(l3 + 4), `segment ${i} payload_len`).to.equal(s.length - l3 - 40);
    } else {
      expect(s.readUInt16BE(l3 + 2), `segment ${i} tot_len`).to.equal(s.length - l3);
      expect(s.readUInt16BE(l3 + 4), `segment ${i} id`).to.equal(((spec.id ?? 0x1234) + i) & 0xffff);
      expect(ipv4ChecksumOk(s, l3), `segment ${i} IPv4 checksum`).to.equal(true);
    }
    expect(s.readUInt32BE(l4 + 4), `segment ${i} seq`).to.equal(((spec.seq ?? 1000) + i * mss) >>> 0);
    let want = flags;
    if (!last) want &= ~(TCP_FIN | TCP_PSH);
    if (i > 0) want &= ~TCP_CWR;
    expect(s[l4 + 13], `segment ${i} flags`).to.equal(want);
    expect(tcpChecksumOk(s, l3, l4), `segment ${i} TCP checksum`).to.equal(true);
    expect(s.subarray(0, l3).equals(frame.subarray(0, l3)), `segment ${i} link header`).to.equal(true);
    expect(s.subarray(l4 + 20, hdrLen).equals(frame.subarray(l4 + 20, hdrLen)), `segment ${i} TCP options`).to.equal(
      true,
    );
  });
  expect(Buffer.concat(segs.map((s) => s.subarray(hdrLen))).equals(spec.payload)).to.equal(true);
  return segs;
}

describe('ionic offloads: TCP segmentation (TSO) and checksum completion', () => {
  it('IPv4: a short last segment, ids counted up, FIN and PSH on the last only, CWR on the first only', () => {
    segmentAndCheck({ payload: pattern(4000), flags: TCP_ACK | TCP_PSH | TCP_FIN | TCP_CWR }, 1448);
  });

  it('IPv4: an exact multiple of the MSS, and a single segment', () => {
    expect(segmentAndCheck({ payload: pattern(1448 * 3) }, 1448)).to.have.length(3);
    expect(segmentAndCheck({ payload: pattern(100) }, 1448)).to.have.length(1);
  });

  it('IPv4 with TCP options (timestamps: a 32-byte header), the sequence number and the IP id wrapping', () => {
    const options = Buffer.from([1, 1, 8, 10, 0, 0, 0, 1, 0, 0, 0, 2]);
    segmentAndCheck({ payload: pattern(9000), options, seq: 0xffffff00, id: 0xfffe }, 1436);
  });

  it('IPv6: lengths, sequence and checksums per segment; odd payload length', () => {
    segmentAndCheck({ v6: true, payload: pattern(5001), flags: TCP_ACK | TCP_FIN }, 1428);
  });

  it('behind a VLAN tag: the tag is copied into every segment', () => {
    const segs = segmentAndCheck({ vlan: 100, payload: pattern(3000) }, 1448);
    for (const s of segs) expect(s.readUInt16BE(12)).to.equal(0x8100);
  });

  it('IPv6 with an extension header is not TSO-capable (its L4 header is not parsed)', () => {
    const { frame, hdrLen } = tcpFrame({ v6: true, hopByHop: true, payload: pattern(3000) });
    const p = new PacketInfo().parse(frame, frame.length);
    expect(p.ipVersion).to.equal(6);
    expect(p.proto).to.equal(-1);
    expect(tsoCapable(p, hdrLen)).to.equal(false);
    expect(rxPktType(p)).to.equal(RxPktType.IPV6);
  });

  it('a header length that is not where the TCP header ends is refused', () => {
    const { frame, hdrLen } = tcpFrame({ payload: pattern(3000) });
    const p = new PacketInfo().parse(frame, frame.length);
    expect(tsoCapable(p, hdrLen - 4)).to.equal(false);
    expect(tsoCapable(p, hdrLen + 4)).to.equal(false);
  });

  it('prepareGso: lengths of the whole frame, a valid IPv4 header, the TCP field seeded with the full-length pseudo-header', () => {
    for (const v6 of [false, true]) {
      const { frame, l3, l4 } = tcpFrame({ v6, payload: pattern(30000), tsoSeed: true, flags: TCP_ACK | TCP_CWR });
      const p = new PacketInfo().parse(frame, frame.length);
      const out = { ecn: false };
      expect(prepareGso(frame, frame.length, p, out)).to.equal(true);
      expect(out.ecn).to.equal(true);
      if (v6) expect(frame.readUInt16BE(l3 + 4)).to.equal(frame.length - l3 - 40);
      else {
        expect(frame.readUInt16BE(l3 + 2)).to.equal(frame.length - l3);
        expect(ipv4ChecksumOk(frame, l3)).to.equal(true);
      }
      expect(frame.readUInt16BE(l4 + 16)).to.equal(rfc1071Sum(pseudo(frame, l3, frame.length - l4)));
      // What the kernel then does: finish the partial checksum over the L4 bytes.
      expect(finishPartialChecksum(frame, frame.length, l4, 16)).to.equal(true);
      expect(tcpChecksumOk(frame, l3, l4)).to.equal(true);
    }
  });

  it('CSUM_PARTIAL completion: seeded with the pseudo-header, the result verifies; offsets past the frame are refused', () => {
    const { frame, l3, l4 } = tcpFrame({ payload: pattern(777) });
    frame.writeUInt16BE(rfc1071Sum(pseudo(frame, l3, frame.length - l4)), l4 + 16);
    expect(finishPartialChecksum(frame, frame.length, l4, 16)).to.equal(true);
    expect(tcpChecksumOk(frame, l3, l4)).to.equal(true);
    expect(finishPartialChecksum(frame, frame.length, frame.length, 0)).to.equal(false);
    expect(finishPartialChecksum(frame, frame.length, l4, frame.length - l4 - 1)).to.equal(false);
  });

  it('a UDP checksum that computes to 0 is sent as 0xffff', () => {
    // An IPv4/UDP frame whose payload is chosen to make the sum 0xffff (checksum 0).
    const f = Buffer.alloc(14 + 20 + 8 + 2);
    f.writeUInt16BE(0x0800, 12);
    f[14] = 0x45;
    f.writeUInt16BE(30, 16);
    f[23] = 17;
    f.writeUInt16BE(8 + 2, 38);
    const p = new PacketInfo().parse(f, f.length);
    const rest = onesSum(f, 34, 8, onesSum(f, 26, 8, 17 + 10));
    f.writeUInt16BE(0xffff - rest, 42);
    fillL4Checksum(f, f.length, p);
    expect(f.readUInt16BE(40)).to.equal(0xffff);
  });

  it('packet types for the RX completion: IPv4/IPv6 with TCP, UDP, or neither', () => {
    const t4 = tcpFrame({ payload: pattern(10) }).frame;
    const t6 = tcpFrame({ v6: true, payload: pattern(10) }).frame;
    expect(rxPktType(new PacketInfo().parse(t4, t4.length))).to.equal(RxPktType.IPV4_TCP);
    expect(rxPktType(new PacketInfo().parse(t6, t6.length))).to.equal(RxPktType.IPV6_TCP);
    const arp = Buffer.alloc(60);
    arp.writeUInt16BE(0x0806, 12);
    expect(rxPktType(new PacketInfo().parse(arp, arp.length))).to.equal(RxPktType.NON_IP);
    // Truncated headers never read past the length.
    expect(new PacketInfo().parse(t4, 30).ipVersion).to.equal(0);
    expect(new PacketInfo().parse(t4, 40).proto).to.equal(-1);
  });
});
