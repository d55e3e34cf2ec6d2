// A small PCIe device built on the library, for trying it out and for the VM
// test: 16 KiB of BAR0 with scratch registers, a doorbell that raises an
// MSI-X vector, the MSI-X table and PBA, INTx, and a PCIe 4.0 x16 link.
//
// BAR0 layout (little-endian, 32-bit registers):
//   0x000  ID        read-only magic 0x45524e43 ("ERNC")
//   0x004  COUNTER   read-only: number of doorbell writes
//   0x008  DOORBELL  write a vector number: raises that MSI-X vector (or INTx if MSI-X is off)
//   0x00c  INTX      write 1 asserts INTx, 0 deasserts
//   0x100..0xfff     scratch: plain read/write memory
//   0x2000 MSI-X table (8 vectors), 0x3000 PBA

import { PciFunction } from '../index';
import type { BarHandler } from '../index';

const DEMO_VENDOR_ID = 0x1dd8;
const DEMO_DEVICE_ID = 0xee01;
const DEMO_MAGIC = 0x45524e43;
const DEMO_REGS = {
  ID: 0x000,
  COUNTER: 0x004,
  DOORBELL: 0x008,
  INTX: 0x00c,
  SCRATCH: 0x100,
  SCRATCH_END: 0x1000,
} as const;
const DEMO_VECTORS = 8;

export function createDemoDevice(): PciFunction {
  const scratch = Buffer.alloc(DEMO_REGS.SCRATCH_END);
  let counter = 0;
  // eslint-disable-next-line prefer-const
  let fn: PciFunction;
  const bar0: BarHandler = {
    read(offset, dst) {
      const word = Buffer.alloc(4);
      for (let i = 0; i < dst.length; i++) {
        const at = offset + i;
        const reg = at & ~3;
        if (reg === DEMO_REGS.ID) word.writeUInt32LE(DEMO_MAGIC);
        else if (reg === DEMO_REGS.COUNTER) word.writeUInt32LE(counter >>> 0);
        else if (at >= DEMO_REGS.SCRATCH && at < DEMO_REGS.SCRATCH_END) {
          dst[i] = scratch[at]!;
          continue;
        } else word.fill(0);
        dst[i] = word[at & 3]!;
      }
      return 0;
    },
    write(offset, src) {
      if (offset >= DEMO_REGS.SCRATCH && offset + src.length <= DEMO_REGS.SCRATCH_END) {
        src.copy(scratch, offset);
        return 0;
      }
      if (offset === DEMO_REGS.DOORBELL && src.length === 4) {
        counter++;
        fn.raise(src.readUInt32LE(0) % DEMO_VECTORS);
      } else if (offset === DEMO_REGS.INTX && src.length === 4) {
        if (src.readUInt32LE(0)) fn.intx.assert();
        else fn.intx.deassert();
      }
      // Other writes hit read-only or unused registers: dropped, as hardware does.
      return 0;
    },
  };
  fn = new PciFunction({
    vendorId: DEMO_VENDOR_ID,
    deviceId: DEMO_DEVICE_ID,
    subsystemVendorId: DEMO_VENDOR_ID,
    subsystemId: 0x0001,
    classCode: 0xff0000,
    revision: 1,
    bars: [{ index: 0, size: 16 * 1024, kind: 'mem64', handler: bar0 }],
    msix: { vectors: DEMO_VECTORS, tableBar: 0, tableOffset: 0x2000, pbaBar: 0, pbaOffset: 0x3000 },
    intx: true,
    pcie: { maxLinkSpeed: 4, maxLinkWidth: 16 },
  });
  return fn;
}
