// Table lookups against simple references (a longest-prefix scan, the
// first match by priority), on the number path (packed and int32 keys, one
// Map per prefix length, the short array, priority-sorted number operands)
// and on the bigint path: overlapping prefixes, priorities, deletions and
// keys of 2^31 and above (lib/p4/compile/tables/lookups.ts, entry-index.ts).

import { expect } from 'chai';
import { P4Engine } from '../../../../lib/p4/engine/engine';
import { runCommand } from '../../../../lib/p4/engine/commands';
import { add, layoutProgram, markOf, randomBig, refWrite, rng } from '../layout-programs';

describe('p4: fast paths against simple references', () => {
  it('lpm on a 32-bit key (number path, int32 keys): overlapping prefixes, /0, addresses above 2^31, deletion falls back', () => {
    const e = P4Engine.load(
      layoutProgram(
        [
          ['dst', 32],
          ['mark', 16],
        ],
        [{ match_type: 'lpm', target: ['h', 'dst'] }],
        'lpm',
        'mark',
      ),
    );
    const hs = {
      p0: add(e, 'table_add t mark 0.0.0.0/0 => 1'),
      p8: add(e, 'table_add t mark 192.0.0.0/8 => 8'),
      p16: add(e, 'table_add t mark 192.168.0.0/16 => 16'),
      p24: add(e, 'table_add t mark 192.168.1.0/24 => 24'),
      p32: add(e, 'table_add t mark 192.168.1.7/32 => 32'),
      low: add(e, 'table_add t mark 10.0.0.0/8 => 10'),
      top: add(e, 'table_add t mark 255.255.255.255/32 => 255'),
    };
    const f = (ip: string) =>
      Buffer.concat([Buffer.from(ip.split('.').map(Number)), Buffer.alloc(2), Buffer.alloc(20)]);
    const m = (ip: string) => Number(markOf(e, f(ip), 32, 16));
    expect([
      m('192.168.1.7'),
      m('192.168.1.8'),
      m('192.168.2.1'),
      m('192.1.1.1'),
      m('10.9.9.9'),
      m('11.0.0.1'),
      m('255.255.255.255'),
      m('255.255.255.254'),
    ]).to.deep.equal([32, 24, 16, 8, 10, 1, 255, 1]);
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
      const e = P4Engine.load(
        layoutProgram(
          [
            ['dst', width],
            ['mark', 16],
          ],
          [{ match_type: 'lpm', target: ['h', 'dst'] }],
          'lpm',
          'mark',
        ),
      );
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
        expect(Number(markOf(e, frame, width, 16)), `width ${width} address 0x${a.toString(16)}`).to.equal(
          best?.mark ?? 0,
        );
      }
    }
  });

  it('exact and lpm tables keep answering like a reference while they grow past the short array (8 entries) and shrink back', () => {
    for (const kind of ['exact', 'lpm']) {
      const e = P4Engine.load(
        layoutProgram(
          [
            ['k', 32],
            ['mark', 16],
          ],
          [{ match_type: kind, target: ['h', 'k'] }],
          kind,
          'mark',
        ),
      );
      const r = rng(kind === 'exact' ? 7 : 8);
      const live = new Map<number, { key: number; len: number; mark: number }>();
      const probe = (): void => {
        const keys = [...live.values()].map((x) => x.key);
        for (let i = 0; i < 40; i++) {
          const k =
            i % 2 === 0 && keys.length > 0
              ? keys[Math.floor(r() * keys.length)]! + (kind === 'lpm' ? Math.floor(r() * 256) : 0)
              : Math.floor(r() * 0x100000000);
          let want = 0;
          let bestLen = -1;
          for (const x of live.values()) {
            const div = 2 ** (32 - x.len);
            if (Math.floor(k / div) === Math.floor(x.key / div) && x.len > bestLen) [want, bestLen] = [x.mark, x.len];
          }
          const f = Buffer.alloc(16);
          f.writeUInt32BE(k >>> 0, 0);
          expect(Number(markOf(e, f, 32, 16)), `${kind} with ${live.size} entries, key ${k.toString(16)}`).to.equal(
            want,
          );
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
      layoutProgram(
        [
          ['dst', 32],
          ['vrf', 12],
          ['pad', 4],
          ['mark', 16],
        ],
        [
          { match_type: 'lpm', target: ['h', 'dst'] },
          { match_type: 'exact', target: ['h', 'vrf'] },
        ],
        'lpm',
        'mark',
      ),
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
    expect([
      m('10.1.2.3', 1),
      m('10.2.2.3', 1),
      m('10.1.2.3', 2),
      m('10.2.2.3', 2),
      m('200.0.0.1', 4095),
      m('200.0.0.1', 1),
    ]).to.deep.equal([2, 1, 3, 0, 4, 0]);
  });

  it('ternary priorities on the number path (masks with bit 31 set) and on the bigint path (a 64-bit key): lowest number wins, ties to the first added', () => {
    for (const width of [32, 64]) {
      const e = P4Engine.load(
        layoutProgram(
          [
            ['k', width],
            ['mark', 16],
          ],
          [{ match_type: 'ternary', target: ['h', 'k'] }],
          'ternary',
          'mark',
        ),
      );
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
    const e = P4Engine.load(
      layoutProgram(
        [
          ['a', 48],
          ['b', 48],
          ['mark', 16],
        ],
        [
          { match_type: 'range', target: ['h', 'a'] },
          { match_type: 'optional', target: ['h', 'b'] },
        ],
        'range',
        'mark',
      ),
    );
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
    expect([
      m(0x800000000005n, 7n),
      m(0x800000000005n, 8n),
      m(0xffffffffffffn, 7n),
      m(0x800000000011n, 7n),
      m(5n, 7n),
      m(5n, 8n),
    ]).to.deep.equal([2, 1, 1, 1, 3, 0]);
  });

  it('exact keys: 48-bit (number path), 64-bit and two 32-bit parts (bigint path: over 53 bits packed)', () => {
    const cases: [[string, number][], string[], string, string][] = [
      [
        [
          ['k', 48],
          ['mark', 16],
        ],
        ['k'],
        '0xfedcba987654',
        '0xfedcba987655',
      ],
      [
        [
          ['k', 64],
          ['mark', 16],
        ],
        ['k'],
        '0xfedcba9876543210',
        '0xfedcba9876543211',
      ],
      [
        [
          ['k', 32],
          ['j', 32],
          ['mark', 16],
        ],
        ['k', 'j'],
        '0xfedcba98 0x76543210',
        '0xfedcba98 0x76543211',
      ],
    ];
    for (const [fields, keys, hit, miss] of cases) {
      const e = P4Engine.load(
        layoutProgram(
          fields,
          keys.map((k) => ({ match_type: 'exact', target: ['h', k] })),
          'exact',
          'mark',
        ),
      );
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
      expect(
        [Number(markOf(e, frame(hit), keyBits, 16)), Number(markOf(e, frame(miss), keyBits, 16))],
        JSON.stringify(fields),
      ).to.deep.equal([9, 0]);
    }
  });
});
