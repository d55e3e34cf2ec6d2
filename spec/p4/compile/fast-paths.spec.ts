// The engine's fast paths against simple references: header extract/emit
// (byte windows, 48-bit number fields, bigint fields) against a bigint
// bit reader/writer on random layouts; table lookups on the number path
// (packed and int32 keys, one Map per prefix length, priority-sorted number
// operands) and on the bigint path, with overlapping prefixes, priorities,
// deletions and keys of 2^31 and above (./tables/lookups.spec.ts); the csum16 number path against the
// general bit-image path on random field values, with validity, constants
// and the payload; fields over 32 bits in actions.

import { expect } from 'chai';
import { EngineOptions, OutputMode, P4Engine } from '../../../lib/p4/engine/engine';
import { P4Result } from '../../../lib/p4/frame/result';
import { compileCsum16Num } from '../../../lib/p4/compile/csum16';
import { compileNum, compileValue, ExprContext, NO_ARGS } from '../../../lib/p4/compile/expr';
import { compileImageCalculation } from '../../../lib/p4/compile/calculations';
import { runCommands } from '../../../lib/p4/engine/commands';
import { FieldInfo } from '../../../lib/p4/program/layout';
import { fixtureText, ipv4Checksum, snapshot } from '../../support/p4';
import { add, layoutProgram, randomBig, refRead, refWrite, rng } from './layout-programs';

/** Two headers and actions that add, remove, copy and swap them, so headers change places and lengths. */
function moving(): any {
  // two headers; actions that add, remove, copy and swap them, so headers change places and lengths
  // h's windows: [a b] (written by mark), [c] (only by the checksum), [d] (never written)
  const p = layoutProgram(
    [
      ['a', 16],
      ['b', 8],
      ['c', 24],
      ['d', 24],
    ],
    [{ match_type: 'exact', target: ['h', 'b'] }],
    'exact',
    'a',
    {
      actions: [
        {
          name: 'add_g',
          id: 1,
          runtime_data: [],
          primitives: [
            { op: 'add_header', parameters: [{ type: 'header', value: 'g' }] },
            {
              op: 'modify_field',
              parameters: [
                { type: 'field', value: ['g', 'x'] },
                { type: 'hexstr', value: '0x1234' },
              ],
            },
          ],
        },
        {
          name: 'rm_g',
          id: 2,
          runtime_data: [],
          primitives: [{ op: 'remove_header', parameters: [{ type: 'header', value: 'g' }] }],
        },
        {
          name: 'copy',
          id: 3,
          runtime_data: [],
          primitives: [
            {
              op: 'copy_header',
              parameters: [
                { type: 'header', value: 'g2' },
                { type: 'header', value: 'g' },
              ],
            },
          ],
        },
        {
          name: 'rm_h',
          id: 4,
          runtime_data: [],
          primitives: [
            { op: 'remove_header', parameters: [{ type: 'header', value: 'h' }] },
            { op: 'add_header', parameters: [{ type: 'header', value: 'g2' }] },
          ],
        },
        // the same total length with h moved behind g2
        {
          name: 'swap',
          id: 5,
          runtime_data: [],
          primitives: [
            { op: 'remove_header', parameters: [{ type: 'header', value: 'g' }] },
            { op: 'add_header', parameters: [{ type: 'header', value: 'g2' }] },
          ],
        },
        // g zeroed in place through a header copy (no field named)
        {
          name: 'zero_g',
          id: 6,
          runtime_data: [],
          primitives: [
            { op: 'add_header', parameters: [{ type: 'header', value: 'g2' }] },
            {
              op: 'copy_header',
              parameters: [
                { type: 'header', value: 'g' },
                { type: 'header', value: 'g2' },
              ],
            },
            { op: 'remove_header', parameters: [{ type: 'header', value: 'g2' }] },
          ],
        },
      ],
      // h.c is written only by a checksum over h.a and h.b (its own byte window)
      calculations: [
        {
          name: 'ck',
          id: 0,
          algo: 'csum16',
          input: [
            { type: 'field', value: ['h', 'a'] },
            { type: 'field', value: ['h', 'b'] },
          ],
        },
      ],
    },
  );
  p.checksums = [{ name: 'h.c', id: 0, target: ['h', 'c'], type: 'generic', calculation: 'ck', if_cond: null }];
  p.header_types.push({
    name: 'g_t',
    id: 2,
    fields: [
      ['x', 16],
      ['y', 32],
      ['z', 16],
    ],
  });
  p.headers.push(
    { name: 'g', id: 2, header_type: 'g_t', metadata: false },
    { name: 'g2', id: 3, header_type: 'g_t', metadata: false },
  );
  const st0 = p.parsers[0].parse_states[0];
  st0.transition_key = [{ type: 'field', value: ['h', 'b'] }];
  st0.transitions = [
    { type: 'hexstr', value: '0x01', mask: '0x0f', next_state: 'g' },
    { type: 'default', value: null, mask: null, next_state: null },
  ];
  p.parsers[0].parse_states.push({
    name: 'g',
    id: 1,
    parser_ops: [{ op: 'extract', parameters: [{ type: 'regular', value: 'g' }] }],
    transition_key: [],
    transitions: [{ type: 'default', value: null, mask: null, next_state: null }],
  });
  p.deparsers[0].order = ['g2', 'h', 'g'];
  return p;
}

/** Loads a program for the process()/emit comparisons, with its commands or moving()'s entries. */
function loadCompared(name: string, prog: () => any, cmds: string | undefined, opts: EngineOptions = {}): P4Engine {
  const e = P4Engine.load(prog(), opts);
  if (cmds) expect(runCommands(e, fixtureText(cmds)).ok).to.equal(true);
  if (name === 'l2_switch') {
    // learn (a digest) on every frame, flood, and forward one address: frames with and without digests
    add(e, 'table_set_default smac mac_learn');
    add(e, 'table_add smac _nop 00:00:00:00:00:01');
    add(e, 'table_set_default dmac broadcast');
    add(e, 'table_add dmac forward 00:00:00:00:00:02 => 2');
  }
  if (name === 'moving headers') {
    for (const [k, a] of [
      [1, 'add_g'],
      [0x11, 'rm_g'],
      [0x21, 'copy'],
      [0x31, 'rm_h'],
      [0x41, 'swap'],
      [0x51, 'zero_g'],
      [2, 'add_g'],
      [3, 'copy'],
      [4, 'rm_h'],
      [5, 'mark'],
    ] as const) {
      add(e, `table_add t ${a} ${k} => ${a === 'mark' ? '7' : ''}`.trim());
    }
  }
  return e;
}

/** A random frame of 0-119 bytes, often an IPv4 frame to simple_router's routes, for the programs compared. */
function comparedFrame(name: string, r: () => number): Buffer {
  const len = Math.floor(r() * 120);
  const f = Buffer.from(Array.from({ length: len }, () => Math.floor(r() * 256)));
  if (len > 13 && r() < 0.3) Buffer.from([0, 0, 0, 0, 0, 2, 0, 0, 0, 0, 0, 1]).copy(f); // l2_switch's known addresses
  if (len > 13 && r() < 0.5) f.writeUInt16BE(0x0800, 12);
  if (len > 33 && r() < 0.5) Buffer.from([10, 0, r() < 0.5 ? 0 : 1, 10]).copy(f, 30); // simple_router's routes
  if (len > 22 && r() < 0.3) f[22] = 0; // TTL 0
  if (name === 'moving headers' && len > 2)
    f[2] = [1, 0x11, 0x21, 0x31, 0x41, 0x51, 2, 3, 4, 5, 9][Math.floor(r() * 11)]!;
  return f;
}

const COMPARED: [string, () => any, string | undefined][] = [
  ['simple_router', () => fixtureText('simple_router.json'), 'commands.txt'],
  ['l2_switch', () => fixtureText('l2_switch.json'), undefined],
  ['parser_deparser_1', () => fixtureText('parser_deparser_1.json'), undefined],
  ['moving headers', moving, undefined],
];

describe('p4: fast paths against simple references', () => {
  it('extract and emit equal a bit-by-bit reference on 300 random header layouts (1-64 and 128-bit fields, any alignment)', () => {
    const r = rng(0x5eed15);
    for (let n = 0; n < 300; n++) {
      const fields: [string, number][] = [];
      let bits = 0;
      const count = 1 + Math.floor(r() * 10);
      for (let i = 0; i < count; i++) {
        const pick = r();
        const w =
          pick < 0.35
            ? 1 + Math.floor(r() * 15)
            : pick < 0.6
              ? 8 * (1 + Math.floor(r() * 4))
              : pick < 0.8
                ? 33 + Math.floor(r() * 16)
                : pick < 0.95
                  ? 49 + Math.floor(r() * 16)
                  : 128;
        fields.push([`f${i}`, w]);
        bits += w;
      }
      if (bits % 8 !== 0) fields.push(['pad', 8 - (bits % 8)]);
      const bytes = fields.reduce((a, f) => a + f[1], 0) / 8;
      const e = P4Engine.load(layoutProgram(fields));
      const h = e.layout.headerByName.get('h')!;
      const frame = Buffer.from(Array.from({ length: bytes + 7 }, () => Math.floor(r() * 256)));
      const st = e.parse(frame);
      const value = (f: FieldInfo): bigint => (f.wide ? st.big[f.slot]! : BigInt(st.num[f.slot]!));
      for (const f of h.fields) {
        expect(value(f), `layout ${n} ${JSON.stringify(fields)} field ${f.name}`).to.equal(
          refRead(frame, f.bitOffset, f.width),
        );
        expect(f.wide).to.equal(f.width > 48);
      }
      expect(e.deparse(st).equals(frame), `round trip of layout ${n}`).to.equal(true);
      // new values into every field, emitted, compared with the reference writer
      const want = Buffer.from(frame);
      for (const f of h.fields) {
        const v = randomBig(r, f.width);
        st.set(f, v);
        refWrite(want, f.bitOffset, f.width, v);
      }
      expect(e.deparse(st).toString('hex'), `emit of layout ${n} ${JSON.stringify(fields)}`).to.equal(
        want.toString('hex'),
      );
    }
  });

  it('fields over 32 bits in actions: 48-bit add_to_field and copies wrap in numbers, 64-bit ones in bigint', () => {
    const dec = (f: string) => ({
      op: 'add_to_field',
      parameters: [
        { type: 'field', value: ['h', f] },
        { type: 'hexstr', value: '-0x1' },
      ],
    });
    const e = P4Engine.load(
      layoutProgram(
        [
          ['a', 48],
          ['b', 64],
          ['c', 40],
          ['d', 24],
          ['key', 16],
        ],
        [{ match_type: 'exact', target: ['h', 'key'] }],
        'exact',
        'a',
        {
          actions: [
            { name: 'dec', id: 1, runtime_data: [], primitives: [dec('a'), dec('b'), dec('c')] },
            // c (40 bits) <- a (48 bits): wrapped to 40 bits; d (24 bits) <- c: wrapped to 24 bits
            {
              name: 'copy',
              id: 2,
              runtime_data: [],
              primitives: [
                {
                  op: 'modify_field',
                  parameters: [
                    { type: 'field', value: ['h', 'c'] },
                    { type: 'field', value: ['h', 'a'] },
                  ],
                },
                {
                  op: 'modify_field',
                  parameters: [
                    { type: 'field', value: ['h', 'd'] },
                    { type: 'field', value: ['h', 'c'] },
                  ],
                },
              ],
            },
          ],
        },
      ),
    );
    add(e, 'table_add t dec 1 =>');
    add(e, 'table_add t copy 2 =>');
    const frame = (key: number, a: bigint, b: bigint, c: bigint) => {
      const f = Buffer.alloc(24 + 10);
      refWrite(f, 0, 48, a);
      refWrite(f, 48, 64, b);
      refWrite(f, 112, 40, c);
      f.writeUInt16BE(key, 22);
      return f;
    };
    let out = e.process(frame(1, 0n, 0n, 0n), 0).frame!;
    expect([refRead(out, 0, 48), refRead(out, 48, 64), refRead(out, 112, 40)]).to.deep.equal([
      (1n << 48n) - 1n,
      (1n << 64n) - 1n,
      (1n << 40n) - 1n,
    ]);
    out = e.process(frame(1, 0x123456789abcn, 0x1000000000000n, 0x10n), 0).frame!;
    expect([refRead(out, 0, 48), refRead(out, 48, 64), refRead(out, 112, 40)]).to.deep.equal([
      0x123456789abbn,
      0xffffffffffffn,
      0xfn,
    ]);
    out = e.process(frame(2, 0xfedcba987654n, 0n, 0n), 0).frame!;
    expect([refRead(out, 112, 40), refRead(out, 152, 24)]).to.deep.equal([0xdcba987654n, 0x987654n]);
  });

  it('conditions on the number path (compileNum, its fused forms) equal the bigint path on random states', () => {
    const e = P4Engine.load(
      layoutProgram([
        ['a', 8],
        ['b', 16],
        ['c', 32],
        ['w', 48],
        ['pad', 8],
      ]),
    );
    const ctx: ExprContext = { layout: e.layout, runtimeData: 0, parser: false };
    const F = (f: string) => ({ type: 'field', value: ['h', f] });
    const K = (v: string) => ({ type: 'hexstr', value: v });
    const X = (op: string, left: unknown, right: unknown) => ({ type: 'expression', value: { op, left, right } });
    const V = X('valid', null, { type: 'header', value: 'h' });
    const exprs: unknown[] = [];
    for (const op of ['==', '!=', '>', '>=', '<', '<=']) {
      for (const [f, k] of [
        ['a', '0x7f'],
        ['b', '0x0'],
        ['c', '0x80000000'],
        ['c', '-0x1'],
      ] as const) {
        exprs.push(
          X(op, F(f), K(k)),
          X('and', V, X(op, F(f), K(k))),
          X('or', V, X(op, F(f), K(k))),
          X(op, K(k), F(f)),
          X(op, X('+', F('a'), F(f)), K(k)),
          X('not', null, X(op, F(f), K(k))),
        );
      }
    }
    const r = rng(99);
    const h = e.layout.headerByName.get('h')!;
    for (const [i, ex] of exprs.entries()) {
      const num = compileNum(ex, ctx);
      expect(num, `expression ${i} on the number path`).to.be.a('function');
      const big = compileValue(ex, ctx, ['expr']);
      for (let k = 0; k < 200; k++) {
        const frame = Buffer.from(Array.from({ length: 20 }, () => Math.floor(r() * 256)));
        if (k % 5 === 0) frame.fill(k % 2 === 0 ? 0 : 0xff, 0, 10);
        const st = e.parse(frame);
        if (k % 7 === 3) st.valid[h.index] = 0;
        expect(num!(st, NO_ARGS), `expression ${i} ${JSON.stringify(ex)} frame ${frame.toString('hex')}`).to.equal(
          Number(big(st, NO_ARGS)),
        );
      }
    }
    // over 32 bits the number path steps aside (the bigint path runs)
    expect(compileNum(X('==', F('w'), K('0x1')), ctx)).to.equal(undefined);
  });

  it('process() writing only the windows of fields a program may write gives the frames of a full emit (fixtures and header-moving programs, 3000 random frames each)', () => {
    for (const [name, prog, cmds] of COMPARED) {
      const fast = loadCompared(name, prog, cmds);
      const full = loadCompared(name, prog, cmds, { fullEmit: true });
      const r = rng(name.length * 31);
      for (let i = 0; i < 3000; i++) {
        const f = comparedFrame(name, r);
        const port = 1 + Math.floor(r() * 2);
        const a = fast.process(f, port);
        const b = full.process(f, port);
        expect(a.frame?.toString('hex'), `${name} frame ${f.toString('hex')}`).to.equal(b.frame?.toString('hex'));
        expect([a.dropped, a.egressPort, a.checksumError]).to.deep.equal([b.dropped, b.egressPort, b.checksumError]);
      }
    }
  });

  it('processReused, into the engine buffer and in place, says what process() says on 3000 random frames per program; its one result object keeps nothing from an earlier frame', () => {
    for (const [name, prog, cmds] of COMPARED) {
      // maxFrame 100: some frames are dropped as too long (no parse, no digests) between the others
      const ref = loadCompared(name, prog, cmds, { maxFrame: 100 });
      const buf = loadCompared(name, prog, cmds, { maxFrame: 100 });
      const inPlace = loadCompared(name, prog, cmds, { maxFrame: 100 });
      const r = rng(name.length * 57 + 1);
      let first: P4Result | undefined;
      let inPlaceHits = 0;
      const outcomes = new Set<string>();
      for (let i = 0; i < 3000; i++) {
        const f = comparedFrame(name, r);
        const port = 1 + Math.floor(r() * 2);
        const want = snapshot(ref.process(Buffer.from(f), port));
        const input = Buffer.from(f);
        const b = buf.processReused(input, port, OutputMode.ENGINE_BUFFER);
        first ??= b;
        expect(b, 'one result object').to.equal(first);
        expect(snapshot(b), `${name} engine buffer, frame ${f.toString('hex')}`).to.deep.equal(want);
        expect(input.equals(f), 'the input is not written').to.equal(true);
        if (b.frame) expect(b.frame.buffer).to.not.equal(input.buffer);
        const own = Buffer.from(f);
        const c = inPlace.processReused(own, port, OutputMode.IN_PLACE);
        if (c.frame === own) inPlaceHits++;
        expect(snapshot(c), `${name} in place, frame ${f.toString('hex')}`).to.deep.equal(want);
        if (b.reason === 'too-long') expect(b.digests, 'a frame never parsed made no digests').to.have.length(0);
        outcomes.add(b.dropped ? `dropped ${b.reason}` : `sent ${b.digests.length > 0 ? 'with' : 'without'} digests`);
      }
      expect(ref.stats).to.deep.equal(buf.stats);
      expect(ref.stats).to.deep.equal(inPlace.stats);
      if (name === 'simple_router' || name === 'moving headers')
        expect(inPlaceHits, `${name}: frames written in place`).to.be.greaterThan(100);
      expect(outcomes.size, `${name}: outcomes ${[...outcomes].join(', ')}`).to.be.greaterThan(1);
    }
  });

  describe('csum16: the number path equals the bit-image path', () => {
    const ctxOf = (e: P4Engine): ExprContext => ({ layout: e.layout, runtimeData: 0, parser: false });

    it("simple_router's IPv4 header checksum on 3000 random headers", () => {
      const e = P4Engine.load(fixtureText('simple_router.json'));
      const calc = e.program.calculations[0]!;
      const num = compileCsum16Num(calc, ctxOf(e))!;
      const img = compileImageCalculation(calc, ['calculations', 0], ctxOf(e));
      expect(num).to.be.a('function');
      const r = rng(1071);
      const frame = Buffer.alloc(14 + 20 + 8);
      frame.writeUInt16BE(0x0800, 12);
      for (let i = 0; i < 3000; i++) {
        for (let k = 14; k < 34; k++) frame[k] = Math.floor(r() * 256);
        if (i % 3 === 0) frame.fill(i % 2 === 0 ? 0 : 0xff, 14, 34); // all zeros, all ones
        const st = e.parse(frame);
        expect(num(st), `header ${frame.subarray(14, 34).toString('hex')}`).to.equal(Number(img(st)));
      }
    });

    it('simple_router routes 2000 random IPv4 headers with the checksum marked and rewritten as RFC 1071 says', () => {
      const e = P4Engine.load(fixtureText('simple_router.json'));
      expect(runCommands(e, fixtureText('commands.txt')).ok).to.equal(true);
      const r = rng(791);
      for (let i = 0; i < 2000; i++) {
        const f = Buffer.alloc(14 + 20 + 10);
        f.writeUInt16BE(0x0800, 12);
        for (let k = 14; k < 34; k++) f[k] = Math.floor(r() * 256);
        f[22] = 1 + Math.floor(r() * 255); // ttl > 0
        Buffer.from([10, 0, 0, 10]).copy(f, 30); // routed to port 1
        if (i % 2 === 0) f.writeUInt16BE(ipv4Checksum(f.subarray(14, 34)), 24); // half with a good checksum
        const good = f.readUInt16BE(24) === ipv4Checksum(f.subarray(14, 34));
        const res = e.process(f, 1);
        expect(res.checksumError, `frame ${f.toString('hex')}`).to.equal(!good);
        const out = res.frame!;
        expect(out[22]).to.equal(f[22]! - 1);
        expect(out.readUInt16BE(24), `frame ${f.toString('hex')}`).to.equal(ipv4Checksum(out.subarray(14, 34)));
      }
    });

    it('synthetic inputs: 48-bit and unaligned fields, constants, two headers whose validity changes, the payload at an even and an odd byte', () => {
      const prog = layoutProgram([
        ['a', 4],
        ['b', 12],
        ['mac', 48],
        ['c', 16],
        ['d', 33],
        ['e', 15],
      ]);
      prog.header_types.push({
        name: 'g_t',
        id: 2,
        fields: [
          ['x', 16],
          ['y', 32],
          ['z', 8],
        ],
      });
      prog.headers.push({ name: 'g', id: 2, header_type: 'g_t', metadata: false });
      prog.parsers[0].parse_states[0].parser_ops.push({ op: 'extract', parameters: [{ type: 'regular', value: 'g' }] });
      prog.deparsers[0].order.push('g');
      const e = P4Engine.load(prog);
      const F = (h: string, f: string) => ({ type: 'field', value: [h, f] });
      const K = (v: string, bitwidth: number) => ({ type: 'hexstr', value: v, bitwidth });
      const P = { type: 'payload', value: null };
      const inputs: any[][] = [
        [F('h', 'a'), F('h', 'b'), F('h', 'mac'), F('h', 'c'), F('h', 'd'), F('h', 'e')],
        [F('h', 'mac'), K('0x11', 8), F('h', 'c'), F('h', 'a'), F('h', 'b')],
        [F('h', 'c'), F('h', 'mac'), F('g', 'x'), F('g', 'y'), F('g', 'z')], // the last run (g) 56 bits: allowed
        [F('g', 'x'), F('g', 'y'), F('h', 'a'), F('h', 'b'), K('0x6', 16), P], // payload at an even byte
        [F('g', 'x'), F('g', 'y'), K('0x06', 8), P], // payload at an odd byte
        [K('0xabcd', 16), F('h', 'd'), F('h', 'e'), F('g', 'y'), P],
      ];
      const r = rng(4242);
      inputs.forEach((input, ci) => {
        const calc = { name: `c${ci}`, id: ci, algo: 'csum16', input };
        const num = compileCsum16Num(calc, ctxOf(e));
        expect(num, `calculation ${ci} takes the number path`).to.be.a('function');
        const img = compileImageCalculation(calc, ['calculations', ci], ctxOf(e));
        for (let i = 0; i < 500; i++) {
          const len = 16 + 7 + Math.floor(r() * 40);
          const frame = Buffer.from(Array.from({ length: len }, () => Math.floor(r() * 256)));
          const st = e.parse(frame);
          if (i % 4 === 1) st.valid[e.layout.headerByName.get('g')!.index] = 0;
          if (i % 4 === 2) st.valid[e.layout.headerByName.get('h')!.index] = 0;
          expect(num!(st), `calculation ${ci} frame ${frame.toString('hex')}`).to.equal(Number(img(st)));
        }
      });
      // what the number path leaves to the general one: a run of an odd width before another, other algorithms, header inputs
      expect(compileCsum16Num({ algo: 'csum16', input: [F('h', 'a'), F('g', 'x')] }, ctxOf(e))).to.equal(undefined);
      expect(compileCsum16Num({ algo: 'crc16', input: [F('h', 'c')] }, ctxOf(e))).to.equal(undefined);
      expect(compileCsum16Num({ algo: 'csum16', input: [{ type: 'header', value: 'g' }] }, ctxOf(e))).to.equal(
        undefined,
      );
    });
  });
});
