// Stateful objects and the remaining primitives on a synthetic program:
// counter arrays (count), direct table counters, registers (read/write),
// a 2-rate meter with a fake clock, modify_field_with_hash_based_offset
// over crc16, add/remove_header, and exit.

import { expect } from 'chai';
import { P4Engine } from '../../../lib/p4/engine/engine';
import { ALGORITHMS } from '../../../lib/p4/compile/calculations';
import { readEntryCounters, runCommand } from '../../../lib/p4/engine/commands';
import { ethernet, syntheticProgram } from '../../support/p4';

const F = (name: string) => ({ type: 'field', value: ['ethernet', name] });
const HEX = (v: string) => ({ type: 'hexstr', value: v });

const frame = (type: number, len = 60) =>
  Buffer.concat([ethernet('02:00:00:00:00:01', '02:00:00:00:00:02', type), Buffer.alloc(len - 14)]);

function program(extraActions: any[], extra: any = {}): any {
  return syntheticProgram([{ match_type: 'exact', target: ['ethernet', 'etherType'] }], 'exact', {
    actions: extraActions,
    ...extra,
  });
}

describe('p4: counters, registers, meters and other primitives', () => {
  it('count() adds packets and bytes at the computed index; counter_read shows them', () => {
    const e = P4Engine.load(
      program(
        [
          {
            name: 'cnt',
            id: 1,
            runtime_data: [{ name: 'i', bitwidth: 8 }],
            primitives: [
              {
                op: 'count',
                parameters: [
                  { type: 'counter_array', value: 'c' },
                  { type: 'runtime_data', value: 0 },
                ],
              },
            ],
          },
        ],
        {
          counter_arrays: [{ name: 'c', id: 0, size: 4, is_direct: false }],
        },
      ),
    );
    expect(runCommand(e, 'table_add t cnt 0x0800 => 2').ok).to.equal(true);
    e.process(frame(0x0800, 60), 0);
    e.process(frame(0x0800, 100), 0);
    e.process(frame(0x0806, 60), 0);
    const c = e.externs.counters.get('c')!;
    expect([c.packets[2], c.bytes[2]]).to.deep.equal([2, 160]);
    expect([c.packets[0], c.packets[1], c.packets[3]]).to.deep.equal([0, 0, 0]);
    const r = runCommand(e, 'counter_read c 2');
    expect(r).to.deep.equal({ ok: true, output: 'c[2]= (160 bytes, 2 packets)' });
    expect(runCommand(e, 'counter_read c 4').ok).to.equal(false);
    expect(runCommand(e, 'counter_reset c').ok).to.equal(true);
    expect(c.packets[2]).to.equal(0);
  });

  it('direct counters count each entry hit', () => {
    const e = P4Engine.load(program([], { withCounters: true }));
    const r = runCommand(e, 'table_add t set_src 0x0800 => 00:00:00:00:00:01');
    const h = (r as { handle: number }).handle;
    for (let i = 0; i < 3; i++) e.process(frame(0x0800, 64), 0);
    e.process(frame(0x0806, 64), 0);
    expect(readEntryCounters(e, 't', h)).to.deep.equal({ packets: 3, bytes: 192 });
  });

  it('register_write then register_read through the data path and the CLI', () => {
    const e = P4Engine.load(
      program(
        [
          {
            name: 'store',
            id: 1,
            runtime_data: [],
            primitives: [
              { op: 'register_write', parameters: [{ type: 'register_array', value: 'r' }, HEX('0x1'), F('srcAddr')] },
            ],
          },
          {
            name: 'load',
            id: 2,
            runtime_data: [],
            primitives: [
              { op: 'register_read', parameters: [F('dstAddr'), { type: 'register_array', value: 'r' }, HEX('0x1')] },
            ],
          },
        ],
        { register_arrays: [{ name: 'r', id: 0, size: 2, bitwidth: 48 }] },
      ),
    );
    expect(runCommand(e, 'table_add t store 0x0800').ok).to.equal(true);
    expect(runCommand(e, 'table_add t load 0x0806').ok).to.equal(true);
    e.process(frame(0x0800), 0);
    expect(runCommand(e, 'register_read r 1')).to.deep.equal({ ok: true, output: `r[1]= ${0x020000000002}` });
    expect(e.process(frame(0x0806), 0).frame!.subarray(0, 6).toString('hex')).to.equal('020000000002');
    expect(runCommand(e, 'register_write r 1 0xffffffffffff').ok).to.equal(true);
    expect(runCommand(e, 'register_write r 1 0x1ffffffffffff').ok).to.equal(false);
    expect(e.process(frame(0x0806), 0).frame!.subarray(0, 6).toString('hex')).to.equal('ffffffffffff');
  });

  it('execute_meter: green when unset, then green/yellow/red by the token buckets', () => {
    let now = 0;
    const e = P4Engine.load(
      program(
        [
          {
            name: 'meter',
            id: 1,
            runtime_data: [],
            primitives: [
              { op: 'execute_meter', parameters: [{ type: 'meter_array', value: 'm' }, HEX('0x0'), F('dstAddr')] },
            ],
          },
        ],
        { meter_arrays: [{ name: 'm', id: 0, type: 'packets', rate_count: 2, size: 1, is_direct: false }] },
      ),
      { now: () => now },
    );
    expect(runCommand(e, 'table_add t meter 0x0800').ok).to.equal(true);
    const color = () => e.process(frame(0x0800), 0).frame!.readUIntBE(0, 6);
    expect(color()).to.equal(0);
    // committed: 1 packet burst, peak: 2 packet burst, no refill
    expect(runCommand(e, 'meter_set_rates m 0 0:1 0:2').ok).to.equal(true);
    expect([color(), color(), color()]).to.deep.equal([0, 1, 2]);
    now += 1e6;
    expect(color()).to.equal(2); // rates are 0: no refill
    expect(runCommand(e, 'meter_set_rates m 0 0.000001:1 0.000002:2').ok).to.equal(true); // 1 and 2 packets/s
    expect([color(), color(), color()]).to.deep.equal([0, 1, 2]);
    now += 1e6;
    expect(color()).to.equal(0);
    expect(runCommand(e, 'meter_set_rates m 0 1:1').ok).to.equal(false);
  });

  it('modify_field_with_hash_based_offset (crc16) keeps the result in [base, base+size)', () => {
    const p = program([
      {
        name: 'hash',
        id: 1,
        runtime_data: [],
        primitives: [
          {
            op: 'modify_field_with_hash_based_offset',
            parameters: [F('etherType'), HEX('0x100'), { type: 'calculation', value: 'h' }, HEX('0x10')],
          },
        ],
      },
    ]);
    p.calculations = [{ name: 'h', id: 0, algo: 'crc16', input: [F('dstAddr'), F('srcAddr')] }];
    const e = P4Engine.load(p);
    expect(runCommand(e, 'table_add t hash 0x0800').ok).to.equal(true);
    const seen = new Set<number>();
    for (let i = 0; i < 64; i++) {
      const f = frame(0x0800);
      f[5] = i;
      const t = e.process(f, 0).frame!.readUInt16BE(12);
      expect(t).to.be.within(0x100, 0x10f);
      seen.add(t);
    }
    expect(seen.size).to.be.greaterThan(4);
  });

  it('a hash algorithm named after an Object property is refused as unsupported', () => {
    for (const algo of ['constructor', 'toString', '__proto__']) {
      const p = program([
        {
          name: 'hash',
          id: 1,
          runtime_data: [],
          primitives: [
            {
              op: 'modify_field_with_hash_based_offset',
              parameters: [F('etherType'), HEX('0x100'), { type: 'calculation', value: 'h' }, HEX('0x10')],
            },
          ],
        },
      ]);
      p.calculations = [{ name: 'h', id: 0, algo, input: [F('dstAddr')] }];
      expect(() => P4Engine.load(p), algo).to.throw(/unsupported hash algorithm/);
    }
  });

  it('remove_header drops the header from the output; add_header brings back a zeroed one', () => {
    const e = P4Engine.load(
      program([
        {
          name: 'strip',
          id: 1,
          runtime_data: [],
          primitives: [{ op: 'remove_header', parameters: [{ type: 'header', value: 'ethernet' }] }],
        },
        {
          name: 'renew',
          id: 2,
          runtime_data: [],
          primitives: [
            { op: 'remove_header', parameters: [{ type: 'header', value: 'ethernet' }] },
            { op: 'add_header', parameters: [{ type: 'header', value: 'ethernet' }] },
            { op: 'exit', parameters: [] },
            { op: 'modify_field', parameters: [F('etherType'), HEX('0x1234')] },
          ],
        },
      ]),
    );
    expect(runCommand(e, 'table_add t strip 0x0800').ok).to.equal(true);
    expect(runCommand(e, 'table_add t renew 0x0806').ok).to.equal(true);
    const f = frame(0x0800);
    expect(e.process(f, 0).frame!.equals(f.subarray(14))).to.equal(true);
    const g = frame(0x0806);
    const out = e.process(g, 0).frame!;
    expect(out.subarray(0, 14).equals(Buffer.alloc(14))).to.equal(true); // zeroed, and exit skipped the etherType write
    expect(out.subarray(14).equals(g.subarray(14))).to.equal(true);
  });

  it('mark_to_drop drops the frame and counts it', () => {
    const e = P4Engine.load(
      program([
        {
          name: 'kill',
          id: 1,
          runtime_data: [],
          primitives: [{ op: 'mark_to_drop', parameters: [{ type: 'header', value: 'standard_metadata' }] }],
        },
      ]),
    );
    expect(runCommand(e, 'table_add t kill 0x0800').ok).to.equal(true);
    expect(e.process(frame(0x0800), 0).dropped).to.equal(true);
    expect(e.process(frame(0x0806), 0).dropped).to.equal(false);
    expect(e.stats.dropped).to.equal(1);
  });

  it('hash algorithms match their check values', () => {
    const check = Buffer.from('123456789');
    expect(ALGORITHMS.crc32!(check)).to.equal(0xcbf43926n);
    expect(ALGORITHMS.crc16!(check)).to.equal(0xbb3dn);
    expect(ALGORITHMS.identity!(Buffer.from([1, 2]))).to.equal(0x0102n);
    // RFC 1071 example words 0001 f203 f4f5 f6f7 sum to 0xddf2 -> checksum 0x220d
    expect(ALGORITHMS.csum16!(Buffer.from('0001f203f4f5f6f7', 'hex'))).to.equal(0x220dn);
  });

  it('_jump/_jump_if_zero run if/else inside an action; a backward jump is refused', () => {
    const isIp = { type: 'expression', value: { op: '==', left: F('etherType'), right: HEX('0x0800') } };
    const ifElse = {
      name: 'branch',
      id: 1,
      runtime_data: [],
      primitives: [
        {
          op: '_jump_if_zero',
          parameters: [{ type: 'expression', value: { op: 'b2d', left: null, right: isIp } }, HEX('0x3')],
        },
        { op: 'modify_field', parameters: [F('srcAddr'), HEX('0x1')] },
        { op: '_jump', parameters: [HEX('0x4')] },
        { op: 'modify_field', parameters: [F('srcAddr'), HEX('0x2')] },
      ],
    };
    const p = syntheticProgram([{ match_type: 'range', target: ['ethernet', 'etherType'] }], 'range', {
      actions: [ifElse],
    });
    const e = P4Engine.load(p);
    expect(runCommand(e, 'table_add t branch 0->0xffff => 1').ok).to.equal(true);
    expect(e.process(frame(0x0800), 0).frame!.readUIntBE(6, 6)).to.equal(1);
    expect(e.process(frame(0x86dd), 0).frame!.readUIntBE(6, 6)).to.equal(2);
    const q = syntheticProgram([{ match_type: 'range', target: ['ethernet', 'etherType'] }], 'range', {
      actions: [ifElse],
    });
    q.actions[1].primitives[2].parameters[0] = HEX('0x0');
    expect(() => P4Engine.load(q)).to.throw(
      /^actions\[1\]\.primitives\[2\]\.parameters\[0\] "0x0": only forward jumps/,
    );
  });

  it('add_to_field / subtract_from_field wrap at the field width (number path) and for wide fields (bigint path)', () => {
    const e = P4Engine.load(
      program([
        {
          name: 'dec',
          id: 1,
          runtime_data: [],
          primitives: [
            { op: 'add_to_field', parameters: [F('etherType'), HEX('-0x2')] },
            { op: 'subtract_from_field', parameters: [F('dstAddr'), HEX('0x3')] },
          ],
        },
        {
          name: 'inc',
          id: 2,
          runtime_data: [],
          primitives: [{ op: 'add_to_field', parameters: [F('etherType'), HEX('0xffff')] }],
        },
      ]),
    );
    expect(runCommand(e, 'table_add t dec 0x0001').ok).to.equal(true);
    expect(runCommand(e, 'table_add t inc 0x0005').ok).to.equal(true);
    const f = frame(0x0001);
    f.fill(0, 0, 6);
    const out = e.process(f, 0).frame!;
    expect(out.readUInt16BE(12)).to.equal(0xffff);
    expect(out.subarray(0, 6).toString('hex')).to.equal('fffffffffffd');
    expect(e.process(frame(0x0005), 0).frame!.readUInt16BE(12)).to.equal(0x0004);
  });

  it('a direct meter colors each entry separately and writes the color before the action runs', () => {
    const now = 0;
    const p = program([], {
      meter_arrays: [
        {
          name: 'dm',
          id: 0,
          type: 'packets',
          rate_count: 2,
          size: 64,
          is_direct: true,
          binding: 't',
          result_target: ['ethernet', 'dstAddr'],
        },
      ],
    });
    p.pipelines[0].tables[0].direct_meters = 'dm';
    const e = P4Engine.load(p, { now: () => now });
    const a = runCommand(e, 'table_add t set_src 0x0800 => 00:00:00:00:00:01') as { handle: number };
    const b = runCommand(e, 'table_add t set_src 0x0806 => 00:00:00:00:00:02') as { handle: number };
    const color = (type: number) => e.process(frame(type), 0).frame!.readUIntBE(0, 6);
    expect(color(0x0800)).to.equal(0); // unset: green
    expect(runCommand(e, `meter_set_rates dm ${a.handle} 0:1 0:1`).ok).to.equal(true);
    expect([color(0x0800), color(0x0800)]).to.deep.equal([0, 2]);
    expect(color(0x0806)).to.equal(0); // the other entry's meter is untouched
    expect(runCommand(e, `meter_set_rates dm 99 0:1 0:1`).ok).to.equal(false);
    expect(runCommand(e, `table_delete t ${b.handle}`).ok).to.equal(true);
    const c = runCommand(e, 'table_add t set_src 0x86dd => 00:00:00:00:00:03') as { handle: number };
    expect(color(0x86dd)).to.equal(0); // a reused meter cell starts unset
    expect(c.handle).to.equal(2);
    const q = program([], {
      meter_arrays: [
        {
          name: 'dm',
          id: 0,
          type: 'packets',
          rate_count: 2,
          size: 64,
          is_direct: true,
          binding: 'other',
          result_target: ['ethernet', 'dstAddr'],
        },
      ],
    });
    q.pipelines[0].tables[0].direct_meters = 'dm';
    expect(() => P4Engine.load(q)).to.throw(
      /^pipelines\[0\]\.tables\[0\]\.direct_meters "dm": the meter is bound to other/,
    );
  });
});
