// Fault injection on the data path (--inject): tx-drop completes a frame to
// the guest but never sends it; rx-nobuf drops a received frame as if no
// buffer were posted (and counts it as such); rx-lost loses it before the
// NIC (nothing counts it). Patterns count events, so results are exact.

import { expect } from 'chai';
import * as fs from 'fs';
import * as native from '../../lib/native';
import { FaultInjector } from '../../lib/ionic/fault-injection';
import { TapLink } from '../../lib/ionic/tap';
import { IonicGuest } from '../support/ionic/guest';
import { canUseTap, DEVICE_MAC, Rig, run, runQuiet } from '../support/ionic/rig';
import { FakeLink, udpFrame } from '../support/ionic/wire';
import { skipBecause } from '../support/skip';

const PEER = Buffer.from([0x02, 0, 0, 0, 0, 0x42]);

const toPeer = (tag: number): Buffer => udpFrame(PEER, DEVICE_MAC, '10.0.0.2', '10.0.0.1', 5000, 6000, 60, tag);
const fromPeer = (tag: number): Buffer => udpFrame(DEVICE_MAC, PEER, '10.0.0.1', '10.0.0.2', 6000, 5000, 60, tag);

function stat(faults: FaultInjector, event: string): { seen: number; failed: number } {
  const s = faults.stats().find((x) => x.event === event)!;
  return { seen: s.seen, failed: s.failed };
}

describe('ionic: fault injection on the data path', () => {
  let rig: Rig | null = null;
  let g: IonicGuest;
  let link: FakeLink;

  async function start(spec: string): Promise<FaultInjector> {
    const faults = FaultInjector.parse([spec]);
    link = new FakeLink();
    rig = await Rig.start({ link, faults });
    g = await rig.probed(1);
    return faults;
  }
  afterEach(async () => {
    if (rig) {
      expect(g.violations).to.deep.equal([]);
      await rig.close();
      rig = null;
    }
  });

  it('tx-drop=every:2: all six frames complete with status 0, but only 1, 3 and 5 reach the wire', async () => {
    const faults = await start('tx-drop=every:2');
    const comps = [];
    for (let i = 1; i <= 6; i++) comps.push(await g.sendFrame(toPeer(i)));
    expect(comps.map((c) => c.status)).to.deep.equal([0, 0, 0, 0, 0, 0]);
    expect(
      link.sent.map((f) => (f.equals(toPeer(1)) ? 1 : f.equals(toPeer(3)) ? 3 : f.equals(toPeer(5)) ? 5 : -1)),
    ).to.deep.equal([1, 3, 5]);
    expect(stat(faults, 'tx-drop')).to.deep.equal({ seen: 6, failed: 3 });
  });

  it('rx-nobuf=every:3: frames 3 and 6 are dropped and counted as rx_queue_empty', async () => {
    const faults = await start('rx-nobuf=every:3');
    for (let i = 1; i <= 6; i++) link.inject(fromPeer(i));
    const got = [];
    for (let i = 0; i < 4; i++) got.push(await g.waitRxFrame());
    expect(got.map((r) => [1, 2, 3, 4, 5, 6].find((t) => r.data.equals(fromPeer(t))))).to.deep.equal([1, 2, 4, 5]);
    await g.sync();
    expect(g.rxFrames).to.have.length(0);
    rig!.device.stats.flush();
    expect(g.lifStat('rx_queue_empty')).to.equal(2);
    expect(g.lifStat('rx_ucast_drop_packets')).to.equal(2);
    expect(g.lifStat('rx_ucast_packets')).to.equal(4);
    expect(stat(faults, 'rx-nobuf')).to.deep.equal({ seen: 6, failed: 2 });
    // The posted buffers were not used by the dropped frames: four descriptors consumed, in order.
    expect(got.map((r) => r.index)).to.deep.equal([0, 1, 2, 3]);
  });

  it('rx-lost=at:2/5: frames 2 and 5 vanish before the NIC: delivered 1, 3, 4, 6 and no drop counted', async () => {
    const faults = await start('rx-lost=at:2/5');
    for (let i = 1; i <= 6; i++) link.inject(fromPeer(i));
    const got = [];
    for (let i = 0; i < 4; i++) got.push(await g.waitRxFrame());
    expect(got.map((r) => [1, 2, 3, 4, 5, 6].find((t) => r.data.equals(fromPeer(t))))).to.deep.equal([1, 3, 4, 6]);
    rig!.device.stats.flush();
    expect(g.lifStat('rx_ucast_packets')).to.equal(4);
    expect(g.lifStat('rx_ucast_drop_packets')).to.equal(0);
    expect(g.lifStat('rx_queue_empty')).to.equal(0);
    expect(stat(faults, 'rx-lost')).to.deep.equal({ seen: 6, failed: 2 });
  });

  describe('through a host TAP', function () {
    const tap = `ernf${process.pid % 1000000}`;
    let tapLink: TapLink | null = null;

    function tapRxPackets(): number {
      const j = JSON.parse(run('ip', ['-s', '-j', 'link', 'show', 'dev', tap])) as Array<{
        stats64: { rx: { packets: number } };
      }>;
      return j[0]!.stats64.rx.packets;
    }

    before(function () {
      if (!canUseTap()) skipBecause(this, 'needs root and /dev/net/tun for a TAP');
      runQuiet('ip', ['link', 'del', tap]);
      run('ip', ['tuntap', 'add', 'dev', tap, 'mode', 'tap']);
      run('ip', ['link', 'set', 'dev', tap, 'addrgenmode', 'none']);
      tapLink = new TapLink(tap);
      run('ip', ['link', 'set', 'dev', tap, 'up']);
    });
    after(() => {
      tapLink?.close();
      runQuiet('ip', ['link', 'del', tap]);
    });

    it('tx-drop=every:2: of six frames the TAP receives exactly three', async () => {
      const faults = FaultInjector.parse(['tx-drop=every:2']);
      rig = await Rig.start({ link: tapLink, faults });
      g = await rig.probed(1);
      const before = tapRxPackets();
      for (let i = 1; i <= 6; i++) expect((await g.sendFrame(toPeer(i))).status).to.equal(0);
      expect(tapRxPackets() - before).to.equal(3);
      expect(stat(faults, 'tx-drop')).to.deep.equal({ seen: 6, failed: 3 });
    });

    it('closing the TAP link a second time leaves alone the fd that reused its number', () => {
      // The device closed the link when the rig closed; a new fd likely takes the freed number.
      const efd = native.eventfd(0, true);
      tapLink!.close();
      expect(() => fs.fstatSync(efd)).to.not.throw();
      expect(tapLink!.send(Buffer.alloc(60))).to.equal(false);
      expect(() => fs.fstatSync(efd)).to.not.throw();
      fs.closeSync(efd);
    });
  });
});
