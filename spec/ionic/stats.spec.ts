// The statistics blocks `ip -s link` and `ethtool -S` read: lif_info.stats
// (ucast/mcast/bcast packets and bytes, drops) and port_info's port_stats,
// written by the device into guest memory after traffic, at the profile's
// interval and only while something changed: an idle device schedules nothing.

import { expect } from 'chai';
import * as sinon from 'sinon';
import { IonicGuest } from '../support/ionic/guest';
import { LifInfo, PortInfo } from '../support/ionic/regs';
import { DEVICE_MAC, Rig, testProfile } from '../support/ionic/rig';
import { arp, BROADCAST, FakeLink, ip, udpFrame } from '../support/ionic/wire';

const PEER = Buffer.from([0x02, 0, 0, 0, 0, 0x42]);
const INTERVAL_MS = 100;

describe('ionic: statistics blocks', () => {
  let rig: Rig;
  let g: IonicGuest;
  let link: FakeLink;

  before(async () => {
    link = new FakeLink();
    rig = await Rig.start({ link, profile: testProfile({ statsIntervalMs: INTERVAL_MS }) });
    g = await rig.probed(1);
    rig.device.stats.flush();
  });
  after(async () => rig.close());
  afterEach(() => expect(g.violations).to.deep.equal([]));

  it('starts at zero in lif_info and port_info after LIF_INIT and PORT_INIT', () => {
    expect(g.lifInfo().subarray(LifInfo.stats, LifInfo.SIZE).equals(Buffer.alloc(1024))).to.equal(true);
    expect(g.portStat(PortInfo.frames_tx_ok)).to.equal(0);
    expect(g.portStat(PortInfo.frames_rx_ok)).to.equal(0);
  });

  it('counts TX and RX packets and bytes by destination kind (ip -s link) and in port_stats (ethtool -S)', async () => {
    const txLens = [100, 200, 300, 400, 500];
    for (const [i, len] of txLens.entries()) {
      await g.sendFrame(udpFrame(PEER, DEVICE_MAC, '10.0.0.2', '10.0.0.1', 5000, 6000, len - 42, i));
    }
    for (let i = 0; i < 2; i++) await g.sendFrame(arp(1, DEVICE_MAC, ip('10.0.0.2'), BROADCAST, ip('10.0.0.1')));
    const rxLens = [60, 1000, 1514];
    for (const [i, len] of rxLens.entries())
      link.inject(udpFrame(DEVICE_MAC, PEER, '10.0.0.1', '10.0.0.2', 6000, 5000, len - 42, i));
    link.inject(arp(1, PEER, ip('10.0.0.1'), BROADCAST, ip('10.0.0.2')));
    for (let i = 0; i < 4; i++) await g.waitRxFrame();
    rig.device.stats.flush();

    expect(g.lifStat('tx_ucast_packets')).to.equal(5);
    expect(g.lifStat('tx_ucast_bytes')).to.equal(1500);
    expect(g.lifStat('tx_bcast_packets')).to.equal(2);
    expect(g.lifStat('tx_bcast_bytes')).to.equal(84);
    expect(g.lifStat('tx_mcast_packets')).to.equal(0);
    expect(g.lifStat('rx_ucast_packets')).to.equal(3);
    expect(g.lifStat('rx_ucast_bytes')).to.equal(2574);
    expect(g.lifStat('rx_bcast_packets')).to.equal(1);
    expect(g.lifStat('rx_bcast_bytes')).to.equal(42);
    expect(g.lifStat('rx_ucast_drop_packets')).to.equal(0);
    expect(g.lifStat('tx_ucast_drop_packets')).to.equal(0);

    expect(g.portStat(PortInfo.frames_tx_ok)).to.equal(7);
    expect(g.portStat(PortInfo.octets_tx_ok)).to.equal(1584);
    expect(g.portStat(PortInfo.frames_rx_ok)).to.equal(4);
    expect(g.portStat(PortInfo.octets_rx_ok)).to.equal(2616);
  });

  it('leaves nothing scheduled after a flush: an idle device has no timer', () => {
    expect(rig.device.stats.scheduled).to.equal(false);
  });

  it('writes changed counters by itself within the profile interval, then schedules nothing while idle', async () => {
    // The device's timer runs on a fake clock the test moves, so a loaded
    // machine cannot fire it before the "not written yet" check.
    const clock = sinon.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
    try {
      await g.sendFrame(udpFrame(PEER, DEVICE_MAC, '10.0.0.2', '10.0.0.1', 5000, 6000, 58, 9));
      expect(rig.device.stats.scheduled).to.equal(true);
      expect(g.lifStat('tx_ucast_packets')).to.equal(5); // not written yet
      const writes = rig.device.stats.writes;
      await clock.tickAsync(INTERVAL_MS - 1);
      expect(g.lifStat('tx_ucast_packets'), 'still not written just before the interval').to.equal(5);
      // Nobody asks: the device's own timer writes the block at the interval.
      await clock.tickAsync(1);
      expect(g.lifStat('tx_ucast_packets')).to.equal(6);
      expect(g.lifStat('tx_ucast_bytes')).to.equal(1600);
      expect(g.portStat(PortInfo.frames_tx_ok)).to.equal(8);
      expect(rig.device.stats.writes).to.equal(writes + 1);
      expect(rig.device.stats.scheduled).to.equal(false);
      await clock.tickAsync(INTERVAL_MS * 3);
      expect(rig.device.stats.writes).to.equal(writes + 1);
      expect(rig.device.stats.scheduled).to.equal(false);
    } finally {
      clock.restore();
    }
  });

  it('stops writing into the guest after LIF_RESET/RESET and the disconnect', async () => {
    const old = g;
    await rig.drop(old);
    link.inject(udpFrame(DEVICE_MAC, PEER, '10.0.0.1', '10.0.0.2', 6000, 5000, 58, 1));
    expect(rig.device.stats.scheduled).to.equal(false);
    g = await rig.probed(1);
    expect(rig.device.stats.scheduled).to.equal(false);
  });
});
