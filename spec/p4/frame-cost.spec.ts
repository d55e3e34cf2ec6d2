// What a frame may cost (lib/p4/cost.ts): a program whose frames would hold
// the loop for long is refused at load, by an operator or a guest, with the
// JSON path of its heaviest part; the heaviest programs still under the
// limit run a frame in a few ms; the fixtures are far below it.

import { expect } from 'chai';
import { P4Engine } from '../../lib/p4/compile';
import { MAX_FRAME_COST } from '../../lib/p4/cost';
import { P4LoadError } from '../../lib/p4/load';
import { ethernet, fixtureText, syntheticProgram } from './helpers';
import { guestControl } from './guest';

const field = (h: string, n: string) => ({ type: 'field', value: [h, n] });
const expr = (op: string, left: unknown, right: unknown) => ({ type: 'expression', value: { op, left, right } });
const FRAME = Buffer.concat([ethernet('02:00:00:00:00:02', '02:00:00:00:00:01', 0x0800), Buffer.alloc(46)]);

/** `tables` tables in a chain, each running an action of `prims` products of two 48-bit fields as its const default. */
function chain(tables: number, prims: number): any {
  const p = syntheticProgram([], 'exact');
  p.actions.push({ name: 'heavy', id: 9, runtime_data: [], primitives: Array.from({ length: prims }, () => ({ op: 'modify_field', parameters: [field('ethernet', 'srcAddr'), expr('*', field('ethernet', 'srcAddr'), field('ethernet', 'dstAddr'))] })) });
  p.pipelines[0].tables = Array.from({ length: tables }, (_, i) => {
    const next = i + 1 < tables ? `t${i + 1}` : null;
    return { name: `t${i}`, id: i, match_type: 'exact', type: 'simple', max_size: 0, key: [], actions: ['heavy'], next_tables: { heavy: next }, base_default_next: next, default_entry: { action_id: 9, action_const: true, action_data: [], action_entry_const: true } };
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
    parser_ops: Array.from({ length: ops }, () => ({ op: 'set', parameters: [field('ethernet', 'srcAddr'), expr('*', field('ethernet', 'srcAddr'), field('ethernet', 'dstAddr'))] })),
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
  it('refuses a 1,500-table program whose every table runs a 200-primitive action (49 ms a frame before), naming its pipeline', () => {
    const p = chain(1500, 200);
    const text = JSON.stringify(p);
    expect(text.length).to.be.below(1 << 20); // a guest may send it
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
    const g = guestControl('program');
    const r = g.load(text);
    expect(r.status).to.equal(14);
    expect(r.text).to.match(/^pipelines\[0\]: a frame could cost/);
    console.log(`      ${(text.length / 1024).toFixed(0)} KiB program refused: ${err!.message}`);
  });

  it('the heaviest programs under the limit run a frame in a few ms (a chain of tables, a looping parser)', function () {
    this.timeout(60000);
    for (const [what, make] of [['tables x 200 products', (n: number) => chain(n, 200)], ['looping parser state', parserLoop]] as const) {
      const { n, engine } = largest(make);
      expect(engine.frameCost).to.be.at.most(MAX_FRAME_COST);
      const ms = msPerFrame(engine);
      console.log(`      ${what}: ${n} load (cost ${engine.frameCost}), ${ms.toFixed(2)} ms a frame; ${n + 1} refused`);
      expect(ms, what).to.be.below(20);
    }
  });

  it('the fixtures cost well under 1% of the limit', () => {
    for (const f of ['simple_router.json', 'l2_switch.json', 'rdma_fp8.json', 'exact_match_1.json', 'LPM_match_1.json', 'ternary_match_1.json', 'parser_deparser_1.json']) {
      const e = P4Engine.load(fixtureText(f));
      expect(e.frameCost, f).to.be.above(0).and.below(MAX_FRAME_COST / 100);
    }
  });
});
