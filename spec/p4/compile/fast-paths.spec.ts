// The engine's fast paths against simple references: header extract/emit
// (byte windows, 48-bit number fields, bigint fields) against a bigint
// bit reader/writer on random layouts; table lookups on the number path
// (packed and int32 keys, one Map per prefix length, priority-sorted number
// operands) and on the bigint path, with overlapping prefixes, priorities,
// deletions and keys of 2^31 and above; the csum16 number path against the
// general bit-image path on random field values, with validity, constants
// and the payload; fields over 32 bits in actions.

import { expect } from 'chai';
import { EngineOptions, OutputMode, P4Engine } from '../../../lib/p4/engine/engine';
import { P4Result } from '../../../lib/p4/frame/result';
import { compileCsum16Num } from '../../../lib/p4/compile/csum16';
import { compileNum, compileValue, ExprContext, NO_ARGS } from '../../../lib/p4/compile/expr';
import { compileImageCalculation } from '../../../lib/p4/compile/calculations';
import { runCommand, runCommands } from '../../../lib/p4/engine/commands';
import { FieldInfo } from '../../../lib/p4/program/layout';
import { fixtureText, ipv4Checksum, snapshot } from '../helpers';
import { xorshift } from '../../support/rng';

/** spec/support/rng.ts's seeded xorshift32 as a fraction in [0, 1). */
function rng(seed: number): () => number {
  const next = xorshift(seed);
  return () => next() / 0x100000000;
}

function randomBig(r: () => number, width: number): bigint {
  let v = 0n;
  for (let i = 0; i < width; i += 16) v = (v << 16n) | BigInt(Math.floor(r() * 0x10000));
  return v & ((1n << BigInt(width)) - 1n);
}

/** The reference: bits [bit, bit+width) of buf, most significant first, one at a time. */
function refRead(buf: Buffer, bit: number, width: number): bigint {
  let v = 0n;
  for (let i = bit; i < bit + width; i++) v = (v << 1n) | BigInt((buf[i >> 3]! >> (7 - (i & 7))) & 1);
  return v;
}

function refWrite(buf: Buffer, bit: number, width: number, v: bigint): void {
  for (let i = 0; i < width; i++) {
    const b = bit + width - 1 - i;
    const one = (v >> BigInt(i)) & 1n;
    buf[b >> 3] = (buf[b >> 3]! & ~(0x80 >> (b & 7))) | (Number(one) << (7 - (b & 7)));
  }
}

const STD_META = { name: 'standard_metadata_t', id: 0, fields: [['ingress_port', 9], ['packet_length', 32], ['egress_spec', 9], ['egress_port', 9], ['_padding', 5]] };

/**
 * A program over one header `h` (the given fields) parsed at the frame's
 * start and deparsed; a table `t` keyed on `keys` whose action mark(v)
 * writes v into h.<markField>, so the winning entry shows in the frame.
 */
function layoutProgram(fields: [string, number][], keys: { match_type: string; target: unknown }[] = [], matchType = 'exact', markField = fields[0]![0], extra: any = {}): any {
  const markWidth = fields.find((f) => f[0] === markField)![1];
  return {
    header_types: [STD_META, { name: 'h_t', id: 1, fields }],
    headers: [
      { name: 'standard_metadata', id: 0, header_type: 'standard_metadata_t', metadata: true },
      { name: 'h', id: 1, header_type: 'h_t', metadata: false },
    ],
    parsers: [
      {
        name: 'parser',
        id: 0,
        init_state: 'start',
        parse_states: [
          { name: 'start', id: 0, parser_ops: [{ op: 'extract', parameters: [{ type: 'regular', value: 'h' }] }], transition_key: [], transitions: [{ type: 'default', value: null, mask: null, next_state: null }] },
        ],
      },
    ],
    deparsers: [{ name: 'deparser', id: 0, order: ['h'] }],
    actions: [
      { name: 'mark', id: 0, runtime_data: [{ name: 'v', bitwidth: markWidth }], primitives: [{ op: 'modify_field', parameters: [{ type: 'field', value: ['h', markField] }, { type: 'runtime_data', value: 0 }] }] },
      ...(extra.actions ?? []),
    ],
    pipelines: [
      {
        name: 'ingress',
        id: 0,
        init_table: keys.length > 0 ? 't' : null,
        tables:
          keys.length > 0
            ? [
                {
                  name: 't',
                  id: 0,
                  match_type: matchType,
                  type: 'simple',
                  max_size: 1024,
                  with_counters: false,
                  key: keys.map((k) => ({ ...k, mask: null })),
                  actions: ['mark', ...(extra.actions ?? []).map((a: any) => a.name)],
                  next_tables: Object.fromEntries(['mark', ...(extra.actions ?? []).map((a: any) => a.name)].map((a) => [a, null])),
                  base_default_next: null,
                },
              ]
            : [],
        conditionals: [],
      },
      { name: 'egress', id: 1, init_table: null, tables: [], conditionals: [] },
    ],
    calculations: extra.calculations ?? [],
  };
}

function add(e: P4Engine, cmd: string): number {
  const r = runCommand(e, cmd);
  if (!r.ok) throw new Error(`${cmd}: ${r.error}`);
  return r.handle!;
}

/** The value the table's action wrote into the mark field (0 when nothing matched: the field is zeroed below). */
function markOf(e: P4Engine, frame: Buffer, bit: number, width: number): bigint {
  const out = e.process(frame, 0).frame!;
  return refRead(out, bit, width);
}

/** Two headers and actions that add, remove, copy and swap them, so headers change places and lengths. */
function moving(): any {
  // two headers; actions that add, remove, copy and swap them, so headers change places and lengths
  // h's windows: [a b] (written by mark), [c] (only by the checksum), [d] (never written)
  const p = layoutProgram([['a', 16], ['b', 8], ['c', 24], ['d', 24]], [{ match_type: 'exact', target: ['h', 'b'] }], 'exact', 'a', {
    actions: [
      { name: 'add_g', id: 1, runtime_data: [], primitives: [{ op: 'add_header', parameters: [{ type: 'header', value: 'g' }] }, { op: 'modify_field', parameters: [{ type: 'field', value: ['g', 'x'] }, { type: 'hexstr', value: '0x1234' }] }] },
      { name: 'rm_g', id: 2, runtime_data: [], primitives: [{ op: 'remove_header', parameters: [{ type: 'header', value: 'g' }] }] },
      { name: 'copy', id: 3, runtime_data: [], primitives: [{ op: 'copy_header', parameters: [{ type: 'header', value: 'g2' }, { type: 'header', value: 'g' }] }] },
      { name: 'rm_h', id: 4, runtime_data: [], primitives: [{ op: 'remove_header', parameters: [{ type: 'header', value: 'h' }] }, { op: 'add_header', parameters: [{ type: 'header', value: 'g2' }] }] },
      // the same total length with h moved behind g2
      { name: 'swap', id: 5, runtime_data: [], primitives: [{ op: 'remove_header', parameters: [{ type: 'header', value: 'g' }] }, { op: 'add_header', parameters: [{ type: 'header', value: 'g2' }] }] },
      // g zeroed in place through a header copy (no field named)
      {
        name: 'zero_g',
        id: 6,
        runtime_data: [],
        primitives: [
          { op: 'add_header', parameters: [{ type: 'header', value: 'g2' }] },
          { op: 'copy_header', parameters: [{ type: 'header', value: 'g' }, { type: 'header', value: 'g2' }] },
          { op: 'remove_header', parameters: [{ type: 'header', value: 'g2' }] },
        ],
      },
    ],
    // h.c is written only by a checksum over h.a and h.b (its own byte window)
    calculations: [{ name: 'ck', id: 0, algo: 'csum16', input: [{ type: 'field', value: ['h', 'a'] }, { type: 'field', value: ['h', 'b'] }] }],
  });
  p.checksums = [{ name: 'h.c', id: 0, target: ['h', 'c'], type: 'generic', calculation: 'ck', if_cond: null }];
  p.header_types.push({ name: 'g_t', id: 2, fields: [['x', 16], ['y', 32], ['z', 16]] });
  p.headers.push({ name: 'g', id: 2, header_type: 'g_t', metadata: false }, { name: 'g2', id: 3, header_type: 'g_t', metadata: false });
  const st0 = p.parsers[0].parse_states[0];
  st0.transition_key = [{ type: 'field', value: ['h', 'b'] }];
  st0.transitions = [
    { type: 'hexstr', value: '0x01', mask: '0x0f', next_state: 'g' },
    { type: 'default', value: null, mask: null, next_state: null },
  ];
  p.parsers[0].parse_states.push({ name: 'g', id: 1, parser_ops: [{ op: 'extract', parameters: [{ type: 'regular', value: 'g' }] }], transition_key: [], transitions: [{ type: 'default', value: null, mask: null, next_state: null }] });
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
    for (const [k, a] of [[1, 'add_g'], [0x11, 'rm_g'], [0x21, 'copy'], [0x31, 'rm_h'], [0x41, 'swap'], [0x51, 'zero_g'], [2, 'add_g'], [3, 'copy'], [4, 'rm_h'], [5, 'mark']] as const) {
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
  if (name === 'moving headers' && len > 2) f[2] = [1, 0x11, 0x21, 0x31, 0x41, 0x51, 2, 3, 4, 5, 9][Math.floor(r() * 11)]!;
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
        const w = pick < 0.35 ? 1 + Math.floor(r() * 15) : pick < 0.6 ? 8 * (1 + Math.floor(r() * 4)) : pick < 0.8 ? 33 + Math.floor(r() * 16) : pick < 0.95 ? 49 + Math.floor(r() * 16) : 128;
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
        expect(value(f), `layout ${n} ${JSON.stringify(fields)} field ${f.name}`).to.equal(refRead(frame, f.bitOffset, f.width));
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
      expect(e.deparse(st).toString('hex'), `emit of layout ${n} ${JSON.stringify(fields)}`).to.equal(want.toString('hex'));
    }
  });

  it('lpm on a 32-bit key (number path, int32 keys): overlapping prefixes, /0, addresses above 2^31, deletion falls back', () => {
    const e = P4Engine.load(layoutProgram([['dst', 32], ['mark', 16]], [{ match_type: 'lpm', target: ['h', 'dst'] }], 'lpm', 'mark'));
    const hs = {
      p0: add(e, 'table_add t mark 0.0.0.0/0 => 1'),
      p8: add(e, 'table_add t mark 192.0.0.0/8 => 8'),
      p16: add(e, 'table_add t mark 192.168.0.0/16 => 16'),
      p24: add(e, 'table_add t mark 192.168.1.0/24 => 24'),
      p32: add(e, 'table_add t mark 192.168.1.7/32 => 32'),
      low: add(e, 'table_add t mark 10.0.0.0/8 => 10'),
      top: add(e, 'table_add t mark 255.255.255.255/32 => 255'),
    };
    const f = (ip: string) => Buffer.concat([Buffer.from(ip.split('.').map(Number)), Buffer.alloc(2), Buffer.alloc(20)]);
    const m = (ip: string) => Number(markOf(e, f(ip), 32, 16));
    expect([m('192.168.1.7'), m('192.168.1.8'), m('192.168.2.1'), m('192.1.1.1'), m('10.9.9.9'), m('11.0.0.1'), m('255.255.255.255'), m('255.255.255.254')]).to.deep.equal([32, 24, 16, 8, 10, 1, 255, 1]);
    expect(runCommand(e, 'table_add t mark 192.168.1.0/24 => 99').ok).to.equal(false); // same prefix and length: a duplicate
    expect(runCommand(e, `table_delete t ${hs.p32}`).ok).to.equal(true);
    expect(m('192.168.1.7')).to.equal(24);
    expect(runCommand(e, `table_delete t ${hs.p24}`).ok).to.equal(true);
    expect(runCommand(e, `table_delete t ${hs.p16}`).ok).to.equal(true);
    expect(m('192.168.1.7')).to.equal(8);
    expect(runCommand(e, `table_delete t ${hs.p0}`).ok).to.equal(true);
    expect(m('11.0.0.1')).to.equal(0); // a miss: no default action, the field stays as parsed (0)
    expect(runCommand(e, 'table_clear t').ok).to.equal(true);
    expect(m('10.9.9.9')).to.equal(0);
    expect(add(e, 'table_add t mark 10.0.0.0/8 => 7')).to.be.a('number');
    expect(m('10.9.9.9')).to.equal(7);
  });

  it('lpm agrees with a longest-prefix scan on 2000 random addresses and 60 random prefixes, on the number path and the bigint path (a 64-bit key)', () => {
    for (const width of [32, 64]) {
      const r = rng(width);
      const e = P4Engine.load(layoutProgram([['dst', width], ['mark', 16]], [{ match_type: 'lpm', target: ['h', 'dst'] }], 'lpm', 'mark'));
      const routes: { v: bigint; len: number; mark: number }[] = [];
      for (let i = 0; i < 60; i++) {
        const len = Math.floor(r() * (width + 1));
        const v = randomBig(r, width) & (((1n << BigInt(len)) - 1n) << BigInt(width - len));
        if (routes.some((x) => x.len === len && x.v === v)) continue;
        routes.push({ v, len, mark: i + 1 });
        add(e, `table_add t mark 0x${v.toString(16)}/${len} => ${i + 1}`);
      }
      const bytes = width / 8;
      for (let i = 0; i < 2000; i++) {
        // half the addresses inside some route
        let a = randomBig(r, width);
        if (i % 2 === 0) {
          const rt = routes[Math.floor(r() * routes.length)]!;
          const host = width - rt.len;
          a = rt.v | (randomBig(r, width) & ((1n << BigInt(host)) - 1n));
        }
        let best: { len: number; mark: number } | undefined;
        for (const rt of routes) {
          const mask = ((1n << BigInt(rt.len)) - 1n) << BigInt(width - rt.len);
          if ((a & mask) === rt.v && (!best || rt.len > best.len)) best = rt;
        }
        const frame = Buffer.alloc(bytes + 2 + 10);
        refWrite(frame, 0, width, a);
        expect(Number(markOf(e, frame, width, 16)), `width ${width} address 0x${a.toString(16)}`).to.equal(best?.mark ?? 0);
      }
    }
  });

  it('exact and lpm tables keep answering like a reference while they grow past the short array (8 entries) and shrink back', () => {
    for (const kind of ['exact', 'lpm']) {
      const e = P4Engine.load(layoutProgram([['k', 32], ['mark', 16]], [{ match_type: kind, target: ['h', 'k'] }], kind, 'mark'));
      const r = rng(kind === 'exact' ? 7 : 8);
      const live = new Map<number, { key: number; len: number; mark: number }>();
      const probe = (): void => {
        const keys = [...live.values()].map((x) => x.key);
        for (let i = 0; i < 40; i++) {
          const k = i % 2 === 0 && keys.length > 0 ? keys[Math.floor(r() * keys.length)]! + (kind === 'lpm' ? Math.floor(r() * 256) : 0) : Math.floor(r() * 0x100000000);
          let want = 0;
          let bestLen = -1;
          for (const x of live.values()) {
            const div = 2 ** (32 - x.len);
            if (Math.floor(k / div) === Math.floor(x.key / div) && x.len > bestLen) [want, bestLen] = [x.mark, x.len];
          }
          const f = Buffer.alloc(16);
          f.writeUInt32BE(k >>> 0, 0);
          expect(Number(markOf(e, f, 32, 16)), `${kind} with ${live.size} entries, key ${k.toString(16)}`).to.equal(want);
        }
      };
      for (let i = 1; i <= 20; i++) {
        const len = kind === 'lpm' ? 8 + Math.floor(r() * 25) : 32;
        const key = (Math.floor(r() * 0x100000000) & (len === 32 ? -1 : ~((1 << (32 - len)) - 1))) >>> 0;
        const res = runCommand(e, `table_add t mark ${key}${kind === 'lpm' ? `/${len}` : ''} => ${i}`);
        if (!res.ok) continue;
        live.set(res.handle!, { key, len, mark: i });
        probe();
      }
      for (const h of [...live.keys()]) {
        expect(runCommand(e, `table_delete t ${h}`).ok).to.equal(true);
        live.delete(h);
        probe();
      }
    }
  });

  it('lpm with an exact part: one packed number key per prefix length', () => {
    const e = P4Engine.load(
      layoutProgram([['dst', 32], ['vrf', 12], ['pad', 4], ['mark', 16]], [{ match_type: 'lpm', target: ['h', 'dst'] }, { match_type: 'exact', target: ['h', 'vrf'] }], 'lpm', 'mark'),
    );
    add(e, 'table_add t mark 10.0.0.0/8 1 => 1');
    add(e, 'table_add t mark 10.1.0.0/16 1 => 2');
    add(e, 'table_add t mark 10.1.0.0/16 2 => 3');
    add(e, 'table_add t mark 0.0.0.0/0 4095 => 4');
    const f = (ip: string, vrf: number) => {
      const b = Buffer.alloc(32);
      Buffer.from(ip.split('.').map(Number)).copy(b);
      b.writeUInt16BE(vrf << 4, 4);
      return b;
    };
    const m = (ip: string, vrf: number) => Number(markOf(e, f(ip, vrf), 48, 16));
    expect([m('10.1.2.3', 1), m('10.2.2.3', 1), m('10.1.2.3', 2), m('10.2.2.3', 2), m('200.0.0.1', 4095), m('200.0.0.1', 1)]).to.deep.equal([2, 1, 3, 0, 4, 0]);
  });

  it('ternary priorities on the number path (masks with bit 31 set) and on the bigint path (a 64-bit key): lowest number wins, ties to the first added', () => {
    for (const width of [32, 64]) {
      const e = P4Engine.load(layoutProgram([['k', width], ['mark', 16]], [{ match_type: 'ternary', target: ['h', 'k'] }], 'ternary', 'mark'));
      const hex = (v: bigint) => `0x${v.toString(16)}`;
      const top = 1n << BigInt(width - 1);
      const all = (1n << BigInt(width)) - 1n;
      add(e, `table_add t mark 0&&&0 => 1 100`); // anything
      add(e, `table_add t mark ${hex(top)}&&&${hex(top)} => 2 50`); // top bit set
      add(e, `table_add t mark ${hex(top | 0xffn)}&&&${hex(top | 0xffn)} => 3 10`); // top bit and low byte all ones
      add(e, `table_add t mark ${hex(0xffn)}&&&${hex(0xffn)} => 4 10`); // low byte all ones, same priority as 3
      expect(runCommand(e, `table_add t mark 0x0ff&&&0x0ff => 5 10`).ok).to.equal(false); // the same key and priority again
      expect(add(e, `table_add t mark 0x0ff&&&0x0ff => 6 11`)).to.be.a('number'); // the same key at another priority
      const frame = (v: bigint) => {
        const b = Buffer.alloc(width / 8 + 2 + 10);
        refWrite(b, 0, width, v);
        return b;
      };
      const m = (v: bigint) => Number(markOf(e, frame(v), width, 16));
      expect([m(all), m(top | 0x12n), m(0x1ffn), m(0x12n)], `width ${width}`).to.deep.equal([3, 2, 4, 1]);
    }
  });

  it('range and optional keys on 48-bit values (number path)', () => {
    const e = P4Engine.load(layoutProgram([['a', 48], ['b', 48], ['mark', 16]], [{ match_type: 'range', target: ['h', 'a'] }, { match_type: 'optional', target: ['h', 'b'] }], 'range', 'mark'));
    add(e, 'table_add t mark 0x800000000000->0xffffffffffff * => 1 20');
    add(e, 'table_add t mark 0x800000000000->0x800000000010 0x000000000007 => 2 10');
    add(e, 'table_add t mark 0->0x7fffffffffff 00:00:00:00:00:07 => 3 30');
    const frame = (a: bigint, b: bigint) => {
      const f = Buffer.alloc(24);
      refWrite(f, 0, 48, a);
      refWrite(f, 48, 48, b);
      return f;
    };
    const m = (a: bigint, b: bigint) => Number(markOf(e, frame(a, b), 96, 16));
    expect([m(0x800000000005n, 7n), m(0x800000000005n, 8n), m(0xffffffffffffn, 7n), m(0x800000000011n, 7n), m(5n, 7n), m(5n, 8n)]).to.deep.equal([2, 1, 1, 1, 3, 0]);
  });

  it('exact keys: 48-bit (number path), 64-bit and two 32-bit parts (bigint path: over 53 bits packed)', () => {
    const cases: [[string, number][], string[], string, string][] = [
      [[['k', 48], ['mark', 16]], ['k'], '0xfedcba987654', '0xfedcba987655'],
      [[['k', 64], ['mark', 16]], ['k'], '0xfedcba9876543210', '0xfedcba9876543211'],
      [[['k', 32], ['j', 32], ['mark', 16]], ['k', 'j'], '0xfedcba98 0x76543210', '0xfedcba98 0x76543211'],
    ];
    for (const [fields, keys, hit, miss] of cases) {
      const e = P4Engine.load(layoutProgram(fields, keys.map((k) => ({ match_type: 'exact', target: ['h', k] })), 'exact', 'mark'));
      add(e, `table_add t mark ${hit} => 9`);
      expect(runCommand(e, `table_add t mark ${hit} => 8`).ok).to.equal(false); // duplicate
      const keyBits = fields.slice(0, -1).reduce((a, f) => a + f[1], 0);
      const frame = (v: string) => {
        const b = Buffer.alloc(keyBits / 8 + 2 + 10);
        let at = 0;
        v.split(' ').forEach((x, i) => {
          refWrite(b, at, fields[i]![1], BigInt(x));
          at += fields[i]![1];
        });
        return b;
      };
      expect([Number(markOf(e, frame(hit), keyBits, 16)), Number(markOf(e, frame(miss), keyBits, 16))], JSON.stringify(fields)).to.deep.equal([9, 0]);
    }
  });

  it('fields over 32 bits in actions: 48-bit add_to_field and copies wrap in numbers, 64-bit ones in bigint', () => {
    const dec = (f: string) => ({ op: 'add_to_field', parameters: [{ type: 'field', value: ['h', f] }, { type: 'hexstr', value: '-0x1' }] });
    const e = P4Engine.load(
      layoutProgram([['a', 48], ['b', 64], ['c', 40], ['d', 24], ['key', 16]], [{ match_type: 'exact', target: ['h', 'key'] }], 'exact', 'a', {
        actions: [
          { name: 'dec', id: 1, runtime_data: [], primitives: [dec('a'), dec('b'), dec('c')] },
          // c (40 bits) <- a (48 bits): wrapped to 40 bits; d (24 bits) <- c: wrapped to 24 bits
          { name: 'copy', id: 2, runtime_data: [], primitives: [{ op: 'modify_field', parameters: [{ type: 'field', value: ['h', 'c'] }, { type: 'field', value: ['h', 'a'] }] }, { op: 'modify_field', parameters: [{ type: 'field', value: ['h', 'd'] }, { type: 'field', value: ['h', 'c'] }] }] },
        ],
      }),
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
    expect([refRead(out, 0, 48), refRead(out, 48, 64), refRead(out, 112, 40)]).to.deep.equal([(1n << 48n) - 1n, (1n << 64n) - 1n, (1n << 40n) - 1n]);
    out = e.process(frame(1, 0x123456789abcn, 0x1000000000000n, 0x10n), 0).frame!;
    expect([refRead(out, 0, 48), refRead(out, 48, 64), refRead(out, 112, 40)]).to.deep.equal([0x123456789abbn, 0xffffffffffffn, 0xfn]);
    out = e.process(frame(2, 0xfedcba987654n, 0n, 0n), 0).frame!;
    expect([refRead(out, 112, 40), refRead(out, 152, 24)]).to.deep.equal([0xdcba987654n, 0x987654n]);
  });

  it('conditions on the number path (compileNum, its fused forms) equal the bigint path on random states', () => {
    const e = P4Engine.load(layoutProgram([['a', 8], ['b', 16], ['c', 32], ['w', 48], ['pad', 8]]));
    const ctx: ExprContext = { layout: e.layout, runtimeData: 0, parser: false };
    const F = (f: string) => ({ type: 'field', value: ['h', f] });
    const K = (v: string) => ({ type: 'hexstr', value: v });
    const X = (op: string, left: unknown, right: unknown) => ({ type: 'expression', value: { op, left, right } });
    const V = X('valid', null, { type: 'header', value: 'h' });
    const exprs: unknown[] = [];
    for (const op of ['==', '!=', '>', '>=', '<', '<=']) {
      for (const [f, k] of [['a', '0x7f'], ['b', '0x0'], ['c', '0x80000000'], ['c', '-0x1']] as const) {
        exprs.push(X(op, F(f), K(k)), X('and', V, X(op, F(f), K(k))), X('or', V, X(op, F(f), K(k))), X(op, K(k), F(f)), X(op, X('+', F('a'), F(f)), K(k)), X('not', null, X(op, F(f), K(k))));
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
        expect(num!(st, NO_ARGS), `expression ${i} ${JSON.stringify(ex)} frame ${frame.toString('hex')}`).to.equal(Number(big(st, NO_ARGS)));
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
      if (name === 'simple_router' || name === 'moving headers') expect(inPlaceHits, `${name}: frames written in place`).to.be.greaterThan(100);
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
      const prog = layoutProgram([['a', 4], ['b', 12], ['mac', 48], ['c', 16], ['d', 33], ['e', 15]]);
      prog.header_types.push({ name: 'g_t', id: 2, fields: [['x', 16], ['y', 32], ['z', 8]] });
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
      expect(compileCsum16Num({ algo: 'csum16', input: [{ type: 'header', value: 'g' }] }, ctxOf(e))).to.equal(undefined);
    });
  });
});
