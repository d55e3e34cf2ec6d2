// Fabrics Connect (admin and I/O queues, every refusal with its status and
// dword 0 pointer), Property Get/Set (CAP, VS, CC enable and shutdown,
// CSTS), the discovery controller and its log page, and queue teardown.

import { expect } from 'chai';
import { RamNamespace } from '../../../lib/targets/nvmeof';
import {
  ADDR,
  adminHost,
  DISC_NQN,
  dnr,
  HOSTID,
  HOSTNQN,
  HostMemory,
  ioHost,
  KEY,
  newTarget,
  sc,
  SC,
  SUBNQN,
  TestHost,
} from './helpers';

function freshHost(target = newTarget()): TestHost {
  const h = new TestHost(target, new HostMemory());
  h.mem.key(KEY);
  return h;
}

describe('nvmeof: Connect', () => {
  it('admin Connect creates a controller and returns its cntlid; the Connect is consumed (sqhd 1)', async () => {
    const h = freshHost();
    const c = await h.connect({ kato: 5000 });
    expect(c.status).to.equal(0);
    expect(c.dw0).to.equal(1);
    expect([c.sqid, c.sqhd]).to.deep.equal([0, 1]);
    expect(h.queue.controller!.cntlid).to.equal(1);
    expect(h.queue.controller!.kato).to.equal(5000);
    expect(h.target.subsystem.controllerCount).to.equal(1);
    h.queue.close();
  });

  it('each admin Connect is a new association with its own cntlid', async () => {
    const target = newTarget();
    const a = freshHost(target);
    const b = freshHost(target);
    expect((await a.connect()).dw0).to.equal(1);
    expect((await b.connect()).dw0).to.equal(2);
    a.queue.close();
    expect(target.subsystem.controllerCount).to.equal(1);
  });

  it('I/O Connect joins the controller named in the data, with the same host', async () => {
    const admin = await adminHost();
    const io = await ioHost(admin, 3);
    expect(io.queue.qid).to.equal(3);
    expect(io.queue.controller).to.equal(admin.queue.controller);
    const c = await io.rw(0x02, 0, 1, ADDR.DATA);
    expect([c.status, c.sqid, c.sqhd]).to.deep.equal([0, 3, 2]);
  });

  it('sqhd wraps at the queue size, and reads 0xffff with SQ flow control disabled', async () => {
    const admin = await adminHost();
    const io = new TestHost(admin.target, admin.mem);
    const c = await io.connect({ qid: 1, sqsize: 1, cntlid: 1, cattr: 0x04 });
    expect(c.sqhd).to.equal(0xffff);
    const small = new TestHost(admin.target, admin.mem);
    expect((await small.connect({ qid: 2, sqsize: 1, cntlid: 1 })).sqhd).to.equal(1);
    expect((await small.rw(0x02, 0, 1, ADDR.DATA)).sqhd).to.equal(0);
    expect((await small.rw(0x02, 0, 1, ADDR.DATA)).sqhd).to.equal(1);
  });

  describe('refusals', () => {
    it("every command's descriptor is checked, even without data (a zeroed one is not a null keyed SGL)", async () => {
      const h = freshHost();
      await h.connect();
      const c = await h.submit({ opcode: 0x7f, nsid: 0x04, cdw11: 0x08, sgl: { addr: 0, len: 0, key: 0, type: 0x00 } });
      expect([sc(c), dnr(c)]).to.deep.equal([SC.INVALID_FIELD, true]);
      const seg = await h.submit({
        opcode: 0x7f,
        nsid: 0x04,
        cdw11: 0x08,
        sgl: { addr: 0, len: 0, key: 0, type: 0x20 },
      });
      expect(sc(seg)).to.equal(SC.SGL_INVALID_TYPE);
      expect((await h.propGet(0x08)).status).to.equal(0);
    });

    it('the first command on a queue must be Connect', async () => {
      const h = freshHost();
      const c = await h.keepAlive();
      expect([sc(c), dnr(c)]).to.deep.equal([SC.INVALID_OPCODE, true]);
      const p = await h.propGet(0x08);
      expect(sc(p)).to.equal(SC.INVALID_OPCODE);
    });

    it('recfmt other than 0: Connect format', async () => {
      const c = await freshHost().connect({ recfmt: 1 });
      expect([sc(c), dnr(c)]).to.deep.equal([SC.CONNECT_FORMAT, true]);
    });

    it('a subsystem NQN the target does not have: invalid parameters at subnqn (data offset 256)', async () => {
      const c = await freshHost().connect({ subnqn: 'nqn.2024-01.example:nope' });
      expect([sc(c), dnr(c), c.dw0]).to.deep.equal([SC.CONNECT_INVALID_PARAM, true, 0x10000 | 256]);
    });

    it('a host the subsystem does not allow: invalid host, pointing at hostnqn (data offset 512)', async () => {
      const target = newTarget({ hosts: ['nqn.2014-08.org.nvmexpress:uuid:someone-else'] });
      const c = await freshHost(target).connect();
      expect([sc(c), dnr(c), c.dw0]).to.deep.equal([SC.CONNECT_INVALID_HOST, true, 0x10000 | 512]);
      const allowed = newTarget({ hosts: [HOSTNQN] });
      expect((await freshHost(allowed).connect()).status).to.equal(0);
    });

    it('an empty host NQN is an invalid parameter', async () => {
      const c = await freshHost().connect({ hostnqn: '' });
      expect([sc(c), c.dw0]).to.deep.equal([SC.CONNECT_INVALID_PARAM, 0x10000 | 512]);
    });

    it('admin Connect with a cntlid other than 0xffff points at the data cntlid (offset 16)', async () => {
      const c = await freshHost().connect({ cntlid: 1 });
      expect([sc(c), c.dw0]).to.deep.equal([SC.CONNECT_INVALID_PARAM, 0x10000 | 16]);
    });

    it('sqsize 0, above MQES, or an admin queue under 32 entries: invalid parameters at sqsize (SQE offset 44)', async () => {
      for (const sqsize of [0, 128, 30]) {
        const c = await freshHost().connect({ sqsize });
        expect([sc(c), dnr(c), c.dw0], `sqsize ${sqsize}`).to.deep.equal([SC.CONNECT_INVALID_PARAM, true, 44]);
      }
    });

    it('an I/O qid above the subsystem queues: invalid parameters at qid (SQE offset 42)', async () => {
      const admin = await adminHost(newTarget({ queues: 2 }));
      const io = new TestHost(admin.target, admin.mem);
      const c = await io.connect({ qid: 3, sqsize: 127, cntlid: 1 });
      expect([sc(c), dnr(c), c.dw0]).to.deep.equal([SC.CONNECT_INVALID_PARAM, true, 42]);
      expect((await io.connect({ qid: 2, sqsize: 127, cntlid: 1 })).status).to.equal(0);
    });

    it('an I/O qid already connected: invalid parameters at qid', async () => {
      const admin = await adminHost();
      await ioHost(admin, 1);
      const c = await new TestHost(admin.target, admin.mem).connect({ qid: 1, sqsize: 127, cntlid: 1 });
      expect([sc(c), c.dw0]).to.deep.equal([SC.CONNECT_INVALID_PARAM, 42]);
    });

    it('I/O Connect to an unknown cntlid, or one another host owns: invalid parameters at the data cntlid', async () => {
      const admin = await adminHost();
      const unknown = await new TestHost(admin.target, admin.mem).connect({ qid: 1, sqsize: 127, cntlid: 9 });
      expect([sc(unknown), unknown.dw0]).to.deep.equal([SC.CONNECT_INVALID_PARAM, 0x10000 | 16]);
      const other = await new TestHost(admin.target, admin.mem).connect({
        qid: 1,
        sqsize: 127,
        cntlid: 1,
        hostnqn: 'nqn.2014-08.org.nvmexpress:other',
      });
      expect([sc(other), other.dw0]).to.deep.equal([SC.CONNECT_INVALID_PARAM, 0x10000 | 16]);
    });

    it('I/O Connect with another host identifier: invalid parameters at hostid (data offset 0)', async () => {
      const admin = await adminHost();
      const hostid = Buffer.from(HOSTID);
      hostid[0] ^= 0xff;
      const c = await new TestHost(admin.target, admin.mem).connect({ qid: 1, sqsize: 127, cntlid: 1, hostid });
      expect([sc(c), c.dw0]).to.deep.equal([SC.CONNECT_INVALID_PARAM, 0x10000]);
    });

    it('I/O Connect before the controller is enabled is a command sequence error', async () => {
      const admin = freshHost();
      await admin.connect();
      const c = await new TestHost(admin.target, admin.mem).connect({ qid: 1, sqsize: 127, cntlid: 1 });
      expect([sc(c), dnr(c)]).to.deep.equal([SC.CMD_SEQ_ERROR, true]);
    });

    it('Connect on a connected queue is a command sequence error', async () => {
      const admin = await adminHost();
      const c = await admin.connect();
      expect(sc(c)).to.equal(SC.CMD_SEQ_ERROR);
    });

    it('the Connect data through key 0 is refused without calling the DMA callback', async () => {
      const h = freshHost();
      const c = await h.connect({ key: 0 });
      expect([sc(c), dnr(c)]).to.deep.equal([SC.SGL_INVALID_DATA, true]);
      expect(h.mem.calls).to.equal(0);
    });
  });
});

describe('nvmeof: properties', () => {
  it('CAP (8 bytes): MQES 127, TO 15, NVM command set, MPSMIN 0; VS 1.3', async () => {
    const h = freshHost();
    await h.connect();
    const cap = await h.propGet(0x00, true);
    expect(cap.status).to.equal(0);
    const value = (BigInt(cap.dw1) << 32n) | BigInt(cap.dw0);
    expect(Number(value & 0xffffn)).to.equal(127);
    expect(Number((value >> 24n) & 0xffn)).to.equal(15);
    expect(Number((value >> 37n) & 1n)).to.equal(1);
    expect(Number((value >> 48n) & 0xfn)).to.equal(0);
    expect((await h.propGet(0x08)).dw0).to.equal(0x00010300);
  });

  it('a wrong size or an unknown offset is an invalid field; only CC is writable, and only as 4 bytes', async () => {
    const h = freshHost();
    await h.connect();
    for (const c of [
      await h.propGet(0x00),
      await h.propGet(0x08, true),
      await h.propGet(0x40),
      await h.propSet(0x1c, 1),
      await h.propSet(0x14, 1, 1),
    ]) {
      expect([sc(c), dnr(c)]).to.deep.equal([SC.INVALID_FIELD, true]);
    }
  });

  it('CC.EN sets CSTS.RDY; clearing it clears RDY; admin commands before RDY are a sequence error', async () => {
    const h = freshHost();
    await h.connect();
    expect(sc(await h.identify(0x01))).to.equal(SC.CMD_SEQ_ERROR);
    expect((await h.enable()).dw0 & 1).to.equal(1);
    expect((await h.propGet(0x14)).dw0).to.equal(0x00460001);
    await h.propSet(0x14, 0x00460000);
    expect((await h.propGet(0x1c)).dw0 & 1).to.equal(0);
  });

  it('enabling with entry sizes other than 64/16 bytes reports a fatal status instead of ready', async () => {
    const h = freshHost();
    await h.connect();
    await h.propSet(0x14, 0x00440001);
    expect((await h.propGet(0x1c)).dw0 & 3).to.equal(2);
  });

  it('a normal shutdown notification flushes and reports CSTS.SHST complete; clearing SHN clears it', async () => {
    let flushed = 0;
    const ns = new RamNamespace(1, 1 << 20, 512);
    const flush = ns.flush.bind(ns);
    ns.flush = () => {
      flushed++;
      return flush();
    };
    const h = await adminHost(newTarget({ namespaces: [ns] }));
    await h.propSet(0x14, 0x00464001);
    const csts = await h.propGet(0x1c);
    expect((csts.dw0 >> 2) & 3).to.equal(2);
    expect(flushed).to.equal(1);
    await h.propSet(0x14, 0x00460001);
    expect((await h.propGet(0x1c)).dw0 & 0xc).to.equal(0);
  });

  it('Property Get/Set on an I/O queue is an invalid opcode', async () => {
    const io = await ioHost(await adminHost());
    expect(sc(await io.propGet(0x08))).to.equal(SC.INVALID_OPCODE);
  });
});

describe('nvmeof: discovery controller', () => {
  it('lists the subsystem with RDMA fields (connected QPs, rdma_cm, provider not specified, IPv4)', async () => {
    const h = freshHost();
    const c = await h.connect({ subnqn: DISC_NQN });
    expect(c.status).to.equal(0);
    await h.enable();
    const id = await h.identify(0x01);
    expect(id.status).to.equal(0);
    const ctrl = h.mem.at(ADDR.OUT, 4096);
    expect(ctrl.toString('latin1', 768, 768 + DISC_NQN.length)).to.equal(DISC_NQN);
    expect(ctrl[111]).to.equal(2); // cntrltype: discovery
    expect([ctrl.readUInt32LE(516), ctrl.readUInt32LE(1792), ctrl.readUInt32LE(1796)]).to.deep.equal([0, 0, 0]); // nn, ioccsz, iorcsz
    const log = await h.getLog(0x70, 2048, { nsid: 0 });
    expect(log.status).to.equal(0);
    const page = h.mem.at(ADDR.OUT, 2048);
    expect(page.readBigUInt64LE(8)).to.equal(1n); // numrec
    const e = page.subarray(1024);
    expect([e[0], e[1], e[2], e[3]]).to.deep.equal([1, 1, 2, 0]); // trtype rdma, adrfam ipv4, subtype nvme, treq
    expect(e.readUInt16LE(6)).to.equal(0xffff); // dynamic cntlid
    expect(e.toString('latin1', 32, 36)).to.equal('4420');
    expect(e.toString('latin1', 256, 256 + SUBNQN.length + 1)).to.equal(`${SUBNQN}\0`);
    expect(e.toString('latin1', 512, 512 + 13)).to.equal('192.168.200.1');
    expect([e[768], e[769], e[770]]).to.deep.equal([1, 1, 1]); // qptype connected, prtype not specified, cms rdma-cm
  });

  it('offers no I/O queues, no namespace Identify, and no other log page', async () => {
    const h = freshHost();
    await h.connect({ subnqn: DISC_NQN });
    await h.enable();
    expect(sc(await h.identify(0x00, 1))).to.equal(SC.INVALID_FIELD);
    expect(sc(await h.getLog(0x02, 512))).to.equal(SC.INVALID_LOG_PAGE);
    const io = await new TestHost(h.target, h.mem).connect({ qid: 1, sqsize: 127, cntlid: 1, subnqn: DISC_NQN });
    expect([sc(io), io.dw0]).to.deep.equal([SC.CONNECT_INVALID_PARAM, 42]);
  });
});

describe('nvmeof: queue teardown', () => {
  it('closing the admin queue ends the association: its I/O queues are told and refuse further commands', async () => {
    const admin = await adminHost();
    const reasons: string[] = [];
    const io = new TestHost(admin.target, admin.mem, { onTeardown: (r) => reasons.push(r) });
    await io.connect({ qid: 1, sqsize: 127, cntlid: 1 });
    admin.queue.close();
    expect(reasons).to.deep.equal(['admin queue closed']);
    const c = await io.rw(0x02, 0, 1, ADDR.DATA);
    expect(sc(c)).to.equal(SC.ABORT_QUEUE);
    expect(admin.target.subsystem.controllerCount).to.equal(0);
  });

  it('closing an I/O queue frees its qid for a new Connect', async () => {
    const admin = await adminHost();
    const io = await ioHost(admin, 1);
    io.queue.close();
    expect((await ioHost(admin, 1)).queue.qid).to.equal(1);
  });
});
