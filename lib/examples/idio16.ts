// Example: an ACCES PCI-IDIO-16 isolated digital I/O card (494f:0dc8), the
// device libvfio-user's gpio sample serves, written on this library. It is the
// shortest complete vfio-user device: one I/O BAR, INTx, no DMA.
//
// Register file in BAR2 (256 bytes of I/O, one byte per register), as the
// guest's gpio-idio-16 driver uses it:
//   0  OUT0-7   write: FET outputs 0-7        1  IIN0-7   read: inputs 0-7
//   4  OUT8-15  write: FET outputs 8-15       5  IIN8-15  read: inputs 8-15
//   2, 3, 6, 7  interrupt clear/control/status: accepted, no effect here
// Like the sample, it has no real wires: it counts how many times each output
// was written high, and an input reads high when its output's count is a
// multiple of 3. Reads elsewhere return 0; writes elsewhere are dropped.
//
// Run:  npm run example:idio16 -- --socket /tmp/idio16.sock   (a checkout)
//       node node_modules/rocm-ernic/dist/lib/examples/idio16.js --socket /tmp/idio16.sock   (installed)
// Then: QEMU -device '{"driver":"vfio-user-pci","socket":{"path":"/tmp/idio16.sock","type":"unix"}}'
//       and in the guest: modprobe gpio-pci-idio-16

import { createLogger, PciFunction, VfioUserServer } from '../index';
import type { BarHandler } from '../index';

/** Register offsets in BAR2. */
export const IDIO16 = { OUT0_7: 0, IIN0_7: 1, OUT8_15: 4, IIN8_15: 5 } as const;

/** The card's state and its BAR2 register file. */
export class Idio16Registers implements BarHandler {
  /** How many times each of the 16 outputs was written high. */
  readonly highWrites = new Uint32Array(16);

  read(offset: number, dst: Buffer): number {
    for (let i = 0; i < dst.length; i++) {
      const reg = offset + i;
      dst[i] = reg === IDIO16.IIN0_7 ? this.#inputs(0) : reg === IDIO16.IIN8_15 ? this.#inputs(8) : 0;
    }
    return 0;
  }

  write(offset: number, src: Buffer): number {
    for (let i = 0; i < src.length; i++) {
      const reg = offset + i;
      if (reg === IDIO16.OUT0_7) this.#outputs(0, src[i]!);
      else if (reg === IDIO16.OUT8_15) this.#outputs(8, src[i]!);
    }
    return 0;
  }

  /** Back to power-on: no output ever written. */
  reset(): void {
    this.highWrites.fill(0);
  }

  #inputs(first: number): number {
    let v = 0;
    for (let bit = 0; bit < 8; bit++) if (this.highWrites[first + bit]! % 3 === 0) v |= 1 << bit;
    return v;
  }

  #outputs(first: number, value: number): void {
    for (let bit = 0; bit < 8; bit++) if (value & (1 << bit)) this.highWrites[first + bit]!++;
  }
}

/** The PCI function: conventional PCI, BAR2 = 256 bytes of I/O, INTA, nothing else. */
export function createIdio16(regs = new Idio16Registers()): PciFunction {
  return new PciFunction({
    vendorId: 0x494f,
    deviceId: 0x0dc8,
    subsystemVendorId: 0,
    subsystemId: 0,
    classCode: 0,
    bars: [{ index: 2, size: 0x100, kind: 'io', handler: regs }],
    intx: true,
    powerManagement: false,
    onReset: (reason) => {
      if (reason !== 'lost-connection') regs.reset();
    },
  });
}

async function main(argv: string[]): Promise<void> {
  const i = argv.indexOf('--socket');
  const socketPath = i >= 0 ? argv[i + 1] : undefined;
  if (!socketPath || argv.includes('--help')) {
    console.error(
      'usage: idio16.js --socket PATH [--verbose]  (in a checkout: npm run example:idio16 -- --socket PATH)\n\nServes an ACCES PCI-IDIO-16 (494f:0dc8) on a vfio-user socket.',
    );
    process.exit(argv.includes('--help') ? 0 : 2);
  }
  const log = createLogger({ level: argv.includes('--verbose') ? 'debug' : 'info' });
  const server = new VfioUserServer({ socketPath, device: createIdio16(), log });
  await server.listen();
  const stop = (): void => {
    server.close();
    process.exit(0);
  };
  process.on('SIGINT', stop);
  process.on('SIGTERM', stop);
}

if (require.main === module) {
  main(process.argv.slice(2)).catch((e: unknown) => {
    console.error(`idio16: ${(e as Error).message}`);
    process.exit(1);
  });
}
