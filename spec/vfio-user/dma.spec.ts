// DMA_MAP / DMA_UNMAP through a real socket with memfd guest memory
// (docs/vfio-user-protocol.md 2.2, 2.3, 4.3, 5), and the DmaTable's guest-memory API directly.
import { expect } from 'chai';
import * as fs from 'fs';
import * as native from '../../lib/native';
import { GuestRam } from '../../lib/vfio-user/client';
import { DmaTable, WINDOW_OVERLAP, WINDOW_SIZE } from '../../lib/vfio-user/dma-table';
import { MemStatus } from '../../lib/vfio-user/guest-memory';
import { lendViews, mappingsOnLoan, releasesWaiting, returnViews } from '../../lib/vfio-user/lent-views';
import type { Session } from '../../lib/vfio-user/session';
import { Bytes } from '../support/bytes';
import { openFdCount, settle } from '../support/fds';
import {
  CMD,
  describeMsg,
  dmaMapPayload,
  dmaUnmapPayload,
  EINVAL,
  ENOENT,
  ENOSPC,
  FLAG_REPLY,
  isErrorReply,
  Msg,
  RawPeer,
  regionAccessPayload,
  startServer,
  TestServer,
  waitDetached,
} from './raw-peer';

const R = 1;
const W = 2;
const RW = R | W;
const MiB = 1 << 20;
const GiB = 1 << 30;

/** Permissions ("rw-s") of this process's mappings of the memfd called `name`. */
function mappingPerms(name: string): string[] {
  return fs
    .readFileSync('/proc/self/maps', 'utf8')
    .split('\n')
    .filter(
      (l) => l.includes(`/memfd:${name} `) || l.endsWith(`/memfd:${name}`) || l.includes(`/memfd:${name} (deleted)`),
    )
    .map((l) => l.split(/\s+/)[1]!);
}

function fdList(): string {
  return fs
    .readdirSync('/proc/self/fd')
    .map((f) => {
      try {
        return `${f}:${fs.readlinkSync('/proc/self/fd/' + f)}`;
      } catch {
        return f;
      }
    })
    .join(' ');
}

describe('vfio-user server: DMA_MAP and DMA_UNMAP', () => {
  let t: TestServer;
  let peer: RawPeer;
  let id: number;
  let fdsBefore: number;
  const closeAfter: { close(): void }[] = [];

  function session(): Session {
    const s = t.server.session;
    if (!s) throw new Error('no session');
    return s;
  }

  async function req(command: number, payload: Buffer, fds: readonly number[] = []): Promise<Msg> {
    return peer.request(++id, command, payload, fds);
  }

  async function ok(command: number, payload: Buffer, fds: readonly number[] = []): Promise<Msg> {
    const r = await req(command, payload, fds);
    expect(r.flags, describeMsg(r)).to.equal(FLAG_REPLY);
    return r;
  }

  async function expectError(
    command: number,
    payload: Buffer,
    errno: number,
    fds: readonly number[] = [],
  ): Promise<void> {
    const r = await req(command, payload, fds);
    expect(isErrorReply(r, id, command, errno), describeMsg(r)).to.equal(true);
  }

  function ram(size: number, name?: string): GuestRam {
    const g = new GuestRam(size, name);
    closeAfter.push(g);
    return g;
  }

  function memfd(size: number, name = 'dma-test'): number {
    const fd = native.memfdCreate(name, size, true);
    closeAfter.push({ close: () => fs.closeSync(fd) });
    return fd;
  }

  beforeEach(async () => {
    fdsBefore = openFdCount();
    t = await startServer('dma');
    peer = await RawPeer.negotiated(t.path);
    id = 0;
  });
  afterEach(async () => {
    peer.close();
    await waitDetached(t.server);
    t.server.close();
    for (const c of closeAfter.splice(0)) c.close();
    await settle();
    expect(openFdCount(), `fds after the test: ${fdList()}`).to.equal(fdsBefore);
  });

  it('maps a memfd and honours the fd offset (second half of the memfd)', async () => {
    const g = ram(2 * MiB);
    const r = await ok(CMD.DMA_MAP, dmaMapPayload(RW, MiB, 0x4000_0000, MiB), [g.fd]);
    expect(r.size, 'header-only reply').to.equal(16);
    g.buffer.write('first half', 0x10);
    g.buffer.write('second half', MiB + 0x10);
    const dst = Buffer.alloc(11);
    expect(t.device.ctx!.memory.read(0x4000_0010, dst)).to.equal(MemStatus.OK);
    expect(dst.toString()).to.equal('second half');
    // Writes by the device land in the client's memory at offset + (iova - address).
    expect(t.device.ctx!.memory.write(0x4000_0000 + MiB - 4, Buffer.from('tail'))).to.equal(MemStatus.OK);
    expect(g.buffer.toString('utf8', 2 * MiB - 4)).to.equal('tail');
    expect(t.device.ctx!.memory.read(0x4000_0000 + MiB - 2, Buffer.alloc(4))).to.equal(MemStatus.UNMAPPED);
    expect(t.device.mapped.map((m) => [m.iova, m.size, m.mapped, m.readable, m.writable])).to.deep.equal([
      [0x4000_0000, MiB, true, true, true],
    ]);
  });

  it('knows a range mapped without fd but cannot reach it (view null, NO_FD)', async () => {
    await ok(CMD.DMA_MAP, dmaMapPayload(R, 0, 0xc0000, 0x40000));
    const mem = t.device.ctx!.memory;
    expect(t.device.mapped.map((m) => [m.iova, m.size, m.mapped])).to.deep.equal([[0xc0000, 0x40000, false]]);
    expect(mem.view(0xc0000, 4, false)).to.equal(null);
    expect(mem.read(0xc0000, Buffer.alloc(4))).to.equal(MemStatus.NO_FD);
    expect(mem.slices(0xc0000, 4, false, [])).to.equal(MemStatus.NO_FD);
    expect(mem.read(0xbfffc, Buffer.alloc(4))).to.equal(MemStatus.UNMAPPED);
  });

  it('maps a read-only range PROT_READ and refuses device writes (READ_ONLY)', async () => {
    const name = `ro-${process.pid}-${Math.random().toString(36).slice(2, 8)}`;
    const fd = memfd(64 * 1024, name);
    fs.writeSync(fd, Buffer.from('rom!'), 0, 4, 0);
    await ok(CMD.DMA_MAP, dmaMapPayload(R, 0, 0xe0000, 64 * 1024), [fd]);
    // Only the server maps this memfd: its mapping must be read-only shared.
    expect(mappingPerms(name)).to.deep.equal(['r--s']);
    const mem = t.device.ctx!.memory;
    expect(mem.write(0xe0000, Buffer.from('x'))).to.equal(MemStatus.READ_ONLY);
    expect(mem.view(0xe0000, 4, true)).to.equal(null);
    expect(mem.copy(0xe0000, 0xe0010, 4)).to.equal(MemStatus.READ_ONLY);
    const dst = Buffer.alloc(4);
    expect(mem.read(0xe0000, dst)).to.equal(MemStatus.OK);
    expect(dst.toString()).to.equal('rom!');
  });

  it('refuses an overlapping map with EINVAL and closes its fd', async () => {
    const a = ram(0x20000);
    await ok(CMD.DMA_MAP, dmaMapPayload(RW, 0, 0x100000, 0x20000), [a.fd]);
    const before = openFdCount();
    for (const [addr, size] of [
      [0x110000, 0x20000],
      [0xf0000, 0x20000],
      [0x108000, 0x1000],
      [0xf0000, 0x40000],
    ] as const) {
      await expectError(CMD.DMA_MAP, dmaMapPayload(RW, 0, addr, size), EINVAL, [a.fd]);
      expect(openFdCount(), `overlap at 0x${addr.toString(16)}`).to.equal(before);
    }
    // Overlaps without fd are refused too; adjacent ranges are fine.
    await expectError(CMD.DMA_MAP, dmaMapPayload(R, 0, 0x11f000, 0x2000), EINVAL);
    await ok(CMD.DMA_MAP, dmaMapPayload(R, 0, 0x120000, 0x1000));
    await ok(CMD.DMA_MAP, dmaMapPayload(R, 0, 0xff000, 0x1000));
    expect(session().dma.regions.map((r) => r.iova)).to.deep.equal([0xff000, 0x100000, 0x120000]);
  });

  it('accepts an exact duplicate map as a success and closes the duplicate fd', async () => {
    const a = ram(0x10000);
    await ok(CMD.DMA_MAP, dmaMapPayload(RW, 0, 0x200000, 0x10000), [a.fd]);
    const before = openFdCount();
    const r = await ok(CMD.DMA_MAP, dmaMapPayload(RW, 0, 0x200000, 0x10000), [a.fd]);
    expect(r.size).to.equal(16);
    expect(openFdCount(), 'the duplicate fd is closed').to.equal(before);
    expect(session().dma.regions).to.have.length(1);
    expect(t.device.mapped).to.have.length(1);
    // The same range with other flags is an overlap, not a duplicate.
    await expectError(CMD.DMA_MAP, dmaMapPayload(R, 0, 0x200000, 0x10000), EINVAL, [a.fd]);
    expect(openFdCount()).to.equal(before);
  });

  const invalid: [string, Buffer, number, number][] = [
    // [what, payload, errno, fds to attach (memfd of 64 KiB)]
    ['an address + size that wraps 2^64', dmaMapPayload(R, 0, 0xfffffffffffff000n, 0x2000), EINVAL, 0],
    ['an address + size past 2^53', dmaMapPayload(R, 0, 2 ** 53 - 0x1000, 0x2000), EINVAL, 0],
    ['size 0', dmaMapPayload(RW, 0, 0x1000, 0), EINVAL, 0],
    ['size 0 with an fd', dmaMapPayload(RW, 0, 0x1000, 0), EINVAL, 1],
    ['an unknown flag bit (0x100)', dmaMapPayload(RW | 0x100, 0, 0x1000, 0x1000), EINVAL, 0],
    ['size > 8 TiB', dmaMapPayload(R, 0, 0, 2 ** 43 + 0x1000), ENOSPC, 0],
    ['an fd offset that is not page aligned', dmaMapPayload(RW, 0x800, 0x1000, 0x1000), EINVAL, 1],
    ['offset + size past the end of the memfd', dmaMapPayload(RW, 0x8000, 0x1000, 0x10000), EINVAL, 1],
    ['a size past the end of the memfd', dmaMapPayload(RW, 0, 0x1000, 0x20000), EINVAL, 1],
    ['2 fds', dmaMapPayload(RW, 0, 0x1000, 0x1000), EINVAL, 2],
    ['argsz 16', dmaMapPayload(RW, 0, 0x1000, 0x1000, 16), EINVAL, 1],
    ['a short payload', new Bytes().u32(32).u32(RW).u64(0).u64(0x1000).build(), EINVAL, 1],
  ];
  for (const [what, payload, errno, nfds] of invalid) {
    it(`refuses DMA_MAP with ${what} (errno ${errno}), closing its fds`, async () => {
      const fds: number[] = [];
      for (let i = 0; i < nfds; i++) fds.push(memfd(0x10000));
      const before = openFdCount();
      await expectError(CMD.DMA_MAP, payload, errno, fds);
      expect(openFdCount()).to.equal(before);
      expect(session().dma.regions).to.have.length(0);
      expect(t.device.mapped).to.have.length(0);
      expect((await req(CMD.REGION_READ, regionAccessPayload(0, 0, 4))).flags).to.equal(FLAG_REPLY);
    });
  }

  it('accepts exactly 8 TiB (without fd)', async () => {
    await ok(CMD.DMA_MAP, dmaMapPayload(R, 0, 0, 2 ** 43));
    expect(session().dma.regions[0]!.size).to.equal(2 ** 43);
  });

  it('refuses a map into a full table with EINVAL (limits.maxDmaRegions 4)', async () => {
    peer.close();
    await waitDetached(t.server);
    t.server.close();
    t = await startServer('dma-full', { maxDmaRegions: 4 });
    peer = await RawPeer.negotiated(t.path);
    const g = ram(0x10000);
    for (let i = 0; i < 4; i++) await ok(CMD.DMA_MAP, dmaMapPayload(RW, 0, 0x100000 * (i + 1), 0x10000), [g.fd]);
    const before = openFdCount();
    await expectError(CMD.DMA_MAP, dmaMapPayload(RW, 0, 0x100000 * 5, 0x10000), EINVAL, [g.fd]);
    await expectError(CMD.DMA_MAP, dmaMapPayload(R, 0, 0x100000 * 6, 0x10000), EINVAL);
    expect(openFdCount()).to.equal(before);
    // A duplicate still succeeds, and unmapping makes room again.
    await ok(CMD.DMA_MAP, dmaMapPayload(RW, 0, 0x100000, 0x10000), [g.fd]);
    await ok(CMD.DMA_UNMAP, dmaUnmapPayload(0, 0x100000, 0x10000));
    await ok(CMD.DMA_MAP, dmaMapPayload(RW, 0, 0x100000 * 5, 0x10000), [g.fd]);
    expect(session().dma.regions).to.have.length(4);
  });

  describe('DMA_UNMAP', () => {
    async function mapThree(): Promise<void> {
      const g = ram(0x30000);
      for (let i = 0; i < 3; i++)
        await ok(CMD.DMA_MAP, dmaMapPayload(RW, i * 0x10000, 0x1000000 + i * 0x10000, 0x10000), [g.fd]);
    }

    it("unmaps an exact range, echoes the 24-byte struct (msg_size 40) and closes the server's fd", async () => {
      await mapThree();
      const before = openFdCount();
      const r = await ok(CMD.DMA_UNMAP, dmaUnmapPayload(0, 0x1010000, 0x10000));
      expect(r.size).to.equal(40);
      expect(r.payload).to.deep.equal(dmaUnmapPayload(0, 0x1010000, 0x10000));
      expect(openFdCount(), "the region's fd is closed").to.equal(before - 1);
      expect(session().dma.regions.map((x) => x.iova)).to.deep.equal([0x1000000, 0x1020000]);
      expect(t.device.events.filter((e) => e.startsWith('unmap'))).to.deep.equal(['unmap:1010000']);
      expect(t.device.ctx!.memory.read(0x1010000, Buffer.alloc(1))).to.equal(MemStatus.UNMAPPED);
    });

    it('refuses partial and unknown ranges with ENOENT and keeps the mapping', async () => {
      await mapThree();
      for (const [addr, size] of [
        [0x1000000, 0x8000],
        [0x1008000, 0x8000],
        [0x1000000, 0x20000],
        [0x2000000, 0x10000],
        [0, 0],
      ] as const) {
        await expectError(CMD.DMA_UNMAP, dmaUnmapPayload(0, addr, size), ENOENT);
      }
      expect(session().dma.regions).to.have.length(3);
    });

    it('unmaps everything with UNMAP_ALL (address 0, size 0)', async () => {
      await mapThree();
      const r = await ok(CMD.DMA_UNMAP, dmaUnmapPayload(2, 0, 0));
      expect(r.payload).to.deep.equal(dmaUnmapPayload(2, 0, 0));
      expect(session().dma.regions).to.have.length(0);
      expect(t.device.mapped).to.have.length(0);
    });

    const bad: [string, Buffer][] = [
      ['UNMAP_ALL with an address', dmaUnmapPayload(2, 0x1000000, 0)],
      ['UNMAP_ALL with a size', dmaUnmapPayload(2, 0, 0x10000)],
      ['UNMAP_ALL with another flag', dmaUnmapPayload(2 | 4, 0, 0)],
      ['an unknown flag', dmaUnmapPayload(4, 0x1000000, 0x10000)],
      ['GET_DIRTY_BITMAP (not logging)', dmaUnmapPayload(1, 0x1000000, 0x10000)],
      [
        'GET_DIRTY_BITMAP with a bitmap struct',
        Buffer.concat([
          dmaUnmapPayload(1, 0x1000000, 0x10000, 24 + 16 + 8),
          new Bytes().u64(4096).u64(8).u64(0).build(),
        ]),
      ],
      ['argsz 16', dmaUnmapPayload(0, 0x1000000, 0x10000, 16)],
      ['argsz 2 MiB', dmaUnmapPayload(0, 0x1000000, 0x10000, 2 * MiB)],
      ['a short payload', new Bytes().u32(24).u32(0).u64(0x1000000).build()],
    ];
    for (const [what, payload] of bad) {
      it(`refuses ${what} with an error reply and keeps the mappings`, async () => {
        await mapThree();
        const r = await req(CMD.DMA_UNMAP, payload);
        expect(r.flags, describeMsg(r)).to.equal(FLAG_REPLY | 0x20);
        expect(r.size).to.equal(16);
        expect(r.error).to.be.oneOf([EINVAL, 95]);
        if (!what.startsWith('GET_DIRTY')) expect(r.error).to.equal(EINVAL);
        expect(session().dma.regions).to.have.length(3);
      });
    }

    it('detaches Buffer views taken before the unmap (length 0, unmapped memory never touched)', async () => {
      const g = ram(0x10000);
      await ok(CMD.DMA_MAP, dmaMapPayload(RW, 0, 0x3000000, 0x10000), [g.fd]);
      const mem = t.device.ctx!.memory;
      const view = mem.view(0x3000100, 16, true);
      expect(view).to.not.equal(null);
      view!.write('alive');
      expect(g.buffer.toString('utf8', 0x100, 0x105)).to.equal('alive');
      const sl: Buffer[] = [];
      expect(mem.slices(0x3000000, 0x10000, false, sl)).to.equal(MemStatus.OK);
      await ok(CMD.DMA_UNMAP, dmaUnmapPayload(0, 0x3000000, 0x10000));
      expect(view!.length).to.equal(0);
      expect(sl[0]!.length).to.equal(0);
      // Writing through the dead view is a no-op, not a crash.
      view!.write('dead');
      expect(g.buffer.toString('utf8', 0x100, 0x105)).to.equal('alive');
    });
  });
});

describe('DmaTable guest-memory API (direct, memfd-backed)', () => {
  let table: DmaTable;
  const mapped: ArrayBuffer[] = [];
  let fdsBefore: number;

  beforeEach(() => {
    fdsBefore = openFdCount();
    table = new DmaTable();
  });
  afterEach(() => {
    table.clear();
    for (const ab of mapped.splice(0)) native.munmap(ab);
    expect(openFdCount(), 'clear() closed every fd').to.equal(fdsBefore);
  });

  /** A memfd, also mapped here (our side of "guest RAM"); the table takes ownership of the fd in add(). */
  function guest(size: number, mapLen = size, mapAt = 0): { fd: number; mem: Buffer } {
    const fd = native.memfdCreate('table-test', size, true);
    const ab = native.mmap(fd, mapAt, mapLen, true);
    mapped.push(ab);
    return { fd, mem: Buffer.from(ab) };
  }

  function add(address: number, size: number, fd: number, offset = 0, flags = RW): void {
    const r = table.add({ address, size, flags, offset, fd });
    if (!('region' in r)) throw new Error(`add failed: ${JSON.stringify(r)}`);
  }

  it("a view lent to the kernel keeps its mapping through the region's removal until it comes back", () => {
    const a = guest(0x4000);
    add(0x40000, 0x4000, a.fd);
    a.mem.write('lent', 0x1000);
    const views: Buffer[] = [];
    expect(table.slices(0x41000, 0x2000, false, views)).to.equal(MemStatus.OK);
    lendViews(views);
    lendViews(views); // two frames out of the same memory
    const region = table.regions[0]!;
    table.remove(region);
    expect(table.read(0x41000, Buffer.alloc(4)), 'the region left the table at once').to.equal(MemStatus.UNMAPPED);
    expect(releasesWaiting()).to.equal(1);
    // Still mapped: the kernel may still be writing these bytes to a socket.
    expect(views[0]!.toString('utf8', 0, 4)).to.equal('lent');
    returnViews(views);
    expect(views[0]!.length, 'one loan still out').to.equal(0x2000);
    returnViews(views);
    expect(views[0]!.length, 'unmapped (detached) with the last loan back').to.equal(0);
    expect(releasesWaiting()).to.equal(0);
    expect(mappingsOnLoan()).to.equal(0);
    returnViews(views); // a stray return changes nothing
    expect(mappingsOnLoan()).to.equal(0);
  });

  it('a region with no view on loan is unmapped at its removal', () => {
    const a = guest(0x2000);
    add(0x50000, 0x2000, a.fd);
    const v = table.view(0x50000, 16, false)!;
    expect(v.length).to.equal(16);
    table.remove(table.regions[0]!);
    expect(v.length, 'detached at once').to.equal(0);
  });

  it('reads, writes and slices across two adjacent regions', () => {
    const a = guest(0x2000);
    const b = guest(0x2000);
    add(0x10000, 0x2000, a.fd);
    add(0x12000, 0x2000, b.fd);
    a.mem.write('AAAA', 0x1ffc);
    b.mem.write('BBBB', 0);
    expect(table.view(0x11ffc, 8, false), 'no single view across regions').to.equal(null);
    const dst = Buffer.alloc(8);
    expect(table.read(0x11ffc, dst)).to.equal(MemStatus.OK);
    expect(dst.toString()).to.equal('AAAABBBB');
    const out: Buffer[] = [Buffer.from('keep')];
    expect(table.slices(0x11ffc, 8, true, out)).to.equal(MemStatus.OK);
    expect(out.map((s) => s.length)).to.deep.equal([4, 4, 4]);
    expect(table.write(0x11ffe, Buffer.from('wxyz'))).to.equal(MemStatus.OK);
    expect(a.mem.toString('utf8', 0x1ffe)).to.equal('wx');
    expect(b.mem.toString('utf8', 0, 2)).to.equal('yz');
    // A range running past the second region fails and leaves `out` as it was.
    const out2: Buffer[] = [];
    expect(table.slices(0x13ffc, 8, false, out2)).to.equal(MemStatus.UNMAPPED);
    expect(out2).to.have.length(0);
    expect(table.read(0xfffc, Buffer.alloc(8))).to.equal(MemStatus.UNMAPPED);
  });

  it('copies between regions and across their boundary', () => {
    const a = guest(0x2000);
    const b = guest(0x2000);
    add(0x10000, 0x2000, a.fd);
    add(0x12000, 0x2000, b.fd);
    for (let i = 0; i < 0x2000; i++) a.mem[i] = i & 0xff;
    expect(table.copy(0x12000, 0x10000, 0x100)).to.equal(MemStatus.OK);
    expect(b.mem.subarray(0, 0x100)).to.deep.equal(a.mem.subarray(0, 0x100));
    // Source spans the boundary, destination does not.
    expect(table.copy(0x13000, 0x11f80, 0x100)).to.equal(MemStatus.OK);
    expect(b.mem.subarray(0x1000, 0x1080)).to.deep.equal(a.mem.subarray(0x1f80, 0x2000));
    expect(b.mem.subarray(0x1080, 0x1100)).to.deep.equal(b.mem.subarray(0, 0x80));
    expect(table.copy(0x14000, 0x10000, 1)).to.equal(MemStatus.UNMAPPED);
  });

  it('maps a 1 GiB + 8 MiB memfd in overlapping windows: view and slices across the 1 GiB boundary', function () {
    const size = GiB + 8 * MiB;
    // Our own view of the bytes around the boundary (sparse memfd: untouched pages cost nothing).
    const g = guest(size, 16 * MiB, GiB - 4 * MiB);
    const base = 0x1_0000_0000;
    add(base, size, g.fd);
    const region = table.regions[0]!;
    expect(region.windows.length).to.equal(2);
    expect(region.windows[0]!.length).to.equal(WINDOW_SIZE + WINDOW_OVERLAP);
    expect(region.windows[1]!.length).to.equal(8 * MiB);
    const ourAt = (iova: number): number => iova - base - (GiB - 4 * MiB);
    g.mem.write('across-the-boundary', ourAt(base + GiB - 6));
    // A small access across the window boundary is one view (the overlap).
    const v = table.view(base + GiB - 6, 19, false);
    expect(v).to.not.equal(null);
    expect(v!.toString()).to.equal('across-the-boundary');
    // Writes through the view reach the memfd.
    table.view(base + GiB - 2, 4, true)!.write('WXYZ');
    expect(g.mem.toString('utf8', ourAt(base + GiB - 2), ourAt(base + GiB + 2))).to.equal('WXYZ');
    // An access longer than the overlap crosses windows: no single view, but slices and read work.
    const start = base + GiB - MiB;
    const len = WINDOW_OVERLAP + 2 * MiB;
    expect(table.view(start, len, false)).to.equal(null);
    for (let i = 0; i < len; i += 4096) g.mem.writeUInt32LE(i, ourAt(start + i));
    const parts: Buffer[] = [];
    expect(table.slices(start, len, false, parts)).to.equal(MemStatus.OK);
    expect(parts.length).to.equal(2);
    expect(parts.reduce((n, p) => n + p.length, 0)).to.equal(len);
    const joined = Buffer.concat(parts);
    for (let i = 0; i < len; i += 4096) expect(joined.readUInt32LE(i), `offset ${i}`).to.equal(i);
    const dst = Buffer.alloc(len);
    expect(table.read(start, dst)).to.equal(MemStatus.OK);
    expect(dst.equals(joined)).to.equal(true);
    // The last byte of the region, and one past it.
    expect(table.view(base + size - 1, 1, false)).to.not.equal(null);
    expect(table.read(base + size - 1, Buffer.alloc(2))).to.equal(MemStatus.UNMAPPED);
  });

  it('answers BAD_RANGE for negative, fractional and wrapping ranges', () => {
    const a = guest(0x1000);
    add(0x1000, 0x1000, a.fd);
    const bad: [number, number][] = [
      [-1, 4],
      [0x1000, -1],
      [4096.5, 4],
      [0x1000, 2.5],
      [Number.MAX_SAFE_INTEGER, 2],
      [NaN, 1],
      [0x1000, Infinity],
    ];
    for (const [iova, len] of bad) {
      expect(table.view(iova, len, false), `view ${iova}+${len}`).to.equal(null);
      expect(table.slices(iova, len, false, []), `slices ${iova}+${len}`).to.equal(MemStatus.BAD_RANGE);
    }
    expect(table.copy(0x1000, -1, 4)).to.equal(MemStatus.BAD_RANGE);
    expect(table.copy(4096.5, 0x1000, 4)).to.equal(MemStatus.BAD_RANGE);
    expect(table.copy(0x1000, 0x1100, -1)).to.equal(MemStatus.BAD_RANGE);
    expect(table.read(-1, Buffer.alloc(4))).to.equal(MemStatus.BAD_RANGE);
    expect(table.write(0.5, Buffer.alloc(4))).to.equal(MemStatus.BAD_RANGE);
    expect(table.read(Number.MAX_SAFE_INTEGER, Buffer.alloc(2))).to.equal(MemStatus.BAD_RANGE);
  });
});
