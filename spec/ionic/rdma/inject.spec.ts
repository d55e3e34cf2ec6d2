// --inject stats-vals-error on the RDMA admin queue: the injector the device
// is built with (bin/rocm-ernic.ts builds one per server) reaches the RDMA
// admin commands, and a selected STATS_VALS answers BAD_STATE (the host
// fails that read with -EINVAL and carries on).

import { expect } from 'chai';
import { FaultInjector } from '../../../lib/ionic/fault-injection';
import { IonicGuest } from '../../support/ionic/guest';
import { PAGE } from '../../support/ionic/regs';
import { Rig } from '../../support/ionic/rig';
import { RdmaGuest } from '../../support/ionic/rdma-guest';
import { AOp, ASt } from '../../support/ionic/rdma-regs';
import { statsBody } from '../../support/ionic/rdma-cmds';

describe('ionic rdma: --inject stats-vals-error', () => {
  let rig: Rig;
  let g: IonicGuest;
  let r: RdmaGuest;
  let faults: FaultInjector;

  before(async () => {
    faults = FaultInjector.parse(['stats-vals-error=every:2']);
    rig = await Rig.start({ faults });
    g = await rig.probed();
    r = await RdmaGuest.boot(g, { cpus: 8 });
  });
  after(async () => rig.close());
  afterEach(() => expect(g.violations).to.deep.equal([]));

  it('fails the 2nd and 4th STATS_VALS with BAD_STATE, answers the others, and the server stays up', async () => {
    expect(rig.device.faults).to.equal(faults);
    const at = g.alloc(PAGE);
    const seen: Array<[boolean, number]> = [];
    for (let i = 1; i <= 5; i++) {
      g.mem(at, 8).fill(0xee);
      const c = await r.post(AOp.STATS_VALS, statsBody(at, PAGE));
      expect(c.op).to.equal(AOp.STATS_VALS);
      seen.push([c.error, c.error ? c.status : 0]);
      // a failed command writes nothing into the buffer; a good one overwrites it
      expect(g.mem(at, 8).equals(Buffer.alloc(8, 0xee)), `STATS_VALS ${i} buffer`).to.equal(c.error);
    }
    expect(seen).to.deep.equal([
      [false, 0],
      [true, ASt.BAD_STATE],
      [false, 0],
      [true, ASt.BAD_STATE],
      [false, 0],
    ]);
    const st = faults.stats().find((s) => s.event === 'stats-vals-error')!;
    expect(st).to.include({ seen: 5, failed: 2 });
    // other stats commands are not counted and still work
    expect((await r.post(AOp.STATS_HDRS, statsBody(g.alloc(PAGE), PAGE))).error).to.equal(false);
    expect(faults.stats().find((s) => s.event === 'stats-vals-error')!.seen).to.equal(5);
    // the device counted the refusals as admin errors
    expect(rig.device.rdma!.counters.snapshot().admin_errors).to.be.at.least(2);
  });
});
