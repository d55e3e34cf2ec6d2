// Disconnect and reconnect: when the VM goes away the driver's state goes with
// it (queues, filters, mode, stats targets, the MAC it set), and the next
// client probes from scratch. Also the orderly remove (LIF_RESET, PORT_RESET,
// RESET) followed by a second probe on the same connection, as rmmod/modprobe.

import { expect } from 'chai';
import { openFdCount, settle } from '../support/fds';
import { IonicGuest, command } from '../support/ionic/guest';
import { Attr, Op } from '../support/ionic/regs';
import { DEVICE_MAC, Rig } from '../support/ionic/rig';
import { FakeLink, udpFrame } from '../support/ionic/wire';

const PEER = Buffer.from([0x02, 0, 0, 0, 0, 0x42]);
const toPeer = (tag: number): Buffer => udpFrame(PEER, DEVICE_MAC, '10.0.0.2', '10.0.0.1', 5000, 6000, 60, tag);
const fromPeer = (tag: number): Buffer => udpFrame(DEVICE_MAC, PEER, '10.0.0.1', '10.0.0.2', 6000, 5000, 60, tag);

async function traffic(g: IonicGuest, link: FakeLink, tag: number): Promise<void> {
  link.sent.length = 0;
  expect((await g.sendFrame(toPeer(tag))).status).to.equal(0);
  expect(link.sent.map((f) => f.equals(toPeer(tag)))).to.deep.equal([true]);
  link.inject(fromPeer(tag));
  expect((await g.waitRxFrame()).data.equals(fromPeer(tag))).to.equal(true);
}

async function setMac(g: IonicGuest, mac: Buffer): Promise<void> {
  const c = command(Op.LIF_SETATTR);
  c[1] = Attr.MAC;
  mac.copy(c, 4);
  expect((await g.adminCmd(c)).status).to.equal(0);
}

describe('ionic: disconnect and reconnect', () => {
  let rig: Rig;
  let link: FakeLink;

  beforeEach(async () => {
    link = new FakeLink();
    rig = await Rig.start({ link });
  });
  afterEach(async () => rig.close());

  it("drops the driver's queues, filters and interrupt state when the client goes away; a second client probes and passes traffic", async () => {
    await settle();
    const fds = openFdCount();
    const g1 = await rig.probed(2);
    await traffic(g1, link, 1);
    const dev = rig.device;
    expect(dev.lif.adminq).to.not.equal(null);
    expect(dev.lif.txqs.filter((q) => q !== null)).to.have.length(2);

    await rig.drop(g1);
    expect(rig.server.session).to.equal(null);
    expect(dev.lif.adminq).to.equal(null);
    expect(dev.lif.notifyq).to.equal(null);
    expect(dev.lif.txqs.every((q) => q === null)).to.equal(true);
    expect(dev.lif.rxqs.every((q) => q === null)).to.equal(true);
    expect(dev.lif.rxFilters.table.size).to.equal(0);
    expect(dev.lif.rxFilters.mode).to.equal(0);
    expect(dev.interrupts.isMasked(0)).to.equal(true);
    expect(dev.interrupts.isMasked(1)).to.equal(true);
    expect(dev.stats.lifInfoPa).to.equal(0);
    expect(dev.stats.scheduled).to.equal(false);
    // Frames from the wire with nobody attached go nowhere, quietly.
    link.inject(fromPeer(2));

    const g2 = await rig.probed(1);
    expect(rig.server.sessionsServed).to.equal(2);
    await traffic(g2, link, 3);
    expect(g2.violations).to.deep.equal([]);
    await rig.drop(g2);
    expect(openFdCount()).to.equal(fds);
  });

  it('serves a client waiting in the backlog as soon as the first one leaves (a QEMU restart)', async () => {
    const g1 = await rig.probed(1);
    const waiting = IonicGuest.connect(rig.path);
    await settle();
    expect(rig.server.sessionsServed).to.equal(1);
    await rig.drop(g1);
    const g2 = await waiting;
    rig.guests.push(g2);
    await g2.probe();
    await g2.open(1);
    await traffic(g2, link, 4);
    expect(rig.server.sessionsServed).to.equal(2);
  });

  it('gives the next client the configured MAC, not the one the last driver set', async () => {
    const g1 = await rig.probed();
    await setMac(g1, Buffer.from([0x02, 0xaa, 0xbb, 0xcc, 0xdd, 0xee]));
    expect((await g1.getMac()).equals(Buffer.from([0x02, 0xaa, 0xbb, 0xcc, 0xdd, 0xee]))).to.equal(true);
    await rig.drop(g1);
    const g2 = await rig.probed(1);
    expect(g2.mac.equals(DEVICE_MAC)).to.equal(true);
    await traffic(g2, link, 5);
  });

  it('rmmod then modprobe on the same connection: remove (LIF_RESET, PORT_RESET, RESET) then a full probe again', async () => {
    const g = await rig.probed(1);
    await traffic(g, link, 6);
    await setMac(g, Buffer.from([0x02, 0x10, 0x20, 0x30, 0x40, 0x50]));
    await g.remove();
    expect(rig.device.lif.adminq).to.equal(null);
    expect(rig.device.lif.txqs.every((q) => q === null)).to.equal(true);
    g.trace.length = 0;
    g.adminLog.length = 0;
    await g.probe();
    expect(g.mac.equals(DEVICE_MAC)).to.equal(true);
    await g.open(1);
    await traffic(g, link, 7);
    expect(g.violations).to.deep.equal([]);
  });
});
