// Programs over one header of any field layout with a table whose winning
// entry shows in the frame, and a bit-by-bit reference to read it: for the
// specs of the fast paths (./fast-paths.spec.ts, ./tables/lookups.spec.ts).

import { P4Engine } from '../../../lib/p4/engine/engine';
import { runCommand } from '../../../lib/p4/engine/commands';
import { xorshift } from '../../support/rng';

/** spec/support/rng.ts's seeded xorshift32 as a fraction in [0, 1). */
export function rng(seed: number): () => number {
  const next = xorshift(seed);
  return () => next() / 0x100000000;
}

export function randomBig(r: () => number, width: number): bigint {
  let v = 0n;
  for (let i = 0; i < width; i += 16) v = (v << 16n) | BigInt(Math.floor(r() * 0x10000));
  return v & ((1n << BigInt(width)) - 1n);
}

/** The reference: bits [bit, bit+width) of buf, most significant first, one at a time. */
export function refRead(buf: Buffer, bit: number, width: number): bigint {
  let v = 0n;
  for (let i = bit; i < bit + width; i++) v = (v << 1n) | BigInt((buf[i >> 3]! >> (7 - (i & 7))) & 1);
  return v;
}

export function refWrite(buf: Buffer, bit: number, width: number, v: bigint): void {
  for (let i = 0; i < width; i++) {
    const b = bit + width - 1 - i;
    const one = (v >> BigInt(i)) & 1n;
    buf[b >> 3] = (buf[b >> 3]! & ~(0x80 >> (b & 7))) | (Number(one) << (7 - (b & 7)));
  }
}

const STD_META = {
  name: 'standard_metadata_t',
  id: 0,
  fields: [
    ['ingress_port', 9],
    ['packet_length', 32],
    ['egress_spec', 9],
    ['egress_port', 9],
    ['_padding', 5],
  ],
};

/**
 * A program over one header `h` (the given fields) parsed at the frame's
 * start and deparsed; a table `t` keyed on `keys` whose action mark(v)
 * writes v into h.<markField>, so the winning entry shows in the frame.
 */
export function layoutProgram(
  fields: [string, number][],
  keys: { match_type: string; target: unknown }[] = [],
  matchType = 'exact',
  markField = fields[0]![0],
  extra: any = {},
): any {
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
          {
            name: 'start',
            id: 0,
            parser_ops: [{ op: 'extract', parameters: [{ type: 'regular', value: 'h' }] }],
            transition_key: [],
            transitions: [{ type: 'default', value: null, mask: null, next_state: null }],
          },
        ],
      },
    ],
    deparsers: [{ name: 'deparser', id: 0, order: ['h'] }],
    actions: [
      {
        name: 'mark',
        id: 0,
        runtime_data: [{ name: 'v', bitwidth: markWidth }],
        primitives: [
          {
            op: 'modify_field',
            parameters: [
              { type: 'field', value: ['h', markField] },
              { type: 'runtime_data', value: 0 },
            ],
          },
        ],
      },
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
                  next_tables: Object.fromEntries(
                    ['mark', ...(extra.actions ?? []).map((a: any) => a.name)].map((a) => [a, null]),
                  ),
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

export function add(e: P4Engine, cmd: string): number {
  const r = runCommand(e, cmd);
  if (!r.ok) throw new Error(`${cmd}: ${r.error}`);
  return r.handle!;
}

/** The value the table's action wrote into the mark field (0 when nothing matched: the field is zeroed below). */
export function markOf(e: P4Engine, frame: Buffer, bit: number, width: number): bigint {
  const out = e.process(frame, 0).frame!;
  return refRead(out, bit, width);
}
