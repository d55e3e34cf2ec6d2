// A device handler that throws is a bug of ours. Under vfio-user dispatch it
// goes through the last-resort guard: an error line with the stack (rate
// limited), the contained-bug counter the stats file and /metrics show, the
// one access failed (EIO for a read, the write dropped), and the session
// serving on. Before, the region hot paths answered EIO with no line and no
// count, so a guest's TX ring could stop silently.
import { expect } from 'chai';
import { guardStats } from '../../lib/guard';
import type { Logger } from '../../lib/log';
import { msg } from '../support/bytes';
import { settle } from '../support/fds';
import {
  CMD,
  describeMsg,
  EIO,
  FLAG_NO_REPLY,
  FLAG_REPLY,
  isErrorReply,
  RawPeer,
  regionAccessPayload,
  startServer,
  TestServer,
} from './raw-peer';

class Lines implements Logger {
  readonly errors: string[] = [];
  readonly debugEnabled = false;
  error(m: string): void {
    this.errors.push(m);
  }
  warn(): void {}
  info(): void {}
  debug(): void {}
}

describe('vfio-user server: a throwing region handler', () => {
  let t: TestServer;
  let peer: RawPeer;
  let log: Lines;
  beforeEach(async () => {
    log = new Lines();
    t = await startServer('handler-bug', undefined, log);
    peer = await RawPeer.negotiated(t.path);
  });
  afterEach(async () => {
    peer.close();
    t.server.close();
  });

  it('a read: EIO for that access, one error line with the stack, counted, and the next access served', async () => {
    t.device.throwAt = 0x40;
    const before = guardStats.contained;
    const r = await peer.request(1, CMD.REGION_READ, regionAccessPayload(0x40, 0, 4));
    expect(isErrorReply(r, 1, CMD.REGION_READ, EIO), describeMsg(r)).to.equal(true);
    expect(guardStats.contained - before).to.equal(1);
    expect(log.errors).to.have.length(1);
    expect(log.errors[0]).to.match(
      /internal error in region 0 read handler \(offset 0x40\), contained as a device error: TypeError: planted bug in a read handler\n\s+at /,
    );
    const ok = await peer.request(2, CMD.REGION_READ, regionAccessPayload(0x44, 0, 4));
    expect(ok.flags, describeMsg(ok)).to.equal(FLAG_REPLY);
  });

  it('a posted write (a doorbell): counted and logged, not silent; later writes still land', async () => {
    t.device.throwAt = 0x80;
    const before = guardStats.contained;
    peer.send(msg(10, CMD.REGION_WRITE, FLAG_NO_REPLY, regionAccessPayload(0x80, 0, 4, Buffer.from('boom'))));
    peer.send(msg(11, CMD.REGION_WRITE, FLAG_NO_REPLY, regionAccessPayload(0x84, 0, 4, Buffer.from('okay'))));
    const r = await peer.request(12, CMD.REGION_READ, regionAccessPayload(0x84, 0, 4));
    expect(r.payload.subarray(16).toString()).to.equal('okay');
    await settle(2);
    expect(guardStats.contained - before).to.equal(1);
    expect(log.errors.join('\n')).to.match(/region 0 write handler \(offset 0x80\).*planted bug in a write handler/);
  });

  it('a burst of throwing accesses is logged a few times, then summarised, and every one is counted', async () => {
    t.device.throwAt = 0x40;
    const before = guardStats.contained;
    for (let i = 0; i < 50; i++) {
      const r = await peer.request(100 + i, CMD.REGION_READ, regionAccessPayload(0x40, 0, 4));
      expect(isErrorReply(r, 100 + i, CMD.REGION_READ, EIO)).to.equal(true);
    }
    expect(guardStats.contained - before).to.equal(50);
    expect(log.errors.length).to.be.at.least(1).and.at.most(10);
  });
});
