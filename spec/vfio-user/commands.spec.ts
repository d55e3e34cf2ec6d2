// Every client command through a real socket, with hand-built bytes
// (docs/vfio-user-protocol.md 2.4-2.14, 4.2, 4.4, 4.5 and the checklist of section 5).
import { expect } from 'chai';
import * as fs from 'fs';
import * as sinon from 'sinon';
import * as native from '../../lib/native';
import { GuestRam } from '../../lib/vfio-user/client';
import { MemStatus } from '../../lib/vfio-user/guest-memory';
import type { Session } from '../../lib/vfio-user/session';
import { Bytes, msg } from '../support/bytes';
import { openFdCount, settle } from '../support/fds';
import {
  CMD,
  describeMsg,
  EINVAL,
  EIO,
  eventfdRead,
  FLAG_NO_REPLY,
  FLAG_REPLY,
  info16,
  IRQ,
  isErrorReply,
  Msg,
  RawPeer,
  regionAccessPayload,
  regionInfoPayload,
  setIrqsPayload,
  startServer,
  TestServer,
  waitDetached,
  dmaMapPayload,
  dmaUnmapPayload,
  ENOENT,
} from './raw-peer';

const BAR0_SIZE = 4096;
const CONFIG_SIZE = 256;
const IRQ_COUNTS = [1, 0, 4, 1, 0];

describe('vfio-user server: commands', () => {
  let t: TestServer;
  let peer: RawPeer;
  let id: number;
  const openEventfds: number[] = [];

  function session(): Session {
    const s = t.server.session;
    if (!s) throw new Error('no session');
    return s;
  }

  function efd(): number {
    const fd = native.eventfd(0, true);
    openEventfds.push(fd);
    return fd;
  }

  async function req(
    command: number,
    payload: Buffer = Buffer.alloc(0),
    fds: readonly number[] = [],
    flags = 0,
  ): Promise<Msg> {
    return peer.request(++id, command, payload, fds, flags);
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

  /** A REGION_READ of 4 bytes must get the very next message: proves nothing else was sent before it. */
  async function expectAliveAndNothingPending(): Promise<void> {
    const r = await req(CMD.REGION_READ, regionAccessPayload(0, 0, 4));
    expect(r.flags, describeMsg(r)).to.equal(FLAG_REPLY);
    expect(r.payload.readUInt32LE(12)).to.equal(4);
    await settle(2);
    expect(peer.inbox, 'no extra message').to.have.length(0);
    expect(peer.eof).to.equal(false);
  }

  let fdsBefore: number;

  beforeEach(async () => {
    fdsBefore = openFdCount();
    t = await startServer('cmd');
    peer = await RawPeer.negotiated(t.path);
    id = 0;
  });
  afterEach(async () => {
    peer.close();
    await waitDetached(t.server);
    t.server.close();
    for (const fd of openEventfds.splice(0)) fs.closeSync(fd);
    sinon.restore();
    await settle();
    expect(openFdCount(), 'no fd leaked').to.equal(fdsBefore);
  });

  // ---- DEVICE_GET_INFO -------------------------------------------------------------------

  describe('DEVICE_GET_INFO', () => {
    it('answers flags PCI|RESET, 9 regions, 5 irqs in a 16-byte struct', async () => {
      const r = await req(CMD.DEVICE_GET_INFO, info16(16, 0, 0, 0));
      expect(r.flags).to.equal(FLAG_REPLY);
      expect(r.size).to.equal(32);
      expect(r.payload).to.deep.equal(info16(16, 3, 9, 5));
    });

    it('answers a larger argsz with the same 16 bytes', async () => {
      const r = await req(CMD.DEVICE_GET_INFO, info16(64, 0, 0, 0));
      expect(r.payload).to.deep.equal(info16(16, 3, 9, 5));
    });

    it('refuses argsz 8 and a short payload with EINVAL', async () => {
      await expectError(CMD.DEVICE_GET_INFO, info16(8, 0, 0, 0), EINVAL);
      await expectError(CMD.DEVICE_GET_INFO, new Bytes().u32(16).u32(0).build(), EINVAL);
      await expectError(CMD.DEVICE_GET_INFO, Buffer.alloc(0), EINVAL);
      await expectAliveAndNothingPending();
    });
  });

  // ---- DEVICE_GET_REGION_INFO ---------------------------------------------------------------

  describe('DEVICE_GET_REGION_INFO', () => {
    it('answers every index 0..8 with the ScratchDevice sizes (32-byte struct, R|W for present regions)', async () => {
      const sizes = [BAR0_SIZE, 0, 0, 0, 0, 0, 0, CONFIG_SIZE, 0];
      for (let index = 0; index < 9; index++) {
        const r = await req(CMD.DEVICE_GET_REGION_INFO, regionInfoPayload(32, index));
        expect(r.flags, `index ${index}`).to.equal(FLAG_REPLY);
        expect(r.size).to.equal(48);
        const expected = new Bytes()
          .u32(32)
          .u32(sizes[index] ? 3 : 0)
          .u32(index)
          .u32(0)
          .u64(sizes[index]!)
          .u64(0)
          .build();
        expect(r.payload, `index ${index}`).to.deep.equal(expected);
      }
    });

    it('answers a larger argsz with the 32-byte struct only', async () => {
      const r = await req(CMD.DEVICE_GET_REGION_INFO, regionInfoPayload(80, 0));
      expect(r.size).to.equal(48);
      expect(r.payload.readUInt32LE(0), 'argsz = what is needed').to.equal(32);
      expect(r.payload.readUInt32LE(12), 'cap_offset').to.equal(0);
    });

    it('refuses index 9, argsz 16 and a short payload with EINVAL', async () => {
      await expectError(CMD.DEVICE_GET_REGION_INFO, regionInfoPayload(32, 9), EINVAL);
      await expectError(CMD.DEVICE_GET_REGION_INFO, regionInfoPayload(32, 0xffffffff), EINVAL);
      await expectError(CMD.DEVICE_GET_REGION_INFO, regionInfoPayload(16, 0), EINVAL);
      await expectError(CMD.DEVICE_GET_REGION_INFO, info16(32, 0, 0, 0), EINVAL);
      await expectAliveAndNothingPending();
    });
  });

  // ---- DEVICE_GET_REGION_IO_FDS ---------------------------------------------------------------

  describe('DEVICE_GET_REGION_IO_FDS', () => {
    it('answers count 0 (no ioeventfds) with a 16-byte struct and no fds', async () => {
      for (const index of [0, 7]) {
        const r = await req(CMD.DEVICE_GET_REGION_IO_FDS, info16(64, 0, index, 0));
        expect(r.flags).to.equal(FLAG_REPLY);
        expect(r.payload).to.deep.equal(info16(16, 0, index, 0));
      }
      expect(peer.receivedFds).to.deep.equal([]);
    });

    it('refuses flags != 0, count != 0, index 9 and argsz < 16 with EINVAL', async () => {
      await expectError(CMD.DEVICE_GET_REGION_IO_FDS, info16(64, 1, 0, 0), EINVAL);
      await expectError(CMD.DEVICE_GET_REGION_IO_FDS, info16(64, 0, 0, 1), EINVAL);
      await expectError(CMD.DEVICE_GET_REGION_IO_FDS, info16(64, 0, 9, 0), EINVAL);
      await expectError(CMD.DEVICE_GET_REGION_IO_FDS, info16(8, 0, 0, 0), EINVAL);
      await expectAliveAndNothingPending();
    });
  });

  // ---- DEVICE_GET_IRQ_INFO ----------------------------------------------------------------------

  describe('DEVICE_GET_IRQ_INFO', () => {
    it('answers flags EVENTFD and the count of each index', async () => {
      for (let index = 0; index < 5; index++) {
        const r = await req(CMD.DEVICE_GET_IRQ_INFO, info16(16, 0, index, 0));
        expect(r.payload, `index ${index}`).to.deep.equal(info16(16, 1, index, IRQ_COUNTS[index]!));
      }
      const big = await req(CMD.DEVICE_GET_IRQ_INFO, info16(64, 0, 2, 0));
      expect(big.payload).to.deep.equal(info16(16, 1, 2, 4));
    });

    it('refuses index 5, argsz 8 and a short payload with EINVAL', async () => {
      await expectError(CMD.DEVICE_GET_IRQ_INFO, info16(16, 0, 5, 0), EINVAL);
      await expectError(CMD.DEVICE_GET_IRQ_INFO, info16(8, 0, 0, 0), EINVAL);
      await expectError(CMD.DEVICE_GET_IRQ_INFO, new Bytes().u32(16).u32(0).u32(0).build(), EINVAL);
      await expectAliveAndNothingPending();
    });
  });

  // ---- DEVICE_SET_IRQS ------------------------------------------------------------------------------

  describe('DEVICE_SET_IRQS', () => {
    const T = IRQ.ACTION_TRIGGER;
    const invalid: { what: string; payload: Buffer; fds?: number }[] = [
      { what: 'no payload', payload: Buffer.alloc(0) },
      {
        what: 'a short payload (12 bytes)',
        payload: new Bytes()
          .u32(20)
          .u32(T | IRQ.DATA_NONE)
          .u32(2)
          .build(),
      },
      { what: 'argsz 16 (< 20)', payload: setIrqsPayload(T | IRQ.DATA_NONE, 2, 0, 1, [], 16) },
      { what: 'index 5', payload: setIrqsPayload(T | IRQ.DATA_NONE, 5, 0, 1) },
      {
        what: 'MASK|UNMASK together',
        payload: setIrqsPayload(IRQ.ACTION_MASK | IRQ.ACTION_UNMASK | IRQ.DATA_NONE, 0, 0, 1),
      },
      { what: 'NONE|BOOL together', payload: setIrqsPayload(T | IRQ.DATA_NONE | IRQ.DATA_BOOL, 2, 0, 1, [1]) },
      { what: 'no data type', payload: setIrqsPayload(T, 2, 0, 1) },
      { what: 'no action', payload: setIrqsPayload(IRQ.DATA_NONE, 2, 0, 1) },
      { what: 'an unknown flag bit', payload: setIrqsPayload(T | IRQ.DATA_NONE | 0x40, 2, 0, 1) },
      { what: 'start = count of vectors', payload: setIrqsPayload(T | IRQ.DATA_NONE, 2, 4, 1) },
      { what: 'start + count past the vectors', payload: setIrqsPayload(T | IRQ.DATA_NONE, 2, 2, 3) },
      { what: 'count past the vectors', payload: setIrqsPayload(T | IRQ.DATA_NONE, 2, 0, 5) },
      { what: 'start + count wrapping 32 bits', payload: setIrqsPayload(T | IRQ.DATA_NONE, 2, 1, 0xffffffff) },
      { what: 'an index without vectors (MSI)', payload: setIrqsPayload(T | IRQ.DATA_NONE, 1, 0, 1) },
      { what: 'ERR with MASK', payload: setIrqsPayload(IRQ.ACTION_MASK | IRQ.DATA_NONE, 3, 0, 1) },
      { what: 'ERR with count 2', payload: setIrqsPayload(T | IRQ.DATA_NONE, 3, 0, 2) },
      { what: 'count 0 with start 1', payload: setIrqsPayload(T | IRQ.DATA_NONE, 2, 1, 0) },
      { what: 'count 0 with UNMASK', payload: setIrqsPayload(IRQ.ACTION_UNMASK | IRQ.DATA_NONE, 2, 0, 0) },
      { what: 'count 0 with EVENTFD', payload: setIrqsPayload(T | IRQ.DATA_EVENTFD, 2, 0, 0) },
      { what: 'count 0 with EVENTFD and an fd', payload: setIrqsPayload(T | IRQ.DATA_EVENTFD, 2, 0, 0), fds: 1 },
      { what: 'an fd with BOOL', payload: setIrqsPayload(T | IRQ.DATA_BOOL, 2, 0, 1, [1]), fds: 1 },
      { what: 'an fd with NONE', payload: setIrqsPayload(T | IRQ.DATA_NONE, 2, 0, 1), fds: 1 },
      { what: '2 fds with count 1', payload: setIrqsPayload(T | IRQ.DATA_EVENTFD, 2, 0, 1), fds: 2 },
      { what: '3 fds with count 4', payload: setIrqsPayload(T | IRQ.DATA_EVENTFD, 2, 0, 4), fds: 3 },
      { what: 'BOOL with too few bytes', payload: setIrqsPayload(T | IRQ.DATA_BOOL, 2, 0, 2, [1]) },
      { what: 'BOOL with too many bytes', payload: setIrqsPayload(T | IRQ.DATA_BOOL, 2, 0, 1, [1, 1]) },
      { what: 'EVENTFD with data bytes', payload: setIrqsPayload(T | IRQ.DATA_EVENTFD, 2, 0, 1, [0, 0, 0, 0]), fds: 1 },
    ];
    for (const c of invalid) {
      it(`refuses ${c.what} with EINVAL, wires nothing and leaks no fd`, async () => {
        const fds: number[] = [];
        for (let i = 0; i < (c.fds ?? 0); i++) fds.push(efd());
        const before = openFdCount();
        await expectError(CMD.DEVICE_SET_IRQS, c.payload, EINVAL, fds);
        expect(openFdCount(), 'the server closed the fds of the refused request').to.equal(before);
        expect(session().irqs.wiredCount()).to.equal(0);
        expect(t.device.irqEvents).to.deep.equal([]);
        await expectAliveAndNothingPending();
      });
    }

    it('wires, signals, updates and disables MSI-X eventfds', async () => {
      const fds = [efd(), efd(), efd(), efd()];
      let r = await req(CMD.DEVICE_SET_IRQS, setIrqsPayload(T | IRQ.DATA_EVENTFD, 2, 0, 4), fds);
      expect(r.flags).to.equal(FLAG_REPLY);
      expect(r.size, 'header-only reply').to.equal(16);
      expect(session().irqs.wiredCount()).to.equal(4);
      expect(t.device.irqEvents.at(-1)).to.deep.equal({ index: 2, start: 0, count: 4, kind: 'wired' });
      for (let v = 0; v < 4; v++) expect(t.device.ctx!.signalIrq(2, v)).to.equal(true);
      expect(fds.map(eventfdRead)).to.deep.equal([1, 1, 1, 1]);

      // Update vector 0: the old server-side fd is closed (count unchanged), the new one is signalled.
      const fresh = efd();
      const before = openFdCount();
      r = await req(CMD.DEVICE_SET_IRQS, setIrqsPayload(T | IRQ.DATA_EVENTFD, 2, 0, 1), [fresh]);
      expect(r.flags).to.equal(FLAG_REPLY);
      expect(openFdCount(), 'old fd closed, new fd kept').to.equal(before);
      t.device.ctx!.signalIrq(2, 0);
      expect(eventfdRead(fresh)).to.equal(1);
      expect(eventfdRead(fds[0]!)).to.equal(0);

      // Disable the whole index: TRIGGER|NONE, start 0, count 0.
      const wired = openFdCount();
      r = await req(CMD.DEVICE_SET_IRQS, setIrqsPayload(T | IRQ.DATA_NONE, 2, 0, 0));
      expect(r.flags).to.equal(FLAG_REPLY);
      expect(session().irqs.wiredCount()).to.equal(0);
      expect(openFdCount(), 'the 4 server-side fds are closed').to.equal(wired - 4);
      expect(t.device.ctx!.signalIrq(2, 1)).to.equal(false);
      expect(t.device.irqEvents.at(-1)).to.deep.equal({ index: 2, start: 0, count: 4, kind: 'unwired' });
    });

    it("de-assigns with QEMU's fd-less TRIGGER|EVENTFD and keeps the other vectors", async () => {
      const fds = [efd(), efd(), efd(), efd()];
      await req(CMD.DEVICE_SET_IRQS, setIrqsPayload(T | IRQ.DATA_EVENTFD, 2, 0, 4), fds);
      const before = openFdCount();
      const r = await req(CMD.DEVICE_SET_IRQS, setIrqsPayload(T | IRQ.DATA_EVENTFD, 2, 1, 2));
      expect(r.flags).to.equal(FLAG_REPLY);
      expect(openFdCount()).to.equal(before - 2);
      expect([0, 1, 2, 3].map((v) => session().irqs.fd(2, v) >= 0)).to.deep.equal([true, false, false, true]);
      expect([0, 1, 2, 3].map((v) => t.device.ctx!.signalIrq(2, v))).to.deep.equal([true, false, false, true]);
      expect(fds.map(eventfdRead)).to.deep.equal([1, 0, 0, 1]);
      expect(t.device.irqEvents.at(-1)).to.deep.equal({ index: 2, start: 1, count: 2, kind: 'unwired' });
    });

    it('fires vectors for TRIGGER|NONE with count > 0 and for the selected TRIGGER|BOOL entries', async () => {
      const fds = [efd(), efd(), efd(), efd()];
      await req(CMD.DEVICE_SET_IRQS, setIrqsPayload(T | IRQ.DATA_EVENTFD, 2, 0, 4), fds);
      let r = await req(CMD.DEVICE_SET_IRQS, setIrqsPayload(T | IRQ.DATA_NONE, 2, 1, 2));
      expect(r.flags).to.equal(FLAG_REPLY);
      expect(fds.map(eventfdRead)).to.deep.equal([0, 1, 1, 0]);
      r = await req(CMD.DEVICE_SET_IRQS, setIrqsPayload(T | IRQ.DATA_BOOL, 2, 0, 4, [0, 1, 0, 1]));
      expect(r.flags).to.equal(FLAG_REPLY);
      expect(fds.map(eventfdRead)).to.deep.equal([0, 1, 0, 1]);
      expect(t.device.irqEvents.at(-1)).to.deep.equal({ index: 2, start: 0, count: 4, kind: 'trigger' });
    });

    it("passes MASK/UNMASK to the device and closes an UNMASK resample eventfd (QEMU's INTx sequence)", async () => {
      const trigger = efd();
      const resample = efd();
      await req(CMD.DEVICE_SET_IRQS, setIrqsPayload(T | IRQ.DATA_EVENTFD, 0, 0, 1), [trigger]);
      const before = openFdCount();
      for (const [flags, fds] of [
        [IRQ.ACTION_MASK | IRQ.DATA_NONE, []],
        [IRQ.ACTION_UNMASK | IRQ.DATA_EVENTFD, [resample]],
        [IRQ.ACTION_UNMASK | IRQ.DATA_NONE, []],
      ] as const) {
        const r = await req(CMD.DEVICE_SET_IRQS, setIrqsPayload(flags, 0, 0, 1), fds);
        expect(r.flags, describeMsg(r)).to.equal(FLAG_REPLY);
      }
      expect(openFdCount(), 'the resample fd is not kept').to.equal(before);
      expect(t.device.irqEvents.map((e) => `${e.kind}:${e.index}:${e.start}:${e.count}`)).to.deep.equal([
        'wired:0:0:1',
        'mask:0:0:1',
        'unmask:0:0:1',
        'unmask:0:0:1',
      ]);
      expect(session().irqs.fd(0, 0), 'the trigger fd stays wired').to.be.at.least(0);
    });

    it('wires the ERR eventfd (QEMU realize step 11)', async () => {
      const fd = efd();
      const r = await req(CMD.DEVICE_SET_IRQS, setIrqsPayload(T | IRQ.DATA_EVENTFD, 3, 0, 1), [fd]);
      expect(r.flags).to.equal(FLAG_REPLY);
      expect(t.device.ctx!.signalIrq(3, 0)).to.equal(true);
      expect(eventfdRead(fd)).to.equal(1);
    });
  });

  // ---- DEVICE_RESET -------------------------------------------------------------------------------

  describe('DEVICE_RESET', () => {
    it('replies header-only, resets the device and keeps DMA maps and irq fds', async () => {
      const ram = new GuestRam(1 << 16);
      try {
        await req(CMD.DMA_MAP, dmaMapPayload(3, 0, 0x10000, 1 << 16), [ram.fd]);
        const fd = efd();
        await req(CMD.DEVICE_SET_IRQS, setIrqsPayload(IRQ.ACTION_TRIGGER | IRQ.DATA_EVENTFD, 2, 1, 1), [fd]);
        const spy = sinon.spy(t.device, 'reset');
        const r = await req(CMD.DEVICE_RESET);
        expect(r.size).to.equal(16);
        expect(r.flags).to.equal(FLAG_REPLY);
        expect(r.error).to.equal(0);
        expect(spy.callCount).to.equal(1);
        expect(spy.firstCall.args).to.deep.equal(['device-reset']);
        expect(session().dma.regions).to.have.length(1);
        ram.buffer.write('still', 0x20);
        const dst = Buffer.alloc(5);
        expect(t.device.ctx!.memory.read(0x10020, dst)).to.equal(MemStatus.OK);
        expect(dst.toString()).to.equal('still');
        expect(t.device.ctx!.signalIrq(2, 1)).to.equal(true);
        expect(eventfdRead(fd)).to.equal(1);
      } finally {
        ram.close();
      }
    });

    it('refuses a DEVICE_RESET with a payload (EINVAL) and does not reset', async () => {
      const spy = sinon.spy(t.device, 'reset');
      await expectError(CMD.DEVICE_RESET, Buffer.alloc(4), EINVAL);
      expect(spy.callCount).to.equal(0);
      await expectAliveAndNothingPending();
    });
  });

  // ---- unsupported and unknown commands ----------------------------------------------------------------

  describe('unsupported commands', () => {
    const cases: [string, number, Buffer][] = [
      [
        'DEVICE_FEATURE (PROBE MIGRATION)',
        CMD.DEVICE_FEATURE,
        new Bytes()
          .u32(8)
          .u32((1 << 18) | (1 << 16) | 1)
          .build(),
      ],
      [
        'MIG_DATA_READ',
        CMD.MIG_DATA_READ,
        new Bytes()
          .u32(8 + 64)
          .u32(64)
          .build(),
      ],
      ['MIG_DATA_WRITE', CMD.MIG_DATA_WRITE, new Bytes().u32(12).u32(4).u32(0xabcd).build()],
      ['DMA_READ sent by the client', CMD.DMA_READ, new Bytes().u64(0).u64(4).build()],
      ['DMA_WRITE sent by the client', CMD.DMA_WRITE, new Bytes().u64(0).u64(4).u32(1).build()],
      ['the removed DIRTY_PAGES (14)', CMD.DIRTY_PAGES, new Bytes().u32(16).u32(0).u64(0).build()],
      ['an unknown command 999', 999, new Bytes().u32(16).u32(0).u64(0).build()],
      ['an unknown command 0', 0, new Bytes().u32(16).u32(0).u64(0).build()],
    ];
    for (const [what, command, payload] of cases) {
      it(`answers ${what} with EINVAL and stays up`, async () => {
        await expectError(command, payload, EINVAL);
        await expectAliveAndNothingPending();
      });
    }
  });

  // ---- REGION_READ / REGION_WRITE ---------------------------------------------------------------------

  describe('REGION_READ and REGION_WRITE', () => {
    it('echoes offset, region and count and moves the bytes', async () => {
      const data = Buffer.from([0xde, 0xad, 0xbe, 0xef, 1, 2, 3, 4]);
      let r = await req(CMD.REGION_WRITE, regionAccessPayload(0x100, 0, 8, data));
      expect(r.flags).to.equal(FLAG_REPLY);
      expect(r.payload).to.deep.equal(regionAccessPayload(0x100, 0, 8));
      expect(t.device.bar0.bytes.subarray(0x100, 0x108)).to.deep.equal(data);
      r = await req(CMD.REGION_READ, regionAccessPayload(0x100, 0, 8));
      expect(r.payload).to.deep.equal(regionAccessPayload(0x100, 0, 8, data));
      // The last byte of config space, and a whole-region read.
      t.device.config.bytes[255] = 0x5a;
      r = await req(CMD.REGION_READ, regionAccessPayload(255, 7, 1));
      expect(r.payload).to.deep.equal(regionAccessPayload(255, 7, 1, Buffer.from([0x5a])));
      r = await req(CMD.REGION_READ, regionAccessPayload(0, 7, CONFIG_SIZE));
      expect(r.payload.length).to.equal(16 + CONFIG_SIZE);
    });

    it('succeeds for count 0 (read and write) without touching the device', async () => {
      const before = Buffer.from(t.device.bar0.bytes);
      const w = await req(CMD.REGION_WRITE, regionAccessPayload(0x10, 0, 0));
      expect(w.flags).to.equal(FLAG_REPLY);
      const r = await req(CMD.REGION_READ, regionAccessPayload(0x10, 0, 0));
      expect(r.flags).to.equal(FLAG_REPLY);
      // A reply payload, if any, describes 0 data bytes.
      if (r.payload.length) expect(r.payload).to.deep.equal(regionAccessPayload(0x10, 0, 0));
      expect(t.device.bar0.bytes).to.deep.equal(before);
    });

    const bad: [string, number, Buffer][] = [
      ['offset 0xFFFFFFFFFFFFFFFF', CMD.REGION_READ, regionAccessPayload(0xffffffffffffffffn, 0, 4)],
      [
        'offset 0xFFFFFFFFFFFFFFFF (write)',
        CMD.REGION_WRITE,
        regionAccessPayload(0xffffffffffffffffn, 0, 4, Buffer.alloc(4)),
      ],
      ['offset 2^53-1', CMD.REGION_READ, regionAccessPayload(2 ** 53 - 1, 0, 4)],
      ['offset + count past the region', CMD.REGION_READ, regionAccessPayload(BAR0_SIZE - 2, 0, 4)],
      [
        'offset + count past the region (write)',
        CMD.REGION_WRITE,
        regionAccessPayload(BAR0_SIZE - 2, 0, 4, Buffer.alloc(4)),
      ],
      ['offset = region size', CMD.REGION_READ, regionAccessPayload(BAR0_SIZE, 0, 1)],
      ['count > 1 MiB', CMD.REGION_READ, regionAccessPayload(0, 0, (1 << 20) + 1)],
      ['count 0xFFFFFFFF', CMD.REGION_READ, regionAccessPayload(0, 0, 0xffffffff)],
      [
        'count > 1 MiB (write, short data)',
        CMD.REGION_WRITE,
        regionAccessPayload(0, 0, (1 << 20) + 1, Buffer.alloc(4)),
      ],
      ['region 0xdeadbeef', CMD.REGION_READ, regionAccessPayload(0, 0xdeadbeef, 4)],
      ['region 9', CMD.REGION_READ, regionAccessPayload(0, 9, 4)],
      ['an absent BAR (region 1)', CMD.REGION_READ, regionAccessPayload(0, 1, 4)],
      ['an absent BAR (write to region 5)', CMD.REGION_WRITE, regionAccessPayload(0, 5, 4, Buffer.alloc(4))],
      ['a write with fewer data bytes than count', CMD.REGION_WRITE, regionAccessPayload(0, 0, 8, Buffer.alloc(4))],
      ['a write with more data bytes than count', CMD.REGION_WRITE, regionAccessPayload(0, 0, 4, Buffer.alloc(8))],
      ['a short REGION_READ payload', CMD.REGION_READ, new Bytes().u64(0).u32(0).build()],
      ['a short REGION_WRITE payload', CMD.REGION_WRITE, new Bytes().u64(0).u32(0).build()],
    ];
    for (const [what, command, payload] of bad) {
      it(`refuses ${what} with EINVAL and stays up`, async () => {
        const before = Buffer.from(t.device.bar0.bytes);
        await expectError(command, payload, EINVAL);
        expect(t.device.bar0.bytes, 'nothing written').to.deep.equal(before);
        await expectAliveAndNothingPending();
      });
    }

    it('passes a device read failure on as an EIO error reply', async () => {
      t.device.failReadAt = 0x80;
      await expectError(CMD.REGION_READ, regionAccessPayload(0x80, 0, 4), EIO);
      expect((await req(CMD.REGION_READ, regionAccessPayload(0x84, 0, 4))).flags).to.equal(FLAG_REPLY);
    });

    it("never replies to a posted (NO_REPLY) write: the next message is the following read's reply", async () => {
      peer.send(msg(100, CMD.REGION_WRITE, FLAG_NO_REPLY, regionAccessPayload(0x200, 0, 4, Buffer.from('post'))));
      const r = await peer.request(101, CMD.REGION_READ, regionAccessPayload(0x200, 0, 4));
      expect(r.payload.subarray(16).toString()).to.equal('post');
      await settle(3);
      expect(peer.inbox).to.have.length(0);
    });

    it('applies pipelined posted writes in order before a following read', async () => {
      const parts: Buffer[] = [];
      for (let i = 0; i < 200; i++) {
        const v = Buffer.alloc(4);
        v.writeUInt32LE(i);
        // The same register over and over, plus one slot per write.
        parts.push(msg(1000 + i, CMD.REGION_WRITE, FLAG_NO_REPLY, regionAccessPayload(0x300, 0, 4, v)));
        parts.push(msg(2000 + i, CMD.REGION_WRITE, FLAG_NO_REPLY, regionAccessPayload(0x400 + 4 * i, 0, 4, v)));
      }
      const burst = Buffer.concat(parts);
      // Half in one write, the rest in odd-sized writes.
      peer.send(burst.subarray(0, burst.length >> 1));
      for (let at = burst.length >> 1; at < burst.length; at += 777)
        peer.send(burst.subarray(at, Math.min(at + 777, burst.length)));
      const r = await peer.request(3000, CMD.REGION_READ, regionAccessPayload(0x300, 0, 4));
      expect(r.payload.readUInt32LE(16)).to.equal(199);
      for (let i = 0; i < 200; i++) expect(t.device.bar0.bytes.readUInt32LE(0x400 + 4 * i)).to.equal(i);
      await settle(3);
      expect(peer.inbox).to.have.length(0);
    });

    it('sends no error reply for failing NO_REPLY commands', async () => {
      const fd = efd();
      const errorsBefore = session().stats.errors;
      const fdsBefore = openFdCount();
      peer.send(msg(200, CMD.REGION_WRITE, FLAG_NO_REPLY, regionAccessPayload(0, 0xdeadbeef, 4, Buffer.alloc(4))));
      peer.send(msg(201, CMD.REGION_WRITE, FLAG_NO_REPLY, regionAccessPayload(0, 0, 8, Buffer.alloc(4))));
      peer.send(msg(202, CMD.DMA_UNMAP, FLAG_NO_REPLY, dmaUnmapPayload(0, 0x1000, 0x1000)));
      peer.send(
        msg(203, CMD.DEVICE_SET_IRQS, FLAG_NO_REPLY, setIrqsPayload(IRQ.ACTION_TRIGGER | IRQ.DATA_NONE, 2, 0, 1)),
        [fd],
      );
      peer.send(msg(204, 999, FLAG_NO_REPLY, Buffer.alloc(8)));
      peer.send(msg(205, CMD.REGION_READ, FLAG_NO_REPLY, regionAccessPayload(0, 0, 4)));
      t.device.failReadAt = 0x80;
      peer.send(msg(206, CMD.REGION_READ, FLAG_NO_REPLY, regionAccessPayload(0x80, 0, 4)));
      const r = await peer.request(207, CMD.REGION_READ, regionAccessPayload(0, 0, 4));
      expect(r.flags).to.equal(FLAG_REPLY);
      await settle(3);
      expect(peer.inbox).to.have.length(0);
      expect(session().stats.errors - errorsBefore, 'errors counted').to.be.at.least(5);
      expect(openFdCount(), 'the fd of the refused SET_IRQS is closed').to.equal(fdsBefore);
    });

    it('applies REGION_WRITE_MULTI entries and answers wr_cnt', async () => {
      const entry = (offset: number, count: number, data: number[]): Bytes =>
        new Bytes()
          .u64(offset)
          .u32(0)
          .u32(count)
          .raw([...data, ...new Array<number>(8 - data.length).fill(0)]);
      const payload = Buffer.concat([
        new Bytes().u64(2).build(),
        entry(0x500, 4, [1, 2, 3, 4]).build(),
        entry(0x508, 2, [9, 9]).build(),
      ]);
      const r = await req(CMD.REGION_WRITE_MULTI, payload);
      expect(r.flags).to.equal(FLAG_REPLY);
      expect(r.payload).to.deep.equal(new Bytes().u64(2).build());
      expect([...t.device.bar0.bytes.subarray(0x500, 0x50b)]).to.deep.equal([1, 2, 3, 4, 0, 0, 0, 0, 9, 9, 0]);
    });
  });

  it('DMA_UNMAP of an unknown range gives ENOENT through the socket', async () => {
    await expectError(CMD.DMA_UNMAP, dmaUnmapPayload(0, 0x1000, 0x1000), ENOENT);
  });
});
