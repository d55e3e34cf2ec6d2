// The ionic NIC the guest sees: a PCIe function (1dd8:1002) with BAR0 (the
// register window, then the MSI-X table and PBA) and BAR2 (doorbell pages),
// built from the PCI library, with the LIF, its queues and the wire behind it.
//
// BAR0 (ionic_regs.h): 0x0000 dev_info (read only), 0x0800 dev_cmd (doorbell,
// done, command, completion, data window at 0x888), 0x1000 intr_status
// (reads 0), 0x2000 intr_ctrl (32 bytes per vector). Device commands run
// synchronously inside the doorbell write. BAR2: 4 KiB pages, all alike; the
// byte offset in a page selects the queue type (8 bytes per type) and the
// 64-bit value carries qid, ring and producer index.

import type { Logger } from '../log';
import { nullLogger, RateLimiter, warnLimited } from '../log';
import { contain } from '../guard';
import { PciFunction } from '../pci';
import type { BarHandler } from '../pci/bars';
import type { PciLinkSpeedCode } from '../pci/registers';
import type { GuestMemory } from '../vfio-user/guest-memory';
import type { ResetReason } from '../vfio-user/device';
import { executeCommand, CommandContext } from './commands';
import {
  GUEST_PAGE_SIZE, IONIC_CLASS_ETHERNET, IONIC_DEV_INFO_SIGNATURE, IONIC_DEVICE_ID_ETH_PF, IONIC_FW_STS_RUNNING,
  IONIC_SUBSYSTEM_ID, IONIC_VENDOR_ID, QType,
} from './constants';
import { FaultInjector } from './fault-injection';
import type { FrameEndpoint, HostLink } from './frames';
import { InterruptController } from './interrupts';
import { bar0 as B0, ionic_dev_cmd_regs as DC, ionic_dev_info_regs as DI, ionic_doorbell as DB, getField, setField } from './layouts';
import { Lif } from './lif';
import type { NicProfile } from './profile';
import { RdmaEngine } from './rdma/engine';
import { installRdmaBackend, RdmaBackendName } from '../rdma/backends';
import { rdmaEnabled } from './rdma/identity';
import { DeviceStats } from './stats';

export const BAR2_SIZE = 4 << 20;

export interface IonicDeviceOptions {
  readonly profile: NicProfile;
  /** Station MAC (6 bytes). */
  readonly mac: Buffer;
  readonly link?: HostLink | null;
  readonly faults?: FaultInjector;
  readonly log?: Logger;
  /** What executes RDMA work (lib/rdma/backends.ts); default loopback. */
  readonly rdmaBackend?: RdmaBackendName;
}

/** The device counters the stats file and tests read. */
export interface DeviceCounters {
  bar0Reads: number;
  bar0Writes: number;
  doorbells: number;
  devCmds: number;
  resets: number;
}

/** PCIe generation a NIC of this speed sits on (what lspci shows). */
function pcieSpeedFor(linkMbps: number): PciLinkSpeedCode {
  return linkMbps >= 400000 ? 5 : linkMbps >= 100000 ? 4 : 3;
}

export class IonicDevice {
  readonly pci: PciFunction;
  readonly profile: NicProfile;
  readonly interrupts: InterruptController;
  readonly lif: Lif;
  /** The RDMA half (bootstrap, admin queues, resources), or null for an Ethernet-only profile. */
  readonly rdma: RdmaEngine | null;
  readonly stats: DeviceStats;
  readonly faults: FaultInjector;
  readonly counters: DeviceCounters = { bar0Reads: 0, bar0Writes: 0, doorbells: 0, devCmds: 0, resets: 0 };
  readonly commandCounts = new Map<number, number>();
  readonly #log: Logger;
  readonly #limiter = new RateLimiter();
  readonly #devInfo = Buffer.alloc(DI.SIZE);
  readonly #devCmd = Buffer.alloc(DC.SIZE);
  /** Low halves of doorbells written as two 32-bit writes, per queue type slot. */
  readonly #dbLow = new Map<number, number>();
  readonly #link: HostLink | null;
  readonly #ctx: CommandContext;
  /** The configured station MAC, restored on RESET and disconnect. */
  readonly #stationMac: Buffer;

  constructor(opts: IonicDeviceOptions) {
    this.profile = opts.profile;
    this.#log = opts.log ?? nullLogger;
    this.faults = opts.faults ?? FaultInjector.none();
    this.#link = opts.link ?? null;
    this.#stationMac = Buffer.from(opts.mac);
    const memory = (): GuestMemory | undefined => this.pci.context?.memory;
    this.stats = new DeviceStats(opts.profile.statsIntervalMs, memory, this.#log);
    this.interrupts = new InterruptController(opts.profile.msixVectors, { fire: (v) => { this.pci.raiseMsix(v); } });
    const self = this;
    this.lif = new Lif({
      memory, interrupts: this.interrupts, stats: this.stats, faults: this.faults, log: this.#log,
      execute(cmd, comp) { executeCommand(self.#ctx, cmd, comp, null); },
    }, opts.profile.ethQueues, opts.mac);
    this.rdma = rdmaEnabled(opts.profile)
      ? new RdmaEngine({ profile: opts.profile, memory, interrupts: this.interrupts, faults: this.faults, log: this.#log })
      : null;
    if (this.rdma) installRdmaBackend(opts.rdmaBackend ?? 'loopback', this.rdma);
    this.#ctx = {
      profile: this.profile, lif: this.lif, stats: this.stats, interrupts: this.interrupts, log: this.#log, memory,
      counts: this.commandCounts, rdma: this.rdma,
      resetDevice: () => this.#resetState(),
    };
    this.#buildDevInfo();
    const bar0: BarHandler = { read: (o, d) => this.#bar0Read(o, d), write: (o, s) => this.#bar0Write(o, s) };
    const bar2: BarHandler = { read: (_o, d) => { d.fill(0); return 0; }, write: (o, s) => this.#doorbellWrite(o, s) };
    this.pci = new PciFunction({
      vendorId: IONIC_VENDOR_ID, deviceId: IONIC_DEVICE_ID_ETH_PF,
      subsystemVendorId: IONIC_VENDOR_ID, subsystemId: IONIC_SUBSYSTEM_ID,
      classCode: IONIC_CLASS_ETHERNET, revision: opts.profile.asicRev,
      bars: [
        { index: 0, size: B0.SIZE, kind: 'mem64', handler: bar0 },
        { index: 2, size: BAR2_SIZE, kind: 'mem64', handler: bar2 },
      ],
      msix: { vectors: opts.profile.msixVectors, tableBar: 0, tableOffset: B0.MSIX_TABLE, pbaBar: 0, pbaOffset: B0.MSIX_PBA },
      intx: true,
      pcie: { maxLinkSpeed: pcieSpeedFor(opts.profile.linkSpeedMbps), maxLinkWidth: 16 },
      onReset: (reason: ResetReason) => this.#onPciReset(reason),
      onDetach: () => this.#onDetach(),
    });
    // A frame from the host arrives on its own event; a bug in receiving it costs the frame.
    this.#link?.start((frame) => { contain(this.#log, 'ionic RX from the host link', () => this.lif.receive(frame)); });
    this.lif.link = this.#link;
  }

  /** In-process endpoints on the segment (S3 store, P4 engine). */
  addEndpoint(e: FrameEndpoint): void {
    this.lif.endpoints.push(e);
  }

  close(): void {
    this.#link?.close();
    this.stats.stop('both');
  }

  // ---- BAR0 ------------------------------------------------------------------------------

  #buildDevInfo(): void {
    const d = this.#devInfo;
    const p = this.profile;
    setField(d, 0, DI.signature, IONIC_DEV_INFO_SIGNATURE);
    setField(d, 0, DI.version, 1);
    setField(d, 0, DI.asic_type, p.asicType);
    setField(d, 0, DI.asic_rev, p.asicRev);
    // RUNNING with a generation that never changes (a change means "firmware restarted").
    setField(d, 0, DI.fw_status, IONIC_FW_STS_RUNNING);
    // A heartbeat of 0 is accepted forever; a frozen non-zero one is not.
    setField(d, 0, DI.fw_heartbeat, 0);
    d.write(p.firmwareVersion.slice(0, DI.STRING_SIZE - 1), DI.FW_VERSION, 'latin1');
    d.write(p.serialNumber.slice(0, DI.STRING_SIZE - 1), DI.SERIAL_NUM, 'latin1');
  }

  #bar0Read(offset: number, dst: Buffer): number {
    this.counters.bar0Reads++;
    for (let i = 0; i < dst.length;) {
      const at = offset + i;
      if (at < B0.DEV_CMD) { dst[i] = this.#devInfo[at]!; i++; continue; }
      if (at < B0.DEV_CMD + DC.SIZE) { dst[i] = this.#devCmd[at - B0.DEV_CMD]!; i++; continue; }
      if (at >= B0.INTR_CTRL && at < B0.INTR_CTRL + this.interrupts.vectors * 32) {
        const rel = at - B0.INTR_CTRL;
        const word = this.interrupts.read32(rel & ~3);
        dst[i] = (word >>> ((rel & 3) * 8)) & 0xff;
        i++;
        continue;
      }
      dst[i] = 0;
      i++;
    }
    return 0;
  }

  #bar0Write(offset: number, src: Buffer): number {
    this.counters.bar0Writes++;
    const end = offset + src.length;
    // Device-command registers: store, then run the command if the doorbell now says 1.
    if (offset < B0.DEV_CMD + DC.SIZE && end > B0.DEV_CMD) {
      const from = Math.max(offset, B0.DEV_CMD);
      const to = Math.min(end, B0.DEV_CMD + DC.SIZE);
      src.copy(this.#devCmd, from - B0.DEV_CMD, from - offset, to - offset);
      const db = B0.DEV_CMD + DC.doorbell.off;
      if (from <= db && to > db && getField(this.#devCmd, 0, DC.doorbell) === 1) this.#runDevCmd();
      return 0;
    }
    const intrEnd = B0.INTR_CTRL + this.interrupts.vectors * 32;
    if (offset >= B0.INTR_CTRL && end <= intrEnd) {
      // Registers are 32 bits; a narrower or unaligned write updates the bytes it covers.
      for (let at = offset & ~3; at < end; at += 4) {
        const rel = at - B0.INTR_CTRL;
        let word = this.interrupts.read32(rel);
        for (let b = 0; b < 4; b++) {
          const k = at + b - offset;
          if (k >= 0 && k < src.length) word = (word & ~(0xff << (b * 8))) | (src[k]! << (b * 8));
        }
        this.interrupts.write32(rel, word >>> 0);
      }
      return 0;
    }
    // dev_info is read-only; everything else in the window is reserved.
    return 0;
  }

  #runDevCmd(): void {
    this.counters.devCmds++;
    const d = this.#devCmd;
    setField(d, 0, DC.done, 0);
    const cmd = d.subarray(DC.CMD, DC.CMD + DC.CMD_SIZE);
    const comp = d.subarray(DC.COMP, DC.COMP + DC.COMP_SIZE);
    comp.fill(0);
    executeCommand(this.#ctx, Buffer.from(cmd), comp, d.subarray(DC.DATA, DC.DATA + DC.DATA_SIZE));
    // done only after the completion and the data are final.
    setField(d, 0, DC.done, 1);
  }

  // ---- doorbells (BAR2) --------------------------------------------------------------------

  #doorbellWrite(offset: number, src: Buffer): number {
    const inPage = offset % GUEST_PAGE_SIZE;
    const slot = Math.floor(inPage / DB.SIZE);
    // Split writes are paired per doorbell address (page and slot), low half first.
    const key = offset - (offset % DB.SIZE);
    if (src.length === 8 && inPage % 8 === 0) {
      this.#doorbell(slot, src.readUInt32LE(0), src.readUInt32LE(4));
    } else if (src.length === 4 && inPage % 8 === 0) {
      // Bounded: a guest writing only low halves cannot grow this table.
      if (this.#dbLow.size >= 1024) this.#dbLow.clear();
      this.#dbLow.set(key, src.readUInt32LE(0));
    } else if (src.length === 4 && inPage % 8 === 4) {
      const lo = this.#dbLow.get(key);
      if (lo !== undefined) {
        this.#dbLow.delete(key);
        this.#doorbell(slot, lo, src.readUInt32LE(0));
      }
    } else {
      warnLimited(this.#log, this.#limiter, 'db-width', `ionic: doorbell write of ${src.length} bytes at 0x${offset.toString(16)} ignored`);
    }
    return 0;
  }

  /** value = qid << 24 | ring << 16 | p_index, written at 8 * hw_type. */
  #doorbell(hwType: number, lo: number, hi: number): void {
    this.counters.doorbells++;
    const pIndex = lo & 0xffff;
    const qid = (lo >>> 24) | ((hi & 0xffff) << 8);
    switch (hwType) {
      case QType.ADMINQ: if (qid === 0) this.lif.adminDoorbell(pIndex); return;
      case QType.TXQ: this.lif.txDoorbell(qid, pIndex); return;
      case QType.RXQ: this.lif.rxDoorbell(qid, pIndex); return;
      default:
        // NotifyQ is never rung; the RDMA types (RdmaQType, 5..9) go to the RDMA engine.
        if (hwType > QType.EQ) this.rdma?.doorbell(hwType, qid, (lo >>> 16) & 0x7, pIndex);
        return;
    }
  }

  // ---- resets ---------------------------------------------------------------------------------

  #resetState(): void {
    this.counters.resets++;
    this.lif.reset();
    // Fix: RESET brings back the station MAC; a MAC the last driver set with
    // LIF_SETATTR must not outlive it (the next probe reads it with LIF_GETATTR).
    this.lif.mac = Buffer.from(this.#stationMac);
    this.stats.stop('both');
    this.stats.clear('all');
    this.interrupts.reset();
    this.#dbLow.clear();
    this.rdma?.reset();
  }

  #onPciReset(reason: ResetReason): void {
    if (reason === 'lost-connection') return;
    this.#resetState();
    this.#devCmd.fill(0);
  }

  #onDetach(): void {
    // The guest's memory is gone: stop every queue and block write; the next driver re-probes.
    this.lif.reset();
    this.lif.mac = Buffer.from(this.#stationMac); // fix: a new VM starts with the configured MAC
    this.stats.stop('both');
    this.interrupts.reset();
    this.rdma?.reset();
  }
}
