// Parse value sets (issue item 3): a set has a size limit (its declared
// max_size, else MAX_VSET_DEFAULT; never above MAX_VSET_SIZE), a guest's
// values count in the guest budget, and a frame's lookup does not grow with
// the set: a parser that tests a 20,000-value set at each of its 64 steps
// costs about what it costs with a 10-value set.

import { expect } from 'chai';
import { P4Engine } from '../../../lib/p4/engine/engine';
import { runCommand } from '../../../lib/p4/engine/commands';
import { MAX_VSET_DEFAULT, MAX_VSET_SIZE } from '../../../lib/p4/compile/vsets';
import { P4_GUEST_MAX_TABLE_ENTRIES } from '../../../lib/p4/device/devcmd';
import { ethernet, syntheticProgram } from '../../support/p4';
import { guestControl } from '../guest';

/**
 * start extracts ethernet; `scan` tests etherType against the set (exact),
 * then against the set under mask 0xff00, else loops to itself: a frame
 * whose etherType is in neither runs the parser's 64 steps, each testing
 * the set twice, and is dropped at the parser's budget.
 */
function vsetProgram(maxSize?: number, width = 16): any {
  const p = syntheticProgram([{ match_type: 'exact', target: ['ethernet', 'etherType'] }], 'exact');
  p.parse_vsets = [
    { name: 'vs', id: 0, compressed_bitwidth: width, ...(maxSize === undefined ? {} : { max_size: maxSize }) },
  ];
  const start = p.parsers[0].parse_states[0];
  start.transitions = [{ type: 'default', value: null, mask: null, next_state: 'scan' }];
  p.parsers[0].parse_states.push({
    name: 'scan',
    id: 1,
    parser_ops: [],
    transition_key: [{ type: 'field', value: ['ethernet', 'etherType'] }],
    transitions: [
      { type: 'parse_vset', value: 'vs', mask: null, next_state: null },
      { type: 'parse_vset', value: 'vs', mask: '0xff00', next_state: null },
      { type: 'default', value: null, mask: null, next_state: 'scan' },
    ],
  });
  return p;
}

const frame = (type: number) =>
  Buffer.concat([ethernet('02:00:00:00:00:02', '02:00:00:00:00:01', type), Buffer.alloc(46)]);
const MISS = frame(0x0800);

/** `n` distinct 16-bit values none of which matches 0x0800, exactly or under 0xff00. */
function values(n: number): number[] {
  const out: number[] = [];
  for (let v = 0; out.length < n && v < 0x10000; v++) if (v >> 8 !== 0x08) out.push(v);
  return out;
}

function add(e: P4Engine, vs: number[]): void {
  for (const v of vs) {
    const r = runCommand(e, `parse_vset_add vs ${v}`);
    if (!r.ok) throw new Error(`parse_vset_add vs ${v}: ${r.error}`);
  }
}

/** Median ms per frame over `batches` batches of `per` frames (after a warm-up). */
function perFrameMs(e: P4Engine, f: Buffer, batches = 15, per = 40): number {
  for (let i = 0; i < 200; i++) e.processReused(f);
  const ms: number[] = [];
  for (let b = 0; b < batches; b++) {
    const t0 = process.hrtime.bigint();
    for (let i = 0; i < per; i++) e.processReused(f);
    ms.push(Number(process.hrtime.bigint() - t0) / 1e6 / per);
  }
  ms.sort((a, c) => a - c);
  return ms[ms.length >> 1]!;
}

describe('p4: parse value sets', () => {
  it('a 20,000-value set costs a frame about what a 10-value set does (64 parser steps, two lookups each)', () => {
    const small = P4Engine.load(vsetProgram(20000));
    const large = P4Engine.load(vsetProgram(20000));
    add(small, values(10));
    add(large, values(20000));
    // both drop the frame at the parser's budget: every step missed the set twice
    expect(small.process(MISS).reason).to.equal('parser-budget');
    expect(large.process(MISS).reason).to.equal('parser-budget');
    const s = perFrameMs(small, MISS);
    const l = perFrameMs(large, MISS);
    console.log(
      `      value set, 64 parser steps x 2 lookups: 10 values ${(s * 1000).toFixed(1)} us/frame, 20,000 values ${(l * 1000).toFixed(1)} us/frame`,
    );
    expect(l, `20,000 values: ${l} ms per frame against ${s} ms with 10`).to.be.below(s * 4 + 0.02);
  });

  it('matches as before: a value in the set, and a value under the transition mask', () => {
    const e = P4Engine.load(vsetProgram(16));
    add(e, [0x86dd, 0x0900]);
    expect(e.process(frame(0x86dd)).dropped, 'exact member').to.equal(false);
    expect(e.process(frame(0x09ab)).dropped, '0x09ab & 0xff00 = 0x0900 & 0xff00').to.equal(false);
    expect(e.process(frame(0x87dd)).reason).to.equal('parser-budget');
    expect(e.process(frame(0x0a00)).reason).to.equal('parser-budget');
    // an added value matches from the next frame on (the lookups see adds)
    add(e, [0x0a00]);
    expect(e.process(frame(0x0a00)).dropped).to.equal(false);
    // a duplicate is taken once (it neither fails nor takes room)
    expect(runCommand(e, 'parse_vset_add vs 0x0a00').ok).to.equal(true);
  });

  it('holds at most the declared max_size; without one MAX_VSET_DEFAULT; the add past it is refused by name', () => {
    const e = P4Engine.load(vsetProgram(100));
    add(e, values(100));
    const r = runCommand(e, `parse_vset_add vs ${values(101)[100]}`);
    expect(r.ok).to.equal(false);
    expect(!r.ok && r.error).to.match(/parse value set vs is full \(100\)/);
    const d = P4Engine.load(vsetProgram(undefined));
    add(d, values(MAX_VSET_DEFAULT));
    expect(runCommand(d, `parse_vset_add vs ${values(MAX_VSET_DEFAULT + 1)[MAX_VSET_DEFAULT]}`).ok).to.equal(false);
  });

  it('refuses at load a max_size above MAX_VSET_SIZE, a negative one, and two sets of one name, with their paths', () => {
    expect(() => P4Engine.load(vsetProgram(MAX_VSET_SIZE + 1))).to.throw(/parse_vsets\[0\]\.max_size/);
    expect(() => P4Engine.load(vsetProgram(-1))).to.throw(/parse_vsets\[0\]\.max_size/);
    const p = vsetProgram(10);
    p.parse_vsets.push({ name: 'vs', id: 1, compressed_bitwidth: 16 });
    expect(() => P4Engine.load(p)).to.throw(/parse_vsets\[1\]\.name/);
  });

  it('a set no transition names can still be added to (and a value wider than the set is refused)', () => {
    const p = vsetProgram(10);
    p.parse_vsets.push({ name: 'spare', id: 1, compressed_bitwidth: 8 });
    const e = P4Engine.load(p);
    expect(runCommand(e, 'parse_vset_add spare 0xff').ok).to.equal(true);
    expect(runCommand(e, 'parse_vset_add spare 0x100').ok).to.equal(false);
  });

  it('a guest: a program whose sets may hold more than the guest budget is refused at P4_LOAD; adds over the budget are refused', () => {
    const over = guestControl('program');
    const big = vsetProgram(P4_GUEST_MAX_TABLE_ENTRIES); // plus the table's 64 entries: over the budget
    const r = over.load(big);
    expect(r.status).to.equal(14);
    expect(r.text).to.match(/parse value sets|entries in all/);
    const g = guestControl('program');
    expect(g.load(vsetProgram(2000)).status).to.equal(0);
    let longest = 0;
    for (const v of values(2000)) {
      const t0 = process.hrtime.bigint();
      const c = g.command(`parse_vset_add vs ${v}`);
      longest = Math.max(longest, Number(process.hrtime.bigint() - t0) / 1e6);
      expect(c.status, `value ${v}`).to.equal(0);
    }
    const full = g.command(`parse_vset_add vs ${values(2001)[2000]}`);
    expect(full.status).to.equal(14);
    expect(full.out).to.match(/full/);
    console.log(`      guest parse_vset_add: 2000 values, the longest command ${longest.toFixed(3)} ms`);
  });
});
