// A PCI function built from a declaration: the VfioUserDevice the server serves.
//
// The function owns config space, the BAR routing, MSI-X and INTx; the device
// built on it owns its registers (BarHandlers) and raises interrupts through
// raise/raiseMsix/intx. Everything the bus sends is checked and never throws;
// a bad declaration throws at construction.

import { IrqIndex, PciRegionIndex } from '../vfio-user/device';
import type {
  DeviceContext,
  DmaRange,
  IrqEvent,
  RegionHandler,
  ResetReason,
  VfioUserDevice,
} from '../vfio-user/device';
import { BarRegion, EMPTY_BAR_HANDLER } from './bar-region';
import type { BarWindow } from './bar-region';
import { barAddress, defineBarRegisters, validateBars } from './bars';
import type { BarSpec } from './bars';
import { acceptedPowerState, buildCapabilities } from './capabilities';
import type { CapabilityOffsets } from './capabilities';
import { ConfigSpace } from './config-space';
import { validateIdentity, validateMsix } from './declaration';
import type { PciFunctionSpec } from './declaration';
import { defineHeader } from './header';
import { Intx } from './intx';
import { MsixState, msixPbaSize, msixTableSize } from './msix';
import {
  PCI_NUM_BARS,
  PciCommand,
  PciConfigSize,
  PciExp,
  PciExpDevCtl,
  PciHeader,
  PciMsix,
  PciPm,
  PciPmCtrl,
  PciPowerState,
  PciStatus,
} from '../vfio-user/pci-registers';

export class PciFunction implements VfioUserDevice {
  readonly resetSupported: boolean;
  /** Config space (vfio region 7); exposed for tests and diagnostics. */
  readonly config: ConfigSpace;
  /** Offsets of the capabilities in config space (0 when absent). */
  readonly capabilities: CapabilityOffsets;
  /** Legacy interrupt line; inert when the declaration has no INTx. */
  readonly intx: Intx;
  /** MSI-X table, PBA and delivery; undefined without MSI-X. */
  readonly msix: MsixState | undefined;
  readonly #spec: PciFunctionSpec;
  readonly #bars: ReadonlyArray<BarSpec | undefined>;
  readonly #regions: ReadonlyArray<BarRegion | undefined>;
  #ctx: DeviceContext | undefined;

  constructor(spec: PciFunctionSpec) {
    validateIdentity(spec);
    const slots = validateBars(spec.bars);
    if (spec.msix !== undefined) validateMsix(spec.msix, slots);
    this.#spec = spec;
    this.#bars = slots;
    this.resetSupported = spec.resetSupported ?? true;

    const config = new ConfigSpace(spec.pcie !== undefined ? PciConfigSize.EXPRESS : PciConfigSize.CONVENTIONAL);
    this.config = config;
    const caps = buildCapabilities(config, {
      powerManagement: spec.powerManagement ?? true,
      ...(spec.msix !== undefined ? { msix: spec.msix } : {}),
      ...(spec.pcie !== undefined ? { pcie: spec.pcie } : {}),
      flr: this.resetSupported,
    });
    this.capabilities = caps;
    defineHeader(config, {
      vendorId: spec.vendorId,
      deviceId: spec.deviceId,
      subsystemVendorId: spec.subsystemVendorId,
      subsystemId: spec.subsystemId,
      classCode: spec.classCode,
      revision: spec.revision ?? 0,
      hasIoBar: slots.some((b) => b?.kind === 'io'),
      intx: spec.intx === true,
      express: spec.pcie !== undefined,
      firstCapability: caps.first,
    });
    defineBarRegisters(config, slots);

    this.msix = spec.msix !== undefined ? new MsixState(spec.msix.vectors) : undefined;
    this.intx = new Intx(spec.intx === true, (level) => {
      config.setBits(PciHeader.STATUS.offset, 2, PciStatus.INTERRUPT, level);
    });
    this.#regions = slots.map((bar) => (bar === undefined ? undefined : this.#barRegion(bar)));

    config.onWrite(PciHeader.COMMAND.offset, 2, (old, now) => this.#commandWritten(old, now));
    if (caps.msix !== 0) config.onWrite(caps.msix + PciMsix.FLAGS, 2, (_old, now) => this.#msixControlWritten(now));
    if (caps.pm !== 0) config.onWrite(caps.pm + PciPm.CTRL, 2, (old, now) => this.#pmcsrWritten(old, now));
    if (caps.pcie !== 0) config.onWrite(caps.pcie + PciExp.DEVCTL, 2, (_old, now) => this.#devCtlWritten(now));
  }

  // ---- VfioUserDevice ----

  region(index: number): RegionHandler | undefined {
    if (index === PciRegionIndex.CONFIG) return this.config;
    if (Number.isInteger(index) && index >= PciRegionIndex.BAR0 && index < PCI_NUM_BARS) return this.#regions[index];
    return undefined; // ROM, VGA and unknown indices: absent
  }

  irqCount(index: number): number {
    switch (index) {
      case IrqIndex.INTX:
        return this.intx.present ? 1 : 0;
      case IrqIndex.MSI:
        return 0;
      case IrqIndex.MSIX:
        return this.msix?.vectors ?? 0;
      case IrqIndex.ERR:
        return 1; // QEMU wires it at realize; we never signal it
      default:
        return 0;
    }
  }

  attach(ctx: DeviceContext): void {
    this.#ctx = ctx;
    this.msix?.attach(ctx);
    this.intx.attach(ctx);
    this.#spec.onAttach?.(ctx);
  }

  detach(): void {
    this.#ctx = undefined;
    this.msix?.detach();
    this.intx.detach();
    this.#spec.onDetach?.();
  }

  /**
   * 'device-reset' and 'flr' put config space, the MSI-X table and PBA and the
   * INTx level back to reset values (FLR keeps the link fields PCIe says it
   * must). 'lost-connection' keeps them: a new client reads config afresh.
   */
  reset(reason: ResetReason): void {
    if (reason !== 'lost-connection') {
      this.config.restore(reason === 'flr' ? 'flr' : 'full');
      this.msix?.reset();
      this.intx.reset();
      this.#syncFromConfig();
    }
    this.#spec.onReset?.(reason);
  }

  dmaMapped(range: DmaRange): void {
    this.#spec.onDmaMapped?.(range);
  }

  dmaUnmapped(range: DmaRange): void {
    this.#spec.onDmaUnmapped?.(range);
  }

  irqChanged(event: IrqEvent): void {
    const start = event.start;
    const count = event.count;
    if (!Number.isInteger(start) || !Number.isInteger(count) || start < 0 || count < 0) return;
    if (event.index === IrqIndex.MSIX && this.msix !== undefined) {
      if (event.kind === 'wired') this.msix.flushPending(start, count);
    } else if (event.index === IrqIndex.INTX && start === 0 && count >= 1) {
      // 'unmask' is QEMU's EOI/resample; 'wired' brings an eventfd for a level already high.
      if (event.kind === 'unmask' || event.kind === 'wired') this.intx.resample();
      // 'trigger' is informational: the server has already signalled the eventfds.
    }
  }

  // ---- for the device built on this function ----

  /** The attached client's context (guest memory, interrupts), or undefined between clients. */
  get context(): DeviceContext | undefined {
    return this.#ctx;
  }

  /** Signal MSI-X `vector` now, or latch it as pending. True when signalled now. */
  raiseMsix(vector: number): boolean {
    return this.msix?.raise(vector) ?? false;
  }

  /**
   * The usual device pattern: MSI-X when the driver enabled it, else assert
   * INTx (the device must call intx.deassert() once the cause is cleared).
   * Without INTx the vector is latched for when MSI-X gets enabled.
   */
  raise(vector: number): boolean {
    if (this.msixEnabled || !this.intx.present) return this.raiseMsix(vector);
    return this.intx.assert();
  }

  get command(): number {
    return this.config.u16(PciHeader.COMMAND.offset);
  }

  get busMasterEnabled(): boolean {
    return (this.command & PciCommand.MASTER) !== 0;
  }

  get memoryEnabled(): boolean {
    return (this.command & PciCommand.MEMORY) !== 0;
  }

  get ioEnabled(): boolean {
    return (this.command & PciCommand.IO) !== 0;
  }

  get msixEnabled(): boolean {
    return this.msix?.enabled ?? false;
  }

  /** PMCSR power state (PciPowerState); D0 without a PM capability. */
  get powerState(): number {
    if (this.capabilities.pm === 0) return PciPowerState.D0;
    return this.config.u16(this.capabilities.pm + PciPm.CTRL) & PciPmCtrl.STATE_MASK;
  }

  /** The address the OS assigned to BAR `index` (0 when unassigned), or undefined for no BAR there. */
  barAddress(index: number): number | undefined {
    const bar = Number.isInteger(index) ? this.#bars[index] : undefined;
    return bar === undefined ? undefined : barAddress(this.config, bar);
  }

  // ---- config side effects ----

  #commandWritten(old: number, now: number): void {
    this.#updateIntxGate();
    if (old !== now) this.#spec.onCommandChange?.(now, old);
  }

  #msixControlWritten(control: number): void {
    this.msix?.setControl(control);
    this.#updateIntxGate();
  }

  #pmcsrWritten(old: number, now: number): void {
    const requested = now & PciPmCtrl.STATE_MASK;
    const state = acceptedPowerState(old & PciPmCtrl.STATE_MASK, requested);
    if (state !== requested) {
      this.config.poke(this.capabilities.pm + PciPm.CTRL, 2, (now & ~PciPmCtrl.STATE_MASK) | state);
    }
  }

  #devCtlWritten(now: number): void {
    if ((now & PciExpDevCtl.BCR_FLR) === 0) return;
    // Initiate FLR always reads 0; the reset itself restores the rest of DevCtl.
    this.config.setBits(this.capabilities.pcie + PciExp.DEVCTL, 2, PciExpDevCtl.BCR_FLR, false);
    this.reset('flr');
  }

  #syncFromConfig(): void {
    if (this.msix !== undefined) this.msix.setControl(this.config.u16(this.capabilities.msix + PciMsix.FLAGS));
    this.#updateIntxGate();
  }

  #updateIntxGate(): void {
    this.intx.setGated((this.command & PciCommand.INTX_DISABLE) !== 0 || this.msixEnabled);
  }

  #barRegion(bar: BarSpec): BarRegion {
    const windows: BarWindow[] = [];
    const m = this.#spec.msix;
    if (m !== undefined && this.msix !== undefined) {
      if (m.tableBar === bar.index) {
        windows.push({ start: m.tableOffset, size: msixTableSize(m.vectors), handler: this.msix.tableHandler });
      }
      if (m.pbaBar === bar.index) {
        windows.push({ start: m.pbaOffset, size: msixPbaSize(m.vectors), handler: this.msix.pbaHandler });
      }
    }
    return new BarRegion(bar.size, bar.handler ?? EMPTY_BAR_HANDLER, windows);
  }
}
