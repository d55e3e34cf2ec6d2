// Action profiles: an indirect table whose entries name members, and an
// indirect_ws table whose entries name groups; the selector's crc16 over
// srcAddr picks the member, the same frame always the same one.

import { expect } from 'chai';
import { P4Engine } from '../../../lib/p4/engine/engine';
import { runCommand } from '../../../lib/p4/engine/commands';
import { ethernet, syntheticProgram } from '../../support/p4';

function indirect(selector: boolean): P4Engine {
  const p = syntheticProgram([{ match_type: 'exact', target: ['ethernet', 'etherType'] }], 'exact');
  const t = p.pipelines[0].tables[0];
  t.type = selector ? 'indirect_ws' : 'indirect';
  t.action_profile = 'ap';
  p.pipelines[0].action_profiles = [
    {
      name: 'ap',
      id: 0,
      max_size: 8,
      ...(selector ? { selector: { algo: 'crc16', input: [{ type: 'field', value: ['ethernet', 'srcAddr'] }] } } : {}),
    },
  ];
  return P4Engine.load(p);
}

function cmd(e: P4Engine, c: string): number | undefined {
  const r = runCommand(e, c);
  if (!r.ok) throw new Error(`${c}: ${r.error}`);
  return r.handle;
}

const frame = (src: string, type = 0x0800) =>
  Buffer.concat([ethernet('ff:ff:ff:ff:ff:ff', src, type), Buffer.alloc(46)]);
const srcOut = (e: P4Engine, f: Buffer) => e.process(f, 0).frame!.subarray(6, 12).toString('hex');

describe('p4: action profiles', () => {
  it('indirect: entries and the default name members', () => {
    const e = indirect(false);
    const m0 = cmd(e, 'act_prof_create_member ap set_src 00:00:00:00:00:01')!;
    const m1 = cmd(e, 'act_prof_create_member ap set_src 00:00:00:00:00:02')!;
    cmd(e, `table_indirect_add t 0x0800 => ${m0}`);
    cmd(e, `table_indirect_set_default t ${m1}`);
    expect(srcOut(e, frame('02:00:00:00:00:09'))).to.equal('000000000001');
    expect(srcOut(e, frame('02:00:00:00:00:09', 0x0806))).to.equal('000000000002');
    for (const bad of [
      'table_add t set_src 0x0806 => 0',
      'table_indirect_add t 0x0806 => 9',
      'act_prof_create_member ap nosuch',
      'act_prof_create_group ap',
      'table_indirect_add_with_group t 0x0806 => 0',
    ]) {
      expect(runCommand(e, bad).ok, bad).to.equal(false);
    }
  });

  it('indirect_ws: a group spreads frames by the selector hash, the same frame sticks', () => {
    const e = indirect(true);
    const g = cmd(e, 'act_prof_create_group ap')!;
    const members = ['00:00:00:00:00:0a', '00:00:00:00:00:0b', '00:00:00:00:00:0c'].map((m) =>
      cmd(e, `act_prof_create_member ap set_src ${m}`)!,
    );
    expect(srcOut(e, frame('02:00:00:00:00:01'))).to.equal('020000000001'); // no entry, no default: nothing happens
    cmd(e, `table_indirect_add_with_group t 0x0800 => ${g}`);
    expect(srcOut(e, frame('02:00:00:00:00:01'))).to.equal('020000000001'); // empty group: no action
    for (const m of members) cmd(e, `act_prof_add_member_to_group ap ${m} ${g}`);
    expect(runCommand(e, `act_prof_add_member_to_group ap ${members[0]} ${g}`).ok).to.equal(false);
    const seen = new Set<string>();
    for (let i = 0; i < 64; i++) {
      const src = `02:00:00:00:${(i >> 8).toString(16).padStart(2, '0')}:${(i & 0xff).toString(16).padStart(2, '0')}`;
      const out = srcOut(e, frame(src));
      expect(srcOut(e, frame(src))).to.equal(out);
      seen.add(out);
    }
    expect([...seen].sort()).to.deep.equal(['00000000000a', '00000000000b', '00000000000c']);
  });
});
