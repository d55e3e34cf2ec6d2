// Match kinds and priorities. The stress-test fixtures (exact_match_1,
// LPM_match_1, ternary_match_1) are probed through each table's lookup after
// a parse; range, valid and optional keys (which no fixture has) through a
// synthetic program whose action writes the entry's MAC into srcAddr, so
// the winner shows in the output frame.

import { expect } from 'chai';
import { P4Engine } from '../../../../lib/p4/engine/engine';
import { runCommand } from '../../../../lib/p4/engine/commands';
import { ethernet, fixtureText, mac, syntheticProgram } from '../../../support/p4';

function add(engine: P4Engine, cmd: string): number {
  const r = runCommand(engine, cmd);
  if (!r.ok) throw new Error(`${cmd}: ${r.error}`);
  return r.handle!;
}

const frame = (dst: string, src: string, type = 0x88b5) => Buffer.concat([ethernet(dst, src, type), Buffer.alloc(46)]);

function hit(engine: P4Engine, table: string, f: Buffer): number | undefined {
  return engine.tables.get(table)!.lookup(engine.parse(f))?.handle;
}

describe('p4: match kinds', () => {
  it('exact (exact_match_1): one and two key parts', () => {
    const e = P4Engine.load(fixtureText('exact_match_1.json'));
    const h1 = add(e, 'table_add exact_1 _nop 00:00:00:00:00:01');
    const h3 = add(e, 'table_add exact_3 _nop 00:00:00:00:00:02 00:00:00:00:00:01');
    expect(hit(e, 'exact_1', frame('00:00:00:00:00:01', '00:00:00:00:00:02'))).to.equal(h1);
    expect(hit(e, 'exact_1', frame('00:00:00:00:00:03', '00:00:00:00:00:02'))).to.equal(undefined);
    expect(hit(e, 'exact_3', frame('00:00:00:00:00:01', '00:00:00:00:00:02'))).to.equal(h3);
    expect(hit(e, 'exact_3', frame('00:00:00:00:00:02', '00:00:00:00:00:01'))).to.equal(undefined);
    const f = frame('00:00:00:00:00:01', '00:00:00:00:00:02');
    expect(e.process(f, 0).frame!.equals(f)).to.equal(true);
  });

  it('lpm (LPM_match_1): longest prefix wins whatever the insertion order', () => {
    const e = P4Engine.load(fixtureText('LPM_match_1.json'));
    const h8 = add(e, 'table_add LPM_1 _nop 0a:00:00:00:00:00/8');
    const h40 = add(e, 'table_add LPM_1 _nop 0a:0b:0c:0d:0e:00/40');
    const h24 = add(e, 'table_add LPM_1 _nop 0a:0b:0c:00:00:00/24');
    const h0 = add(e, 'table_add LPM_1 _nop 0/0');
    expect(hit(e, 'LPM_1', frame('0a:0b:0c:0d:0e:0f', '00:00:00:00:00:00'))).to.equal(h40);
    expect(hit(e, 'LPM_1', frame('0a:0b:0c:ff:0e:0f', '00:00:00:00:00:00'))).to.equal(h24);
    expect(hit(e, 'LPM_1', frame('0a:ff:0c:0d:0e:0f', '00:00:00:00:00:00'))).to.equal(h8);
    expect(hit(e, 'LPM_1', frame('0b:0b:0c:0d:0e:0f', '00:00:00:00:00:00'))).to.equal(h0);
  });

  it('lpm with an exact part (LPM_3)', () => {
    const e = P4Engine.load(fixtureText('LPM_match_1.json'));
    const h = add(e, 'table_add LPM_3 _nop 02:00:00:00:00:00/8 00:00:00:00:00:07');
    expect(hit(e, 'LPM_3', frame('00:00:00:00:00:07', '02:99:99:99:99:99'))).to.equal(h);
    expect(hit(e, 'LPM_3', frame('00:00:00:00:00:08', '02:99:99:99:99:99'))).to.equal(undefined);
  });

  it('ternary (ternary_match_1): lowest priority number wins, ties go to the first added', () => {
    const e = P4Engine.load(fixtureText('ternary_match_1.json'));
    const low = add(e, 'table_add ternary_1 _nop 00:00:00:00:00:00&&&00:00:00:00:00:00 => 100');
    const mid = add(e, 'table_add ternary_1 _nop 0a:00:00:00:00:00&&&ff:00:00:00:00:00 => 10');
    const high = add(e, 'table_add ternary_1 _nop 0a:00:00:00:00:01&&&ff:00:00:00:00:ff => 1');
    const tie = add(e, 'table_add ternary_1 _nop 0a:00:00:00:00:01&&&ff:ff:00:00:00:ff => 1');
    expect(hit(e, 'ternary_1', frame('0a:12:34:56:78:01', '00:00:00:00:00:00'))).to.equal(high);
    expect(hit(e, 'ternary_1', frame('0a:00:34:56:78:01', '00:00:00:00:00:00'))).to.equal(high);
    expect(hit(e, 'ternary_1', frame('0a:12:34:56:78:02', '00:00:00:00:00:00'))).to.equal(mid);
    expect(hit(e, 'ternary_1', frame('0b:12:34:56:78:01', '00:00:00:00:00:00'))).to.equal(low);
    expect(tie).to.be.a('number');
    expect(runCommand(e, 'table_add ternary_1 _nop 01&&&ff').ok).to.equal(false); // priority missing
  });

  it('ternary with two parts (ternary_3)', () => {
    const e = P4Engine.load(fixtureText('ternary_match_1.json'));
    const h = add(e, 'table_add ternary_3 _nop 00:00:00:00:00:01&&&0xff 00:00:00:00:00:00&&&0 => 5');
    expect(hit(e, 'ternary_3', frame('12:34:56:78:9a:bc', 'aa:aa:aa:aa:aa:01'))).to.equal(h);
    expect(hit(e, 'ternary_3', frame('12:34:56:78:9a:bc', 'aa:aa:aa:aa:aa:02'))).to.equal(undefined);
  });

  it('range with priorities, end points included', () => {
    const e = P4Engine.load(syntheticProgram([{ match_type: 'range', target: ['ethernet', 'etherType'] }], 'range'));
    add(e, 'table_add t set_src 0x0800->0x08ff => 00:00:00:00:00:01 20');
    add(e, 'table_add t set_src 0x0806->0x0806 => 00:00:00:00:00:02 10');
    add(e, 'table_add t set_src 0->0xffff => 00:00:00:00:00:03 30');
    const src = (type: number) =>
      e.process(frame('ff:ff:ff:ff:ff:ff', '00:00:00:00:00:00', type), 0).frame!.subarray(6, 12);
    expect(src(0x0800).equals(mac('00:00:00:00:00:01'))).to.equal(true);
    expect(src(0x08ff).equals(mac('00:00:00:00:00:01'))).to.equal(true);
    expect(src(0x0806).equals(mac('00:00:00:00:00:02'))).to.equal(true);
    expect(src(0x0900).equals(mac('00:00:00:00:00:03'))).to.equal(true);
    expect(runCommand(e, 'table_add t set_src 9->8 => 00:00:00:00:00:04 1').ok).to.equal(false);
  });

  it('valid and exact together (a table key on valid(ethernet))', () => {
    const e = P4Engine.load(
      syntheticProgram(
        [
          { match_type: 'valid', target: 'ethernet' },
          { match_type: 'exact', target: ['ethernet', 'etherType'] },
        ],
        'exact',
      ),
    );
    add(e, 'table_add t set_src 1 0x0800 => 00:00:00:00:00:05');
    add(e, 'table_add t set_src 0 0 => 00:00:00:00:00:06');
    const out = e.process(frame('ff:ff:ff:ff:ff:ff', '00:00:00:00:00:00', 0x0800), 0).frame!;
    expect(out.subarray(6, 12).equals(mac('00:00:00:00:00:05'))).to.equal(true);
    // a runt frame: ethernet not extracted, so valid=0 and etherType=0 match the second entry (nothing emitted)
    const r = e.process(Buffer.alloc(6), 0);
    expect(r.frame!.length).to.equal(6);
  });

  it('optional: a wildcard part matches anything, a value part only itself', () => {
    const e = P4Engine.load(
      syntheticProgram(
        [
          { match_type: 'optional', target: ['ethernet', 'dstAddr'] },
          { match_type: 'optional', target: ['ethernet', 'etherType'] },
        ],
        'ternary',
      ),
    );
    add(e, 'table_add t set_src * 0x0800 => 00:00:00:00:00:07 5');
    add(e, 'table_add t set_src 02:00:00:00:00:01 * => 00:00:00:00:00:08 1');
    const src = (dst: string, type: number) =>
      e
        .process(frame(dst, '00:00:00:00:00:00', type), 0)
        .frame!.subarray(6, 12)
        .toString('hex');
    expect(src('02:00:00:00:00:01', 0x0800)).to.equal('000000000008');
    expect(src('02:00:00:00:00:02', 0x0800)).to.equal('000000000007');
    expect(src('02:00:00:00:00:02', 0x86dd)).to.equal('000000000000');
  });

  it('a full table refuses more entries', () => {
    const p = syntheticProgram([{ match_type: 'exact', target: ['ethernet', 'etherType'] }], 'exact');
    p.pipelines[0].tables[0].max_size = 2;
    const e = P4Engine.load(p);
    add(e, 'table_add t set_src 1 => 0');
    add(e, 'table_add t set_src 2 => 0');
    const r = runCommand(e, 'table_add t set_src 3 => 0');
    expect(r.ok).to.equal(false);
  });

  it('const entries and a default entry from the program JSON', () => {
    const p = syntheticProgram([{ match_type: 'exact', target: ['ethernet', 'etherType'] }], 'exact');
    p.pipelines[0].tables[0].entries = [
      {
        match_key: [{ match_type: 'exact', key: '0x0800' }],
        action_entry: { action_id: 0, action_data: ['0x000000000011'] },
        priority: 1,
      },
    ];
    p.pipelines[0].tables[0].default_entry = {
      action_id: 0,
      action_const: true,
      action_data: ['0x000000000022'],
      action_entry_const: true,
    };
    const e = P4Engine.load(p);
    const src = (type: number) =>
      e
        .process(frame('ff:ff:ff:ff:ff:ff', '00:00:00:00:00:00', type), 0)
        .frame!.subarray(6, 12)
        .toString('hex');
    expect(src(0x0800)).to.equal('000000000011');
    expect(src(0x0806)).to.equal('000000000022');
    expect(runCommand(e, 'table_add t set_src 0x0806 => 0').ok).to.equal(false);
    expect(runCommand(e, 'table_set_default t set_src 0').ok).to.equal(false);
  });

  it('the hidden $valid$ field as a key and in a conditional', () => {
    const p = syntheticProgram([{ match_type: 'exact', target: ['ethernet', '$valid$'] }], 'exact');
    p.pipelines[0].init_table = 'c';
    p.pipelines[0].conditionals = [
      {
        name: 'c',
        id: 0,
        expression: {
          type: 'expression',
          value: { op: 'd2b', left: null, right: { type: 'field', value: ['ethernet', '$valid$'] } },
        },
        true_next: 't',
        false_next: null,
      },
    ];
    const e = P4Engine.load(p);
    add(e, 'table_add t set_src 1 => 00:00:00:00:00:09');
    expect(
      e.process(frame('ff:ff:ff:ff:ff:ff', '00:00:00:00:00:00'), 0).frame!.subarray(6, 12).toString('hex'),
    ).to.equal('000000000009');
    const q = syntheticProgram([{ match_type: 'exact', target: ['ethernet', '$valid$'] }], 'exact');
    q.actions[0].primitives[0].parameters[0].value = ['ethernet', '$valid$'];
    expect(() => P4Engine.load(q)).to.throw(/actions\[0\]\.primitives\[0\]\.parameters\[0\]\.value/);
  });
});
