// The TypeScript client (lib/vfio-user/client.ts) against the real server: API misuse
// must not wedge it, error replies become VfioUserError with the errno.
import { expect } from 'chai';
import * as fs from 'fs';
import * as native from '../../lib/native';
import { GuestRam, VfioUserClient, VfioUserError } from '../../lib/vfio-user/client';
import { openFdCount, settle } from '../support/fds';
import { EINVAL, ENOENT, startServer, TestServer, waitDetached } from './raw-peer';

describe('vfio-user client against the server', () => {
  let t: TestServer;
  let c: VfioUserClient;
  let fdsBefore: number;

  beforeEach(async () => {
    fdsBefore = openFdCount();
    t = await startServer('client');
    c = await VfioUserClient.connect(t.path);
  });
  afterEach(async () => {
    c.close();
    await waitDetached(t.server);
    t.server.close();
    await settle();
    expect(openFdCount()).to.equal(fdsBefore);
  });

  it('rejects a request whose body cannot be encoded, and keeps working (with and without fds)', async () => {
    const ram = new GuestRam(1 << 16);
    try {
      // A negative u64 cannot be encoded: our bug-or-misuse, reported to the caller.
      const withFd = await Promise.resolve()
        .then(() => c.request({ kind: 'dmaMap', argsz: 32, flags: 3, offset: -1, address: 0, size: 1 << 16 }, [ram.fd]))
        .then(
          () => null,
          (e: unknown) => e,
        );
      expect(withFd).to.be.instanceOf(RangeError);
      const noFd = await Promise.resolve()
        .then(() => c.request({ kind: 'dmaUnmap', argsz: 24, flags: 0, address: -5, size: 0 }))
        .then(
          () => null,
          (e: unknown) => e,
        );
      expect(noFd).to.be.instanceOf(RangeError);
      // The next requests are encoded and answered normally.
      await c.dmaMap(0x100000, 1 << 16, ram.fd);
      expect(t.server.session!.dma.regions.map((r) => [r.iova, r.mapped])).to.deep.equal([[0x100000, true]]);
      expect((await c.regionRead(0, 0, 4)).length).to.equal(4);
    } finally {
      ram.close();
    }
  });

  it('turns error replies into VfioUserError with the errno', async () => {
    const e1 = await c.dmaUnmap(0x1000, 0x1000).then(
      () => null,
      (e: unknown) => e,
    );
    expect(e1).to.be.instanceOf(VfioUserError);
    expect((e1 as VfioUserError).errno).to.equal(ENOENT);
    const e2 = await c.getRegionInfo(9).then(
      () => null,
      (e: unknown) => e,
    );
    expect((e2 as VfioUserError).errno).to.equal(EINVAL);
    expect((await c.getInfo()).numRegions).to.equal(9);
  });

  it('wires eventfds and de-assigns them QEMU-style', async () => {
    const efd = native.eventfd(0, true);
    try {
      await c.setIrqEventfds(2, 0, [efd]);
      expect(t.server.session!.irqs.fd(2, 0)).to.be.at.least(0);
      await c.setIrqEventfds(2, 0, [], 1);
      expect(t.server.session!.irqs.wiredCount()).to.equal(0);
    } finally {
      fs.closeSync(efd);
    }
  });
});
