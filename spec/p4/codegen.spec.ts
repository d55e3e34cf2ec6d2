// The generated program function (lib/p4/codegen.ts) against the closures
// (EngineOptions.codegen false, the reference): the same programs, the same
// control-plane commands and the same frames through both engines, every
// result field, the output bytes, the input after IN_PLACE and the engine
// counters compared, through process(), processReused() into the engine's
// buffer and processReused() IN_PLACE. Frames: seeded random bytes, frames
// steered into each header, bad checksums, TTL 0/1, table misses, every
// truncation, frames over maxFrame. Then the subset's refusals (each one
// still runs, on the closures) and the source's hygiene: no name or string
// of the program in it.

import { expect } from 'chai';
import { OutputMode, P4Engine } from '../../lib/p4/engine/engine';
import { P4Result } from '../../lib/p4/frame/result';
import { topoOrder } from '../../lib/p4/program/graph';
import { runCommand, runCommands } from '../../lib/p4/engine/commands';
import { exactSpec, lpmSpec, ternarySpec } from '../../lib/p4/compile/tables/entries';
import { ethernet, fixtureText, ip, ipv4, ipv4Checksum, mac, snapshot, syntheticProgram, tcp, udp } from './helpers';
import { xorshift } from '../support/rng';

interface Pair {
  gen: P4Engine;
  ref: P4Engine;
}

function pair(program: unknown, opts: { maxFrame?: number } = {}): Pair {
  const gen = P4Engine.load(program, opts);
  const ref = P4Engine.load(program, { ...opts, codegen: false });
  expect(gen.generated, `generated (refused: ${gen.codegenRefused})`).to.equal(true);
  expect(ref.generated).to.equal(false);
  return { gen, ref };
}

/** The same command on both engines, with the same outcome. */
function both(p: Pair, cmd: string): boolean {
  const a = runCommand(p.gen, cmd);
  const b = runCommand(p.ref, cmd);
  expect(a, cmd).to.deep.equal(b);
  return a.ok;
}

/** One frame through both engines on the three paths; returns the reference's process() result. */
function compare(p: Pair, frame: Buffer, port: number, what: string): P4Result {
  const a = p.gen.process(frame, port);
  const b = p.ref.process(frame, port);
  expect(snapshot(a), `${what}: process`).to.deep.equal(snapshot(b));
  if (a.frame) expect(a.frame, `${what}: a new Buffer`).to.not.equal(frame);
  const ra = snapshot(p.gen.processReused(frame, port, OutputMode.ENGINE_BUFFER));
  const rb = snapshot(p.ref.processReused(frame, port, OutputMode.ENGINE_BUFFER));
  expect(ra, `${what}: processReused`).to.deep.equal(rb);
  const ca = Buffer.from(frame);
  const cb = Buffer.from(frame);
  const ia = p.gen.processReused(ca, port, OutputMode.IN_PLACE);
  const ib = p.ref.processReused(cb, port, OutputMode.IN_PLACE);
  expect(snapshot(ia), `${what}: IN_PLACE`).to.deep.equal(snapshot(ib));
  expect(ia.frame === ca, `${what}: IN_PLACE wrote the input`).to.equal(ib.frame === cb);
  expect(ca.toString('hex'), `${what}: the input after IN_PLACE`).to.equal(cb.toString('hex'));
  expect(p.gen.stats, `${what}: stats`).to.deep.equal(p.ref.stats);
  return b;
}

function randomBytes(r: () => number, len: number): Buffer {
  const b = Buffer.alloc(len);
  for (let i = 0; i < len; i++) b[i] = r() & 0xff;
  return b;
}

function pick<T>(r: () => number, xs: readonly T[]): T {
  return xs[r() % xs.length]!;
}

const MACS = ['00:00:00:00:00:0a', '00:00:00:00:00:0b', '00:04:00:00:00:00', '00:04:00:00:00:01', '02:aa:bb:cc:dd:ee', 'ff:ff:ff:ff:ff:ff', '80:00:00:00:00:01'];
const ADDRS = ['10.0.0.10', '10.0.1.10', '10.0.2.1', '10.1.0.1', '192.168.7.9', '255.255.255.255', '0.0.0.0', '128.0.0.1'];

/** An IPv4 frame (UDP, TCP or other), any TTL, checksum right or wrong, sometimes not version 4. */
function ipv4Frame(r: () => number): Buffer {
  const proto = pick(r, [6, 17, 1]);
  const body = randomBytes(r, r() % 48);
  const l4 = proto === 6 ? tcp(r() & 0xffff, r() & 0xffff, r() >>> 0, body) : proto === 17 ? udp(r() & 0xffff, r() & 0xffff, body) : body;
  const h = ipv4({ src: pick(r, ADDRS), dst: pick(r, ADDRS), ttl: pick(r, [0, 1, 2, 3, 64, 255]), protocol: proto, payloadLength: l4.length, id: r() & 0xffff, goodChecksum: r() % 5 !== 0 });
  if (r() % 9 === 0) h[0] = 0x55; // version 5
  return Buffer.concat([ethernet(pick(r, MACS), pick(r, MACS), 0x0800), h, l4]);
}

/** Random bytes with the EtherType (and the IPv4 protocol) steered half the time. */
function noiseFrame(r: () => number): Buffer {
  const f = randomBytes(r, r() % 90);
  if (f.length > 13 && (r() & 1) === 1) f.writeUInt16BE(pick(r, [0x0800, 0x8100, 0x88b5, 0x8847]), 12);
  if (f.length > 23 && (r() & 1) === 1) f[23] = pick(r, [6, 17]);
  return f;
}

/** Mostly well-formed frames, some noise, some cut short anywhere. */
function anyFrame(r: () => number, make: (r: () => number) => Buffer = ipv4Frame): Buffer {
  const k = r() % 8;
  if (k < 4) return make(r);
  if (k < 6) return noiseFrame(r);
  const f = make(r);
  return f.subarray(0, r() % (f.length + 1));
}

describe('p4: the generated program function against the closures', () => {
  describe('the fixture programs', () => {

    it('simple_router + commands.txt: 3000 frames (routed, misses, TTL 0/1, bad checksums, short, noise) alike', () => {
      const p = pair(fixtureText('simple_router.json'));
      for (const e of [p.gen, p.ref]) expect(runCommands(e, fixtureText('commands.txt')).ok).to.equal(true);
      const r = xorshift(0xc0de);
      const seen = { routed: 0, dropped: 0, checksumError: 0, parserError: 0 };
      for (let i = 0; i < 3000; i++) {
        const res = compare(p, anyFrame(r), r() % 1024, `frame ${i}`);
        if (!res.dropped) seen.routed++;
        else seen.dropped++;
        if (res.checksumError) seen.checksumError++;
        if (res.parserError !== 0) seen.parserError++;
      }
      // every kind of outcome was exercised
      for (const [k, n] of Object.entries(seen)) expect(n, k).to.be.greaterThan(50);
    });

    it('simple_router: a routed frame is rewritten as RFC 1071 says, on the generated path', () => {
      const p = pair(fixtureText('simple_router.json'));
      for (const e of [p.gen, p.ref]) runCommands(e, fixtureText('commands.txt'));
      const payload = udp(1, 2, Buffer.alloc(10, 1));
      const f = Buffer.concat([ethernet('00:00:00:00:00:99', '00:00:00:00:00:11', 0x0800), ipv4({ src: '10.0.2.1', dst: '10.0.1.10', ttl: 64, protocol: 17, payloadLength: payload.length }), payload]);
      const out = compare(p, f, 1, 'routed').frame!;
      expect(out.subarray(0, 6).equals(mac('00:04:00:00:00:01'))).to.equal(true);
      expect(out.subarray(6, 12).equals(mac('00:aa:bb:00:00:01'))).to.equal(true);
      expect(out[14 + 8]).to.equal(63);
      expect(out.readUInt16BE(14 + 10)).to.equal(ipv4Checksum(out.subarray(14, 34)));
      expect(out.subarray(34).equals(payload)).to.equal(true);
    });

    it('simple_router: the tables change under the generated function (short arrays, Maps, deletes, defaults)', () => {
      const p = pair(fixtureText('simple_router.json'));
      for (const e of [p.gen, p.ref]) runCommands(e, fixtureText('commands.txt'));
      const r = xorshift(0x7ab1e);
      let added = 0;
      let mapRounds = 0;
      for (let round = 0; round < 30; round++) {
        // grow past the short array (8 entries: then the Maps are probed) and shrink back
        for (let k = 0; k < 3; k++) {
          const len = pick(r, [0, 8, 16, 24, 31, 32]);
          const cmd = `table_add ipv4_lpm set_nhop ${pick(r, ADDRS)}/${len} => ${pick(r, ADDRS)} ${r() % 4}`;
          if (both(p, cmd)) added++;
        }
        if (round % 4 === 3) for (let h = 0; h < 40; h++) both(p, `table_delete ipv4_lpm ${h}`);
        if (round % 7 === 6) both(p, 'table_clear forward');
        if (round % 7 === 0) both(p, `table_add forward set_dmac ${pick(r, ADDRS)} => ${pick(r, MACS)}`);
        if (round % 5 === 4) both(p, `table_set_default send_frame ${pick(r, ['_drop', 'rewrite_mac 00:01:02:03:04:05'])}`);
        if (p.gen.tables.get('ipv4_lpm')!.entries.size > 8) mapRounds++;
        for (let i = 0; i < 40; i++) compare(p, anyFrame(r), 1 + (r() % 2), `round ${round} frame ${i}`);
      }
      expect(added).to.be.greaterThan(20);
      expect(mapRounds).to.be.greaterThan(3);
    });

    it('l2_switch: 3000 frames with learning (digests installed as they come) alike, past 8 learned MACs', () => {
      const p = pair(fixtureText('l2_switch.json'));
      both(p, 'table_set_default smac mac_learn');
      both(p, 'table_set_default dmac broadcast');
      const r = xorshift(0x12);
      const pool = Array.from({ length: 14 }, (_, i) => `00:00:00:00:01:${i.toString(16).padStart(2, '0')}`);
      let learned = 0;
      let floods = 0;
      for (let i = 0; i < 3000; i++) {
        const f = r() % 10 === 0 ? noiseFrame(r) : Buffer.concat([ethernet(pick(r, pool), pick(r, pool), 0x88b5), randomBytes(r, r() % 60)]);
        const res = compare(p, f, r() % 8, `frame ${i}`);
        if (res.multicastGroup !== 0) floods++;
        for (const d of res.digests) {
          const m = d.values[0]!.toString(16).padStart(12, '0').match(/../g)!.join(':');
          if (both(p, `table_add smac _nop ${m}`)) learned++;
          both(p, `table_add dmac forward ${m} => ${d.values[1]}`);
        }
      }
      expect(learned).to.be.greaterThan(8);
      expect(floods).to.be.greaterThan(10);
    });

    it('parser_deparser_1: 2000 frames into Ethernet/IPv4/TCP/UDP and every truncation of a TCP frame alike', () => {
      const p = pair(fixtureText('parser_deparser_1.json'));
      const r = xorshift(0x9d);
      for (let i = 0; i < 2000; i++) compare(p, anyFrame(r), r() % 4, `frame ${i}`);
      const full = Buffer.concat([ethernet('02:00:00:00:00:02', '02:00:00:00:00:01', 0x0800), ipv4({ src: '1.1.1.1', dst: '2.2.2.2', ttl: 9, protocol: 6, payloadLength: 24 }), tcp(1, 2, 3, Buffer.alloc(4, 7))]);
      for (let n = 0; n <= full.length; n++) compare(p, full.subarray(0, n), 0, `length ${n}`);
    });

    it('frames over maxFrame are dropped alike (too-long, nothing parsed)', () => {
      const p = pair(fixtureText('simple_router.json'), { maxFrame: 100 });
      for (const e of [p.gen, p.ref]) runCommands(e, fixtureText('commands.txt'));
      const r = xorshift(3);
      for (let i = 0; i < 200; i++) {
        const payload = udp(1, 2, Buffer.alloc(r() % 120));
        const f = Buffer.concat([ethernet('00:00:00:00:00:99', '00:00:00:00:00:11', 0x0800), ipv4({ src: '10.0.2.1', dst: '10.0.1.10', ttl: 64, protocol: 17, payloadLength: payload.length }), payload]);
        const res = compare(p, f, 1, `frame ${i}`);
        if (f.length > 100) expect(res.reason).to.equal('too-long');
      }
    });

    it('fixtures outside the subset say why and run on the closures', () => {
      for (const name of ['exact_match_1.json', 'LPM_match_1.json', 'ternary_match_1.json']) {
        const e = P4Engine.load(fixtureText(name));
        expect(e.generated, name).to.equal(false);
        expect(e.codegenRefused, name).to.match(/table off the number path/); // 96-bit keys: the bigint path
        const ref = P4Engine.load(fixtureText(name), { codegen: false });
        const r = xorshift(name.length);
        for (let i = 0; i < 100; i++) {
          const f = anyFrame(r);
          expect(snapshot(e.process(f, 1)), name).to.deep.equal(snapshot(ref.process(f, 1)));
        }
      }
    });
  });

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
      for (const k of ['drop:program', 'out:true', 'digest', 'mgid', 'checksumError', 'parserError:1', 'parserError:4']) expect([...kinds]).to.include(k);
      expect(countedRounds).to.be.greaterThan(0);
    });

    it('a parser that loops is written as a bounded loop and stops at the budget alike', () => {
      const prog = syntheticProgram([{ match_type: 'exact', target: ['ethernet', 'etherType'] }], 'exact');
      prog.parsers[0].parse_states = [
        { name: 'start', id: 0, parser_ops: [{ op: 'extract', parameters: [{ type: 'regular', value: 'ethernet' }] }], transition_key: [{ type: 'field', value: ['ethernet', 'etherType'] }], transitions: [{ type: 'hexstr', value: '0x0800', mask: null, next_state: 'again' }, { type: 'default', value: null, mask: null, next_state: null }] },
        { name: 'again', id: 1, parser_ops: [], transition_key: [], transitions: [{ type: 'default', value: null, mask: null, next_state: 'start' }] },
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
        actions: [{ name: 'bump', id: 1, runtime_data: [], primitives: [{ op: 'add_to_field', parameters: [{ type: 'field', value: ['ethernet', 'etherType'] }, { type: 'hexstr', value: '0x1' }] }] }],
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
      ['a 64-bit field', /over 48 bits/, (prog) => prog.header_types.push({ name: 'w_t', id: 9, fields: [['x', 64]] }) && prog.headers.push({ name: 'w', id: 9, header_type: 'w_t', metadata: true })],
      ['a header stack', /stacks/, (prog) => {
        prog.headers.push({ name: 'e2', id: 8, header_type: 'ethernet_t', metadata: false });
        prog.header_stacks = [{ name: 'st', id: 0, header_type: 'ethernet_t', size: 1, header_ids: [8] }];
      }],
      ['a lookahead transition key', /transition key other than fields/, (prog) => {
        prog.parsers[0].parse_states[0].transition_key = [{ type: 'lookahead', value: [0, 8] }];
        prog.parsers[0].parse_states[0].transitions.unshift({ type: 'hexstr', value: '0x01', mask: null, next_state: null });
      }],
      ['a parse value set', /transition outside the subset/, (prog) => {
        prog.parse_vsets = [{ name: 'vs', id: 0, compressed_bitwidth: 16 }];
        prog.parsers[0].parse_states[0].transition_key = [{ type: 'field', value: ['ethernet', 'etherType'] }];
        prog.parsers[0].parse_states[0].transitions.unshift({ type: 'parse_vset', value: 'vs', mask: null, next_state: null });
      }],
      ['a register write', /primitive outside the subset/, (prog) => {
        prog.register_arrays = [{ name: 'reg', id: 0, size: 4, bitwidth: 16 }];
        prog.actions[0].primitives.push({ op: 'register_write', parameters: [{ type: 'register_array', value: 'reg' }, { type: 'hexstr', value: '0x1' }, { type: 'field', value: ['ethernet', 'etherType'] }] });
      }],
      ['a counter', /primitive outside the subset/, (prog) => {
        prog.counter_arrays = [{ name: 'cnt', id: 0, size: 4, is_direct: false }];
        prog.actions[0].primitives.push({ op: 'count', parameters: [{ type: 'counter_array', value: 'cnt' }, { type: 'hexstr', value: '0x1' }] });
      }],
      ['a multiplication (the bigint path)', /operator off the number path/, (prog) => {
        prog.actions[0].primitives.push({ op: 'modify_field', parameters: [{ type: 'field', value: ['ethernet', 'etherType'] }, { type: 'expression', value: { op: '*', left: { type: 'field', value: ['ethernet', 'etherType'] }, right: { type: 'hexstr', value: '0x3' } } }] });
      }],
      ['a masked modify_field', /masked modify_field/, (prog) => {
        prog.actions[0].primitives.push({ op: 'modify_field', parameters: [{ type: 'field', value: ['ethernet', 'etherType'] }, { type: 'hexstr', value: '0xffff' }, { type: 'hexstr', value: '0x00f0' }] });
      }],
      ['a bit_and primitive', /primitive outside the subset/, (prog) => {
        prog.actions[0].primitives.push({ op: 'bit_and', parameters: [{ type: 'field', value: ['ethernet', 'etherType'] }, { type: 'field', value: ['ethernet', 'etherType'] }, { type: 'hexstr', value: '0xff' }] });
      }],
      ['a table on 96 bits of exact key (the bigint path)', /table off the number path/, (prog) => {
        prog.pipelines[0].tables[0].key.push({ match_type: 'exact', target: ['ethernet', 'srcAddr'], mask: null });
      }],
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
      const keep = new Set(['standard_metadata', ...prog.header_types[0].fields.map((x: [string, number]) => x[0]), 'ingress', 'egress']);
      const add = (n: string) => {
        if (!keep.has(n)) evil.set(n, `x'); globalThis.__p4pwned = 1; ('${n}` + '`${1}*/');
      };
      for (const t of prog.header_types) {
        add(t.name);
        if (t.name !== 'standard_metadata_t') for (const [n] of t.fields) add(n);
      }
      for (const list of [prog.headers, prog.parsers[0].parse_states, prog.actions, prog.pipelines[0].tables, prog.pipelines[1].tables, prog.pipelines[0].conditionals, prog.pipelines[0].action_calls, prog.calculations, prog.checksums, prog.learn_lists]) {
        for (const x of list) add(x.name);
      }
      for (const a of prog.actions) for (const d of a.runtime_data) add(d.name);
      const rename = (o: any, parentKey: string): any => {
        if (typeof o === 'string') return ['op', 'type', 'match_type', 'algo'].includes(parentKey) ? o : evil.get(o) ?? o;
        if (Array.isArray(o)) return o.map((x) => rename(x, parentKey));
        if (o && typeof o === 'object') {
          const out: any = {};
          for (const [k, val] of Object.entries(o)) out[parentKey === 'next_tables' ? evil.get(k) ?? k : k] = rename(val, k);
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

    it('topoOrder: forward order of a DAG from its start, undefined for a cycle', () => {
      expect(topoOrder(0, [[1, 2], [3], [3, -1], []])).to.deep.equal([0, 2, 1, 3]);
      expect(topoOrder(2, [[1], [], [0, -1]])).to.deep.equal([2, 0, 1]);
      expect(topoOrder(0, [[1], [2], [0]])).to.equal(undefined);
      expect(topoOrder(0, [[0]])).to.equal(undefined);
      expect(topoOrder(0, [[5]])).to.equal(undefined);
    });
  });
});

// ---- the subset program: every construct the generator writes out ----

const f = (h: string, n: string) => ({ type: 'field', value: [h, n] });
const hex = (v: string) => ({ type: 'hexstr', value: v });
const rd = (i: number) => ({ type: 'runtime_data', value: i });
const expr = (op: string, left: unknown, right: unknown) => ({ type: 'expression', value: { op, left, right } });
const valid = (h: string) => expr('valid', null, { type: 'header', value: h });
const prim = (op: string, ...parameters: unknown[]) => ({ op, parameters });
const extract = (h: string) => prim('extract', { type: 'regular', value: h });
const arm = (value: string | null, next: string | null, mask: string | null = null) => ({ type: value === null ? 'default' : 'hexstr', value, mask, next_state: next });

/**
 * Ethernet, an optional tag (sub-byte fields, a 32-bit two-field transition
 * key, masked arms), IPv4 (verify), an L4 header with a pseudo-header
 * checksum over the payload, an `extra` header only actions add, a second
 * tag only copy_header fills; tables of every shape the generator writes.
 */
export function subsetProgram(): any {
  const ipv4Fields = [['version', 4], ['ihl', 4], ['diffserv', 8], ['totalLen', 16], ['identification', 16], ['flags', 3], ['fragOffset', 13], ['ttl', 8], ['protocol', 8], ['hdrChecksum', 16], ['srcAddr', 32], ['dstAddr', 32]];
  return {
    header_types: [
      { name: 'standard_metadata_t', id: 0, fields: [['ingress_port', 9], ['packet_length', 32], ['egress_spec', 9], ['egress_port', 9], ['mcast_grp', 16], ['_padding', 5]] },
      { name: 'ethernet_t', id: 1, fields: [['dstAddr', 48], ['srcAddr', 48], ['etherType', 16]] },
      { name: 'tag_t', id: 2, fields: [['pcp', 3], ['cfi', 1], ['vid', 12], ['type', 16]] },
      { name: 'ipv4_t', id: 3, fields: ipv4Fields },
      { name: 'l4_t', id: 4, fields: [['srcPort', 16], ['dstPort', 16], ['len', 16], ['csum', 16]] },
      { name: 'extra_t', id: 5, fields: [['x', 32]] },
      { name: 'opt_t', id: 7, fields: [['cookie', 48]] },
      { name: 'meta_t', id: 6, fields: [['a', 8], ['b', 16], ['c', 32], ['flag', 1], ['_pad', 7]] },
    ],
    headers: [
      { name: 'standard_metadata', id: 0, header_type: 'standard_metadata_t', metadata: true },
      { name: 'ethernet', id: 1, header_type: 'ethernet_t', metadata: false },
      { name: 'tag', id: 2, header_type: 'tag_t', metadata: false },
      { name: 'tag2', id: 3, header_type: 'tag_t', metadata: false },
      { name: 'ipv4', id: 4, header_type: 'ipv4_t', metadata: false },
      { name: 'l4', id: 5, header_type: 'l4_t', metadata: false },
      { name: 'extra', id: 6, header_type: 'extra_t', metadata: false },
      { name: 'opt', id: 8, header_type: 'opt_t', metadata: false },
      { name: 'meta', id: 7, header_type: 'meta_t', metadata: true },
    ],
    parsers: [
      {
        name: 'parser',
        id: 0,
        init_state: 'start',
        parse_states: [
          {
            name: 'start',
            id: 0,
            parser_ops: [extract('ethernet')],
            transition_key: [f('ethernet', 'etherType')],
            transitions: [arm('0x8100', 'parse_tag'), arm('0x0800', 'parse_ipv4'), arm('0x8800', 'parse_tag', '0xff00'), arm('0x100000000', 'parse_ipv4', '0x10000ffff'), arm(null, null)],
          },
          {
            name: 'parse_tag',
            id: 1,
            parser_ops: [extract('tag'), prim('set', f('meta', 'a'), expr('+', f('tag', 'pcp'), hex('0x1')))],
            transition_key: [f('tag', 'vid'), f('tag', 'type')],
            transitions: [arm('0x000188b6', 'parse_opt'), arm('0x00050800', 'parse_ipv4'), arm('0x00000800', 'parse_ipv4'), arm('0x00010000', 'parse_ipv4', '0x000f0000'), arm(null, null)],
          },
          {
            name: 'parse_ipv4',
            id: 2,
            parser_ops: [extract('ipv4'), prim('verify', expr('==', f('ipv4', 'version'), hex('0x4')), hex('0x1'))],
            transition_key: [f('ipv4', 'protocol')],
            transitions: [arm('0x06', 'parse_l4'), arm('0x11', 'parse_l4'), arm(null, null)],
          },
          { name: 'parse_l4', id: 3, parser_ops: [extract('l4')], transition_key: [], transitions: [arm(null, null)] },
          // opt.cookie is read by nothing but the deparse: the generated code leaves its bytes in the frame
          { name: 'parse_opt', id: 4, parser_ops: [extract('opt')], transition_key: [], transitions: [arm(null, 'parse_ipv4')] },
        ],
      },
    ],
    deparsers: [{ name: 'deparser', id: 0, order: ['ethernet', 'tag', 'tag2', 'opt', 'ipv4', 'l4', 'extra'] }],
    actions: [
      { name: 'set_nhop', id: 0, runtime_data: [{ name: 'port', bitwidth: 9 }, { name: 'dmac', bitwidth: 48 }], primitives: [prim('modify_field', f('standard_metadata', 'egress_spec'), rd(0)), prim('modify_field', f('ethernet', 'dstAddr'), rd(1)), prim('subtract_from_field', f('ipv4', 'ttl'), hex('0x1'))] },
      { name: '_drop', id: 1, runtime_data: [], primitives: [prim('drop')] },
      { name: 'set_mgid', id: 2, runtime_data: [{ name: 'g', bitwidth: 16 }], primitives: [prim('modify_field', f('standard_metadata', 'mcast_grp'), rd(0))] },
      { name: 'do_exit', id: 3, runtime_data: [{ name: 'v', bitwidth: 8 }], primitives: [prim('modify_field', f('meta', 'a'), rd(0)), prim('exit'), prim('modify_field', f('ethernet', 'etherType'), hex('0x9999'))] },
      { name: 'add_extra', id: 4, runtime_data: [{ name: 'x', bitwidth: 32 }], primitives: [prim('add_header', { type: 'header', value: 'extra' }), prim('modify_field', f('extra', 'x'), rd(0))] },
      { name: 'rm_tag', id: 5, runtime_data: [], primitives: [prim('remove_header', { type: 'header', value: 'tag' }), prim('modify_field', f('ethernet', 'etherType'), hex('0x0800'))] },
      { name: 'dup_tag', id: 6, runtime_data: [], primitives: [prim('copy_header', { type: 'header', value: 'tag2' }, { type: 'header', value: 'tag' })] },
      {
        name: 'mark',
        id: 7,
        runtime_data: [],
        primitives: [
          prim('modify_field', f('meta', 'b'), expr('+', f('meta', 'a'), hex('0x10'))),
          prim('add_to_field', f('meta', 'c'), f('ipv4', 'ttl')),
          prim('modify_field', f('meta', 'flag'), expr('>', f('meta', 'a'), hex('0x3'))),
          prim('subtract_from_field', f('meta', 'b'), f('ipv4', 'protocol')),
          prim('modify_field', f('ipv4', 'diffserv'), expr('-', f('meta', 'a'), hex('0x5'))),
        ],
      },
      { name: 'rewrite_src', id: 8, runtime_data: [{ name: 'smac', bitwidth: 48 }], primitives: [prim('modify_field', f('ethernet', 'srcAddr'), rd(0)), prim('modify_field', f('ipv4', 'identification'), f('meta', 'b'))] },
      { name: 'learn', id: 9, runtime_data: [], primitives: [prim('generate_digest', hex('0x1'), hex('0x5'))] },
      { name: 'narrow', id: 10, runtime_data: [{ name: 'v', bitwidth: 32 }], primitives: [prim('modify_field', f('ipv4', 'ttl'), rd(0)), prim('modify_field', f('meta', 'b'), f('meta', 'c')), prim('modify_field', f('ipv4', 'flags'), f('tag', '$valid$')), prim('add_to_field', f('l4', 'len'), hex('0x7fff'))] },
      { name: '_nop', id: 11, runtime_data: [], primitives: [prim('no_op')] },
      { name: 'mdrop', id: 12, runtime_data: [], primitives: [prim('mark_to_drop')] },
      { name: 'set_cookie', id: 13, runtime_data: [{ name: 'c', bitwidth: 48 }], primitives: [prim('modify_field', f('opt', 'cookie'), rd(0))] },
    ],
    pipelines: [
      {
        name: 'ingress',
        id: 0,
        init_table: 'c_ttl',
        tables: [
          { name: 't_lpm', id: 0, match_type: 'lpm', type: 'simple', max_size: 64, with_counters: false, key: [{ match_type: 'lpm', target: ['ipv4', 'dstAddr'], mask: null }], actions: ['set_nhop', '_drop', '_nop'], next_tables: { set_nhop: 't_multi', _drop: null, _nop: 't_multi' }, base_default_next: 't_multi' },
          { name: 't_multi', id: 1, match_type: 'lpm', type: 'simple', max_size: 64, with_counters: true, key: [{ match_type: 'exact', target: ['meta', 'a'], mask: null }, { match_type: 'lpm', target: ['ipv4', 'srcAddr'], mask: null }], actions: ['add_extra', '_nop'], next_tables: { __HIT__: 't_tern', __MISS__: 'a_call' }, base_default_next: null },
          {
            name: 't_tern',
            id: 2,
            match_type: 'ternary',
            type: 'simple',
            max_size: 64,
            with_counters: false,
            key: [{ match_type: 'ternary', target: ['ethernet', 'etherType'], mask: null }, { match_type: 'valid', target: 'tag', mask: null }, { match_type: 'ternary', target: ['ipv4', 'ttl'], mask: '0xf0' }],
            actions: ['set_mgid', 'do_exit', 'rm_tag', 'dup_tag', '_nop', 'mdrop', 'set_cookie'],
            next_tables: { set_mgid: null, do_exit: null, rm_tag: null, dup_tag: null, _nop: null, mdrop: null, set_cookie: null },
            base_default_next: null,
            default_entry: { action_id: 11, action_const: false, action_data: [], action_entry_const: false },
          },
        ],
        conditionals: [
          {
            name: 'c_ttl',
            id: 0,
            expression: expr('or', expr('and', valid('ipv4'), expr('>', f('ipv4', 'ttl'), hex('0x1'))), expr('and', expr('not', null, valid('ipv4')), expr('>=', f('meta', 'a'), hex('0x2')))),
            true_next: 't_lpm',
            false_next: 't_tern',
          },
        ],
        action_calls: [{ name: 'a_call', id: 0, action_id: 7, next_node: 't_tern' }],
      },
      {
        name: 'egress',
        id: 1,
        init_table: 't_eg',
        tables: [{ name: 't_eg', id: 3, match_type: 'exact', type: 'simple', max_size: 64, with_counters: false, key: [{ match_type: 'exact', target: ['standard_metadata', 'egress_port'], mask: null }], actions: ['rewrite_src', 'learn', 'narrow', 'mdrop', '_nop'], next_tables: { rewrite_src: null, learn: null, narrow: null, mdrop: null, _nop: null }, base_default_next: null }],
        conditionals: [],
      },
    ],
    calculations: [
      { name: 'ipv4_csum', id: 0, algo: 'csum16', input: ipv4Fields.filter(([n]) => n !== 'hdrChecksum').map(([n]) => f('ipv4', n as string)) },
      { name: 'l4_csum', id: 1, algo: 'csum16', input: [f('ipv4', 'srcAddr'), f('ipv4', 'dstAddr'), { type: 'hexstr', value: '0x0006', bitwidth: 16 }, f('l4', 'srcPort'), f('l4', 'dstPort'), f('l4', 'len'), { type: 'payload', value: null }] },
      { name: 'tag_csum', id: 2, algo: 'csum16', input: [f('tag', 'type')] },
    ],
    checksums: [
      { name: 'c_ipv4', id: 0, target: ['ipv4', 'hdrChecksum'], type: 'generic', calculation: 'ipv4_csum', if_cond: null },
      { name: 'c_l4', id: 1, target: ['l4', 'csum'], type: 'generic', calculation: 'l4_csum', if_cond: valid('l4') },
      { name: 'c_tag', id: 2, target: ['tag', 'vid'], type: 'generic', calculation: 'tag_csum', if_cond: expr('==', f('tag', 'pcp'), hex('0x3')), verify: false, update: true },
    ],
    learn_lists: [{ name: 'digest5', id: 5, elements: [f('ethernet', 'srcAddr'), f('standard_metadata', 'ingress_port'), hex('0x7'), f('tag', '$valid$')] }],
  };
}

/** Frames for subsetProgram: Ethernet, maybe a tag (VLAN-like or 0x88xx), IPv4 with TCP/UDP-like L4, payloads of any parity. */
function subsetFrame(r: () => number): Buffer {
  const tagged = r() % 3;
  const parts: Buffer[] = [];
  const inner = r() % 4 === 0 ? pick(r, [0x0806, 0x86dd]) : 0x0800;
  if (tagged === 0) parts.push(ethernet(pick(r, MACS), pick(r, MACS), inner));
  else {
    parts.push(ethernet(pick(r, MACS), pick(r, MACS), pick(r, [0x8100, 0x88a8, 0x8800])));
    const t = Buffer.alloc(4);
    const opt = r() % 3 === 0;
    t.writeUInt16BE(((r() % 8) << 13) | ((r() & 1) << 12) | (opt ? 1 : pick(r, [0, 5, 1, 0x15, r() & 0xfff])), 0);
    t.writeUInt16BE(opt ? 0x88b6 : inner, 2);
    parts.push(t);
    if (opt) parts.push(randomBytes(r, 6));
  }
  const body = randomBytes(r, r() % 40);
  const l4 = Buffer.alloc(8);
  l4.writeUInt16BE(r() & 0xffff, 0);
  l4.writeUInt16BE(r() & 0xffff, 2);
  l4.writeUInt16BE(8 + body.length, 4);
  l4.writeUInt16BE(r() & 0xffff, 6);
  const proto = pick(r, [6, 17, 1]);
  const h = ipv4({ src: pick(r, ADDRS), dst: pick(r, ADDRS), ttl: pick(r, [0, 1, 2, 3, 17, 64, 255]), protocol: proto, payloadLength: 8 + body.length, id: r() & 0xffff, goodChecksum: r() % 4 !== 0 });
  if (r() % 10 === 0) h[0] = 0x65;
  parts.push(h, l4, body);
  return Buffer.concat(parts);
}

/** Random entries for every table of subsetProgram, the same on both engines. */
function fillSubsetTables(p: Pair, r: () => number, names: Map<string, string> = new Map()): void {
  const macOf = () => pick(r, MACS);
  // runtime commands name tables and actions by token: the renamed program's names have spaces, so
  // its tables are filled through the same MatchTable API the commands use (below, `add`)
  const n = (x: string) => names.get(x) ?? x;
  if (names.size > 0) return fillByApi(p, r, n);
  for (let i = 0; i < 4 + (r() % 10); i++) {
    const len = pick(r, [0, 1, 8, 16, 24, 31, 32]);
    const a = pick(r, ['set_nhop', 'set_nhop', '_drop', '_nop']);
    both(p, `table_add t_lpm ${a} ${pick(r, ADDRS)}/${len}${a === 'set_nhop' ? ` => ${r() % 6} ${macOf()}` : ''}`);
  }
  if (r() % 2 === 0) both(p, 'table_set_default t_lpm set_nhop 3 00:00:00:00:00:33');
  for (let i = 0; i < 3 + (r() % 12); i++) {
    const a = pick(r, ['add_extra', '_nop']);
    both(p, `table_add t_multi ${a} ${r() % 9} ${pick(r, ADDRS)}/${pick(r, [0, 8, 16, 32])}${a === 'add_extra' ? ` => ${r() >>> 0}` : ''}`);
  }
  for (let i = 0; i < 3 + (r() % 8); i++) {
    const a = pick(r, ['set_mgid', 'set_mgid', 'do_exit', 'rm_tag', 'dup_tag', '_nop', 'mdrop', 'set_cookie']);
    const data = a === 'set_mgid' ? ` ${1 + (r() % 100)}` : a === 'do_exit' ? ` ${r() & 0xff}` : a === 'set_cookie' ? ` ${macOf()}` : '';
    both(p, `table_add t_tern ${a} 0x${pick(r, ['0800', '8100', '0806', '8800'])}&&&0x${pick(r, ['ffff', 'ff00', '0000'])} ${r() & 1} 0x${pick(r, ['00', '40', 'f0', '10'])}&&&0x${pick(r, ['f0', '00'])} =>${data} ${r() % 5}`);
  }
  for (let port = 0; port < 6; port++) {
    const a = pick(r, ['rewrite_src', 'learn', 'narrow', 'mdrop', '_nop']);
    const data = a === 'rewrite_src' ? ` ${macOf()}` : a === 'narrow' ? ` ${r() >>> 0}` : '';
    both(p, `table_add t_eg ${a} ${port} =>${data}`);
  }
  both(p, `table_set_default t_eg ${pick(r, ['learn', '_nop', 'narrow 300'])}`);
}

/** A few entries for the renamed subset program through MatchTable.add (the same on both engines). */
function fillByApi(p: Pair, r: () => number, n: (x: string) => string): void {
  const seed = r() | 1;
  for (const e of [p.gen, p.ref]) {
    const r2 = xorshift(seed);
    const lpm = e.tables.get(n('t_lpm'))!;
    const nhop = e.actions.get(n('set_nhop'))!;
    for (const a of ADDRS) expect(lpm.add([lpmSpec(BigInt(ip(a).readUInt32BE(0)), 16 + (r2() % 17), 32)], nhop, [BigInt(r2() % 6), 0x0a0b0c0d0e0fn], 0)).to.be.a('number');
    const eg = e.tables.get(n('t_eg'))!;
    eg.setDefault(e.actions.get(n('learn'))!, []);
    eg.add([exactSpec(1n, 9)], e.actions.get(n('rewrite_src'))!, [0x020000000001n], 0);
    const tern = e.tables.get(n('t_tern'))!;
    tern.add([ternarySpec(0x0800n, 0xff00n), exactSpec(0n, 1), ternarySpec(0n, 0n)], e.actions.get(n('set_mgid'))!, [7n], 1);
  }
}
