// Seeded fuzz of the P4 engine on RDMA send WQEs: rounds of random wqe_ops
// entries (pass, drop, fp8 add and conversions with formats and flags from
// the whole byte range, valid or not) against random WQEs (WRITE, WRITE_IMM,
// SEND, READ; lengths 0 to past the MRs, good, wrong, foreign-PD and zero
// keys, addresses inside and outside, inline) on the live data path. After
// every round: at most one send CQE per WQE, each with a known status; guest
// memory changed only inside the PD-1 MRs a WQE may write (an independent
// snapshot); the server never threw. At the end a good WRITE still works.

import { expect } from 'chai';
import * as path from 'path';
import { attachP4, P4Attachment, p4FromCli } from '../../../lib/p4/device/attach';
import type { P4Engine } from '../../../lib/p4/engine/engine';
import { runCommand } from '../../../lib/p4/engine/commands';
import { Prng } from '../../support/ionic/rig';
import { WOp, WSt } from '../../support/ionic/rdma-regs';
import type { SendWr } from '../../support/ionic/rdma-verbs';
import {
  A,
  B,
  LWO,
  NOAT,
  P2,
  RO,
  a,
  b,
  expectOnly,
  fresh,
  scq,
  snapshot,
  useOpsGuest,
  v,
} from '../../support/ionic/rdma-ops-fixture';
import type { GuestMr } from '../../support/ionic/rdma-verbs';

const ROOT = path.join(__dirname, '..', '..', '..', '..');
const PROGRAM = path.join(ROOT, 'fixtures', 'p4', 'rdma_fp8.json');
const ROUNDS = 150;
const STATUSES = new Set<number>(Object.values(WSt));

describe('p4 on RDMA send WQEs: seeded fuzz', function () {
  this.timeout(120000);
  useOpsGuest();
  let engine: P4Engine;
  let att: P4Attachment;

  before(() => {
    const setup = p4FromCli({ program: PROGRAM });
    if (!setup.ok) throw new Error(setup.error);
    engine = setup.value!.engine!;
    att = attachP4(v.rig.device, engine);
  });

  it(`${ROUNDS} rounds of random entries and WQEs: one CQE at most per WQE, known statuses, writes only where allowed`, async () => {
    const r = new Prng(0x5eed4);
    const pick = <T>(xs: readonly T[]): T => xs[r.below(xs.length)]!;
    const statuses = new Map<number, number>();
    let posted = 0;
    for (let round = 0; round < ROUNDS; round++) {
      expect(runCommand(engine, 'table_clear wqe_ops').ok).to.equal(true);
      const entries = 1 + r.below(3);
      for (let i = 0; i < entries; i++) {
        const key = `${pick(['0&&&0', `${r.below(8)}&&&0xff`, '4&&&0xff'])} ${pick(['0&&&0', `${pick([0, 1, 2, 3, 4, 8, 16, 64, 4096])}&&&0xffffffff`])} 0&&&0 0&&&0`;
        const fmt = (): number => pick([1, 2, 3, 4, 5, 1, 2, 3, 4, 5, 0, 6, r.below(256)]);
        const kind = r.below(4);
        const args =
          kind === 0
            ? `pass ${key} => ${i}`
            : kind === 1
              ? `drop_wqe ${key} => ${i}`
              : kind === 2
                ? `fp8_add ${key} => ${fmt()} ${r.below(256)} ${i}`
                : `convert ${key} => ${fmt()} ${fmt()} ${r.below(256)} ${i}`;
        const res = runCommand(engine, `table_add wqe_ops ${args}`);
        expect(res.ok, `table_add wqe_ops ${args}: ${res.ok ? '' : res.error}`).to.equal(true);
      }
      await fresh(a, b);
      v.drainAll();
      snapshot();
      const n = 1 + r.below(4);
      let recvs = 0;
      for (let i = 0; i < n; i++) {
        const op = pick([
          WOp.RDMA_WRITE,
          WOp.RDMA_WRITE,
          WOp.RDMA_WRITE,
          WOp.RDMA_WRITE,
          WOp.RDMA_WRITE,
          WOp.RDMA_WRITE_IMM,
          WOp.SEND,
          WOp.RDMA_READ,
        ]);
        const src: GuestMr = pick([A, A, A, A, A, A, RO, LWO, P2]);
        const len = pick([0, 1, 2, 3, 4, 7, 8, 16, 64, 100, 256, 4096, 5000, 20000]);
        const off = pick([0, 1, 100, 4000, 16000]);
        const lkey = r.below(10) < 9 ? src.key : pick([src.key + 1, 0, r.next()]);
        const dst: GuestMr = pick([B, B, B, B, B, B, NOAT, RO, P2]);
        const rkey = r.below(10) < 9 ? dst.key : pick([dst.key ^ 0x100, 0, r.next()]);
        const va = pick([
          dst.va,
          dst.va,
          dst.va + r.below(dst.length),
          dst.va + r.below(dst.length),
          dst.va + dst.length - 2,
          r.next() * 4096,
        ]);
        const wr: SendWr =
          r.below(8) === 0 && op !== WOp.RDMA_READ
            ? { op, id: 1000 + i, inline: r.bytes(Math.min(len, 128)), remote: { va, rkey }, imm: r.next() }
            : { op, id: 1000 + i, sges: [{ va: src.va + off, len, lkey }], remote: { va, rkey }, imm: r.next() };
        if ((op === WOp.SEND || op === WOp.RDMA_WRITE_IMM) && r.below(4) !== 0) {
          v.postRecv(b, { id: 2000 + recvs++, sges: [B.sge(8000, 8192)] });
        }
        v.postSend(a, wr);
        posted++;
      }
      await v.settle();
      await new Promise((res) => setTimeout(res, 5));
      await v.settle();
      const cs = v.drain(scq).filter((c) => c.qid === a.id);
      expect(cs.length, `round ${round}: at most one CQE per WQE`).to.be.at.most(n);
      for (const c of cs) {
        expect(STATUSES.has(c.statusLength) || !c.error, `round ${round}: status ${c.statusLength}`).to.equal(true);
        const k = c.error ? c.statusLength : 0;
        statuses.set(k, (statuses.get(k) ?? 0) + 1);
      }
      // PD 1 MRs with a write right, and B's receive buffer; never RO (no write right) or P2 (another PD).
      expectOnly([...A.all(), ...B.all(), ...LWO.all(), ...NOAT.all()], `round ${round}`);
      v.drainAll();
    }
    // Something of everything happened: successes, and errors of several kinds.
    expect(statuses.get(0) ?? 0, 'successes').to.be.greaterThan(0);
    expect([...statuses.keys()].filter((k) => k !== 0).length, `error kinds ${[...statuses.keys()]}`).to.be.at.least(3);
    expect(posted).to.be.greaterThan(ROUNDS);
    const w = att.wqe.stats;
    console.log(`      wqe stats ${JSON.stringify(w)}, send statuses ${JSON.stringify([...statuses])}`);
    expect([w.adds > 0, w.converts > 0, w.dropped > 0, w.refused > 0, w.passed > 0], JSON.stringify(w)).to.deep.equal([
      true,
      true,
      true,
      true,
      true,
    ]);
    // Still a working device: a plain WRITE with no entries.
    expect(runCommand(engine, 'table_clear wqe_ops').ok).to.equal(true);
    await fresh(a, b);
    A.write(0, Buffer.from('still alive'));
    v.postSend(a, { op: WOp.RDMA_WRITE, id: 1, sges: [A.sge(0, 11)], remote: { va: B.va, rkey: B.key } });
    await v.settle();
    expect(B.read(0, 11).toString()).to.equal('still alive');
    expect(v.drain(scq).map((c) => c.error)).to.deep.equal([false]);
  });
});
