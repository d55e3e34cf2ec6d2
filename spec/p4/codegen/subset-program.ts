// The subset program: every construct the generator writes out, the frames
// for it and the random table entries the codegen specs install on both engines.

import { expect } from 'chai';
import { exactSpec, lpmSpec, ternarySpec } from '../../../lib/p4/compile/tables/entries';
import { ethernet, ip, ipv4 } from '../../support/p4';
import { xorshift } from '../../support/rng';
import { both, MACS, ADDRS, pick, Pair, randomBytes } from './compare';

const f = (h: string, n: string) => ({ type: 'field', value: [h, n] });
const hex = (v: string) => ({ type: 'hexstr', value: v });
const rd = (i: number) => ({ type: 'runtime_data', value: i });
const expr = (op: string, left: unknown, right: unknown) => ({ type: 'expression', value: { op, left, right } });
const valid = (h: string) => expr('valid', null, { type: 'header', value: h });
const prim = (op: string, ...parameters: unknown[]) => ({ op, parameters });
const extract = (h: string) => prim('extract', { type: 'regular', value: h });
const arm = (value: string | null, next: string | null, mask: string | null = null) => ({
  type: value === null ? 'default' : 'hexstr',
  value,
  mask,
  next_state: next,
});

/**
 * Ethernet, an optional tag (sub-byte fields, a 32-bit two-field transition
 * key, masked arms), IPv4 (verify), an L4 header with a pseudo-header
 * checksum over the payload, an `extra` header only actions add, a second
 * tag only copy_header fills; tables of every shape the generator writes.
 */
export function subsetProgram(): any {
  const ipv4Fields = [
    ['version', 4],
    ['ihl', 4],
    ['diffserv', 8],
    ['totalLen', 16],
    ['identification', 16],
    ['flags', 3],
    ['fragOffset', 13],
    ['ttl', 8],
    ['protocol', 8],
    ['hdrChecksum', 16],
    ['srcAddr', 32],
    ['dstAddr', 32],
  ];
  return {
    header_types: [
      {
        name: 'standard_metadata_t',
        id: 0,
        fields: [
          ['ingress_port', 9],
          ['packet_length', 32],
          ['egress_spec', 9],
          ['egress_port', 9],
          ['mcast_grp', 16],
          ['_padding', 5],
        ],
      },
      {
        name: 'ethernet_t',
        id: 1,
        fields: [
          ['dstAddr', 48],
          ['srcAddr', 48],
          ['etherType', 16],
        ],
      },
      {
        name: 'tag_t',
        id: 2,
        fields: [
          ['pcp', 3],
          ['cfi', 1],
          ['vid', 12],
          ['type', 16],
        ],
      },
      { name: 'ipv4_t', id: 3, fields: ipv4Fields },
      {
        name: 'l4_t',
        id: 4,
        fields: [
          ['srcPort', 16],
          ['dstPort', 16],
          ['len', 16],
          ['csum', 16],
        ],
      },
      { name: 'extra_t', id: 5, fields: [['x', 32]] },
      { name: 'opt_t', id: 7, fields: [['cookie', 48]] },
      {
        name: 'meta_t',
        id: 6,
        fields: [
          ['a', 8],
          ['b', 16],
          ['c', 32],
          ['flag', 1],
          ['_pad', 7],
        ],
      },
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
            transitions: [
              arm('0x8100', 'parse_tag'),
              arm('0x0800', 'parse_ipv4'),
              arm('0x8800', 'parse_tag', '0xff00'),
              arm('0x100000000', 'parse_ipv4', '0x10000ffff'),
              arm(null, null),
            ],
          },
          {
            name: 'parse_tag',
            id: 1,
            parser_ops: [extract('tag'), prim('set', f('meta', 'a'), expr('+', f('tag', 'pcp'), hex('0x1')))],
            transition_key: [f('tag', 'vid'), f('tag', 'type')],
            transitions: [
              arm('0x000188b6', 'parse_opt'),
              arm('0x00050800', 'parse_ipv4'),
              arm('0x00000800', 'parse_ipv4'),
              arm('0x00010000', 'parse_ipv4', '0x000f0000'),
              arm(null, null),
            ],
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
          {
            name: 'parse_opt',
            id: 4,
            parser_ops: [extract('opt')],
            transition_key: [],
            transitions: [arm(null, 'parse_ipv4')],
          },
        ],
      },
    ],
    deparsers: [{ name: 'deparser', id: 0, order: ['ethernet', 'tag', 'tag2', 'opt', 'ipv4', 'l4', 'extra'] }],
    actions: [
      {
        name: 'set_nhop',
        id: 0,
        runtime_data: [
          { name: 'port', bitwidth: 9 },
          { name: 'dmac', bitwidth: 48 },
        ],
        primitives: [
          prim('modify_field', f('standard_metadata', 'egress_spec'), rd(0)),
          prim('modify_field', f('ethernet', 'dstAddr'), rd(1)),
          prim('subtract_from_field', f('ipv4', 'ttl'), hex('0x1')),
        ],
      },
      { name: '_drop', id: 1, runtime_data: [], primitives: [prim('drop')] },
      {
        name: 'set_mgid',
        id: 2,
        runtime_data: [{ name: 'g', bitwidth: 16 }],
        primitives: [prim('modify_field', f('standard_metadata', 'mcast_grp'), rd(0))],
      },
      {
        name: 'do_exit',
        id: 3,
        runtime_data: [{ name: 'v', bitwidth: 8 }],
        primitives: [
          prim('modify_field', f('meta', 'a'), rd(0)),
          prim('exit'),
          prim('modify_field', f('ethernet', 'etherType'), hex('0x9999')),
        ],
      },
      {
        name: 'add_extra',
        id: 4,
        runtime_data: [{ name: 'x', bitwidth: 32 }],
        primitives: [
          prim('add_header', { type: 'header', value: 'extra' }),
          prim('modify_field', f('extra', 'x'), rd(0)),
        ],
      },
      {
        name: 'rm_tag',
        id: 5,
        runtime_data: [],
        primitives: [
          prim('remove_header', { type: 'header', value: 'tag' }),
          prim('modify_field', f('ethernet', 'etherType'), hex('0x0800')),
        ],
      },
      {
        name: 'dup_tag',
        id: 6,
        runtime_data: [],
        primitives: [prim('copy_header', { type: 'header', value: 'tag2' }, { type: 'header', value: 'tag' })],
      },
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
      {
        name: 'rewrite_src',
        id: 8,
        runtime_data: [{ name: 'smac', bitwidth: 48 }],
        primitives: [
          prim('modify_field', f('ethernet', 'srcAddr'), rd(0)),
          prim('modify_field', f('ipv4', 'identification'), f('meta', 'b')),
        ],
      },
      { name: 'learn', id: 9, runtime_data: [], primitives: [prim('generate_digest', hex('0x1'), hex('0x5'))] },
      {
        name: 'narrow',
        id: 10,
        runtime_data: [{ name: 'v', bitwidth: 32 }],
        primitives: [
          prim('modify_field', f('ipv4', 'ttl'), rd(0)),
          prim('modify_field', f('meta', 'b'), f('meta', 'c')),
          prim('modify_field', f('ipv4', 'flags'), f('tag', '$valid$')),
          prim('add_to_field', f('l4', 'len'), hex('0x7fff')),
        ],
      },
      { name: '_nop', id: 11, runtime_data: [], primitives: [prim('no_op')] },
      { name: 'mdrop', id: 12, runtime_data: [], primitives: [prim('mark_to_drop')] },
      {
        name: 'set_cookie',
        id: 13,
        runtime_data: [{ name: 'c', bitwidth: 48 }],
        primitives: [prim('modify_field', f('opt', 'cookie'), rd(0))],
      },
    ],
    pipelines: [
      {
        name: 'ingress',
        id: 0,
        init_table: 'c_ttl',
        tables: [
          {
            name: 't_lpm',
            id: 0,
            match_type: 'lpm',
            type: 'simple',
            max_size: 64,
            with_counters: false,
            key: [{ match_type: 'lpm', target: ['ipv4', 'dstAddr'], mask: null }],
            actions: ['set_nhop', '_drop', '_nop'],
            next_tables: { set_nhop: 't_multi', _drop: null, _nop: 't_multi' },
            base_default_next: 't_multi',
          },
          {
            name: 't_multi',
            id: 1,
            match_type: 'lpm',
            type: 'simple',
            max_size: 64,
            with_counters: true,
            key: [
              { match_type: 'exact', target: ['meta', 'a'], mask: null },
              { match_type: 'lpm', target: ['ipv4', 'srcAddr'], mask: null },
            ],
            actions: ['add_extra', '_nop'],
            next_tables: { __HIT__: 't_tern', __MISS__: 'a_call' },
            base_default_next: null,
          },
          {
            name: 't_tern',
            id: 2,
            match_type: 'ternary',
            type: 'simple',
            max_size: 64,
            with_counters: false,
            key: [
              { match_type: 'ternary', target: ['ethernet', 'etherType'], mask: null },
              { match_type: 'valid', target: 'tag', mask: null },
              { match_type: 'ternary', target: ['ipv4', 'ttl'], mask: '0xf0' },
            ],
            actions: ['set_mgid', 'do_exit', 'rm_tag', 'dup_tag', '_nop', 'mdrop', 'set_cookie'],
            next_tables: {
              set_mgid: null,
              do_exit: null,
              rm_tag: null,
              dup_tag: null,
              _nop: null,
              mdrop: null,
              set_cookie: null,
            },
            base_default_next: null,
            default_entry: { action_id: 11, action_const: false, action_data: [], action_entry_const: false },
          },
        ],
        conditionals: [
          {
            name: 'c_ttl',
            id: 0,
            expression: expr(
              'or',
              expr('and', valid('ipv4'), expr('>', f('ipv4', 'ttl'), hex('0x1'))),
              expr('and', expr('not', null, valid('ipv4')), expr('>=', f('meta', 'a'), hex('0x2'))),
            ),
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
        tables: [
          {
            name: 't_eg',
            id: 3,
            match_type: 'exact',
            type: 'simple',
            max_size: 64,
            with_counters: false,
            key: [{ match_type: 'exact', target: ['standard_metadata', 'egress_port'], mask: null }],
            actions: ['rewrite_src', 'learn', 'narrow', 'mdrop', '_nop'],
            next_tables: { rewrite_src: null, learn: null, narrow: null, mdrop: null, _nop: null },
            base_default_next: null,
          },
        ],
        conditionals: [],
      },
    ],
    calculations: [
      {
        name: 'ipv4_csum',
        id: 0,
        algo: 'csum16',
        input: ipv4Fields.filter(([n]) => n !== 'hdrChecksum').map(([n]) => f('ipv4', n as string)),
      },
      {
        name: 'l4_csum',
        id: 1,
        algo: 'csum16',
        input: [
          f('ipv4', 'srcAddr'),
          f('ipv4', 'dstAddr'),
          { type: 'hexstr', value: '0x0006', bitwidth: 16 },
          f('l4', 'srcPort'),
          f('l4', 'dstPort'),
          f('l4', 'len'),
          { type: 'payload', value: null },
        ],
      },
      { name: 'tag_csum', id: 2, algo: 'csum16', input: [f('tag', 'type')] },
    ],
    checksums: [
      {
        name: 'c_ipv4',
        id: 0,
        target: ['ipv4', 'hdrChecksum'],
        type: 'generic',
        calculation: 'ipv4_csum',
        if_cond: null,
      },
      { name: 'c_l4', id: 1, target: ['l4', 'csum'], type: 'generic', calculation: 'l4_csum', if_cond: valid('l4') },
      {
        name: 'c_tag',
        id: 2,
        target: ['tag', 'vid'],
        type: 'generic',
        calculation: 'tag_csum',
        if_cond: expr('==', f('tag', 'pcp'), hex('0x3')),
        verify: false,
        update: true,
      },
    ],
    learn_lists: [
      {
        name: 'digest5',
        id: 5,
        elements: [f('ethernet', 'srcAddr'), f('standard_metadata', 'ingress_port'), hex('0x7'), f('tag', '$valid$')],
      },
    ],
  };
}

/** Frames for subsetProgram: Ethernet, maybe a tag (VLAN-like or 0x88xx), IPv4 with TCP/UDP-like L4, payloads of any parity. */
export function subsetFrame(r: () => number): Buffer {
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
  const h = ipv4({
    src: pick(r, ADDRS),
    dst: pick(r, ADDRS),
    ttl: pick(r, [0, 1, 2, 3, 17, 64, 255]),
    protocol: proto,
    payloadLength: 8 + body.length,
    id: r() & 0xffff,
    goodChecksum: r() % 4 !== 0,
  });
  if (r() % 10 === 0) h[0] = 0x65;
  parts.push(h, l4, body);
  return Buffer.concat(parts);
}

/** Random entries for every table of subsetProgram, the same on both engines. */
export function fillSubsetTables(p: Pair, r: () => number, names: Map<string, string> = new Map()): void {
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
    both(
      p,
      `table_add t_multi ${a} ${r() % 9} ${pick(r, ADDRS)}/${pick(r, [0, 8, 16, 32])}${a === 'add_extra' ? ` => ${r() >>> 0}` : ''}`,
    );
  }
  for (let i = 0; i < 3 + (r() % 8); i++) {
    const a = pick(r, ['set_mgid', 'set_mgid', 'do_exit', 'rm_tag', 'dup_tag', '_nop', 'mdrop', 'set_cookie']);
    const data =
      a === 'set_mgid'
        ? ` ${1 + (r() % 100)}`
        : a === 'do_exit'
          ? ` ${r() & 0xff}`
          : a === 'set_cookie'
            ? ` ${macOf()}`
            : '';
    both(
      p,
      `table_add t_tern ${a} 0x${pick(r, ['0800', '8100', '0806', '8800'])}&&&0x${pick(r, ['ffff', 'ff00', '0000'])} ${r() & 1} 0x${pick(r, ['00', '40', 'f0', '10'])}&&&0x${pick(r, ['f0', '00'])} =>${data} ${r() % 5}`,
    );
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
    for (const a of ADDRS)
      expect(
        lpm.add(
          [lpmSpec(BigInt(ip(a).readUInt32BE(0)), 16 + (r2() % 17), 32)],
          nhop,
          [BigInt(r2() % 6), 0x0a0b0c0d0e0fn],
          0,
        ),
      ).to.be.a('number');
    const eg = e.tables.get(n('t_eg'))!;
    eg.setDefault(e.actions.get(n('learn'))!, []);
    eg.add([exactSpec(1n, 9)], e.actions.get(n('rewrite_src'))!, [0x020000000001n], 0);
    const tern = e.tables.get(n('t_tern'))!;
    tern.add(
      [ternarySpec(0x0800n, 0xff00n), exactSpec(0n, 1), ternarySpec(0n, 0n)],
      e.actions.get(n('set_mgid'))!,
      [7n],
      1,
    );
  }
}
