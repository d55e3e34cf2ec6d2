// `--backend roce` end to end: two servers in this process, each with its
// own device and guest model (real vfio-user sockets, memfd guest memory),
// their Ethernet ports joined by an in-process wire. RC SEND, WRITE, READ and
// atomics and UD datagrams cross it as RoCEv2 frames with their data checked;
// QPs whose peer is in the same VM stay off the wire; bad frames from the
// wire are dropped and counted; a responder error ends both QPs with the
// asynchronous event; a lossy wire is recovered from by retransmission.

import { expect } from 'chai';
import { IonicStatus } from '../../lib/rdma/datapath/cqe';
import { serverRegistry } from '../../lib/ops/metrics';
import { collectStats } from '../../lib/ops/stats-source';
import { isRoceV2 } from '../../lib/roce/frame';
import { writeIcrc } from '../../lib/roce/icrc';
import { cqesOf as cqes } from '../mesh/helpers';
import { AOp, CqeT, MrF, QpS, QpT, ROp, WOp } from '../support/ionic/rdma-regs';
import { statsBody } from '../support/ionic/rdma-cmds';
import { PAGE } from '../support/ionic/regs';
import { DEVICE_COUNTER_NAMES } from '../../lib/rdma/counters';
import { Cq, GuestMr, Qp, v4, VerbsGuest } from '../support/ionic/rdma-verbs';
import { pattern, roceGuests, RoceGuests } from './roce-helpers';

const ALL = MrF.LOCAL_WRITE | MrF.REMOTE_WRITE | MrF.REMOTE_READ | MrF.REMOTE_ATOMIC;
const IP_A = '10.26.0.1';
const IP_B = '10.26.0.2';
const EQE_QP = 1;
const COMM_EST = 2;
const ERR_ACCESS = 10;

describe('backends: --backend roce, two servers over an Ethernet wire', function () {
  this.timeout(60_000);
  let pair: RoceGuests | undefined;
  let a: VerbsGuest;
  let b: VerbsGuest;
  let acq: Cq;
  let bcq: Cq;
  let A: GuestMr;
  let B: GuestMr;
  let qa: Qp;
  let qb: Qp;

  async function crossPair(idA: number, idB: number, timeout = 14): Promise<[Qp, Qp]> {
    const x = await a.createQp(idA, QpT.RC, { sqCq: acq, rqCq: acq });
    const y = await b.createQp(idB, QpT.RC, { sqCq: bcq, rqCq: bcq });
    await a.connect(x, y.id, { tpl: { sip: v4(IP_A), dip: v4(IP_B) }, timeout });
    await b.connect(y, x.id, { tpl: { sip: v4(IP_B), dip: v4(IP_A) }, timeout });
    return [x, y];
  }

  before(async () => {
    pair = await roceGuests(IP_A, IP_B, 512);
    ({ a, b } = pair);
    acq = await a.createCq(40);
    bcq = await b.createCq(40);
    A = await a.createMr({ key: 0x501, pages: 16, flags: ALL });
    B = await b.createMr({ key: 0x702, pages: 16, flags: ALL });
    [qa, qb] = await crossPair(20, 30);
  });

  after(async () => {
    await pair?.close();
  });

  afterEach(() => {
    if (pair) pair.pipe.tap = null;
  });

  it("SEND with immediate: the bytes land in B's receive as RoCEv2 frames; A completes after B's ACK", async () => {
    const sentBefore = pair!.pipe.a.roceSent;
    const resentBefore = pair!.backendA.counters()!['retransmits'] ?? 0;
    const data = pattern(3000, 7);
    A.write(100, data);
    b.postRecv(qb, { id: 0x99, sges: [B.sge(0, 4096)] });
    a.postSend(qa, { op: WOp.SEND_IMM, id: 1, imm: 0xcafef00d, sges: [A.sge(100, 3000)] });
    const rc = await cqes(b, bcq, 1);
    expect(rc[0]!.type).to.equal(CqeT.RECV);
    expect(rc[0]!.error).to.equal(false);
    expect(rc[0]!.statusLength).to.equal(3000);
    expect(rc[0]!.recvOp).to.equal(ROp.SEND_IMM);
    expect(rc[0]!.immDataRkey >>> 0).to.equal(0xcafef00d);
    expect(rc[0]!.srcQpn).to.equal(qa.id);
    expect(B.read(0, 3000).equals(data)).to.equal(true);
    const sc = await cqes(a, acq, 1);
    expect(sc.map((c) => [c.type, c.error, c.msn])).to.deep.equal([[CqeT.SEND_MSN, false, 1]]);
    // 3000 bytes at a 1024-byte path MTU: three request packets from A, besides any
    // resend of them (a loaded machine can hold B's ACK past the local ACK timeout).
    const ca = pair!.backendA.counters()!;
    expect(pair!.pipe.a.roceSent - sentBefore - ((ca['retransmits'] ?? 0) - resentBefore)).to.equal(3);
    const cb = pair!.backendB.counters()!;
    expect(ca['tx_packets']).to.be.at.least(3);
    expect(cb['rx_packets']).to.be.at.least(3);
    expect(cb['acks_tx']).to.be.at.least(1);
  });

  it('COMM_EST reached B when its first packet arrived in RTR', async () => {
    const x = await a.createQp(60, QpT.RC, { sqCq: acq, rqCq: acq });
    const y = await b.createQp(61, QpT.RC, { sqCq: bcq, rqCq: bcq });
    // B only to RTR: the first packet is taken there and raises COMM_EST.
    await b.connect(y, x.id, { tpl: { sip: v4(IP_B), dip: v4(IP_A) } });
    await b.modify(y, { mask: 0, state: QpS.RTS }).catch(() => undefined);
    await a.connect(x, y.id, { tpl: { sip: v4(IP_A), dip: v4(IP_B) } });
    A.write(0, pattern(16, 1));
    a.postSend(x, { op: WOp.RDMA_WRITE, id: 2, sges: [A.sge(0, 16)], remote: { va: B.va + 8000, rkey: B.key } });
    const sc = await cqes(a, acq, 1);
    expect(sc[0]!.error).to.equal(false);
    expect(B.read(8000, 16).equals(pattern(16, 1))).to.equal(true);
    // connect() took B to RTS before A sent: no COMM_EST is owed (the IBTA raises it only in RTR).
    b.r.service();
    expect(b.r.events.filter((e) => e.type === EQE_QP && e.qid === y.id && e.code === COMM_EST)).to.deep.equal([]);
  });

  it("RDMA WRITE (across pages, 20 KiB) by B's rkey, then RDMA READ it back into another range of A", async () => {
    const data = pattern(20_000, 3);
    A.write(0, data);
    a.postSend(qa, { op: WOp.RDMA_WRITE, id: 2, sges: [A.sge(0, 20_000)], remote: { va: B.va + 5, rkey: B.key } });
    a.postSend(qa, { op: WOp.RDMA_READ, id: 3, sges: [A.sge(24_000, 20_000)], remote: { va: B.va + 5, rkey: B.key } });
    const sc = await cqes(a, acq, 2);
    expect(sc.map((c) => [c.error, c.statusLength])).to.deep.equal([
      [false, 0],
      [false, 0],
    ]);
    expect(B.read(5, 20_000).equals(data)).to.equal(true);
    expect(A.read(24_000, 20_000).equals(data)).to.equal(true);
  });

  it("atomics: fetch-and-add and compare-and-swap on B's memory return the old value to A", async () => {
    B.write(64, Buffer.from('0100000000000000', 'hex'));
    a.postSend(qa, {
      op: WOp.ATOMIC_FA,
      id: 4,
      remote: { va: B.va + 64, rkey: B.key },
      atomic: { swapAdd: 41n, local: A.sge(200, 8) },
    });
    a.postSend(qa, {
      op: WOp.ATOMIC_CS,
      id: 5,
      remote: { va: B.va + 64, rkey: B.key },
      atomic: { swapAdd: 7n, compare: 42n, local: A.sge(208, 8) },
    });
    const sc = await cqes(a, acq, 2);
    expect(sc.every((c) => !c.error)).to.equal(true);
    expect(A.read(200, 8).readBigUInt64LE(0)).to.equal(1n);
    expect(A.read(208, 8).readBigUInt64LE(0)).to.equal(42n);
    expect(B.read(64, 8).readBigUInt64LE(0)).to.equal(7n);
  });

  it('UD: the datagram arrives with its GRH on B (Q_Key checked there); the sender completes at once', async () => {
    const ua = await a.createQp(40, QpT.UD, { sqCq: acq, rqCq: acq });
    const ub = await b.createQp(41, QpT.UD, { sqCq: bcq, rqCq: bcq });
    await a.readyUd(ua, 0x1234);
    await b.readyUd(ub, 0x1234);
    await a.createAh(3, { sip: v4(IP_A), dip: v4(IP_B) });
    b.postRecv(ub, { id: 0x55, sges: [B.sge(12_000, 40 + 100)] });
    A.write(500, pattern(100, 9));
    a.postSend(ua, { op: WOp.SEND, id: 10, sges: [A.sge(500, 100)], ud: { ah: 3, qpn: ub.id, qkey: 0x1234 } });
    // A wrong Q_Key is dropped on B: no receive consumed.
    a.postSend(ua, { op: WOp.SEND, id: 11, sges: [A.sge(500, 100)], ud: { ah: 3, qpn: ub.id, qkey: 0x9999 } });
    const sc = await cqes(a, acq, 2);
    expect(sc.every((c) => !c.error && c.type === CqeT.SEND_NPG)).to.equal(true);
    const rc = await cqes(b, bcq, 1);
    expect(rc[0]!.statusLength).to.equal(140);
    expect(rc[0]!.srcQpn).to.equal(ua.id);
    expect(rc[0]!.ipv4).to.equal(true);
    expect(B.read(12_040, 100).equals(pattern(100, 9))).to.equal(true);
    // The GRH's IPv4 header names A as the source (bytes 20.. of the GRH: the IPv4 header; source at +12).
    expect([...B.read(12_000 + 20 + 12, 4)]).to.deep.equal([...v4(IP_A)]);
    await new Promise((r) => setTimeout(r, 100));
    expect(b.drain(bcq)).to.deep.equal([]);
    expect(pair!.backendB.counters()!['drops_bad_qkey']).to.be.at.least(1);
  });

  it('UD ping-pong (as ibv_ud_pingpong): 200 round trips, one datagram each way at a time, rings wrapping many times', async () => {
    const cqa = await a.createCq(45, 5);
    const cqb = await b.createCq(46, 5);
    const ua = await a.createQp(42, QpT.UD, { sqCq: cqa, rqCq: cqa, depthLog2: 3 });
    const ub = await b.createQp(43, QpT.UD, { sqCq: cqb, rqCq: cqb, depthLog2: 4 });
    await a.readyUd(ua, 0x11111111);
    await b.readyUd(ub, 0x11111111);
    await a.createAh(5, { sip: v4(IP_A), dip: v4(IP_B) });
    await b.createAh(6, { sip: v4(IP_B), dip: v4(IP_A) });
    const post = (v: VerbsGuest, q: Qp, M: GuestMr, id: number): void => {
      v.postRecv(q, { id, sges: [M.sge(20_000 + (id % 4) * 1100, 1064)] });
    };
    for (let i = 0; i < 4; i++) post(b, ub, B, i);
    for (let i = 0; i < 4; i++) post(a, ua, A, i);
    let na = 4;
    let nb = 4;
    for (let i = 0; i < 200; i++) {
      a.postSend(ua, { op: WOp.SEND, id: i, sges: [A.sge(500, 1024)], ud: { ah: 5, qpn: ub.id, qkey: 0x11111111 } });
      const gb = await cqes(b, cqb, 1);
      expect(gb.map((c) => [c.type, c.error])).to.deep.equal([[CqeT.RECV, false]], `B's receive ${i}`);
      post(b, ub, B, nb++);
      b.postSend(ub, { op: WOp.SEND, id: i, sges: [B.sge(500, 1024)], ud: { ah: 6, qpn: ua.id, qkey: 0x11111111 } });
      const ga = await cqes(a, cqa, 2);
      expect(ga.filter((c) => c.error)).to.deep.equal([], `A's completions ${i}`);
      post(a, ua, A, na++);
      expect((await cqes(b, cqb, 1))[0]!.type).to.equal(CqeT.SEND_NPG);
    }
  });

  it('two QPs of the same VM stay off the wire (loopback through the executor)', async () => {
    const x = await a.createQp(50, QpT.RC, { sqCq: acq, rqCq: acq });
    const y = await a.createQp(51, QpT.RC, { sqCq: acq, rqCq: acq });
    await a.connect(x, y.id, { tpl: { sip: v4(IP_A), dip: v4(IP_A) } });
    await a.connect(y, x.id, { tpl: { sip: v4(IP_A), dip: v4(IP_A) } });
    const before = pair!.pipe.a.sent;
    A.write(300, pattern(64, 5));
    a.postSend(x, { op: WOp.RDMA_WRITE, id: 7, sges: [A.sge(300, 64)], remote: { va: A.va + 9000, rkey: A.key } });
    const sc = await cqes(a, acq, 1);
    expect(sc[0]!.error).to.equal(false);
    expect(A.read(9000, 64).equals(pattern(64, 5))).to.equal(true);
    expect(pair!.pipe.a.sent).to.equal(before);
  });

  it('bad frames from the wire are dropped and counted: a broken ICRC, an unknown QPN; other traffic goes to the guest', async () => {
    const frames: Buffer[] = [];
    pair!.pipe.tap = (f, from) => {
      if (from === 'a' && isRoceV2(f, f.length)) frames.push(Buffer.from(f));
      return f;
    };
    A.write(0, pattern(32, 2));
    a.postSend(qa, { op: WOp.RDMA_WRITE, id: 8, sges: [A.sge(0, 32)], remote: { va: B.va + 100, rkey: B.key } });
    await cqes(a, acq, 1);
    expect(frames.length).to.be.at.least(1);
    const before = pair!.backendB.counters()!;
    const broken = Buffer.from(frames[0]!);
    broken[broken.length - 1]! ^= 0xff;
    pair!.pipe.b.inject(broken);
    // The same frame for a QPN nobody has: BTH dest QP at UDP payload + 5 (IPv4, no VLAN: 14 + 20 + 8).
    const unknown = Buffer.from(frames[0]!);
    unknown.writeUIntBE(0x777, 14 + 20 + 8 + 5, 3);
    writeIcrc(unknown, 14, 4, unknown.length - 4);
    pair!.pipe.b.inject(unknown);
    // Short, and not RoCE at all: the second goes on to the guest (not claimed, not counted).
    pair!.pipe.b.inject(frames[0]!.subarray(0, 50));
    const after = pair!.backendB.counters()!;
    expect(after['icrc_errors']! - before['icrc_errors']!).to.equal(1);
    expect(after['drops_unknown_qpn']! - before['drops_unknown_qpn']!).to.equal(1);
    expect(after['drops_too_short']! + after['drops_truncated']!).to.equal(
      before['drops_too_short']! + before['drops_truncated']!,
    );
    expect(b.qpState(qb)).to.equal(QpS.RTS);
  });

  it('a WRITE with a wrong rkey: REMOTE_ACC on A, both QPs in ERR, ERR_ACCESS on B', async () => {
    const [x, y] = await crossPair(70, 71);
    A.write(0, Buffer.alloc(64, 0xee));
    a.postSend(x, { op: WOp.RDMA_WRITE, id: 1, sges: [A.sge(0, 64)], remote: { va: B.va, rkey: B.key + 0x100 } });
    const sc = await cqes(a, acq, 1);
    expect([sc[0]!.type, sc[0]!.error, sc[0]!.statusLength]).to.deep.equal([
      CqeT.SEND_MSN,
      true,
      IonicStatus.REMOTE_ACC,
    ]);
    expect(a.qpState(x)).to.equal(QpS.ERR);
    expect(b.qpState(y)).to.equal(QpS.ERR);
    const ev = await b.g.waitFor(
      `a QP event for ${y.id}`,
      () => {
        b.r.service();
        return b.r.events.find((e) => e.type === EQE_QP && e.qid === y.id && e.code === ERR_ACCESS);
      },
      10_000,
    );
    expect(ev).to.deep.include({ code: ERR_ACCESS, qid: y.id });
    expect(pair!.backendA.counters()!['naks_rx_remote_access']).to.be.at.least(1);
  });

  it('a lossy wire (every 7th frame lost each way): 30 KB WRITE and READ complete with the right bytes, retransmits counted', async () => {
    const [x] = await crossPair(80, 81, 8);
    let n = 0;
    pair!.pipe.tap = (f) => (++n % 7 === 0 ? null : f);
    const size = 30_000;
    const data = pattern(size, 11);
    A.write(0, data);
    B.write(0, Buffer.alloc(size));
    const before = pair!.backendA.counters()!['retransmits']!;
    a.postSend(x, { op: WOp.RDMA_WRITE, id: 1, sges: [A.sge(0, size)], remote: { va: B.va, rkey: B.key } });
    a.postSend(x, { op: WOp.RDMA_READ, id: 2, sges: [A.sge(size, size)], remote: { va: B.va, rkey: B.key } });
    const sc = await cqes(a, acq, 2);
    expect(sc.map((c) => c.error)).to.deep.equal([false, false]);
    expect(B.read(0, size).equals(data)).to.equal(true);
    expect(A.read(size, size).equals(data)).to.equal(true);
    expect(pair!.backendA.counters()!['retransmits']! - before).to.be.at.least(1);
  });

  it('RNR: a SEND with no receive posted is NAKed and retried on the RNR timer until B posts one', async () => {
    const [x, y] = await crossPair(90, 91);
    A.write(0, pattern(100, 4));
    const naks = pair!.backendB.counters()!['naks_tx_rnr']!;
    a.postSend(x, { op: WOp.SEND, id: 1, sges: [A.sge(0, 100)] });
    await new Promise((r) => setTimeout(r, 30));
    expect(a.drain(acq)).to.deep.equal([]);
    expect(pair!.backendB.counters()!['naks_tx_rnr']! - naks).to.be.at.least(1);
    b.postRecv(y, { id: 0x42, sges: [B.sge(0, 128)] });
    const rc = await cqes(b, bcq, 1);
    expect([rc[0]!.error, rc[0]!.statusLength, rc[0]!.wqeIdLo]).to.deep.equal([false, 100, 0x42]);
    expect(B.read(0, 100).equals(pattern(100, 4))).to.equal(true);
    const sc = await cqes(a, acq, 1);
    expect(sc[0]!.error).to.equal(false);
  });

  it('a receive CQ the host has not drained: the SEND is answered RNR (no CQE lost) and lands once it is drained', async () => {
    const small = await b.createCq(47, 2); // 4 slots: 3 CQEs before the host must report
    const x = await a.createQp(94, QpT.RC, { sqCq: acq, rqCq: acq });
    const y = await b.createQp(95, QpT.RC, { sqCq: bcq, rqCq: small });
    await a.connect(x, y.id, { tpl: { sip: v4(IP_A), dip: v4(IP_B) } });
    await b.connect(y, x.id, { tpl: { sip: v4(IP_B), dip: v4(IP_A) }, rnrTimer: 1 });
    for (let i = 0; i < 4; i++) b.postRecv(y, { id: 0x60 + i, sges: [B.sge(i * 128, 128)] });
    const naks = pair!.backendB.counters()!['naks_tx_rnr']!;
    for (let i = 0; i < 4; i++) {
      A.write(i * 16, pattern(16, 40 + i));
      a.postSend(x, { op: WOp.SEND, id: i, sges: [A.sge(i * 16, 16)] });
    }
    await cqes(a, acq, 3);
    await new Promise((r) => setTimeout(r, 30));
    expect(a.drain(acq), 'the 4th waits: its receive CQE has no room').to.deep.equal([]);
    expect(pair!.backendB.counters()!['naks_tx_rnr']!).to.be.greaterThan(naks);
    const got = await cqes(b, small, 4); // draining reports the read position; the RNR retry then lands
    expect(got.map((c) => [c.error, c.wqeIdLo])).to.deep.equal([
      [false, 0x60],
      [false, 0x61],
      [false, 0x62],
      [false, 0x63],
    ]);
    expect(B.read(3 * 128, 16).equals(pattern(16, 43))).to.equal(true);
    expect((await cqes(a, acq, 1))[0]!.error).to.equal(false);
  });

  it('RNR retries run out: RNR_RETRY_EXCEEDED on A, its QP in ERR', async () => {
    const x = await a.createQp(92, QpT.RC, { sqCq: acq, rqCq: acq });
    const y = await b.createQp(93, QpT.RC, { sqCq: bcq, rqCq: bcq });
    await a.connect(x, y.id, { tpl: { sip: v4(IP_A), dip: v4(IP_B) }, rnrRetry: 2 });
    await b.connect(y, x.id, { tpl: { sip: v4(IP_B), dip: v4(IP_A) }, rnrTimer: 1 });
    a.postSend(x, { op: WOp.SEND, id: 1, sges: [A.sge(0, 10)] });
    const sc = await cqes(a, acq, 1);
    expect([sc[0]!.error, sc[0]!.statusLength]).to.deep.equal([true, IonicStatus.RNR_RETRY_EXCEEDED]);
    expect(a.qpState(x)).to.equal(QpS.ERR);
  });

  it("the driver's hw_counters (STATS_VALS) show the RoCE counters", async () => {
    const at = a.g.alloc(PAGE);
    const c = await a.r.post(AOp.STATS_VALS, statsBody(at, PAGE));
    expect(c.error).to.equal(false);
    const values = a.g.mem(at, PAGE);
    const value = (name: string): number =>
      Number(values.readBigUInt64LE(8 * DEVICE_COUNTER_NAMES.indexOf(name as never)));
    const roce = pair!.backendA.counters()!;
    expect(value('roce_tx_packets')).to.equal(roce['tx_packets']).and.to.be.greaterThan(0);
    expect(value('roce_rx_packets')).to.equal(roce['rx_packets']).and.to.be.greaterThan(0);
    expect(value('roce_retransmits')).to.equal(roce['retransmits']);
    expect(value('roce_naks_rx')).to.be.at.least(1);
  });

  it('the counters reach the stats file (RoCE Statistics) and /metrics (rocm_ernic_roce_*)', async () => {
    const src = {
      device: a.rig.device,
      socket: a.rig.path,
      backend: 'roce',
      mac: '02:65:72:6e:69:63',
      connection: { connected: true, state: 'connected' },
      roce: pair!.backendA,
    };
    const snap = collectStats(src, 1);
    const sec = snap.sections.find((x) => x.title === 'RoCE Statistics');
    expect(sec, 'a RoCE Statistics section').to.not.equal(undefined);
    const rows = new Map(sec!.rows);
    expect(rows.get('tx_packets')).to.be.greaterThan(0);
    expect(rows.has('drops_icrc')).to.equal(true);
    const text = await serverRegistry(src).metrics();
    expect(text).to.match(/rocm_ernic_roce_packets_total\{direction="tx"\} [1-9]/);
    expect(text).to.match(/rocm_ernic_roce_naks_total\{direction="rx",kind="remote_access"\} [1-9]/);
    expect(text).to.match(/rocm_ernic_roce_retransmits_total [1-9]/);
    expect(text).to.match(/rocm_ernic_roce_drops_total\{reason="unknown_qpn"\} 0/);
  });
});
