// Frame hooks for in-process endpoints (the S3 store and the P4 engine will
// use them): claim a TX frame before the wire, claim an RX frame from the
// wire, and queue frames for the guest that wait for a buffer, in order.

import { expect } from 'chai';
import type { FrameEndpoint } from '../../lib/net/frame-endpoint';
import { IonicGuest } from '../support/ionic/guest';
import { DEVICE_MAC, Rig } from '../support/ionic/rig';
import { FakeLink, udpFrame } from '../support/ionic/wire';

const PEER = Buffer.from([0x02, 0, 0, 0, 0, 0x42]);
const toPeer = (port: number, tag: number): Buffer =>
  udpFrame(PEER, DEVICE_MAC, '10.0.0.2', '10.0.0.1', 5000, port, 100, tag);
const fromPeer = (tag: number): Buffer => udpFrame(DEVICE_MAC, PEER, '10.0.0.1', '10.0.0.2', 6000, 5000, 100, tag);

describe('ionic: in-process endpoints on the Ethernet segment', () => {
  let rig: Rig;
  let g: IonicGuest;
  let link: FakeLink;
  const claimedTx: Buffer[] = [];
  const claimedRx: Buffer[] = [];

  before(async () => {
    link = new FakeLink();
    rig = await Rig.start({ link });
    // An endpoint that owns UDP port 7777 in both directions.
    const endpoint: FrameEndpoint = {
      claimTx(frame) {
        if (frame.readUInt16BE(36) !== 7777) return false;
        claimedTx.push(Buffer.from(frame));
        return true;
      },
      claimRx(frame) {
        if (frame.readUInt16BE(34) !== 7777) return false;
        claimedRx.push(Buffer.from(frame));
        return true;
      },
    };
    rig.device.addEndpoint(endpoint);
    g = await rig.probed(1, {});
  });
  after(async () => rig.close());

  it('claims a TX frame before the wire; others go to the wire', async () => {
    await g.sendFrame(toPeer(7777, 1));
    await g.sendFrame(toPeer(8888, 2));
    expect(claimedTx).to.have.length(1);
    expect(claimedTx[0]!.readUInt16BE(36)).to.equal(7777);
    expect(link.sent).to.have.length(1);
    expect(link.sent[0]!.readUInt16BE(36)).to.equal(8888);
  });

  it('claims an RX frame from the wire before the guest sees it', async () => {
    const claimed = udpFrame(DEVICE_MAC, PEER, '10.0.0.1', '10.0.0.2', 7777, 5000, 100, 3);
    link.inject(claimed);
    link.inject(fromPeer(4));
    const f = await g.waitRxFrame();
    expect(f.len).to.equal(fromPeer(4).length);
    expect(claimedRx).to.have.length(1);
  });

  it('queues frames for the guest that wait for a buffer, in order, and delivers them when buffers are posted', async () => {
    // With no RX buffer posted (queue opened with none), frames wait in the device.
    const link3 = new FakeLink();
    const rig3 = await Rig.start({ link: link3 });
    try {
      const g3 = await rig3.connect();
      await g3.probe();
      await g3.open(1, { initialFill: 0 });
      for (let tag = 10; tag < 15; tag++) rig3.device.lif.sendToGuest(fromPeer(tag));
      // A TAP frame meanwhile has no buffer and is dropped, as on a real NIC.
      link3.inject(fromPeer(99));
      expect(g3.takeRx()).to.have.length(0);
      g3.fillRx(0, 8);
      const got = [];
      for (let i = 0; i < 5; i++) got.push(await g3.waitRxFrame());
      expect(got.map((f) => f.index)).to.deep.equal([0, 1, 2, 3, 4]);
      // The queued frames arrive in the order they were queued (the tag is in the payload).
      const tags = got.map((f) => f.data[42]);
      expect(tags).to.deep.equal([10, 11, 12, 13, 14]);
    } finally {
      await rig3.close();
    }
  });
});
