// The generated program function against the closures (see
// ./fixtures.spec.ts) on the synthetic program that uses the whole subset
// (./subset-program.ts): random tables and frames alike, bounded loops for
// cyclic parsers and control graphs; then the subset's refusals (each one
// still runs, on the closures) and the source's hygiene: no name or string
// of the program in it.

import { expect } from 'chai';
import { P4Engine } from '../../../lib/p4/engine/engine';
import { runCommand } from '../../../lib/p4/engine/commands';
import { snapshot, syntheticProgram } from '../../support/p4';
import { xorshift } from '../../support/rng';
import { anyFrame, both, compare, pair } from './compare';
import { fillSubsetTables, subsetFrame, subsetProgram } from './subset-program';

describe('p4: the generated program function against the closures', () => {
  describe('a program using the whole subset', () => {
    it('8 rounds of random tables x 700 frames alike (tags, checksums with payload and conditions, hit/miss, counters, ternary, exit, header add/remove/copy, digests)', () => {
      const r = xorshift(0x51c);
      let countedRounds = 0;
      const kinds = new Set<string>();
      for (let round = 0; round < 8; round++) {
        const p = pair(subsetProgram());
        // ethernet.dstAddr, opt.cookie and extra.x are read by nothing but the deparse: never extracted
        expect(p.gen.codegenSource!.match(/let [^\n]*\bm\d+ = false/)).to.not.equal(null);
        fillSubsetTables(p, r);
        for (let i = 0; i < 700; i++) {
          const res = compare(p, anyFrame(r, subsetFrame), r() % 1024, `round ${round} frame ${i}`);
          kinds.add(res.dropped ? `drop:${res.reason}` : `out:${res.frame!.length > 0}`);
          if (res.digests.length > 0) kinds.add('digest');
          if (res.multicastGroup !== 0) kinds.add('mgid');
          if (res.checksumError) kinds.add('checksumError');
          if (res.parserError !== 0) kinds.add(`parserError:${res.parserError}`);
        }
        // the counters of t_multi moved alike
        const ca = [...p.gen.tables.get('t_multi')!.entries.values()].map((e) => [e.packets, e.bytes]);
        const cb = [...p.ref.tables.get('t_multi')!.entries.values()].map((e) => [e.packets, e.bytes]);
        expect(ca).to.deep.equal(cb);
        if (ca.some(([n]) => n! > 0)) countedRounds++;
      }
      for (const k of ['drop:program', 'out:true', 'digest', 'mgid', 'checksumError', 'parserError:1', 'parserError:4'])
        expect([...kinds]).to.include(k);
      expect(countedRounds).to.be.greaterThan(0);
    });

    it('a parser that loops is written as a bounded loop and stops at the budget alike', () => {
      const prog = syntheticProgram([{ match_type: 'exact', target: ['ethernet', 'etherType'] }], 'exact');
      prog.parsers[0].parse_states = [
        {
          name: 'start',
          id: 0,
          parser_ops: [{ op: 'extract', parameters: [{ type: 'regular', value: 'ethernet' }] }],
          transition_key: [{ type: 'field', value: ['ethernet', 'etherType'] }],
          transitions: [
            { type: 'hexstr', value: '0x0800', mask: null, next_state: 'again' },
            { type: 'default', value: null, mask: null, next_state: null },
          ],
        },
        {
          name: 'again',
          id: 1,
          parser_ops: [],
          transition_key: [],
          transitions: [{ type: 'default', value: null, mask: null, next_state: 'start' }],
        },
      ];
      const p = pair(prog);
      expect(p.gen.codegenSource).to.match(/steps < 64/);
      const big = Buffer.alloc(14 * 70);
      for (let i = 0; i < 70; i++) big.writeUInt16BE(0x0800, i * 14 + 12);
      expect(compare(p, big, 0, 'looping').reason).to.equal('parser-budget');
      expect(compare(p, big.subarray(0, 14 * 5 + 3), 0, 'short loop').parserError).to.equal(1);
      const r = xorshift(5);
      for (let i = 0; i < 300; i++) compare(p, anyFrame(r), 0, `frame ${i}`);
    });

    it('a control graph with a cycle is written as a bounded loop and stops alike', () => {
      const prog = syntheticProgram([{ match_type: 'exact', target: ['ethernet', 'etherType'] }], 'exact', {
        actions: [
          {
            name: 'bump',
            id: 1,
            runtime_data: [],
            primitives: [
              {
                op: 'add_to_field',
                parameters: [
                  { type: 'field', value: ['ethernet', 'etherType'] },
                  { type: 'hexstr', value: '0x1' },
                ],
              },
            ],
          },
        ],
      });
      const t = prog.pipelines[0].tables[0];
      t.next_tables = { set_src: 't', bump: 't' }; // back to itself
      t.base_default_next = 't';
      const p = pair(prog);
      expect(p.gen.codegenSource).to.match(/steps < 2/);
      both(p, 'table_set_default t bump');
      const r = xorshift(6);
      for (let i = 0; i < 300; i++) compare(p, anyFrame(r), 0, `frame ${i}`);
    });
  });

  describe('the subset', () => {
    /** A change to the synthetic program the generator must refuse; the engine still runs it. */
    const refusals: [string, RegExp, (prog: any) => void][] = [
      [
        'a 64-bit field',
        /over 48 bits/,
        (prog) =>
          prog.header_types.push({ name: 'w_t', id: 9, fields: [['x', 64]] }) &&
          prog.headers.push({ name: 'w', id: 9, header_type: 'w_t', metadata: true }),
      ],
      [
        'a header stack',
        /stacks/,
        (prog) => {
          prog.headers.push({ name: 'e2', id: 8, header_type: 'ethernet_t', metadata: false });
          prog.header_stacks = [{ name: 'st', id: 0, header_type: 'ethernet_t', size: 1, header_ids: [8] }];
        },
      ],
      [
        'a lookahead transition key',
        /transition key other than fields/,
        (prog) => {
          prog.parsers[0].parse_states[0].transition_key = [{ type: 'lookahead', value: [0, 8] }];
          prog.parsers[0].parse_states[0].transitions.unshift({
            type: 'hexstr',
            value: '0x01',
            mask: null,
            next_state: null,
          });
        },
      ],
      [
        'a parse value set',
        /transition outside the subset/,
        (prog) => {
          prog.parse_vsets = [{ name: 'vs', id: 0, compressed_bitwidth: 16 }];
          prog.parsers[0].parse_states[0].transition_key = [{ type: 'field', value: ['ethernet', 'etherType'] }];
          prog.parsers[0].parse_states[0].transitions.unshift({
            type: 'parse_vset',
            value: 'vs',
            mask: null,
            next_state: null,
          });
        },
      ],
      [
        'a register write',
        /primitive outside the subset/,
        (prog) => {
          prog.register_arrays = [{ name: 'reg', id: 0, size: 4, bitwidth: 16 }];
          prog.actions[0].primitives.push({
            op: 'register_write',
            parameters: [
              { type: 'register_array', value: 'reg' },
              { type: 'hexstr', value: '0x1' },
              { type: 'field', value: ['ethernet', 'etherType'] },
            ],
          });
        },
      ],
      [
        'a counter',
        /primitive outside the subset/,
        (prog) => {
          prog.counter_arrays = [{ name: 'cnt', id: 0, size: 4, is_direct: false }];
          prog.actions[0].primitives.push({
            op: 'count',
            parameters: [
              { type: 'counter_array', value: 'cnt' },
              { type: 'hexstr', value: '0x1' },
            ],
          });
        },
      ],
      [
        'a multiplication (the bigint path)',
        /operator off the number path/,
        (prog) => {
          prog.actions[0].primitives.push({
            op: 'modify_field',
            parameters: [
              { type: 'field', value: ['ethernet', 'etherType'] },
              {
                type: 'expression',
                value: {
                  op: '*',
                  left: { type: 'field', value: ['ethernet', 'etherType'] },
                  right: { type: 'hexstr', value: '0x3' },
                },
              },
            ],
          });
        },
      ],
      [
        'a masked modify_field',
        /masked modify_field/,
        (prog) => {
          prog.actions[0].primitives.push({
            op: 'modify_field',
            parameters: [
              { type: 'field', value: ['ethernet', 'etherType'] },
              { type: 'hexstr', value: '0xffff' },
              { type: 'hexstr', value: '0x00f0' },
            ],
          });
        },
      ],
      [
        'a bit_and primitive',
        /primitive outside the subset/,
        (prog) => {
          prog.actions[0].primitives.push({
            op: 'bit_and',
            parameters: [
              { type: 'field', value: ['ethernet', 'etherType'] },
              { type: 'field', value: ['ethernet', 'etherType'] },
              { type: 'hexstr', value: '0xff' },
            ],
          });
        },
      ],
      [
        'a table on 96 bits of exact key (the bigint path)',
        /table off the number path/,
        (prog) => {
          prog.pipelines[0].tables[0].key.push({ match_type: 'exact', target: ['ethernet', 'srcAddr'], mask: null });
        },
      ],
    ];
    for (const [what, why, change] of refusals) {
      it(`refuses ${what} (${why.source}) and still runs it on the closures`, () => {
        const prog = syntheticProgram([{ match_type: 'exact', target: ['ethernet', 'dstAddr'] }], 'exact');
        change(prog);
        const e = P4Engine.load(prog);
        expect(e.generated).to.equal(false);
        expect(e.codegenSource).to.equal(undefined);
        expect(e.codegenRefused).to.match(why);
        const ref = P4Engine.load(prog, { codegen: false });
        for (const x of [e, ref]) expect(runCommand(x, 'table_set_default t set_src 0x0a0b0c0d0e0f').ok).to.equal(true);
        const r = xorshift(what.length);
        for (let i = 0; i < 100; i++) {
          const f = anyFrame(r);
          expect(snapshot(e.process(f, 1)), `${what} frame ${i}`).to.deep.equal(snapshot(ref.process(f, 1)));
        }
      });
    }

    it('codegen: false keeps the closures for a program in the subset', () => {
      const prog = syntheticProgram([{ match_type: 'exact', target: ['ethernet', 'dstAddr'] }], 'exact');
      expect(P4Engine.load(prog).generated).to.equal(true);
      const e = P4Engine.load(prog, { codegen: false });
      expect(e.generated).to.equal(false);
      expect(e.codegenRefused).to.equal(undefined);
    });

    it('no name or string of the program reaches the source (names that are code stay names)', () => {
      const prog = subsetProgram();
      // every name of the program (the standard_metadata fields the engine looks up aside) becomes code
      const evil = new Map<string, string>();
      const keep = new Set([
        'standard_metadata',
        ...prog.header_types[0].fields.map((x: [string, number]) => x[0]),
        'ingress',
        'egress',
      ]);
      const add = (n: string) => {
        if (!keep.has(n)) evil.set(n, `x'); globalThis.__p4pwned = 1; ('${n}` + '`${1}*/');
      };
      for (const t of prog.header_types) {
        add(t.name);
        if (t.name !== 'standard_metadata_t') for (const [n] of t.fields) add(n);
      }
      for (const list of [
        prog.headers,
        prog.parsers[0].parse_states,
        prog.actions,
        prog.pipelines[0].tables,
        prog.pipelines[1].tables,
        prog.pipelines[0].conditionals,
        prog.pipelines[0].action_calls,
        prog.calculations,
        prog.checksums,
        prog.learn_lists,
      ]) {
        for (const x of list) add(x.name);
      }
      for (const a of prog.actions) for (const d of a.runtime_data) add(d.name);
      const rename = (o: any, parentKey: string): any => {
        if (typeof o === 'string')
          return ['op', 'type', 'match_type', 'algo'].includes(parentKey) ? o : (evil.get(o) ?? o);
        if (Array.isArray(o)) return o.map((x) => rename(x, parentKey));
        if (o && typeof o === 'object') {
          const out: any = {};
          for (const [k, val] of Object.entries(o))
            out[parentKey === 'next_tables' ? (evil.get(k) ?? k) : k] = rename(val, k);
          return out;
        }
        return o;
      };
      const renamed = rename(prog, '');
      expect(renamed.headers[2].name).to.equal(evil.get('tag'));
      const p = pair(renamed);
      const src = p.gen.codegenSource!;
      for (const [plain, e] of evil) expect(src.includes(e), `the name ${plain}`).to.equal(false);
      expect(src).to.not.match(/__p4pwned|0x0800|0x8100|0x10000ffff/);
      fillSubsetTables(p, xorshift(78), evil);
      const r = xorshift(77);
      for (let i = 0; i < 300; i++) compare(p, anyFrame(r, subsetFrame), r() % 8, `frame ${i}`);
      expect((globalThis as any).__p4pwned).to.equal(undefined);
    });
  });
});
