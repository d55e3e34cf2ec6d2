// Namespaces: a file namespace written through the controller, flushed,
// closed and reopened with the data still there; the file created and sized
// (grown or shrunk); bounded operations in flight; Write Zeroes across
// chunks; refusals after close; RAM geometry checks; and the target the
// backend options build.

import { expect } from 'chai';
import { promises as fsp } from 'fs';
import * as os from 'os';
import * as path from 'path';
import {
  createNvmeofTarget,
  FileNamespace,
  NVMEOF_DEFAULTS,
  NvmeofTarget,
  RamNamespace,
} from '../../../lib/targets/nvmeof';
import { ADDR, adminHost, ioHost, newTarget } from './helpers';

function pattern(len: number, seed: number): Buffer {
  const b = Buffer.alloc(len);
  for (let i = 0; i < len; i++) b[i] = (i * 13 + seed) & 0xff;
  return b;
}

describe('nvmeof: file namespace', () => {
  let dir: string;
  beforeEach(async () => {
    dir = await fsp.mkdtemp(path.join(os.tmpdir(), 'nvmeof-ns-'));
  });
  afterEach(async () => {
    await fsp.rm(dir, { recursive: true, force: true });
  });

  it('is created at its size; a bigger file shrinks and a smaller one grows', async () => {
    const file = path.join(dir, 'a.img');
    let ns = await FileNamespace.open(1, file, 1 << 20, 4096);
    expect(ns.blocks).to.equal(256);
    await ns.close();
    expect((await fsp.stat(file)).size).to.equal(1 << 20);
    ns = await FileNamespace.open(1, file, 1 << 16, 512);
    await ns.close();
    expect((await fsp.stat(file)).size).to.equal(1 << 16);
    ns = await FileNamespace.open(1, file, 1 << 18, 512);
    await ns.close();
    expect((await fsp.stat(file)).size).to.equal(1 << 18);
  });

  it('write through the controller, flush, reopen: the data is there', async () => {
    const file = path.join(dir, 'ns.img');
    const data = pattern(16 * 512, 2);
    {
      const ns = await FileNamespace.open(1, file, 1 << 20, 512);
      const target = newTarget({ namespaces: [ns] });
      const io = await ioHost(await adminHost(target));
      data.copy(io.mem.at(ADDR.DATA, data.length));
      expect((await io.rw(0x01, 64, 16, ADDR.DATA)).status).to.equal(0);
      expect((await io.submit({ opcode: 0x00, nsid: 1 })).status).to.equal(0);
      await target.close();
    }
    const onDisk = await fsp.readFile(file);
    expect(onDisk.subarray(64 * 512, 80 * 512).equals(data)).to.equal(true);
    const ns = await FileNamespace.open(1, file, 1 << 20, 512);
    const target = newTarget({ namespaces: [ns] });
    const io = await ioHost(await adminHost(target));
    expect((await io.rw(0x02, 64, 16, ADDR.OUT)).status).to.equal(0);
    expect(io.mem.at(ADDR.OUT, data.length).equals(data)).to.equal(true);
    await target.close();
  });

  it('a write is complete (in the file) when it resolves, FUA or not', async () => {
    const file = path.join(dir, 'w.img');
    const ns = await FileNamespace.open(1, file, 1 << 16, 512);
    expect(await ns.write(3, pattern(512, 4), false)).to.equal(0);
    expect((await fsp.readFile(file)).subarray(3 * 512, 4 * 512).equals(pattern(512, 4))).to.equal(true);
    expect(await ns.write(4, pattern(512, 5), true)).to.equal(0);
    expect((await fsp.readFile(file)).subarray(4 * 512, 5 * 512).equals(pattern(512, 5))).to.equal(true);
    await ns.close();
  });

  it('keeps at most its depth of operations in flight; the rest wait and all complete in order', async () => {
    const file = path.join(dir, 'd.img');
    const ns = await FileNamespace.open(1, file, 1 << 20, 512, 4);
    let maxInFlight = 0;
    let maxWaiting = 0;
    const ops = Array.from({ length: 40 }, (_, i) => {
      const p = ns.write(i, pattern(512, i), false);
      maxInFlight = Math.max(maxInFlight, ns.inFlight);
      maxWaiting = Math.max(maxWaiting, ns.waiting);
      return p;
    });
    expect(maxInFlight).to.equal(4);
    expect(maxWaiting).to.equal(36);
    expect(await Promise.all(ops)).to.deep.equal(new Array(40).fill(0));
    expect([ns.inFlight, ns.waiting]).to.deep.equal([0, 0]);
    const out = Buffer.alloc(40 * 512);
    expect(await ns.read(0, out)).to.equal(0);
    for (let i = 0; i < 40; i++)
      expect(out.subarray(i * 512, (i + 1) * 512).equals(pattern(512, i)), `block ${i}`).to.equal(true);
    await ns.close();
  });

  it('Write Zeroes across several chunks; deallocate is advisory (the data stays)', async () => {
    const file = path.join(dir, 'z.img');
    const ns = await FileNamespace.open(1, file, 1 << 20, 512);
    await ns.write(0, pattern(1 << 20, 1), false);
    expect(await ns.writeZeroes(1, 600)).to.equal(0);
    const out = Buffer.alloc(602 * 512);
    await ns.read(0, out);
    expect(out.subarray(0, 512).equals(pattern(512, 1))).to.equal(true);
    expect(out.subarray(512, 601 * 512).equals(Buffer.alloc(600 * 512))).to.equal(true);
    expect(out.subarray(601 * 512).equals(pattern(1 << 20, 1).subarray(601 * 512, 602 * 512))).to.equal(true);
    expect([ns.dlfeat, await ns.deallocate()]).to.deep.equal([0, 0]);
    await ns.close();
  });

  it('close waits for what is in flight; afterwards operations report the namespace not ready', async () => {
    const ns = await FileNamespace.open(1, path.join(dir, 'c.img'), 1 << 16, 512);
    const w = ns.write(0, pattern(512, 1), false);
    await ns.close();
    expect(await w).to.equal(0);
    expect(await ns.read(0, Buffer.alloc(512))).to.equal(0x082);
    expect(await ns.flush()).to.equal(0x082);
  });

  it('refuses a directory and a bad geometry', async () => {
    let err: unknown;
    try {
      await FileNamespace.open(1, dir, 1 << 16, 512);
    } catch (e) {
      err = e;
    }
    expect(String(err)).to.match(/not a regular file|EISDIR/);
    for (const [size, bs] of [
      [1000, 512],
      [4096, 256],
      [0, 512],
    ] as const) {
      let e2: unknown;
      try {
        await FileNamespace.open(1, path.join(dir, 'g.img'), size, bs);
      } catch (e) {
        e2 = e;
      }
      expect(e2, `${size}/${bs}`).to.be.instanceOf(RangeError);
    }
  });
});

describe('nvmeof: RAM namespace and the built target', () => {
  it('checks its geometry', () => {
    expect(() => new RamNamespace(1, 1000, 512)).to.throw(RangeError);
    expect(() => new RamNamespace(1, 4096, 3000)).to.throw(RangeError);
    expect(new RamNamespace(1, 8192, 4096).blocks).to.equal(2);
  });

  it('createNvmeofTarget builds the subsystem, namespace and discovery entry the options describe', async () => {
    const dir = await fsp.mkdtemp(path.join(os.tmpdir(), 'nvmeof-t-'));
    try {
      const ram: NvmeofTarget = await createNvmeofTarget({ ...NVMEOF_DEFAULTS, size: 1 << 20, queues: 2 });
      expect(ram.subsystem.nqn).to.equal('nvmet-test');
      expect(ram.subsystem.maxIoQueues).to.equal(2);
      expect(ram.subsystem.namespaces.get(1)!.blocks).to.equal(2048);
      expect(ram.discovery.listed[0]!.port).to.deep.equal({ traddr: '192.168.200.1', trsvcid: '4420', portid: 1 });
      await ram.close();
      const file = path.join(dir, 'f.img');
      const onFile = await createNvmeofTarget({ ...NVMEOF_DEFAULTS, size: 1 << 20, bs: 4096, file, nsid: 7 });
      expect(onFile.subsystem.namespaces.get(7)).to.be.instanceOf(FileNamespace);
      await onFile.close();
      expect((await fsp.stat(file)).size).to.equal(1 << 20);
    } finally {
      await fsp.rm(dir, { recursive: true, force: true });
    }
  });
});
