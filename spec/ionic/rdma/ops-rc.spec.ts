// RC data-path operations through the live loopback path
// (lib/rdma/executor/), driven by the verbs guest: each verb's
// success and fast registration/invalidation, with the exact CQEs (contract
// 4.6/4.7) and an arena snapshot proving that nothing outside the
// operation's target was written. Fixture: spec/support/ionic/rdma-ops-fixture.ts.

import { expect } from 'chai';
import { PAGE } from '../../support/ionic/regs';
import { MrF, QpS, ROp, WOp, WSt } from '../../support/ionic/rdma-regs';
import { pageList } from '../../support/ionic/rdma-cmds';
import {
  A,
  a,
  B,
  b,
  bWord,
  expectCqes,
  expectOnly,
  fresh,
  msn,
  npg,
  pattern,
  R,
  ranges,
  rcq,
  recv,
  RO,
  S,
  scq,
  snapshot,
  u64,
  useOpsGuest,
  v,
} from '../../support/ionic/rdma-ops-fixture';
import type { Range } from '../../support/ionic/rdma-ops-fixture';

describe('ionic rdma: data-path operations through the live path: RC successes and fast registration', function () {
  this.timeout(20000);
  useOpsGuest();

  describe('RC successes', () => {
    beforeEach(async () => fresh(a, b));

    it('SEND: two SGEs gathered into one receive; MSN 1 on the requester, RECV with the byte count on the responder', async () => {
      const p1 = pattern(300, 1);
      const p2 = pattern(50, 2);
      A.write(100, p1);
      A.write(2000, p2);
      snapshot();
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
      snapshot();
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
      snapshot();
      v.postRecv(b, { id: 0x79, sges: [B.sge(0, 64)] });
      const off = PAGE - 0x123 - 300; // starts 300 bytes before B's first page boundary
      v.postSend(a, {
        op: WOp.RDMA_WRITE,
        id: 0x44,
        sges: [A.sge(PAGE - 500, 1000), A.sge(2 * PAGE - 100, 3000), A.sge(3 * PAGE + 7, 200)],
        remote: { va: B.va + off, rkey: B.key },
      });
      await v.settle();
      expect(B.read(off, 4200).equals(Buffer.concat(parts))).to.equal(true);
      expectOnly(ranges(B, off, 4200));
      expectCqes([msn(a, 1)], []);
    });

    it('RDMA_WRITE_IMM: data through the rkey, and a RECV CQE with the bytes written and the immediate (the receive buffer untouched)', async () => {
      A.write(64, pattern(777, 7));
      snapshot();
      v.postRecv(b, { id: 0x7a, sges: [B.sge(3 * PAGE, 16)] });
      v.postSend(a, {
        op: WOp.RDMA_WRITE_IMM,
        id: 0x45,
        sges: [A.sge(64, 777)],
        imm: 0x0badf00d,
        remote: { va: B.va + 100, rkey: B.key },
      });
      await v.settle();
      expect(B.read(100, 777).equals(pattern(777, 7))).to.equal(true);
      expectOnly(ranges(B, 100, 777));
      expectCqes([msn(a, 1)], [recv(b, 777, 10, ROp.RDMA_WRITE_IMM, 0x0badf00d, 0x7a)]);
    });

    it('RDMA_READ: a remote range across page boundaries scattered into two local SGEs', async () => {
      const src = pattern(PAGE + 100, 8);
      B.write(PAGE - 0x123 - 50, src);
      snapshot();
      v.postSend(a, {
        op: WOp.RDMA_READ,
        id: 0x46,
        sges: [A.sge(10, 100), A.sge(2 * PAGE + 5, PAGE)],
        remote: { va: B.va + PAGE - 0x123 - 50, rkey: B.key },
      });
      await v.settle();
      expect(Buffer.concat([A.read(10, 100), A.read(2 * PAGE + 5, PAGE)]).equals(src)).to.equal(true);
      expectOnly([...ranges(A, 10, 100), ...ranges(A, 2 * PAGE + 5, PAGE)]);
      expectCqes([msn(a, 1)], []);
    });

    it('RDMA_READ from an MR with REMOTE_READ only', async () => {
      RO.write(0, pattern(32, 9));
      snapshot();
      v.postSend(a, { op: WOp.RDMA_READ, id: 0x47, sges: [A.sge(0, 32)], remote: { va: RO.va, rkey: RO.key } });
      await v.settle();
      expect(A.read(0, 32).equals(pattern(32, 9))).to.equal(true);
      expectOnly(ranges(A, 0, 32));
      expectCqes([msn(a, 1)], []);
    });

    const atomics: [string, number, bigint, bigint, bigint, bigint][] = [
      [
        'ATOMIC_CS, equal: swaps',
        WOp.ATOMIC_CS,
        0x1122334455667788n,
        0xaaaabbbbccccddddn,
        0x1122334455667788n,
        0xaaaabbbbccccddddn,
      ],
      ['ATOMIC_CS, different: leaves the target', WOp.ATOMIC_CS, 5n, 9n, 6n, 5n],
      [
        'ATOMIC_CS, equal low halves only: leaves the target',
        WOp.ATOMIC_CS,
        0x0000000100000005n,
        9n,
        5n,
        0x0000000100000005n,
      ],
      ['ATOMIC_FA, plain', WOp.ATOMIC_FA, 40n, 2n, 0n, 42n],
      ['ATOMIC_FA, carry across 32 bits', WOp.ATOMIC_FA, 0xffffffffn, 1n, 0n, 0x100000000n],
      ['ATOMIC_FA, both halves carry (mod 2^64)', WOp.ATOMIC_FA, 0xffffffffffffffffn, 2n, 0n, 1n],
      [
        'ATOMIC_FA, carry out of both halves',
        WOp.ATOMIC_FA,
        0x8000000080000000n,
        0x8000000080000000n,
        0n,
        0x100000000n,
      ],
    ];
    for (const [what, op, old, operand, compare, want] of atomics) {
      it(`${what}; the old value comes back`, async () => {
        const target = bWord(2 * PAGE + 8 * 17) - B.va;
        B.write(target, u64(old));
        snapshot();
        v.postSend(a, {
          op,
          id: 0x48,
          remote: { va: B.va + target, rkey: B.key },
          atomic: { swapAdd: operand, compare, local: A.sge(PAGE + 16, 8) },
        });
        await v.settle();
        expect(B.read(target, 8).readBigUInt64LE(0)).to.equal(want);
        expect(A.read(PAGE + 16, 8).readBigUInt64LE(0)).to.equal(old);
        expectOnly([...ranges(B, target, 8), ...ranges(A, PAGE + 16, 8)]);
        expectCqes([msn(a, 1)], []);
      });
    }

    it('inline SEND (224 bytes, the most a 256-byte stride holds) and inline WRITE / WRITE_IMM', async () => {
      snapshot();
      v.postRecv(b, { id: 0x7b, sges: [B.sge(0, 300)] });
      v.postRecv(b, { id: 0x7c, sges: [B.sge(400, 8)] });
      v.postSend(a, { op: WOp.SEND, id: 0x49, inline: pattern(224, 10) });
      v.postSend(a, {
        op: WOp.RDMA_WRITE,
        id: 0x4a,
        inline: Buffer.from('inline-write'),
        remote: { va: B.va + 1000, rkey: B.key },
      });
      v.postSend(a, {
        op: WOp.RDMA_WRITE_IMM,
        id: 0x4b,
        inline: Buffer.from('imm!'),
        imm: 0x01020304,
        remote: { va: B.va + 2000, rkey: B.key },
      });
      await v.settle();
      expect(B.read(0, 224).equals(pattern(224, 10))).to.equal(true);
      expect(B.read(1000, 12).toString()).to.equal('inline-write');
      expect(B.read(2000, 4).toString()).to.equal('imm!');
      expectOnly([...ranges(B, 0, 224), ...ranges(B, 1000, 12), ...ranges(B, 2000, 4)]);
      expectCqes(
        [msn(a, 1), msn(a, 2), msn(a, 3)],
        [recv(b, 224, 10, ROp.SEND, 0, 0x7b), recv(b, 4, 10, ROp.RDMA_WRITE_IMM, 0x01020304, 0x7c)],
      );
    });

    it('multi-SGE: 8 SGEs (SPEC32 format) gathered into 5 receive SGEs, and 6 plain SGEs into 8 SPEC32 receive SGEs', async () => {
      // Send pieces straddling A's page boundaries; receive pieces straddling B's.
      const send8 = [
        [PAGE - 10, 30],
        [2 * PAGE - 1, 2],
        [5, 1],
        [3 * PAGE - 64, 200],
        [100, 0],
        [700, 333],
        [4 * PAGE - 8, 8],
        [1500, 1],
      ] as const;
      const recv5 = [
        [PAGE - 0x123 - 20, 40],
        [2 * PAGE, 100],
        [3000, 3],
        [3 * PAGE - 0x123 - 1, 300],
        [50, 400],
      ] as const;
      const payload = Buffer.concat(
        send8.map(([o, n], i) => {
          const p = pattern(n, 20 + i);
          A.write(o, p);
          return p;
        }),
      );
      snapshot();
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

      const send6 = [
        [10, 64],
        [PAGE - 32, 64],
        [2 * PAGE + 1, 9],
        [3 * PAGE - 1, 1],
        [3 * PAGE, 1],
        [80, 17],
      ] as const;
      const payload2 = Buffer.concat(
        send6.map(([o, n], i) => {
          const p = pattern(n, 40 + i);
          A.write(o, p);
          return p;
        }),
      );
      // 156 bytes: seven 20-byte receive SGEs (three of them across B's page boundaries) and 16 of the eighth.
      const at8 = [0, 40, PAGE - 0x123 - 7, 2000, 2 * PAGE - 0x123 - 3, 3000, 3 * PAGE - 0x123 - 10, 3500];
      snapshot();
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
      snapshot();
      v.postRecv(b, { id: 0x7f, sges: [B.sge(0, 10), { va: 0, len: 10, lkey: 0xdead01 }] });
      v.postSend(a, { op: WOp.SEND, id: 0x4e, sges: [A.sge(0, 10)] });
      await v.settle();
      expect(B.read(0, 10).equals(pattern(10, 11))).to.equal(true);
      expectOnly(ranges(B, 0, 10));
      expectCqes([msn(a, 1)], [recv(b, 10, 10, ROp.SEND, 0, 0x7f)]);
    });

    it('zero-length SEND (no SGE, and one 0-byte SGE with a junk key) and zero-length WRITE (the rkey is not even looked at)', async () => {
      snapshot();
      v.postRecv(b, { id: 0x80, sges: [B.sge(0, 64)] });
      v.postRecv(b, { id: 0x81, sges: [] });
      v.postSend(a, { op: WOp.SEND, id: 0x4f, sges: [] });
      v.postSend(a, { op: WOp.SEND_IMM, id: 0x50, sges: [{ va: 0x1234, len: 0, lkey: 0x99999901 }], imm: 7 });
      v.postSend(a, { op: WOp.RDMA_WRITE, id: 0x51, sges: [], remote: { va: 0xdead_beef, rkey: 0x77 } });
      await v.settle();
      expectOnly([]);
      expectCqes(
        [msn(a, 1), msn(a, 2), msn(a, 3)],
        [recv(b, 0, 10, ROp.SEND, 0, 0x80), recv(b, 0, 10, ROp.SEND_IMM, 7, 0x81)],
      );
    });

    it('an unsignaled WQE still gets its MSN, and a RECV CQE carries the source QP of each requester', async () => {
      snapshot();
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
      v.postSend(b, {
        op: WOp.REG_MR,
        id: 0x90,
        imm: key,
        numSge: tag,
        regMr: {
          va: 0x9000_0000,
          length: 2 * PAGE,
          offset: 0,
          dma: pageList(v.g, frPages),
          mapCount: 2,
          flags: MrF.LOCAL_WRITE | MrF.REMOTE_WRITE,
        },
      });
      await v.settle();
      expectCqes([npg(b, 0x90)], [], 'REG_MR');
      return frKey(tag);
    }

    it('SEND_INV invalidates the named key: RECV op SEND_INV with that rkey; a WRITE through it then fails REMOTE_ACC', async () => {
      const key = await register();
      snapshot();
      v.postRecv(b, { id: 0x84, sges: [B.sge(0, 64)] });
      v.postSend(a, {
        op: WOp.RDMA_WRITE,
        id: 0x54,
        inline: Buffer.from('before'),
        remote: { va: 0x9000_0000 + PAGE - 3, rkey: key },
      });
      v.postSend(a, { op: WOp.SEND_INV, id: 0x55, inline: Buffer.from('inv'), imm: key });
      await v.settle();
      expect(v.g.mem(frPages[0]! + PAGE - 3, 3).toString() + v.g.mem(frPages[1]!, 3).toString()).to.equal('before');
      expectCqes([msn(a, 1), msn(a, 2)], [recv(b, 3, 10, ROp.SEND_INV, key, 0x84)]);
      v.postSend(a, {
        op: WOp.RDMA_WRITE,
        id: 0x56,
        inline: Buffer.from('after!'),
        remote: { va: 0x9000_0000, rkey: key },
      });
      await v.settle();
      expectCqes([msn(a, 3, WSt.REMOTE_ACC)], []);
      expectOnly([[frPages[0]! + PAGE - 3, 3], [frPages[1]!, 3], ...ranges(B, 0, 3)]);
      expect(v.qpState(a)).to.equal(QpS.ERR);
    });

    it('LOCAL_INV invalidates a registered FRMR (NPG with the wqe_id); the key then fails REMOTE_ACC', async () => {
      const key = await register();
      snapshot();
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
      v.postSend(b, {
        op: WOp.REG_MR,
        id: 0x92,
        imm: key,
        numSge: (tag + 1) & 0xff,
        regMr: { va: 0x5000_0000, length: PAGE, offset: 0, dma: v.pages(1)[0]!, mapCount: 1, flags: MrF.REMOTE_WRITE },
      });
      await v.settle();
      expectCqes([npg(b, 0x92, WSt.MEM_MGMT_OPER)], []);
      expect(v.qpState(b)).to.equal(QpS.ERR);
      await fresh(b);
      v.postSend(a, {
        op: WOp.RDMA_WRITE,
        id: 0x58,
        inline: Buffer.from('still'),
        remote: { va: 0x9000_0000, rkey: key },
      });
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
});
