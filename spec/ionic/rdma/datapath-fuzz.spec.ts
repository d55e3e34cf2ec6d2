// Seeded fuzz of the live RDMA data path through the guest model: thousands
// of random WQEs (every verb, keys valid / off-by-tag / unknown / 0 / random,
// addresses inside, outside and straddling MRs, lengths from 0 to huge, SGE
// counts, inline, SPEC32, raw random bytes) on RC, UC and UD QPs with
// receives posted at random. After every batch:
// - every CQE is on the CQ its QP named, of a known type and status, for a
//   WQE that was posted and not completed before (at most one CQE per WQE,
//   in SQ order; receives in RQ order);
// - guest memory changed only inside the MRs of the QPs' PD that allow a write
//   (an independent snapshot of the data arena), and never in the SQ/RQ rings;
// QPs the device put in ERR (or left waiting for a receive) are reset and
// brought up again. At the end the device still runs admin commands and a
// good SEND.

import { expect } from 'chai';
import { PAGE } from '../../support/ionic/regs';
import { Prng } from '../../support/ionic/rig';
import { AOp, CqeT, MrF, QpF, QpS, QpT, ROp, WOp, WSt } from '../../support/ionic/rdma-regs';
import { idBody } from '../../support/ionic/rdma-cmds';
import { Cq, Cqe, GuestMr, Qp, SendWr, Sge, Snapshot, v4, v6, VerbsGuest } from '../../support/ionic/rdma-verbs';

type Range = [number, number];

const ALL = MrF.LOCAL_WRITE | MrF.REMOTE_WRITE | MrF.REMOTE_READ | MrF.REMOTE_ATOMIC;
const QKEY = 0x0badcafe;
const DEPTH = 16;
/** WQEs per fuzz run. */
const TARGET_WQES = 4000;

interface SendRec {
  readonly id: number;
  readonly op: number;
  /** The host's remote sequence (docs/driver-contract.md, ionic RDMA R4.7), or -1 for a non-remote WQE. */
  readonly seq: number;
  done: boolean;
}

interface QpModel {
  readonly qp: Qp;
  readonly peer: number;
  sends: SendRec[];
  /** Posted receives in RQ order; total -1 for raw bytes. */
  recvs: { id: number; total: number }[];
  /** Remote WQEs the highest MSN covers. */
  msn: number;
}

describe('ionic rdma: seeded fuzz of the live data path', function () {
  this.timeout(30000);
  let v: VerbsGuest;
  const models = new Map<number, QpModel>();
  let mrs: GuestMr[];
  /** Guest ranges a PD-1 QP may write (MRs of PD 1 with a write right). */
  let writable: Range[];
  let rings: Range[];
  let health: { h1: Qp; h2: Qp; cq: Cq; mr: GuestMr };
  let nextId = 1;
  let nextAh = 100;
  const outcomes = new Map<string, number>();

  const count = (k: string): void => {
    outcomes.set(k, (outcomes.get(k) ?? 0) + 1);
  };

  before(async () => {
    v = await VerbsGuest.boot({ arenaPages: 48 });
    const cqs = [await v.createCq(400), await v.createCq(401), await v.createCq(402)];
    mrs = [
      await v.createMr({ key: 0x101, pages: 3, offset: 0x40, flags: ALL }),
      await v.createMr({ key: 0x202, pages: 2, flags: MrF.LOCAL_WRITE }),
      await v.createMr({ key: 0x303, pages: 1, flags: MrF.REMOTE_READ }),
      await v.createMr({ key: 0x404, pages: 2, flags: ALL | MrF.ZERO_BASED, va: 0 }),
      await v.createMr({ key: 0x505, pages: 1, flags: ALL, pdId: 2 }),
      await v.createMr({
        key: 0x606,
        pages: 2,
        offset: 0x7f8,
        length: PAGE,
        flags: MrF.REMOTE_WRITE | MrF.LOCAL_WRITE | MrF.REMOTE_READ,
      }),
    ];
    writable = mrs
      .filter((m) => m.key !== 0x505 && (m.flags & (MrF.LOCAL_WRITE | MrF.REMOTE_WRITE | MrF.REMOTE_ATOMIC)) !== 0)
      .flatMap((m) => m.all());
    await v.createAh(1, { sip: v4('10.0.0.1'), dip: v4('10.0.0.2') });
    await v.createAh(2, { ipv6: true, sip: v6('fe80:0:0:0:0:0:0:1'), dip: v6('fe80:0:0:0:0:0:0:2'), vlan: 0x2007 });
    const mk = async (id: number, type: number, sq: number, rq: number, peer: number): Promise<Qp> => {
      const qp = await v.createQp(id, type, { sqCq: cqs[sq]!, rqCq: cqs[rq]! });
      models.set(id, { qp, peer, sends: [], recvs: [], msn: 0 });
      return qp;
    };
    const rc = [
      await mk(10, QpT.RC, 0, 1, 11),
      await mk(11, QpT.RC, 1, 0, 10),
      await mk(12, QpT.RC, 2, 2, 13),
      await mk(13, QpT.RC, 0, 2, 12),
    ];
    const ro = [await mk(14, QpT.RC, 1, 1, 15), await mk(15, QpT.RC, 2, 0, 14)];
    const uc = [await mk(16, QpT.UC, 0, 0, 17), await mk(17, QpT.UC, 1, 2, 16)];
    await v.connectPair(rc[0]!, rc[1]!);
    await v.connectPair(rc[2]!, rc[3]!);
    // Remote read only, and RNR NAKs not retried (RNR_RETRY_EXCEEDED at once).
    await v.connectPair(ro[0]!, ro[1]!, { access: QpF.REMOTE_READ, rnrRetry: 0 });
    await v.connectPair(uc[0]!, uc[1]!);
    for (const [id, sq, rq] of [
      [20, 0, 1],
      [21, 1, 2],
      [22, 2, 0],
      [23, 0, 0],
    ] as const) {
      const qp = await mk(id, QpT.UD, sq, rq, -1);
      await v.readyUd(qp, id === 23 ? QKEY + 1 : QKEY);
    }
    rings = [...models.values()].flatMap((m) => [
      [m.qp.sq.at, 1 << (m.qp.sq.depthLog2 + m.qp.sq.strideLog2)] as Range,
      [m.qp.rq!.at, 1 << (m.qp.rq!.depthLog2 + m.qp.rq!.strideLog2)] as Range,
    ]);
    const hcq = await v.createCq(403);
    const h1 = await v.createQp(90, QpT.RC, { sqCq: hcq, rqCq: hcq });
    const h2 = await v.createQp(91, QpT.RC, { sqCq: hcq, rqCq: hcq });
    await v.connectPair(h1, h2);
    health = { h1, h2, cq: hcq, mr: await v.createMr({ key: 0x9909, pages: 1, flags: ALL }) };
  });
  after(async () => v.close());
  afterEach(() => expect(v.g.violations).to.deep.equal([]));

  /** A good admin command and a good SEND on the health pair. */
  async function healthy(): Promise<void> {
    const ah = nextAh++;
    await v.createAh(ah, { sip: v4('10.0.0.1'), dip: v4('10.0.0.3') });
    await v.ok(AOp.DESTROY_AH, idBody(ah));
    const { h1, h2, cq, mr } = health;
    const id = nextId++;
    v.postRecv(h2, { id, sges: [mr.sge(100, 64)] });
    v.postSend(h1, { op: WOp.SEND, id, inline: Buffer.from(`alive ${id}`) });
    await v.settle();
    const c = v.drain(cq);
    expect(c.map((x) => [x.type, x.qid, x.error, x.statusLength])).to.deep.equal([
      [CqeT.RECV, 91, false, `alive ${id}`.length],
      [CqeT.SEND_MSN, 90, false, 0],
    ]);
    expect(mr.read(100, `alive ${id}`.length).toString()).to.equal(`alive ${id}`);
  }

  // ---- random WQEs -------------------------------------------------------------------------

  function fuzzer(rnd: Prng): {
    send: (m: QpModel) => { wr: SendWr | null; raw: Buffer | null };
    recv: (m: QpModel) => { sges: Sge[]; raw: Buffer | null };
  } {
    const chance = (p: number): boolean => rnd.below(1000) < p * 1000;
    const LENS = [
      0, 1, 7, 8, 16, 63, 64, 100, 255, 1000, 4095, 4096, 4097, 8195, 0x7fffffff, 0x80000000, 0x80000001, 0xffffffff,
    ];
    const pickKey = (): number => {
      const r = rnd.below(100);
      const m = rnd.pick(mrs);
      if (r < 62) return m.key;
      if (r < 72) return (m.key & ~0xff) | ((m.key + 1 + rnd.below(254)) & 0xff); // right index, wrong tag
      if (r < 80) return (((0x300 + rnd.below(0x3000)) << 8) | 1) >>> 0; // unknown index
      if (r < 90) return 0;
      return rnd.next();
    };
    const pickLen = (small: boolean): number =>
      small ? rnd.pick([0, 1, 8, 16, 33, 64, 100, 200, 512]) : rnd.pick(LENS);
    const pickVa = (key: number, len: number): number | bigint => {
      const m = mrs.find((x) => x.key === key) ?? (chance(0.7) ? rnd.pick(mrs) : null);
      const r = rnd.below(100);
      if (r < 4) return 2n ** 64n - BigInt(rnd.below(64)); // wraps
      if (r < 7) return 2 ** 53 + rnd.below(PAGE);
      if (!m) return v.arena.at + rnd.below(v.arena.bytes);
      if (r < 70) return m.va + rnd.below(Math.max(1, m.length - Math.min(len, m.length) + 1)); // inside
      if (r < 85) return m.va + m.length - rnd.below(Math.min(64, len + 1)); // straddles the end
      if (r < 92) return m.va - 1 - rnd.below(64); // before
      return v.arena.at + rnd.below(v.arena.bytes); // a bus address, not an iova
    };
    const sgl = (n: number, small: boolean): Sge[] =>
      Array.from({ length: n }, () => {
        const lkey = pickKey();
        const len = pickLen(small || chance(0.6));
        return { va: pickVa(lkey, len), len, lkey };
      });
    const rawBytes = (): Buffer => {
      const b = rnd.bytes(256);
      if (chance(0.8)) b[8] = rnd.below(14);
      if (chance(0.7)) b[9] = rnd.below(9);
      if (chance(0.5)) b.writeUInt16BE(rnd.below(16) | (rnd.below(3) << 12), 10);
      return b;
    };
    // Well-formed work: keys with the rights the op needs, in-bounds addresses, modest lengths.
    const goodMr = (bits: number): GuestMr => rnd.pick(mrs.filter((x) => x.key !== 0x505 && (x.flags & bits) === bits));
    const inside = (mr: GuestMr, len: number, align = 1): number => {
      let o = rnd.below(Math.max(1, mr.length - len + 1));
      o -= (mr.va + o) % align;
      return mr.va + (o < 0 ? o + align : o);
    };
    const goodSgl = (n: number, bits: number): Sge[] =>
      Array.from({ length: n }, () => {
        const mr = goodMr(bits);
        const len = rnd.pick([0, 1, 8, 33, 64, 100, 200, 512]);
        return { va: inside(mr, len), len, lkey: mr.key };
      });
    const goodSend = (m: QpModel): SendWr => {
      if (m.qp.type === QpT.UD) {
        const wr: SendWr = {
          op: rnd.pick([WOp.SEND, WOp.SEND_IMM]),
          imm: rnd.next(),
          ud: { ah: rnd.pick([1, 2]), qpn: rnd.pick([20, 21, 22]), qkey: rnd.pick([QKEY, 0x80000000]) },
        };
        if (chance(0.2)) wr.inline = rnd.bytes(rnd.below(200));
        else wr.sges = goodSgl(rnd.below(3), 0);
        return wr;
      }
      const op = rnd.pick([
        WOp.SEND,
        WOp.SEND_IMM,
        WOp.SEND_INV,
        WOp.RDMA_WRITE,
        WOp.RDMA_WRITE_IMM,
        WOp.RDMA_READ,
        WOp.ATOMIC_CS,
        WOp.ATOMIC_FA,
      ]);
      const wr: SendWr = { op, imm: rnd.next() };
      if (op === WOp.ATOMIC_CS || op === WOp.ATOMIC_FA) {
        const t = goodMr(MrF.REMOTE_ATOMIC);
        const l = goodMr(MrF.LOCAL_WRITE);
        wr.remote = { va: inside(t, 8, 8), rkey: t.key };
        wr.atomic = {
          swapAdd: BigInt(rnd.next()),
          compare: BigInt(rnd.below(2)),
          local: { va: inside(l, 8), len: 8, lkey: l.key },
        };
        return wr;
      }
      const t = goodMr(op === WOp.RDMA_READ ? MrF.REMOTE_READ : MrF.REMOTE_WRITE);
      wr.sges = goodSgl(rnd.below(4), op === WOp.RDMA_READ ? MrF.LOCAL_WRITE : 0);
      const len = wr.sges.reduce((x, g) => x + g.len, 0);
      wr.remote = { va: inside(t, len), rkey: t.key };
      if (op !== WOp.RDMA_READ && chance(0.15)) {
        wr.sges = [];
        wr.inline = rnd.bytes(rnd.below(225));
      }
      return wr;
    };
    const send = (m: QpModel): { wr: SendWr | null; raw: Buffer | null } => {
      if (chance(0.55)) return { wr: goodSend(m), raw: null };
      if (chance(0.1)) return { wr: null, raw: rawBytes() };
      const ud = m.qp.type === QpT.UD;
      const op =
        ud && chance(0.9)
          ? rnd.pick([WOp.SEND, WOp.SEND_IMM])
          : rnd.pick([
              WOp.SEND,
              WOp.SEND,
              WOp.SEND_IMM,
              WOp.SEND_INV,
              WOp.RDMA_WRITE,
              WOp.RDMA_WRITE,
              WOp.RDMA_WRITE_IMM,
              WOp.RDMA_READ,
              WOp.RDMA_READ,
              WOp.ATOMIC_CS,
              WOp.ATOMIC_FA,
              WOp.LOCAL_INV,
              WOp.REG_MR,
              WOp.BIND_MW,
              11,
            ]);
      const wr: SendWr = {
        op,
        signaled: chance(0.9),
        solicited: chance(0.1),
        imm: chance(0.5) ? pickKey() : rnd.next(),
      };
      if (ud) {
        const qpn = chance(0.8) ? rnd.pick([20, 21, 22, 23]) : rnd.pick([10, 11, 16, 1, 999, rnd.next()]);
        wr.ud = {
          ah: chance(0.9) ? rnd.pick([1, 2]) : rnd.pick([0, 77, rnd.next()]),
          qpn,
          qkey: rnd.pick([QKEY, QKEY, 0x80000000, QKEY + 1, rnd.next()]),
        };
      } else {
        const rkey = pickKey();
        wr.remote = { va: pickVa(rkey, 64), rkey };
      }
      if (op === WOp.ATOMIC_CS || op === WOp.ATOMIC_FA) {
        const lkey = pickKey();
        const rkey = wr.remote?.rkey ?? pickKey();
        let va = pickVa(rkey, 8);
        if (typeof va === 'number' && chance(0.8)) va -= va % 8;
        wr.remote = { va, rkey };
        wr.atomic = {
          swapAdd: BigInt(rnd.next()) << BigInt(rnd.below(33)),
          compare: BigInt(rnd.below(4)),
          local: { va: pickVa(lkey, 8), len: chance(0.9) ? 8 : rnd.pick([0, 4, 16]), lkey },
        };
        return { wr, raw: null };
      }
      if (op === WOp.REG_MR) {
        const m2 = rnd.pick(mrs);
        wr.numSge = rnd.below(256);
        wr.regMr = {
          va: rnd.pick([0, m2.va, rnd.next()]),
          length: rnd.pick([0, 64, PAGE, 3 * PAGE]),
          offset: rnd.below(2) * rnd.below(PAGE),
          dma: rnd.pick([m2.pages[0]!, v.arena.at + rnd.below(v.arena.bytes), 0]),
          mapCount: rnd.pick([0, 1, 2, 3, 1000]),
          flags: rnd.below(1 << 16),
          pageSizeLog2: rnd.pick([12, 12, 13, 0, 40]),
        };
        return { wr, raw: null };
      }
      if (op === WOp.BIND_MW) {
        wr.numSge = rnd.below(256);
        wr.bindMw = {
          va: rnd.pick(mrs).va,
          length: rnd.pick([0, 8, PAGE]),
          lkey: pickKey(),
          flags: rnd.below(1 << 16),
        };
        return { wr, raw: null };
      }
      if (op !== WOp.RDMA_READ && chance(0.15)) {
        wr.inline = rnd.bytes(rnd.below(225));
        if (chance(0.05)) wr.length = 225 + rnd.below(100);
        return { wr, raw: null };
      }
      const spec = chance(0.25);
      wr.sges = sgl(spec ? 3 + rnd.below(6) : rnd.below(5), chance(0.3));
      wr.spec = spec;
      if (chance(0.04)) wr.numSge = rnd.below(20);
      if (chance(0.03)) wr.length = rnd.next();
      return { wr, raw: null };
    };
    const recv = (m: QpModel): { sges: Sge[]; raw: Buffer | null } => {
      if (chance(0.03)) return { sges: [], raw: rawBytes() };
      if (chance(0.7)) {
        return {
          sges: Array.from({ length: 1 + rnd.below(3) }, () => {
            const mr = goodMr(MrF.LOCAL_WRITE);
            const len = (m.qp.type === QpT.UD ? 40 : 0) + 64 + rnd.below(900);
            return { va: inside(mr, len), len, lkey: mr.key };
          }),
          raw: null,
        };
      }
      const n = rnd.below(4);
      const sges: Sge[] = [];
      for (let i = 0; i < n; i++) {
        const mr = chance(0.8) ? rnd.pick(mrs.filter((x) => x.flags & MrF.LOCAL_WRITE)) : null;
        const lkey = mr && chance(0.85) ? mr.key : pickKey();
        const len = m.qp.type === QpT.UD && chance(0.7) ? 40 + rnd.below(300) : pickLen(chance(0.8));
        sges.push({
          va:
            mr && lkey === mr.key
              ? mr.va + rnd.below(Math.max(1, mr.length - Math.min(len, mr.length) + 1))
              : pickVa(lkey, len),
          len,
          lkey,
        });
      }
      return { sges, raw: null };
    };
    return { send, recv };
  }

  // ---- the model's checks ------------------------------------------------------------------

  function check(cq: Cq, c: Cqe, where: string): void {
    const m = models.get(c.qid);
    expect(m, `${where}: CQE for unknown QP ${c.qid}`).to.not.equal(undefined);
    const qp = m!.qp;
    const flush = c.error && c.statusLength === WSt.WQE_FLUSHED;
    if (c.error) expect(c.statusLength, `${where}: status`).to.be.within(1, 14);
    count(`${c.type}:${c.error ? c.statusLength : 0}`);
    const state = v.qpState(qp);
    switch (c.type) {
      case CqeT.SEND_MSN:
      case CqeT.SEND_NPG: {
        expect(cq.id, `${where}: send CQE of QP ${qp.id} on CQ ${cq.id}`).to.equal(qp.sqCq.id);
        if (flush) {
          expect(c.type, `${where}: SQ flush hint type`).to.equal(CqeT.SEND_NPG);
          expect(state, `${where}: SQ flush hint while QP ${qp.id} not in ERR`).to.equal(QpS.ERR);
          return;
        }
        let i: number;
        if (c.type === CqeT.SEND_MSN) {
          expect(qp.type === QpT.RC || qp.type === QpT.UC, `${where}: MSN on a ${qp.type} QP`).to.equal(true);
          expect(c.msn, `${where}: MSN ${c.msn} after ${m!.msn}`).to.be.greaterThan(m!.msn);
          i = m!.sends.findIndex((s) => s.seq === c.msn - 1);
          expect(i, `${where}: MSN ${c.msn} beyond the remote WQEs posted`).to.be.at.least(0);
          m!.msn = c.msn;
        } else {
          i = m!.sends.findIndex((s) => s.id === c.wqeIdLo);
          expect(i, `${where}: NPG for wqe_id ${c.wqeIdLo} not posted on QP ${qp.id}`).to.be.at.least(0);
          if (!c.error)
            expect(m!.sends[i]!.seq, `${where}: a successful NPG for a remote WQE (op ${m!.sends[i]!.op})`).to.equal(
              -1,
            );
        }
        const rec = m!.sends[i]!;
        expect(rec.done, `${where}: a second CQE for WQE ${rec.id}`).to.equal(false);
        // In SQ order: everything before it completed, or covered by the cumulative MSN.
        const open = m!.sends.slice(0, i).filter((s) => !s.done && !(s.seq >= 0 && s.seq < m!.msn));
        expect(
          open.map((s) => s.id),
          `${where}: completed out of order`,
        ).to.deep.equal([]);
        rec.done = true;
        return;
      }
      case CqeT.RECV: {
        expect(cq.id, `${where}: RECV CQE of QP ${qp.id} on CQ ${cq.id}`).to.equal(qp.rqCq.id);
        if (flush) {
          expect(state, `${where}: RQ flush hint while QP ${qp.id} not in ERR`).to.equal(QpS.ERR);
          m!.recvs = [];
          return;
        }
        const r = m!.recvs.shift();
        expect(r, `${where}: RECV CQE with no receive posted`).to.not.equal(undefined);
        expect(c.wqeIdLo, `${where}: receives complete in RQ order`).to.equal(r!.id);
        expect(c.recvOp, `${where}: recv op`).to.be.within(ROp.SEND, ROp.RDMA_WRITE_IMM);
        // A receive WQE the device could not use completes in error with no source.
        if (!c.error) expect(models.has(c.srcQpn), `${where}: source QP ${c.srcQpn}`).to.equal(true);
        if (!c.error && r!.total >= 0 && c.recvOp !== ROp.RDMA_WRITE_IMM) {
          expect(c.statusLength, `${where}: byte count past the receive`).to.be.at.most(r!.total);
        }
        if (!c.error && qp.type === QpT.UD) {
          expect(c.statusLength, `${where}: UD byte count without the network header`).to.be.at.least(40);
          expect([ROp.SEND, ROp.SEND_IMM]).to.include(c.recvOp);
        }
        return;
      }
      default:
        expect.fail(`${where}: CQE type ${c.type}`);
    }
  }

  /** Drain and check every CQ until nothing new arrives (a drain's ring-0 doorbell may release held work). */
  async function collect(where: string): Promise<void> {
    for (let round = 0; round < 8; round++) {
      let n = 0;
      for (const cq of v.cqs.values()) {
        if (cq.id === health.cq.id) continue;
        for (const c of v.drain(cq)) {
          check(cq, c, where);
          n++;
        }
      }
      await v.settle();
      if (n === 0) return;
    }
  }

  async function resetQp(m: QpModel, where: string): Promise<void> {
    // Resetting one QP can complete another (a sender waiting on it fails with
    // RETRY_EXCEEDED): take those CQEs against the models before this one is cleared.
    await v.settle();
    await collect(`${where} (before resetting QP ${m.qp.id})`);
    await v.reset(m.qp);
    m.sends = [];
    m.recvs = [];
    m.msn = 0;
    count('reset');
  }

  async function run(seed: number): Promise<void> {
    const rnd = new Prng(seed);
    outcomes.clear();
    const fz = fuzzer(rnd);
    const all = [...models.values()];
    let wqes = 0;
    let batch = 0;
    while (wqes < TARGET_WQES) {
      batch++;
      const where = `seed ${seed.toString(16)} batch ${batch}`;
      const snap = new Snapshot(v.g, [[v.arena.at, v.arena.bytes]]);
      // Completed (or MSN-covered) WQEs need no more tracking.
      for (const m of all) m.sends = m.sends.filter((s) => !s.done && !(s.seq >= 0 && s.seq < m.msn));
      // Receives first or interleaved; sends on a few QPs; doorbells per WQE or per QP.
      const chosen = Array.from({ length: 1 + rnd.below(4) }, () => rnd.pick(all));
      for (const m of chosen) {
        const target = m.peer >= 0 ? models.get(m.peer)! : rnd.pick(all.filter((x) => x.qp.type === QpT.UD));
        for (const r of rnd.below(3) === 0 ? [] : [target, m]) {
          for (let k = rnd.below(3); k > 0 && r.recvs.length < DEPTH - 1; k--) {
            const id = nextId++;
            const x = fz.recv(r);
            if (x.raw) {
              x.raw.writeUInt32LE(id, 0);
              v.postRecv(r.qp, { id, sges: [] }, false);
              // Overwrite the slot just written with the raw bytes (wqe_id kept).
              const ring = r.qp.rq!;
              const slot = (ring.pi - 1) & (DEPTH - 1);
              x.raw.copy(v.g.mem(ring.at + (slot << ring.strideLog2), 1 << ring.strideLog2));
              v.ringRq(r.qp);
              r.recvs.push({ id, total: -1 });
            } else {
              v.postRecv(r.qp, { id, sges: x.sges }, rnd.below(4) !== 0);
              r.recvs.push({ id, total: x.sges.reduce((s, g) => s + g.len, 0) });
            }
          }
          v.ringRq(r.qp);
        }
        for (let k = 1 + rnd.below(6); k > 0 && m.sends.filter((s) => !s.done).length < DEPTH - 1; k--) {
          const id = nextId++;
          const x = fz.send(m);
          const remoteBefore = m.qp.remote;
          if (x.raw) {
            x.raw.writeUInt32LE(id, 0);
            x.raw.writeUInt32LE(0, 4);
            v.postRaw(m.qp, x.raw, rnd.below(3) === 0);
          } else {
            v.postSend(m.qp, { ...x.wr!, id }, rnd.below(3) === 0);
          }
          m.sends.push({
            id,
            op: (x.raw ? x.raw[8] : x.wr!.op)!,
            seq: m.qp.remote > remoteBefore ? remoteBefore : -1,
            done: false,
          });
          wqes++;
        }
        v.ringSq(m.qp);
      }
      // Nothing has run yet (the doorbells are only handled once we yield): the rings as the host wrote them.
      const ringSnap = new Snapshot(v.g, rings);
      await v.settle();
      await collect(where);
      expect(snap.changedOutside(writable), `${where}: guest memory written outside the writable MRs`).to.deep.equal(
        [],
      );
      expect(ringSnap.changed(), `${where}: the device wrote into an SQ/RQ ring`).to.deep.equal([]);
      // Reset what the device put in ERR, what waits (RNR) with work left, what is full of receives, and now and then anything.
      for (const m of all) {
        const stuck = m.sends.some((s) => !s.done) || m.recvs.length >= DEPTH - 2;
        if (v.qpState(m.qp) !== QpS.RTS || stuck || rnd.below(100) === 0) await resetQp(m, where);
      }
      await v.settle();
      await collect(`${where} (after resets)`);
      if (batch % 100 === 0) await healthy();
    }
    expect(v.rm.qps.size, 'QPs still there').to.equal(models.size + 2);
    for (const mr of mrs)
      expect(v.rm.mrs.get(mr.key >>> 8), `MR ${mr.key.toString(16)} unchanged`).to.include({
        key: mr.key,
        valid: true,
      });
    await healthy();
  }

  for (const seed of [0x5eed, 0xc0ffee]) {
    it(`seed ${seed.toString(16)}: ${TARGET_WQES} random WQEs, each at most one CQE on the right CQ, memory written only where allowed`, async () => {
      await run(seed);
      const statuses = [...outcomes.keys()].filter((k) => k !== 'reset');
      // The fuzz must reach successes of every CQE type and a spread of error statuses, not just decode failures.
      for (const k of [`${CqeT.SEND_MSN}:0`, `${CqeT.SEND_NPG}:0`, `${CqeT.RECV}:0`])
        expect(outcomes.get(k) ?? 0, `${k} in ${JSON.stringify([...outcomes])}`).to.be.greaterThan(10);
      expect(new Set(statuses.map((k) => k.split(':')[1])).size, JSON.stringify([...outcomes])).to.be.at.least(8);
    });
  }
});
