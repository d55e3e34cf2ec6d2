// The type-0 configuration header, minus the BARs (bars.ts).
//
// Identity fields are read-only. The writable fields are the ones QEMU and the
// guest read back from us (docs/vfio-user-protocol.md 3.5): COMMAND bits, the
// interrupt line, cache line size and, on conventional PCI, the latency timer
// (PCIe hardwires it to 0). STATUS error bits are W1C; STATUS.INTERRUPT is
// owned by the INTx model.

import type { ConfigSpace } from './config-space';
import {
  PCI_STATUS_ERROR_BITS,
  PciCommand,
  PciHeader,
  PciHeaderType,
  PciInterruptPin,
  PciStatus,
} from '../vfio-user/pci-registers';

interface HeaderOptions {
  readonly vendorId: number;
  readonly deviceId: number;
  readonly subsystemVendorId: number;
  readonly subsystemId: number;
  /** 24 bits: base class, subclass, programming interface. */
  readonly classCode: number;
  readonly revision: number;
  readonly hasIoBar: boolean;
  readonly intx: boolean;
  readonly express: boolean;
  /** Capabilities pointer; 0 when there are none. */
  readonly firstCapability: number;
}

/** COMMAND bits this function implements. */
function commandWriteMask(hasIoBar: boolean): number {
  return (
    (hasIoBar ? PciCommand.IO : 0) |
    PciCommand.MEMORY |
    PciCommand.MASTER |
    PciCommand.PARITY |
    PciCommand.SERR |
    PciCommand.INTX_DISABLE
  );
}

export function defineHeader(space: ConfigSpace, h: HeaderOptions): void {
  const f = PciHeader;
  space.define(f.VENDOR_ID.offset, 2, { reset: h.vendorId });
  space.define(f.DEVICE_ID.offset, 2, { reset: h.deviceId });
  space.define(f.COMMAND.offset, 2, { reset: 0, rw: commandWriteMask(h.hasIoBar) });
  space.define(f.STATUS.offset, 2, {
    reset: h.firstCapability !== 0 ? PciStatus.CAP_LIST : 0,
    w1c: PCI_STATUS_ERROR_BITS,
  });
  space.define(f.REVISION_ID.offset, 1, { reset: h.revision });
  space.define(f.CLASS_CODE.offset, 3, { reset: h.classCode });
  space.define(f.CACHE_LINE_SIZE.offset, 1, { reset: 0, rw: 0xff });
  space.define(f.LATENCY_TIMER.offset, 1, { reset: 0, rw: h.express ? 0 : 0xff });
  space.define(f.HEADER_TYPE.offset, 1, { reset: PciHeaderType.NORMAL });
  space.define(f.BIST.offset, 1, { reset: 0 });
  space.define(f.CARDBUS_CIS.offset, 4, { reset: 0 });
  space.define(f.SUBSYSTEM_VENDOR_ID.offset, 2, { reset: h.subsystemVendorId });
  space.define(f.SUBSYSTEM_ID.offset, 2, { reset: h.subsystemId });
  // No expansion ROM: reads 0 and ignores writes, so QEMU's sizing probe sees "no ROM" (3.4 step 7).
  space.define(f.ROM_ADDRESS.offset, 4, { reset: 0 });
  space.define(f.CAPABILITY_LIST.offset, 1, { reset: h.firstCapability });
  space.define(f.INTERRUPT_LINE.offset, 1, { reset: 0, rw: 0xff });
  space.define(f.INTERRUPT_PIN.offset, 1, { reset: h.intx ? PciInterruptPin.INTA : PciInterruptPin.NONE });
  space.define(f.MIN_GNT.offset, 1, { reset: 0 });
  space.define(f.MAX_LAT.offset, 1, { reset: 0 });
}
