// Receive steering and filtering: a flow always lands on the same enabled RX
// queue; a frame for a queue with no posted buffer is dropped and counted
// (lif_info rx_queue_empty); RX_MODE_SET and the MAC filters decide what is
// delivered at all.

import { expect } from 'chai';
import { IonicGuest, RxFrame, command } from '../support/ionic/guest';
import { Match, Op, QT, RxMode, St } from '../support/ionic/regs';
import { DEVICE_MAC, Rig } from '../support/ionic/rig';
import { arp, BROADCAST, FakeLink, ip, mac, parseUdp, udpFrame } from '../support/ionic/wire';

const PEER = Buffer.from([0x02, 0, 0, 0, 0, 0x42]);

function flow(srcPort: number, tag: number, dst: Buffer = DEVICE_MAC): Buffer {
  return udpFrame(dst, PEER, '10.0.0.1', '10.0.0.2', srcPort, 5000, 80, tag);
}

describe('ionic: RX steering and filters', () => {
  describe('four RX queues', () => {
    let rig: Rig;
    let g: IonicGuest;
    let link: FakeLink;

    before(async () => {
      link = new FakeLink();
      rig = await Rig.start({ link });
      g = await rig.probed(4);
    });
    after(async () => rig.close());
    afterEach(() => expect(g.violations).to.deep.equal([]));

    it('lands every frame of a flow on the same queue, and spreads 24 flows over more than one queue', async () => {
      const queueOf = new Map<number, Set<number>>();
      for (let round = 0; round < 3; round++) {
        for (let f = 0; f < 24; f++) link.inject(flow(1000 + f, round));
        for (let i = 0; i < 24; i++) {
          const r = await g.waitRxFrame();
          const u = parseUdp(r.data)!;
          if (!queueOf.has(u.srcPort)) queueOf.set(u.srcPort, new Set());
          queueOf.get(u.srcPort)!.add(r.queue);
        }
        await g.sync();
      }
      expect(queueOf.size).to.equal(24);
      for (const [port, queues] of queueOf) expect([...queues], `flow from port ${port}`).to.have.length(1);
      const used = new Set([...queueOf.values()].map((s) => [...s][0]));
      expect(used.size).to.be.above(1);
    });

    it('keeps per-queue order: the frames of one flow arrive in the order sent', async () => {
      for (let i = 0; i < 20; i++) link.inject(flow(4242, i));
      const got: RxFrame[] = [];
      for (let i = 0; i < 20; i++) got.push(await g.waitRxFrame());
      expect(new Set(got.map((r) => r.queue)).size).to.equal(1);
      expect(got.map((r) => r.data.equals(flow(4242, got.indexOf(r))))).to.deep.equal(Array(20).fill(true));
    });

    it('steers among the enabled queues only: with RX 1..3 disabled, everything lands on RX 0', async () => {
      for (const q of [1, 2, 3]) expect(await g.qControl(QT.RXQ, q, 0)).to.equal(0);
      for (let f = 0; f < 12; f++) link.inject(flow(2000 + f, f));
      const got: RxFrame[] = [];
      for (let i = 0; i < 12; i++) got.push(await g.waitRxFrame());
      expect(got.map((r) => r.queue)).to.deep.equal(Array(12).fill(0));
    });
  });

  describe('one RX queue without refills', () => {
    let rig: Rig;
    let g: IonicGuest;
    let link: FakeLink;

    before(async () => {
      link = new FakeLink();
      rig = await Rig.start({ link });
      g = await rig.connect();
      await g.probe();
      await g.open(1, { rxRingLog2: 4, autoRefill: false });
    });
    after(async () => rig.close());
    afterEach(() => expect(g.violations).to.deep.equal([]));

    it('delivers into the 15 posted buffers, then drops and counts rx_queue_empty and the drops', async () => {
      expect(g.rxPosted(0)).to.equal(15);
      for (let i = 0; i < 20; i++) link.inject(flow(3000, i));
      const got: RxFrame[] = [];
      for (let i = 0; i < 15; i++) got.push(await g.waitRxFrame());
      expect(got.map((r) => r.index)).to.deep.equal(Array.from({ length: 15 }, (_, i) => i));
      rig.device.stats.flush();
      expect(g.lifStat('rx_ucast_packets')).to.equal(15);
      expect(g.lifStat('rx_queue_empty')).to.equal(5);
      expect(g.lifStat('rx_ucast_drop_packets')).to.equal(5);
      expect(g.lifStat('rx_ucast_drop_bytes')).to.equal(5 * 122);
      expect(g.rxFrames).to.have.length(0);
    });

    it('delivers again once buffers are posted, starting at the next descriptor', async () => {
      expect(g.fillRx(0, 4)).to.equal(4);
      await g.sync();
      link.inject(flow(3000, 99));
      const r = await g.waitRxFrame();
      expect([r.status, r.index, r.len]).to.deep.equal([0, 15, 122]);
    });

    it('counts rx_queue_disabled for frames that arrive while the only queue is disabled', async () => {
      expect(await g.qControl(QT.RXQ, 0, 0)).to.equal(0);
      link.inject(flow(3000, 1));
      link.inject(flow(3000, 2));
      rig.device.stats.flush();
      expect(g.lifStat('rx_queue_disabled')).to.equal(2);
      expect(await g.qControl(QT.RXQ, 0, 1)).to.equal(0);
    });
  });

  describe('RX_MODE_SET and MAC filters', () => {
    let rig: Rig;
    let g: IonicGuest;
    let link: FakeLink;
    let marker = 0;

    /** Inject `frame` then a marker the device always takes: true when `frame` came first. */
    async function delivered(frame: Buffer): Promise<boolean> {
      const m = flow(9999, marker++);
      link.inject(frame);
      link.inject(m);
      const first = await g.waitRxFrame();
      if (first.data.equals(m)) return false;
      expect(first.data.equals(frame)).to.equal(true);
      expect((await g.waitRxFrame()).data.equals(m)).to.equal(true);
      return true;
    }

    const OTHER = mac('02:00:00:00:00:99');
    const MCAST = mac('01:00:5e:00:00:fb');

    before(async () => {
      link = new FakeLink();
      rig = await Rig.start({ link });
      g = await rig.probed(1);
    });
    after(async () => rig.close());
    afterEach(() => expect(g.violations).to.deep.equal([]));

    it('with UNICAST|MULTICAST|BROADCAST: takes its own MAC and broadcast, not another unicast MAC or an unjoined group', async () => {
      expect(await delivered(flow(1, 1))).to.equal(true);
      expect(await delivered(arp(1, PEER, ip('10.0.0.1'), BROADCAST, ip('10.0.0.2')))).to.equal(true);
      expect(await delivered(flow(1, 2, OTHER))).to.equal(false);
      expect(await delivered(flow(1, 3, MCAST))).to.equal(false);
    });

    it('with PROMISC: takes a unicast frame for another MAC', async () => {
      await g.setRxMode(RxMode.UNICAST | RxMode.MULTICAST | RxMode.BROADCAST | RxMode.PROMISC);
      expect(await delivered(flow(1, 4, OTHER))).to.equal(true);
      await g.setRxMode(RxMode.UNICAST | RxMode.MULTICAST | RxMode.BROADCAST);
      expect(await delivered(flow(1, 5, OTHER))).to.equal(false);
    });

    it('with ALLMULTI: takes any multicast group', async () => {
      await g.setRxMode(RxMode.UNICAST | RxMode.MULTICAST | RxMode.BROADCAST | RxMode.ALLMULTI);
      expect(await delivered(flow(1, 6, MCAST))).to.equal(true);
      await g.setRxMode(RxMode.UNICAST | RxMode.MULTICAST | RxMode.BROADCAST);
    });

    it('takes a multicast group or a second unicast MAC after RX_FILTER_ADD, and stops after RX_FILTER_DEL', async () => {
      const m = await g.addMacFilter(MCAST);
      const u = await g.addMacFilter(OTHER);
      expect(m).to.not.equal(u);
      expect(await delivered(flow(1, 7, MCAST))).to.equal(true);
      expect(await delivered(flow(1, 8, OTHER))).to.equal(true);
      expect(await g.delFilter(m)).to.equal(0);
      expect(await g.delFilter(u)).to.equal(0);
      expect(await delivered(flow(1, 9, MCAST))).to.equal(false);
      expect(await delivered(flow(1, 10, OTHER))).to.equal(false);
    });

    it('answers RX_FILTER_ADD with ENOSPC (15) once the 64-entry table (32 unicast + 32 multicast) is full', async () => {
      const ids: number[] = [];
      // The station MAC filter from probe is entry 1.
      for (let i = 0; i < 63; i++) ids.push(await g.addMacFilter(Buffer.from([0x02, 0, 0, 0, 1, i])));
      expect(new Set(ids).size).to.equal(63);
      const c = command(Op.RX_FILTER_ADD);
      c.writeUInt16LE(Match.MAC, 8);
      Buffer.from([0x02, 0, 0, 0, 2, 0]).copy(c, 10);
      expect((await g.adminCmd(c)).status).to.equal(St.ENOSPC);
      expect(await g.delFilter(ids[0]!)).to.equal(0);
      expect((await g.adminCmd(c)).status).to.equal(St.SUCCESS);
      expect(await delivered(flow(1, 11, Buffer.from([0x02, 0, 0, 0, 2, 0])))).to.equal(true);
    });

    it('without BROADCAST in the mode: drops broadcast', async () => {
      await g.setRxMode(RxMode.UNICAST);
      expect(await delivered(arp(1, PEER, ip('10.0.0.1'), BROADCAST, ip('10.0.0.2')))).to.equal(false);
      await g.setRxMode(RxMode.UNICAST | RxMode.MULTICAST | RxMode.BROADCAST);
    });
  });
});
