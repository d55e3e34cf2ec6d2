// The guest's bus: its RAM (an allocator over the memfd the device maps),
// BAR0 / BAR2 / config-space accesses as QEMU sends them (BAR writes posted),
// doorbells, and discovery of the BARs and the MSI-X capability.

import { GuestRam, VfioUserClient } from '../../../../lib/vfio-user/client';
import { u32le } from './bytes';
import { Bar0, Cfg, PAGE, Region } from '../regs';

/** Guest RAM, BAR and config-space access, doorbells, and what discovery finds. */
export abstract class GuestBus {
  readonly client: VfioUserClient;
  readonly ram: GuestRam;
  readonly base: number;
  readonly timeoutMs: number;
  /** Problems the real driver would choke on; tests expect none. */
  readonly violations: string[] = [];
  /** Every command issued, in order: `dev:<opcode>` or `admin:<opcode>`. */
  readonly trace: string[] = [];

  // discovered at connect
  msixCap = 0;
  nvec = 0;
  bars: { index: number; size: number }[] = [];
  /** The LIF's doorbell page in the doorbell BAR (set by probe). */
  dbPage = -1;

  #next: number;
  readonly #end: number;

  protected constructor(client: VfioUserClient, ram: GuestRam, base: number, timeoutMs: number) {
    this.client = client;
    this.ram = ram;
    this.base = base;
    this.timeoutMs = timeoutMs;
    this.#next = base;
    this.#end = base + ram.size;
  }

  // ---- memory ------------------------------------------------------------------------------

  /** Allocate zeroed guest memory (page aligned by default). */
  alloc(size: number, align = PAGE): number {
    const at = Math.ceil(this.#next / align) * align;
    if (at + size > this.#end) throw new Error(`guest RAM exhausted (${size} bytes wanted)`);
    this.#next = at + size;
    this.mem(at, size).fill(0);
    return at;
  }

  /** A view of guest RAM at an IOVA. */
  mem(iova: number, len: number): Buffer {
    const off = iova - this.base;
    if (off < 0 || off + len > this.ram.size)
      throw new RangeError(`0x${iova.toString(16)}+${len} is outside guest RAM`);
    return this.ram.buffer.subarray(off, off + len);
  }

  // ---- MMIO --------------------------------------------------------------------------------

  bar0Read(offset: number, len: number): Promise<Buffer> {
    return this.client.regionRead(Region.BAR0, offset, len);
  }

  async bar0Read32(offset: number): Promise<number> {
    return (await this.bar0Read(offset, 4)).readUInt32LE(0);
  }

  /** A posted BAR0 write (NO_REPLY), sent at once. */
  bar0Write(offset: number, data: Buffer): void {
    this.client.postRegionWrite(Region.BAR0, offset, data);
    this.client.flush();
  }

  bar0Write32(offset: number, v: number): void {
    this.bar0Write(offset, u32le(v));
  }

  /** A round trip: every posted write before it has been handled when it resolves. */
  async sync(): Promise<void> {
    await this.bar0Read(Bar0.FW_STATUS, 1);
  }

  async configRead(offset: number, len: number): Promise<Buffer> {
    return this.client.regionRead(Region.CONFIG, offset, len);
  }

  async configWrite16(offset: number, v: number): Promise<void> {
    const b = Buffer.alloc(2);
    b.writeUInt16LE(v, 0);
    await this.client.regionWrite(Region.CONFIG, offset, b);
  }

  /** value = qid << 24 | ring << 16 | p_index, one 8-byte posted write at dbpage + 8 * hw_type. */
  ringDoorbell(hwType: number, qid: number, pIndex: number, ring = 0): void {
    const v = Buffer.alloc(8);
    v.writeUInt16LE(pIndex & 0xffff, 0);
    v[2] = ring & 0x7;
    v[3] = qid & 0xff;
    v.writeUInt16LE((qid >>> 8) & 0xffff, 4);
    this.client.postRegionWrite(Region.BAR2, this.dbPage + 8 * hwType, v);
    this.client.flush();
  }

  /** A raw doorbell-BAR write (bad-input tests). */
  doorbellRaw(offset: number, data: Buffer): void {
    this.client.postRegionWrite(Region.BAR2, offset, data);
    this.client.flush();
  }

  // ---- discovery -----------------------------------------------------------------------------

  protected async discover(): Promise<void> {
    // BARs as the driver packs them: memory BARs only, upper halves of 64-bit ones skipped.
    const bars: { index: number; size: number }[] = [];
    const raw = await this.configRead(Cfg.BAR0, 24);
    for (let i = 0; i < 6; i++) {
      const v = raw.readUInt32LE(i * 4);
      const info = await this.client.getRegionInfo(i);
      if (info.size === 0) continue;
      if ((v & 1) === 0) bars.push({ index: i, size: info.size });
      if ((v & 1) === 0 && ((v >>> 1) & 3) === 2) i++; // 64-bit: the next BAR is the upper half
    }
    this.bars = bars;
    // Walk the capability list from 0x34 to the MSI-X capability.
    const status = (await this.configRead(Cfg.STATUS, 2)).readUInt16LE(0);
    if (!(status & Cfg.STATUS_CAP_LIST)) throw new Error('no capability list');
    let at = (await this.configRead(Cfg.CAP_PTR, 1))[0]! & 0xfc;
    for (let hops = 0; at !== 0 && hops < 48; hops++) {
      const hdr = await this.configRead(at, 2);
      if (hdr[0] === Cfg.CAP_ID_MSIX) {
        this.msixCap = at;
        break;
      }
      at = hdr[1]! & 0xfc;
    }
    if (this.msixCap === 0) throw new Error('no MSI-X capability');
    const flags = (await this.configRead(this.msixCap + Cfg.MSIX_FLAGS, 2)).readUInt16LE(0);
    this.nvec = (flags & Cfg.MSIX_QSIZE) + 1;
  }
}
