// Action profiles in the guest budget (issue item 4): a guest's program
// whose action profiles (members, and groups with a selector) and tables
// together may hold more than P4_GUEST_MAX_TABLE_ENTRIES is refused at
// P4_LOAD; and whatever program runs, the guest's member, group and
// group-membership adds stop at the budget with a clear error, while each
// command and each frame stay short.

import { expect } from 'chai';
import { P4Engine } from '../../../lib/p4/engine/engine';
import { P4_GUEST_MAX_TABLE_ENTRIES } from '../../../lib/p4/device/devcmd';
import { ethernet, syntheticProgram } from '../../support/p4';
import { guestControl } from '../guest';

const St = { SUCCESS: 0, EINVAL: 14 } as const;

function profileProgram(maxSize: number, selector: boolean, tableSize = 64): any {
  const p = syntheticProgram([{ match_type: 'exact', target: ['ethernet', 'etherType'] }], 'exact');
  const t = p.pipelines[0].tables[0];
  t.type = selector ? 'indirect_ws' : 'indirect';
  t.action_profile = 'ap';
  t.max_size = tableSize;
  p.pipelines[0].action_profiles = [
    {
      name: 'ap',
      id: 0,
      max_size: maxSize,
      ...(selector ? { selector: { algo: 'crc16', input: [{ type: 'field', value: ['ethernet', 'srcAddr'] }] } } : {}),
    },
  ];
  return p;
}

const frame = (src: string) => Buffer.concat([ethernet('ff:ff:ff:ff:ff:ff', src, 0x0800), Buffer.alloc(46)]);
const ms = (t0: bigint) => Number(process.hrtime.bigint() - t0) / 1e6;

describe('p4: action profiles in the guest budget', () => {
  it('P4_LOAD refuses a profile of max_size 2^31-1, and one whose members and groups with the tables pass the budget', () => {
    const g = guestControl('program');
    const huge = g.load(profileProgram(0x7fffffff, false));
    expect(huge.status).to.equal(St.EINVAL);
    expect(huge.text).to.match(/action profile/);
    expect(g.engine).to.equal(null);
    // members and groups: 2 x 32768 with the table's 64 entries is over 65536
    const sel = g.load(profileProgram(P4_GUEST_MAX_TABLE_ENTRIES / 2, true));
    expect(sel.status).to.equal(St.EINVAL);
    expect(sel.text).to.match(/action profile/);
    expect(g.load(profileProgram(1024, true)).status).to.equal(St.SUCCESS);
  });

  it('an operator program with max_size 2^31-1 under scope tables: the guest adds members up to the budget, then a clear refusal', function () {
    this.timeout(120000);
    const e = P4Engine.load(profileProgram(0x7fffffff, true));
    const g = guestControl('tables', e);
    const heap0 = process.memoryUsage().heapUsed;
    let created = 0;
    let longest = 0;
    let refused = '';
    const t0 = process.hrtime.bigint();
    for (let i = 0; i < 70000; i++) {
      const t = process.hrtime.bigint();
      const r = g.command(`act_prof_create_member ap set_src ${i}`);
      longest = Math.max(longest, ms(t));
      if (r.status !== St.SUCCESS) {
        refused = r.out;
        break;
      }
      created++;
    }
    const heap = (process.memoryUsage().heapUsed - heap0) / (1 << 20);
    console.log(
      `      70,000 member adds asked: ${created} created in ${ms(t0).toFixed(0)} ms (longest command ${longest.toFixed(2)} ms, heap +${heap.toFixed(1)} MiB); then: ${refused}`,
    );
    expect(created).to.equal(P4_GUEST_MAX_TABLE_ENTRIES);
    expect(refused).to.match(/budget/);
    // groups and memberships are in the same budget: none fits now
    const grp = g.command('act_prof_create_group ap');
    expect(grp.status).to.equal(St.EINVAL);
    expect(grp.out).to.match(/budget/);
    // frames still run through the profile, each in a short time
    const f = frame('00:00:00:00:00:01');
    expect(e.process(f).dropped).to.equal(false);
  });

  it('group memberships count: one group of many members stops at the budget; the selector still picks per frame in O(1)', function () {
    this.timeout(120000);
    const e = P4Engine.load(profileProgram(0x7fffffff, true));
    const g = guestControl('tables', e);
    const members = 40000;
    let handle = -1;
    for (let i = 0; i < members; i++) {
      const r = g.command(`act_prof_create_member ap set_src ${i + 1}`);
      expect(r.status, `member ${i}`).to.equal(St.SUCCESS);
    }
    const grp = g.command('act_prof_create_group ap');
    expect(grp.status).to.equal(St.SUCCESS);
    handle = grp.handle;
    let added = 0;
    let longest = 0;
    let refused = '';
    for (let m = 0; m < members; m++) {
      const t = process.hrtime.bigint();
      const r = g.command(`act_prof_add_member_to_group ap ${m} ${handle}`);
      longest = Math.max(longest, ms(t));
      if (r.status !== St.SUCCESS) {
        refused = r.out;
        break;
      }
      added++;
    }
    // members + 1 group + memberships = the budget
    expect(added).to.equal(P4_GUEST_MAX_TABLE_ENTRIES - members - 1);
    expect(refused).to.match(/budget/);
    expect(g.command(`table_indirect_add_with_group t 0x0800 => ${handle}`).status).to.equal(St.EINVAL); // no room for the entry either
    const e2 = P4Engine.load(profileProgram(64, true));
    const g2 = guestControl('tables', e2);
    expect(g2.command('act_prof_create_member ap set_src 0x0a').status).to.equal(St.SUCCESS);
    expect(g2.command('act_prof_create_group ap').status).to.equal(St.SUCCESS);
    expect(g2.command('act_prof_add_member_to_group ap 0 0').status).to.equal(St.SUCCESS);
    expect(g2.command('table_indirect_add_with_group t 0x0800 => 0').status).to.equal(St.SUCCESS);
    expect(e2.process(frame('00:00:00:00:00:07')).frame!.subarray(6, 12).toString('hex')).to.equal('00000000000a');
    console.log(
      `      one group: ${added} memberships added before the budget (longest command ${longest.toFixed(3)} ms)`,
    );
    expect(longest, 'the longest command (a GC pause included)').to.be.below(50);
  });

  it('deletes and clears give the budget back', () => {
    const e = P4Engine.load(profileProgram(8, false, 8));
    const g = guestControl('tables', e);
    expect(g.command('act_prof_create_member ap set_src 1').status).to.equal(St.SUCCESS);
    for (let i = 0; i < 8; i++) expect(g.command(`table_indirect_add t ${i} => 0`).status).to.equal(St.SUCCESS);
    expect(g.command('table_indirect_add t 9 => 0').status).to.equal(St.EINVAL); // the table is full
    expect(g.command('table_clear t').status).to.equal(St.SUCCESS);
    expect(g.command('table_indirect_add t 9 => 0').status).to.equal(St.SUCCESS);
    expect(e.held()).to.equal(2);
  });
});
