// Loading: every fixture program compiles; malformed or unsupported programs
// are refused as a whole with the JSON path of the offending value.

import { expect } from 'chai';
import { P4Engine } from '../../../lib/p4/engine/engine';
import { P4LoadError } from '../../../lib/p4/program/load';
import { MAX_PARSE_STEPS } from '../../../lib/p4/compile/parser';
import { ethernet, fixtureJson, fixtureText, syntheticProgram } from '../../support/p4';

const FIXTURES = [
  'simple_router.json',
  'l2_switch.json',
  'exact_match_1.json',
  'LPM_match_1.json',
  'ternary_match_1.json',
  'parser_deparser_1.json',
];

function refusal(program: unknown): P4LoadError {
  try {
    P4Engine.load(program);
  } catch (e) {
    expect(e).to.be.instanceOf(P4LoadError);
    return e as P4LoadError;
  }
  throw new Error('the program was accepted');
}

describe('p4: loading programs', () => {
  for (const f of FIXTURES) {
    it(`loads ${f}`, () => {
      const e = P4Engine.load(fixtureText(f));
      expect(e.layout.headers.length).to.be.greaterThan(1);
    });
  }

  it('names the JSON path of an unsupported table match type', () => {
    const p = fixtureJson('ternary_match_1.json');
    p.pipelines[0].tables[2].match_type = 'foo';
    const e = refusal(p);
    expect(e.path).to.equal('pipelines[0].tables[2].match_type');
    expect(e.message).to.equal('pipelines[0].tables[2].match_type "foo": unsupported match type');
  });

  it('names the path of an unsupported key match type', () => {
    const p = fixtureJson('exact_match_1.json');
    p.pipelines[0].tables[2].key[1].match_type = 'fuzzy';
    expect(refusal(p).path).to.equal('pipelines[0].tables[2].key[1].match_type');
  });

  it('refuses an unknown primitive', () => {
    const p = fixtureJson('simple_router.json');
    p.actions[2].primitives[1].op = 'clone_ingress_pkt_to_egress';
    const e = refusal(p);
    expect(e.path).to.equal('actions[2].primitives[1].op');
    expect(e.message).to.include('"clone_ingress_pkt_to_egress"');
  });

  it('refuses a parser op parameter that is not an object (null, a number, an array) with its path, never a TypeError', () => {
    for (const bad of [null, 7, ['x']]) {
      const p = fixtureJson('simple_router.json');
      const ops = p.parsers[0].parse_states.flatMap((st: { parser_ops: unknown[] }, si: number) =>
        st.parser_ops.map((_: unknown, oi: number) => [si, oi]),
      );
      const [si, oi] = ops[0];
      p.parsers[0].parse_states[si].parser_ops[oi] = { op: 'set', parameters: [bad, { type: 'hexstr', value: '0x1' }] };
      const e = refusal(p);
      expect(e.path).to.equal(`parsers[0].parse_states[${si}].parser_ops[${oi}].parameters[0]`);
      expect(e.detail).to.equal('a parameter is an object {type, value}');
    }
  });

  it('refuses a parse state naming a missing header', () => {
    const p = fixtureJson('parser_deparser_1.json');
    p.parsers[0].parse_states[3].parser_ops[0].parameters[0].value = 'sctp';
    expect(refusal(p).path).to.equal('parsers[0].parse_states[3].parser_ops[0].parameters[0].value');
  });

  it('refuses a transition to a missing state', () => {
    const p = fixtureJson('parser_deparser_1.json');
    p.parsers[0].parse_states[2].transitions[1].next_state = 'parse_icmp';
    expect(refusal(p).path).to.equal('parsers[0].parse_states[2].transitions[1].next_state');
  });

  it('refuses a next table that does not exist', () => {
    const p = fixtureJson('simple_router.json');
    p.pipelines[0].tables[0].next_tables.set_nhop = 'nowhere';
    expect(refusal(p).path).to.equal('pipelines[0].tables[0].next_tables.set_nhop');
  });

  it('refuses an unsupported expression operator in a conditional', () => {
    const p = fixtureJson('simple_router.json');
    p.pipelines[0].conditionals[0].expression.value.right.value.op = '**';
    expect(refusal(p).path).to.equal('pipelines[0].conditionals[0].expression.value.right.value.op');
  });

  it('refuses an unknown checksum algorithm', () => {
    const p = fixtureJson('simple_router.json');
    p.calculations[0].algo = 'md5';
    expect(refusal(p).path).to.equal('calculations[0].algo');
  });

  it('refuses a runtime_data index past the action parameters', () => {
    const p = fixtureJson('simple_router.json');
    p.actions[0].primitives[0].parameters[1].value = 3;
    expect(refusal(p).path).to.equal('actions[0].primitives[0].parameters[1].value');
  });

  it('refuses schema violations with their path', () => {
    const p = fixtureJson('l2_switch.json');
    p.header_types[1].fields[0][1] = 'wide';
    expect(refusal(p).path).to.match(/^header_types\[1\]\.fields\[0\]/);
    const q = fixtureJson('l2_switch.json');
    delete q.pipelines[0].tables[1].key;
    expect(refusal(q).path).to.equal('pipelines[0].tables[1].key');
  });

  it('refuses a header that is not whole bytes', () => {
    const p = fixtureJson('simple_router.json');
    p.header_types[2].fields[0][1] = 5;
    expect(refusal(p).path).to.equal('header_types[2].fields');
  });

  it('refuses an indirect table without its action profile, and an unknown table type', () => {
    const p = fixtureJson('simple_router.json');
    p.pipelines[0].tables[1].type = 'indirect';
    expect(refusal(p).path).to.equal('pipelines[0].tables[1].action_profile');
    const q = fixtureJson('simple_router.json');
    q.pipelines[0].tables[1].type = 'hashed';
    expect(refusal(q).path).to.equal('pipelines[0].tables[1].type');
  });

  it('refuses text that is not JSON', () => {
    expect(refusal('{"header_types": [').message).to.match(/^\(root\): not JSON/);
  });

  it('stops a parser that loops forever at the budget and drops the frame', () => {
    const p = syntheticProgram([{ match_type: 'exact', target: ['ethernet', 'dstAddr'] }], 'exact');
    p.parsers[0].parse_states = [
      {
        name: 'start',
        id: 0,
        parser_ops: [],
        transition_key: [],
        transitions: [{ type: 'default', value: null, mask: null, next_state: 'again' }],
      },
      {
        name: 'again',
        id: 1,
        parser_ops: [],
        transition_key: [],
        transitions: [{ type: 'default', value: null, mask: null, next_state: 'start' }],
      },
    ];
    const e = P4Engine.load(p);
    const r = e.process(
      Buffer.concat([ethernet('00:00:00:00:00:01', '00:00:00:00:00:02', 0x88b5), Buffer.alloc(46)]),
      1,
    );
    expect(r.dropped).to.equal(true);
    expect(r.reason).to.equal('parser-budget');
    expect(e.stats.budgetDrops).to.equal(1);
    expect(MAX_PARSE_STEPS).to.be.lessThan(1000);
  });

  it('refuses sections it would otherwise ignore (header unions, extern instances) and other format versions', () => {
    const p = fixtureJson('simple_router.json');
    p.header_unions = [{ name: 'u', id: 0, union_type: 'ut', header_ids: [1, 2] }];
    expect(refusal(p).message).to.match(/^header_unions .*unsupported section/);
    const q = fixtureJson('simple_router.json');
    q.extern_instances = [{ name: 'x', id: 0, type: 'Fp8', attribute_values: [] }];
    expect(refusal(q).path).to.equal('extern_instances');
    const r = fixtureJson('simple_router.json');
    r.__meta__.version = [3, 0];
    expect(refusal(r).path).to.equal('__meta__.version');
    const s = fixtureJson('simple_router.json');
    s.actions[1].id = 0;
    expect(refusal(s).path).to.equal('actions[1].id');
    const ok = fixtureJson('simple_router.json');
    ok.errors = [['NoError', 0]];
    ok.field_aliases = [];
    ok.header_unions = [];
    expect(() => P4Engine.load(ok)).to.not.throw();
  });

  it('refuses an expression nested absurdly deep instead of overflowing the stack', () => {
    const p = fixtureJson('simple_router.json');
    let e: any = { type: 'field', value: ['ipv4', 'ttl'] };
    for (let i = 0; i < 100000; i++) e = { type: 'expression', value: { op: 'not', left: null, right: e } };
    p.pipelines[0].conditionals[0].expression = e;
    expect(refusal(p).message).to.match(/^pipelines\[0\]\.conditionals\[0\]\.expression.*nested deeper/);
  });
});
