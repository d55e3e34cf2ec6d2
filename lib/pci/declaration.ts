// What a device declares to become a PCI function, and the check of it.
//
// A declaration is code, not input: a bad one throws at construction with a
// message naming the field, before QEMU can ever connect.

import type { DeviceContext, DmaRange, ResetReason } from '../vfio-user/device';
import type { BarSpec } from './bars';
import type { PcieLinkSpec } from './capabilities';
import { msixPbaSize, msixTableSize } from './msix';
import type { MsixSpec } from './msix';
import { PCI_LINK_WIDTHS, PCI_MSIX_MAX_VECTORS, PciLinkSpeed } from '../vfio-user/pci-registers';

export interface PciFunctionSpec {
  readonly vendorId: number;
  readonly deviceId: number;
  readonly subsystemVendorId: number;
  readonly subsystemId: number;
  /** 24 bits: base class << 16 | subclass << 8 | programming interface. */
  readonly classCode: number;
  readonly revision?: number;
  readonly bars: readonly BarSpec[];
  readonly msix?: MsixSpec;
  /** Declare INTA (interrupt pin 1). Default false. */
  readonly intx?: boolean;
  /** PCI Express link; omit for conventional PCI (256-byte config space, no PCIe capability). */
  readonly pcie?: PcieLinkSpec;
  /** Power Management capability. Default true. */
  readonly powerManagement?: boolean;
  /** DEVICE_RESET supported, and FLR advertised in DevCap. Default true. */
  readonly resetSupported?: boolean;

  /** After the function's own state was reset (config, MSI-X, INTx); not for 'lost-connection' state. */
  onReset?(reason: ResetReason): void;
  /** COMMAND changed (memory, bus master, INTx disable...): e.g. stop DMA when MASTER clears. */
  onCommandChange?(command: number, previous: number): void;
  onAttach?(ctx: DeviceContext): void;
  onDetach?(): void;
  onDmaMapped?(range: DmaRange): void;
  onDmaUnmapped?(range: DmaRange): void;
}

/** Throws on the first field that is out of range. BARs are checked by validateBars. */
export function validateIdentity(spec: PciFunctionSpec): void {
  checkUint('vendorId', spec.vendorId, 0xffff);
  if (spec.vendorId === 0xffff) throw new RangeError('vendorId 0xffff means "no device"');
  checkUint('deviceId', spec.deviceId, 0xffff);
  checkUint('subsystemVendorId', spec.subsystemVendorId, 0xffff);
  checkUint('subsystemId', spec.subsystemId, 0xffff);
  checkUint('classCode', spec.classCode, 0xff_ffff);
  checkUint('revision', spec.revision ?? 0, 0xff);
  const pcie = spec.pcie;
  if (pcie !== undefined) {
    if (
      !Number.isInteger(pcie.maxLinkSpeed) ||
      pcie.maxLinkSpeed < PciLinkSpeed.GT_2_5 ||
      pcie.maxLinkSpeed > PciLinkSpeed.GT_64_0
    ) {
      throw new RangeError(`pcie.maxLinkSpeed ${pcie.maxLinkSpeed}: must be 1..6`);
    }
    if (!PCI_LINK_WIDTHS.includes(pcie.maxLinkWidth)) {
      throw new RangeError(`pcie.maxLinkWidth ${pcie.maxLinkWidth}: must be one of ${PCI_LINK_WIDTHS.join(', ')}`);
    }
  }
}

/** MSI-X table and PBA must sit inside declared memory BARs, 8-byte aligned, not overlapping. */
export function validateMsix(msix: MsixSpec, slots: ReadonlyArray<BarSpec | undefined>): void {
  if (!Number.isInteger(msix.vectors) || msix.vectors < 1 || msix.vectors > PCI_MSIX_MAX_VECTORS) {
    throw new RangeError(`msix.vectors ${msix.vectors}: must be 1..${PCI_MSIX_MAX_VECTORS}`);
  }
  const table = { name: 'table', bar: msix.tableBar, offset: msix.tableOffset, size: msixTableSize(msix.vectors) };
  const pba = { name: 'PBA', bar: msix.pbaBar, offset: msix.pbaOffset, size: msixPbaSize(msix.vectors) };
  for (const s of [table, pba]) {
    const bar = Number.isInteger(s.bar) ? slots[s.bar] : undefined;
    if (bar === undefined) throw new RangeError(`msix ${s.name} BAR ${s.bar} is not a declared BAR`);
    if (bar.kind === 'io') throw new RangeError(`msix ${s.name} BAR ${s.bar} must be a memory BAR`);
    if (!Number.isInteger(s.offset) || s.offset < 0 || s.offset % 8 !== 0 || s.offset > 0xffff_fff8) {
      throw new RangeError(`msix ${s.name} offset ${s.offset}: must be an 8-byte aligned 32-bit offset`);
    }
    if (s.offset + s.size > bar.size) {
      throw new RangeError(`msix ${s.name} [${s.offset}, +${s.size}) does not fit BAR ${s.bar} (${bar.size} bytes)`);
    }
  }
  if (table.bar === pba.bar && table.offset < pba.offset + pba.size && pba.offset < table.offset + table.size) {
    throw new RangeError('msix table and PBA overlap');
  }
}

function checkUint(name: string, value: number, max: number): void {
  if (!Number.isInteger(value) || value < 0 || value > max) {
    throw new RangeError(`${name} ${value}: must be an integer 0..0x${max.toString(16)}`);
  }
}
