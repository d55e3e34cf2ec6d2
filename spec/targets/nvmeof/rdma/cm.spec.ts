// The target's IB CM responder alone: MADs built by hand from the IBTA
// tables (cm-mads.ts), a fake transport recording what it sends and binds.
// REQ -> REP (and every REJ path), RTU, DREQ -> DREP, REJ of our REP, a
// disconnect of ours (DREQ), and the layout tables pinned to the offsets.

import { expect } from 'chai';
import {
  bits,
  cm_dreq_msg,
  cm_rej_msg,
  cm_rep_msg,
  cm_req_msg,
  cma_hdr,
  getBits,
  ib_mad_hdr,
  nvme_rdma_cm_rej,
  nvme_rdma_cm_rep,
  nvme_rdma_cm_req,
  setBits,
} from '../../../../lib/targets/nvmeof/rdma/cm-layouts';
import { CmConnection, CmPeer, CmResponder, guidFromMac, TARGET_QPN_BASE } from '../../../../lib/targets/nvmeof/rdma';
import { ATTR, dreq, drep, header, madHeader, rej, rejFields, repFields, req, rtu } from '../cm-mads';

const PEER: CmPeer = {
  gid: Buffer.from('00000000000000000000ffffc0a8c802', 'hex'),
  mac: Buffer.from('726f636d2d6e', 'hex'),
  vlanTci: -1,
};
const MAC = Buffer.from('0200c0a8c801', 'hex');

interface Sent {
  mad: Buffer;
  peer: CmPeer;
}

function responder(o: { live?: number[]; refuse?: boolean; maxIoQueues?: number } = {}): {
  cm: CmResponder;
  sent: Sent[];
  opened: CmConnection[];
  closed: [CmConnection, string][];
} {
  const sent: Sent[] = [];
  const opened: CmConnection[] = [];
  const closed: [CmConnection, string][] = [];
  const cm = new CmResponder({
    ip: '192.168.200.1',
    port: 4420,
    maxIoQueues: o.maxIoQueues ?? 8,
    caGuid: guidFromMac(MAC),
    cntlidLive: (id) => (o.live ?? []).includes(id),
    random: () => 0.5,
    host: {
      sendMad: (mad, peer) => sent.push({ mad: Buffer.from(mad), peer }),
      open: (c) => {
        if (o.refuse) return false;
        opened.push(c);
        return true;
      },
      closed: (c, why) => {
        closed.push([c, why]);
      },
    },
  });
  return { cm, sent, opened, closed };
}

describe('nvmeof target: IB CM layouts', () => {
  it('pins the MAD header and the CM messages to IBTA vol. 1 tables 106-113 (message offset + 24)', () => {
    expect([ib_mad_hdr.mgmt_class.off, ib_mad_hdr.tid.off, ib_mad_hdr.attr_id.off, ib_mad_hdr.SIZE]).to.deep.equal([
      1, 8, 16, 24,
    ]);
    expect([
      cm_req_msg.local_comm_id.off,
      cm_req_msg.service_id.off,
      cm_req_msg.primary_local_port_gid.off,
      cm_req_msg.private_data.off,
      cm_req_msg.private_data.size,
    ]).to.deep.equal([24, 32, 80, 164, 92]);
    expect([cm_rep_msg.local_ca_guid.off, cm_rep_msg.private_data.off, cm_rep_msg.private_data.size]).to.deep.equal([
      52, 60, 196,
    ]);
    expect([cm_rej_msg.reason.off, cm_rej_msg.private_data.off, cm_rej_msg.private_data.size]).to.deep.equal([
      34, 108, 148,
    ]);
    expect(cm_dreq_msg.private_data.off).to.equal(36);
    expect([cma_hdr.port.off, cma_hdr.src_addr.off, cma_hdr.dst_addr.off, cma_hdr.SIZE]).to.deep.equal([2, 4, 20, 36]);
    expect([
      nvme_rdma_cm_req.qid.off,
      nvme_rdma_cm_req.hrqsize.off,
      nvme_rdma_cm_req.hsqsize.off,
      nvme_rdma_cm_req.cntlid.off,
      nvme_rdma_cm_req.SIZE,
    ]).to.deep.equal([2, 4, 6, 8, 32]);
    expect([nvme_rdma_cm_rep.crqsize.off, nvme_rdma_cm_rej.sts.off]).to.deep.equal([2, 2]);
  });

  it('Byte[Bit] fields: a 24-bit QPN is the top of its dword, narrow fields sit in their byte counted from the MSB', () => {
    expect(cm_req_msg.local_qpn).to.deep.include({ shift: 8, mask: 0xffffff });
    expect(cm_req_msg.local_qpn.word.off).to.equal(56);
    expect(cm_req_msg.transport_service_type).to.deep.include({ shift: 1, mask: 3 });
    expect(cm_req_msg.primary_flow_label).to.deep.include({ shift: 12, mask: 0xfffff });
    expect(cm_rep_msg.rnr_retry_count).to.deep.include({ shift: 5, mask: 7 });
    expect(cm_rep_msg.srq).to.deep.include({ shift: 4, mask: 1 });
    const b = Buffer.alloc(8, 0xff);
    setBits(b, 0, bits(1, 0, 24), 0x123456);
    expect(b.toString('hex')).to.equal('ff123456ffffffff');
    expect(getBits(b, 0, bits(1, 0, 24))).to.equal(0x123456);
    expect(() => bits(3, 4, 8)).to.throw(RangeError);
    expect(() => setBits(b, 0, bits(4, 0, 3), 8)).to.throw(RangeError);
  });
});

describe('nvmeof target: IB CM responder', () => {
  it("REQ -> REP: controller QPN from 0x00c00000, the guest's ids, PSN, resources, crqsize; the connection is bound first", () => {
    const { cm, sent, opened } = responder();
    cm.receive(
      req({ commId: 0xa1b2c3d4, qpn: 0x42, rr: 16, depth: 0, hsqsize: 31, hrqsize: 32, tid: 0x0102030405060708n }),
      PEER,
    );
    expect(sent).to.have.length(1);
    const m = sent[0]!.mad;
    expect(m.length).to.equal(256);
    expect(header(m)).to.deep.equal({ base: 1, cls: 7, ver: 2, method: 3, attr: ATTR.REP, tid: 0x0102030405060708n });
    const f = repFields(m);
    expect(f.qpn).to.equal(TARGET_QPN_BASE);
    expect(f.remote).to.equal(0xa1b2c3d4);
    expect(f.local).to.not.equal(0);
    expect([f.qkey, f.eecn, f.rr, f.depth, f.ackDelay, f.failover, f.flowControl, f.rnrRetry, f.srq]).to.deep.equal([
      0, 0, 0, 16, 15, 0, 1, 7, 0,
    ]);
    expect(f.psn).to.equal(0x800000); // random() = 0.5
    expect(f.guid).to.equal(0x0000c0fffea8c801n); // EUI-64 of 02:00:c0:a8:c8:01
    expect([f.recfmt, f.crqsize]).to.deep.equal([0, 32]);
    expect(sent[0]!.peer.gid.equals(PEER.gid)).to.equal(true);
    expect(opened).to.have.length(1);
    expect(opened[0]).to.deep.include({
      targetQpn: TARGET_QPN_BASE,
      guestQpn: 0x42,
      remoteCommId: 0xa1b2c3d4,
      qid: 0,
      hsqsize: 31,
      hrqsize: 32,
      state: 'rep-sent',
    });
    expect(cm.byTargetQpn(TARGET_QPN_BASE)).to.equal(opened[0]);
    // The next connection gets the next QPN and a different communication id.
    cm.receive(req({ commId: 0xa1b2c3d5, qpn: 0x43, qid: 1, hsqsize: 127, hrqsize: 128 }), PEER);
    const g = repFields(sent[1]!.mad);
    expect([g.qpn, g.crqsize]).to.deep.equal([TARGET_QPN_BASE + 1, 128]);
    expect(g.local).to.not.equal(f.local);
  });

  it("offers at most 16 RDMA READs each way (responder resources from the guest's initiator depth and back)", () => {
    const { cm, sent } = responder();
    cm.receive(req({ rr: 255, depth: 3 }), PEER);
    const f = repFields(sent[0]!.mad);
    expect([f.rr, f.depth]).to.deep.equal([3, 16]);
  });

  it('a repeated REQ gets the same REP again and no second connection', () => {
    const { cm, sent, opened } = responder();
    cm.receive(req({ commId: 7 }), PEER);
    cm.receive(req({ commId: 7 }), PEER);
    expect(sent).to.have.length(2);
    expect(sent[1]!.mad.equals(sent[0]!.mad)).to.equal(true);
    expect(opened).to.have.length(1);
    expect(cm.size).to.equal(1);
  });

  it('RTU establishes the connection (a capsule first does too); an RTU with the wrong ids is ignored', () => {
    const { cm, sent, opened } = responder();
    cm.receive(req({ commId: 9 }), PEER);
    const ours = repFields(sent[0]!.mad).local;
    cm.receive(rtu(8, ours), PEER);
    expect(opened[0]!.state).to.equal('rep-sent');
    cm.receive(rtu(9, ours), PEER);
    expect(opened[0]!.state).to.equal('established');
    cm.receive(req({ commId: 10 }), PEER);
    cm.established(opened[1]!);
    expect(opened[1]!.state).to.equal('established');
    // Once established, a late repeat of the REQ is not answered.
    cm.receive(req({ commId: 9 }), PEER);
    expect(sent).to.have.length(2);
  });

  it("DREQ -> DREP with the ids swapped and the DREQ's TID; the connection ends", () => {
    const { cm, sent, opened, closed } = responder();
    cm.receive(req({ commId: 0x55 }), PEER);
    const ours = repFields(sent[0]!.mad).local;
    cm.receive(dreq(0x55, ours, TARGET_QPN_BASE, 0xabcdn), PEER);
    expect(sent).to.have.length(2);
    const m = sent[1]!.mad;
    expect(header(m)).to.deep.include({ attr: ATTR.DREP, tid: 0xabcdn });
    expect([m.readUInt32BE(24), m.readUInt32BE(28)]).to.deep.equal([ours, 0x55]);
    expect(closed.map(([c]) => c)).to.deep.equal([opened[0]]);
    expect(cm.size).to.equal(0);
    // A repeat, or a DREQ for a connection we never had, still gets its DREP.
    cm.receive(dreq(0x55, ours, TARGET_QPN_BASE), PEER);
    cm.receive(dreq(0x77, 0x1234, TARGET_QPN_BASE + 9), PEER);
    expect(
      sent.slice(2).map((s) => [header(s.mad).attr, s.mad.readUInt32BE(24), s.mad.readUInt32BE(28)]),
    ).to.deep.equal([
      [ATTR.DREP, ours, 0x55],
      [ATTR.DREP, 0x1234, 0x77],
    ]);
    expect(closed).to.have.length(1);
  });

  it('a DREQ naming another QPN does not end the connection (but is answered)', () => {
    const { cm, sent, closed } = responder();
    cm.receive(req({ commId: 0x56 }), PEER);
    const ours = repFields(sent[0]!.mad).local;
    cm.receive(dreq(0x56, ours, TARGET_QPN_BASE + 5), PEER);
    expect(closed).to.have.length(0);
    expect(cm.size).to.equal(1);
    expect(header(sent[1]!.mad).attr).to.equal(ATTR.DREP);
  });

  it("the guest's REJ of our REP ends the connection; its DREP and MRA change nothing", () => {
    const { cm, sent, closed } = responder();
    cm.receive(req({ commId: 0x60 }), PEER);
    const ours = repFields(sent[0]!.mad).local;
    const mra = madHeader(ATTR.MRA);
    cm.receive(mra, PEER);
    cm.receive(drep(0x60, ours), PEER);
    expect(cm.size).to.equal(1);
    cm.receive(rej(0x61, ours), PEER);
    expect(cm.size).to.equal(1);
    cm.receive(rej(0x60, ours), PEER);
    expect(cm.size).to.equal(0);
    expect(closed[0]![1]).to.match(/REJ from the guest \(reason 10\)/);
    expect(sent).to.have.length(1);
  });

  it("our disconnect: DREQ with our id, the guest's id and the guest's QPN; the connection is forgotten", () => {
    const { cm, sent, opened, closed } = responder();
    cm.receive(req({ commId: 0x70, qpn: 0x99 }), PEER);
    const ours = repFields(sent[0]!.mad).local;
    cm.disconnect(opened[0]!, 'keep-alive timeout');
    const m = sent[1]!.mad;
    expect(header(m)).to.deep.include({ base: 1, cls: 7, ver: 2, method: 3, attr: ATTR.DREQ });
    expect([m.readUInt32BE(24), m.readUInt32BE(28), m.readUInt32BE(32) >>> 8]).to.deep.equal([ours, 0x70, 0x99]);
    expect(closed.map(([, why]) => why)).to.deep.equal(['keep-alive timeout']);
    expect(cm.byTargetQpn(TARGET_QPN_BASE)).to.equal(undefined);
    cm.disconnect(opened[0]!, 'again');
    expect(sent).to.have.length(2);
  });

  const nvmeRefusals: [string, Parameters<typeof req>[0], number][] = [
    ['recfmt 1: INVALID_RECFMT', { recfmt: 1 }, 2],
    ['qid 9 of 8 I/O queues: INVALID_QID', { qid: 9, hsqsize: 127, hrqsize: 128 }, 3],
    ['an admin queue of 33 (hsqsize 32): INVALID_HSQSIZE', { hsqsize: 32 }, 4],
    ['an I/O queue of 129 (hsqsize 128): INVALID_HSQSIZE', { qid: 1, hsqsize: 128, hrqsize: 128 }, 4],
    ['an I/O queue of 1 (hsqsize 0): INVALID_HSQSIZE', { qid: 1, hsqsize: 0, hrqsize: 128 }, 4],
    ['hrqsize 0: INVALID_HRQSIZE', { hrqsize: 0 }, 5],
    ['hrqsize 129: INVALID_HRQSIZE', { qid: 1, hsqsize: 127, hrqsize: 129 }, 5],
    ['an I/O queue naming cntlid 5, not live: INVALID_CNTLID', { qid: 1, hsqsize: 127, hrqsize: 128, cntlid: 5 }, 9],
  ];
  for (const [what, spec, sts] of nvmeRefusals) {
    it(`REJ CONSUMER_DEFINED with nvme_rdma_cm_rej for ${what}`, () => {
      const { cm, sent, opened } = responder({ live: [1] });
      cm.receive(req({ commId: 0x80, tid: 0x4242n, ...spec }), PEER);
      expect(sent).to.have.length(1);
      expect(header(sent[0]!.mad)).to.deep.include({ attr: ATTR.REJ, tid: 0x4242n });
      const f = rejFields(sent[0]!.mad);
      expect([f.remote, f.rejected, f.infoLen, f.reason, f.recfmt, f.sts]).to.deep.equal([0x80, 0, 0, 28, 0, sts]);
      expect(f.local).to.not.equal(0);
      expect(opened).to.have.length(0);
    });
  }

  it('an I/O queue naming a live controller, or none (cntlid 0, older hosts), is accepted', () => {
    const { cm, sent } = responder({ live: [3] });
    cm.receive(req({ commId: 1, qid: 2, hsqsize: 127, hrqsize: 128, cntlid: 3 }), PEER);
    cm.receive(req({ commId: 2, qid: 3, hsqsize: 127, hrqsize: 128, cntlid: 0 }), PEER);
    expect(sent.map((s) => header(s.mad).attr)).to.deep.equal([ATTR.REP, ATTR.REP]);
  });

  const cmRefusals: [string, Parameters<typeof req>[0], number][] = [
    ['another port (service id): INVALID_SERVICE_ID', { service: 0x0106_1145 }, 8],
    ['another port space (UDP): INVALID_SERVICE_ID', { service: 0x0111_1144 }, 8],
    ['another destination address in cma_hdr: INVALID_SERVICE_ID', { dstIp: [192, 168, 200, 9] }, 8],
    ['an IPv6 cma_hdr: INVALID_SERVICE_ID', { ipVersion: 6 }, 8],
    ['a UC connection: INVALID_TRANSPORT_TYPE', { transport: 1 }, 9],
  ];
  for (const [what, spec, reason] of cmRefusals) {
    it(`REJ without private data for ${what}`, () => {
      const { cm, sent, opened } = responder();
      cm.receive(req({ commId: 0x90, ...spec }), PEER);
      const f = rejFields(sent[0]!.mad);
      expect([f.remote, f.rejected, f.reason, f.sts]).to.deep.equal([0x90, 0, reason, 0]);
      expect(sent[0]!.mad.subarray(24 + 84).equals(Buffer.alloc(148))).to.equal(true);
      expect(opened).to.have.length(0);
    });
  }

  it('a transport that cannot bind the connection: REJ with NO_RSC; nothing kept', () => {
    const { cm, sent } = responder({ refuse: true });
    cm.receive(req(), PEER);
    const f = rejFields(sent[0]!.mad);
    expect([f.reason, f.sts]).to.deep.equal([28, 6]);
    expect(cm.size).to.equal(0);
  });

  it('drops what is not a CM Send MAD: another class, class version, method, a short buffer, an unknown attribute', () => {
    const { cm, sent } = responder();
    const bad = [
      (() => {
        const b = req();
        b[1] = 0x03;
        return b;
      })(),
      (() => {
        const b = req();
        b[2] = 1;
        return b;
      })(),
      (() => {
        const b = req();
        b[3] = 0x81;
        return b;
      })(),
      (() => {
        const b = req();
        b[0] = 2;
        return b;
      })(),
      req().subarray(0, 200),
      madHeader(0x19),
    ];
    for (const b of bad) cm.receive(b, PEER);
    expect(sent).to.have.length(0);
    expect(cm.counts.dropped).to.equal(6);
  });

  it('device reset: every connection is closed, nothing is sent', () => {
    const { cm, sent, closed } = responder();
    cm.receive(req({ commId: 1 }), PEER);
    cm.receive(req({ commId: 2, qid: 1, hsqsize: 127, hrqsize: 128 }), PEER);
    cm.reset();
    expect(closed.map(([, why]) => why)).to.deep.equal(['device reset', 'device reset']);
    expect(sent).to.have.length(2);
    expect(cm.size).to.equal(0);
  });
});
