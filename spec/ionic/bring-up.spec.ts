// Bring-up as ionic.ko does it, through a real vfio-user socket and memfd guest
// RAM: every identity field the driver depends on, the zero-filled data
// window, completion versions, Q_INIT hw_type/hw_index, admin completion
// colors across CQ wraps, and `done` only after the completion is final.

import { expect } from 'chai';
import { IonicGuest, command, putU64 } from '../support/ionic/guest';
import {
  Bar0,
  Cfg,
  DevId,
  Feature,
  LifId,
  LifInfo,
  Op,
  PortCfg,
  PortId,
  PortInfo,
  QId,
  QT,
  Region,
  SIGNATURE_DEVI,
} from '../support/ionic/regs';
import { DEVICE_MAC, Rig } from '../support/ionic/rig';

/** What the compat profile offers, in driver terms (ionic Ethernet E4.6, docs/driver-contract.md). */
const OFFERED =
  Feature.VLAN_TX_TAG |
  Feature.VLAN_RX_STRIP |
  Feature.RX_HASH |
  Feature.RX_CSUM |
  Feature.TX_SG |
  Feature.TX_CSUM |
  Feature.TSO |
  Feature.TSO_IPV6 |
  Feature.TSO_ECN;

/** Offsets of non-zero bytes of `b` outside the [start, end) ranges. */
function strayBytes(b: Buffer, keep: ReadonlyArray<readonly [number, number]>): number[] {
  const out: number[] = [];
  for (let i = 0; i < b.length; i++) {
    if (b[i] !== 0 && !keep.some(([s, e]) => i >= s && i < e)) out.push(i);
  }
  return out;
}

describe('ionic: bring-up through the guest model', () => {
  let rig: Rig;
  let g: IonicGuest;

  before(async () => {
    rig = await Rig.start();
    g = await rig.probed();
  });
  after(async () => rig.close());
  afterEach(() => expect(g.violations).to.deep.equal([]));

  describe('PCI function', () => {
    it('is 1dd8:1002 subsystem 1dd8:5400, class 02:00:00', async () => {
      const hdr = await g.configRead(0, 0x30);
      expect(hdr.readUInt16LE(Cfg.VENDOR)).to.equal(0x1dd8);
      expect(hdr.readUInt16LE(Cfg.DEVICE)).to.equal(0x1002);
      expect(hdr.readUInt32LE(Cfg.CLASS_REV) >>> 8).to.equal(0x020000);
      expect(hdr.readUInt16LE(Cfg.SUBSYS_VENDOR)).to.equal(0x1dd8);
      expect(hdr.readUInt16LE(Cfg.SUBSYS)).to.equal(0x5400);
    });

    it('packs to bars[0] = BAR0 (64 KiB) and bars[1] = BAR2 (4 MiB doorbells), with nothing at BAR4 (no CMB)', async () => {
      expect(g.bars).to.deep.equal([
        { index: 0, size: 0x10000 },
        { index: 2, size: 0x400000 },
      ]);
      expect((await g.client.getRegionInfo(Region.BAR4)).size).to.equal(0);
    });

    it('has an MSI-X capability on the list from 0x34 with 32 vectors, table and PBA in BAR0 above 0x2000 + 32 * nintrs', async () => {
      expect(g.msixCap).to.not.equal(0);
      expect(g.nvec).to.equal(32);
      const cap = await g.configRead(g.msixCap, 12);
      const table = cap.readUInt32LE(Cfg.MSIX_TABLE);
      const pba = cap.readUInt32LE(Cfg.MSIX_PBA);
      expect(table & 7).to.equal(0);
      expect(pba & 7).to.equal(0);
      expect(table & ~7).to.be.at.least(0x2000 + 32 * 32);
      expect(pba & ~7).to.be.at.least(0x2000 + 32 * 32);
      expect(cap.readUInt16LE(Cfg.MSIX_FLAGS) & Cfg.MSIX_ENABLE).to.equal(Cfg.MSIX_ENABLE);
    });
  });

  describe('dev_info registers', () => {
    it('reads signature DEVI, version 1, asic_type 1, fw_status RUNNING, heartbeat 0 and printable strings', () => {
      const d = g.devInfo;
      expect(d.readUInt32LE(Bar0.SIGNATURE)).to.equal(SIGNATURE_DEVI);
      expect(d[Bar0.VERSION]).to.equal(1);
      // 0 (NONE) and 2 (ELBA) turn on the driver's doorbell workaround.
      expect(d[Bar0.ASIC_TYPE]).to.equal(1);
      expect(d[Bar0.FW_STATUS]).to.equal(0x01);
      expect(d.readUInt32LE(Bar0.FW_HEARTBEAT)).to.equal(0);
      const fw = d.subarray(Bar0.FW_VERSION, Bar0.FW_VERSION + 32);
      expect(fw.toString('latin1').replace(/\0+$/, '')).to.equal('1.0.0-ernic');
      expect(fw[31]).to.equal(0);
      expect(
        d
          .subarray(Bar0.SERIAL, Bar0.SERIAL + 32)
          .toString('latin1')
          .replace(/\0+$/, ''),
      ).to.equal('ERNIC-00000000');
    });

    it('reads interrupt status as zero and never all-ones anywhere in the register window', async () => {
      expect((await g.bar0Read(Bar0.INTR_STATUS, 8)).equals(Buffer.alloc(8))).to.equal(true);
      for (const off of [0x40, 0x400, 0x7fc, 0x858, 0x1ffc, 0x2000 + 32 * 32, 0x7ff8]) {
        expect((await g.bar0Read(off, 4)).readUInt32LE(0)).to.not.equal(0xffffffff);
      }
    });
  });

  describe('identities', () => {
    it('IDENTIFY: comp.ver 2; dev_identity v2, 1 port, 1 LIF, nintrs 32, 256 doorbell pages, coalesce 1/3; the rest of the window zero', () => {
      expect(g.probeComps.get('identify')![1]).to.equal(2);
      const d = g.devIdentity;
      expect(d.length).to.equal(1912);
      expect(d[DevId.version]).to.equal(2);
      expect(d[DevId.nports]).to.equal(1);
      expect(d.readUInt32LE(DevId.nlifs)).to.equal(1);
      expect(d.readUInt32LE(DevId.nintrs)).to.equal(32);
      // RDMA (the profile's rdma_eqs > 0): a page per ibv_context; the kernel's is still page 0 (spec/ionic/rdma/bootstrap.spec.ts).
      expect(d.readUInt32LE(DevId.ndbpgs_per_lif)).to.equal(256);
      expect(d.readUInt32LE(DevId.intr_coal_mult)).to.equal(1);
      expect(d.readUInt32LE(DevId.intr_coal_div)).to.equal(3);
      expect(d.readUInt32LE(DevId.eq_count)).to.equal(0);
      expect(d.readBigUInt64LE(DevId.capabilities)).to.equal(0n);
      // The drv_identity strings the driver wrote at 8, 140 and 172 must not read back as device fields.
      expect(
        strayBytes(d, [
          [0, 1],
          [4, 5],
          [8, 28],
        ]),
      ).to.deep.equal([]);
    });

    it('LIF_IDENTIFY: comp.ver 1; ETH and RDMA capability, 32 filters, RSS table 128, frames 64..9018, queue counts 1/1/16/16', () => {
      expect(g.probeComps.get('lif_identify')![1]).to.equal(1);
      expect(g.probeComps.get('lif_identify2')![1]).to.equal(1);
      const l = g.lifIdentity;
      expect(l.readBigUInt64LE(LifId.capabilities)).to.equal(3n); // ETH | RDMA
      expect(l.readUInt32LE(LifId.max_ucast_filters)).to.equal(32);
      expect(l.readUInt32LE(LifId.max_mcast_filters)).to.equal(32);
      expect(l.readUInt16LE(LifId.rss_ind_tbl_sz)).to.equal(128);
      expect(l.readUInt32LE(LifId.min_frame_size)).to.equal(64);
      // max_mtu = max_frame_size - 18 = the profile's 9000.
      expect(l.readUInt32LE(LifId.max_frame_size)).to.equal(9018);
      // The offloads on offer (VLAN tag/strip, RX hash and checksum, TX SG and checksum, TSO v4/v6/ECN); no TIMESTAMP bit.
      expect(l.readBigUInt64LE(LifId.config_features)).to.equal(BigInt(OFFERED));
      expect(l.readUInt32LE(LifId.qcount_adminq)).to.equal(1);
      expect(l.readUInt32LE(LifId.qcount_notifyq)).to.equal(1);
      expect(l.readUInt32LE(LifId.qcount_rxq)).to.equal(16);
      expect(l.readUInt32LE(LifId.qcount_txq)).to.equal(16);
      expect(l.readUInt32LE(LifId.qcount_eq)).to.equal(0);
      expect(l.subarray(LifId.config + 24, LifId.config + 30).equals(DEVICE_MAC)).to.equal(true);
      // The RDMA section (pinned field by field in spec/ionic/rdma/bootstrap.spec.ts) ends at 486; the rest is reserved.
      expect(l.subarray(486, LifId.SIZE).every((b) => b === 0)).to.equal(true);
      // Only known fields are non-zero: eth header fields, config state/name/mtu/mac/features, the queue counts, the RDMA section.
      expect(
        strayBytes(l, [
          [0, 1],
          [8, 9],
          [12, 30],
          [136, 176],
          [176, 192],
          [LifId.rdma, 486],
        ]),
      ).to.deep.equal([]);
    });

    it('Q_IDENTIFY: ADMINQ v0, NOTIFYQ v0, RXQ v0, TXQ v1 with sg_desc_sz 256; comp.ver echoes the version; the rest zero', () => {
      const expected: Array<[number, number]> = [
        [QT.ADMINQ, 0],
        [QT.NOTIFYQ, 0],
        [QT.RXQ, 0],
        [QT.TXQ, 1],
      ];
      for (const [type, ver] of expected) {
        const q = g.qIdentity[type]!;
        expect(q, `q_identity ${type}`).to.not.equal(null);
        expect(q[QId.version], `version of type ${type}`).to.equal(ver);
        expect(g.probeComps.get(`q_identify${type}`)![0]).to.equal(0);
        expect(g.probeComps.get(`q_identify${type}`)![4], `comp.ver of type ${type}`).to.equal(ver);
        expect(strayBytes(q, [[0, QId.SIZE]]), `window of type ${type}`).to.deep.equal([]);
      }
      const tx = g.qIdentity[QT.TXQ]!;
      expect(tx.readUInt16LE(QId.sg_desc_sz)).to.equal(256);
      expect(tx.readUInt16LE(QId.desc_sz)).to.equal(16);
      expect(tx.readUInt16LE(QId.comp_sz)).to.equal(16);
      expect(tx.readBigUInt64LE(QId.features) & 3n).to.equal(3n); // CQ | SG
      const rx = g.qIdentity[QT.RXQ]!;
      expect(rx.readUInt16LE(QId.desc_sz)).to.equal(16);
      expect(rx.readUInt16LE(QId.comp_sz)).to.equal(16);
    });

    it('PORT_IDENTIFY: an Ethernet port at 100000 Mbps with a config that PORT_INIT takes back', () => {
      const p = g.portIdentity;
      expect(p[PortId.type]).to.equal(1);
      expect(p.readUInt32LE(PortId.speeds)).to.equal(100000);
      expect(p.readUInt32LE(PortId.config + PortCfg.speed)).to.equal(100000);
      expect(p[PortId.config + PortCfg.state]).to.equal(2); // UP
      expect(strayBytes(p, [[0, PortId.SIZE]])).to.deep.equal([]);
      expect(g.probeComps.get('port_init')![0]).to.equal(0);
      expect(g.probeComps.get('port_setattr')![0]).to.equal(0);
    });

    it('port_info: speed 100000, status UP, copper transceiver with pid 1 (so ethtool shows the speed)', () => {
      const pi = g.portInfo();
      expect(pi.readUInt32LE(PortInfo.status_speed)).to.equal(100000);
      expect(pi[PortInfo.status_status]).to.equal(1);
      expect(pi[PortInfo.xcvr_state]).to.equal(1);
      expect(pi[PortInfo.xcvr_phy]).to.equal(1);
      expect(pi.readUInt16LE(PortInfo.xcvr_pid)).to.equal(1);
      expect(pi.readUInt32LE(PortInfo.config + PortCfg.speed)).to.equal(100000);
    });

    it('lif_info after LIF_INIT: link UP at 100000 Mbps, the station MAC in the config; LIF hw_index 0', () => {
      const li = g.lifInfo();
      expect(li.readUInt16LE(LifInfo.link_status)).to.equal(1);
      expect(li.readUInt32LE(LifInfo.link_speed)).to.equal(100000);
      expect(li.subarray(LifInfo.config + 24, LifInfo.config + 30).equals(DEVICE_MAC)).to.equal(true);
      expect(g.probeComps.get('lif_init')!.readUInt16LE(2)).to.equal(0);
      expect(g.lifHwIndex).to.equal(0);
      expect(g.dbPage).to.equal(0);
      expect(g.carrier).to.equal(true);
    });

    it('LIF_GETATTR MAC returns the station MAC; LIF_SETATTR FEATURES answers what was asked of what is offered', () => {
      expect(g.mac.equals(DEVICE_MAC)).to.equal(true);
      // Asked: everything but RX_HASH (one queue pair); refused: VLAN_RX_FILTER and the tunnel TSOs.
      const granted =
        Feature.VLAN_TX_TAG |
        Feature.VLAN_RX_STRIP |
        Feature.RX_CSUM |
        Feature.TX_SG |
        Feature.TX_CSUM |
        Feature.TSO |
        Feature.TSO_IPV6 |
        Feature.TSO_ECN;
      expect(g.probeComps.get('lif_setattr_features')!.readBigUInt64LE(4)).to.equal(BigInt(granted));
      expect(g.features).to.equal(granted);
      expect(g.macFilterId).to.be.above(0);
    });
  });

  describe('command flow', () => {
    it('probe issued the driver order, and the device executed exactly those commands', () => {
      const probeOrder = [
        `dev:${Op.RESET}`,
        `dev:${Op.IDENTIFY}`,
        `dev:${Op.LIF_IDENTIFY}`,
        `dev:${Op.INIT}`,
        `dev:${Op.PORT_IDENTIFY}`,
        `dev:${Op.PORT_INIT}`,
        `dev:${Op.PORT_SETATTR}`,
        `dev:${Op.LIF_IDENTIFY}`,
        `dev:${Op.Q_IDENTIFY}`,
        `dev:${Op.Q_IDENTIFY}`,
        `dev:${Op.Q_IDENTIFY}`,
        `dev:${Op.Q_IDENTIFY}`,
        `dev:${Op.LIF_INIT}`,
        `dev:${Op.Q_INIT}`,
        `admin:${Op.Q_INIT}`,
        `admin:${Op.LIF_SETATTR}`,
        `admin:${Op.LIF_GETATTR}`,
        `admin:${Op.RX_FILTER_ADD}`,
        `dev:${Op.PORT_IDENTIFY}`,
        `admin:${Op.LIF_SETATTR}`,
        `admin:${Op.RX_MODE_SET}`,
      ];
      expect(g.trace.slice(0, probeOrder.length)).to.deep.equal(probeOrder);
      const counts = new Map<number, number>();
      for (const t of g.trace) {
        const op = Number(t.split(':')[1]);
        counts.set(op, (counts.get(op) ?? 0) + 1);
      }
      expect(new Map([...rig.device.commandCounts].sort((a, b) => a[0] - b[0]))).to.deep.equal(
        new Map([...counts].sort((a, b) => a[0] - b[0])),
      );
    });

    it('Q_INIT completions carry hw_type = logical type and hw_index = per-type index', async () => {
      const aq = g.probeComps.get('q_init_adminq')!;
      expect([aq[8], aq.readUInt32LE(4)]).to.deep.equal([QT.ADMINQ, 0]);
      const nq = g.probeComps.get('q_init_notifyq')!;
      expect([nq[8], nq.readUInt32LE(4)]).to.deep.equal([QT.NOTIFYQ, 0]);
      await g.open(3);
      for (let i = 0; i < 3; i++) {
        const tx = g.probeComps.get(`q_init_tx${i}`)!;
        const rx = g.probeComps.get(`q_init_rx${i}`)!;
        expect([tx[0], tx[8], tx.readUInt32LE(4)], `TX ${i}`).to.deep.equal([0, QT.TXQ, i]);
        expect([rx[0], rx[8], rx.readUInt32LE(4)], `RX ${i}`).to.deep.equal([0, QT.RXQ, i]);
      }
    });

    it('admin completions: comp_index = the command slot and the color flips on every CQ wrap (40 more commands)', async () => {
      const before = g.adminLog.length;
      for (let i = 0; i < 40; i++) {
        const c = command(Op.LIF_GETATTR);
        c[1] = 3; // MAC
        const r = await g.adminCmd(c);
        expect(r.status).to.equal(0);
        expect(r.comp.subarray(4, 10).equals(DEVICE_MAC)).to.equal(true);
      }
      const log = g.adminLog;
      expect(log.length).to.equal(before + 40);
      expect(log.length).to.be.above(32); // at least two wraps of the 16-entry CQ
      log.forEach((c, j) => {
        expect(c.cqIndex, `completion ${j}`).to.equal(j % 16);
        expect(c.slot, `completion ${j}`).to.equal(j % 16);
        expect(c.comp.readUInt16LE(2), `comp_index of ${j}`).to.equal(c.slot);
        expect(c.color, `color of ${j}`).to.equal(Math.floor(j / 16) % 2 === 0 ? 1 : 0);
      });
    });

    it('completes a batch of 15 admin commands rung with one doorbell, each in its own slot', async () => {
      const cmds = Array.from({ length: 15 }, (_, i) => {
        const c = command(Op.LIF_GETATTR);
        c[1] = i % 2 ? 3 : 2; // MAC, MTU
        return c;
      });
      const irqs = await g.irqCount(0);
      const comps = await g.adminCmds(cmds);
      expect(comps.map((c) => c.status)).to.deep.equal(Array(15).fill(0));
      expect(comps.map((c) => c.comp.readUInt16LE(2))).to.deep.equal(comps.map((c) => c.slot));
      expect(new Set(comps.map((c) => c.slot)).size).to.equal(15);
      comps.forEach((c, i) => {
        if (i % 2) expect(c.comp.subarray(4, 10).equals(DEVICE_MAC)).to.equal(true);
        else expect(c.comp.readUInt32LE(4)).to.equal(1500);
      });
      // One doorbell, one pass: the vector fired once (the poll then found all fifteen).
      expect(await g.irqCount(0)).to.equal(irqs + 1);
    });

    it('sets done only with the completion final: 0 after the driver clears it, 1 together with status and comp.ver', async () => {
      const c = command(Op.LIF_IDENTIFY);
      c[2] = 1;
      g.bar0Write(Bar0.CMD, c);
      g.bar0Write32(Bar0.DONE, 0);
      g.bar0Write(Bar0.COMP, Buffer.alloc(16, 0xaa)); // comp is device-owned: stale bytes must be replaced
      expect(await g.bar0Read32(Bar0.DONE)).to.equal(0);
      g.bar0Write32(Bar0.DB, 1);
      // One read spanning done, cmd and comp: what the driver sees on its first poll.
      const r = await g.bar0Read(Bar0.DONE, Bar0.COMP + 16 - Bar0.DONE);
      expect(r.readUInt32LE(0)).to.equal(1);
      const comp = r.subarray(Bar0.COMP - Bar0.DONE);
      expect(comp[0]).to.equal(0);
      expect(comp[1]).to.equal(1);
      expect(comp.subarray(2).equals(Buffer.alloc(14))).to.equal(true);
      const data = await g.bar0Read(Bar0.DATA, Bar0.DATA_LEN);
      expect(data.readUInt32LE(LifId.qcount_txq)).to.equal(16);
      g.bar0Write32(Bar0.DB, 0);
      g.bar0Write(Bar0.CMD, Buffer.alloc(64));
    });

    it('accepts 1-, 2- and 4-byte register accesses: a command written byte by byte, q_identity read in 2-byte pieces', async () => {
      const c = command(Op.Q_IDENTIFY);
      c[4] = QT.TXQ;
      c[5] = 3;
      for (let i = 0; i < 64; i++) await g.client.regionWrite(Region.BAR0, Bar0.CMD + i, c.subarray(i, i + 1));
      g.bar0Write32(Bar0.DONE, 0);
      g.bar0Write(Bar0.DB, Buffer.from([1]));
      g.bar0Write(Bar0.DB + 1, Buffer.from([0, 0, 0]));
      expect(await g.bar0Read32(Bar0.DONE)).to.equal(1);
      expect((await g.bar0Read(Bar0.COMP, 1))[0]).to.equal(0);
      const sg = await g.bar0Read(Bar0.DATA + QId.sg_desc_sz, 2);
      expect(sg.readUInt16LE(0)).to.equal(256);
      const feat = await g.bar0Read(Bar0.DATA + QId.features, 8);
      expect(feat.readBigUInt64LE(0) & 3n).to.equal(3n);
      g.bar0Write32(Bar0.DB, 0);
    });

    it('PORT_INIT with info_pa above 4 GiB writes port_info there (52-bit addresses)', async () => {
      const pa = g.alloc(8192);
      expect(pa).to.be.above(2 ** 32);
      g.mem(pa, 8192).fill(0x5a);
      const c = command(Op.PORT_INIT);
      putU64(c, 8, pa);
      const r = await g.devCmd(c, { data: g.portIdentity.subarray(PortId.config, PortId.config + PortCfg.SIZE) });
      expect(r.status).to.equal(0);
      expect(g.mem(pa, PortInfo.SIZE).readUInt32LE(PortInfo.status_speed)).to.equal(100000);
      g.portInfoPa = pa;
    });
  });
});
