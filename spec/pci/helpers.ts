// Test helpers for lib/pci: a sinon-faked DeviceContext, config accessors that go
// through the region handler exactly as the server would, and a seeded PRNG.

import * as sinon from 'sinon';
import type { DeviceContext, RegionHandler } from '../../lib/vfio-user/device';
import { MemStatus } from '../../lib/vfio-user/guest-memory';
import type { GuestMemory } from '../../lib/vfio-user/guest-memory';
import { PciFunction } from '../../lib/pci';
import type { BarHandler, PciFunctionSpec } from '../../lib/pci';

/** Bytes from a hex string with optional spaces: hex('86 80 d3 10'). */
export function hex(s: string): Buffer {
  return Buffer.from(s.replace(/\s+/g, ''), 'hex');
}

export interface FakeContext {
  readonly ctx: DeviceContext;
  readonly signalIrq: sinon.SinonStub<[number, number], boolean>;
}

/** A DeviceContext whose signalIrq answers `wired` (true: an eventfd is there). */
export function fakeContext(wired = true): FakeContext {
  const signalIrq = sinon.stub<[number, number], boolean>().returns(wired);
  const memory: GuestMemory = {
    view: () => null,
    read: () => MemStatus.UNMAPPED,
    write: () => MemStatus.UNMAPPED,
    slices: () => MemStatus.UNMAPPED,
    copy: () => MemStatus.UNMAPPED,
  };
  const ctx: DeviceContext = {
    memory,
    signalIrq: (index, subindex) => signalIrq(index, subindex),
    irqWired: () => wired,
  };
  return { ctx, signalIrq };
}

/** Read `len` bytes of a region; fails the test on an errno. */
export function regionRead(region: RegionHandler | undefined, offset: number, len: number): Buffer {
  if (region === undefined) throw new Error('no region');
  const dst = Buffer.alloc(len, 0xee);
  const err = region.read(offset, dst);
  if (err !== 0) throw new Error(`read @0x${offset.toString(16)} len ${len}: errno ${err}`);
  return dst;
}

export function regionWrite(region: RegionHandler | undefined, offset: number, src: Buffer): void {
  if (region === undefined) throw new Error('no region');
  const err = region.write(offset, src);
  if (err !== 0) throw new Error(`write @0x${offset.toString(16)} len ${src.length}: errno ${err}`);
}

/** Config-space accessors through region 7, as QEMU reaches them. */
export class Cfg {
  constructor(readonly fn: PciFunction) {}

  get region(): RegionHandler | undefined {
    return this.fn.region(7);
  }

  bytes(offset: number, len: number): Buffer {
    return regionRead(this.region, offset, len);
  }

  r8(offset: number): number {
    return this.bytes(offset, 1).readUInt8(0);
  }

  r16(offset: number): number {
    return this.bytes(offset, 2).readUInt16LE(0);
  }

  r32(offset: number): number {
    return this.bytes(offset, 4).readUInt32LE(0);
  }

  w8(offset: number, v: number): void {
    const b = Buffer.alloc(1);
    b.writeUInt8((v >>> 0) & 0xff);
    regionWrite(this.region, offset, b);
  }

  w16(offset: number, v: number): void {
    const b = Buffer.alloc(2);
    b.writeUInt16LE(v & 0xffff);
    regionWrite(this.region, offset, b);
  }

  w32(offset: number, v: number): void {
    const b = Buffer.alloc(4);
    b.writeUInt32LE(v >>> 0);
    regionWrite(this.region, offset, b);
  }
}

/** A BarHandler backed by a plain buffer, recording accesses. */
export class RecordingBar implements BarHandler {
  readonly mem: Buffer;
  readonly accesses: Array<{ op: 'r' | 'w'; offset: number; len: number }> = [];

  constructor(size: number) {
    this.mem = Buffer.alloc(size);
  }

  read(offset: number, dst: Buffer): number {
    this.accesses.push({ op: 'r', offset, len: dst.length });
    this.mem.copy(dst, 0, offset, offset + dst.length);
    return 0;
  }

  write(offset: number, src: Buffer): number {
    this.accesses.push({ op: 'w', offset, len: src.length });
    src.copy(this.mem, offset);
    return 0;
  }
}

/** Identity used across the specs: made-up ids, network controller class. */
export const IDENT = {
  vendorId: 0x1af4,
  deviceId: 0x10f5,
  subsystemVendorId: 0x1af5,
  subsystemId: 0x5401,
  classCode: 0x020000,
  revision: 0x03,
} as const;

/** A PCIe NIC-shaped function: 64-bit BAR0 with MSI-X at 0x8000/0xa000, 32-bit BAR2, I/O BAR4. */
export function nicSpec(overrides: Partial<PciFunctionSpec> = {}): PciFunctionSpec {
  return {
    ...IDENT,
    bars: [
      { index: 0, size: 0x10000, kind: 'mem64' },
      { index: 2, size: 0x400000, kind: 'mem32', prefetchable: true },
      { index: 4, size: 0x100, kind: 'io' },
    ],
    msix: { vectors: 32, tableBar: 0, tableOffset: 0x8000, pbaBar: 0, pbaOffset: 0xa000 },
    intx: true,
    pcie: { maxLinkSpeed: 4, maxLinkWidth: 16 },
    ...overrides,
  };
}

/** mulberry32: a small seeded PRNG so fuzz runs repeat. */
export function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
