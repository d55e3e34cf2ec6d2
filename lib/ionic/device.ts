// The ionic NIC the guest sees: a PCIe function (1dd8:1002) with BAR0 (the
// register window, then the MSI-X table and PBA: lib/ionic/bar0.ts) and BAR2
// (doorbell pages: lib/ionic/doorbells.ts), built from the PCI library, with
// the LIF, its queues and the wire behind it.

import type { Logger } from '../log';
import { nullLogger } from '../log';
import { contain } from '../guard';
import { PciFunction, type PciLinkSpeedCode } from '../pci';
import type { GuestMemory } from '../vfio-user/guest-memory';
import type { ResetReason } from '../vfio-user/device';
import { Bar0Counters, Bar0Registers, BAR0_INDEX, bar0Msix } from './bar0';
import { executeCommand, CommandContext, P4DeviceControl } from './commands';
import { IONIC_CLASS_ETHERNET, IONIC_DEVICE_ID_ETH_PF, IONIC_SUBSYSTEM_ID, IONIC_VENDOR_ID } from './constants';
import { BAR2_INDEX, BAR2_SIZE, DoorbellBar, DoorbellCounters } from './doorbells';
import { FaultInjector } from './fault-injection';
import type { FrameEndpoint, HostLink } from '../net/frame-endpoint';
import { InterruptController } from './interrupts';
import { bar0 } from './layouts';
import { Lif } from './lif';
import type { NicProfile } from './profile';
import { RdmaEngine } from './rdma/engine';
import type { RdmaBackend } from '../rdma/backend';
import { installWqeExecutor } from '../rdma/executor';
import { rdmaEnabled } from './rdma/identity';
import { DeviceStats } from './stats';

export interface IonicDeviceOptions {
  readonly profile: NicProfile;
  /** Station MAC (6 bytes). */
  readonly mac: Buffer;
  readonly link?: HostLink | null;
  readonly faults?: FaultInjector;
  readonly log?: Logger;
  /** What executes RDMA work (lib/backends/ builds them); default: the WQE executor alone (loopback). */
  readonly rdmaBackend?: RdmaBackend;
}

/** The device counters the stats file and tests read. */
export interface DeviceCounters extends Bar0Counters, DoorbellCounters {
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
  /** What executes RDMA work, plugged into `rdma` and the segment when the device was built (null: the executor alone). */
  readonly backend: RdmaBackend | null;
  readonly stats: DeviceStats;
  readonly faults: FaultInjector;
  readonly counters: DeviceCounters = { bar0Reads: 0, bar0Writes: 0, doorbells: 0, devCmds: 0, resets: 0 };
  readonly commandCounts = new Map<number, number>();
  readonly #log: Logger;
  readonly #bar0: Bar0Registers;
  readonly #doorbells: DoorbellBar;
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
    this.interrupts = new InterruptController(opts.profile.msixVectors, {
      fire: (v) => {
        this.pci.raiseMsix(v);
      },
    });
    const self = this;
    this.lif = new Lif(
      {
        memory,
        interrupts: this.interrupts,
        stats: this.stats,
        faults: this.faults,
        log: this.#log,
        execute(cmd, comp) {
          executeCommand(self.#ctx, cmd, comp, null);
        },
      },
      opts.profile.ethQueues,
      opts.mac,
    );
    this.rdma = rdmaEnabled(opts.profile)
      ? new RdmaEngine({
          profile: opts.profile,
          memory,
          interrupts: this.interrupts,
          faults: this.faults,
          log: this.#log,
        })
      : null;
    // The backend's hosts on the segment come before any added later (a P4 segment).
    this.backend = opts.rdmaBackend ?? null;
    if (this.backend) {
      this.backend.attach(this.rdma, {
        send: (frame, l3Sum) => this.lif.sendToGuest(frame, l3Sum),
        addEndpoint: (e) => {
          this.lif.endpoints.push(e);
        },
        sendToHost: (frame, len, offload) => {
          const link = this.#link;
          if (!link) return false;
          const f = len === frame.length ? frame : frame.subarray(0, len);
          return offload && link.uso ? link.send(f, offload) : link.send(f);
        },
        hostTakesUdpGso: () => this.#link?.uso === true,
      });
    } else if (this.rdma) installWqeExecutor(this.rdma);
    this.#ctx = {
      profile: this.profile,
      lif: this.lif,
      stats: this.stats,
      interrupts: this.interrupts,
      log: this.#log,
      memory,
      counts: this.commandCounts,
      rdma: this.rdma,
      p4: null,
      resetDevice: () => this.#resetState(),
    };
    this.#bar0 = new Bar0Registers({
      profile: this.profile,
      interrupts: this.interrupts,
      counters: this.counters,
      commands: this.#ctx,
    });
    this.#doorbells = new DoorbellBar({ lif: this.lif, rdma: this.rdma, counters: this.counters, log: this.#log });
    this.pci = new PciFunction({
      vendorId: IONIC_VENDOR_ID,
      deviceId: IONIC_DEVICE_ID_ETH_PF,
      subsystemVendorId: IONIC_VENDOR_ID,
      subsystemId: IONIC_SUBSYSTEM_ID,
      classCode: IONIC_CLASS_ETHERNET,
      revision: opts.profile.asicRev,
      bars: [
        { index: BAR0_INDEX, size: bar0.SIZE, kind: 'mem64', handler: this.#bar0 },
        { index: BAR2_INDEX, size: BAR2_SIZE, kind: 'mem64', handler: this.#doorbells },
      ],
      msix: bar0Msix(opts.profile.msixVectors),
      intx: true,
      pcie: { maxLinkSpeed: pcieSpeedFor(opts.profile.linkSpeedMbps), maxLinkWidth: 16 },
      onReset: (reason: ResetReason) => this.#onPciReset(reason),
      onAttach: () => {
        this.backend?.consumerPresent?.(true);
      },
      onDetach: () => this.#onDetach(),
    });
    // A frame from the host arrives on its own event; a bug in receiving it costs the frame.
    this.#link?.start((frame, offload) => {
      contain(this.#log, 'ionic RX from the host link', () => this.lif.receive(frame, offload ?? null));
    });
    this.lif.link = this.#link;
  }

  /** The P4 engine's device commands 70-72 (lib/p4/device/attach.ts); without it they are unknown opcodes. */
  setP4Control(c: P4DeviceControl | null): void {
    this.#ctx.p4 = c;
  }

  /** In-process endpoints on the segment (S3 store, P4 engine). */
  addEndpoint(e: FrameEndpoint): void {
    this.lif.endpoints.push(e);
  }

  close(): void {
    this.#link?.close();
    this.stats.stop('both');
  }

  // ---- resets ---------------------------------------------------------------------------------

  #resetState(): void {
    this.counters.resets++;
    this.lif.reset();
    // RESET brings back the station MAC; a MAC the last driver set with
    // LIF_SETATTR must not outlive it (the next probe reads it with LIF_GETATTR).
    this.lif.mac = Buffer.from(this.#stationMac);
    this.stats.stop('both');
    this.stats.clear('all');
    this.interrupts.reset();
    this.#doorbells.reset();
    this.rdma?.reset();
  }

  #onPciReset(reason: ResetReason): void {
    if (reason === 'lost-connection') return;
    this.#resetState();
    this.#bar0.resetDevCmd();
  }

  #onDetach(): void {
    this.backend?.consumerPresent?.(false);
    // The guest's memory is gone: stop every queue and block write; the next driver re-probes.
    this.lif.reset();
    this.lif.mac = Buffer.from(this.#stationMac); // a new VM starts with the configured MAC
    this.stats.stop('both');
    this.interrupts.reset();
    this.rdma?.reset();
  }
}
