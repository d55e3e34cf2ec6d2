// How often one WQE leaves the data path for the ionic device on its way to
// a completion: every call the data path makes into the RDMA engine (lib/ionic/rdma/engine.ts)
// while a SEND, an RDMA WRITE and an RDMA READ run on the loopback backend.
// The engine's methods and getters, and those of the objects of lib/ionic it
// hands out, are wrapped with counters (the resource manager and the counter
// arrays are lib/rdma's own: not crossings); the doorbell itself (the guest's
// entry) is not counted. The CQs are polled, not armed, as libionic's busy poll does: an
// armed CQ's event is one more crossing, the interrupt. Before the CQ ring
// moved beside the CQE format (lib/rdma/datapath/cq-ring.ts) a SEND took 6
// (cqRoom 2, postCqe 2, memory, log), a WRITE or a READ 4.

import { expect } from 'chai';
import { MrF, QpT, WOp } from '../support/ionic/rdma-regs';
import { Cq, GuestMr, Qp, VerbsGuest } from '../support/ionic/rdma-verbs';
import { PAGE } from '../support/ionic/regs';
import { CounterSet } from '../../lib/rdma/counters';
import { ResourceManager } from '../../lib/rdma/resources';

const MR_KEY = (5 << 8) | 0x11;
/** The guest's entries into the engine, and its own bookkeeping: not the data path's crossings. */
const ENTRIES = new Set(['constructor', 'doorbell', 'bootstrap', 'reset', 'hooks']);

/** Wraps every method and getter of `target` (own and inherited) with a counter in `counts`. */
function countCalls(target: object, prefix: string, counts: Map<string, number>): void {
  const bump = (name: string): void => {
    counts.set(name, (counts.get(name) ?? 0) + 1);
  };
  for (
    let proto = Object.getPrototypeOf(target);
    proto && proto !== Object.prototype;
    proto = Object.getPrototypeOf(proto)
  ) {
    for (const [name, d] of Object.entries(Object.getOwnPropertyDescriptors(proto))) {
      if (ENTRIES.has(name) || Object.prototype.hasOwnProperty.call(target, name)) continue;
      if (typeof d.value === 'function') {
        const fn = d.value as (...a: unknown[]) => unknown;
        Object.defineProperty(target, name, {
          configurable: true,
          value(this: unknown, ...a: unknown[]) {
            bump(`${prefix}${name}`);
            return fn.apply(this, a);
          },
        });
      } else if (d.get) {
        const get = d.get;
        Object.defineProperty(target, name, {
          configurable: true,
          get(this: unknown) {
            bump(`${prefix}${name}`);
            return get.call(this);
          },
        });
      }
    }
  }
}

describe('rdma: how often a WQE leaves the data path (loopback)', () => {
  let v: VerbsGuest;
  let scq: Cq;
  let rcq: Cq;
  let mr: GuestMr;
  let a: Qp;
  let b: Qp;
  const counts = new Map<string, number>();

  before(async () => {
    v = await VerbsGuest.boot();
    scq = await v.createCq(300, 7);
    rcq = await v.createCq(301, 7);
    mr = await v.createMr({
      key: MR_KEY,
      pages: 4,
      contiguous: true,
      flags: MrF.LOCAL_WRITE | MrF.REMOTE_WRITE | MrF.REMOTE_READ,
    });
    a = await v.createQp(10, QpT.RC, { sqCq: scq, rqCq: rcq });
    b = await v.createQp(11, QpT.RC, { sqCq: scq, rqCq: rcq });
    await v.connectPair(a, b);
    const engine = v.rig.device.rdma!;
    countCalls(engine, '', counts);
    for (const [name, value] of Object.entries(engine)) {
      const rdmaOwn = value instanceof ResourceManager || value instanceof CounterSet || value instanceof Map;
      if (value && typeof value === 'object' && !rdmaOwn) countCalls(value as object, `${name}.`, counts);
    }
  });
  after(async () => v.close());

  /** Runs `post` to its completions and returns the crossings it took. */
  async function walk(post: () => void, cqes: number): Promise<{ total: number; by: Record<string, number> }> {
    counts.clear();
    post();
    await v.settle();
    const by = Object.fromEntries([...counts].sort());
    const total = [...counts.values()].reduce((s, n) => s + n, 0);
    expect(v.drain(scq).length + v.drain(rcq).length).to.equal(cqes);
    return { total, by };
  }

  const walks: [string, () => void, number][] = [
    [
      'SEND',
      () => {
        v.postRecv(b, { id: 1, sges: [mr.sge(PAGE, 64)] });
        v.postSend(a, { op: WOp.SEND, id: 2, sges: [mr.sge(0, 64)] });
      },
      2,
    ],
    [
      'RDMA WRITE',
      () => {
        v.postSend(a, {
          op: WOp.RDMA_WRITE,
          id: 3,
          sges: [mr.sge(0, 64)],
          remote: { va: mr.va + 2 * PAGE, rkey: MR_KEY },
        });
      },
      1,
    ],
    [
      'RDMA READ',
      () => {
        v.postSend(a, {
          op: WOp.RDMA_READ,
          id: 4,
          sges: [mr.sge(0, 64)],
          remote: { va: mr.va + 2 * PAGE, rkey: MR_KEY },
        });
      },
      1,
    ],
  ];
  for (const [name, post, cqes] of walks) {
    it(`${name}: leaves the data path only to find guest memory, once for the WQE and once per CQE`, async () => {
      const r = await walk(post, cqes);
      console.log(`      ${name}: ${r.total} ${JSON.stringify(r.by)}`);
      expect(Object.keys(r.by)).to.deep.equal(['memory']);
      expect(r.total).to.be.at.most(1 + cqes);
    });
  }
});
