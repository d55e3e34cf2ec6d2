// Names and operators that are also Object.prototype's keys (issue item 5):
// every lookup by a name from a program or a command is a Map (or an own
// property), so `valueOf` as an expression operator is refused at load with
// its JSON path instead of loading and throwing on every frame; the same
// keys as declared names (a header, a field, a table, an action, a parse
// state, a calculation, a next_tables key) load and run as any other name;
// and a frame that still throws is dropped and counted at the frame
// boundary, never thrown into the device.

import { expect } from 'chai';
import { P4Engine } from '../../../lib/p4/engine/engine';
import { P4LoadError } from '../../../lib/p4/program/load';
import { runCommand, runCommands } from '../../../lib/p4/engine/commands';
import { ethernet, fixtureText, ipv4, snapshot, syntheticProgram } from '../../support/p4';
import { xorshift } from '../../support/rng';
import { guestControl } from '../guest';

const KEYS = [
  'valueOf',
  'hasOwnProperty',
  '__proto__',
  'constructor',
  'toString',
  'isPrototypeOf',
  '__defineGetter__',
  'toLocaleString',
];

function refusal(program: unknown): P4LoadError {
  try {
    P4Engine.load(program);
  } catch (e) {
    if (e instanceof P4LoadError) return e;
    throw new Error(`not a P4LoadError: ${(e as Error).stack}`);
  }
  throw new Error('loaded');
}

const field = (h: string, n: string) => ({ type: 'field', value: [h, n] });
const hex = (v: string) => ({ type: 'hexstr', value: v });
const expr = (op: string, left: unknown, right: unknown) => ({ type: 'expression', value: { op, left, right } });

/** The synthetic program with a conditional in front of its table (where a condition goes). */
function withConditional(cond: unknown): any {
  const p = syntheticProgram([{ match_type: 'exact', target: ['ethernet', 'etherType'] }], 'exact');
  p.pipelines[0].conditionals = [{ name: 'c', id: 0, expression: cond, true_next: 't', false_next: null }];
  p.pipelines[0].init_table = 'c';
  return p;
}

/** Where an operator can be: each site with the JSON path the refusal must name. */
const OPERATOR_SITES: [string, (op: string) => any, string][] = [
  [
    'a conditional',
    (op) => withConditional(expr(op, field('ethernet', 'etherType'), hex('0x0800'))),
    'pipelines[0].conditionals[0].expression.value.op',
  ],
  [
    'a nested operand of a conditional',
    (op) => withConditional(expr('==', expr(op, field('ethernet', 'etherType'), hex('0x1')), hex('0x0800'))),
    'pipelines[0].conditionals[0].expression.value.left.value.op',
  ],
  [
    'an action primitive',
    (op) => {
      const p = syntheticProgram([{ match_type: 'exact', target: ['ethernet', 'etherType'] }], 'exact');
      p.actions[0].primitives.push({
        op: 'modify_field',
        parameters: [field('ethernet', 'etherType'), expr(op, field('ethernet', 'etherType'), hex('0x3'))],
      });
      return p;
    },
    'actions[0].primitives[1].parameters[1].value.op',
  ],
  [
    'a parser set',
    (op) => {
      const p = syntheticProgram([{ match_type: 'exact', target: ['ethernet', 'etherType'] }], 'exact');
      p.parsers[0].parse_states[0].parser_ops.push({
        op: 'set',
        parameters: [field('ethernet', 'etherType'), expr(op, field('ethernet', 'etherType'), hex('0x1'))],
      });
      return p;
    },
    'parsers[0].parse_states[0].parser_ops[1].parameters[1].value.op',
  ],
  [
    'a primitive name',
    (op) => {
      const p = syntheticProgram([{ match_type: 'exact', target: ['ethernet', 'etherType'] }], 'exact');
      p.actions[0].primitives.push({ op, parameters: [] });
      return p;
    },
    'actions[0].primitives[1].op',
  ],
  [
    'a parser operation',
    (op) => {
      const p = syntheticProgram([{ match_type: 'exact', target: ['ethernet', 'etherType'] }], 'exact');
      p.parsers[0].parse_states[0].parser_ops.push({ op, parameters: [] });
      return p;
    },
    'parsers[0].parse_states[0].parser_ops[1].op',
  ],
  [
    'a table match type',
    (op) => {
      const p = syntheticProgram([{ match_type: 'exact', target: ['ethernet', 'etherType'] }], 'exact');
      p.pipelines[0].tables[0].match_type = op;
      return p;
    },
    'pipelines[0].tables[0].match_type',
  ],
  [
    'a key match type',
    (op) => syntheticProgram([{ match_type: op, target: ['ethernet', 'etherType'] }], 'exact'),
    'pipelines[0].tables[0].key[0].match_type',
  ],
  ['an operand type', (op) => withConditional({ type: op, value: 1 }), 'pipelines[0].conditionals[0].expression.type'],
  [
    'a hash algorithm',
    (op) => {
      const p = syntheticProgram([{ match_type: 'exact', target: ['ethernet', 'etherType'] }], 'exact');
      p.calculations = [{ name: 'h', id: 0, algo: op, input: [field('ethernet', 'srcAddr')] }];
      return p;
    },
    'calculations[0].algo',
  ],
];

/** References to names the program never declared. */
const REFERENCE_SITES: [string, (n: string) => any, RegExp][] = [
  [
    'a field of no header',
    (n) => withConditional(expr('==', field(n, 'etherType'), hex('0x0800'))),
    /^pipelines\[0\]\.conditionals\[0\]\.expression\.value\.left\.value /,
  ],
  [
    'no field of a header',
    (n) => withConditional(expr('==', field('ethernet', n), hex('0x0800'))),
    /^pipelines\[0\]\.conditionals\[0\]\.expression\.value\.left\.value /,
  ],
  [
    'a table action',
    (n) => {
      const p = syntheticProgram([{ match_type: 'exact', target: ['ethernet', 'etherType'] }], 'exact');
      p.pipelines[0].tables[0].actions.push(n);
      return p;
    },
    /^pipelines\[0\]\.tables\[0\]\.actions\[1\] /,
  ],
  [
    'a next table',
    (n) => {
      const p = syntheticProgram([{ match_type: 'exact', target: ['ethernet', 'etherType'] }], 'exact');
      p.pipelines[0].tables[0].base_default_next = n;
      return p;
    },
    /^pipelines\[0\]\.tables\[0\]\.base_default_next /,
  ],
  [
    'a next state',
    (n) => {
      const p = syntheticProgram([{ match_type: 'exact', target: ['ethernet', 'etherType'] }], 'exact');
      p.parsers[0].parse_states[0].transitions[0].next_state = n;
      return p;
    },
    /^parsers\[0\]\.parse_states\[0\]\.transitions\[0\]\.next_state /,
  ],
  [
    'a counter',
    (n) => {
      const p = syntheticProgram([{ match_type: 'exact', target: ['ethernet', 'etherType'] }], 'exact');
      p.actions[0].primitives.push({ op: 'count', parameters: [{ type: 'counter_array', value: n }, hex('0x0')] });
      return p;
    },
    /^actions\[0\]\.primitives\[1\]\.parameters\[0\]\.value /,
  ],
  [
    'an extracted header',
    (n) => {
      const p = syntheticProgram([{ match_type: 'exact', target: ['ethernet', 'etherType'] }], 'exact');
      p.parsers[0].parse_states[0].parser_ops[0].parameters[0].value = n;
      return p;
    },
    /^parsers\[0\]\.parse_states\[0\]\.parser_ops\[0\]\.parameters\[0\]\.value /,
  ],
  [
    'a header type',
    (n) => {
      const p = syntheticProgram([{ match_type: 'exact', target: ['ethernet', 'etherType'] }], 'exact');
      p.headers[1].header_type = n;
      return p;
    },
    /^headers\[1\]\.header_type /,
  ],
  [
    'a next_tables key',
    (n) => {
      const p = syntheticProgram([{ match_type: 'exact', target: ['ethernet', 'etherType'] }], 'exact');
      p.pipelines[0].tables[0].next_tables = JSON.parse(`{"set_src": null, ${JSON.stringify(n)}: null}`);
      return p;
    },
    /^pipelines\[0\]\.tables\[0\]\.next_tables\./,
  ],
];

/** simple_router with one name of each kind renamed to `k` (text replace of the quoted names). */
function renamedRouter(k: string): { program: string; commands: string } {
  const names = ['ipv4_t', 'ipv4', 'ttl', 'set_nhop', 'ipv4_lpm', 'parse_ipv4', 'ipv4_checksum'];
  let program = fixtureText('simple_router.json');
  for (const n of names) program = program.split(JSON.stringify(n)).join(JSON.stringify(k));
  const commands = fixtureText('commands.txt')
    .replace(/\bipv4_lpm\b/g, k)
    .replace(/\bset_nhop\b/g, k);
  return { program, commands };
}

function routerFrames(n: number): Buffer[] {
  const r = xorshift(0xc0de);
  const dsts = ['10.0.0.10', '10.0.1.10', '10.0.2.1', '192.168.0.1'];
  const out: Buffer[] = [];
  for (let i = 0; i < n; i++) {
    const payload = Buffer.alloc(r() % 40, i);
    out.push(
      Buffer.concat([
        ethernet('00:aa:bb:00:00:00', '00:00:00:00:00:01', 0x0800),
        ipv4({
          src: '10.0.9.9',
          dst: dsts[r() % dsts.length]!,
          ttl: r() % 4,
          protocol: 17,
          payloadLength: payload.length,
          goodChecksum: r() % 5 !== 0,
        }),
        payload,
      ]),
    );
  }
  return out;
}

describe('p4: prototype keys as operators and names', () => {
  for (const [site, make, path] of OPERATOR_SITES) {
    it(`refuses each prototype key as ${site}, naming ${path}`, () => {
      for (const k of KEYS) {
        const e = refusal(make(k));
        expect(e.path, `${k} as ${site}: ${e.message}`).to.equal(path);
        expect(e.message).to.include(JSON.stringify(k));
      }
    });
  }

  for (const [site, make, path] of REFERENCE_SITES) {
    it(`refuses each prototype key naming what the program does not declare: ${site}`, () => {
      for (const k of KEYS) {
        const e = refusal(make(k));
        expect(e.message, k).to.match(path);
      }
    });
  }

  it('declared with those names (header type, header, field, action, table, parse state, calculation, next_tables key), simple_router runs as before', () => {
    const frames = routerFrames(200);
    for (const codegen of [true, false]) {
      const ref = P4Engine.load(fixtureText('simple_router.json'), { codegen });
      expect(runCommands(ref, fixtureText('commands.txt')).ok).to.equal(true);
      const want = frames.map((f) => snapshot(ref.process(f, 1)));
      for (const k of KEYS) {
        const r = renamedRouter(k);
        const e = P4Engine.load(r.program, { codegen });
        expect(e.tables.has(k), `${k}: a table of that name`).to.equal(true);
        const c = runCommands(e, r.commands);
        expect(c.ok, `${k}: commands ${JSON.stringify(c.results.at(-1))}`).to.equal(true);
        frames.forEach((f, i) =>
          expect(snapshot(e.process(f, 1)), `${k} frame ${i} (codegen ${codegen})`).to.deep.equal(want[i]),
        );
        expect(e.stats.faults, k).to.equal(0);
      }
    }
  });

  it('runtime commands naming prototype keys fail as unknown names, nothing throws', () => {
    const e = P4Engine.load(fixtureText('simple_router.json'));
    const forms = [
      'table_add K set_nhop 10.0.0.1/32 => 10.0.0.1 1',
      'table_add ipv4_lpm K 10.0.0.1/32 => 10.0.0.1 1',
      'table_set_default K _drop',
      'table_set_default ipv4_lpm K',
      'table_delete K 0',
      'table_clear K',
      'counter_read K 0',
      'counter_reset K',
      'register_read K 0',
      'register_write K 0 1',
      'register_reset K',
      'meter_set_rates K 0 1:1 1:1',
      'parse_vset_add K 1',
      'act_prof_create_member K _drop',
      'act_prof_create_group K',
      'act_prof_add_member_to_group K 0 0',
      'table_indirect_add K 1 => 0',
      'table_indirect_add_with_group K 1 => 0',
      'table_indirect_set_default K 0',
      'K',
      'K K K',
    ];
    for (const k of KEYS) {
      for (const form of forms) {
        const r = runCommand(e, form.replace(/\bK\b/g, k));
        expect(r.ok, `${form} with ${k}`).to.equal(false);
      }
    }
    // the guest's entry too: each refused as an error, the program untouched
    const g = guestControl('program', e);
    for (const k of KEYS) expect(g.command(`table_add ${k} ${k} ${k} => ${k}`).status).to.equal(14);
  });

  it('a frame that throws inside the program is dropped and counted at the frame boundary (a meter whose clock throws)', () => {
    const p = syntheticProgram([{ match_type: 'exact', target: ['ethernet', 'etherType'] }], 'exact', {
      meter_arrays: [{ name: 'm', id: 0, type: 'packets', rate_count: 2, size: 4, is_direct: false }],
      actions: [
        {
          name: 'meter',
          id: 1,
          runtime_data: [],
          primitives: [
            {
              op: 'execute_meter',
              parameters: [{ type: 'meter_array', value: 'm' }, hex('0x0'), field('ethernet', 'etherType')],
            },
          ],
        },
      ],
    });
    let broken = false;
    const e = P4Engine.load(p, {
      now: () => {
        if (broken) throw new Error('clock gone');
        return 0;
      },
    });
    expect(runCommand(e, 'table_set_default t meter').ok).to.equal(true);
    expect(runCommand(e, 'meter_set_rates m 0 1:1 1:1').ok).to.equal(true);
    const f = Buffer.concat([ethernet('02:00:00:00:00:02', '02:00:00:00:00:01', 0x0800), Buffer.alloc(46)]);
    expect(e.process(f).dropped).to.equal(false);
    broken = true;
    const a = e.process(f);
    const b = e.processReused(f);
    expect([a.dropped, a.reason, b.dropped, b.reason]).to.deep.equal([true, 'fault', true, 'fault']);
    expect(e.stats.faults).to.equal(2);
    broken = false;
    expect(e.processReused(f).dropped, 'the next frame runs again').to.equal(false);
  });
});
