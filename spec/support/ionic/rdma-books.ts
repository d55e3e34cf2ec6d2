// The RDMA engine's books, checked from outside: ids in range, CQ reference
// counts matching the QPs that use them, the page-table budget matching the
// runs every object holds. Fuzzers call it between rounds.

import { expect } from 'chai';
import type { RdmaEngine } from '../../../lib/ionic/rdma/engine';

export function checkBooks(dev: RdmaEngine): void {
  const rm = dev.rm;
  let runs = 0;
  for (const mr of rm.mrs.values()) {
    runs += mr.table?.runs ?? 0;
    expect(mr.index).to.be.within(1, 16383);
    expect(mr.key >>> 8).to.equal(mr.index);
  }
  const refs = new Map<number, number>();
  for (const cq of rm.cqs.values()) {
    runs += cq.table.runs;
    expect(cq.id).to.be.within(0, 8191);
    expect(dev.eqs.has(cq.eqId), `CQ ${cq.id} on EQ ${cq.eqId}`).to.equal(true);
    refs.set(cq.id, 0);
  }
  for (const qp of rm.qps.values()) {
    runs += qp.sq.table.runs + (qp.rq?.table.runs ?? 0);
    expect(qp.state).to.be.within(0, 6);
    expect(qp.id).to.be.within(1, 4095);
    for (const c of [qp.sqCqId, qp.rqCqId]) {
      expect(refs.has(c), `QP ${qp.id} uses CQ ${c}`).to.equal(true);
      refs.set(c, refs.get(c)! + 1);
    }
  }
  for (const srq of rm.srqs.values()) runs += srq.ring.table.runs;
  for (const [id, n] of refs) expect(rm.cqs.get(id)!.refs, `refs of CQ ${id}`).to.equal(n);
  expect(rm.budget.used, 'page-table runs charged').to.equal(runs);
  for (const aq of dev.aqs.values()) expect(aq.cq.admin).to.equal(true);
}
