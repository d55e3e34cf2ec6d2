// The pieces that keep the request path free of pauses (docs/latency.md): the
// warm-up (lib/vfio-user/warm-up.ts), views made once (the writer's view(),
// ViewCache, the transport's staged payloads) and the reply sent straight from
// the writer. Behaviour only; bench/protocol.ts measures the times.
import { expect } from 'chai';
import * as fs from 'fs';
import * as native from '../../lib/native';
import type { DeviceContext, RegionHandler, VfioUserDevice } from '../../lib/vfio-user/device';
import { VfioUserClient } from '../../lib/vfio-user/client';
import { VfioUserServer } from '../../lib/vfio-user/server';
import { RawHeader, Transport, TransportHandler } from '../../lib/vfio-user/transport';
import { ViewCache } from '../../lib/vfio-user/view-cache';
import { warmUp } from '../../lib/vfio-user/warm-up';
import { MessageWriter } from '../../protocol/serializer';
import { openFdCount, settle, tempSocketPath } from '../support/fds';

/** A device with one 4 KiB memory BAR that counts what it sees. */
function countingDevice(): VfioUserDevice & {
  reads: number;
  writes: number;
  attached: number;
  detached: number;
  mem: Buffer;
} {
  const mem = Buffer.alloc(4096, 0xaa);
  const bar: RegionHandler = {
    size: mem.length,
    readable: true,
    writable: true,
    read(offset, dst) {
      dev.reads++;
      mem.copy(dst, 0, offset, offset + dst.length);
      return 0;
    },
    write(offset, src) {
      dev.writes++;
      src.copy(mem, offset);
      return 0;
    },
  };
  const dev = {
    reads: 0,
    writes: 0,
    attached: 0,
    detached: 0,
    mem,
    resetSupported: true,
    region: (i: number) => (i === 0 ? bar : undefined),
    irqCount: () => 0,
    attach(_ctx: DeviceContext) {
      dev.attached++;
    },
    detach() {
      dev.detached++;
    },
    reset() {},
  };
  return dev;
}

describe('vfio-user latency: warm-up', () => {
  it('drives the device through sessions (attach, the reads and writes of the plan, detach) and leaves no fd open', async () => {
    const before = openFdCount();
    const dev = countingDevice();
    const r = await warmUp(dev, {
      reads: [{ region: 0, offset: 8, count: 4 }],
      writes: [{ region: 0, offset: 64, count: 8 }],
      rounds: 100,
    });
    await settle(2);
    expect(dev.attached).to.equal(dev.detached);
    expect(dev.attached).to.be.at.least(1);
    expect(dev.reads).to.be.at.least(100);
    expect(dev.writes).to.be.greaterThan(0);
    expect(r.requests).to.be.greaterThan(100);
    // The writes are zeros, where the plan says; the rest is untouched.
    expect(dev.mem.subarray(64, 72).equals(Buffer.alloc(8))).to.equal(true);
    expect(dev.mem[63]).to.equal(0xaa);
    expect(dev.mem[72]).to.equal(0xaa);
    expect(openFdCount()).to.equal(before);
  });

  it('rejects when the device refuses an access of the plan, and still detaches', async () => {
    const before = openFdCount();
    const dev = countingDevice();
    let error: Error | null = null;
    await warmUp(dev, { reads: [{ region: 3, offset: 0, count: 4 }], rounds: 10 }).catch((e: Error) => {
      error = e;
    });
    await settle(2);
    expect(String(error)).to.match(/refused command 9/);
    expect(dev.detached).to.equal(dev.attached);
    expect(openFdCount()).to.equal(before);
  });

  it('a plan without reads is refused', async () => {
    let error: Error | null = null;
    await warmUp(countingDevice(), { reads: [] }).catch((e: Error) => {
      error = e;
    });
    expect(String(error)).to.match(/no reads/);
  });

  it('listen() with warmUp warms up, then serves a client as usual', async () => {
    const dev = countingDevice();
    const sock = tempSocketPath('warm');
    const server = new VfioUserServer({
      socketPath: sock,
      device: dev,
      warmUp: { reads: [{ region: 0, offset: 0, count: 4 }], rounds: 50 },
    });
    try {
      await server.listen();
      const warmReads = dev.reads;
      expect(warmReads).to.be.at.least(50);
      expect(server.sessionsServed).to.equal(0);
      const c = await VfioUserClient.connect(sock);
      dev.mem.writeUInt32LE(0x12345678, 16);
      expect((await c.regionRead(0, 16, 4)).readUInt32LE(0)).to.equal(0x12345678);
      c.close();
      expect(dev.reads).to.equal(warmReads + 1);
      expect(server.sessionsServed).to.equal(1);
    } finally {
      server.close();
    }
  });
});

describe('vfio-user latency: views made once', () => {
  it('MessageWriter.view() gives the same view for the same bytes, and a new one elsewhere', () => {
    const w = new MessageWriter(256);
    w.begin(1, 9, 1);
    const at = w.reserve(20);
    const v1 = w.view(at + 16, 4);
    expect(w.view(at + 16, 4)).to.equal(v1);
    expect(w.view(at + 12, 4)).to.not.equal(v1);
    w.end();
    w.clear();
    // The next reply at the same place: the same view, over the same bytes.
    w.begin(2, 9, 1);
    const at2 = w.reserve(20);
    const v2 = w.view(at2 + 12, 4);
    v2.writeUInt32LE(0xdeadbeef, 0);
    expect(w.view(at2 + 12, 4)).to.equal(v2);
    w.end();
    expect(w.buffer.readUInt32LE(16 + 12)).to.equal(0xdeadbeef);
  });

  it('MessageWriter.buffer holds the complete messages in its first `length` bytes; clear() rewinds', () => {
    const w = new MessageWriter(16);
    w.begin(7, 9, 1);
    w.bytes(Buffer.from('abcd'));
    w.end();
    expect(w.length).to.equal(20);
    expect(w.buffer.readUInt16LE(0)).to.equal(7);
    expect(w.buffer.subarray(16, 20).toString()).to.equal('abcd');
    w.begin(8, 9, 1);
    expect(() => w.clear()).to.throw(/still open/);
    w.end();
    w.clear();
    expect(w.length).to.equal(0);
  });

  it('ViewCache returns its view while it covers the same bytes of the same memory', () => {
    const cache = new ViewCache();
    const a = Buffer.alloc(64);
    const v = cache.get(a, 16, 4);
    expect(v.byteOffset).to.equal(a.byteOffset + 16);
    expect(v.length).to.equal(4);
    expect(cache.get(a, 16, 4)).to.equal(v);
    expect(cache.get(a.subarray(8), 8, 4)).to.equal(v); // same bytes through another view
    expect(cache.get(a, 20, 4)).to.not.equal(v);
    const b = Buffer.alloc(64);
    const w = cache.get(b, 20, 4);
    expect(w.buffer).to.equal(b.buffer);
    expect(cache.get(a, 0, 100).length).to.equal(64); // longer than cached: its own view, bounded by the parent
  });

  it('the transport passes each payload intact, whether staged (small) or not, in one read or many', async () => {
    const [a, b] = native.socketPair();
    const got: Buffer[] = [];
    const handler: TransportHandler = {
      message(_h: RawHeader, payload: Buffer) {
        got.push(Buffer.from(payload));
      },
      badHeader() {},
      closed() {},
    };
    const t = new Transport(b, handler, { maxMessageSize: 1 << 20, maxFdsPerMessage: 16 });
    t.start();
    try {
      const sizes = [0, 1, 16, 20, 63, 64, 65, 200, 4096, 16, 24];
      const w = new MessageWriter(64);
      sizes.forEach((n, i) => {
        w.begin(i, 9, 0);
        const at = w.reserve(n);
        for (let k = 0; k < n; k++) w.view(at + k, 1)[0] = (i * 31 + k) & 0xff;
        w.end();
      });
      const all = w.takeCopy();
      // All at once, then one message per write.
      expect(native.sendmsg(a, all, 0, all.length, null)).to.equal(all.length);
      await settle(3);
      let off = 0;
      for (const n of sizes) {
        const m = all.subarray(off, off + 16 + n);
        expect(native.sendmsg(a, m, 0, m.length, null)).to.equal(m.length);
        off += 16 + n;
        await settle(1);
      }
      await settle(2);
      expect(got.length).to.equal(2 * sizes.length);
      got.forEach((p, j) => {
        const i = j % sizes.length;
        expect(p.length).to.equal(sizes[i]);
        for (let k = 0; k < p.length; k++) expect(p[k]).to.equal((i * 31 + k) & 0xff);
      });
    } finally {
      t.close();
      fs.closeSync(a);
    }
  });
});
