// Shared by the P4 specs: the fixture programs (fixtures/p4, see its README), a deliberately simple frame builder that writes bytes
// by hand (never through the engine's deparser), an independent IPv4 header
// checksum, and a small synthetic program built around one Ethernet header
// for the match kinds and externs the fixtures do not exercise.

import * as fs from 'fs';
import * as path from 'path';
import type { P4Result } from '../../lib/p4/frame/result';

const ROOT = path.join(__dirname, '..', '..', '..');
export const FIXTURES = path.join(ROOT, 'fixtures', 'p4');

export function fixtureText(name: string): string {
  return fs.readFileSync(path.join(FIXTURES, name), 'utf8');
}

/** A fresh, mutable copy of a fixture program. */
export function fixtureJson(name: string): any {
  return JSON.parse(fixtureText(name));
}

export function mac(s: string): Buffer {
  return Buffer.from(s.split(':').join(''), 'hex');
}

export function ip(s: string): Buffer {
  return Buffer.from(s.split('.').map(Number));
}

export function ethernet(dst: string, src: string, type: number): Buffer {
  const t = Buffer.alloc(2);
  t.writeUInt16BE(type);
  return Buffer.concat([mac(dst), mac(src), t]);
}

/** RFC 1071 over the header bytes with the checksum field taken as zero. */
export function ipv4Checksum(hdr: Buffer): number {
  let sum = 0;
  for (let i = 0; i < hdr.length; i += 2) if (i !== 10) sum += hdr.readUInt16BE(i);
  while (sum > 0xffff) sum = (sum & 0xffff) + (sum >>> 16);
  return ~sum & 0xffff;
}

interface Ipv4Opts {
  src: string;
  dst: string;
  ttl: number;
  protocol: number;
  payloadLength: number;
  id?: number;
  goodChecksum?: boolean;
}

/** A 20-byte IPv4 header (no options), checksum right unless goodChecksum is false. */
export function ipv4(o: Ipv4Opts): Buffer {
  const h = Buffer.alloc(20);
  h[0] = 0x45;
  h[1] = 0;
  h.writeUInt16BE(20 + o.payloadLength, 2);
  h.writeUInt16BE(o.id ?? 0x1234, 4);
  h.writeUInt16BE(0x4000, 6); // DF
  h[8] = o.ttl;
  h[9] = o.protocol;
  ip(o.src).copy(h, 12);
  ip(o.dst).copy(h, 16);
  h.writeUInt16BE(o.goodChecksum === false ? 0xbeef : ipv4Checksum(h), 10);
  return h;
}

export function udp(srcPort: number, dstPort: number, payload: Buffer): Buffer {
  const h = Buffer.alloc(8);
  h.writeUInt16BE(srcPort, 0);
  h.writeUInt16BE(dstPort, 2);
  h.writeUInt16BE(8 + payload.length, 4);
  h.writeUInt16BE(0, 6);
  return Buffer.concat([h, payload]);
}

export function tcp(srcPort: number, dstPort: number, seq: number, payload: Buffer): Buffer {
  const h = Buffer.alloc(20);
  h.writeUInt16BE(srcPort, 0);
  h.writeUInt16BE(dstPort, 2);
  h.writeUInt32BE(seq, 4);
  h.writeUInt32BE(0x01020304, 8);
  h[12] = 0x50;
  h[13] = 0x18;
  h.writeUInt16BE(0xffff, 14);
  h.writeUInt16BE(0xabcd, 16);
  return Buffer.concat([h, payload]);
}

const STD_META = {
  name: 'standard_metadata_t',
  id: 0,
  fields: [
    ['ingress_port', 9],
    ['packet_length', 32],
    ['egress_spec', 9],
    ['egress_port', 9],
    ['egress_instance', 32],
    ['instance_type', 32],
    ['clone_spec', 32],
    ['_padding', 5],
  ],
};

/**
 * One Ethernet header, an ingress table `t` with the given key parts on
 * dstAddr/srcAddr/etherType/valid(ethernet), and action set_src(smac) that
 * writes ethernet.srcAddr (so the winning entry shows in the output frame),
 * plus `extra` actions and objects merged in.
 */
export function syntheticProgram(
  keys: { match_type: string; target: unknown }[],
  tableMatchType: string,
  extra: any = {},
): any {
  return {
    header_types: [
      STD_META,
      {
        name: 'ethernet_t',
        id: 1,
        fields: [
          ['dstAddr', 48],
          ['srcAddr', 48],
          ['etherType', 16],
        ],
      },
    ],
    headers: [
      { name: 'standard_metadata', id: 0, header_type: 'standard_metadata_t', metadata: true },
      { name: 'ethernet', id: 1, header_type: 'ethernet_t', metadata: false },
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
            parser_ops: [{ op: 'extract', parameters: [{ type: 'regular', value: 'ethernet' }] }],
            transition_key: [],
            transitions: [{ type: 'default', value: null, mask: null, next_state: null }],
          },
        ],
      },
    ],
    deparsers: [{ name: 'deparser', id: 0, order: ['ethernet'] }],
    actions: [
      {
        name: 'set_src',
        id: 0,
        runtime_data: [{ name: 'smac', bitwidth: 48 }],
        primitives: [
          {
            op: 'modify_field',
            parameters: [
              { type: 'field', value: ['ethernet', 'srcAddr'] },
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
        init_table: 't',
        tables: [
          {
            name: 't',
            id: 0,
            match_type: tableMatchType,
            type: 'simple',
            max_size: 64,
            with_counters: extra.withCounters ?? false,
            key: keys.map((k) => ({ ...k, mask: null })),
            actions: ['set_src', ...(extra.actions ?? []).map((a: any) => a.name)],
            next_tables: Object.fromEntries(
              ['set_src', ...(extra.actions ?? []).map((a: any) => a.name)].map((a) => [a, null]),
            ),
            base_default_next: null,
          },
        ],
        conditionals: [],
      },
      { name: 'egress', id: 1, init_table: null, tables: [], conditionals: [] },
    ],
    counter_arrays: extra.counter_arrays ?? [],
    register_arrays: extra.register_arrays ?? [],
    meter_arrays: extra.meter_arrays ?? [],
  };
}

/** Everything a result says, as plain values (the frame as hex). */
export function snapshot(r: P4Result): unknown {
  return {
    frame: r.frame?.toString('hex'),
    dropped: r.dropped,
    reason: r.reason,
    egressPort: r.egressPort,
    multicastGroup: r.multicastGroup,
    parserError: r.parserError,
    checksumError: r.checksumError,
    digests: r.digests.map((d) => ({ list: d.list, values: d.values.map(String) })),
  };
}
