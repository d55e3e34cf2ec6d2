// Framing of the byte stream by the server, through its listening socket
// (docs/vfio-user-protocol.md 1.2, 1.4, 1.5, 4.2, 5; tested as ws tests its framing): splits at
// every byte offset, several messages per write, fds attached to the right
// message, bad headers, garbage, fd limits, and backpressure. The Transport
// alone: ./transport.spec.ts.
import { expect } from 'chai';
import * as fs from 'fs';
import * as net from 'net';
import * as native from '../../lib/native';
import type { Session } from '../../lib/vfio-user/session';
import { Bytes, msg } from '../support/bytes';
import { openFdCount, settle, until } from '../support/fds';
import {
  CMD,
  describeMsg,
  dmaMapPayload,
  dmaUnmapPayload,
  EINVAL,
  FLAG_ERROR,
  FLAG_NO_REPLY,
  FLAG_REPLY,
  info16,
  isErrorReply,
  Msg,
  QEMU_VERSION_JSON,
  RawPeer,
  regionAccessPayload,
  setIrqsPayload,
  startServer,
  TestServer,
  versionPayload,
  waitDetached,
} from './raw-peer';

const MiB = 1 << 20;

/** Small deterministic PRNG (mulberry32) so a failing garbage case can be replayed. */
function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let x = a;
    x = Math.imul(x ^ (x >>> 15), x | 1);
    x ^= x + Math.imul(x ^ (x >>> 7), x | 61);
    return ((x ^ (x >>> 14)) >>> 0) / 4294967296;
  };
}

function memfdOf(size: number): number {
  return native.memfdCreate('framing', size, true);
}

// ---- the server's framing, through the listening socket -----------------------------------------

describe('vfio-user server: framing', () => {
  let t: TestServer;
  let peer: RawPeer | null;
  let fdsBefore: number;
  const ours: number[] = [];

  function session(): Session {
    const s = t.server.session;
    if (!s) throw new Error('no session');
    return s;
  }

  function eventfd(): number {
    const fd = native.eventfd(0, true);
    ours.push(fd);
    return fd;
  }

  function memfd(size: number): number {
    const fd = memfdOf(size);
    ours.push(fd);
    return fd;
  }

  beforeEach(async () => {
    fdsBefore = openFdCount();
    t = await startServer('framing');
    peer = await RawPeer.negotiated(t.path);
  });
  afterEach(async () => {
    peer?.close();
    await waitDetached(t.server);
    t.server.close();
    for (const fd of ours.splice(0)) fs.closeSync(fd);
    await settle();
    expect(openFdCount(), 'no fd leaked').to.equal(fdsBefore);
  });

  function p(): RawPeer {
    if (!peer) throw new Error('no peer');
    return peer;
  }

  /** The server is still serving this connection in order. */
  async function probe(tag = 0): Promise<void> {
    const r = await p().request(0x7000 + tag, CMD.REGION_READ, regionAccessPayload(0, 0, 4));
    expect(r.flags, describeMsg(r)).to.equal(FLAG_REPLY);
  }

  it('decodes a REGION_WRITE split at every byte offset once, with the same effect and reply', async () => {
    let expectedReply: Buffer | null = null;
    for (let k = 1; k < 40; k++) {
      const v = Buffer.alloc(8);
      v.writeUInt32LE(k, 0);
      v.writeUInt32LE(~k >>> 0, 4);
      const m = msg(k, CMD.REGION_WRITE, 0, regionAccessPayload(0x100, 0, 8, v));
      expect(m.length).to.equal(40);
      const s = session();
      const bytesIn = s.transport.stats.bytesIn;
      const commands = s.stats.commands;
      p().send(m.subarray(0, k));
      await until(() => s.transport.stats.bytesIn === bytesIn + k, `the first ${k} bytes read`);
      expect(s.stats.commands, `k=${k}: nothing decoded from a partial message`).to.equal(commands);
      p().send(m.subarray(k));
      const r = await p().next();
      expect(r.id).to.equal(k);
      expectedReply ??= r.payload;
      expect(r.payload, `k=${k}`).to.deep.equal(expectedReply);
      expect(s.stats.commands, `k=${k}: decoded once`).to.equal(commands + 1);
      expect(t.device.bar0.bytes.subarray(0x100, 0x108), `k=${k}`).to.deep.equal(v);
    }
    expect(p().inbox).to.have.length(0);
  });

  it('handles a write + read pair split at every byte offset of the pair (replies in order)', async () => {
    for (let k = 1; k < 72; k++) {
      const v = Buffer.alloc(4);
      v.writeUInt32LE(0xabc00000 + k);
      const pair = Buffer.concat([
        msg(2 * k, CMD.REGION_WRITE, 0, regionAccessPayload(0x20, 0, 4, v)),
        msg(2 * k + 1, CMD.REGION_READ, 0, regionAccessPayload(0x20, 0, 4)),
      ]);
      p().send(pair.subarray(0, k));
      await settle(1);
      p().send(pair.subarray(k));
      const w = await p().next();
      const r = await p().next();
      expect([w.id, w.command, w.flags]).to.deep.equal([2 * k, CMD.REGION_WRITE, FLAG_REPLY]);
      expect([r.id, r.command, r.flags]).to.deep.equal([2 * k + 1, CMD.REGION_READ, FLAG_REPLY]);
      expect(r.payload.readUInt32LE(16), `k=${k}`).to.equal(0xabc00000 + k);
    }
  });

  it('maps a DMA_MAP split at every offset, with its fd on either part', async () => {
    const fd = memfd(0x10000);
    for (let k = 1; k < 48; k++) {
      for (const fdOnFirst of [true, false]) {
        const m = msg(k, CMD.DMA_MAP, 0, dmaMapPayload(3, 0, 0x800000, 0x10000));
        p().send(m.subarray(0, k), fdOnFirst ? [fd] : []);
        await settle(1);
        p().send(m.subarray(k), fdOnFirst ? [] : [fd]);
        const r = await p().next();
        expect(r.flags, `k=${k} ${describeMsg(r)}`).to.equal(FLAG_REPLY);
        expect(
          session().dma.regions.map((x) => x.mapped),
          `k=${k} fd on first: ${fdOnFirst}`,
        ).to.deep.equal([true]);
        const u = await p().request(k, CMD.DMA_UNMAP, dmaUnmapPayload(0, 0x800000, 0x10000));
        expect(u.flags).to.equal(FLAG_REPLY);
      }
    }
  });

  it('handles several messages in one write, replying to each in order', async () => {
    const burst = Buffer.concat([
      msg(1, CMD.DEVICE_GET_INFO, 0, info16(16, 0, 0, 0)),
      msg(2, CMD.REGION_WRITE, 0, regionAccessPayload(0, 0, 4, Buffer.from('abcd'))),
      msg(3, CMD.REGION_WRITE, FLAG_NO_REPLY, regionAccessPayload(4, 0, 4, Buffer.from('efgh'))),
      msg(4, CMD.REGION_READ, 0, regionAccessPayload(0, 0, 8)),
      msg(5, CMD.DEVICE_GET_IRQ_INFO, 0, info16(16, 0, 2, 0)),
    ]);
    p().send(burst);
    const got: Msg[] = [];
    for (let i = 0; i < 4; i++) got.push(await p().next());
    expect(got.map((m) => m.id)).to.deep.equal([1, 2, 4, 5]);
    expect(got[2]!.payload.subarray(16).toString()).to.equal('abcdefgh');
  });

  it('attaches the fd of a DMA_MAP sent right after fd-less messages in the same burst to the DMA_MAP', async () => {
    const fd = memfd(0x10000);
    // Separate sendmsg calls with no turn of the event loop between them: the server reads them together.
    p().send(msg(1, CMD.REGION_READ, 0, regionAccessPayload(0, 0, 4)));
    p().send(msg(2, CMD.DMA_MAP, 0, dmaMapPayload(3, 0, 0x900000, 0x10000)), [fd]);
    p().send(msg(3, CMD.REGION_READ, 0, regionAccessPayload(0, 0, 4)));
    p().send(msg(4, CMD.DMA_MAP, 0, dmaMapPayload(1, 0, 0xa00000, 0x1000)));
    const ids: number[] = [];
    for (let i = 0; i < 4; i++) {
      const r = await p().next();
      expect(r.flags, describeMsg(r)).to.equal(FLAG_REPLY);
      ids.push(r.id);
    }
    expect(ids).to.deep.equal([1, 2, 3, 4]);
    expect(session().dma.regions.map((r) => [r.iova, r.mapped])).to.deep.equal([
      [0x900000, true],
      [0xa00000, false],
    ]);
    // Both in one sendmsg (the fd on the write that ends with DMA_MAP) also works.
    const both = Buffer.concat([
      msg(5, CMD.REGION_READ, 0, regionAccessPayload(0, 0, 4)),
      msg(6, CMD.DMA_MAP, 0, dmaMapPayload(3, 0, 0xb00000, 0x10000)),
    ]);
    p().send(both, [fd]);
    expect((await p().next()).flags).to.equal(FLAG_REPLY);
    expect((await p().next()).flags).to.equal(FLAG_REPLY);
    expect(session().dma.regions.find((r) => r.iova === 0xb00000)?.mapped).to.equal(true);
  });

  it('closes the session cleanly on a truncated header then EOF, releasing its fds, and serves the next client', async () => {
    const efd = eventfd();
    const served = t.server.sessionsServed;
    p().send(msg(1, CMD.DMA_MAP, 0, dmaMapPayload(3, 0, 0, 0x1000)).subarray(0, 10), [efd]);
    await settle(2);
    p().close();
    peer = null;
    await waitDetached(t.server);
    expect(t.device.events.at(-1)).to.equal('detach');
    peer = await RawPeer.negotiated(t.path);
    expect(t.server.sessionsServed).to.equal(served + 1);
    await probe();
  });

  it('closes the session cleanly on a truncated body then EOF', async () => {
    const fd = memfd(0x1000);
    p().send(msg(1, CMD.DMA_MAP, 0, dmaMapPayload(3, 0, 0, 0x1000)).subarray(0, 30), [fd]);
    await settle(2);
    p().close();
    peer = null;
    await waitDetached(t.server);
    peer = await RawPeer.negotiated(t.path);
    await probe();
  });

  for (const [what, size] of [
    ['8', 8],
    ['0', 0],
    ['64 MiB', 64 << 20],
    ['1 MiB + 33', MiB + 33],
    ['0xFFFFFFFF', 0xffffffff],
  ] as const) {
    it(`answers msg_size ${what} with EINVAL, then closes`, async () => {
      p().send(new Bytes().u16(9).u16(CMD.REGION_WRITE).u32(size).u32(0).u32(0).build());
      const r = await p().next();
      expect(isErrorReply(r, 9, CMD.REGION_WRITE, EINVAL), describeMsg(r)).to.equal(true);
      await p().waitEof();
      p().close();
      peer = await RawPeer.negotiated(t.path);
      await probe();
    });
  }

  it('accepts the largest message (1 MiB + 32: a 1 MiB REGION_WRITE) and stays up', async () => {
    const m = msg(9, CMD.REGION_WRITE, 0, regionAccessPayload(0, 0, MiB, Buffer.alloc(MiB)));
    expect(m.length).to.equal(MiB + 32);
    await p().sendAll(m);
    const r = await p().next();
    // BAR0 is 4 KiB, so the access itself is refused, but the message was read and the link stays.
    expect(isErrorReply(r, 9, CMD.REGION_WRITE, EINVAL), describeMsg(r)).to.equal(true);
    expect(r.size).to.equal(16);
    await probe();
  });

  it('closes all 17 fds of a message over the limit of 16, with EINVAL', async () => {
    const fds: number[] = [];
    for (let i = 0; i < 17; i++) fds.push(eventfd());
    const before = openFdCount();
    const r = await p().request(3, CMD.DEVICE_SET_IRQS, setIrqsPayload(0x24, 2, 0, 4), fds);
    expect(isErrorReply(r, 3, CMD.DEVICE_SET_IRQS, EINVAL), describeMsg(r)).to.equal(true);
    expect(openFdCount()).to.equal(before);
    expect(session().irqs.wiredCount()).to.equal(0);
    await probe();
  });

  for (const [what, command, payload] of [
    ['REGION_READ', CMD.REGION_READ, regionAccessPayload(0, 0, 4)],
    ['REGION_WRITE', CMD.REGION_WRITE, regionAccessPayload(0, 0, 4, Buffer.from('nope'))],
    ['DEVICE_GET_INFO', CMD.DEVICE_GET_INFO, info16(16, 0, 0, 0)],
    ['DMA_UNMAP', CMD.DMA_UNMAP, dmaUnmapPayload(2, 0, 0)],
    ['DEVICE_RESET', CMD.DEVICE_RESET, Buffer.alloc(0)],
  ] as const) {
    it(`closes fds sent with ${what} and answers EINVAL without acting`, async () => {
      const fds = [eventfd(), memfd(0x1000)];
      const before = openFdCount();
      const bar0 = Buffer.from(t.device.bar0.bytes);
      const r = await p().request(4, command, payload, fds);
      expect(isErrorReply(r, 4, command, EINVAL), describeMsg(r)).to.equal(true);
      expect(openFdCount()).to.equal(before);
      expect(t.device.bar0.bytes).to.deep.equal(bar0);
      expect(t.device.resets).to.deep.equal([]);
      await probe();
    });
  }

  for (const [what, flags] of [
    ['reply (1)', FLAG_REPLY],
    ['error reply (1 + ERROR)', FLAG_REPLY | FLAG_ERROR],
    ['2', 2],
    ['15', 15],
  ] as const) {
    it(`answers an unsolicited message of type ${what} with EINVAL and stays up`, async () => {
      const r = await p().request(5, CMD.REGION_READ, regionAccessPayload(0, 0, 4), [], flags);
      // Only commands are accepted (vfio-user-protocol.md 4.2); type 2 is neither.
      expect(isErrorReply(r, 5, CMD.REGION_READ, EINVAL), describeMsg(r)).to.equal(true);
      expect(session().stats.regionReads, 'not served').to.equal(0);
      await probe();
    });
  }

  it('bounds fds queued for an incomplete message: a flood of fds on header bytes closes the connection', async () => {
    const fds: number[] = [];
    for (let i = 0; i < 16; i++) fds.push(eventfd());
    const m = msg(1, CMD.REGION_READ, 0, regionAccessPayload(0, 0, 4));
    // 31 one-byte writes of a 32-byte message, 16 fds each: 496 fds wait for one incomplete message.
    for (let i = 0; i < 31 && !p().eof; i++) {
      p().send(m.subarray(i, i + 1), fds);
      await settle(1);
    }
    await p().waitEof();
    p().close();
    peer = null;
    await waitDetached(t.server);
    peer = await RawPeer.negotiated(t.path);
    await probe();
  });

  it('still answers a client that half-closes (shutdown(SHUT_WR)) right after its requests', async () => {
    p().close();
    peer = null;
    await waitDetached(t.server);
    const c = net.createConnection({ path: t.path, allowHalfOpen: true });
    await new Promise((r) => c.once('connect', r));
    const chunks: Buffer[] = [];
    c.on('data', (d: Buffer) => chunks.push(d));
    c.end(
      Buffer.concat([
        msg(1, CMD.VERSION, 0, versionPayload(0, 0, QEMU_VERSION_JSON)),
        msg(2, CMD.REGION_WRITE, 0, regionAccessPayload(0, 0, 4, Buffer.from('half'))),
        msg(3, CMD.REGION_READ, 0, regionAccessPayload(0, 0, 4)),
      ]),
    );
    await new Promise((r) => c.once('end', r));
    c.destroy();
    const all = Buffer.concat(chunks);
    const ids: number[] = [];
    for (let at = 0; at + 16 <= all.length; at += all.readUInt32LE(at + 4)) ids.push(all.readUInt16LE(at));
    expect(ids).to.deep.equal([1, 2, 3]);
    expect(all.subarray(all.length - 4).toString()).to.equal('half');
    await waitDetached(t.server);
    peer = await RawPeer.negotiated(t.path);
  });

  it('closes cleanly when a client floods requests and hangs up without reading (EPIPE/ECONNRESET)', async () => {
    p().pause();
    const one = msg(1, CMD.REGION_READ, 0, regionAccessPayload(0, 0, 4096));
    const burst = Buffer.concat(new Array<Buffer>(2048).fill(one));
    let sent = 0;
    for (let i = 0; i < 200; i++) {
      const n = native.sendmsg(p().fd, burst, 0, burst.length, null);
      if (n > 0) sent += n;
      await settle(1);
      if (n < 0 && i > 20) break;
    }
    // The server holds megabytes of replies for us when we hang up.
    const s = session();
    expect(sent).to.be.greaterThan(64 * 1024);
    expect(s.stats.regionReads * (32 + 4096) - s.transport.stats.bytesOut).to.be.greaterThan(8 * MiB);
    p().close();
    peer = null;
    await waitDetached(t.server);
    peer = await RawPeer.negotiated(t.path);
    await probe();
  });

  it('survives 1000 seeded random buffers and keeps accepting clients, leaking no fd', async function () {
    this.timeout(60000);
    const rand = prng(0x5eed1234);
    const byte = (): number => Math.floor(rand() * 256);
    const word = (): number => {
      const k = rand();
      if (k < 0.3) return 0;
      if (k < 0.6) return Math.floor(rand() * 9);
      if (k < 0.7) return 0xffffffff;
      return Math.floor(rand() * 0x100000000);
    };
    const payloadLens = [0, 4, 8, 12, 16, 20, 21, 24, 32, 36, 40, 48];
    let probes = 0;
    let reconnects = 0;
    for (let i = 0; i < 1000; i++) {
      if (i % 4 === 0) {
        // Pure garbage on a fresh, un-negotiated connection, then hang up.
        peer?.close();
        await waitDetached(t.server);
        const served = t.server.sessionsServed;
        peer = RawPeer.connect(t.path);
        const g = Buffer.alloc(1 + Math.floor(rand() * 80));
        for (let j = 0; j < g.length; j++) g[j] = byte();
        peer.send(g, rand() < 0.2 ? [eventfd()] : []);
        await until(() => t.server.sessionsServed === served + 1, 'the garbage client accepted');
        await settle(1);
        peer.close();
        await waitDetached(t.server);
        peer = await RawPeer.negotiated(t.path);
        reconnects++;
        continue;
      }
      // A well-framed message with random contents on a negotiated connection.
      const len = payloadLens[Math.floor(rand() * payloadLens.length)]! + (rand() < 0.2 ? Math.floor(rand() * 8) : 0);
      const body = new Bytes();
      while (body.length + 4 <= len) body.u32(word());
      while (body.length < len) body.u8(byte());
      const command = rand() < 0.9 ? 1 + Math.floor(rand() * 18) : Math.floor(rand() * 0x10000);
      const flagChoices = [
        0,
        0,
        0,
        FLAG_NO_REPLY,
        FLAG_REPLY,
        FLAG_REPLY | FLAG_ERROR,
        Math.floor(rand() * 0x100000000),
      ];
      const flags = flagChoices[Math.floor(rand() * flagChoices.length)]!;
      const fds = rand() < 0.15 ? [rand() < 0.5 ? eventfd() : memfd(0x2000)] : [];
      const m = new Bytes()
        .u16(Math.floor(rand() * 0x6000))
        .u16(command)
        .u32(16 + len)
        .u32(flags)
        .u32(word())
        .raw(body.build())
        .build();
      p().send(m, fds);
      // Probe with a unique id and skip whatever answered the random message.
      const probeId = 0x7000 + (probes++ % 0x1000);
      p().send(msg(probeId, CMD.REGION_READ, 0, regionAccessPayload(0, 0, 4)));
      for (;;) {
        const r = await p()
          .next()
          .catch(() => null);
        if (!r) {
          // Only a broken header may close a negotiated connection; msg_size was right here.
          throw new Error(
            `connection closed after random message ${i} (cmd ${command} flags 0x${flags.toString(16)} len ${len})`,
          );
        }
        if (r.id === probeId && r.command === CMD.REGION_READ) {
          // The random message may have been a DMA_MAP/RESET; the probe must still be served.
          expect(r.flags, `probe after message ${i}`).to.equal(FLAG_REPLY);
          break;
        }
      }
    }
    expect(reconnects).to.equal(250);
    expect(probes).to.equal(750);
    // afterEach checks the fd count once the last client is gone.
  });

  it('stops reading while its send queue is full and serves everything in order afterwards (64 MiB of REGION_READs)', async function () {
    this.timeout(120000);
    const REQ = 32;
    const total = 64 * MiB;
    const count = total / REQ;
    const perChunk = MiB / REQ;
    const chunk = (c: number): Buffer => {
      const buf = Buffer.alloc(MiB);
      for (let j = 0; j < perChunk; j++) {
        const i = c * perChunk + j;
        const at = j * REQ;
        buf.writeUInt16LE(i & 0xffff, at);
        buf.writeUInt16LE(CMD.REGION_READ, at + 2);
        buf.writeUInt32LE(REQ, at + 4);
        buf.writeUInt32LE((i % 1024) * 4, at + 16);
        buf.writeUInt32LE(4, at + 28);
      }
      return buf;
    };
    const s = session();
    const readsBefore = s.stats.regionReads;
    const outBefore = s.transport.stats.bytesOut;
    const queued = (): number => (s.stats.regionReads - readsBefore) * 36 - (s.transport.stats.bytesOut - outBefore);
    let sent = 0;
    let cur: Buffer | null = null;
    let curAt = 0;
    /** Write as much as the socket takes now; returns the bytes written. */
    const pump = (): number => {
      let n = 0;
      while (sent < total) {
        if (!cur) {
          cur = chunk(sent / MiB);
          curAt = 0;
        }
        const w = native.sendmsg(p().fd, cur, curAt, cur.length - curAt, null);
        if (w < 0) break;
        n += w;
        sent += w;
        curAt += w;
        if (curAt === cur.length) cur = null;
      }
      return n;
    };

    // Phase 1: never read replies. The server must stop reading once its queue is full.
    p().pause();
    let stalls = 0;
    let maxQueued = 0;
    // Until the client is blocked and the server's queue passed its 16 MiB threshold (then it must pause).
    const deadline = Date.now() + 60000;
    while (!(stalls >= 40 && queued() > 16 * MiB) && sent < total && Date.now() < deadline) {
      stalls = pump() === 0 ? stalls + 1 : 0;
      maxQueued = Math.max(maxQueued, queued());
      await new Promise((r) => setTimeout(r, 2));
    }
    const inAtStall = s.transport.stats.bytesIn;
    await new Promise((r) => setTimeout(r, 50));
    expect(sent, 'the client got blocked well before 64 MiB').to.be.lessThan(total / 2);
    expect(s.transport.stats.bytesIn, 'the server stopped reading').to.equal(inAtStall);
    expect(maxQueued, 'server queue bounded near 16 MiB').to.be.at.most(17 * MiB);
    expect(queued(), 'the server did queue replies').to.be.greaterThan(8 * MiB);

    // Phase 2: read everything, keep writing; every reply arrives once, in order.
    let received = 0;
    let bad = '';
    p().sink = (m: Msg): void => {
      if (!bad) {
        const off = m.payload.length === 20 ? m.payload.readUInt32LE(0) : -1;
        if (
          m.id !== (received & 0xffff) ||
          m.command !== CMD.REGION_READ ||
          m.flags !== FLAG_REPLY ||
          m.size !== 36 ||
          off !== (received % 1024) * 4
        ) {
          bad = `reply ${received}: ${describeMsg(m)} offset ${off}`;
        }
      }
      received++;
    };
    p().resume();
    while (received < count && !bad) {
      pump();
      maxQueued = Math.max(maxQueued, queued());
      await new Promise((r) => setImmediate(r));
    }
    expect(bad).to.equal('');
    expect(received).to.equal(count);
    expect(sent).to.equal(total);
    expect(maxQueued).to.be.at.most(17 * MiB);
    expect(s.stats.regionReads - readsBefore).to.equal(count);
    p().sink = null;
    await probe();
  });
});
