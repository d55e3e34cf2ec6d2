// The TX and RX rings as ionic.ko drives them, against an in-process wire
// (FakeLink): frames gathered from guest memory (with SG lists), one RX
// completion per descriptor in order with comp_index == tail, colors across
// ring wraps, xmit_more batching, jumbo frames in SG buffers, and frames too
// big for the posted buffers.

import { expect } from 'chai';
import { IonicGuest } from '../support/ionic/guest';
import { DEVICE_MAC, Rig } from '../support/ionic/rig';
import { FakeLink, udpFrame } from '../support/ionic/wire';

const PEER = Buffer.from([0x02, 0, 0, 0, 0, 0x42]);

function toPeer(len: number, tag: number): Buffer {
  return udpFrame(PEER, DEVICE_MAC, '10.0.0.2', '10.0.0.1', 5000, 6000, len - 42, tag);
}

function fromPeer(len: number, tag: number, srcPort = 6000): Buffer {
  return udpFrame(DEVICE_MAC, PEER, '10.0.0.1', '10.0.0.2', srcPort, 5000, len - 42, tag);
}

describe('ionic: TX and RX rings', () => {
  describe('with 1500-byte buffers', () => {
    let rig: Rig;
    let g: IonicGuest;
    let link: FakeLink;

    before(async () => {
      link = new FakeLink();
      rig = await Rig.start({ link });
      g = await rig.probed(1);
    });
    after(async () => rig.close());
    afterEach(() => {
      expect(g.violations).to.deep.equal([]);
      link.sent.length = 0;
    });

    it('TX: sends the frame from guest memory whole and completes it with status 0', async () => {
      const f = toPeer(100, 1);
      const c = await g.sendFrame(f);
      expect(c.status).to.equal(0);
      expect(link.sent).to.have.length(1);
      expect(link.sent[0]!.equals(f)).to.equal(true);
    });

    it('TX SG: a frame in 16 pieces (nsge 15, the v1 limit) arrives intact', async () => {
      const f = toPeer(1514, 2);
      const pieces = [14, 20, 8, 100, 1, 1, 200, 300, 50, 50, 50, 50, 300, 100, 170, 100];
      expect(pieces.reduce((a, b) => a + b)).to.equal(1514);
      expect((await g.sendFrame(f, { pieces })).status).to.equal(0);
      expect(link.sent[0]!.equals(f)).to.equal(true);
    });

    it('TX: a 9234-byte frame (max frame) split over SG elements is sent', async () => {
      const f = toPeer(9234, 3);
      expect((await g.sendFrame(f, { pieces: [4096, 4096, 1042] })).status).to.equal(0);
      expect(link.sent[0]!.equals(f)).to.equal(true);
    });

    it('TX: 200 frames through a 64-entry ring keep comp_index and colors in step across wraps', async () => {
      const before = g.txCompleted(0);
      for (let i = 0; i < 200; i++) expect((await g.sendFrame(toPeer(60 + (i % 50), i))).status).to.equal(0);
      expect(g.txCompleted(0) - before).to.equal(200);
      expect(link.sent.map((f) => f.length)).to.deep.equal(Array.from({ length: 200 }, (_, i) => 60 + (i % 50)));
    });

    it('TX batching (xmit_more): ten descriptors, one doorbell, ten frames in order', async () => {
      const frames = Array.from({ length: 10 }, (_, i) => toPeer(80 + i, 100 + i));
      const done = frames.map((f) => g.postFrame(f, { ring: false }).done);
      expect(link.sent).to.have.length(0);
      g.kickTx(0);
      const comps = await Promise.all(done);
      expect(comps.map((c) => c.status)).to.deep.equal(Array(10).fill(0));
      expect(link.sent.map((f, i) => f.equals(frames[i]!))).to.deep.equal(Array(10).fill(true));
    });

    it('TX: a duplicate doorbell with an unchanged p_index sends nothing more', async () => {
      await g.sendFrame(toPeer(64, 9));
      g.kickTx(0);
      g.kickTx(0);
      await g.sync();
      expect(link.sent).to.have.length(1);
    });

    it('RX: frames land in order, one completion per descriptor, comp_index == tail, exact length and bytes', async () => {
      const frames = [60, 64, 128, 1000, 1514, 1518].map((len, i) => fromPeer(len, i));
      for (const f of frames) link.inject(f);
      const got = [];
      for (let i = 0; i < frames.length; i++) got.push(await g.waitRxFrame());
      expect(got.map((r) => r.status)).to.deep.equal([0, 0, 0, 0, 0, 0]);
      expect(got.map((r) => r.len)).to.deep.equal([60, 64, 128, 1000, 1514, 1518]);
      expect(got.map((r) => r.numSg)).to.deep.equal([0, 0, 0, 0, 0, 0]);
      got.forEach((r, i) => expect(r.data.equals(frames[i]!), `frame ${i}`).to.equal(true));
      for (let i = 1; i < got.length; i++) expect(got[i]!.index).to.equal((got[i - 1]!.index + 1) % 64);
    });

    it('RX: 300 frames through a 64-entry ring with refills, in order across color wraps', async () => {
      const got: number[] = [];
      for (let batch = 0; batch < 10; batch++) {
        for (let i = 0; i < 30; i++) link.inject(fromPeer(100, batch * 30 + i));
        for (let i = 0; i < 30; i++) {
          const r = await g.waitRxFrame();
          expect(r.status).to.equal(0);
          got.push(r.data[r.data.length - 1]!);
        }
        // The refill doorbell is a posted write: let the device see it before the next burst.
        await g.sync();
      }
      // The last payload byte encodes the tag: (57 * 7 + tag) & 0xff.
      expect(got).to.deep.equal(Array.from({ length: 300 }, (_, t) => (57 * 7 + t) & 0xff));
      expect(g.rxPosted(0)).to.be.at.least(63 - 16);
    });

    it('RX: a frame longer than the posted buffer completes with an error status and is not written past it', async () => {
      const frame = fromPeer(1600, 7);
      link.inject(frame);
      const r = await g.waitRxFrame();
      expect(r.status).to.not.equal(0);
      expect(r.len).to.equal(0);
      // The buffer holds 1518 bytes; the 18 bytes of padding after it stay as allocated (zero).
      const buf = g.rxqs[0]!.bufs[r.index]![0]!;
      expect(buf.len).to.equal(1518);
      expect(g.mem(buf.iova + 1518, 18).equals(Buffer.alloc(18))).to.equal(true);
      // The next frame uses the next descriptor as usual.
      link.inject(fromPeer(70, 8));
      const next = await g.waitRxFrame();
      expect([next.status, next.len, next.index]).to.deep.equal([0, 70, (r.index + 1) % 64]);
    });
  });

  describe('with MTU 9000 buffers (first buffer one page, then SG elements)', () => {
    let rig: Rig;
    let g: IonicGuest;
    let link: FakeLink;

    before(async () => {
      link = new FakeLink();
      rig = await Rig.start({ link });
      g = await rig.connect();
      await g.probe();
      await g.open(1, { mtu: 9000 });
    });
    after(async () => rig.close());
    afterEach(() => expect(g.violations).to.deep.equal([]));

    it('RX: a 9018-byte frame fills the first page and two SG elements (num_sg_elems 2)', async () => {
      const f = fromPeer(9018, 1);
      link.inject(f);
      const r = await g.waitRxFrame();
      expect([r.status, r.len, r.numSg]).to.deep.equal([0, 9018, 2]);
      expect(r.data.equals(f)).to.equal(true);
    });

    it('RX: a 5000-byte frame uses one SG element; a 4096-byte frame none', async () => {
      link.inject(fromPeer(5000, 2));
      link.inject(fromPeer(4096, 3));
      const a = await g.waitRxFrame();
      const b = await g.waitRxFrame();
      expect([a.status, a.len, a.numSg]).to.deep.equal([0, 5000, 1]);
      expect([b.status, b.len, b.numSg]).to.deep.equal([0, 4096, 0]);
      expect(a.data.equals(fromPeer(5000, 2))).to.equal(true);
    });
  });
});
