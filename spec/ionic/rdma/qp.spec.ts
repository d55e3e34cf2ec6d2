// QP state and attributes through the RDMA admin queue (docs/driver-contract.md, ionic RDMA R2.4, R5):
// MODIFY_QP applying each field only under its mask bit, the IB state table,
// the destination parsed from the AV header template, QUERY_QP written into
// the driver's buffers as it decodes them; the hw_counters commands (7); the
// out-of-tree SRQ commands; and RDMA_RESET_LIF forgetting every object.

import { expect } from 'chai';
import { FaultInjector } from '../../../lib/ionic/fault-injection';
import { gidToString } from '../../../lib/rdma/address';
import { IonicGuest, putU64 } from '../../support/ionic/guest';
import { PAGE } from '../../support/ionic/regs';
import { Rig } from '../../support/ionic/rig';
import { RdmaCompletion, RdmaGuest } from '../../support/ionic/rdma-guest';
import { ALen, AOp, ASt, Mask, MrF, QpF, QpS, QpT } from '../../support/ionic/rdma-regs';
import {
  contiguousRing,
  createAhBody,
  createCqBody,
  createMrBody,
  createQpBody,
  headerTemplate,
  idBody,
  modifyQpBody,
  ModifyBody,
  pagedRing,
  placeTemplate,
  queryQpBody,
  statsBody,
} from '../../support/ionic/rdma-cmds';

const v4 = (d: string): Buffer => Buffer.from(d.split('.').map(Number));

/** What the driver makes of QUERY_QP's two records (ionic_query_qp_cmd). */
function decodeQuery(sq: Buffer, rq: Buffer): Record<string, number> {
  return {
    state: rq[0]! >> 4,
    pmtu: rq[0]! & 0xf,
    retryCnt: rq[1]! & 0xf,
    rnrRetry: rq[1]! >> 4,
    maxRdAtomic: 2 ** rq[2]! - 1,
    maxDestRdAtomic: 2 ** rq[3]! - 1,
    sqPsn: rq.readUInt32BE(4),
    flags: sq.readUInt16BE(2) | rq.readUInt16BE(8),
    rnrTimer: sq[0]!,
    timeout: sq[1]!,
    pkey: sq.readUInt16BE(6),
    qkeyDest: sq.readUInt32BE(8),
    rateLimit: sq.readUInt32BE(12),
    rqPsn: sq.readUInt32BE(16),
  };
}

describe('ionic rdma: QP state, attributes and queries', () => {
  let rig: Rig;
  let g: IonicGuest;
  let r: RdmaGuest;

  const ok = async (op: number, body: Buffer, what = `op ${op}`): Promise<RdmaCompletion> => {
    const c = await r.post(op, body);
    expect(c.error, `${what}: status ${c.status}`).to.equal(false);
    return c;
  };
  const refused = async (op: number, body: Buffer, status: number, what: string): Promise<void> => {
    const c = await r.post(op, body);
    expect(c.error, `${what}: no error bit`).to.equal(true);
    expect(c.status, what).to.equal(status);
  };
  const qp = async (id: number, type: number, flags = QpF.PRIVILEGED | QpF.SQ_SPEC | QpF.RQ_SPEC): Promise<void> => {
    await ok(
      AOp.CREATE_QP,
      createQpBody({
        id,
        type,
        flags,
        sq: { cqId: 200, depthLog2: 6, strideLog2: 6, dma: contiguousRing(g, PAGE).dma },
        rq: { cqId: 201, depthLog2: 6, strideLog2: 6, dma: contiguousRing(g, PAGE).dma },
      }),
      `CREATE_QP ${id}`,
    );
  };
  const modify = (o: ModifyBody): Buffer => modifyQpBody(o);
  const query = async (id: number): Promise<{ sq: Buffer; rq: Buffer; q: Record<string, number> }> => {
    const sqAt = g.alloc(PAGE);
    const rqAt = g.alloc(PAGE);
    g.mem(sqAt, PAGE).fill(0xee);
    g.mem(rqAt, PAGE).fill(0xee);
    await ok(AOp.QUERY_QP, queryQpBody(id, sqAt, rqAt), `QUERY_QP ${id}`);
    const sq = Buffer.from(g.mem(sqAt, 32));
    const rq = Buffer.from(g.mem(rqAt, 16));
    return { sq, rq, q: decodeQuery(sq, rq) };
  };

  before(async () => {
    rig = await Rig.start();
    g = await rig.probed(0, { ramSize: 96 << 20 });
    r = await RdmaGuest.boot(g, { cpus: 8 });
    for (const [id, eq] of [
      [200, 2],
      [201, 3],
    ] as const) {
      await ok(AOp.CREATE_CQ, createCqBody({ id, eqId: eq, depthLog2: 7, dma: contiguousRing(g, PAGE).dma }));
    }
  });
  after(async () => rig.close());
  afterEach(() => expect(g.violations).to.deep.equal([]));

  it('takes an RC QP RESET -> INIT -> RTR -> RTS as the CM does, applying only masked fields', async () => {
    const rm = rig.device.rdma!.rm;
    await qp(400, QpT.RC);
    const rec = rm.qps.get(400)!;
    // INIT, with garbage in every unmasked field (callers leave them uninitialised).
    await ok(
      AOp.MODIFY_QP,
      modify({
        id: 400,
        mask: Mask.STATE | Mask.PKEY_INDEX | Mask.PORT | Mask.ACCESS_FLAGS,
        state: QpS.INIT,
        access: QpF.REMOTE_WRITE | QpF.REMOTE_READ | QpF.PRIVILEGED | QpF.SQ_SPEC,
        pmtu: 3,
        qkeyDest: 0xdeadbeef,
        sqPsn: 77,
        rqPsn: 99,
        retry: 0xff,
        rnrTimer: 99,
        timeout: 99,
        rsqDepth: 40,
        rrqDepth: 40,
        hdrLen: 3,
        hdrDma: 8,
      }),
    );
    expect(rec.state).to.equal(QpS.INIT);
    expect(rec.attrs).to.include({
      access: QpF.REMOTE_WRITE | QpF.REMOTE_READ,
      pmtu: 10,
      destQpn: 0,
      sqPsn: 0,
      rqPsn: 0,
      retryCnt: 0,
      rsqDepth: 0,
    });
    expect(rec.attrs.av).to.equal(null);
    // RTR with the AV's header template.
    const tpl = headerTemplate({ sip: v4('10.0.0.1'), dip: v4('10.0.0.2'), tos: 0x6a, ttl: 64, sport: 49152 });
    await ok(
      AOp.MODIFY_QP,
      modify({
        id: 400,
        mask:
          Mask.STATE |
          Mask.AV |
          Mask.PATH_MTU |
          Mask.DEST_QPN |
          Mask.RQ_PSN |
          Mask.MAX_DEST_RD_ATOMIC |
          Mask.MIN_RNR_TIMER,
        state: QpS.RTR,
        curState: QpS.INIT,
        pmtu: 12,
        qkeyDest: 0x64,
        rqPsn: 0x123456,
        rsqDepth: 4,
        rnrTimer: 12,
        ahId: 77,
        hdrLen: tpl.length,
        hdrDma: placeTemplate(g, tpl),
        pcp: 3,
        dscp: 26,
        csum: 0,
        sqPsn: 0xbad,
      }),
    );
    expect(rec.state).to.equal(QpS.RTR);
    expect(rec.attrs).to.include({
      pmtu: 12,
      destQpn: 0x64,
      rqPsn: 0x123456,
      rsqDepth: 4,
      rnrTimer: 12,
      ahId: 77,
      pcp: 3,
      dscp: 26,
      sqPsn: 0,
    });
    expect(gidToString(rec.attrs.av!.dgid)).to.equal('::ffff:10.0.0.2');
    expect(rec.attrs.av!.udpSrcPort).to.equal(49152);
    // RTS; the PSN is 24 bits.
    await ok(
      AOp.MODIFY_QP,
      modify({
        id: 400,
        mask: Mask.STATE | Mask.SQ_PSN | Mask.TIMEOUT | Mask.RETRY_CNT | Mask.RNR_RETRY | Mask.MAX_QP_RD_ATOMIC,
        state: QpS.RTS,
        sqPsn: 0x1abcdef,
        timeout: 14,
        retry: 7 | (6 << 4),
        rrqDepth: 3,
      }),
    );
    expect(rec.state).to.equal(QpS.RTS);
    expect(rec.attrs).to.include({ sqPsn: 0xabcdef, timeout: 14, retryCnt: 7, rnrRetry: 6, rrqDepth: 3 });
    // QUERY_QP, decoded as ionic_query_qp_cmd does.
    const { sq, rq, q } = await query(400);
    expect(q).to.include({
      state: QpS.RTS,
      pmtu: 12,
      retryCnt: 7,
      rnrRetry: 6,
      maxRdAtomic: 7,
      maxDestRdAtomic: 15,
      sqPsn: 0xabcdef,
      rqPsn: 0x123456,
      qkeyDest: 0x64,
      rnrTimer: 12,
      timeout: 14,
      pkey: 0,
      rateLimit: 0,
    });
    expect(q.flags! & 7).to.equal(QpF.REMOTE_WRITE | QpF.REMOTE_READ);
    // Only the records are written: 20 and 12 bytes.
    expect(sq.subarray(20).every((b) => b === 0xee)).to.equal(true);
    expect(rq.subarray(12).every((b) => b === 0xee)).to.equal(true);
  });

  it("takes the GSI QP through ib_mad's sequence (Q_Key 0x80010000, RTR with STATE only, RTS with PSN 0)", async () => {
    const rm = rig.device.rdma!.rm;
    await qp(1, QpT.UD);
    await ok(
      AOp.MODIFY_QP,
      modify({ id: 1, mask: Mask.STATE | Mask.PKEY_INDEX | Mask.QKEY, state: QpS.INIT, qkeyDest: 0x80010000 }),
    );
    await ok(AOp.MODIFY_QP, modify({ id: 1, mask: Mask.STATE, state: QpS.RTR, qkeyDest: 0x11111111, pmtu: 0 }));
    await ok(
      AOp.MODIFY_QP,
      modify({ id: 1, mask: Mask.STATE | Mask.SQ_PSN, state: QpS.RTS, sqPsn: 0, qkeyDest: 0x22222222 }),
    );
    expect(rm.qps.get(1)).to.include({ state: QpS.RTS });
    expect(rm.qps.get(1)!.attrs).to.include({ qkey: 0x80010000, sqPsn: 0, destQpn: 0 });
    const { q } = await query(1);
    expect(q).to.include({ state: QpS.RTS, qkeyDest: 0x80010000, pmtu: 10 });
  });

  it('refuses bad MODIFY_QP fields and changes nothing (validate, then apply)', async () => {
    const rm = rig.device.rdma!.rm;
    await qp(410, QpT.RC);
    await qp(411, QpT.UD);
    await ok(AOp.MODIFY_QP, modify({ id: 410, mask: Mask.STATE, state: QpS.INIT }));
    const rec = rm.qps.get(410)!;
    const attrs = JSON.stringify(rec.attrs);
    const tpl = headerTemplate({ sip: v4('10.0.0.1'), dip: v4('10.0.0.3') });
    const tplAt = placeTemplate(g, tpl);
    const badTpl = Buffer.from(tpl);
    badTpl.writeUInt16BE(0x88cc, 12); // LLDP
    const rtr = { id: 410, mask: Mask.STATE | Mask.PATH_MTU, state: QpS.RTR, pmtu: 10 };
    const av = { id: 410, mask: Mask.AV, ahId: 5, hdrLen: tpl.length, hdrDma: tplAt };
    const cases: Array<[string, Buffer, number]> = [
      ['an unknown QP', modify({ ...rtr, id: 999 }), ASt.BAD_INDEX],
      ['INIT -> RTS (skipping RTR)', modify({ ...rtr, state: QpS.RTS }), ASt.BAD_STATE],
      ['INIT -> SQD', modify({ ...rtr, state: QpS.SQD }), ASt.BAD_STATE],
      ['state 7', modify({ ...rtr, state: 7 }), ASt.BAD_ATTR],
      [
        'a current state of 9 under CUR_STATE',
        modify({ ...rtr, mask: rtr.mask | Mask.CUR_STATE, curState: 9 }),
        ASt.BAD_ATTR,
      ],
      ['IB_QP_CAP', modify({ ...rtr, mask: rtr.mask | Mask.CAP }), ASt.BAD_ATTR],
      ['an unknown mask bit', modify({ ...rtr, mask: rtr.mask | (1 << 22) }), ASt.BAD_ATTR],
      ['path MTU 128 (pmtu 7)', modify({ ...rtr, pmtu: 7 }), ASt.BAD_ATTR],
      ['path MTU 8192 (pmtu 13)', modify({ ...rtr, pmtu: 13 }), ASt.BAD_ATTR],
      ['a valid state with an invalid MTU (nothing applied)', modify({ ...rtr, pmtu: 14 }), ASt.BAD_ATTR],
      ['retry_cnt 8', modify({ id: 410, mask: Mask.RETRY_CNT, retry: 8 }), ASt.BAD_ATTR],
      ['rnr_retry 8', modify({ id: 410, mask: Mask.RNR_RETRY, retry: 8 << 4 }), ASt.BAD_ATTR],
      ['min_rnr_timer 32', modify({ id: 410, mask: Mask.MIN_RNR_TIMER, rnrTimer: 32 }), ASt.BAD_ATTR],
      ['timeout 32', modify({ id: 410, mask: Mask.TIMEOUT, timeout: 32 }), ASt.BAD_ATTR],
      ['rrq_depth 9', modify({ id: 410, mask: Mask.MAX_QP_RD_ATOMIC, rrqDepth: 9 }), ASt.BAD_ATTR],
      ['a 25-bit dest QPN', modify({ id: 410, mask: Mask.DEST_QPN, qkeyDest: 0x1000000 }), ASt.BAD_ATTR],
      ['an AV on a UD QP', modify({ ...av, id: 411 }), ASt.BAD_ATTR],
      ['an AV template outside guest RAM', modify({ ...av, hdrDma: 0x1000 }), ASt.BAD_ATTR],
      ['an AV template of length 0', modify({ ...av, hdrLen: 0 }), ASt.BAD_ATTR],
      ['an AV template of 200 bytes', modify({ ...av, hdrLen: 200 }), ASt.BAD_ATTR],
      ['an AV template that is not IP', modify({ ...av, hdrDma: placeTemplate(g, badTpl) }), ASt.BAD_ATTR],
      ['an AV with an AH id past nahs_per_lif', modify({ ...av, ahId: 16384 }), ASt.BAD_ATTR],
      ['an AV with checksum profile 4', modify({ ...av, csum: 4 }), ASt.BAD_ATTR],
      ['an AV template past 2^53', modify({ ...av, hdrDma: 2 ** 54 }), ASt.BAD_ATTR],
    ];
    for (const [what, body, status] of cases) await refused(AOp.MODIFY_QP, body, status, what);
    expect(rec.state).to.equal(QpS.INIT);
    expect(JSON.stringify(rec.attrs)).to.equal(attrs);
  });

  it('lets any state go to ERR and RESET; RESET zeroes the ring indices (the host restarts at 0)', async () => {
    const rm = rig.device.rdma!.rm;
    await qp(420, QpT.RC);
    const rec = rm.qps.get(420)!;
    g.ringDoorbell(r.id.sq.qtype, 420, 5);
    g.ringDoorbell(r.id.rq.qtype, 420, 9);
    await g.sync();
    expect([rec.sq.pi, rec.rq!.pi]).to.deep.equal([5, 9]);
    expect(rec.stats.snapshot()).to.include({ doorbell_send: 1, doorbell_recv: 1 });
    await ok(AOp.MODIFY_QP, modify({ id: 420, mask: Mask.STATE, state: QpS.ERR }));
    expect((await query(420)).q.state).to.equal(QpS.ERR);
    await refused(AOp.MODIFY_QP, modify({ id: 420, mask: Mask.STATE, state: QpS.RTS }), ASt.BAD_STATE, 'ERR -> RTS');
    await ok(AOp.MODIFY_QP, modify({ id: 420, mask: Mask.STATE, state: QpS.RESET }));
    expect([rec.state, rec.sq.pi, rec.sq.ci, rec.rq!.pi]).to.deep.equal([QpS.RESET, 0, 0, 0]);
    // Doorbells past the ring are ignored.
    g.ringDoorbell(r.id.sq.qtype, 420, 64);
    await g.sync();
    expect(rec.sq.pi).to.equal(0);
  });

  it('answers QUERY_QP for a UD QP with its Q_Key; refuses unknown QPs and buffers outside guest RAM', async () => {
    await qp(430, QpT.UD, 0);
    await ok(AOp.MODIFY_QP, modify({ id: 430, mask: Mask.STATE | Mask.QKEY, state: QpS.INIT, qkeyDest: 0x01234567 }));
    expect((await query(430)).q).to.include({ state: QpS.INIT, qkeyDest: 0x01234567 });
    const rqAt = g.alloc(PAGE);
    g.mem(rqAt, 16).fill(0xee);
    await refused(AOp.QUERY_QP, queryQpBody(999, rqAt, rqAt), ASt.BAD_INDEX, 'an unknown QP');
    await refused(AOp.QUERY_QP, queryQpBody(430, 0x1000, rqAt), ASt.BAD_ATTR, 'an SQ record outside guest RAM');
    await refused(AOp.QUERY_QP, queryQpBody(430, rqAt, 0), ASt.BAD_ATTR, 'no RQ record buffer');
    expect(
      g.mem(rqAt, 16).every((b) => b === 0xee),
      'nothing written on refusal',
    ).to.equal(true);
  });
});

describe('ionic rdma: hw_counters (STATS_* and QP_STATS_*)', () => {
  let rig: Rig;
  let g: IonicGuest;
  let r: RdmaGuest;

  /** ionic_v1_stat_normalize + ionic_v1_stat_val, as the host reads them. */
  function readHeaders(buf: Buffer): { name: string; type: number; off: number }[] {
    const out: { name: string; type: number; off: number }[] = [];
    for (let at = 0; at + 32 <= buf.length; at += 32) {
      const w = buf.readUInt32BE(at);
      if (w >>> 28 === 0) break;
      const name = buf.toString('latin1', at + 4, at + 31).replace(/\0.*$/s, '');
      out.push({ name, type: w >>> 28, off: w & 0x0fffffff });
    }
    return out;
  }
  const valueOf = (vals: Buffer, h: { type: number; off: number }): number => {
    expect(h.type, 'LE64').to.equal(4);
    expect(h.off % 8).to.equal(0);
    return Number(vals.readBigUInt64LE(h.off));
  };

  before(async () => {
    rig = await Rig.start({ faults: FaultInjector.parse(['stats-vals-error=at:3']) });
    g = await rig.probed();
    r = await RdmaGuest.boot(g, { cpus: 8 });
  });
  after(async () => rig.close());
  afterEach(() => expect(g.violations).to.deep.equal([]));

  it('writes named LE64 counters ended by a type-0 record, and values the host reads back', async () => {
    const hdrAt = g.alloc(PAGE);
    g.mem(hdrAt, PAGE).fill(0xaa); // the device must end the list itself
    expect((await r.post(AOp.STATS_HDRS, statsBody(hdrAt, PAGE))).error).to.equal(false);
    const hdrs = readHeaders(g.mem(hdrAt, PAGE));
    expect(hdrs.length).to.be.within(10, 127);
    expect(hdrs.map((h) => h.name)).to.include.members([
      'admin_commands',
      'admin_errors',
      'eq_events',
      'qps_active',
      'tx_bytes',
    ]);
    for (const h of hdrs) expect(h.name.length).to.be.within(1, 27);
    const valAt = g.alloc(PAGE);
    expect((await r.post(AOp.STATS_VALS, statsBody(valAt, PAGE))).error).to.equal(false);
    const vals = Buffer.from(g.mem(valAt, PAGE));
    const by = Object.fromEntries(hdrs.map((h) => [h.name, valueOf(vals, h)]));
    // STATS_HDRS and this STATS_VALS: both counted before the values were taken? The VALS itself is counted after.
    const dev = rig.device.rdma!.counters.snapshot();
    expect(by.admin_commands).to.equal(dev.admin_commands! - 1);
    expect(by.admin_errors).to.equal(0);
    expect(by.eq_events).to.be.at.least(1);
    expect(by.cqs_active).to.equal(2); // the two admin CQs
  });

  it('answers QP_STATS_HDRS and QP_STATS_VALS per QP, as rdma counters sum them', async () => {
    const ring = contiguousRing(g, PAGE).dma;
    expect((await r.post(AOp.CREATE_CQ, createCqBody({ id: 300, eqId: 2, depthLog2: 7, dma: ring }))).error).to.equal(
      false,
    );
    const body = createQpBody({
      id: 500,
      type: QpT.RC,
      sq: { cqId: 300, depthLog2: 6, strideLog2: 6, dma: contiguousRing(g, PAGE).dma },
      rq: { cqId: 300, depthLog2: 6, strideLog2: 6, dma: contiguousRing(g, PAGE).dma },
    });
    expect((await r.post(AOp.CREATE_QP, body)).error).to.equal(false);
    for (let i = 1; i <= 3; i++) g.ringDoorbell(r.id.sq.qtype, 500, i);
    const hdrAt = g.alloc(PAGE);
    expect((await r.post(AOp.QP_STATS_HDRS, statsBody(hdrAt, PAGE))).error).to.equal(false);
    const hdrs = readHeaders(g.mem(hdrAt, PAGE));
    expect(hdrs.map((h) => h.name)).to.include.members([
      'doorbell_send',
      'doorbell_recv',
      'bytes_sent',
      'bytes_received',
    ]);
    const valAt = g.alloc(PAGE);
    expect((await r.post(AOp.QP_STATS_VALS, statsBody(valAt, PAGE, 500))).error).to.equal(false);
    const vals = Buffer.from(g.mem(valAt, PAGE));
    const by = Object.fromEntries(hdrs.map((h) => [h.name, valueOf(vals, h)]));
    expect(by).to.include({ doorbell_send: 3, doorbell_recv: 0 });
  });

  it('refuses bad stats commands, and fails STATS_VALS when the fault injector says so', async () => {
    const at = g.alloc(PAGE);
    const cases: Array<[string, number, Buffer, number]> = [
      ['QP_STATS_VALS of an unknown QP', AOp.QP_STATS_VALS, statsBody(at, PAGE, 999), ASt.BAD_INDEX],
      ['STATS_VALS with an id', AOp.STATS_VALS, statsBody(at, PAGE, 5), ASt.BAD_INDEX],
      ['STATS_HDRS with an id', AOp.STATS_HDRS, statsBody(at, PAGE, 5), ASt.BAD_INDEX],
      ['a header buffer too small for the list', AOp.STATS_HDRS, statsBody(at, 64), ASt.MSG_TOO_BIG],
      ['a values buffer of 8 bytes', AOp.STATS_VALS, statsBody(at, 8), ASt.MSG_TOO_BIG],
      ['a buffer outside guest RAM', AOp.STATS_HDRS, statsBody(0x1000, PAGE), ASt.BAD_ATTR],
      ['type_state set', AOp.STATS_VALS, statsBody(at, PAGE, 0, 1), ASt.BAD_ATTR],
    ];
    for (const [what, op, body, status] of cases) {
      const c = await r.post(op, body);
      expect([c.error, c.status], what).to.deep.equal([true, status]);
    }
    // Refusals are decided before the injector is asked: the injector saw one STATS_VALS so far, so the 3rd is among these.
    const results: boolean[] = [];
    for (let i = 0; i < 3; i++) results.push((await r.post(AOp.STATS_VALS, statsBody(at, PAGE))).error);
    expect(results.filter((e) => e).length).to.equal(1);
  });
});

describe('ionic rdma: SRQ commands (out-of-tree series) and RDMA_RESET_LIF', () => {
  let rig: Rig;
  let g: IonicGuest;
  let r: RdmaGuest;

  const srqBody = (o: {
    ring: number;
    resp: number;
    limit?: number;
    udma?: number;
    respLen?: number;
    depth?: number;
  }): Buffer => {
    const b = Buffer.alloc(ALen.CREATE_SRQ);
    putU64(b, 0, o.ring);
    b.writeUInt32LE(1, 8);
    b.writeUInt32LE(1, 12);
    b.writeUInt16LE(o.limit ?? 0, 22);
    b[26] = o.depth ?? 6;
    b[27] = 6;
    b[28] = 0;
    b[29] = o.udma ?? 3;
    b.writeUInt32LE(o.respLen ?? 5, 30);
    putU64(b, 34, o.resp);
    return b;
  };

  before(async () => {
    rig = await Rig.start();
    g = await rig.probed(0, { ramSize: 96 << 20 });
    r = await RdmaGuest.boot(g, { cpus: 8 });
  });
  after(async () => rig.close());
  afterEach(() => expect(g.violations).to.deep.equal([]));

  it('creates an SRQ with a device-assigned id above the QP range, binds a QP to it, sets and reads its limit', async () => {
    const rm = rig.device.rdma!.rm;
    const resp = g.alloc(PAGE);
    const c = await r.post(AOp.CREATE_SRQ, srqBody({ ring: contiguousRing(g, PAGE).dma, resp, limit: 7 }));
    expect([c.error, c.statusLength]).to.deep.equal([false, 5]);
    const srqId = g.mem(resp, 5).readUInt32LE(0);
    expect(srqId).to.be.at.least(r.id.sq.count);
    expect(g.mem(resp, 5)[4]).to.equal(0);
    expect(rm.srqs.get(srqId)!.limit).to.equal(7);
    expect(
      (await r.post(AOp.CREATE_CQ, createCqBody({ id: 300, eqId: 2, depthLog2: 7, dma: contiguousRing(g, PAGE).dma })))
        .error,
    ).to.equal(false);
    const qpBody = createQpBody({
      id: 600,
      type: QpT.RC,
      sq: { cqId: 300, depthLog2: 6, strideLog2: 6, dma: contiguousRing(g, PAGE).dma },
      srqId,
    });
    expect((await r.post(AOp.CREATE_QP, qpBody)).error).to.equal(false);
    expect(rm.qps.get(600)).to.include({ srqId, rq: null });
    g.ringDoorbell(r.id.rq.qtype, srqId, 12);
    await g.sync();
    expect(rm.srqs.get(srqId)!.ring.pi).to.equal(12);
    const mod = Buffer.alloc(ALen.MODIFY_SRQ);
    mod.writeUInt32LE(srqId, 0);
    mod.writeUInt16LE(99, 4);
    expect((await r.post(AOp.MODIFY_SRQ, mod)).error).to.equal(false);
    expect((await r.post(AOp.QUERY_SRQ, idBody(srqId))).statusLength).to.equal(99);
    expect((await r.post(AOp.DESTROY_SRQ, idBody(srqId))).status).to.equal(ASt.BAD_STATE); // a QP uses it
    expect((await r.post(AOp.DESTROY_QP, idBody(600))).error).to.equal(false);
    expect((await r.post(AOp.DESTROY_SRQ, idBody(srqId))).error).to.equal(false);
    expect((await r.post(AOp.QUERY_SRQ, idBody(srqId))).status).to.equal(ASt.BAD_INDEX);
    // Refusals: no udma, a short response buffer, a response outside guest RAM.
    for (const [what, body] of [
      ['udma mask 0', srqBody({ ring: contiguousRing(g, PAGE).dma, resp, udma: 0 })],
      ['a 4-byte response buffer', srqBody({ ring: contiguousRing(g, PAGE).dma, resp, respLen: 4 })],
      ['a response outside guest RAM', srqBody({ ring: contiguousRing(g, PAGE).dma, resp: 0x1000 })],
      ['a ring outside guest RAM', srqBody({ ring: 0x2000, resp })],
    ] as const) {
      const cc = await r.post(AOp.CREATE_SRQ, body);
      expect([cc.error, cc.status], what).to.deep.equal([true, ASt.BAD_ATTR]);
    }
    expect(rm.srqs.size).to.equal(0);
  });

  it('forgets every object on RDMA_RESET_LIF; a reloaded driver gets the same ids again', async () => {
    const dev = rig.device.rdma!;
    const ring = (): number => contiguousRing(g, PAGE).dma;
    const objects = async (): Promise<void> => {
      expect(
        (await r.post(AOp.CREATE_CQ, createCqBody({ id: 700, eqId: 2, depthLog2: 7, dma: ring() }))).error,
      ).to.equal(false);
      expect(
        (
          await r.post(
            AOp.CREATE_QP,
            createQpBody({
              id: 701,
              type: QpT.UD,
              sq: { cqId: 700, depthLog2: 6, strideLog2: 6, dma: ring() },
              rq: { cqId: 700, depthLog2: 6, strideLog2: 6, dma: ring() },
            }),
          )
        ).error,
      ).to.equal(false);
      const p = pagedRing(g, 2 * PAGE);
      expect(
        (
          await r.post(
            AOp.CREATE_MR,
            createMrBody({
              key: 0x702,
              va: 0,
              length: 2 * PAGE,
              flags: MrF.LOCAL_WRITE,
              mapCount: 2,
              dma: p.dma,
              pageSizeLog2: 12,
            }),
          )
        ).error,
      ).to.equal(false);
      const tpl = headerTemplate({ sip: v4('10.0.0.1'), dip: v4('10.0.0.9') });
      expect(
        (await r.post(AOp.CREATE_AH, createAhBody({ id: 703, dma: placeTemplate(g, tpl), length: tpl.length }))).error,
      ).to.equal(false);
    };
    await objects();
    expect(dev.rm.counts()).to.include({ qps: 1, mrs: 1, ahs: 1, cqs: 4 }); // with the SRQ test's CQ 300
    expect(await r.resetLif()).to.equal(0);
    expect(dev.rm.counts()).to.deep.equal({ qps: 0, cqs: 0, mrs: 0, ahs: 0, srqs: 0, ptRuns: 0 });
    expect([dev.eqs.size, dev.aqs.size]).to.deep.equal([0, 0]);
    r = await RdmaGuest.boot(g, { cpus: 8 });
    await objects();
    expect(dev.rm.counts()).to.include({ qps: 1, mrs: 1, ahs: 1, cqs: 3 });
  });

  it('forgets everything on LIF_RESET and device RESET too (the driver frees the rings next)', async () => {
    const dev = rig.device.rdma!;
    expect(dev.rm.counts().qps).to.equal(1);
    await g.remove(); // ionic_remove: LIF_RESET, PORT_RESET, RESET
    expect(dev.rm.counts()).to.deep.include({ qps: 0, cqs: 0, mrs: 0 });
    expect(dev.eqs.size).to.equal(0);
  });
});
