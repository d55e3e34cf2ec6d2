// The Ethernet offloads through the device, driven by the guest model over a
// real vfio-user socket with memfd guest memory: each TX descriptor opcode
// (CSUM_PARTIAL, CSUM_HW, TSO runs over several descriptors with SG pieces,
// VLAN insert) toward a plain host link and one that takes offloads (a TAP
// with IFF_VNET_HDR); RX checksum, packet type and VLAN strip; host GSO
// frames cut for the guest; and offloads withheld by the profile.

import { expect } from 'chai';
import { IonicGuest, command, putU64, txCmd } from '../../support/ionic/guest';
import { Attr, DRIVER_FEATURES, Feature, Op, TxOp } from '../../support/ionic/regs';
import { DEVICE_MAC, Rig, testProfile } from '../../support/ionic/rig';
import { FakeLink } from '../../support/ionic/wire';
import {
  ipv4ChecksumOk,
  pattern,
  pseudo,
  rfc1071Sum,
  TCP_ACK,
  TCP_FIN,
  TCP_PSH,
  tcpChecksumOk,
  tcpFrame,
} from '../../support/ionic/tcp-frames';
import { FrameOffload, VirtioGso } from '../../../lib/net/vnet';
import type { FrameEndpoint } from '../../../lib/net/frame-endpoint';
import { COMPAT_PROFILE } from '../../../lib/ionic/profile';

const SOT = 0x4,
  EOT = 0x8,
  VLAN = 0x1,
  L3 = 0x4,
  L4 = 0x8;

/** A TX descriptor: opcode, flags, address, first length, SG elements, and the csum/TSO fields. */
function desc(
  op: number,
  flags: number,
  addr: number,
  len: number,
  sg: { addr: number; len: number }[],
  start = 0,
  offset = 0,
  vlan = 0,
): { desc: Buffer; sg: Buffer } {
  const d = Buffer.alloc(16);
  d.writeBigUInt64LE(txCmd(op, flags, sg.length, addr), 0);
  d.writeUInt16LE(len, 8);
  d.writeUInt16LE(vlan, 10);
  d.writeUInt16LE(start, 12);
  d.writeUInt16LE(offset, 14);
  const list = Buffer.alloc(256);
  sg.forEach((e, i) => {
    putU64(list, i * 16, e.addr);
    list.writeUInt16LE(e.len, i * 16 + 8);
  });
  return { desc: d, sg: list };
}

/**
 * Lay a TSO super-frame out as ionic_tx_tso does: the first descriptor takes
 * hdrLen + mss bytes, each later one mss, every one split into a buffer and
 * two SG pieces, all in guest memory at scattered addresses.
 */
function tsoRun(g: IonicGuest, frame: Buffer, hdrLen: number, mss: number): { desc: Buffer; sg: Buffer }[] {
  const run: { desc: Buffer; sg: Buffer }[] = [];
  for (let off = 0, i = 0; off < frame.length; i++) {
    const take = Math.min(frame.length - off, i === 0 ? hdrLen + mss : mss);
    const cuts = [Math.ceil(take / 3), Math.ceil(take / 3)];
    const lens = [cuts[0]!, cuts[1]!, take - cuts[0]! - cuts[1]!].filter((n) => n > 0);
    const addrs = lens.map((n, k) => {
      const a = g.alloc(n + 64) + 8 * k + 2;
      frame.copy(g.mem(a, n), 0, off + lens.slice(0, k).reduce((x, y) => x + y, 0));
      return a;
    });
    off += take;
    const flags = (i === 0 ? SOT : 0) | (off >= frame.length ? EOT : 0);
    run.push(
      desc(
        TxOp.TSO,
        flags,
        addrs[0]!,
        lens[0]!,
        lens.slice(1).map((len, k) => ({ addr: addrs[k + 1]!, len })),
        hdrLen,
        mss,
      ),
    );
  }
  return run;
}

/** Put bytes in guest memory and return their address. */
function place(g: IonicGuest, b: Buffer): number {
  const a = g.alloc(b.length + 16);
  b.copy(g.mem(a, b.length));
  return a;
}

for (const offloadLink of [false, true]) {
  describe(`ionic offloads: TX descriptor opcodes toward a host link ${offloadLink ? 'that takes offloads (IFF_VNET_HDR)' : 'without offloads'}`, () => {
    let rig: Rig;
    let g: IonicGuest;
    let link: FakeLink;
    before(async () => {
      link = new FakeLink(offloadLink);
      rig = await Rig.start({ link });
      g = await rig.probed(1);
    });
    after(async () => rig.close());
    afterEach(() => {
      expect(g.violations).to.deep.equal([]);
      link.sent.length = 0;
      link.sentOffloads.length = 0;
    });

    it('CSUM_PARTIAL: the checksum at csum_start + csum_offset is finished (by us, or left to the host with its offsets)', async () => {
      const { frame, l3, l4 } = tcpFrame({ payload: pattern(1000) });
      frame.writeUInt16BE(rfc1071Sum(pseudo(frame, l3, frame.length - l4)), l4 + 16); // the stack's seed
      const seed = frame.readUInt16BE(l4 + 16);
      const a = place(g, frame);
      expect(
        (
          await g.postTxRaw(
            0,
            desc(TxOp.CSUM_PARTIAL, 0, a, 100, [{ addr: a + 100, len: frame.length - 100 }], l4, 16).desc,
            desc(TxOp.CSUM_PARTIAL, 0, a, 100, [{ addr: a + 100, len: frame.length - 100 }]).sg,
          ).done
        ).status,
      ).to.equal(0);
      expect(link.sent).to.have.length(1);
      const sent = link.sent[0]!;
      if (offloadLink) {
        const o = link.sentOffloads[0]!;
        expect({ needs: o.needsCsum, start: o.csumStart, off: o.csumOffset, gso: o.gsoType }).to.deep.equal({
          needs: true,
          start: l4,
          off: 16,
          gso: VirtioGso.NONE,
        });
        expect(sent.readUInt16BE(l4 + 16)).to.equal(seed);
      } else {
        expect(tcpChecksumOk(sent, l3, l4)).to.equal(true);
      }
    });

    it('CSUM_HW with L3 and L4: the IPv4 header and TCP checksums are computed whole', async () => {
      const { frame, l3, l4 } = tcpFrame({ payload: pattern(300) });
      frame.writeUInt16BE(0, l3 + 10);
      frame.writeUInt16BE(0xdead, l4 + 16);
      const a = place(g, frame);
      await g.postTxRaw(0, desc(TxOp.CSUM_HW, L3 | L4, a, frame.length, []).desc).done;
      expect(ipv4ChecksumOk(link.sent[0]!, l3)).to.equal(true);
      expect(tcpChecksumOk(link.sent[0]!, l3, l4)).to.equal(true);
    });

    for (const v6 of [false, true]) {
      it(`TSO ${v6 ? 'IPv6' : 'IPv4'}: a run of descriptors SOT..EOT with SG pieces, one completion for the run`, async () => {
        const mss = 1448;
        const payload = pattern(mss * 4 + 321, 5);
        const { frame, l3, l4, hdrLen } = tcpFrame({ v6, payload, tsoSeed: true, flags: TCP_ACK | TCP_PSH | TCP_FIN });
        const before = g.txCompleted(0);
        const run = tsoRun(g, frame, hdrLen, mss);
        expect(run).to.have.length(5);
        expect((await g.postTxRun(0, run)).status).to.equal(0);
        expect(g.txCompleted(0) - before).to.equal(5);
        if (offloadLink) {
          expect(link.sent).to.have.length(1);
          const o = link.sentOffloads[0]!;
          expect({
            gso: o.gsoType,
            size: o.gsoSize,
            hdr: o.hdrLen,
            start: o.csumStart,
            needs: o.needsCsum,
          }).to.deep.equal({
            gso: v6 ? VirtioGso.TCPV6 : VirtioGso.TCPV4,
            size: mss,
            hdr: hdrLen,
            start: l4,
            needs: true,
          });
          expect(link.sent[0]!.subarray(hdrLen).equals(payload)).to.equal(true);
        } else {
          expect(link.sent).to.have.length(5);
          for (const s of link.sent) {
            expect(tcpChecksumOk(s, l3, l4)).to.equal(true);
            if (!v6) expect(ipv4ChecksumOk(s, l3)).to.equal(true);
          }
          expect(link.sent.map((s) => s[l4 + 13])).to.deep.equal([
            TCP_ACK,
            TCP_ACK,
            TCP_ACK,
            TCP_ACK,
            TCP_ACK | TCP_PSH | TCP_FIN,
          ]);
          expect(Buffer.concat(link.sent.map((s) => s.subarray(hdrLen))).equals(payload)).to.equal(true);
        }
      });
    }

    it('TSO: a run whose EOT is not posted yet waits (nothing sent, nothing completed), then goes whole', async () => {
      const { frame, hdrLen } = tcpFrame({ payload: pattern(3000), tsoSeed: true });
      const run = tsoRun(g, frame, hdrLen, 1448);
      const before = g.txCompleted(0);
      const first = g.postTxRun(0, run.slice(0, 2));
      await g.sync();
      expect(link.sent).to.have.length(0);
      expect(g.txCompleted(0)).to.equal(before);
      const rest = g.postTxRun(0, run.slice(2));
      expect((await rest).status).to.equal(0);
      await first;
      expect(g.txCompleted(0) - before).to.equal(3);
      expect(link.sent.length).to.equal(offloadLink ? 1 : 3);
    });

    it("VLAN_TX_TAG: the descriptor's vlan_tci is inserted after the addresses (and a TSO run keeps it on every segment)", async () => {
      const { frame, l4 } = tcpFrame({ payload: pattern(200) });
      const a = place(g, frame);
      await g.postTxRaw(0, desc(TxOp.CSUM_NONE, VLAN, a, frame.length, [], 0, 0, 0x2064).desc).done;
      const s = link.sent[0]!;
      expect(s.length).to.equal(frame.length + 4);
      expect([s.readUInt16BE(12), s.readUInt16BE(14)]).to.deep.equal([0x8100, 0x2064]);
      expect(s.subarray(16).equals(frame.subarray(12))).to.equal(true);
      link.sent.length = 0;
      link.sentOffloads.length = 0;
      const big = tcpFrame({ payload: pattern(3000), tsoSeed: true });
      const run = tsoRun(g, big.frame, big.hdrLen, 1448).map((r) => {
        r.desc[0] = r.desc[0]! | VLAN;
        r.desc.writeUInt16LE(100, 10);
        return r;
      });
      await g.postTxRun(0, run);
      for (const f of link.sent) {
        expect(f.readUInt16BE(14)).to.equal(100);
        if (!offloadLink) expect(tcpChecksumOk(f, 18, l4 + 4)).to.equal(true);
      }
      if (offloadLink) expect(link.sentOffloads[0]!.csumStart).to.equal(big.l4 + 4);
    });
  });
}

describe('ionic offloads: RX checksum, packet type, VLAN strip, host GSO frames', () => {
  let rig: Rig;
  let g: IonicGuest;
  let link: FakeLink;
  before(async () => {
    link = new FakeLink(true);
    rig = await Rig.start({ link });
    g = await rig.probed(1);
    // RX_HASH too (the driver asks for it with more than one queue pair): the packet type comes with it.
    const set = command(Op.LIF_SETATTR);
    set[1] = Attr.FEATURES;
    putU64(set, 4, DRIVER_FEATURES | Feature.RX_HASH);
    expect(Number((await g.adminCmd(set)).comp.readBigUInt64LE(4)) & Feature.RX_HASH).to.equal(Feature.RX_HASH);
  });
  after(async () => rig.close());
  afterEach(() => {
    expect(g.violations).to.deep.equal([]);
    g.takeRx();
  });

  const toGuest = (f: Buffer): Buffer => {
    DEVICE_MAC.copy(f, 0);
    return f;
  };

  it('a TCP frame: CALC with the complete sum after the Ethernet header (big-endian), packet type IPv4/TCP', async () => {
    const f = toGuest(tcpFrame({ payload: pattern(1001) }).frame);
    link.inject(f);
    const r = await g.waitRxFrame();
    expect(r.data.equals(f)).to.equal(true);
    expect(r.csumFlags & 0x80).to.equal(0x80);
    expect(r.csum).to.equal(rfc1071Sum(f.subarray(14)));
    expect(r.pktType).to.equal(0x03);
  });

  it('a VLAN-tagged frame: the tag is stripped into vlan_tci with flag 0x40, the sum covers the untagged frame', async () => {
    const f = toGuest(tcpFrame({ vlan: 0x3005, v6: true, payload: pattern(500) }).frame);
    link.inject(f);
    const r = await g.waitRxFrame();
    expect(r.vlanTci).to.equal(0x3005);
    expect(r.csumFlags & 0x40).to.equal(0x40);
    expect(r.data.equals(Buffer.concat([f.subarray(0, 12), f.subarray(16)]))).to.equal(true);
    expect(r.csum).to.equal(rfc1071Sum(r.data.subarray(14)));
    expect(r.pktType).to.equal(0x18);
  });

  it("a host GSO super-frame (partial checksum) is cut into segments of the guest's MTU, each with valid checksums", async () => {
    const payload = pattern(20000, 7);
    const { frame, l3, l4, hdrLen } = tcpFrame({ payload, flags: TCP_ACK | TCP_PSH });
    toGuest(frame);
    frame.writeUInt16BE(rfc1071Sum(pseudo(frame, l3, frame.length - l4)), l4 + 16); // partial, as the kernel leaves it
    const o = new FrameOffload();
    o.needsCsum = true;
    o.csumStart = l4;
    o.csumOffset = 16;
    o.gsoType = VirtioGso.TCPV4;
    o.gsoSize = 8948;
    o.hdrLen = hdrLen;
    link.inject(frame, o);
    // The guest's MTU is 1500: segments of 1460, not the host's 8948.
    const n = Math.ceil(payload.length / 1460);
    const got = [];
    for (let i = 0; i < n; i++) got.push(await g.waitRxFrame());
    for (const r of got) {
      expect(r.len).to.be.at.most(1514);
      expect(tcpChecksumOk(r.data, l3, l4)).to.equal(true);
      expect(ipv4ChecksumOk(r.data, l3)).to.equal(true);
    }
    expect(Buffer.concat(got.map((r) => r.data.subarray(hdrLen))).equals(payload)).to.equal(true);
  });

  for (const v6 of [false, true]) {
    it(`a host UDP GSO buffer (${v6 ? 'IPv6' : 'IPv4'}) is cut into its datagrams, each as the kernel's UDP segmentation makes it`, async () => {
      const size = 1000;
      const payload = pattern(3 * size + 321, 9);
      const l3 = 14;
      const l4 = l3 + (v6 ? 40 : 20);
      const frame = Buffer.alloc(l4 + 8 + payload.length);
      toGuest(frame);
      Buffer.from('02aabbccdd01', 'hex').copy(frame, 6);
      frame.writeUInt16BE(v6 ? 0x86dd : 0x0800, 12);
      if (v6) {
        frame.writeUInt32BE(0x60000000, l3);
        frame.writeUInt16BE(8 + payload.length, l3 + 4);
        frame[l3 + 6] = 17;
        frame[l3 + 7] = 64;
        frame.fill(0x11, l3 + 8, l3 + 24);
        frame.fill(0x22, l3 + 24, l3 + 40);
      } else {
        frame[l3] = 0x45;
        frame.writeUInt16BE(20 + 8 + payload.length, l3 + 2);
        frame.writeUInt16BE(0x1230, l3 + 4);
        frame[l3 + 8] = 64;
        frame[l3 + 9] = 17;
        Buffer.from([10, 0, 0, 1, 10, 0, 0, 2]).copy(frame, l3 + 12);
      }
      frame.writeUInt16BE(40000, l4);
      frame.writeUInt16BE(4791, l4 + 2);
      frame.writeUInt16BE(8 + payload.length, l4 + 4);
      payload.copy(frame, l4 + 8);
      const o = new FrameOffload();
      o.needsCsum = true;
      o.csumStart = l4;
      o.csumOffset = 6;
      o.gsoType = VirtioGso.UDP_L4;
      o.gsoSize = size;
      o.hdrLen = l4 + 8;
      link.inject(frame, o);
      const got = [];
      for (let i = 0; i < 4; i++) got.push(await g.waitRxFrame());
      got.forEach((r, i) => {
        const n = i < 3 ? size : 321;
        expect(r.len).to.equal(l4 + 8 + n);
        expect(r.data.subarray(l4 + 8).equals(payload.subarray(i * size, i * size + n))).to.equal(true);
        expect(r.data.readUInt16BE(l4 + 4)).to.equal(8 + n);
        if (v6) {
          expect(r.data.readUInt16BE(l3 + 4)).to.equal(8 + n);
          // IPv6 requires a UDP checksum: computed (a UDP pseudo-header is TCP's with protocol 17).
          const ph = pseudo(r.data, l3, 8 + n);
          ph[39] = 17;
          expect(rfc1071Sum(Buffer.concat([ph, r.data.subarray(l4)]))).to.equal(0xffff);
        } else {
          expect(r.data.readUInt16BE(l3 + 2)).to.equal(28 + n);
          expect(r.data.readUInt16BE(l3 + 4)).to.equal(0x1230 + i);
          expect(ipv4ChecksumOk(r.data, l3)).to.equal(true);
          expect(r.data.readUInt16BE(l4 + 6)).to.equal(0, 'no UDP checksum over IPv4');
        }
      });
    });
  }

  it('with the offloads turned off (LIF_SETATTR FEATURES 0, as ethtool -K does): no sum, no strip', async () => {
    const set = command(Op.LIF_SETATTR);
    set[1] = Attr.FEATURES;
    putU64(set, 4, 0);
    expect((await g.adminCmd(set)).comp.readBigUInt64LE(4)).to.equal(0n);
    const f = toGuest(tcpFrame({ vlan: 7, payload: pattern(100) }).frame);
    link.inject(f);
    const r = await g.waitRxFrame();
    expect([r.csumFlags, r.csum, r.vlanTci]).to.deep.equal([0, 0, 0]);
    expect(r.data.equals(f)).to.equal(true);
  });
});

describe('ionic offloads: a profile withholds them', () => {
  it('offload_tso = off and offload_rx_csum = off: the driver is not granted TSO or RX_CSUM, and RX frames carry no sum', async () => {
    const link = new FakeLink(true);
    const rig = await Rig.start({
      link,
      profile: testProfile({ offloads: { ...COMPAT_PROFILE.offloads, tso: false, rxCsum: false } }),
    });
    try {
      const g = await rig.probed(1);
      const TSO = 1 << 8,
        RX_CSUM = 1 << 4,
        TX_CSUM = 1 << 7;
      expect(g.features & (TSO | RX_CSUM)).to.equal(0);
      expect(g.features & TX_CSUM).to.equal(TX_CSUM);
      const f = tcpFrame({ payload: pattern(100) }).frame;
      DEVICE_MAC.copy(f, 0);
      link.inject(f);
      expect((await g.waitRxFrame()).csumFlags).to.equal(0);
      expect(g.violations).to.deep.equal([]);
    } finally {
      await rig.close();
    }
  });
});

/** A host link that can be paused, as the TAP is: it records the calls and refuses injects while paused. */
class PausableLink extends FakeLink {
  paused = false;
  pauses = 0;
  constructor() {
    super(true);
  }
  pause(): void {
    this.paused = true;
    this.pauses++;
  }
  resume(): void {
    this.paused = false;
  }
  override inject(frame: Buffer, offload: FrameOffload | null = null): void {
    if (this.paused) throw new Error('inject while paused: a paused TAP is not read');
    super.inject(frame, offload);
  }
}

describe('ionic offloads: RX backpressure toward a host link that pauses', () => {
  it("a frame with no RX buffer is held and the link paused; the guest's next buffers take it and the link resumes", async () => {
    const link = new PausableLink();
    const rig = await Rig.start({ link });
    try {
      const g = await rig.connect();
      await g.probe();
      await g.open(1, { autoRefill: false, initialFill: 2 });
      // A host GSO frame of 5 segments into 2 buffers: 2 delivered, the rest held.
      const payload = pattern(1460 * 5, 3);
      const { frame, l3, l4, hdrLen } = tcpFrame({ payload });
      DEVICE_MAC.copy(frame, 0);
      const o = new FrameOffload();
      o.gsoType = VirtioGso.TCPV4;
      o.gsoSize = 1460;
      o.hdrLen = hdrLen;
      link.inject(frame, o);
      await g.sync();
      expect(g.takeRx()).to.have.length(2);
      expect(link.paused).to.equal(true);
      g.fillRx(0, 2);
      await g.sync();
      expect(link.paused).to.equal(true); // still one segment short
      g.fillRx(0, 4);
      await g.sync();
      expect(link.paused).to.equal(false);
      const rest = g.takeRx();
      expect(rest).to.have.length(3);
      for (const r of rest) expect(tcpChecksumOk(r.data, l3, l4)).to.equal(true);
      rig.device.stats.flush();
      expect(g.lifStat('rx_ucast_drop_packets')).to.equal(0);
      // Disabling the RX queue lets go of a held frame and resumes the link (it would wait for ever).
      link.inject(frame, o);
      await g.sync();
      expect(link.paused).to.equal(true);
      g.takeRx();
      expect(await g.qControl(2, 0, 0)).to.equal(0);
      expect(link.paused).to.equal(false);
      expect(g.violations).to.deep.equal([]);
    } finally {
      await rig.close();
    }
  });

  it('an endpoint that needs host frames (RoCE): the link keeps being read, the endpoint gets its frames, later guest frames are dropped', async () => {
    const link = new PausableLink();
    const rig = await Rig.start({ link });
    try {
      const g = await rig.connect();
      await g.probe();
      await g.open(1, { autoRefill: false, initialFill: 1 });
      const claimed: number[] = [];
      // Frames of a local experimental EtherType stand for RoCE here.
      rig.device.addEndpoint({
        needsHostFrames: true,
        claimRx: (f) => (f.readUInt16BE(12) === 0x88b5 ? claimed.push(f[14]!) > 0 : false),
      });
      const toGuest = (seed: number): Buffer => {
        const f = tcpFrame({ payload: pattern(100, seed) }).frame;
        DEVICE_MAC.copy(f, 0);
        return f;
      };
      const forEndpoint = (tag: number): Buffer => {
        const f = Buffer.alloc(60);
        DEVICE_MAC.copy(f, 0);
        f.writeUInt16BE(0x88b5, 12);
        f[14] = tag;
        return f;
      };
      link.inject(toGuest(1)); // takes the one buffer
      link.inject(toGuest(2)); // held: no buffer
      await g.sync();
      expect(link.paused).to.equal(false);
      link.inject(forEndpoint(7)); // a paused link would throw here
      link.inject(toGuest(3)); // an older frame waits: this one is dropped, as a NIC out of buffers does
      link.inject(forEndpoint(8));
      expect(claimed).to.deep.equal([7, 8]);
      await g.sync();
      const first = g.takeRx();
      expect(first).to.have.length(1);
      g.fillRx(0, 4);
      await g.sync();
      const next = g.takeRx();
      expect(next).to.have.length(1);
      expect(next[0]!.data.equals(toGuest(2))).to.equal(true);
      rig.device.stats.flush();
      expect(g.lifStat('rx_ucast_drop_packets')).to.equal(1);
      expect(link.pauses).to.equal(0);
      expect(g.violations).to.deep.equal([]);
    } finally {
      await rig.close();
    }
  });
});

for (const takes of [true, false]) {
  describe(`ionic offloads: an in-process endpoint ${takes ? 'that takes offloads gets a TSO run whole' : 'without takesOffloads gets finished segments'}`, () => {
    let rig: Rig;
    let g: IonicGuest;
    const got: { frame: Buffer; gso: number; size: number; needs: boolean }[] = [];
    const passes: boolean[] = [];
    before(async () => {
      rig = await Rig.start({ link: new FakeLink(true) });
      const endpoint: FrameEndpoint = {
        takesOffloads: takes,
        claimTx(frame, o) {
          if (frame.length < 40 || frame.readUInt16BE(36) !== 5201) return false;
          got.push({ frame: Buffer.from(frame), gso: o?.gsoType ?? -1, size: o?.gsoSize ?? -1, needs: !!o?.needsCsum });
          return true;
        },
        txPass: (begin) => passes.push(begin),
      };
      rig.device.addEndpoint(endpoint);
      g = await rig.probed(1);
    });
    after(async () => rig.close());

    it('TSO IPv4 of 4 segments and a short one: claimed as one frame (or five), inside one TX pass', async () => {
      const mss = 1448;
      const payload = pattern(mss * 4 + 321, 9);
      const { frame, l3, l4, hdrLen } = tcpFrame({ payload, tsoSeed: true });
      expect((await g.postTxRun(0, tsoRun(g, frame, hdrLen, mss))).status).to.equal(0);
      if (takes) {
        expect(got.map((x) => [x.gso, x.size, x.needs, x.frame.length])).to.deep.equal([
          [VirtioGso.TCPV4, mss, true, frame.length],
        ]);
        expect(got[0]!.frame.subarray(hdrLen).equals(payload)).to.equal(true);
        expect(ipv4ChecksumOk(got[0]!.frame, l3)).to.equal(true); // the header made whole for its taker
      } else {
        expect(got.map((x) => [x.gso, x.frame.length - hdrLen])).to.deep.equal([
          [-1, mss],
          [-1, mss],
          [-1, mss],
          [-1, mss],
          [-1, 321],
        ]);
        for (const x of got) expect(tcpChecksumOk(x.frame, l3, l4)).to.equal(true);
      }
      expect(passes.slice(-2)).to.deep.equal([true, false]);
    });
  });
}
