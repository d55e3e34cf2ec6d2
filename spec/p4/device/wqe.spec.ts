// The P4 engine on RDMA send WQEs (lib/p4/device/wqe.ts) through the in-process
// device over a real vfio-user socket with memfd guest memory, driven by the
// verbs guest model: fixtures/p4/rdma_fp8.json (the project's hand-written
// WQE program) decides per WQE by its wqe_ops table; an RDMA WRITE becomes an
// fp8 add or a conversion checked against the independent tables of
// fp8-ref.ts; drops, refusals, and the order against the WQE's own checks.

import { expect } from 'chai';
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import { attachP4, P4Attachment, p4FromCli } from '../../../lib/p4/device/attach';
import { P4Engine } from '../../../lib/p4/engine/engine';
import { NumFormat } from '../../../lib/p4/device/fp8';
import { runCommand, runCommands } from '../../../lib/p4/engine/commands';
import { P4_EXTERN_MAX_BYTES, P4_EXTERN_MAX_FP32_BYTES } from '../../../lib/p4/device/wqe';
import { PAGE } from '../../support/ionic/regs';
import { MrF, QpS, QpT, WOp, WSt } from '../../support/ionic/rdma-regs';
import {
  A,
  B,
  a,
  b,
  expectCqes,
  expectOnly,
  fresh,
  msn,
  ranges,
  rcq,
  scq,
  snapshot,
  useOpsGuest,
  v,
} from '../../support/ionic/rdma-ops-fixture';
import { MAXCODE, REF, refEncode } from './fp8-ref';
import { FIXTURES } from '../../support/p4';

const ROOT = path.join(__dirname, '..', '..', '..', '..');
const PROGRAM = path.join(ROOT, 'fixtures', 'p4', 'rdma_fp8.json');
const COMMANDS = path.join(ROOT, 'fixtures', 'p4', 'rdma_fp8.commands.txt');

function cmd(e: P4Engine, line: string): void {
  const r = runCommand(e, line);
  if (!r.ok) throw new Error(`${line}: ${r.error}`);
}

/** E4M3/E5M2 codes, all 256 of them, in an order that pairs every code with a spread of others. */
function codes(seed: number): Buffer {
  const out = Buffer.alloc(256);
  for (let i = 0; i < 256; i++) out[i] = (i * 167 + seed) & 0xff;
  return out;
}

describe('p4 on RDMA send WQEs: rdma_fp8.json on the live data path', function () {
  this.timeout(30000);
  useOpsGuest();
  let att: P4Attachment;
  let engine: P4Engine;

  before(() => {
    const setup = p4FromCli({ program: PROGRAM, commands: COMMANDS, guestScope: 'none' });
    if (!setup.ok) throw new Error(setup.error);
    engine = setup.value!.engine!;
    att = attachP4(v.rig.device, engine, 'none', PROGRAM);
  });

  beforeEach(async () => {
    cmd(engine, 'table_clear wqe_ops');
    await fresh(a, b);
  });

  const cells = (name: string): number[] => [...engine.externs.counters.get(name)!.packets];

  it('a WRITE no entry matches runs as posted (the program counted it by verb)', async () => {
    const before = { ...att.wqe.stats };
    const verbs = cells('wqe_verbs');
    A.write(0, Buffer.from('plain bytes, copied'));
    snapshot();
    v.postSend(a, { op: WOp.RDMA_WRITE, id: 1, sges: [A.sge(0, 19)], remote: { va: B.va + 40, rkey: B.key } });
    await v.settle();
    expect(B.read(40, 19).toString()).to.equal('plain bytes, copied');
    expectOnly(ranges(B, 40, 19));
    expectCqes([msn(a, 1)], []);
    expect(att.wqe.stats.wqes).to.equal(before.wqes + 1);
    expect(att.wqe.stats.passed).to.equal(before.passed + 1);
    expect(cells('wqe_verbs')[WOp.RDMA_WRITE]).to.equal(verbs[WOp.RDMA_WRITE]! + 1);
  });

  for (const [fmt, name] of [
    [NumFormat.E4M3, 'E4M3'],
    [NumFormat.E5M2, 'E5M2'],
  ] as const) {
    for (const sat of [0, 1]) {
      it(`a WRITE turned into an ${name} add${sat ? ' (saturating)' : ''}: every code against the table, only the target written`, async () => {
        cmd(engine, `table_add wqe_ops fp8_add 4&&&0xff 0&&&0 0&&&0 0&&&0 => ${fmt} ${sat} 10`);
        const src = codes(3);
        const dst = codes(77);
        A.write(100, src);
        B.write(PAGE - 0x123 - 100, dst); // the target crosses a page boundary of B
        snapshot();
        v.postSend(a, {
          op: WOp.RDMA_WRITE,
          id: 2,
          sges: [A.sge(100, 200), A.sge(300, 56)],
          remote: { va: B.va + PAGE - 0x123 - 100, rkey: B.key },
        });
        await v.settle();
        const want = Buffer.alloc(256);
        for (let i = 0; i < 256; i++) want[i] = refEncode(fmt, REF[fmt](dst[i]!) + REF[fmt](src[i]!), sat === 1);
        expect(B.read(PAGE - 0x123 - 100, 256).toString('hex')).to.equal(want.toString('hex'));
        expectOnly(ranges(B, PAGE - 0x123 - 100, 256));
        expectCqes([msn(a, 1)], []);
      });
    }
  }

  it('saturation matters: E4M3 448 + 448 is NaN (0x7f) without it, 448 with it', async () => {
    cmd(engine, `table_add wqe_ops fp8_add 4&&&0xff 2&&&0xffffffff 0&&&0 0&&&0 => ${NumFormat.E4M3} 0 10`);
    cmd(engine, `table_add wqe_ops fp8_add 4&&&0xff 3&&&0xffffffff 0&&&0 0&&&0 => ${NumFormat.E4M3} 1 10`);
    const max = MAXCODE[NumFormat.E4M3];
    A.write(0, Buffer.from([max, 0xfe, max]));
    B.write(0, Buffer.from([max, 0xfe, 0, max, 0xfe, 0]));
    v.postSend(a, { op: WOp.RDMA_WRITE, id: 3, sges: [A.sge(0, 2)], remote: { va: B.va, rkey: B.key } });
    v.postSend(a, { op: WOp.RDMA_WRITE, id: 4, sges: [A.sge(0, 3)], remote: { va: B.va + 3, rkey: B.key } });
    await v.settle();
    expect([...B.read(0, 6)]).to.deep.equal([0x7f, 0xff, 0, max, 0xfe, max]);
    expectCqes([msn(a, 1), msn(a, 2)], []);
  });

  it('conversions: FP32 -> E4M3 (n elements out of 4n bytes), E5M2 -> FP16 and BF16 -> E5M2, saturating where asked', async () => {
    cmd(
      engine,
      `table_add wqe_ops convert 4&&&0xff 64&&&0xffffffff 0&&&0 0&&&0 => ${NumFormat.FP32} ${NumFormat.E4M3} 1 10`,
    );
    cmd(
      engine,
      `table_add wqe_ops convert 4&&&0xff 5&&&0xffffffff 0&&&0 0&&&0 => ${NumFormat.E5M2} ${NumFormat.FP16} 0 10`,
    );
    cmd(
      engine,
      `table_add wqe_ops convert 4&&&0xff 6&&&0xffffffff 0&&&0 0&&&0 => ${NumFormat.BF16} ${NumFormat.E5M2} 0 10`,
    );
    const f = [
      0.1,
      -3.3,
      448,
      500,
      1e9,
      -1e9,
      2 ** -9,
      2 ** -10,
      0.0,
      -0.0,
      17,
      1.0625 * 2 ** -6 * 1.5,
      NaN,
      Infinity,
      -Infinity,
      300,
    ];
    expect(f.length * 4).to.equal(64);
    const src = Buffer.alloc(64);
    f.forEach((x, i) => src.writeFloatLE(x, i * 4));
    A.write(0, src);
    const e5 = Buffer.from([0x00, 0x01, 0x3c, 0x7b, 0x7c]); // 0, 2^-16, 1, 57344, inf
    A.write(100, e5);
    const bf = Buffer.alloc(6);
    bf.writeUInt16LE(0x4780, 0); // 65536: past E5M2's max, rounds to inf
    bf.writeUInt16LE(0x3fc0, 2); // 1.5
    bf.writeUInt16LE(0x3d80, 4); // 0.0625
    A.write(200, bf);
    B.write(0, Buffer.alloc(64, 0xee));
    snapshot();
    v.postSend(a, { op: WOp.RDMA_WRITE, id: 5, sges: [A.sge(0, 64)], remote: { va: B.va, rkey: B.key } });
    v.postSend(a, { op: WOp.RDMA_WRITE, id: 6, sges: [A.sge(100, 5)], remote: { va: B.va + 20, rkey: B.key } });
    v.postSend(a, { op: WOp.RDMA_WRITE, id: 7, sges: [A.sge(200, 6)], remote: { va: B.va + 40, rkey: B.key } });
    await v.settle();
    const f32 = new Float32Array(f);
    const want = [...f32].map((x) => refEncode(NumFormat.E4M3, x, true));
    expect([...B.read(0, 16)]).to.deep.equal(want);
    expect(B.read(16, 4).equals(Buffer.alloc(4, 0xee)), 'only n bytes written').to.equal(true);
    const h = B.read(20, 10);
    expect([0, 1, 2, 3, 4].map((i) => h.readUInt16LE(i * 2))).to.deep.equal([0x0000, 0x0100, 0x3c00, 0x7b00, 0x7c00]);
    expect([...B.read(40, 3)]).to.deep.equal([0x7c, 0x3e, 0x2c]);
    expectOnly([...ranges(B, 0, 16), ...ranges(B, 20, 10), ...ranges(B, 40, 3)]);
    expectCqes([msn(a, 1), msn(a, 2), msn(a, 3)], []);
  });

  it('an inline WRITE is a source too (the WQE names its bytes)', async () => {
    cmd(engine, `table_add wqe_ops fp8_add 4&&&0xff 0&&&0 0&&&0 0&&&0 => ${NumFormat.E5M2} 0 10`);
    B.write(0, Buffer.from([0x3c, 0x3c, 0x40, 0x00]));
    v.postSend(a, {
      op: WOp.RDMA_WRITE,
      id: 8,
      inline: Buffer.from([0x3c, 0xbc, 0x3c, 0x80]),
      remote: { va: B.va, rkey: B.key },
    });
    await v.settle();
    // 1+1=2 (0x40), 1-1=+0, 2+1=3 (0x42), 0 + -0 = +0
    expect([...B.read(0, 4)]).to.deep.equal([0x40, 0x00, 0x42, 0x00]);
    expectCqes([msn(a, 1)], []);
  });

  it('a dropped RC WRITE completes RETRY_EXCEEDED, the QP goes to ERR, nothing is written', async () => {
    cmd(engine, 'table_add wqe_ops drop_wqe 4&&&0xff 3&&&0xffffffff 0&&&0 0&&&0 => 1');
    const dropped = att.wqe.stats.dropped;
    A.write(0, Buffer.from('abc'));
    snapshot();
    v.postSend(a, { op: WOp.RDMA_WRITE, id: 9, sges: [A.sge(0, 3)], remote: { va: B.va, rkey: B.key } });
    await v.settle();
    expectOnly([]);
    expect(v.drain(scq).map((c) => [c.error, c.statusLength])).to.deep.equal([[true, WSt.RETRY_EXCEEDED]]);
    v.drainAll();
    expect(v.qpState(a)).to.equal(QpS.ERR);
    expect(att.wqe.stats.dropped).to.equal(dropped + 1);
  });

  it('a dropped UC WRITE completes OK (lost as on a wire); a dropped SEND consumes no receive', async () => {
    const u1 = await v.createQp(40, QpT.UC, { sqCq: scq, rqCq: rcq });
    const u2 = await v.createQp(41, QpT.UC, { sqCq: scq, rqCq: rcq });
    await v.connectPair(u1, u2);
    cmd(engine, 'table_add wqe_ops drop_wqe 0&&&0 0&&&0 0&&&0 0&&&0 => 1'); // everything
    A.write(0, Buffer.from('lost'));
    snapshot();
    v.postRecv(u2, { id: 0x55, sges: [B.sge(500, 64)] });
    v.postSend(u1, { op: WOp.RDMA_WRITE, id: 10, sges: [A.sge(0, 4)], remote: { va: B.va, rkey: B.key } });
    v.postSend(u1, { op: WOp.SEND, id: 11, sges: [A.sge(0, 4)] });
    await v.settle();
    expectOnly([]);
    expectCqes([msn(u1, 1), msn(u1, 2)], []);
    expect(v.qpState(u1)).to.equal(QpS.RTS);
  });

  it('refusals: an extern on a SEND, a length not a multiple of the element, rkey 0, a bad rkey, a source too large', async () => {
    cmd(engine, `table_add wqe_ops fp8_add 0&&&0xff 0&&&0 0&&&0 0&&&0 => ${NumFormat.E4M3} 0 10`); // SEND
    cmd(engine, `table_add wqe_ops convert 4&&&0xff 0&&&0 0&&&0 0&&&0 => ${NumFormat.FP16} ${NumFormat.E4M3} 0 10`);
    const cases: { what: string; post: () => void; st: number }[] = [
      {
        what: 'fp8 add on a SEND',
        post: () => {
          v.postRecv(b, { id: 1, sges: [B.sge(0, 64)] });
          v.postSend(a, { op: WOp.SEND, id: 12, sges: [A.sge(0, 8)] });
        },
        st: WSt.LOCAL_QP_OPER,
      },
      {
        what: 'odd length for FP16',
        post: () =>
          v.postSend(a, { op: WOp.RDMA_WRITE, id: 13, sges: [A.sge(0, 7)], remote: { va: B.va, rkey: B.key } }),
        st: WSt.LOCAL_LEN,
      },
      {
        what: 'rkey 0',
        post: () =>
          v.postSend(a, { op: WOp.RDMA_WRITE, id: 14, sges: [A.sge(0, 8)], remote: { va: B.pages[0]!, rkey: 0 } }),
        st: WSt.REMOTE_ACC,
      },
      {
        what: 'a bad rkey',
        post: () =>
          v.postSend(a, { op: WOp.RDMA_WRITE, id: 15, sges: [A.sge(0, 8)], remote: { va: B.va, rkey: B.key + 1 } }),
        st: WSt.REMOTE_ACC,
      },
      {
        what: 'past the end of the MR',
        post: () =>
          v.postSend(a, {
            op: WOp.RDMA_WRITE,
            id: 16,
            sges: [A.sge(0, 8)],
            remote: { va: B.va + B.length - 2, rkey: B.key },
          }),
        st: WSt.REMOTE_ACC,
      },
    ];
    for (const c of cases) {
      await fresh(a, b);
      const refused = att.wqe.stats.refused;
      snapshot();
      c.post();
      await v.settle();
      expectOnly([], c.what);
      expect(
        v.drain(scq).map((x) => [x.error, x.statusLength]),
        c.what,
      ).to.deep.equal([[true, c.st]]);
      v.drainAll();
      expect(v.qpState(a), c.what).to.equal(QpS.ERR);
      expect(att.wqe.stats.refused, c.what).to.equal(refused + 1);
    }
    // Larger than P4_EXTERN_MAX_BYTES: refused before any byte is read.
    cmd(engine, 'table_clear wqe_ops');
    cmd(engine, `table_add wqe_ops fp8_add 4&&&0xff 0&&&0 0&&&0 0&&&0 => ${NumFormat.E4M3} 0 10`);
    const pages = Math.ceil(P4_EXTERN_MAX_BYTES / PAGE) + 1;
    const big = await v.createMr({ key: 0x901, pages, flags: MrF.LOCAL_WRITE });
    await fresh(a, b);
    snapshot();
    v.postSend(a, {
      op: WOp.RDMA_WRITE,
      id: 17,
      sges: [big.sge(0, P4_EXTERN_MAX_BYTES + 1)],
      remote: { va: B.va, rkey: B.key },
    });
    await v.settle();
    expectOnly([]);
    expect(v.drain(scq).map((x) => [x.error, x.statusLength])).to.deep.equal([[true, WSt.LOCAL_LEN]]);
    v.drainAll();
    // From FP32 the bound is lower (each element is rounded by computation, not by table).
    cmd(engine, 'table_clear wqe_ops');
    cmd(engine, `table_add wqe_ops convert 4&&&0xff 0&&&0 0&&&0 0&&&0 => ${NumFormat.FP32} ${NumFormat.E4M3} 0 10`);
    await fresh(a, b);
    v.postSend(a, {
      op: WOp.RDMA_WRITE,
      id: 22,
      sges: [big.sge(0, P4_EXTERN_MAX_FP32_BYTES + 4)],
      remote: { va: B.va, rkey: B.key },
    });
    await v.settle();
    expectOnly([]);
    expect(v.drain(scq).map((x) => [x.error, x.statusLength])).to.deep.equal([[true, WSt.LOCAL_LEN]]);
    v.drainAll();
  });

  it('an SGE with key 0 (a privileged QP may use it) is refused as an extern operand; as a plain WRITE it still runs', async () => {
    const k1 = await v.createQp(42, QpT.RC, { sqCq: scq, rqCq: rcq, flags: 1 << 15 /* PRIVILEGED */ });
    const k2 = await v.createQp(43, QpT.RC, { sqCq: scq, rqCq: rcq });
    await v.connectPair(k1, k2);
    const gpa = A.at(0);
    A.write(0, Buffer.from([0x38, 0x38]));
    B.write(0, Buffer.from([0, 0]));
    v.postSend(k1, {
      op: WOp.RDMA_WRITE,
      id: 18,
      sges: [{ va: gpa, len: 2, lkey: 0 }],
      remote: { va: B.va, rkey: B.key },
    });
    await v.settle();
    expect([...B.read(0, 2)]).to.deep.equal([0x38, 0x38]);
    expect(v.drain(scq).map((x) => [x.error, x.statusLength])).to.deep.equal([[false, 0]]);
    snapshot();
    cmd(engine, `table_add wqe_ops fp8_add 4&&&0xff 0&&&0 0&&&0 0&&&0 => ${NumFormat.E4M3} 0 10`);
    v.postSend(k1, {
      op: WOp.RDMA_WRITE,
      id: 19,
      sges: [{ va: gpa, len: 2, lkey: 0 }],
      remote: { va: B.va, rkey: B.key },
    });
    await v.settle();
    expectOnly([]);
    expect(v.drain(scq).map((x) => [x.error, x.statusLength])).to.deep.equal([[true, WSt.LOCAL_PROT]]);
    v.drainAll();
  });

  it('a WQE that fails its own memory checks never reaches the program', async () => {
    cmd(engine, 'table_add wqe_ops drop_wqe 0&&&0 0&&&0 0&&&0 0&&&0 => 1');
    const seen = att.wqe.stats.wqes;
    v.postSend(a, { op: WOp.RDMA_WRITE, id: 20, sges: [A.sge(0, 8, A.key + 1)], remote: { va: B.va, rkey: B.key } });
    await v.settle();
    expect(v.drain(scq).map((x) => [x.error, x.statusLength])).to.deep.equal([[true, WSt.LOCAL_PROT]]);
    v.drainAll();
    expect(att.wqe.stats.wqes).to.equal(seen);
  });

  it('a WQE that waits (RNR) runs through the program once', async () => {
    const verbs = cells('wqe_verbs')[WOp.SEND]!;
    const seen = att.wqe.stats.wqes;
    A.write(0, Buffer.from('later'));
    v.postSend(a, { op: WOp.SEND, id: 21, sges: [A.sge(0, 5)] });
    await v.settle();
    v.postRecv(b, { id: 0x66, sges: [B.sge(0, 64)] });
    await new Promise((r) => setTimeout(r, 100));
    await v.settle();
    expect(B.read(0, 5).toString()).to.equal('later');
    expect(att.wqe.stats.wqes).to.equal(seen + 1);
    expect(cells('wqe_verbs')[WOp.SEND]).to.equal(verbs + 1);
    v.drainAll();
  });

  it('a WQE that passed and waits, its slot rewritten by the guest before it runs: the new WQE goes through the program', async () => {
    cmd(engine, 'table_add wqe_ops drop_wqe 4&&&0xff 0&&&0 0&&&0 0&&&0 => 1'); // WRITEs dropped, SENDs pass
    const seen = att.wqe.stats.wqes;
    v.postSend(a, { op: WOp.SEND, id: 25, sges: [A.sge(0, 5)] }); // passes, then waits (RNR) at index 0
    await v.settle();
    expect(att.wqe.stats.wqes).to.equal(seen + 1);
    B.write(0, Buffer.alloc(5));
    snapshot();
    a.sq.pi = 0; // rewrite slot 0 in place (no new doorbell)
    v.postSend(a, { op: WOp.RDMA_WRITE, id: 26, sges: [A.sge(0, 5)], remote: { va: B.va, rkey: B.key } }, false);
    v.postRecv(b, { id: 0x67, sges: [B.sge(100, 64)] }); // wakes the waiting QP
    await v.settle();
    expect(att.wqe.stats.wqes).to.equal(seen + 2);
    expect(v.drain(scq).map((x) => [x.error, x.statusLength])).to.deep.equal([[true, WSt.RETRY_EXCEEDED]]);
    expectOnly([]);
    v.drainAll();
  });

  it('a QP reset while its head WQE waits: the next WQE at that ring index goes through the program', async () => {
    const seen = att.wqe.stats.wqes;
    v.postSend(a, { op: WOp.SEND, id: 23, sges: [A.sge(0, 5)] }); // no receive: waits (RNR) at index 0
    await v.settle();
    expect(att.wqe.stats.wqes).to.equal(seen + 1);
    await fresh(a, b); // RESET: the ring starts over at index 0
    cmd(engine, 'table_add wqe_ops drop_wqe 4&&&0xff 0&&&0 0&&&0 0&&&0 => 1');
    B.write(0, Buffer.alloc(5));
    snapshot();
    v.postSend(a, { op: WOp.RDMA_WRITE, id: 24, sges: [A.sge(0, 5)], remote: { va: B.va, rkey: B.key } });
    await v.settle();
    expectOnly([]);
    expect(att.wqe.stats.wqes).to.equal(seen + 2);
    expect(v.drain(scq).map((x) => [x.error, x.statusLength])).to.deep.equal([[true, WSt.RETRY_EXCEEDED]]);
    v.drainAll();
  });
});

describe('p4 on RDMA send WQEs: which programs run on them', () => {
  it('a program without the ernic_wqe header (simple_router) never sees a WQE', async function () {
    const setup = p4FromCli({ program: path.join(FIXTURES, 'simple_router.json') });
    expect(setup.ok).to.equal(true);
    const { VerbsGuest } = await import('../../support/ionic/rdma-verbs');
    const g = await VerbsGuest.boot();
    try {
      const att = attachP4(g.rig.device, setup.ok ? setup.value!.engine : null);
      const cq = await g.createCq(300);
      const m = await g.createMr({ key: 0x101, pages: 1, flags: MrF.LOCAL_WRITE | MrF.REMOTE_WRITE });
      const q1 = await g.createQp(10, QpT.RC, { sqCq: cq });
      const q2 = await g.createQp(11, QpT.RC, { sqCq: cq });
      await g.connectPair(q1, q2);
      m.write(0, Buffer.from('x'));
      g.postSend(q1, { op: WOp.RDMA_WRITE, id: 1, sges: [m.sge(0, 1)], remote: { va: m.va + 8, rkey: m.key } });
      await g.settle();
      expect(m.read(8, 1).toString()).to.equal('x');
      expect(att.wqe.stats.wqes).to.equal(0);
      expect(g.rig.device.rdma!.hooks.sendFilter, 'no filter on the data path: no per-WQE cost').to.equal(undefined);
      // A WQE program loaded later (P4_LOAD does this) puts it there.
      expect(att.replace(P4Engine.load(fs.readFileSync(PROGRAM, 'utf8')))).to.equal(null);
      expect(g.rig.device.rdma!.hooks.sendFilter).to.equal(att.wqe);
    } finally {
      await g.close();
    }
  });

  it('an ernic_wqe header of another layout refuses the program at load, in one line', () => {
    const p = JSON.parse(fs.readFileSync(PROGRAM, 'utf8'));
    p.header_types[1].fields[7] = ['length', 16];
    p.header_types[1].fields.splice(8, 0, ['pad', 16]);
    const file = path.join(os.tmpdir(), `bad-wqe-${process.pid}.json`);
    fs.writeFileSync(file, JSON.stringify(p));
    try {
      const r = p4FromCli({ program: file });
      expect(r.ok).to.equal(false);
      expect(!r.ok && r.error).to.match(
        /--p4-program .*bad-wqe-\d+\.json: header ernic_wqe must have the fields verb:8 .* \(has .*length:16 pad:16/,
      );
    } finally {
      fs.unlinkSync(file);
    }
  });

  it('the fixture program and its commands load; frames pass between the ports by l2_fwd', () => {
    const e = P4Engine.load(fs.readFileSync(PROGRAM, 'utf8'));
    expect(runCommands(e, fs.readFileSync(COMMANDS, 'utf8')).ok).to.equal(true);
    const frame = Buffer.alloc(60, 7);
    const r1 = e.process(frame, 1);
    expect([r1.dropped, r1.egressPort, r1.frame!.equals(frame)]).to.deep.equal([false, 2, true]);
    const r2 = e.process(frame, 2);
    expect([r2.dropped, r2.egressPort]).to.deep.equal([false, 1]);
  });
});
