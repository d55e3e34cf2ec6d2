// Every data-path operation through the live loopback path
// (lib/rdma/datapath/loopback/), driven by the verbs guest: each verb's
// success, and each error status the path reports, with the exact CQEs
// (contract 4.6/4.7), the QP states, the flush hints, and an arena snapshot
// proving that nothing outside the operation's target was written.

import { expect } from 'chai';
import { PAGE } from '../support/ionic/regs';
import { AOp, CqeT, Mask, MrF, QpF, QpS, QpT, ROp, WOp, WSt } from '../support/ionic/rdma-regs';
import { modifyQpBody, pageList } from '../support/ionic/rdma-cmds';
import { Cq, Cqe, GuestMr, Qp, SendWr, Snapshot, Srq, v4, v6, VerbsGuest } from '../support/ionic/rdma-verbs';

type Row = (number | boolean)[];
type Range = [number, number];

const ALL = MrF.LOCAL_WRITE | MrF.REMOTE_WRITE | MrF.REMOTE_READ | MrF.REMOTE_ATOMIC;
const UD_QKEY = 0x11111111;
const GSI_QKEY = 0x80010000;

// CQE projections: send CQEs carry the MSN (SEND_MSN) or the wqe_id (SEND_NPG).
const S = (c: Cqe): Row => [c.type, c.qid, c.error, c.statusLength, c.type === CqeT.SEND_MSN ? c.msn : c.wqeIdLo];
const R = (c: Cqe): Row => [c.type, c.qid, c.error, c.statusLength, c.srcQpn, c.recvOp, c.immDataRkey >>> 0, c.wqeIdLo];
const msn = (q: Qp, n: number, st = 0): Row => [CqeT.SEND_MSN, q.id, st !== 0, st, n];
const npg = (q: Qp, id: number, st = 0): Row => [CqeT.SEND_NPG, q.id, st !== 0, st, id];
const recv = (q: Qp, len: number, src: number, op: number, imm: number, id: number): Row => [CqeT.RECV, q.id, false, len, src, op, imm, id];
const recvErr = (q: Qp, st: number, src: number, op: number, imm: number, id: number): Row => [CqeT.RECV, q.id, true, st, src, op, imm, id];
const sqFlush = (q: Qp): Row => [CqeT.SEND_NPG, q.id, true, WSt.WQE_FLUSHED, 0];
const rqFlush = (q: Qp): Row => [CqeT.RECV, q.id, true, WSt.WQE_FLUSHED, 0, ROp.SEND, 0, 0];

/** Deterministic bytes for a test payload. */
function pattern(len: number, seed: number): Buffer {
  const b = Buffer.alloc(len);
  for (let i = 0; i < len; i++) b[i] = (seed + i * 13 + (i >>> 8)) & 0xff;
  return b;
}

function u64(v: bigint): Buffer {
  const b = Buffer.alloc(8);
  b.writeBigUInt64LE(BigInt.asUintN(64, v));
  return b;
}

describe('ionic rdma: every data-path operation through the live path', function () {
  this.timeout(20000);
  let v: VerbsGuest;
  let scq: Cq;
  let rcq: Cq;
  /** Requester buffers and responder targets: four scattered pages each (B starts 0x123 into its first page). */
  let A: GuestMr;
  let B: GuestMr;
  /** REMOTE_READ only (no local write). */
  let RO: GuestMr;
  /** LOCAL_WRITE only. */
  let LWO: GuestMr;
  /** No REMOTE_ATOMIC. */
  let NOAT: GuestMr;
  /** Another PD. */
  let P2: GuestMr;
  let a: Qp;
  let b: Qp;
  let snap: Snapshot;

  const arena = (): Range[] => [[v.arena.at, v.arena.bytes]];
  /** The first 8-aligned address at or after B byte `off` (B starts 0x123 into a page). */
  const bWord = (off: number): number => B.va + off + ((8 - ((B.va + off) % 8)) % 8);
  const ranges = (mr: GuestMr, off: number, len: number): Range[] => mr.ranges(off, len);

  function expectCqes(send: Row[], rec: Row[], what = ''): void {
    expect(v.drain(scq).map(S), `send CQEs ${what}`).to.deep.equal(send);
    expect(v.drain(rcq).map(R), `recv CQEs ${what}`).to.deep.equal(rec);
  }

  /** Only bytes inside `allowed` changed since the snapshot. */
  function expectOnly(allowed: Range[] = [], what = ''): void {
    expect(snap.changedOutside(allowed), `writes outside the target ${what}`).to.deep.equal([]);
  }

  /** Fresh QPs (RESET, then RTS again: MSNs restart at 1, rings empty) and empty CQs. */
  async function fresh(...qps: Qp[]): Promise<void> {
    for (const q of qps) await v.reset(q);
    await v.settle();
    v.drainAll();
  }

  before(async () => {
    v = await VerbsGuest.boot();
    scq = await v.createCq(300);
    rcq = await v.createCq(301);
    A = await v.createMr({ key: 0x101, pages: 4, flags: ALL });
    B = await v.createMr({ key: 0x207, pages: 4, offset: 0x123, length: 4 * PAGE - 0x123 - 0x10, flags: ALL });
    RO = await v.createMr({ key: 0x301, pages: 1, flags: MrF.REMOTE_READ });
    LWO = await v.createMr({ key: 0x401, pages: 1, flags: MrF.LOCAL_WRITE });
    NOAT = await v.createMr({ key: 0x502, pages: 1, flags: MrF.LOCAL_WRITE | MrF.REMOTE_WRITE | MrF.REMOTE_READ });
    P2 = await v.createMr({ key: 0x601, pages: 1, flags: ALL, pdId: 2 });
    a = await v.createQp(10, QpT.RC, { sqCq: scq, rqCq: rcq });
    b = await v.createQp(11, QpT.RC, { sqCq: scq, rqCq: rcq });
    await v.connectPair(a, b);
  });
  after(async () => v.close());
  afterEach(() => expect(v.g.violations).to.deep.equal([]));

  // -------------------------------------------------------------------------------------------

  describe('RC successes', () => {
    beforeEach(async () => fresh(a, b));

    it('SEND: two SGEs gathered into one receive; MSN 1 on the requester, RECV with the byte count on the responder', async () => {
      const p1 = pattern(300, 1);
      const p2 = pattern(50, 2);
      A.write(100, p1);
      A.write(2000, p2);
      snap = new Snapshot(v.g, arena());
      v.postRecv(b, { id: 0x77, idHi: 0xbeef0000, sges: [B.sge(8, 512)] });
      v.postSend(a, { op: WOp.SEND, id: 0x42, sges: [A.sge(100, 300), A.sge(2000, 50)] });
      await v.settle();
      expect(B.read(8, 350).equals(Buffer.concat([p1, p2]))).to.equal(true);
      expectOnly(ranges(B, 8, 350));
      const rc = v.drain(rcq);
      expect(rc.map(R)).to.deep.equal([recv(b, 350, 10, ROp.SEND, 0, 0x77)]);
      expect(rc[0]!.wqeIdHi >>> 0, 'wqe_id echoed verbatim').to.equal(0xbeef0000);
      expect(v.drain(scq).map(S)).to.deep.equal([msn(a, 1)]);
    });

    it('SEND_IMM: the immediate comes back as written (wire order)', async () => {
      A.write(0, pattern(16, 3));
      snap = new Snapshot(v.g, arena());
      v.postRecv(b, { id: 0x78, sges: [B.sge(0, 64)] });
      v.postSend(a, { op: WOp.SEND_IMM, id: 0x43, sges: [A.sge(0, 16)], imm: 0xdeadbeef });
      await v.settle();
      expect(B.read(0, 16).equals(pattern(16, 3))).to.equal(true);
      expectOnly(ranges(B, 0, 16));
      expectCqes([msn(a, 1)], [recv(b, 16, 10, ROp.SEND_IMM, 0xdeadbeef, 0x78)]);
    });

    it('RDMA_WRITE: a 3-SGE gather lands across the scattered pages of the remote MR; no receive is consumed', async () => {
      const parts = [pattern(1000, 4), pattern(3000, 5), pattern(200, 6)];
      A.write(PAGE - 500, parts[0]!);
      A.write(2 * PAGE - 100, parts[1]!);
      A.write(3 * PAGE + 7, parts[2]!);
      snap = new Snapshot(v.g, arena());
      v.postRecv(b, { id: 0x79, sges: [B.sge(0, 64)] });
      const off = PAGE - 0x123 - 300; // starts 300 bytes before B's first page boundary
      v.postSend(a, { op: WOp.RDMA_WRITE, id: 0x44, sges: [A.sge(PAGE - 500, 1000), A.sge(2 * PAGE - 100, 3000), A.sge(3 * PAGE + 7, 200)],
        remote: { va: B.va + off, rkey: B.key } });
      await v.settle();
      expect(B.read(off, 4200).equals(Buffer.concat(parts))).to.equal(true);
      expectOnly(ranges(B, off, 4200));
      expectCqes([msn(a, 1)], []);
    });

    it('RDMA_WRITE_IMM: data through the rkey, and a RECV CQE with the bytes written and the immediate (the receive buffer untouched)', async () => {
      A.write(64, pattern(777, 7));
      snap = new Snapshot(v.g, arena());
      v.postRecv(b, { id: 0x7a, sges: [B.sge(3 * PAGE, 16)] });
      v.postSend(a, { op: WOp.RDMA_WRITE_IMM, id: 0x45, sges: [A.sge(64, 777)], imm: 0x0badf00d, remote: { va: B.va + 100, rkey: B.key } });
      await v.settle();
      expect(B.read(100, 777).equals(pattern(777, 7))).to.equal(true);
      expectOnly(ranges(B, 100, 777));
      expectCqes([msn(a, 1)], [recv(b, 777, 10, ROp.RDMA_WRITE_IMM, 0x0badf00d, 0x7a)]);
    });

    it('RDMA_READ: a remote range across page boundaries scattered into two local SGEs', async () => {
      const src = pattern(PAGE + 100, 8);
      B.write(PAGE - 0x123 - 50, src);
      snap = new Snapshot(v.g, arena());
      v.postSend(a, { op: WOp.RDMA_READ, id: 0x46, sges: [A.sge(10, 100), A.sge(2 * PAGE + 5, PAGE)],
        remote: { va: B.va + PAGE - 0x123 - 50, rkey: B.key } });
      await v.settle();
      expect(Buffer.concat([A.read(10, 100), A.read(2 * PAGE + 5, PAGE)]).equals(src)).to.equal(true);
      expectOnly([...ranges(A, 10, 100), ...ranges(A, 2 * PAGE + 5, PAGE)]);
      expectCqes([msn(a, 1)], []);
    });

    it('RDMA_READ from an MR with REMOTE_READ only', async () => {
      RO.write(0, pattern(32, 9));
      snap = new Snapshot(v.g, arena());
      v.postSend(a, { op: WOp.RDMA_READ, id: 0x47, sges: [A.sge(0, 32)], remote: { va: RO.va, rkey: RO.key } });
      await v.settle();
      expect(A.read(0, 32).equals(pattern(32, 9))).to.equal(true);
      expectOnly(ranges(A, 0, 32));
      expectCqes([msn(a, 1)], []);
    });

    const atomics: [string, number, bigint, bigint, bigint, bigint][] = [
      ['ATOMIC_CS, equal: swaps', WOp.ATOMIC_CS, 0x1122334455667788n, 0xaaaabbbbccccddddn, 0x1122334455667788n, 0xaaaabbbbccccddddn],
      ['ATOMIC_CS, different: leaves the target', WOp.ATOMIC_CS, 5n, 9n, 6n, 5n],
      ['ATOMIC_CS, equal low halves only: leaves the target', WOp.ATOMIC_CS, 0x0000000100000005n, 9n, 5n, 0x0000000100000005n],
      ['ATOMIC_FA, plain', WOp.ATOMIC_FA, 40n, 2n, 0n, 42n],
      ['ATOMIC_FA, carry across 32 bits', WOp.ATOMIC_FA, 0xffffffffn, 1n, 0n, 0x100000000n],
      ['ATOMIC_FA, both halves carry (mod 2^64)', WOp.ATOMIC_FA, 0xffffffffffffffffn, 2n, 0n, 1n],
      ['ATOMIC_FA, carry out of both halves', WOp.ATOMIC_FA, 0x8000000080000000n, 0x8000000080000000n, 0n, 0x100000000n],
    ];
    for (const [what, op, old, operand, compare, want] of atomics) {
      it(`${what}; the old value comes back`, async () => {
        const target = bWord(2 * PAGE + 8 * 17) - B.va;
        B.write(target, u64(old));
        snap = new Snapshot(v.g, arena());
        v.postSend(a, { op, id: 0x48, remote: { va: B.va + target, rkey: B.key }, atomic: { swapAdd: operand, compare, local: A.sge(PAGE + 16, 8) } });
        await v.settle();
        expect(B.read(target, 8).readBigUInt64LE(0)).to.equal(want);
        expect(A.read(PAGE + 16, 8).readBigUInt64LE(0)).to.equal(old);
        expectOnly([...ranges(B, target, 8), ...ranges(A, PAGE + 16, 8)]);
        expectCqes([msn(a, 1)], []);
      });
    }

    it('inline SEND (224 bytes, the most a 256-byte stride holds) and inline WRITE / WRITE_IMM', async () => {
      snap = new Snapshot(v.g, arena());
      v.postRecv(b, { id: 0x7b, sges: [B.sge(0, 300)] });
      v.postRecv(b, { id: 0x7c, sges: [B.sge(400, 8)] });
      v.postSend(a, { op: WOp.SEND, id: 0x49, inline: pattern(224, 10) });
      v.postSend(a, { op: WOp.RDMA_WRITE, id: 0x4a, inline: Buffer.from('inline-write'), remote: { va: B.va + 1000, rkey: B.key } });
      v.postSend(a, { op: WOp.RDMA_WRITE_IMM, id: 0x4b, inline: Buffer.from('imm!'), imm: 0x01020304, remote: { va: B.va + 2000, rkey: B.key } });
      await v.settle();
      expect(B.read(0, 224).equals(pattern(224, 10))).to.equal(true);
      expect(B.read(1000, 12).toString()).to.equal('inline-write');
      expect(B.read(2000, 4).toString()).to.equal('imm!');
      expectOnly([...ranges(B, 0, 224), ...ranges(B, 1000, 12), ...ranges(B, 2000, 4)]);
      expectCqes([msn(a, 1), msn(a, 2), msn(a, 3)],
        [recv(b, 224, 10, ROp.SEND, 0, 0x7b), recv(b, 4, 10, ROp.RDMA_WRITE_IMM, 0x01020304, 0x7c)]);
    });

    it('multi-SGE: 8 SGEs (SPEC32 format) gathered into 5 receive SGEs, and 6 plain SGEs into 8 SPEC32 receive SGEs', async () => {
      // Send pieces straddling A's page boundaries; receive pieces straddling B's.
      const send8 = [[PAGE - 10, 30], [2 * PAGE - 1, 2], [5, 1], [3 * PAGE - 64, 200], [100, 0], [700, 333], [4 * PAGE - 8, 8], [1500, 1]] as const;
      const recv5 = [[PAGE - 0x123 - 20, 40], [2 * PAGE, 100], [3000, 3], [3 * PAGE - 0x123 - 1, 300], [50, 400]] as const;
      const payload = Buffer.concat(send8.map(([o, n], i) => { const p = pattern(n, 20 + i); A.write(o, p); return p; }));
      snap = new Snapshot(v.g, arena());
      v.postRecv(b, { id: 0x7d, sges: recv5.map(([o, n]) => B.sge(o, n)) });
      v.postSend(a, { op: WOp.SEND, id: 0x4c, sges: send8.map(([o, n]) => A.sge(o, n)), spec: true });
      await v.settle();
      // 575 bytes fill the first four receive SGEs (443) and 132 of the fifth.
      const want: Range[] = [];
      let left = payload.length;
      const got: Buffer[] = [];
      for (const [o, n] of recv5) {
        const k = Math.min(n, left);
        got.push(B.read(o, k));
        want.push(...ranges(B, o, k));
        left -= k;
      }
      expect(Buffer.concat(got).equals(payload)).to.equal(true);
      expectOnly(want);
      expectCqes([msn(a, 1)], [recv(b, payload.length, 10, ROp.SEND, 0, 0x7d)]);

      const send6 = [[10, 64], [PAGE - 32, 64], [2 * PAGE + 1, 9], [3 * PAGE - 1, 1], [3 * PAGE, 1], [80, 17]] as const;
      const payload2 = Buffer.concat(send6.map(([o, n], i) => { const p = pattern(n, 40 + i); A.write(o, p); return p; }));
      // 156 bytes: seven 20-byte receive SGEs (three of them across B's page boundaries) and 16 of the eighth.
      const at8 = [0, 40, PAGE - 0x123 - 7, 2000, 2 * PAGE - 0x123 - 3, 3000, 3 * PAGE - 0x123 - 10, 3500];
      snap = new Snapshot(v.g, arena());
      v.postRecv(b, { id: 0x7e, sges: at8.map((o) => B.sge(o, 20)), spec: true });
      v.postSend(a, { op: WOp.SEND, id: 0x4d, sges: send6.map(([o, n]) => A.sge(o, n)) });
      await v.settle();
      const fill = at8.map((o, i) => [o, Math.max(0, Math.min(20, payload2.length - 20 * i))] as const);
      expect(Buffer.concat(fill.map(([o, n]) => B.read(o, n))).equals(payload2)).to.equal(true);
      expectOnly(fill.flatMap(([o, n]) => ranges(B, o, n)));
      expectCqes([msn(a, 2)], [recv(b, payload2.length, 10, ROp.SEND, 0, 0x7e)]);
    });

    it('only the receive SGEs the message needs are checked', async () => {
      A.write(0, pattern(10, 11));
      snap = new Snapshot(v.g, arena());
      v.postRecv(b, { id: 0x7f, sges: [B.sge(0, 10), { va: 0, len: 10, lkey: 0xdead01 }] });
      v.postSend(a, { op: WOp.SEND, id: 0x4e, sges: [A.sge(0, 10)] });
      await v.settle();
      expect(B.read(0, 10).equals(pattern(10, 11))).to.equal(true);
      expectOnly(ranges(B, 0, 10));
      expectCqes([msn(a, 1)], [recv(b, 10, 10, ROp.SEND, 0, 0x7f)]);
    });

    it('zero-length SEND (no SGE, and one 0-byte SGE with a junk key) and zero-length WRITE (the rkey is not even looked at)', async () => {
      snap = new Snapshot(v.g, arena());
      v.postRecv(b, { id: 0x80, sges: [B.sge(0, 64)] });
      v.postRecv(b, { id: 0x81, sges: [] });
      v.postSend(a, { op: WOp.SEND, id: 0x4f, sges: [] });
      v.postSend(a, { op: WOp.SEND_IMM, id: 0x50, sges: [{ va: 0x1234, len: 0, lkey: 0x99999901 }], imm: 7 });
      v.postSend(a, { op: WOp.RDMA_WRITE, id: 0x51, sges: [], remote: { va: 0xdead_beef, rkey: 0x77 } });
      await v.settle();
      expectOnly([]);
      expectCqes([msn(a, 1), msn(a, 2), msn(a, 3)], [recv(b, 0, 10, ROp.SEND, 0, 0x80), recv(b, 0, 10, ROp.SEND_IMM, 7, 0x81)]);
    });

    it('an unsignaled WQE still gets its MSN, and a RECV CQE carries the source QP of each requester', async () => {
      snap = new Snapshot(v.g, arena());
      v.postRecv(a, { id: 0x82, sges: [A.sge(0, 8)] });
      v.postRecv(b, { id: 0x83, sges: [B.sge(0, 8)] });
      v.postSend(a, { op: WOp.SEND, id: 0x52, inline: Buffer.from('to b'), signaled: false });
      v.postSend(b, { op: WOp.SEND, id: 0x53, inline: Buffer.from('to a') });
      await v.settle();
      expect(A.read(0, 4).toString()).to.equal('to a');
      expect(B.read(0, 4).toString()).to.equal('to b');
      expectOnly([...ranges(A, 0, 4), ...ranges(B, 0, 4)]);
      expectCqes([msn(a, 1), msn(b, 1)], [recv(b, 4, 10, ROp.SEND, 0, 0x83), recv(a, 4, 11, ROp.SEND, 0, 0x82)]);
    });
  });

  // -------------------------------------------------------------------------------------------

  describe('fast registration and invalidation', () => {
    const FR = 0x70;
    const frKey = (tag: number): number => ((FR << 8) | tag) >>> 0;
    let tag = 1;
    let frPages: number[];

    before(async () => {
      await v.createFrmr(frKey(1));
      frPages = v.pages(2, true);
    });
    beforeEach(async () => fresh(a, b));

    /** b registers the FRMR over frPages (iova 0x9000_0000, 2 pages) with the next tag; returns the key. */
    async function register(): Promise<number> {
      const key = frKey(tag);
      tag = (tag + 1) & 0xff;
      v.postSend(b, { op: WOp.REG_MR, id: 0x90, imm: key, numSge: tag,
        regMr: { va: 0x9000_0000, length: 2 * PAGE, offset: 0, dma: pageList(v.g, frPages), mapCount: 2, flags: MrF.LOCAL_WRITE | MrF.REMOTE_WRITE } });
      await v.settle();
      expectCqes([npg(b, 0x90)], [], 'REG_MR');
      return frKey(tag);
    }

    it('SEND_INV invalidates the named key: RECV op SEND_INV with that rkey; a WRITE through it then fails REMOTE_ACC', async () => {
      const key = await register();
      snap = new Snapshot(v.g, arena());
      v.postRecv(b, { id: 0x84, sges: [B.sge(0, 64)] });
      v.postSend(a, { op: WOp.RDMA_WRITE, id: 0x54, inline: Buffer.from('before'), remote: { va: 0x9000_0000 + PAGE - 3, rkey: key } });
      v.postSend(a, { op: WOp.SEND_INV, id: 0x55, inline: Buffer.from('inv'), imm: key });
      await v.settle();
      expect(v.g.mem(frPages[0]! + PAGE - 3, 3).toString() + v.g.mem(frPages[1]!, 3).toString()).to.equal('before');
      expectCqes([msn(a, 1), msn(a, 2)], [recv(b, 3, 10, ROp.SEND_INV, key, 0x84)]);
      v.postSend(a, { op: WOp.RDMA_WRITE, id: 0x56, inline: Buffer.from('after!'), remote: { va: 0x9000_0000, rkey: key } });
      await v.settle();
      expectCqes([msn(a, 3, WSt.REMOTE_ACC)], []);
      expectOnly([[frPages[0]! + PAGE - 3, 3], [frPages[1]!, 3], ...ranges(B, 0, 3)]);
      expect(v.qpState(a)).to.equal(QpS.ERR);
    });

    it('LOCAL_INV invalidates a registered FRMR (NPG with the wqe_id); the key then fails REMOTE_ACC', async () => {
      const key = await register();
      snap = new Snapshot(v.g, arena());
      v.postSend(b, { op: WOp.LOCAL_INV, id: 0x91, idHi: 0x5a5a5a5a, imm: key });
      await v.settle();
      const c = v.drain(scq);
      expect(c.map(S)).to.deep.equal([npg(b, 0x91)]);
      expect(c[0]!.wqeIdHi >>> 0).to.equal(0x5a5a5a5a);
      v.postSend(a, { op: WOp.RDMA_WRITE, id: 0x57, inline: Buffer.from('x'), remote: { va: 0x9000_0000, rkey: key } });
      await v.settle();
      expectCqes([msn(a, 1, WSt.REMOTE_ACC)], []);
      expectOnly([]);
    });

    it('REG_MR of an FRMR that is still valid is refused (MEM_MGMT_OPER) and the mapping stays', async () => {
      const key = await register();
      v.postSend(b, { op: WOp.REG_MR, id: 0x92, imm: key, numSge: (tag + 1) & 0xff,
        regMr: { va: 0x5000_0000, length: PAGE, offset: 0, dma: v.pages(1)[0]!, mapCount: 1, flags: MrF.REMOTE_WRITE } });
      await v.settle();
      expectCqes([npg(b, 0x92, WSt.MEM_MGMT_OPER)], []);
      expect(v.qpState(b)).to.equal(QpS.ERR);
      await fresh(b);
      v.postSend(a, { op: WOp.RDMA_WRITE, id: 0x58, inline: Buffer.from('still'), remote: { va: 0x9000_0000, rkey: key } });
      await v.settle();
      expect(v.g.mem(frPages[0]!, 5).toString()).to.equal('still');
      expectCqes([msn(a, 1)], []);
      // leave it invalid for the next registration
      v.postSend(b, { op: WOp.LOCAL_INV, id: 0x93, imm: key });
      await v.settle();
      expectCqes([npg(b, 0x93)], []);
    });
  });

  // -------------------------------------------------------------------------------------------

  describe('RC errors: the requester completes with the status, goes to ERR, and the rest of its SQ is not run', () => {
    /** A WRITE that would succeed, queued behind the failing WQE: the host flushes it, the device must not run it. */
    const TRAIL = 3 * PAGE;
    let c: Qp;
    let d: Qp;

    before(async () => {
      c = await v.createQp(12, QpT.RC, { sqCq: scq, rqCq: rcq });
      d = await v.createQp(13, QpT.RC, { sqCq: scq, rqCq: rcq });
      await v.connectPair(c, d, { access: 0 });
    });
    beforeEach(async () => fresh(a, b));

    interface Case {
      what: string;
      /** Receives on the responder, source data; before the snapshot. */
      setup?: () => void;
      bad: () => SendWr;
      /** The requester's error CQE (MSN or NPG). */
      send: () => Row;
      /** Responder RECV CQEs (before the requester's RQ flush hint). */
      recv?: () => Row[];
      allowed?: () => Range[];
      responderErr?: boolean;
      req?: () => Qp;
    }

    async function fail(k: Case): Promise<void> {
      const q = k.req ? k.req() : a;
      const peer = q === a ? b : d;
      if (q !== a) await fresh(q, peer);
      // A receive on the requester: its RQ flush hint must follow the error.
      v.postRecv(q, { id: 0xa0, sges: [A.sge(3 * PAGE + 512, 64)] });
      k.setup?.();
      await v.settle();
      snap = new Snapshot(v.g, arena());
      v.postSend(q, k.bad(), false);
      v.postSend(q, { op: WOp.RDMA_WRITE, id: 0x7a11, sges: [A.sge(0, 16)], remote: { va: B.va + TRAIL, rkey: B.key } });
      await v.settle();
      expect(v.drain(scq).map(S), 'send CQEs').to.deep.equal([k.send()]);
      expect(v.drain(rcq).map(R), 'recv CQEs').to.deep.equal([...(k.recv?.() ?? []), rqFlush(q)]);
      expectOnly(k.allowed?.() ?? []);
      expect(v.qpState(q), 'requester state').to.equal(QpS.ERR);
      expect(v.qpState(peer), 'responder state').to.equal(k.responderErr ? QpS.ERR : QpS.RTS);
    }

    const cases: Case[] = [
      {
        what: 'receive too small: requester REMOTE_INV_REQ, responder RECV LOCAL_LEN (then ERR, flushing its other receive)',
        setup: () => { v.postRecv(b, { id: 0xb1, sges: [B.sge(0, 16)] }); v.postRecv(b, { id: 0xb2, sges: [B.sge(100, 64)] }); },
        bad: () => ({ op: WOp.SEND, id: 0x60, sges: [A.sge(0, 64)] }),
        send: () => msn(a, 1, WSt.REMOTE_INV_REQ),
        recv: () => [recvErr(b, WSt.LOCAL_LEN, 10, ROp.SEND, 0, 0xb1), rqFlush(b)],
        allowed: () => ranges(B, 0, 16),
        responderErr: true,
      },
      {
        what: 'SEND with a bad lkey (wrong tag): LOCAL_PROT, the responder\'s receive not consumed',
        setup: () => v.postRecv(b, { id: 0xb3, sges: [B.sge(0, 64)] }),
        bad: () => ({ op: WOp.SEND, id: 0x61, sges: [{ ...A.sge(0, 8), lkey: A.key ^ 0x80 }] }),
        send: () => msn(a, 1, WSt.LOCAL_PROT),
      },
      {
        what: 'SEND with an lkey range past the MR end: LOCAL_PROT',
        setup: () => v.postRecv(b, { id: 0xb4, sges: [B.sge(0, 64)] }),
        bad: () => ({ op: WOp.SEND, id: 0x62, sges: [A.sge(4 * PAGE - 4, 8)] }),
        send: () => msn(a, 1, WSt.LOCAL_PROT),
      },
      {
        what: 'WRITE with an lkey range before the MR start: LOCAL_PROT',
        bad: () => ({ op: WOp.RDMA_WRITE, id: 0x63, sges: [{ va: A.va - 1, len: 8, lkey: A.key }], remote: { va: B.va, rkey: B.key } }),
        send: () => msn(a, 1, WSt.LOCAL_PROT),
      },
      {
        what: 'SEND gathering from another PD\'s MR: LOCAL_PROT',
        setup: () => v.postRecv(b, { id: 0xb5, sges: [B.sge(0, 64)] }),
        bad: () => ({ op: WOp.SEND, id: 0x64, sges: [P2.sge(0, 8)] }),
        send: () => msn(a, 1, WSt.LOCAL_PROT),
      },
      {
        what: 'lkey 0 from a user (non-privileged) QP: LOCAL_PROT',
        setup: () => v.postRecv(b, { id: 0xb6, sges: [B.sge(0, 64)] }),
        bad: () => ({ op: WOp.SEND, id: 0x65, sges: [{ va: A.at(0), len: 8, lkey: 0 }] }),
        send: () => msn(a, 1, WSt.LOCAL_PROT),
      },
      {
        what: 'a receive into an MR without LOCAL_WRITE: requester REMOTE_OPER, responder RECV LOCAL_PROT',
        setup: () => v.postRecv(b, { id: 0xb7, sges: [RO.sge(0, 64)] }),
        bad: () => ({ op: WOp.SEND, id: 0x66, inline: Buffer.from('hello') }),
        send: () => msn(a, 1, WSt.REMOTE_OPER),
        recv: () => [recvErr(b, WSt.LOCAL_PROT, 10, ROp.SEND, 0, 0xb7)],
        responderErr: true,
      },
      {
        what: 'a receive with lkey 0 on a user QP: requester REMOTE_OPER, responder RECV LOCAL_PROT',
        setup: () => v.postRecv(b, { id: 0xb8, sges: [{ va: B.at(0), len: 64, lkey: 0 }] }),
        bad: () => ({ op: WOp.SEND, id: 0x67, inline: Buffer.from('hello') }),
        send: () => msn(a, 1, WSt.REMOTE_OPER),
        recv: () => [recvErr(b, WSt.LOCAL_PROT, 10, ROp.SEND, 0, 0xb8)],
        responderErr: true,
      },
      {
        what: 'RDMA_READ into an MR without LOCAL_WRITE: LOCAL_PROT',
        bad: () => ({ op: WOp.RDMA_READ, id: 0x68, sges: [RO.sge(0, 16)], remote: { va: B.va, rkey: B.key } }),
        send: () => msn(a, 1, WSt.LOCAL_PROT),
      },
      {
        what: 'RDMA_READ into lkey 0 on a user QP: LOCAL_PROT',
        bad: () => ({ op: WOp.RDMA_READ, id: 0x69, sges: [{ va: A.at(0), len: 16, lkey: 0 }], remote: { va: B.va, rkey: B.key } }),
        send: () => msn(a, 1, WSt.LOCAL_PROT),
      },
      {
        what: 'WRITE with an rkey of the wrong tag: REMOTE_ACC',
        bad: () => ({ op: WOp.RDMA_WRITE, id: 0x6a, sges: [A.sge(0, 8)], remote: { va: B.va, rkey: B.key + 1 } }),
        send: () => msn(a, 1, WSt.REMOTE_ACC),
      },
      {
        what: 'READ with an unknown rkey index: REMOTE_ACC (a bad lkey too: the remote NAK wins)',
        bad: () => ({ op: WOp.RDMA_READ, id: 0x6b, sges: [{ ...A.sge(0, 8), lkey: 0x3ff01 }], remote: { va: B.va, rkey: 0x3fe01 } }),
        send: () => msn(a, 1, WSt.REMOTE_ACC),
      },
      {
        what: 'WRITE whose range wraps past 2^64: REMOTE_ACC',
        bad: () => ({ op: WOp.RDMA_WRITE, id: 0x6c, sges: [A.sge(0, 16)], remote: { va: 0xfffffffffffffff8n, rkey: B.key } }),
        send: () => msn(a, 1, WSt.REMOTE_ACC),
      },
      {
        what: 'WRITE past the remote MR end: REMOTE_ACC',
        bad: () => ({ op: WOp.RDMA_WRITE, id: 0x6d, sges: [A.sge(0, 16)], remote: { va: B.va + B.length - 8, rkey: B.key } }),
        send: () => msn(a, 1, WSt.REMOTE_ACC),
      },
      {
        what: 'READ starting before the remote MR: REMOTE_ACC',
        bad: () => ({ op: WOp.RDMA_READ, id: 0x6e, sges: [A.sge(0, 16)], remote: { va: B.va - 1, rkey: B.key } }),
        send: () => msn(a, 1, WSt.REMOTE_ACC),
      },
      {
        what: 'WRITE to an MR without REMOTE_WRITE: REMOTE_ACC',
        bad: () => ({ op: WOp.RDMA_WRITE, id: 0x6f, sges: [A.sge(0, 8)], remote: { va: LWO.va, rkey: LWO.key } }),
        send: () => msn(a, 1, WSt.REMOTE_ACC),
      },
      {
        what: 'READ from an MR without REMOTE_READ: REMOTE_ACC',
        bad: () => ({ op: WOp.RDMA_READ, id: 0x70, sges: [A.sge(0, 8)], remote: { va: LWO.va, rkey: LWO.key } }),
        send: () => msn(a, 1, WSt.REMOTE_ACC),
      },
      {
        what: 'ATOMIC on an MR without REMOTE_ATOMIC: REMOTE_ACC',
        bad: () => ({ op: WOp.ATOMIC_FA, id: 0x71, remote: { va: NOAT.va + 8, rkey: NOAT.key }, atomic: { swapAdd: 1n, local: A.sge(8, 8) } }),
        send: () => msn(a, 1, WSt.REMOTE_ACC),
      },
      {
        what: 'WRITE to another PD\'s MR: REMOTE_ACC',
        bad: () => ({ op: WOp.RDMA_WRITE, id: 0x72, sges: [A.sge(0, 8)], remote: { va: P2.va, rkey: P2.key } }),
        send: () => msn(a, 1, WSt.REMOTE_ACC),
      },
      {
        what: 'rkey 0 to a responder without REMOTE_PRIVILEGED: REMOTE_ACC',
        bad: () => ({ op: WOp.RDMA_WRITE, id: 0x73, sges: [A.sge(0, 8)], remote: { va: B.at(0), rkey: 0 } }),
        send: () => msn(a, 1, WSt.REMOTE_ACC),
      },
      {
        what: 'WRITE to a responder QP without remote write access: REMOTE_ACC',
        req: () => c,
        bad: () => ({ op: WOp.RDMA_WRITE, id: 0x74, sges: [A.sge(0, 8)], remote: { va: B.va, rkey: B.key } }),
        send: () => msn(c, 1, WSt.REMOTE_ACC),
      },
      {
        what: 'READ from a responder QP without remote read access: REMOTE_ACC',
        req: () => c,
        bad: () => ({ op: WOp.RDMA_READ, id: 0x75, sges: [A.sge(0, 8)], remote: { va: B.va, rkey: B.key } }),
        send: () => msn(c, 1, WSt.REMOTE_ACC),
      },
      {
        what: 'ATOMIC to a responder QP without remote atomic access: REMOTE_ACC',
        req: () => c,
        bad: () => ({ op: WOp.ATOMIC_CS, id: 0x76, remote: { va: bWord(24), rkey: B.key }, atomic: { swapAdd: 1n, local: A.sge(8, 8) } }),
        send: () => msn(c, 1, WSt.REMOTE_ACC),
      },
      {
        what: 'a misaligned ATOMIC target: REMOTE_INV_REQ',
        bad: () => ({ op: WOp.ATOMIC_FA, id: 0x77, remote: { va: bWord(0) + 4, rkey: B.key }, atomic: { swapAdd: 1n, local: A.sge(8, 8) } }),
        send: () => msn(a, 1, WSt.REMOTE_INV_REQ),
      },
      {
        what: 'an ATOMIC whose local buffer is 4 bytes: LOCAL_LEN on an NPG CQE (the WQE is malformed)',
        bad: () => ({ op: WOp.ATOMIC_CS, id: 0x78, remote: { va: bWord(8), rkey: B.key }, atomic: { swapAdd: 1n, local: A.sge(8, 4) } }),
        send: () => npg(a, 0x78, WSt.LOCAL_LEN),
      },
      {
        what: 'an ATOMIC whose local lkey is bad: LOCAL_PROT, the remote word untouched',
        bad: () => ({ op: WOp.ATOMIC_FA, id: 0x79, remote: { va: bWord(16), rkey: B.key }, atomic: { swapAdd: 1n, local: { ...A.sge(8, 8), lkey: 0x12301 } } }),
        send: () => msn(a, 1, WSt.LOCAL_PROT),
      },
      {
        what: 'LOCAL_INV of an unknown key: MEM_MGMT_OPER (NPG)',
        bad: () => ({ op: WOp.LOCAL_INV, id: 0x7a, imm: 0x3fff01 }),
        send: () => npg(a, 0x7a, WSt.MEM_MGMT_OPER),
      },
      {
        what: 'LOCAL_INV of a user MR (not invalidatable): MEM_MGMT_OPER',
        bad: () => ({ op: WOp.LOCAL_INV, id: 0x7b, imm: B.key }),
        send: () => npg(a, 0x7b, WSt.MEM_MGMT_OPER),
      },
      {
        what: 'REG_MR of an unknown key: MEM_MGMT_OPER',
        bad: () => ({ op: WOp.REG_MR, id: 0x7c, imm: 0x3ffe01, numSge: 2,
          regMr: { va: 0x1000, length: PAGE, offset: 0, dma: B.pages[0]!, mapCount: 1, flags: MrF.REMOTE_WRITE } }),
        send: () => npg(a, 0x7c, WSt.MEM_MGMT_OPER),
      },
      {
        what: 'REG_MR re-keying a user MR over other pages: MEM_MGMT_OPER',
        bad: () => ({ op: WOp.REG_MR, id: 0x7d, imm: B.key, numSge: 9,
          regMr: { va: 0x1000, length: PAGE, offset: 0, dma: LWO.pages[0]!, mapCount: 1, flags: ALL } }),
        send: () => npg(a, 0x7d, WSt.MEM_MGMT_OPER),
      },
      {
        what: 'an unknown opcode (11): LOCAL_QP_OPER (NPG)',
        bad: () => ({ op: 11, id: 0x7e, sges: [A.sge(0, 8)] }),
        send: () => npg(a, 0x7e, WSt.LOCAL_QP_OPER),
      },
      {
        what: 'opcode 0xff: LOCAL_QP_OPER (NPG)',
        bad: () => ({ op: 0xff, id: 0x7f }),
        send: () => npg(a, 0x7f, WSt.LOCAL_QP_OPER),
      },
      {
        what: 'inline data longer than the stride holds: LOCAL_LEN (NPG)',
        bad: () => ({ op: WOp.SEND, id: 0x80, inline: pattern(224, 1), length: 225 }),
        send: () => npg(a, 0x80, WSt.LOCAL_LEN),
      },
      {
        what: 'a length field that disagrees with the SGEs: LOCAL_LEN (NPG)',
        bad: () => ({ op: WOp.RDMA_WRITE, id: 0x81, sges: [A.sge(0, 8)], length: 9, remote: { va: B.va, rkey: B.key } }),
        send: () => npg(a, 0x81, WSt.LOCAL_LEN),
      },
      {
        what: 'more SGEs than the stride holds: LOCAL_QP_OPER (NPG)',
        bad: () => ({ op: WOp.RDMA_WRITE, id: 0x82, sges: [A.sge(0, 8)], numSge: 15, length: 8, remote: { va: B.va, rkey: B.key } }),
        send: () => npg(a, 0x82, WSt.LOCAL_QP_OPER),
      },
      {
        what: 'INLINE on an RDMA_READ: LOCAL_QP_OPER (NPG)',
        bad: () => ({ op: WOp.RDMA_READ, id: 0x83, inline: Buffer.alloc(8), remote: { va: B.va, rkey: B.key } }),
        send: () => npg(a, 0x83, WSt.LOCAL_QP_OPER),
      },
    ];
    for (const k of cases) it(k.what, async () => fail(k));

    it('a destination QP that is not ready (RESET) or does not exist: RETRY_EXCEEDED', async () => {
      const e = await v.createQp(16, QpT.RC, { sqCq: scq, rqCq: rcq });
      await v.createQp(17, QpT.RC, { sqCq: scq, rqCq: rcq }); // left in RESET
      for (const [qp, dest] of [[e, 17], [e, 999]] as const) {
        if (qp.up) await v.reset(qp, dest);
        else await v.connect(qp, dest);
        await v.settle();
        v.drainAll();
        snap = new Snapshot(v.g, arena());
        v.postSend(qp, { op: WOp.RDMA_WRITE, id: 0x84, sges: [A.sge(0, 8)], remote: { va: B.va, rkey: B.key } });
        await v.settle();
        expectCqes([msn(qp, 1, WSt.RETRY_EXCEEDED)], [], `QP ${qp.id} -> ${dest}`);
        expectOnly([]);
        expect(v.qpState(qp)).to.equal(QpS.ERR);
      }
    });
  });

  // -------------------------------------------------------------------------------------------

  describe('RNR (receive not ready)', () => {
    let r0: Qp;
    let r1: Qp;
    let r2: Qp;
    let r3: Qp;
    before(async () => {
      r0 = await v.createQp(26, QpT.RC, { sqCq: scq, rqCq: rcq });
      r1 = await v.createQp(27, QpT.RC, { sqCq: scq, rqCq: rcq });
      await v.connectPair(r0, r1, { rnrRetry: 0 });
      r2 = await v.createQp(28, QpT.RC, { sqCq: scq, rqCq: rcq });
      r3 = await v.createQp(29, QpT.RC, { sqCq: scq, rqCq: rcq });
      // min_rnr_timer code 1 = 0.01 ms on the responder; two retries.
      await v.connectPair(r2, r3, { rnrRetry: 2, rnrTimer: 1 });
    });
    beforeEach(async () => fresh(a, b, r0, r1, r2, r3));

    it('rnr_retry 0: a SEND with no receive completes RNR_RETRY_EXCEEDED at once', async () => {
      snap = new Snapshot(v.g, arena());
      v.postSend(r0, { op: WOp.SEND, id: 0x85, inline: Buffer.from('nobody') });
      await v.settle();
      expectCqes([msn(r0, 1, WSt.RNR_RETRY_EXCEEDED)], []);
      expectOnly([]);
      expect([v.qpState(r0), v.qpState(r1)]).to.deep.equal([QpS.ERR, QpS.RTS]);
    });

    it('rnr_retry 2: RNR_RETRY_EXCEEDED once the retries (after min_rnr_timer each) are spent', async () => {
      snap = new Snapshot(v.g, arena());
      v.postSend(r2, { op: WOp.RDMA_WRITE_IMM, id: 0x86, inline: Buffer.from('imm'), imm: 1, remote: { va: B.va, rkey: B.key } });
      for (let i = 0; i < 50 && v.qpState(r2) !== QpS.ERR; i++) {
        await new Promise((res) => setTimeout(res, 5));
        await v.settle();
      }
      expectCqes([msn(r2, 1, WSt.RNR_RETRY_EXCEEDED)], []);
      expectOnly([]);
    });

    it('rnr_retry 7 (forever): the SEND waits, and a receive posted later lets it complete', async () => {
      snap = new Snapshot(v.g, arena());
      v.postSend(a, { op: WOp.SEND, id: 0x87, inline: Buffer.from('late') });
      await new Promise((res) => setTimeout(res, 20));
      await v.settle();
      expectCqes([], []);
      v.postRecv(b, { id: 0xb9, sges: [B.sge(0, 8)] });
      await v.settle();
      expectCqes([msn(a, 1)], [recv(b, 4, 10, ROp.SEND, 0, 0xb9)]);
      expectOnly(ranges(B, 0, 4));
    });
  });

  // -------------------------------------------------------------------------------------------

  describe('completion queue room', () => {
    let small: Cq;
    let p: Qp;
    let q: Qp;
    before(async () => {
      small = await v.createCq(302, 3);
      p = await v.createQp(30, QpT.RC, { sqCq: small, rqCq: rcq });
      q = await v.createQp(31, QpT.RC, { sqCq: small, rqCq: rcq });
      await v.connectPair(p, q);
    });

    it('a WQE whose CQE would find the CQ full waits for the host\'s ring-0 doorbell instead of losing the completion', async () => {
      snap = new Snapshot(v.g, arena());
      for (let i = 0; i < 10; i++) v.postSend(p, { op: WOp.RDMA_WRITE, id: i, inline: Buffer.from([i + 1]), remote: { va: B.va + 3 * PAGE + i, rkey: B.key } });
      await v.settle();
      // 8 slots, 7 usable (one is the hole).
      expectOnly(ranges(B, 3 * PAGE, 7));
      const first = v.drain(small); // rings ring 0 with the new read position
      expect(first.map(S)).to.deep.equal([1, 2, 3, 4, 5, 6, 7].map((n) => msn(p, n)));
      await v.settle();
      expect(v.drain(small).map(S)).to.deep.equal([8, 9, 10].map((n) => msn(p, n)));
      expect([...B.read(3 * PAGE, 10)]).to.deep.equal([1, 2, 3, 4, 5, 6, 7, 8, 9, 10]);
      expectOnly(ranges(B, 3 * PAGE, 10));
    });
  });

  // -------------------------------------------------------------------------------------------

  describe('SRQ', () => {
    let own: Cq;
    let s: Qp;
    let t: Qp;
    let srq: Srq;
    before(async () => {
      own = await v.createCq(303);
      srq = await v.createSrq();
      s = await v.createQp(24, QpT.RC, { sqCq: own, srq });
      t = await v.createQp(25, QpT.RC, { sqCq: scq, rqCq: rcq });
      await v.connectPair(s, t);
    });

    it('a SEND to a QP on an SRQ consumes the SRQ\'s receive; the RECV CQE names the QP', async () => {
      snap = new Snapshot(v.g, arena());
      v.postRecv(srq, { id: 0xc1, sges: [B.sge(0, 32)] });
      v.postSend(t, { op: WOp.SEND_IMM, id: 0x88, inline: Buffer.from('via srq'), imm: 0x55 });
      await v.settle();
      expect(B.read(0, 7).toString()).to.equal('via srq');
      expectOnly(ranges(B, 0, 7));
      expect(v.drain(own).map(R)).to.deep.equal([recv(s, 7, 25, ROp.SEND_IMM, 0x55, 0xc1)]);
      expectCqes([msn(t, 1)], []);
    });
  });

  // -------------------------------------------------------------------------------------------

  describe('UC', () => {
    let u: Qp;
    let w: Qp;
    before(async () => {
      u = await v.createQp(32, QpT.UC, { sqCq: scq, rqCq: rcq });
      w = await v.createQp(33, QpT.UC, { sqCq: scq, rqCq: rcq });
      await v.connectPair(u, w);
    });
    beforeEach(async () => fresh(u, w));

    it('SEND and RDMA_WRITE_IMM between UC QPs (MSN completions, RECV CQEs)', async () => {
      snap = new Snapshot(v.g, arena());
      v.postRecv(w, { id: 0xd1, sges: [B.sge(0, 32)] });
      v.postRecv(w, { id: 0xd2, sges: [] });
      v.postSend(u, { op: WOp.SEND, id: 0x89, inline: Buffer.from('uc send') });
      v.postSend(u, { op: WOp.RDMA_WRITE_IMM, id: 0x8a, inline: Buffer.from('uc write'), imm: 9, remote: { va: B.va + 64, rkey: B.key } });
      await v.settle();
      expect(B.read(0, 7).toString()).to.equal('uc send');
      expect(B.read(64, 8).toString()).to.equal('uc write');
      expectOnly([...ranges(B, 0, 7), ...ranges(B, 64, 8)]);
      expectCqes([msn(u, 1), msn(u, 2)], [recv(w, 7, 32, ROp.SEND, 0, 0xd1), recv(w, 8, 32, ROp.RDMA_WRITE_IMM, 9, 0xd2)]);
    });

    it('no ACKs: a SEND with no receive, a bad rkey and a dead destination all complete the requester OK, and nothing lands', async () => {
      snap = new Snapshot(v.g, arena());
      v.postSend(u, { op: WOp.SEND, id: 0x8d, inline: Buffer.from('dropped') }); // w has no receive: dropped, no RNR
      v.postSend(u, { op: WOp.RDMA_WRITE, id: 0x8e, inline: Buffer.from('bad rkey'), remote: { va: B.va, rkey: B.key ^ 0x80 } });
      await v.settle();
      expectOnly([]);
      expectCqes([msn(u, 1), msn(u, 2)], []);
      expect(v.qpState(u)).to.equal(QpS.RTS);
      await v.toErr(w);
      v.drainAll();
      v.postSend(u, { op: WOp.RDMA_WRITE, id: 0x8f, inline: Buffer.from('to nobody'), remote: { va: B.va, rkey: B.key } });
      await v.settle();
      expectOnly([]);
      expectCqes([msn(u, 3)], []);
      await v.reset(w);
    });

    it('RDMA READ and atomics are not UC operations: LOCAL_QP_OPER and the requester goes to ERR', async () => {
      snap = new Snapshot(v.g, arena());
      v.postSend(u, { op: WOp.RDMA_READ, id: 0x90, sges: [A.sge(0, 8)], remote: { va: B.va, rkey: B.key } });
      await v.settle();
      expectOnly([]);
      expectCqes([msn(u, 1, WSt.LOCAL_QP_OPER)], []);
      expect(v.qpState(u)).to.equal(QpS.ERR);
    });
  });

  // -------------------------------------------------------------------------------------------

  describe('privileged (kernel) QPs: the DMA key', () => {
    let k1: Qp;
    let k2: Qp;
    before(async () => {
      k1 = await v.createQp(34, QpT.RC, { sqCq: scq, rqCq: rcq, flags: QpF.PRIVILEGED });
      k2 = await v.createQp(35, QpT.RC, { sqCq: scq, rqCq: rcq, flags: QpF.PRIVILEGED | QpF.REMOTE_PRIVILEGED });
      await v.connectPair(k1, k2);
    });
    beforeEach(async () => fresh(k1, k2));

    it('lkey 0 gathers from bus addresses; rkey 0 writes a bus address on a REMOTE_PRIVILEGED responder', async () => {
      const [src, dst] = v.pages(2, true);
      v.g.mem(src!, 64).set(pattern(64, 50));
      snap = new Snapshot(v.g, arena());
      v.postSend(k1, { op: WOp.RDMA_WRITE, id: 0x8b, sges: [{ va: src!, len: 40, lkey: 0 }, { va: src! + 40, len: 24, lkey: 0 }], remote: { va: dst! + 100, rkey: 0 } });
      await v.settle();
      expect(v.g.mem(dst! + 100, 64).equals(pattern(64, 50))).to.equal(true);
      expectOnly([[dst! + 100, 64]]);
      expectCqes([msn(k1, 1)], []);
    });

    it('rkey 0 towards a privileged responder without REMOTE_PRIVILEGED: REMOTE_ACC', async () => {
      const [dst] = v.pages(1);
      snap = new Snapshot(v.g, arena());
      v.postSend(k2, { op: WOp.RDMA_WRITE, id: 0x8c, sges: [{ va: A.at(0), len: 8, lkey: 0 }], remote: { va: dst!, rkey: 0 } });
      await v.settle();
      expectCqes([msn(k2, 1, WSt.REMOTE_ACC)], []);
      expectOnly([]);
      expect(v.qpState(k2)).to.equal(QpS.ERR);
    });
  });

  // -------------------------------------------------------------------------------------------

  describe('UD and GSI', () => {
    let x: Qp;
    let y: Qp;
    let gsi: Qp;
    const SMAC = Buffer.from('02a1b2c3d4e5', 'hex');
    const SIP6 = v6('fe80:0:0:0:0:0:0:1');
    const DIP6 = v6('2001:db8:0:0:0:0:0:2');

    before(async () => {
      x = await v.createQp(20, QpT.UD, { sqCq: scq, rqCq: rcq });
      y = await v.createQp(21, QpT.UD, { sqCq: scq, rqCq: rcq });
      await v.readyUd(x, UD_QKEY);
      await v.readyUd(y, UD_QKEY);
      gsi = await v.createQp(1, QpT.UD, { sqCq: scq, rqCq: rcq, flags: QpF.PRIVILEGED });
      await v.readyUd(gsi, GSI_QKEY);
      await v.createAh(4, { sip: v4('10.1.2.3'), dip: v4('10.9.8.7'), ttl: 33, tos: 0x10, smac: SMAC });
      await v.createAh(6, { ipv6: true, sip: SIP6, dip: DIP6, ttl: 7, tos: 0x20, flow: 0x12345, smac: SMAC });
      await v.createAh(7, { sip: v4('10.1.2.3'), dip: v4('10.9.8.7'), vlan: 0x6005, smac: SMAC });
    });
    beforeEach(async () => fresh(x, y, gsi));

    it('IPv4: 20 zero bytes then the IPv4 header (lengths, TTL, TOS, checksum, addresses), then the payload', async () => {
      A.write(0, pattern(100, 60));
      snap = new Snapshot(v.g, arena());
      v.postRecv(y, { id: 0xe1, sges: [B.sge(0, 40 + 256)] });
      v.postSend(x, { op: WOp.SEND_IMM, id: 0x8d, idHi: 0x12345678, imm: 0xfeedface, sges: [A.sge(0, 60), A.sge(60, 40)], ud: { ah: 4, qpn: 21, qkey: UD_QKEY } });
      await v.settle();
      const h = B.read(0, 40);
      expect(h.subarray(0, 20).equals(Buffer.alloc(20))).to.equal(true);
      const ip = h.subarray(20);
      expect([ip[0], ip[1], ip.readUInt16BE(2), ip.readUInt16BE(4), ip.readUInt16BE(6), ip[8], ip[9]])
        .to.deep.equal([0x45, 0x10, 20 + 8 + 12 + 8 + 100 + 4, 0, 0x4000, 33, 17]);
      let sum = 0;
      for (let i = 0; i < 20; i += 2) sum += ip.readUInt16BE(i);
      while (sum > 0xffff) sum = (sum & 0xffff) + (sum >>> 16);
      expect(sum, 'IPv4 header checksum').to.equal(0xffff);
      expect([...ip.subarray(12, 20)]).to.deep.equal([10, 1, 2, 3, 10, 9, 8, 7]);
      expect(B.read(40, 100).equals(pattern(100, 60))).to.equal(true);
      expectOnly(ranges(B, 0, 140));
      const s = v.drain(scq);
      expect(s.map(S)).to.deep.equal([npg(x, 0x8d)]);
      expect(s[0]!.wqeIdHi >>> 0).to.equal(0x12345678);
      const r = v.drain(rcq);
      expect(r.map(R)).to.deep.equal([recv(y, 140, 20, ROp.SEND_IMM, 0xfeedface, 0xe1)]);
      expect([r[0]!.ipv4, r[0]!.vlan, r[0]!.vlanTag, r[0]!.srcMac.toString('hex')]).to.deep.equal([true, false, 0, SMAC.toString('hex')]);
    });

    it('IPv6: the 40-byte IPv6 header (version, class, flow, payload length, next header, hop limit, GIDs)', async () => {
      A.write(0, pattern(33, 61));
      snap = new Snapshot(v.g, arena());
      v.postRecv(y, { id: 0xe2, sges: [B.sge(PAGE, 40 + 256)] });
      v.postSend(x, { op: WOp.SEND, id: 0x8e, sges: [A.sge(0, 33)], ud: { ah: 6, qpn: 21, qkey: UD_QKEY } });
      await v.settle();
      const h = B.read(PAGE, 40);
      expect([h.readUInt32BE(0) >>> 0, h.readUInt16BE(4), h[6], h[7]]).to.deep.equal([((6 << 28) | (0x20 << 20) | 0x12345) >>> 0, 8 + 12 + 8 + 33 + 4, 17, 7]);
      expect(h.subarray(8, 24).equals(SIP6)).to.equal(true);
      expect(h.subarray(24, 40).equals(DIP6)).to.equal(true);
      expect(B.read(PAGE + 40, 33).equals(pattern(33, 61))).to.equal(true);
      expectOnly(ranges(B, PAGE, 73));
      expect(v.drain(scq).map(S)).to.deep.equal([npg(x, 0x8e)]);
      const r = v.drain(rcq);
      expect(r.map(R)).to.deep.equal([recv(y, 73, 20, ROp.SEND, 0, 0xe2)]);
      expect([r[0]!.ipv4, r[0]!.vlan]).to.deep.equal([false, false]);
    });

    it('a VLAN template: the RECV CQE has the VLAN bit and the full TCI', async () => {
      snap = new Snapshot(v.g, arena());
      v.postRecv(y, { id: 0xe3, sges: [B.sge(0, 64)] });
      v.postSend(x, { op: WOp.SEND, id: 0x8f, inline: Buffer.from('tagged'), ud: { ah: 7, qpn: 21, qkey: UD_QKEY } });
      await v.settle();
      expect(B.read(40, 6).toString()).to.equal('tagged');
      expectOnly(ranges(B, 0, 46));
      expect(v.drain(scq).map(S)).to.deep.equal([npg(x, 0x8f)]);
      const r = v.drain(rcq);
      expect(r.map(R)).to.deep.equal([recv(y, 46, 20, ROp.SEND, 0, 0xe3)]);
      expect([r[0]!.ipv4, r[0]!.vlan, r[0]!.vlanTag]).to.deep.equal([true, true, 0x6005]);
    });

    it('a controlled Q_Key (bit 31) in the WQE means the sending QP\'s own; a wrong Q_Key or a non-UD target drops (the sender completes)', async () => {
      snap = new Snapshot(v.g, arena());
      v.postRecv(y, { id: 0xe4, sges: [B.sge(0, 64)] });
      v.postRecv(b, { id: 0xe5, sges: [B.sge(100, 64)] });
      v.postSend(x, { op: WOp.SEND, id: 0x90, inline: Buffer.from('wrong'), ud: { ah: 4, qpn: 21, qkey: 0x22 } });
      v.postSend(x, { op: WOp.SEND, id: 0x91, inline: Buffer.from('to rc'), ud: { ah: 4, qpn: b.id, qkey: UD_QKEY } });
      v.postSend(x, { op: WOp.SEND, id: 0x92, inline: Buffer.from('nobody'), ud: { ah: 4, qpn: 4000, qkey: UD_QKEY } });
      v.postSend(x, { op: WOp.SEND, id: 0x93, inline: Buffer.from('mine'), ud: { ah: 4, qpn: 21, qkey: 0x80000000 } });
      await v.settle();
      expect(B.read(40, 4).toString()).to.equal('mine');
      expectOnly(ranges(B, 0, 44));
      expectCqes([npg(x, 0x90), npg(x, 0x91), npg(x, 0x92), npg(x, 0x93)], [recv(y, 44, 20, ROp.SEND, 0, 0xe4)]);
    });

    it('GSI (QP1, privileged): a MAD with two lkey-0 SGEs and dest_qkey 0x80000000 reaches QP1 (GRH + 256 bytes)', async () => {
      const [hdr, data, rx] = v.pages(3, true);
      v.g.mem(hdr!, 24).set(pattern(24, 70));
      v.g.mem(data!, 232).set(pattern(232, 71));
      snap = new Snapshot(v.g, arena());
      v.postRecv(gsi, { id: 0xe6, sges: [{ va: rx!, len: 40 + 256, lkey: 0 }] });
      v.postSend(gsi, { op: WOp.SEND, id: 0x94, sges: [{ va: hdr!, len: 24, lkey: 0 }, { va: data!, len: 232, lkey: 0 }], ud: { ah: 4, qpn: 1, qkey: 0x80000000 } });
      await v.settle();
      expect(v.g.mem(rx! + 40, 256).equals(Buffer.concat([pattern(24, 70), pattern(232, 71)]))).to.equal(true);
      expect(v.g.mem(rx! + 20, 1)[0]).to.equal(0x45);
      expectOnly([[rx!, 296]]);
      expect(v.drain(scq).map(S)).to.deep.equal([npg(gsi, 0x94)]);
      const r = v.drain(rcq);
      expect(r.map(R)).to.deep.equal([recv(gsi, 296, 1, ROp.SEND, 0, 0xe6)]);
      expect(r[0]!.ipv4).to.equal(true);
    });

    it('a UD receive too small: the sender completes OK, the receiver gets RECV LOCAL_LEN and stays RTS', async () => {
      snap = new Snapshot(v.g, arena());
      v.postRecv(y, { id: 0xe7, sges: [B.sge(0, 40 + 4)] });
      v.postSend(x, { op: WOp.SEND, id: 0x95, inline: Buffer.from('too long'), ud: { ah: 4, qpn: 21, qkey: UD_QKEY } });
      await v.settle();
      expectOnly(ranges(B, 0, 44));
      expectCqes([npg(x, 0x95)], [recvErr(y, WSt.LOCAL_LEN, 20, ROp.SEND, 0, 0xe7)]);
      expect(v.qpState(y)).to.equal(QpS.RTS);
    });

    const udErrors: [string, () => SendWr, number][] = [
      ['a bad lkey: LOCAL_PROT', () => ({ op: WOp.SEND, id: 0x96, sges: [{ ...A.sge(0, 8), lkey: 0x55501 }], ud: { ah: 4, qpn: 21, qkey: UD_QKEY } }), WSt.LOCAL_PROT],
      ['lkey 0 on a user UD QP: LOCAL_PROT', () => ({ op: WOp.SEND, id: 0x97, sges: [{ va: A.at(0), len: 8, lkey: 0 }], ud: { ah: 4, qpn: 21, qkey: UD_QKEY } }), WSt.LOCAL_PROT],
      ['an unknown AH: LOCAL_QP_OPER', () => ({ op: WOp.SEND, id: 0x98, inline: Buffer.from('x'), ud: { ah: 99, qpn: 21, qkey: UD_QKEY } }), WSt.LOCAL_QP_OPER],
      ['an RDMA_WRITE on a UD QP: LOCAL_QP_OPER', () => ({ op: WOp.RDMA_WRITE, id: 0x99, sges: [A.sge(0, 8)], remote: { va: B.va, rkey: B.key } }), WSt.LOCAL_QP_OPER],
      ['a LOCAL_INV on a UD QP: LOCAL_QP_OPER', () => ({ op: WOp.LOCAL_INV, id: 0x9a, imm: B.key }), WSt.LOCAL_QP_OPER],
    ];
    for (const [what, wr, st] of udErrors) {
      it(`UD send with ${what} (NPG with the wqe_id); nothing delivered`, async () => {
        v.postRecv(x, { id: 0xe8, sges: [A.sge(3 * PAGE, 64)] });
        v.postRecv(y, { id: 0xe9, sges: [B.sge(0, 64)] });
        await v.settle();
        snap = new Snapshot(v.g, arena());
        const w = wr();
        v.postSend(x, w);
        await v.settle();
        expect(v.drain(scq).map(S)).to.deep.equal([npg(x, w.id!, st)]);
        // A datagram QP's send error stops only its SQ (SQE): its own receive stays posted, y's is left alone.
        expect(v.qpState(x)).to.equal(QpS.SQE);
        expect(v.drain(rcq).map(R)).to.deep.equal([]);
        expectOnly([]);
        // SQE -> RTS (what the MAD layer does) and the SQ runs again.
        await v.ok(AOp.MODIFY_QP, modifyQpBody({ id: x.id, mask: Mask.STATE | Mask.CUR_STATE, state: QpS.RTS, curState: QpS.SQE }), 'SQE -> RTS');
        v.postSend(x, { op: WOp.SEND, id: 0x9b, inline: Buffer.from('again'), ud: { ah: 4, qpn: 21, qkey: UD_QKEY } });
        await v.settle();
        expect(v.drain(scq).map(S)).to.deep.equal([npg(x, 0x9b)]);
        expect(v.drain(rcq).map((c) => [c.qid, c.error, c.statusLength, c.wqeIdLo])).to.deep.equal([[y.id, false, 40 + 5, 0xe9]]);
      });
    }
  });

  it('moving a QP with work in both queues to ERR posts one flush hint per queue', async () => {
    await fresh(a, b);
    v.postRecv(a, { id: 0xf1, sges: [A.sge(0, 8)] });
    v.postSend(a, { op: WOp.SEND, id: 0xf2, inline: Buffer.from('waits') }); // b has no receive: RNR, waits
    await v.settle();
    expectCqes([], []);
    await v.toErr(a);
    expectCqes([sqFlush(a)], [rqFlush(a)]);
    await v.settle();
    v.postRecv(b, { id: 0xf3, sges: [B.sge(0, 8)] });
    await v.settle();
    expectCqes([], [], 'the flushed SEND never runs');
  });
});
