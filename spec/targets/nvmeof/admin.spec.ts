// Admin commands: Identify (controller, namespace, active list, descriptors,
// NVM controller), Get/Set Features, Get Log Page (error, SMART, changed
// namespaces), Asynchronous Event Requests, Abort and Keep Alive, with every
// bad field answered by its status. Offsets in the checks are the NVMe
// specification's, written out.

import { expect } from 'chai';
import * as sinon from 'sinon';
import { RamNamespace } from '../../../lib/targets/nvmeof';
import {
  ADDR,
  adminHost,
  dnr,
  HOSTID,
  HOSTNQN,
  HostMemory,
  KEY,
  KEYED,
  newTarget,
  sc,
  SC,
  SUBNQN,
  TestHost,
} from './helpers';

function out(h: TestHost, len = 4096): Buffer {
  return h.mem.at(ADDR.OUT, len);
}

describe('nvmeof: Identify', () => {
  it('controller: the fields the Linux host reads', async () => {
    const h = await adminHost();
    expect((await h.identify(0x01)).status).to.equal(0);
    const b = out(h);
    expect(b.toString('latin1', 4, 24)).to.equal('ERNIC0000000000001  ');
    expect(b.toString('latin1', 24, 64).trimEnd()).to.equal('rocm-ernic NVMe-oF target');
    expect(b[77]).to.equal(5); // mdts: 128 KiB
    expect(b.readUInt16LE(78)).to.equal(1); // cntlid
    expect(b.readUInt32LE(80)).to.equal(0x00010300);
    expect(b.readUInt32LE(92)).to.equal(0x100); // oaes: namespace attribute notices
    expect(b[111]).to.equal(1); // I/O controller
    expect([b[258], b[259], b[261] & 4, b[262]]).to.deep.equal([3, 3, 4, 63]); // acl, aerl, lpa, elpe
    expect(b.readUInt16LE(320)).to.equal(10); // kas: 1 s
    expect([b[512], b[513], b.readUInt16LE(514)]).to.deep.equal([0x66, 0x44, 128]);
    expect(b.readUInt32LE(516)).to.equal(1); // nn
    expect(b.readUInt16LE(520)).to.equal(0x0c); // oncs: DSM, Write Zeroes
    expect(b[525]).to.equal(1); // vwc
    expect(b.readUInt32LE(536)).to.equal(0x5); // sgls: supported + keyed
    expect(b.toString('latin1', 768, 768 + SUBNQN.length + 1)).to.equal(`${SUBNQN}\0`);
    expect([b.readUInt32LE(1792), b.readUInt32LE(1796), b.readUInt16LE(1800), b[1803]]).to.deep.equal([4, 1, 0, 1]);
  });

  it('namespace: size, one LBA format of the block size, shared, with NGUID and EUI-64', async () => {
    const h = await adminHost(newTarget({ namespaces: [new RamNamespace(1, 1 << 20, 4096)] }));
    expect((await h.identify(0x00, 1)).status).to.equal(0);
    const b = out(h);
    expect([b.readBigUInt64LE(0), b.readBigUInt64LE(8), b.readBigUInt64LE(16)]).to.deep.equal([256n, 256n, 256n]);
    expect([b[25], b[26], b[30], b[33]]).to.deep.equal([0, 0, 1, 1]); // nlbaf, flbas, nmic, dlfeat
    expect(b[128 + 2]).to.equal(12); // lbaf[0].ds
    expect(b.subarray(104, 120).equals(Buffer.alloc(16))).to.equal(false);
    expect(b.subarray(120, 128).equals(Buffer.alloc(8))).to.equal(false);
  });

  it('active namespace list, ascending after the given nsid; an inactive nsid reads as zeroes', async () => {
    const h = await adminHost(
      newTarget({ namespaces: [new RamNamespace(5, 1 << 16, 512), new RamNamespace(1, 1 << 16, 512)] }),
    );
    await h.identify(0x02, 0);
    expect([out(h).readUInt32LE(0), out(h).readUInt32LE(4), out(h).readUInt32LE(8)]).to.deep.equal([1, 5, 0]);
    await h.identify(0x02, 1);
    expect([out(h).readUInt32LE(0), out(h).readUInt32LE(4)]).to.deep.equal([5, 0]);
    out(h).fill(0xee);
    expect((await h.identify(0x00, 3)).status).to.equal(0);
    expect(out(h).equals(Buffer.alloc(4096))).to.equal(true);
  });

  it('namespace descriptors: EUI-64, NGUID, UUID, CSI (NVM), each with its length', async () => {
    const h = await adminHost();
    expect((await h.identify(0x03, 1)).status).to.equal(0);
    const b = out(h);
    expect([b[0], b[1], b[12], b[13], b[32], b[33], b[52], b[53], b[56]]).to.deep.equal([1, 8, 2, 16, 3, 16, 4, 1, 0]);
    expect(b[32 + 4 + 6]! >> 4).to.equal(5); // UUID version
  });

  it('the NVM command set controller structure (CNS 06h, CSI 0) is all zeroes; another CSI is an invalid field', async () => {
    const h = await adminHost();
    expect((await h.identify(0x06, 0)).status).to.equal(0);
    const c = await h.identify(0x06, 0, 4096, ADDR.OUT, 2 << 24);
    expect([sc(c), dnr(c)]).to.deep.equal([SC.INVALID_FIELD, true]);
  });

  it('bad CNS, bad nsid, and a buffer that is not 4096 bytes', async () => {
    const h = await adminHost();
    const badCns = await h.identify(0x1f);
    expect([sc(badCns), dnr(badCns)]).to.deep.equal([SC.INVALID_FIELD, true]);
    for (const nsid of [0, 0xffffffff, 2]) {
      expect(sc(await h.identify(0x00, nsid)), `nsid ${nsid}`).to.equal(SC.INVALID_NS);
    }
    expect(sc(await h.identify(0x03, 2))).to.equal(SC.INVALID_NS);
    expect(sc(await h.identify(0x02, 0xfffffffe))).to.equal(SC.INVALID_NS);
    expect(sc(await h.identify(0x01, 0, 512))).to.equal(SC.SGL_INVALID_DATA);
  });
});

describe('nvmeof: features', () => {
  it("number of queues: the subsystem grants queues - 1 (0's based) whatever is asked; 0xffff is refused", async () => {
    const h = await adminHost(newTarget({ queues: 4 }));
    expect((await h.setFeature(0x07, 0x003f003f)).dw0).to.equal(0x00030003);
    expect((await h.getFeature(0x07)).dw0).to.equal(0x00030003);
    const c = await h.setFeature(0x07, 0xffff0003);
    expect([sc(c), dnr(c)]).to.deep.equal([SC.INVALID_FIELD, true]);
  });

  it('keep alive timer: rounded up to the 1 s granularity; async event config: only supported bits', async () => {
    const h = await adminHost();
    expect((await h.setFeature(0x0f, 3500)).status).to.equal(0);
    expect((await h.getFeature(0x0f)).dw0).to.equal(4000);
    expect((await h.setFeature(0x0b, 0x100)).status).to.equal(0);
    expect((await h.getFeature(0x0b)).dw0).to.equal(0x100);
    expect(sc(await h.setFeature(0x0b, 0x200))).to.equal(SC.INVALID_FIELD);
  });

  it('plain features keep what was set; power state other than 0 is refused; select 1 and 3', async () => {
    const h = await adminHost();
    expect((await h.getFeature(0x06)).dw0).to.equal(1); // volatile write cache enabled
    await h.setFeature(0x06, 0);
    expect((await h.getFeature(0x06)).dw0).to.equal(0);
    expect((await h.getFeature(0x06, 1)).dw0).to.equal(1); // default
    expect((await h.getFeature(0x06, 3)).dw0).to.equal(4); // changeable, not saveable
    expect(sc(await h.setFeature(0x02, 1))).to.equal(SC.INVALID_FIELD);
  });

  it('an unknown feature, a save request, and Set Host Identifier over fabrics', async () => {
    const h = await adminHost();
    for (const c of [await h.getFeature(0x55), await h.setFeature(0x55, 0), await h.setFeature(0x08, 0)]) {
      expect([sc(c), dnr(c)]).to.deep.equal([SC.INVALID_FIELD, true]);
    }
    expect(sc(await h.setFeature(0x07, 0, true))).to.equal(SC.FEATURE_NOT_SAVEABLE);
    expect(sc(await h.setFeature(0x81, 1))).to.equal(SC.CMD_SEQ_ERROR);
  });

  it('Get Host Identifier returns the Connect hostid (EXHID required)', async () => {
    const h = await adminHost();
    const sgl = { addr: ADDR.OUT, len: 16, key: KEY, type: KEYED };
    expect((await h.getFeature(0x81, 0, 1, sgl)).status).to.equal(0);
    expect(out(h, 16).equals(HOSTID)).to.equal(true);
    expect(sc(await h.getFeature(0x81, 0, 0, sgl))).to.equal(SC.INVALID_FIELD);
  });
});

describe('nvmeof: Get Log Page', () => {
  it('the error log records a failed command: count, sqid, cid, status and the field at fault', async () => {
    const h = await adminHost();
    const bad = await h.identify(0x1f);
    expect((await h.getLog(0x01, 128)).status).to.equal(0);
    const e = out(h, 64);
    expect(e.readBigUInt64LE(0)).to.equal(1n);
    expect([e.readUInt16LE(8), e.readUInt16LE(10)]).to.deep.equal([0, bad.cid]);
    expect(e.readUInt16LE(12)).to.equal((SC.INVALID_FIELD | SC.DNR) << 1);
    expect(e.readUInt16LE(14)).to.equal(40); // CNS: SQE byte 40
  });

  it('SMART: temperature, spare, and the number of error log entries', async () => {
    const h = await adminHost();
    await h.identify(0x1f);
    expect((await h.getLog(0x02, 512)).status).to.equal(0);
    const s = out(h, 512);
    expect([s.readUInt16LE(1), s[3]]).to.deep.equal([308, 100]);
    expect(s.readBigUInt64LE(176)).to.equal(1n);
    expect(sc(await h.getLog(0x02, 512, { nsid: 7 }))).to.equal(SC.INVALID_NS);
  });

  it('an offset inside the page returns the rest then zeroes; past the end or unaligned is an invalid field', async () => {
    const h = await adminHost();
    await h.getLog(0x02, 512);
    const whole = Buffer.from(out(h, 512));
    expect((await h.getLog(0x02, 8, { offset: 0 })).status).to.equal(0);
    expect((await h.getLog(0x02, 16, { offset: 504 })).status).to.equal(0);
    expect(out(h, 16).equals(Buffer.concat([whole.subarray(504), Buffer.alloc(8)]))).to.equal(true);
    for (const offset of [513, 1024, 2 ** 40]) {
      const c = await h.getLog(0x02, 8, { offset });
      expect([sc(c), dnr(c)], `offset ${offset}`).to.deep.equal([SC.INVALID_FIELD, true]);
    }
  });

  it('an unknown log page, more than MDTS, or a buffer of another length', async () => {
    const h = await adminHost();
    expect(sc(await h.getLog(0x42, 512))).to.equal(SC.INVALID_LOG_PAGE);
    expect(sc(await h.getLog(0x02, 256 * 1024))).to.equal(SC.INVALID_FIELD);
    expect(sc(await h.getLog(0x02, 512, { len: 4096 }))).to.equal(SC.SGL_INVALID_DATA);
  });
});

describe('nvmeof: asynchronous events', () => {
  it('an AER is held until a namespace changes; the changed list then names it and reading clears it', async () => {
    const h = await adminHost();
    await h.setFeature(0x0b, 0x100);
    let done = false;
    const aer = h.submit({ opcode: 0x0c }).then((c) => {
      done = true;
      return c;
    });
    await new Promise((r) => setImmediate(r));
    expect(done).to.equal(false);
    expect(h.queue.controller!.heldAers).to.equal(1);
    h.target.subsystem.namespaceChanged(1);
    const c = await aer;
    expect([c.status, c.dw0]).to.deep.equal([0, 0x00040002]); // notice, NS changed, log page 04h
    expect((await h.getLog(0x04, 4096)).status).to.equal(0);
    expect([out(h).readUInt32LE(0), out(h).readUInt32LE(4)]).to.deep.equal([1, 0]);
    await h.getLog(0x04, 4096);
    expect(out(h).readUInt32LE(0)).to.equal(0);
  });

  it('a second change waits until the log is read (masked), then is reported', async () => {
    const h = await adminHost();
    await h.setFeature(0x0b, 0x100);
    const first = h.submit({ opcode: 0x0c });
    h.target.subsystem.namespaceChanged(1);
    await first;
    let second = false;
    const aer = h.submit({ opcode: 0x0c }).then((c) => {
      second = true;
      return c;
    });
    h.target.subsystem.namespaceChanged(1);
    await new Promise((r) => setImmediate(r));
    expect(second).to.equal(false);
    await h.getLog(0x04, 4096, { rae: true }); // retain: still masked
    h.target.subsystem.namespaceChanged(1);
    await new Promise((r) => setImmediate(r));
    expect(second).to.equal(false);
    await h.getLog(0x04, 4096);
    h.target.subsystem.namespaceChanged(1);
    expect((await aer).dw0).to.equal(0x00040002);
  });

  it('at most 4 are held; Abort takes a held one back, anything else is reported not aborted', async () => {
    const h = await adminHost();
    const cids: number[] = [];
    const held = [0, 1, 2, 3].map(() => {
      const cid = h.nextCid();
      cids.push(cid);
      return h.submit({ opcode: 0x0c, cid });
    });
    const fifth = await h.submit({ opcode: 0x0c });
    expect([sc(fifth), dnr(fifth)]).to.deep.equal([SC.ASYNC_LIMIT, true]);
    const ab = await h.submit({ opcode: 0x08, cdw10: (cids[1]! << 16) | 0 });
    expect([ab.status, ab.dw0]).to.deep.equal([0, 0]);
    expect(sc(await held[1]!)).to.equal(SC.ABORT_REQ);
    const miss = await h.submit({ opcode: 0x08, cdw10: (999 << 16) | 1 });
    expect([miss.status, miss.dw0]).to.deep.equal([0, 1]);
    h.queue.close();
    for (const p of [held[0]!, held[2]!, held[3]!]) expect(sc(await p)).to.equal(SC.ABORT_QUEUE);
  });
});

describe('nvmeof: keep alive', () => {
  it("the timer does not hold the process open (unref'd)", async () => {
    const spy = sinon.spy(global, 'setTimeout');
    try {
      const admin = await adminHost(newTarget(), 60_000);
      const timers = spy
        .getCalls()
        .filter((c) => c.args[1] === 60_000)
        .map((c) => c.returnValue as unknown as NodeJS.Timeout);
      expect(timers.length).to.equal(1);
      expect(timers[0]!.hasRef()).to.equal(false);
      admin.queue.close();
    } finally {
      spy.restore();
    }
  });

  describe('with fake timers', () => {
    let clock: sinon.SinonFakeTimers;
    beforeEach(() => {
      clock = sinon.useFakeTimers();
    });
    afterEach(() => clock.restore());

    it('tears the controller down when no Keep Alive arrives within KATO', async () => {
      const target = newTarget();
      const reasons: string[] = [];
      const admin = await adminHost(target, 5000);
      const io = new TestHost(target, admin.mem, { onTeardown: (r) => reasons.push(r) });
      await io.connect({ qid: 1, sqsize: 127, cntlid: 1 });
      clock.tick(4000);
      expect((await admin.keepAlive()).status).to.equal(0);
      clock.tick(4999);
      expect(admin.queue.controller!.alive).to.equal(true);
      clock.tick(1);
      expect(admin.queue.controller!.alive).to.equal(false);
      expect(reasons).to.deep.equal(['keep-alive timeout']);
      expect(target.subsystem.controllerCount).to.equal(0);
      expect(sc(await admin.keepAlive())).to.equal(SC.ABORT_QUEUE);
      const again = await new TestHost(target, admin.mem).connect({ qid: 2, sqsize: 127, cntlid: 1 });
      expect(sc(again)).to.equal(SC.CONNECT_INVALID_PARAM);
    });

    it('Set Features KATO re-arms the timer with the new timeout; 0 turns it off', async () => {
      const admin = await adminHost(newTarget(), 5000);
      await admin.setFeature(0x0f, 2000);
      clock.tick(2000);
      expect(admin.queue.controller!.alive).to.equal(false);
      const other = await adminHost(newTarget(), 5000);
      await other.setFeature(0x0f, 0);
      clock.tick(3_600_000);
      expect(other.queue.controller!.alive).to.equal(true);
    });

    it('without a KATO there is no timer, and Keep Alive is refused as an invalid timeout', async () => {
      const admin = await adminHost(newTarget(), 0);
      clock.tick(3_600_000);
      expect(admin.queue.controller!.alive).to.equal(true);
      const c = await admin.keepAlive();
      expect([sc(c), dnr(c)]).to.deep.equal([SC.KA_TIMEOUT_INVALID, true]);
    });

    it('a KATO is rounded up to whole seconds', async () => {
      const h = new TestHost(newTarget(), new HostMemory());
      h.mem.key(KEY);
      await h.connect({ kato: 1500, hostnqn: HOSTNQN });
      expect(h.queue.controller!.kato).to.equal(2000);
    });
  });
});
