// I/O through the DMA callbacks with a Buffer as host memory: the whole
// bring-up (Connect, enable, Identify, Set Features, I/O Connect) then write
// and read back; every refusal (range, namespace, descriptor type, key 0,
// length, MDTS, flags) before data moves; Flush, Write Zeroes, Dataset
// Management; in-capsule data; the remote-invalidate key; queue depth.

import { expect } from 'chai';
import { decodeCqe, DmaStatus, encodeCqe, RamNamespace } from '../../../lib/targets/nvmeof';
import type { TargetDma } from '../../../lib/targets/nvmeof';
import {
  ADDR,
  adminHost,
  dnr,
  HostMemory,
  IN_CAPSULE,
  ioHost,
  KEY,
  KEYED,
  KEYED_INV,
  newTarget,
  PSDT_SGL,
  sc,
  SC,
  TestHost,
} from './helpers';

function pattern(len: number, seed: number): Buffer {
  const b = Buffer.alloc(len);
  for (let i = 0; i < len; i++) b[i] = (i * 7 + seed) & 0xff;
  return b;
}

async function ioPair(target = newTarget()): Promise<{ admin: TestHost; io: TestHost }> {
  const admin = await adminHost(target);
  return { admin, io: await ioHost(admin) };
}

describe('nvmeof: I/O', () => {
  it('Connect, enable, Identify, Set Features, I/O Connect, then write and read back through the callbacks', async () => {
    const target = newTarget();
    const mem = new HostMemory();
    mem.key(KEY);
    const admin = new TestHost(target, mem);
    expect((await admin.connect({ kato: 5000 })).status).to.equal(0);
    expect((await admin.enable()).dw0 & 1).to.equal(1);
    expect((await admin.identify(0x01)).status).to.equal(0);
    expect((await admin.setFeature(0x07, 0x00030003)).dw0).to.equal(0x00070007);
    expect((await admin.identify(0x02, 0)).status).to.equal(0);
    expect(mem.at(ADDR.OUT, 4).readUInt32LE(0)).to.equal(1);
    expect((await admin.identify(0x00, 1)).status).to.equal(0);
    const blocks = Number(mem.at(ADDR.OUT, 8).readBigUInt64LE(0));
    expect(blocks).to.equal(2048);
    const io = await ioHost(admin, 1);
    const data = pattern(8 * 512, 3);
    data.copy(mem.at(ADDR.DATA, data.length));
    expect((await io.rw(0x01, 100, 8, ADDR.DATA)).status).to.equal(0);
    expect((await io.rw(0x02, 100, 8, ADDR.OUT)).status).to.equal(0);
    expect(mem.at(ADDR.OUT, data.length).equals(data)).to.equal(true);
    expect((await io.rw(0x02, 101, 1, ADDR.OUT + 0x8000)).status).to.equal(0);
    expect(mem.at(ADDR.OUT + 0x8000, 512).equals(data.subarray(512, 1024))).to.equal(true);
    const smart = await admin.getLog(0x02, 512);
    expect(smart.status).to.equal(0);
    const s = mem.at(ADDR.OUT, 512);
    expect([s.readBigUInt64LE(32), s.readBigUInt64LE(48), s.readBigUInt64LE(64), s.readBigUInt64LE(80)]).to.deep.equal([
      1n,
      1n,
      2n,
      1n,
    ]);
  });

  it('the last block is reachable; one past it, or a huge LBA, is out of range (and moves nothing)', async () => {
    const { io } = await ioPair();
    expect((await io.rw(0x02, 2047, 1, ADDR.OUT)).status).to.equal(0);
    const calls = io.mem.calls;
    for (const [slba, nlb] of [
      [2047, 2],
      [2048, 1],
      [2 ** 60, 1],
    ] as const) {
      const c = await io.rw(0x01, slba, nlb, ADDR.DATA);
      expect([sc(c), dnr(c)], `slba ${slba}`).to.deep.equal([SC.LBA_RANGE, true]);
    }
    expect(io.mem.calls).to.equal(calls);
  });

  it('more than MDTS (128 KiB) in one command is an invalid field', async () => {
    const { io } = await ioPair();
    expect((await io.rw(0x02, 0, 256, ADDR.DATA)).status).to.equal(0);
    expect(sc(await io.rw(0x02, 0, 257, ADDR.DATA))).to.equal(SC.INVALID_FIELD);
  });

  it('a namespace that does not exist, and an opcode that is not an I/O command', async () => {
    const { io } = await ioPair();
    expect(sc(await io.rw(0x02, 0, 1, ADDR.OUT, 512, { nsid: 2 }))).to.equal(SC.INVALID_NS);
    expect(sc(await io.rw(0x02, 0, 1, ADDR.OUT, 512, { nsid: 0xffffffff }))).to.equal(SC.INVALID_NS);
    const c = await io.submit({ opcode: 0x05, nsid: 1 });
    expect([sc(c), dnr(c)]).to.deep.equal([SC.INVALID_OPCODE, true]);
  });

  it('descriptor checks: segment type, bad keyed subtype, key 0, wrong length; the callbacks are not called', async () => {
    const { io } = await ioPair();
    const calls = io.mem.calls;
    const cases: Array<[number, { addr: number; len: number; key: number; type: number }]> = [
      [SC.SGL_INVALID_TYPE, { addr: ADDR.DATA, len: 512, key: KEY, type: 0x20 }],
      [SC.INVALID_FIELD, { addr: ADDR.DATA, len: 512, key: KEY, type: 0x41 }],
      [SC.SGL_INVALID_DATA, { addr: ADDR.DATA, len: 512, key: 0, type: KEYED }],
      [SC.SGL_INVALID_DATA, { addr: ADDR.DATA, len: 1024, key: KEY, type: KEYED }],
      [SC.SGL_INVALID_DATA, { addr: 2 ** 53, len: 512, key: KEY, type: KEYED }],
    ];
    for (const [status, sgl] of cases) {
      for (const op of [0x01, 0x02] as const) {
        const c = await io.rw(op, 0, 1, sgl.addr, 512, { sgl });
        expect([sc(c), dnr(c)], `type ${sgl.type} key ${sgl.key} len ${sgl.len} op ${op}`).to.deep.equal([
          status,
          true,
        ]);
      }
    }
    expect(io.mem.calls).to.equal(calls);
  });

  it('key 0 is refused by the controller even with a DMA that would accept it', async () => {
    const target = newTarget();
    const mem = new HostMemory();
    mem.key(KEY);
    let keyZeroCalls = 0;
    const lenient: TargetDma = {
      fromHost: (key, addr, len, out) =>
        key === 0 ? (keyZeroCalls++, DmaStatus.OK) : mem.fromHost(key, addr, len, out),
      toHost: (key, addr, src) => (key === 0 ? (keyZeroCalls++, DmaStatus.OK) : mem.toHost(key, addr, src)),
    };
    const admin = new TestHost(target, mem, {}, lenient);
    expect((await admin.connect()).status).to.equal(0);
    await admin.enable();
    const id = await admin.submit({ opcode: 0x06, sgl: { addr: 0x1000, len: 4096, key: 0, type: KEYED }, cdw10: 1 });
    expect([sc(id), dnr(id)]).to.deep.equal([SC.SGL_INVALID_DATA, true]);
    const io = new TestHost(target, mem, {}, lenient);
    expect((await io.connect({ qid: 1, sqsize: 127, cntlid: 1 })).status).to.equal(0);
    for (const op of [0x01, 0x02] as const) {
      const c = await io.rw(op, 0, 1, 0x1000, 512, { sgl: { addr: 0x1000, len: 512, key: 0, type: KEYED } });
      expect([sc(c), dnr(c)]).to.deep.equal([SC.SGL_INVALID_DATA, true]);
    }
    const conn = await new TestHost(target, mem, {}, lenient).connect({ key: 0 });
    expect(sc(conn)).to.equal(SC.SGL_INVALID_DATA);
    expect(keyZeroCalls).to.equal(0);
  });

  it('a null descriptor (length 0, key 0) is fine for commands without data', async () => {
    const { io } = await ioPair();
    const calls = io.mem.calls;
    expect((await io.submit({ opcode: 0x00, nsid: 1, sgl: { addr: 0, len: 0, key: 0, type: KEYED } })).status).to.equal(
      0,
    );
    expect(io.mem.calls).to.equal(calls);
  });

  it('a failing callback (unknown key) is a data transfer error; a failed write leaves the blocks alone', async () => {
    const { io } = await ioPair();
    pattern(512, 9).copy(io.mem.at(ADDR.DATA, 512));
    await io.rw(0x01, 5, 1, ADDR.DATA);
    const sgl = { addr: ADDR.DATA, len: 512, key: 0x9999, type: KEYED };
    const w = await io.rw(0x01, 5, 1, ADDR.DATA, 512, { sgl });
    expect([sc(w), dnr(w)]).to.deep.equal([SC.DATA_XFER_ERROR, true]);
    expect(sc(await io.rw(0x02, 5, 1, ADDR.DATA, 512, { sgl }))).to.equal(SC.DATA_XFER_ERROR);
    await io.rw(0x02, 5, 1, ADDR.OUT);
    expect(io.mem.at(ADDR.OUT, 512).equals(pattern(512, 9))).to.equal(true);
    io.mem.failing = true;
    expect(sc(await io.rw(0x02, 5, 1, ADDR.OUT))).to.equal(SC.DATA_XFER_ERROR);
  });

  it('in-capsule data for a write; past the capsule is a bad offset, and a read cannot use it', async () => {
    const { io } = await ioPair();
    const data = pattern(512, 1);
    const write = (offset: number, len: number) =>
      io.submit(
        {
          opcode: 0x01,
          nsid: 1,
          sgl: { addr: offset, len, key: 0, type: IN_CAPSULE },
          cdw10: 7,
          cdw12: 0,
        },
        data,
      );
    expect((await write(0, 512)).status).to.equal(0);
    await io.rw(0x02, 7, 1, ADDR.OUT);
    expect(io.mem.at(ADDR.OUT, 512).equals(data)).to.equal(true);
    expect(sc(await write(16, 512))).to.equal(SC.SGL_INVALID_OFFSET);
    const read = await io.submit({
      opcode: 0x02,
      nsid: 1,
      sgl: { addr: 0, len: 512, key: 0, type: IN_CAPSULE },
      cdw10: 7,
    });
    expect(sc(read)).to.equal(SC.INVALID_FIELD);
  });

  it('fused commands and PSDT other than 01b are invalid fields', async () => {
    const { io } = await ioPair();
    expect(sc(await io.submit({ opcode: 0x02, nsid: 1, flags: PSDT_SGL | 1 }))).to.equal(SC.INVALID_FIELD);
    expect(sc(await io.submit({ opcode: 0x00, nsid: 1, flags: 0 }))).to.equal(SC.INVALID_FIELD);
  });

  it('the invalidate subtype hands the key back for a send with invalidate', async () => {
    const { io } = await ioPair();
    const c = await io.rw(0x02, 0, 1, ADDR.OUT, 512, { sgl: { addr: ADDR.OUT, len: 512, key: KEY, type: KEYED_INV } });
    expect([c.status, c.invalidateKey]).to.deep.equal([0, KEY]);
    expect((await io.rw(0x02, 0, 1, ADDR.OUT)).invalidateKey).to.equal(null);
  });

  it('Flush: the namespace, all namespaces, or an invalid nsid', async () => {
    const { io } = await ioPair();
    expect((await io.submit({ opcode: 0x00, nsid: 1 })).status).to.equal(0);
    expect((await io.submit({ opcode: 0x00, nsid: 0xffffffff })).status).to.equal(0);
    expect(sc(await io.submit({ opcode: 0x00, nsid: 3 }))).to.equal(SC.INVALID_NS);
  });

  it('Write Zeroes clears blocks without a data transfer; past the end is out of range', async () => {
    const { io } = await ioPair();
    pattern(4 * 512, 5).copy(io.mem.at(ADDR.DATA, 2048));
    await io.rw(0x01, 10, 4, ADDR.DATA);
    const wz = (slba: number, nlb: number) => io.submit({ opcode: 0x08, nsid: 1, cdw10: slba, cdw12: nlb - 1 });
    expect((await wz(11, 2)).status).to.equal(0);
    await io.rw(0x02, 10, 4, ADDR.OUT);
    const got = io.mem.at(ADDR.OUT, 2048);
    expect(got.subarray(512, 1536).equals(Buffer.alloc(1024))).to.equal(true);
    expect(got.subarray(0, 512).equals(pattern(2048, 5).subarray(0, 512))).to.equal(true);
    expect(sc(await wz(2047, 2))).to.equal(SC.LBA_RANGE);
  });

  it("Dataset Management deallocate zeroes a RAM namespace's ranges; a range past the end is out of range; the list may come in a longer buffer", async () => {
    const { io } = await ioPair();
    pattern(4 * 512, 8).copy(io.mem.at(ADDR.DATA, 2048));
    await io.rw(0x01, 20, 4, ADDR.DATA);
    const ranges = Buffer.alloc(32);
    ranges.writeUInt32LE(1, 4);
    ranges.writeBigUInt64LE(20n, 8); // range 0: 1 block at 20
    ranges.writeUInt32LE(1, 16 + 4);
    ranges.writeBigUInt64LE(23n, 16 + 8); // range 1: 1 block at 23
    ranges.copy(io.mem.at(ADDR.CONNECT, 32));
    const dsm = (attr: number, len = 32) =>
      io.submit({
        opcode: 0x09,
        nsid: 1,
        sgl: { addr: ADDR.CONNECT, len, key: KEY, type: KEYED },
        cdw10: 1,
        cdw11: attr,
      });
    expect((await dsm(0)).status).to.equal(0); // hints only: nothing changes
    await io.rw(0x02, 20, 4, ADDR.OUT);
    expect(io.mem.at(ADDR.OUT, 2048).equals(pattern(2048, 8))).to.equal(true);
    expect((await dsm(4)).status).to.equal(0);
    await io.rw(0x02, 20, 4, ADDR.OUT);
    const got = io.mem.at(ADDR.OUT, 2048);
    expect([
      got.subarray(0, 512).equals(Buffer.alloc(512)),
      got.subarray(1536).equals(Buffer.alloc(512)),
    ]).to.deep.equal([true, true]);
    expect(got.subarray(512, 1536).equals(pattern(2048, 8).subarray(512, 1536))).to.equal(true);
    ranges.writeBigUInt64LE(2048n, 8);
    ranges.copy(io.mem.at(ADDR.CONNECT, 32));
    expect(sc(await dsm(4))).to.equal(SC.LBA_RANGE);
    expect(sc(await dsm(4, 16))).to.equal(SC.SGL_INVALID_DATA);
    // A longer buffer is taken, as Linux hosts send it (room for 256 ranges): only the first NR ranges count.
    ranges.writeBigUInt64LE(21n, 8);
    ranges.copy(io.mem.at(ADDR.CONNECT, 32));
    io.mem.at(ADDR.CONNECT + 32, 4064).fill(0xff);
    expect((await dsm(4, 4096)).status).to.equal(0);
  });

  it('a queue takes at most its size in commands at once; the rest are interrupted (retryable)', async () => {
    const admin = await adminHost(newTarget({ namespaces: [new RamNamespace(1, 1 << 20, 512)] }));
    const io = new TestHost(admin.target, admin.mem);
    await io.connect({ qid: 1, sqsize: 1, cntlid: 1 });
    io.mem.async = true;
    const all = await Promise.all([0, 1, 2].map((i) => io.rw(0x02, i, 1, ADDR.OUT + i * 512)));
    expect(all.map((c) => sc(c))).to.deep.equal([0, 0, SC.CMD_INTERRUPTED]);
    expect(dnr(all[2]!)).to.equal(false);
  });

  it('a capsule shorter than an SQE is an invalid field for the cid it carries', async () => {
    const { io } = await ioPair();
    const c = await io.queue.submit(Buffer.from([0x02, 0x40, 0x34, 0x12]));
    expect([sc(c), c.cid]).to.deep.equal([SC.INVALID_FIELD, 0x1234]);
  });
});

describe('nvmeof: CQE encoding', () => {
  it('writes result, sq head, sq id, cid and the status shifted past the phase bit', () => {
    const buf = Buffer.alloc(16);
    encodeCqe(
      { dw0: 0x11223344, dw1: 0x55667788, sqhd: 0x0102, sqid: 3, cid: 0xbeef, status: 0x4182, invalidateKey: null },
      buf,
    );
    expect(buf.toString('hex')).to.equal('4433221188776655' + '0201' + '0300' + 'efbe' + '0483');
    expect(decodeCqe(buf)).to.deep.include({ dw0: 0x11223344, sqhd: 0x0102, sqid: 3, cid: 0xbeef, status: 0x4182 });
  });
});
