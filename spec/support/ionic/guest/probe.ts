// Probe as ionic.ko does it (docs/driver-contract.md, ionic Ethernet E2.3): identify, reset, init, port and
// LIF setup, the admin and notify queues, features, MAC and filters; then the
// LIF commands a running driver sends and the lif_info / port_info blocks.

import { GuestCommands } from './commands';
import { command, putU64, u64 } from './bytes';
import type { AdminCompletion, AdminQ } from './types';
import {
  ADMINQ_LENGTH,
  Attr,
  Bar0,
  Cfg,
  DevId,
  DRIVER_FEATURES,
  Feature,
  FW_RUNNING,
  LifId,
  LifInfo,
  LifStatName,
  LifStats,
  Match,
  Op,
  PAGE,
  PortCfg,
  PortId,
  PortInfo,
  QF,
  QId,
  QT,
  RxMode,
  SIGNATURE_DEVI,
  St,
} from '../regs';

/** Statuses the driver maps to -EINVAL (a Q_IDENTIFY with one of them skips that type). */
const EINVAL_LIKE: ReadonlySet<number> = new Set([St.EINVAL, St.EVERSION, St.EQTYPE, St.EQID]);

/** ionic_probe and the LIF commands a probed driver issues (MAC, RX mode, filters, queue control, stats). */
export abstract class GuestProbe extends GuestCommands {
  // identity
  devInfo: Buffer = Buffer.alloc(0);
  devIdentity: Buffer = Buffer.alloc(0);
  lifIdentity: Buffer = Buffer.alloc(0);
  portIdentity: Buffer = Buffer.alloc(0);
  readonly qIdentity: (Buffer | null)[] = [null, null, null, null];
  mac: Buffer = Buffer.alloc(6);
  features = 0;
  lifHwIndex = -1;
  carrier = false;
  macFilterId = -1;

  lifInfoPa = 0;
  portInfoPa = 0;

  // ---- probe ---------------------------------------------------------------------------------

  /** ionic_probe through a netdev with carrier, in the order of ionic Ethernet E2.3. */
  async probe(opts: { rxMode?: number } = {}): Promise<void> {
    // 1. ionic_dev_setup
    const regs = this.bars[0];
    if (!regs || regs.size < Bar0.MIN_SIZE) throw new Error('probe: Resource bar size too small');
    if (!this.bars[1]) throw new Error('probe: Doorbell bar missing');
    this.devInfo = await this.bar0Read(0, Bar0.SERIAL + Bar0.STRING_LEN);
    if (this.devInfo.readUInt32LE(Bar0.SIGNATURE) !== SIGNATURE_DEVI)
      throw new Error('probe: Incompatible firmware signature');
    const fw = this.devInfo[Bar0.FW_STATUS]!;
    if (fw === 0xff || !(fw & FW_RUNNING)) throw new Error('probe: firmware not running');

    // 2. RESET, then bus mastering.
    await this.devCmdOk('reset', command(Op.RESET));
    const pcicmd = (await this.configRead(Cfg.COMMAND, 2)).readUInt16LE(0);
    await this.configWrite16(Cfg.COMMAND, pcicmd | Cfg.CMD_MASTER);

    // 3. IDENTIFY with drv_identity in the window.
    const drv = Buffer.alloc(Bar0.DATA_LEN);
    drv.writeUInt32LE(1, 0); // os_type LINUX
    drv.writeUInt32LE(0, 4);
    drv.write('Debian GNU/Linux 13', 8, 'latin1');
    drv.writeUInt32LE(0x060c00, 136);
    drv.write('6.12.0-ernic-test', 140, 'latin1');
    drv.write('6.12.0-ernic-test', 172, 'latin1');
    const ident = command(Op.IDENTIFY);
    ident[1] = 2; // ver
    this.devIdentity = (await this.devCmdOk('identify', ident, { data: drv, readData: true })).data!;

    // 4. LIF_IDENTIFY, type CLASSIC, ver 1.
    this.lifIdentity = await this.#lifIdentify('lif_identify');

    // 6. INIT
    await this.devCmdOk('init', command(Op.INIT));

    // 7. PORT_IDENTIFY
    this.portIdentity = await this.#portIdentify('port_identify');

    // 8. PORT_INIT with the identity's config in the window.
    this.portInfoPa = this.alloc(Math.ceil(PortInfo.SIZE / PAGE) * PAGE);
    const pinit = command(Op.PORT_INIT);
    pinit[1] = 0;
    putU64(pinit, 8, this.portInfoPa);
    await this.devCmdOk('port_init', pinit, {
      data: this.portIdentity.subarray(PortId.config, PortId.config + PortCfg.SIZE),
    });

    // 9. PORT_SETATTR STATE = UP; its error is ignored.
    const pset = command(Op.PORT_SETATTR);
    pset[1] = 0;
    pset[2] = 0; // attr STATE
    pset[4] = 2; // UP
    this.probeComps.set('port_setattr', (await this.devCmd(pset)).comp);

    // 11. LIF allocation: LIF_IDENTIFY again, then Q_IDENTIFY for the four types.
    this.lifIdentity = await this.#lifIdentify('lif_identify2');
    const qver = [0, 0, 2, 3];
    for (let type = 0; type < 4; type++) {
      const c = command(Op.Q_IDENTIFY);
      c.writeUInt16LE(0, 2); // lif_type
      c[4] = type;
      c[5] = qver[type]!;
      const r = await this.devCmd(c, { readData: true });
      this.probeComps.set(`q_identify${type}`, r.comp);
      if (r.status === St.SUCCESS) {
        this.qIdentity[type] = r.data!;
        continue;
      }
      if (EINVAL_LIKE.has(r.status)) continue; // -EINVAL: skip the type
      break; // anything else: abandon the rest
    }
    const rssSize = this.lifIdentity.readUInt16LE(LifId.rss_ind_tbl_sz);
    if (rssSize === 0) throw new Error('probe: rss_ind_tbl_sz is 0 (RSS table allocation fails)');
    const aq: AdminQ = {
      ring: this.alloc(ADMINQ_LENGTH * 64),
      cq: this.alloc(ADMINQ_LENGTH * 16),
      head: 0,
      tail: 0,
      cqTail: 0,
      doneColor: 1,
      hwType: -1,
      hwIndex: -1,
      waiters: new Map(),
    };
    const nqBase = this.alloc(2 * PAGE);
    await this.intrClean(0);
    this.setMaskAssert(0, 1);
    this.alloc(rssSize);

    // 12. LIF_INIT, doorbell page, AdminQ through devcmd.
    this.lifInfoPa = this.alloc(PAGE);
    const linit = command(Op.LIF_INIT);
    linit[1] = 0;
    linit.writeUInt16LE(0, 2);
    putU64(linit, 8, this.lifInfoPa);
    const lr = await this.devCmdOk('lif_init', linit);
    this.lifHwIndex = lr.comp.readUInt16LE(2);
    const ndbpgs = this.devIdentity.readUInt32LE(DevId.ndbpgs_per_lif);
    if (ndbpgs === 0) throw new Error('probe: No doorbell pages');
    this.dbPage = (this.lifHwIndex * ndbpgs + 0) * PAGE;
    if (this.dbPage + PAGE > this.bars[1]!.size) throw new Error('probe: doorbell page outside the doorbell BAR');

    const aqInit = this.qInitCmd(
      QT.ADMINQ,
      this.qIdentity[QT.ADMINQ]?.[QId.version] ?? 0,
      0,
      0,
      QF.IRQ | QF.ENA,
      4,
      aq.ring,
      aq.cq,
      0,
    );
    const ar = await this.devCmdOk('q_init_adminq', aqInit);
    aq.hwIndex = ar.comp.readUInt32LE(4);
    aq.hwType = ar.comp[8]!;
    this.adminq = aq;
    this.setMask(0, 0);

    // From here on, the AdminQ.
    const nqInit = this.qInitCmd(
      QT.NOTIFYQ,
      this.qIdentity[QT.NOTIFYQ]?.[QId.version] ?? 0,
      0,
      0,
      QF.IRQ | QF.ENA,
      6,
      nqBase,
      0,
      0,
    );
    const nr = await this.adminOk('q_init_notifyq', nqInit);
    this.notifyq = {
      base: nqBase,
      events: nqBase + PAGE,
      lastEid: 0n,
      tail: 0,
      hwIndex: nr.comp.readUInt32LE(4),
      hwType: nr.comp[8]!,
    };

    const fset = command(Op.LIF_SETATTR);
    fset[1] = Attr.FEATURES;
    putU64(fset, 4, DRIVER_FEATURES);
    const fr = await this.adminOk('lif_setattr_features', fset);
    this.features = Number(BigInt(DRIVER_FEATURES) & fr.comp.readBigUInt64LE(4));
    if (this.features & Feature.RX_HASH) {
      const rss = command(Op.LIF_SETATTR);
      rss[1] = Attr.RSS;
      await this.adminOk('lif_setattr_rss', rss);
    }

    this.mac = await this.getMac();
    if (this.mac.every((b) => b === 0)) {
      const mac = Buffer.from([0x02, 0x11, 0x22, 0x33, 0x44, 0x55]);
      const mset = command(Op.LIF_SETATTR);
      mset[1] = Attr.MAC;
      mac.copy(mset, 4);
      await this.adminOk('lif_setattr_mac', mset);
      this.mac = await this.getMac();
    }
    this.macFilterId = await this.addMacFilter(this.mac);

    // 13. Register the netdev: link check from lif_info, then PORT_IDENTIFY and the name.
    const status = this.lifInfo();
    if (status.readUInt16LE(LifInfo.link_status) === 1) {
      await this.#portIdentify('port_identify_link');
      this.carrier = true;
    }
    const nset = command(Op.LIF_SETATTR);
    nset[1] = Attr.NAME;
    nset.write('eth0', 4, 'latin1');
    await this.adminOk('lif_setattr_name', nset);

    await this.setRxMode(opts.rxMode ?? RxMode.UNICAST | RxMode.MULTICAST | RxMode.BROADCAST);
  }

  async #lifIdentify(step: string): Promise<Buffer> {
    const c = command(Op.LIF_IDENTIFY);
    c[1] = 0; // CLASSIC
    c[2] = 1; // ver
    return (await this.devCmdOk(step, c, { readData: true })).data!;
  }

  async #portIdentify(step: string): Promise<Buffer> {
    const c = command(Op.PORT_IDENTIFY);
    c[1] = 0;
    c[2] = 0;
    return (await this.devCmdOk(step, c, { readData: true })).data!;
  }

  qInitCmd(
    type: number,
    ver: number,
    index: number,
    intr: number,
    flags: number,
    ringLog2: number,
    ring: number,
    cq: number,
    sg: number,
  ): Buffer {
    const c = command(Op.Q_INIT);
    c.writeUInt16LE(0, 2); // lif_index
    c[4] = type;
    c[5] = ver;
    c.writeUInt32LE(index, 8);
    c.writeUInt16LE(0, 12); // pid
    c.writeUInt16LE(intr, 14);
    c.writeUInt16LE(flags, 16);
    c[18] = 0; // cos
    c[19] = ringLog2;
    putU64(c, 20, ring);
    putU64(c, 28, cq);
    putU64(c, 36, sg);
    return c;
  }

  /** Q_INIT through the admin queue with every field given (refusal tests). */
  qInit(f: {
    type: number;
    ver?: number;
    index: number;
    intr?: number;
    flags?: number;
    ringLog2: number;
    ring: number;
    cq?: number;
    sg?: number;
  }): Promise<AdminCompletion> {
    return this.adminCmd(
      this.qInitCmd(
        f.type,
        f.ver ?? 0,
        f.index,
        f.intr ?? 0,
        f.flags ?? QF.IRQ,
        f.ringLog2,
        f.ring,
        f.cq ?? 0,
        f.sg ?? 0,
      ),
    );
  }

  async getMac(): Promise<Buffer> {
    const c = command(Op.LIF_GETATTR);
    c[1] = Attr.MAC;
    const r = await this.adminOk('lif_getattr_mac', c);
    return Buffer.from(r.comp.subarray(4, 10));
  }

  async setRxMode(mode: number): Promise<void> {
    const c = command(Op.RX_MODE_SET);
    c.writeUInt16LE(mode, 4);
    await this.adminOk('rx_mode_set', c);
  }

  /** RX_FILTER_ADD match MAC; returns the filter id. */
  async addMacFilter(mac: Buffer): Promise<number> {
    const c = command(Op.RX_FILTER_ADD);
    c[1] = QT.RXQ;
    c.writeUInt32LE(0, 4);
    c.writeUInt16LE(Match.MAC, 8);
    mac.copy(c, 10, 0, 6);
    const r = await this.adminOk('rx_filter_add', c);
    return r.comp.readUInt32LE(4);
  }

  async delFilter(id: number): Promise<number> {
    const c = command(Op.RX_FILTER_DEL);
    c.writeUInt32LE(id, 4);
    return (await this.adminCmd(c)).status;
  }

  async qControl(type: number, index: number, oper: number): Promise<number> {
    const c = command(Op.Q_CONTROL);
    c[1] = type;
    c.writeUInt32LE(index, 4);
    c[8] = oper;
    return (await this.adminCmd(c)).status;
  }

  /** The lif_info block as the device last wrote it. */
  lifInfo(): Buffer {
    return this.mem(this.lifInfoPa, LifInfo.SIZE);
  }

  portInfo(): Buffer {
    return this.mem(this.portInfoPa, PortInfo.SIZE);
  }

  lifStat(name: LifStatName): number {
    return u64(this.lifInfo(), LifInfo.stats + LifStats[name]);
  }

  portStat(offset: number): number {
    return u64(this.portInfo(), offset);
  }
}
