// A minimal device written straight on the VfioUserDevice contract (no PCI
// model): BAR0 is 4 KiB of plain memory, the config region is 256 bytes of
// plain memory, with INTx, 4 MSI-X vectors and ERR. It records every call so
// tests can check what the server told it.

import type {
  DeviceContext,
  DmaRange,
  IrqEvent,
  RegionHandler,
  ResetReason,
  VfioUserDevice,
} from '../../lib/vfio-user/device';

class MemoryRegion implements RegionHandler {
  readonly bytes: Buffer;
  readonly readable = true;
  readonly writable = true;
  constructor(readonly size: number) {
    this.bytes = Buffer.alloc(size);
  }
  read(offset: number, dst: Buffer): number {
    this.bytes.copy(dst, 0, offset, offset + dst.length);
    return 0;
  }
  write(offset: number, src: Buffer): number {
    src.copy(this.bytes, offset);
    return 0;
  }
}

export class ScratchDevice implements VfioUserDevice {
  readonly resetSupported = true;
  readonly bar0 = new MemoryRegion(4096);
  readonly config = new MemoryRegion(256);
  ctx: DeviceContext | null = null;
  readonly events: string[] = [];
  readonly mapped: DmaRange[] = [];
  readonly irqEvents: IrqEvent[] = [];
  resets: ResetReason[] = [];
  /** When set, BAR0 reads at this offset fail with this errno. */
  failReadAt = -1;
  /** When set, BAR0 reads and writes at this offset throw (a bug in a device handler). */
  throwAt = -1;

  region(index: number): RegionHandler | undefined {
    if (index === 0) {
      const bar = this.bar0;
      const self = this;
      return {
        size: bar.size,
        readable: true,
        writable: true,
        read(offset, dst) {
          if (offset === self.throwAt) throw new TypeError('planted bug in a read handler');
          return offset === self.failReadAt ? 5 : bar.read(offset, dst);
        },
        write(offset, src) {
          if (offset === self.throwAt) throw new TypeError('planted bug in a write handler');
          return bar.write(offset, src);
        },
      };
    }
    if (index === 7) return this.config;
    return undefined;
  }
  irqCount(index: number): number {
    return [1, 0, 4, 1, 0][index] ?? 0;
  }
  attach(ctx: DeviceContext): void {
    this.ctx = ctx;
    this.events.push('attach');
  }
  detach(): void {
    this.ctx = null;
    this.events.push('detach');
  }
  reset(reason: ResetReason): void {
    this.resets.push(reason);
    this.events.push(`reset:${reason}`);
  }
  dmaMapped(range: DmaRange): void {
    this.mapped.push(range);
    this.events.push(`map:${range.iova.toString(16)}`);
  }
  dmaUnmapped(range: DmaRange): void {
    const i = this.mapped.indexOf(range);
    if (i >= 0) this.mapped.splice(i, 1);
    this.events.push(`unmap:${range.iova.toString(16)}`);
  }
  irqChanged(e: IrqEvent): void {
    this.irqEvents.push(e);
  }
}
