// The P4 fuzz target's programs (spec/fuzz/targets/p4.ts): the fixtures and
// synthetic programs (value sets, action profiles, bigint expressions, heavy
// frames sized around the frame cost limit), and their mutations: names and
// operators from Object.prototype's keys, huge and negative sizes and widths,
// deep and wide expressions, deleted and duplicated parts, broken JSON text.

import { syntheticProgram } from '../../support/p4';

export const FIXTURES = [
  'simple_router.json',
  'l2_switch.json',
  'rdma_fp8.json',
  'exact_match_1.json',
  'LPM_match_1.json',
  'ternary_match_1.json',
  'parser_deparser_1.json',
];
export const PROTO_KEYS = [
  ...Object.getOwnPropertyNames(Object.prototype),
  'prototype',
  'then',
  'length',
  'name',
  'call',
  'apply',
  'bind',
];
const OPS = [
  '+',
  '-',
  '*',
  '/',
  '%',
  '<<',
  '>>',
  '&',
  '|',
  '^',
  '~',
  '==',
  '!=',
  '<',
  '<=',
  '>',
  '>=',
  'and',
  'or',
  'not',
  'd2b',
  'b2d',
  'valid',
  '?',
  'two_comp_mod',
];
const MATCH = ['exact', 'lpm', 'ternary', 'range', 'valid', 'optional'];
export const NUMBERS = [
  0,
  1,
  -1,
  2,
  7,
  8,
  9,
  16,
  31,
  32,
  33,
  47,
  48,
  49,
  64,
  511,
  4096,
  4097,
  65535,
  65536,
  65537,
  1 << 20,
  2 ** 31 - 1,
  2 ** 32,
  2 ** 53,
  1e300,
];
export const COMMANDS = [
  'table_add',
  'table_set_default',
  'table_delete',
  'table_clear',
  'table_indirect_add',
  'table_indirect_add_with_group',
  'table_indirect_set_default',
  'act_prof_create_member',
  'act_prof_create_group',
  'act_prof_add_member_to_group',
  'parse_vset_add',
  'counter_read',
  'counter_reset',
  'register_read',
  'register_write',
  'register_reset',
  'meter_set_rates',
];

export class Rnd {
  #s: number;
  constructor(seed: number) {
    this.#s = seed >>> 0 || 1;
  }
  next(): number {
    let x = this.#s;
    x ^= x << 13;
    x >>>= 0;
    x ^= x >>> 17;
    x ^= x << 5;
    x >>>= 0;
    this.#s = x;
    return x;
  }
  below(n: number): number {
    return n <= 0 ? 0 : this.next() % n;
  }
  chance(n: number): boolean {
    return this.below(n) === 0;
  }
  pick<T>(xs: readonly T[]): T {
    return xs[this.below(xs.length)]!;
  }
  bytes(n: number): Buffer {
    const b = Buffer.alloc(n);
    for (let i = 0; i < n; i++) b[i] = this.next() & 0xff;
    return b;
  }
  hex(digits: number): string {
    let s = '0x';
    for (let i = 0; i < Math.max(1, digits); i++) s += '0123456789abcdef'[this.below(16)];
    return s;
  }
}

// ---- programs ----

const field = (h: string, n: string) => ({ type: 'field', value: [h, n] });
const hex = (v: string) => ({ type: 'hexstr', value: v });
const expr = (op: string, left: unknown, right: unknown) => ({ type: 'expression', value: { op, left, right } });

/** A parser state testing etherType against a value set, then a loop back (the set at every parser step). */
export function vsetProgram(r: Rnd, big = false): any {
  const p = syntheticProgram(
    [{ match_type: r.pick(['exact', 'ternary']), target: ['ethernet', 'etherType'] }],
    'exact',
  );
  const max = big ? 65536 : r.pick([undefined, 0, 1, 16, 4096, 20000, 65536, 65537, 2 ** 31 - 1]);
  p.parse_vsets = [
    {
      name: r.chance(3) ? r.pick(PROTO_KEYS) : 'vs',
      id: 0,
      compressed_bitwidth: big ? r.pick([32, 48]) : r.pick([8, 16, 32, 48, 64]),
      ...(max === undefined ? {} : { max_size: max }),
    },
  ];
  const vs = p.parse_vsets[0].name;
  p.parsers[0].parse_states[0].transitions = [{ type: 'default', value: null, mask: null, next_state: 'scan' }];
  p.parsers[0].parse_states.push({
    name: 'scan',
    id: 1,
    parser_ops: [],
    transition_key: r.chance(2)
      ? [field('ethernet', 'etherType')]
      : [field('ethernet', 'srcAddr'), field('ethernet', 'etherType')],
    transitions: [
      { type: 'parse_vset', value: vs, mask: null, next_state: null },
      { type: 'parse_vset', value: vs, mask: r.pick(['0xff00', '0xffff', r.hex(4), r.hex(16)]), next_state: null },
      { type: 'default', value: null, mask: null, next_state: r.chance(2) ? 'scan' : null },
    ],
  });
  return p;
}

export function profileProgram(r: Rnd, big = false): any {
  const p = syntheticProgram(
    [{ match_type: r.pick(['exact', 'ternary', 'lpm']), target: ['ethernet', 'etherType'] }],
    r.pick(['exact', 'ternary']),
  );
  const t = p.pipelines[0].tables[0];
  const sel = r.chance(2);
  t.type = sel ? 'indirect_ws' : 'indirect';
  t.action_profile = 'ap';
  t.max_size = r.pick([16, 1024, 65536, 2 ** 31 - 1]);
  p.pipelines[0].action_profiles = [
    {
      name: 'ap',
      id: 0,
      max_size: big ? 2 ** 31 - 1 : r.pick([0, 1, 8, 4096, 32768, 65536, 2 ** 31 - 1]),
      ...(sel
        ? {
            selector: { algo: r.pick(['crc16', 'crc32', 'identity', 'csum16']), input: [field('ethernet', 'srcAddr')] },
          }
        : {}),
    },
  ];
  return p;
}

/** Conditions and assignments on the bigint path (wide operands, products, shifts). */
export function exprProgram(r: Rnd): any {
  const p = syntheticProgram([{ match_type: 'exact', target: ['ethernet', 'etherType'] }], 'exact');
  const leaf = () =>
    r.pick([
      field('ethernet', 'srcAddr'),
      field('ethernet', 'dstAddr'),
      field('ethernet', 'etherType'),
      hex(r.hex(r.below(40))),
      hex('0x' + 'f'.repeat(r.pick([1, 64, 1024, 2048, 3000]))),
    ]);
  let e: any = leaf();
  const depth = r.pick([1, 4, 16, 40, 80]);
  const ops = OPS.filter((x) => x !== 'valid' && x !== '?'); // those two take other operands (the mutations still try them)
  for (let i = 0; i < depth; i++) e = r.chance(2) ? expr(r.pick(ops), e, leaf()) : expr(r.pick(ops), leaf(), e);
  p.actions[0].primitives.push({
    op: r.pick(['modify_field', 'add_to_field', 'subtract_from_field']),
    parameters: [field('ethernet', 'etherType'), e],
  });
  p.pipelines[0].conditionals = [
    {
      name: 'c',
      id: 0,
      expression: expr(r.pick(['==', '!=', '<', 'and', 'or']), e, hex('0x1')),
      true_next: 't',
      false_next: null,
    },
  ];
  p.pipelines[0].init_table = 'c';
  return p;
}

/** Programs of heavy frames, sized around the frame cost limit (lib/p4/compile/cost.ts): loaded ones must stay fast. */
export function heavyProgram(r: Rnd): any {
  const p = syntheticProgram([{ match_type: 'exact', target: ['ethernet', 'etherType'] }], 'exact');
  // up to about a guest's limits (an operator's huge program would only make this target's own turns long)
  const n = r.pick([10, 50, 100, 200, 400]);
  const prim = () => ({
    op: 'modify_field',
    parameters: [
      field('ethernet', 'srcAddr'),
      expr(
        r.pick(['*', '+', '<<', '%', '^']),
        field('ethernet', 'srcAddr'),
        r.chance(2) ? field('ethernet', 'dstAddr') : hex(r.hex(r.pick([4, 64, 512]))),
      ),
    ],
  });
  const dflt = (id: number) => ({ action_id: id, action_const: true, action_data: [], action_entry_const: true });
  switch (r.below(4)) {
    case 0: {
      // a chain of tables running one heavy action each
      const k = r.pick([1, 10, 50, 200]);
      p.actions.push({ name: 'heavy', id: 9, runtime_data: [], primitives: Array.from({ length: k }, prim) });
      p.pipelines[0].tables = Array.from({ length: n }, (_, i) => {
        const next = i + 1 < n ? `t${i + 1}` : r.chance(4) ? 't0' : null; // sometimes a cycle
        return {
          name: `t${i}`,
          id: i,
          match_type: 'exact',
          type: 'simple',
          max_size: 4,
          key: [],
          actions: ['heavy'],
          next_tables: { heavy: next },
          base_default_next: next,
          default_entry: dflt(9),
        };
      });
      p.pipelines[0].init_table = 't0';
      break;
    }
    case 1: {
      // a parser state looping on itself
      p.parsers[0].parse_states[0].transitions = [{ type: 'default', value: null, mask: null, next_state: 'loop' }];
      p.parsers[0].parse_states.push({
        name: 'loop',
        id: 1,
        parser_ops: Array.from({ length: n }, () => ({ op: 'set', parameters: prim().parameters })),
        transition_key: [],
        transitions: [{ type: 'default', value: null, mask: null, next_state: 'loop' }],
      });
      break;
    }
    case 2: {
      // headers added, then deparsed
      p.header_types.push({ name: 'h_t', id: 5, fields: Array.from({ length: 8 }, (_, i) => [`f${i}`, 8]) });
      for (let i = 0; i < n; i++) p.headers.push({ name: `h${i}`, id: 10 + i, header_type: 'h_t', metadata: false });
      p.actions.push({
        name: 'adds',
        id: 9,
        runtime_data: [],
        primitives: Array.from({ length: n }, (_, i) => ({
          op: 'add_header',
          parameters: [{ type: 'header', value: `h${i}` }],
        })),
      });
      p.pipelines[0].tables[0].actions.push('adds');
      p.pipelines[0].tables[0].next_tables.adds = null;
      p.pipelines[0].tables[0].default_entry = dflt(9);
      p.deparsers[0].order.push(...Array.from({ length: n }, (_, i) => `h${i}`));
      break;
    }
    default: {
      // digests and hashes over the payload
      p.learn_lists = [{ name: 'l', id: 1, elements: Array.from({ length: 50 }, () => field('ethernet', 'srcAddr')) }];
      p.calculations = [
        { name: 'c', id: 0, algo: r.pick(['crc32', 'crc16', 'csum16']), input: [{ type: 'payload', value: null }] },
      ];
      p.actions.push({
        name: 'h',
        id: 9,
        runtime_data: [],
        primitives: Array.from({ length: n }, () =>
          r.chance(2)
            ? { op: 'generate_digest', parameters: [hex('0x0'), hex('0x1')] }
            : {
                op: 'modify_field_with_hash_based_offset',
                parameters: [
                  field('ethernet', 'etherType'),
                  hex('0x0'),
                  { type: 'calculation', value: 'c' },
                  hex('0xffff'),
                ],
              },
        ),
      });
      p.pipelines[0].tables[0].actions.push('h');
      p.pipelines[0].tables[0].next_tables.h = null;
      p.pipelines[0].tables[0].default_entry = dflt(9);
    }
  }
  return p;
}

/** Every string in a program (candidate names for mutations and commands). */
function strings(root: unknown): string[] {
  const out = new Set<string>();
  const stack: unknown[] = [root];
  while (stack.length > 0) {
    const v = stack.pop();
    if (typeof v === 'string') out.add(v);
    else if (Array.isArray(v)) stack.push(...v);
    else if (v !== null && typeof v === 'object')
      for (const [k, x] of Object.entries(v)) {
        out.add(k);
        stack.push(x);
      }
  }
  return [...out];
}

/** Every (container, key) slot of the tree, iteratively. */
function slots(root: any): [any, string | number][] {
  const out: [any, string | number][] = [];
  const stack: any[] = [root];
  while (stack.length > 0) {
    const v = stack.pop();
    if (Array.isArray(v))
      v.forEach((x, i) => {
        out.push([v, i]);
        if (x !== null && typeof x === 'object') stack.push(x);
      });
    else if (v !== null && typeof v === 'object')
      for (const [k, x] of Object.entries(v)) {
        out.push([v, k]);
        if (x !== null && typeof x === 'object') stack.push(x);
      }
  }
  return out;
}

function randomValue(r: Rnd, names: string[]): unknown {
  switch (r.below(9)) {
    case 0:
      return r.pick(PROTO_KEYS);
    case 1:
      return r.pick(names);
    case 2:
      return r.pick(NUMBERS);
    case 3:
      return r.pick(OPS);
    case 4:
      return r.hex(r.pick([1, 2, 4, 8, 13, 40, 1100]));
    case 5:
      return null;
    case 6:
      return r.chance(2);
    case 7:
      return [r.pick(names), r.pick(PROTO_KEYS)];
    default:
      return {
        type: r.pick(['field', 'hexstr', 'expression', 'runtime_data', 'header', 'lookahead', r.pick(PROTO_KEYS)]),
        value: r.pick([
          r.pick(names),
          r.hex(4),
          [r.pick(names), r.pick(names)],
          { op: r.pick([...OPS, ...PROTO_KEYS]), left: null, right: hex('0x1') },
          [0, r.pick(NUMBERS)],
        ]),
      };
  }
}

export function mutate(r: Rnd, p: any): void {
  const names = strings(p);
  const all = slots(p);
  if (all.length === 0) return;
  const [c, k] = r.pick(all);
  const v = c[k];
  switch (r.below(10)) {
    case 0:
    case 1: // a string becomes a prototype key or another name of the program (or an operator)
      c[k] =
        typeof v === 'string'
          ? r.pick([r.pick(PROTO_KEYS), r.pick(names), r.pick(OPS), r.pick(MATCH), ''])
          : randomValue(r, names);
      break;
    case 2: // sizes and widths
      c[k] = typeof v === 'number' ? r.pick(NUMBERS) : randomValue(r, names);
      break;
    case 3:
      if (Array.isArray(c)) c.splice(k as number, 1);
      else delete c[k];
      break;
    case 4:
      if (Array.isArray(v) && v.length > 0) v.push(structuredClone(r.pick(v)));
      else c[k] = randomValue(r, names);
      break;
    case 5: // a key of an object becomes a prototype key (next_tables keys, attributes)
      if (!Array.isArray(c))
        Object.defineProperty(c, r.pick(PROTO_KEYS), {
          value: v,
          enumerable: true,
          configurable: true,
          writable: true,
        });
      break;
    case 6: // an operator
      if (v !== null && typeof v === 'object' && 'op' in v) v.op = r.pick([...OPS, ...PROTO_KEYS]);
      else c[k] = randomValue(r, names);
      break;
    case 7: // an expression nested deep (each level a product or a shift)
      if (v !== null && typeof v === 'object' && v.type === 'expression') {
        let e = v;
        for (let i = r.below(60); i > 0; i--)
          e = expr(
            r.pick(['*', '<<', '+', '>>', '-']),
            e,
            r.pick([hex(r.hex(r.below(300))), field(r.pick(names), r.pick(names))]),
          );
        c[k] = e;
      } else c[k] = randomValue(r, names);
      break;
    case 8:
      if (Array.isArray(v)) v.reverse();
      else c[k] = randomValue(r, names);
      break;
    default:
      c[k] = randomValue(r, names);
  }
}

/** Broken text: cut, a byte changed, a `__proto__` key spliced in. */
export function breakText(r: Rnd, s: string): string {
  switch (r.below(3)) {
    case 0:
      return s.slice(0, r.below(s.length));
    case 1: {
      const i = r.below(s.length);
      return s.slice(0, i) + String.fromCharCode(r.below(128)) + s.slice(i + 1);
    }
    default: {
      const i = s.indexOf('{', r.below(s.length));
      return i < 0 ? s : `${s.slice(0, i + 1)}"__proto__": {"x": 1}, ${s.slice(i + 1)}`;
    }
  }
}
