// The server through a real UNIX socket with the TypeScript client.
import { expect } from 'chai';
import * as fs from 'fs';
import { VfioUserServer } from '../../../lib/vfio-user/server';
import { VfioUserClient, GuestRam, VfioUserError } from '../../../lib/vfio-user/client';
import { ScratchDevice } from '../../support/scratch-device';
import { openFdCount, settle, tempSocketPath } from '../../support/fds';
import { MemStatus } from '../../../lib/vfio-user/guest-memory';
import * as native from '../../../lib/native';

describe('vfio-user server: basics', () => {
  let server: VfioUserServer;
  let device: ScratchDevice;
  let path: string;

  beforeEach(async () => {
    path = tempSocketPath('basic');
    device = new ScratchDevice();
    server = new VfioUserServer({ socketPath: path, device });
    await server.listen();
  });
  afterEach(() => server.close());

  it('negotiates VERSION with QEMU capabilities and answers minor 0', async () => {
    const c = await VfioUserClient.connect(path);
    expect(c.serverLimits?.maxMsgFds).to.equal(16);
    expect(c.serverLimits?.maxDataXferSize).to.equal(1 << 20);
    expect(device.events).to.deep.equal(['attach']);
    c.close();
  });

  it('reads and writes BAR0 and config through REGION_READ/WRITE', async () => {
    const c = await VfioUserClient.connect(path);
    await c.regionWrite(0, 0x10, Buffer.from([1, 2, 3, 4]));
    expect([...device.bar0.bytes.subarray(0x10, 0x14)]).to.deep.equal([1, 2, 3, 4]);
    device.bar0.bytes.writeUInt32LE(0xdeadbeef, 0x20);
    expect((await c.regionRead(0, 0x20, 4)).readUInt32LE(0)).to.equal(0xdeadbeef);
    c.close();
  });

  it('maps memfd guest RAM and translates addresses', async () => {
    const ram = new GuestRam(1 << 20);
    const c = await VfioUserClient.connect(path);
    await c.dmaMap(0x100000, 1 << 20, ram.fd, 0);
    ram.buffer.write('hello', 0x1234);
    const dst = Buffer.alloc(5);
    expect(device.ctx!.memory.read(0x101234, dst)).to.equal(MemStatus.OK);
    expect(dst.toString()).to.equal('hello');
    expect(device.ctx!.memory.read(0x1ffffe, Buffer.alloc(4))).to.equal(MemStatus.UNMAPPED);
    await c.dmaUnmap(0x100000, 1 << 20);
    expect(device.ctx!.memory.read(0x101234, dst)).to.equal(MemStatus.UNMAPPED);
    c.close();
    ram.close();
  });

  it('signals a wired eventfd', async () => {
    const c = await VfioUserClient.connect(path);
    const efd = native.eventfd(0, true);
    await c.setIrqEventfds(2, 1, [efd]);
    expect(device.ctx!.signalIrq(2, 1)).to.equal(true);
    expect(device.ctx!.signalIrq(2, 0)).to.equal(false);
    const b = Buffer.alloc(8);
    fs.readSync(efd, b);
    expect(b.readUInt32LE(0)).to.equal(1);
    fs.closeSync(efd);
    c.close();
  });

  it('returns error replies and stays up', async () => {
    const c = await VfioUserClient.connect(path);
    const err = await c.regionRead(0xdeadbeef, 0, 4).catch((e: unknown) => e);
    expect(err).to.be.instanceOf(VfioUserError);
    expect((err as VfioUserError).errno).to.equal(22);
    expect((await c.regionRead(0, 0, 4)).length).to.equal(4);
    c.close();
  });

  it('cleans up on disconnect and serves the next client', async () => {
    const before = openFdCount();
    const ram = new GuestRam(1 << 16);
    const c = await VfioUserClient.connect(path);
    await c.dmaMap(0, 1 << 16, ram.fd);
    const efd = native.eventfd(0, true);
    await c.setIrqEventfds(0, 0, [efd]);
    await c.regionWrite(0, 0, Buffer.from('keep'));
    c.close();
    ram.close();
    fs.closeSync(efd);
    await settle();
    expect(device.events).to.include('detach');
    expect(device.mapped).to.have.length(0);
    expect(openFdCount()).to.equal(before);
    const c2 = await VfioUserClient.connect(path);
    expect((await c2.regionRead(0, 0, 4)).toString()).to.equal('keep');
    expect(server.sessionsServed).to.equal(2);
    c2.close();
  });
});
