// What a frame may cost (lib/p4/compile/cost.ts): a program whose frames would hold
// the loop for long is refused at load, by an operator or a guest, with the
// JSON path of its heaviest part; the heaviest programs still under the
// limit run a frame in a few ms; the fixtures are far below it. And what a
// guest's load may build (P4_GUEST_LIMITS in lib/p4/device/devcmd.ts).

import { expect } from 'chai';
import { P4Engine } from '../../../lib/p4/engine/engine';
import { MAX_FRAME_COST } from '../../../lib/p4/compile/cost';
import { P4LoadError } from '../../../lib/p4/program/load';
import { ethernet, fixtureText, syntheticProgram } from '../../support/p4';
import { guestControl } from '../guest';
import { P4_GUEST_LIMITS, P4_MAX_PROGRAM_BYTES } from '../../../lib/p4/device/devcmd';

const field = (h: string, n: string) => ({ type: 'field', value: [h, n] });
const expr = (op: string, left: unknown, right: unknown) => ({ type: 'expression', value: { op, left, right } });
const FRAME = Buffer.concat([ethernet('02:00:00:00:00:02', '02:00:00:00:00:01', 0x0800), Buffer.alloc(46)]);

/** `tables` tables in a chain, each running an action of `prims` products of two 48-bit fields as its const default. */
function chain(tables: number, prims: number): any {
  const p = syntheticProgram([], 'exact');
  p.actions.push({
    name: 'heavy',
    id: 9,
    runtime_data: [],
    primitives: Array.from({ length: prims }, () => ({
      op: 'modify_field',
      parameters: [field('ethernet', 'srcAddr'), expr('*', field('ethernet', 'srcAddr'), field('ethernet', 'dstAddr'))],
    })),
  });
  p.pipelines[0].tables = Array.from({ length: tables }, (_, i) => {
    const next = i + 1 < tables ? `t${i + 1}` : null;
    return {
      name: `t${i}`,
      id: i,
      match_type: 'exact',
      type: 'simple',
      max_size: 0,
      key: [],
      actions: ['heavy'],
      next_tables: { heavy: next },
      base_default_next: next,
      default_entry: { action_id: 9, action_const: true, action_data: [], action_entry_const: true },
    };
  });
  p.pipelines[0].init_table = 't0';
  return p;
}

/** A parser state that loops to itself (64 steps a frame), with `ops` products. */
function parserLoop(ops: number): any {
  const p = syntheticProgram([{ match_type: 'exact', target: ['ethernet', 'etherType'] }], 'exact');
  p.parsers[0].parse_states[0].transitions = [{ type: 'default', value: null, mask: null, next_state: 'loop' }];
  p.parsers[0].parse_states.push({
    name: 'loop',
    id: 1,
    parser_ops: Array.from({ length: ops }, () => ({
      op: 'set',
      parameters: [field('ethernet', 'srcAddr'), expr('*', field('ethernet', 'srcAddr'), field('ethernet', 'dstAddr'))],
    })),
    transition_key: [],
    transitions: [{ type: 'default', value: null, mask: null, next_state: 'loop' }],
  });
  return p;
}

function msPerFrame(e: P4Engine): number {
  for (let i = 0; i < 3; i++) e.processReused(FRAME);
  const ms: number[] = [];
  for (let i = 0; i < 7; i++) {
    const t0 = process.hrtime.bigint();
    e.processReused(FRAME);
    ms.push(Number(process.hrtime.bigint() - t0) / 1e6);
  }
  return ms.sort((a, b) => a - b)[3]!;
}

/** The largest n below 4096 (doubling, then halving the gap) for which make(n) loads. */
function largest(make: (n: number) => unknown): { n: number; engine: P4Engine } {
  const load = (n: number): P4Engine | null => {
    try {
      return P4Engine.load(make(n));
    } catch (e) {
      if (e instanceof P4LoadError) return null;
      throw e;
    }
  };
  let lo = 1;
  let hi = 2;
  while (hi < 4096 && load(hi)) [lo, hi] = [hi, hi * 2];
  while (hi - lo > 1) {
    const mid = (lo + hi) >> 1;
    if (load(mid)) lo = mid;
    else hi = mid;
  }
  return { n: lo, engine: load(lo)! };
}

describe('p4: what a frame may cost', () => {
  it('refuses a 1,500-table program whose every table runs a 200-primitive action (29-49 ms a frame before), naming its pipeline', () => {
    const text = JSON.stringify(chain(1500, 200));
    let err: P4LoadError | undefined;
    try {
      P4Engine.load(text);
    } catch (e) {
      if (!(e instanceof P4LoadError)) throw e;
      err = e;
    }
    expect(err, 'refused').to.not.equal(undefined);
    expect(err!.path).to.equal('pipelines[0]');
    expect(err!.message).to.match(/a frame could cost about \d+ operations/);
    console.log(`      ${(text.length / 1024).toFixed(0)} KiB program refused: ${err!.message}`);
  });

  it('P4_LOAD refuses a heavy program a guest could send (250 tables running an 800-primitive action: 200,000 primitives a frame)', () => {
    const text = JSON.stringify(chain(250, 800));
    expect(text.length).to.be.at.most(P4_MAX_PROGRAM_BYTES);
    const r = guestControl('program').load(text);
    expect(r.status).to.equal(14);
    expect(r.text).to.match(/^pipelines\[0\]: a frame could cost/);
  });

  it('P4_LOAD refuses a program past the guest structure limits (what a load builds), each by name', () => {
    const over: [string, (p: any) => void][] = [
      [
        'headers',
        (p) => {
          for (let i = 0; i < P4_GUEST_LIMITS.headers; i++)
            p.headers.push({ name: `m${i}`, id: 100 + i, header_type: 'ethernet_t', metadata: true });
        },
      ],
      [
        'fields',
        (p) => {
          p.header_types.push({
            name: 'wide_t',
            id: 9,
            fields: Array.from({ length: P4_GUEST_LIMITS.fields }, (_, i) => [`f${i}`, 1]),
          });
          p.headers.push({ name: 'wide', id: 9, header_type: 'wide_t', metadata: true });
        },
      ],
      [
        'tables, conditionals and action calls',
        (p) => {
          p.pipelines[1].conditionals = Array.from({ length: P4_GUEST_LIMITS.nodes }, (_, i) => ({
            name: `c${i}`,
            id: i,
            expression: { type: 'bool', value: true },
            true_next: null,
            false_next: null,
          }));
        },
      ],
      [
        'states',
        (p) => {
          for (let i = 0; i < P4_GUEST_LIMITS.states; i++)
            p.parsers[0].parse_states.push({
              name: `s${i}`,
              id: 10 + i,
              parser_ops: [],
              transition_key: [],
              transitions: [],
            });
        },
      ],
      [
        'primitives and parser operations',
        (p) => {
          p.actions[0].primitives = Array.from({ length: P4_GUEST_LIMITS.primitives + 1 }, () => ({
            op: 'no_op',
            parameters: [],
          }));
        },
      ],
    ];
    for (const [what, change] of over) {
      const p = syntheticProgram([{ match_type: 'exact', target: ['ethernet', 'etherType'] }], 'exact');
      change(p);
      const r = guestControl('program').load(p);
      expect(r.status, what).to.equal(14);
      expect(r.text, what).to.include(`${what}: a guest's program may have at most`);
      // the same program is an operator's to load
      expect(() => P4Engine.load(p), what).to.not.throw();
    }
  });

  it('the heaviest programs under the limit run a frame in a few ms (a chain of tables, a looping parser)', function () {
    this.timeout(60000);
    for (const [what, make] of [
      ['tables x 200 products', (n: number) => chain(n, 200)],
      ['looping parser state', parserLoop],
    ] as const) {
      const { n, engine } = largest(make);
      expect(engine.frameCost).to.be.at.most(MAX_FRAME_COST);
      const ms = msPerFrame(engine);
      console.log(`      ${what}: ${n} load (cost ${engine.frameCost}), ${ms.toFixed(2)} ms a frame; ${n + 1} refused`);
      expect(ms, what).to.be.below(20);
    }
  });

  it('the fixtures cost well under 1% of the limit', () => {
    for (const f of [
      'simple_router.json',
      'l2_switch.json',
      'rdma_fp8.json',
      'exact_match_1.json',
      'LPM_match_1.json',
      'ternary_match_1.json',
      'parser_deparser_1.json',
    ]) {
      const e = P4Engine.load(fixtureText(f));
      expect(e.frameCost, f)
        .to.be.above(0)
        .and.below(MAX_FRAME_COST / 100);
    }
  });
});
