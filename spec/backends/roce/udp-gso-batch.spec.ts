// RoCE packets gathered into UDP GSO buffers (lib/backends/roce/udp-gso-batch.ts):
// cut as a kernel cuts them (the LIF's writeUdpSegment does the same), every
// datagram is the packet that went in, with the identification the cut gives
// it and an ICRC that is right for that header; runs end where the flow or the
// size changes, at 15 packets, and at the end of the turn.

import { expect } from 'chai';
import { UdpGsoBatch } from '../../../lib/backends/roce/udp-gso-batch';
import { PacketInfo } from '../../../lib/ionic/offload/packet';
import { writeUdpSegment } from '../../../lib/ionic/offload/segment';
import { iphdr, udphdr } from '../../../lib/net/headers';
import { FrameOffload, VirtioGso } from '../../../lib/net/vnet';
import { encodeFrame, frameBytes, frameHeaderBytes, RocePath } from '../../../lib/roce/frame';
import { icrcMatches, writeIcrc } from '../../../lib/roce/icrc';
import { TransportHeaders } from '../../../lib/roce/packet';
import { xorshift } from '../../support/rng';
import { ipv4Path, ipv6Path, vlanPath } from '../../roce/paths';

const PMTU = 4096;
/** RC RDMA WRITE first, middle and last (IBTA opcodes). */
const WRITE_FIRST = 0x06;
const WRITE_MIDDLE = 0x07;
const WRITE_LAST = 0x08;

/** The frames of one RDMA WRITE of `bytes` bytes, PSNs from `psn`. */
function writeFrames(path: RocePath, bytes: number, psn: number, seed: number): Buffer[] {
  const rnd = xorshift(seed);
  const n = Math.ceil(bytes / PMTU);
  const out: Buffer[] = [];
  for (let k = 0; k < n; k++) {
    const h = new TransportHeaders();
    h.opcode = n === 1 ? 0x0a : k === 0 ? WRITE_FIRST : k === n - 1 ? WRITE_LAST : WRITE_MIDDLE;
    h.destQp = 0x33;
    h.psn = (psn + k) & 0xffffff;
    h.va = 0x10000;
    h.rkey = 0x77;
    h.dmaLen = bytes;
    const len = Math.min(PMTU, bytes - k * PMTU);
    const buf = Buffer.alloc(frameBytes(path, h.opcode, len));
    for (let i = 0; i < len; i++) buf[frameHeaderBytes(path, h.opcode) + i] = rnd() & 0xff;
    out.push(buf.subarray(0, encodeFrame(buf, path, h, len)));
  }
  return out;
}

interface Sent {
  frame: Buffer;
  offload: FrameOffload | null;
}

function batchInto(sent: Sent[]): UdpGsoBatch {
  return new UdpGsoBatch((frame, len, offload) => {
    sent.push({
      frame: Buffer.from(frame.subarray(0, len)),
      offload: offload ? Object.assign(new FrameOffload(), offload) : null,
    });
    return true;
  });
}

/** What the wire carries for what was sent: GSO buffers cut as the kernel cuts them. */
function datagrams(sent: Sent[]): Buffer[] {
  const out: Buffer[] = [];
  const p = new PacketInfo();
  const seg = Buffer.alloc(65536);
  for (const s of sent) {
    if (!s.offload) {
      out.push(s.frame);
      continue;
    }
    expect(s.offload.gsoType).to.equal(VirtioGso.UDP_L4);
    expect(s.offload.needsCsum).to.equal(true);
    p.parse(s.frame, s.frame.length);
    expect(s.offload.hdrLen).to.equal(p.headersEnd);
    const count = Math.ceil((s.frame.length - p.headersEnd) / s.offload.gsoSize);
    for (let k = 0; k < count; k++)
      out.push(Buffer.from(seg.subarray(0, writeUdpSegment(s.frame, s.frame.length, p, s.offload.gsoSize, k, seg))));
  }
  return out;
}

/** Frame f's IP header offset and version. */
function ipOf(f: Buffer): { off: number; v: 4 | 6 } {
  const off = f.readUInt16BE(12) === 0x8100 ? 18 : 14;
  return { off, v: f[off]! >>> 4 === 4 ? 4 : 6 };
}

describe('roce: UDP GSO buffers for the TAP', () => {
  for (const [name, path] of [
    ['IPv4', ipv4Path(1, 2)],
    ['IPv6', ipv6Path(1, 2)],
    ['VLAN', vlanPath(1, 2)],
  ] as const) {
    it(`${name}: a 100 KiB WRITE goes as its first packet, then 15 + 9 in two buffers; cut, each is its packet with a right ICRC`, async () => {
      const frames = writeFrames(path, 100 * 1024, 0xfffff0, 1);
      expect(frames).to.have.length(25);
      const sent: Sent[] = [];
      const b = batchInto(sent);
      for (const f of frames) b.add(f, f.length);
      // The first packet (with the RETH, 16 bytes longer) alone, and the full buffer, at once.
      expect(sent.map((s) => s.offload?.gsoSize ?? 'plain')).to.deep.equal(['plain', 4096 + 12 + 4]);
      await Promise.resolve();
      expect(sent.map((s) => s.offload?.gsoSize ?? 'plain')).to.deep.equal(['plain', 4112, 4112]);
      const got = datagrams(sent);
      expect(got).to.have.length(25);
      got.forEach((g, i) => {
        const { off, v } = ipOf(g);
        // Where the packet sits in its buffer: the cut counts the identification up from the buffer's (0).
        const k = i === 0 ? 0 : (i - 1) % 15;
        expect(icrcMatches(g, off, v, g.length - 4), `datagram ${i}: ICRC`).to.equal(true);
        const want = Buffer.from(frames[i]!);
        if (v === 4) {
          expect(g.readUInt16BE(off + iphdr.id.off)).to.equal(k);
          want.writeUInt16BE(k, off + iphdr.id.off);
          // The ICRC the packet would have had, encoded with that identification.
          writeIcrc(want, off, v, want.length - 4);
          want.writeUInt16BE(g.readUInt16BE(off + iphdr.check.off), off + iphdr.check.off);
        }
        // The UDP checksum is the wire's business (0 from frame.ts; the kernel fills a GSO buffer's).
        const udp = off + (v === 4 ? 20 : 40);
        want.writeUInt16BE(g.readUInt16BE(udp + udphdr.check.off), udp + udphdr.check.off);
        expect(g.equals(want), `datagram ${i} is packet ${i}`).to.equal(true);
      });
    });
  }

  it('ends a run at a shorter packet and at a new flow; the first packet of a message and a lone packet go as themselves', async () => {
    const a = writeFrames(ipv4Path(1, 2), 3 * 4096 + 100, 10, 2); // 3 full + 1 short
    const c = writeFrames(ipv4Path(1, 3), 2 * 4096, 20, 3); // another destination
    const d = writeFrames(ipv4Path(1, 2), 50, 30, 4); // one small packet
    const sent: Sent[] = [];
    const b = batchInto(sent);
    for (const f of [...a, ...c, ...d]) b.add(f, f.length);
    await Promise.resolve();
    expect(sent.map((s) => (s.offload ? `gso ${s.offload.gsoSize}` : `plain ${s.frame.length}`))).to.deep.equal([
      `plain ${a[0]!.length}`, // a's first packet (with the RETH)
      'gso 4112', // a's two middle packets and its short last one
      `plain ${c[0]!.length}`, // c, another destination: its first packet
      `plain ${c[1]!.length}`, // and its last, shorter than the first: alone too
      `plain ${d[0]!.length}`, // d: one small packet
    ]);
    const got = datagrams(sent);
    expect(got).to.have.length(7);
    for (const g of got) {
      const { off, v } = ipOf(g);
      expect(icrcMatches(g, off, v, g.length - 4)).to.equal(true);
    }
    expect(b.packets).to.equal(7);
    expect(b.buffers).to.equal(1);
  });

  it('reports a write the TAP refused', () => {
    let failures = 0;
    const b = new UdpGsoBatch(() => false);
    b.onFailure = () => failures++;
    const f = writeFrames(ipv4Path(1, 2), 3 * 4096, 0, 5);
    for (const x of f) b.add(x, x.length);
    b.flush();
    expect(failures).to.equal(2, 'the first packet alone, then the other two in one buffer');
  });
});
