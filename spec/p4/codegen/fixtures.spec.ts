// The generated program function (lib/p4/codegen/) against the closures
// (EngineOptions.codegen false, the reference): the same programs, the same
// control-plane commands and the same frames through both engines, every
// result field, the output bytes, the input after IN_PLACE and the engine
// counters compared, through process(), processReused() into the engine's
// buffer and processReused() IN_PLACE. Frames: seeded random bytes, frames
// steered into each header, bad checksums, TTL 0/1, table misses, every
// truncation, frames over maxFrame. Then the subset's refusals (each one
// still runs, on the closures) and the source's hygiene: no name or string
// of the program in it.
// Here: the fixture programs; ./subset.spec.ts: the synthetic program of
// the whole subset and the subset's refusals.

import { expect } from 'chai';
import { P4Engine } from '../../../lib/p4/engine/engine';
import { runCommands } from '../../../lib/p4/engine/commands';
import { ethernet, fixtureText, ipv4, ipv4Checksum, mac, snapshot, tcp, udp } from '../../support/p4';
import { xorshift } from '../../support/rng';
import { ADDRS, anyFrame, both, compare, MACS, noiseFrame, pair, pick, randomBytes } from './compare';

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
      const f = Buffer.concat([
        ethernet('00:00:00:00:00:99', '00:00:00:00:00:11', 0x0800),
        ipv4({ src: '10.0.2.1', dst: '10.0.1.10', ttl: 64, protocol: 17, payloadLength: payload.length }),
        payload,
      ]);
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
        if (round % 5 === 4)
          both(p, `table_set_default send_frame ${pick(r, ['_drop', 'rewrite_mac 00:01:02:03:04:05'])}`);
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
        const f =
          r() % 10 === 0
            ? noiseFrame(r)
            : Buffer.concat([ethernet(pick(r, pool), pick(r, pool), 0x88b5), randomBytes(r, r() % 60)]);
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
      const full = Buffer.concat([
        ethernet('02:00:00:00:00:02', '02:00:00:00:00:01', 0x0800),
        ipv4({ src: '1.1.1.1', dst: '2.2.2.2', ttl: 9, protocol: 6, payloadLength: 24 }),
        tcp(1, 2, 3, Buffer.alloc(4, 7)),
      ]);
      for (let n = 0; n <= full.length; n++) compare(p, full.subarray(0, n), 0, `length ${n}`);
    });

    it('frames over maxFrame are dropped alike (too-long, nothing parsed)', () => {
      const p = pair(fixtureText('simple_router.json'), { maxFrame: 100 });
      for (const e of [p.gen, p.ref]) runCommands(e, fixtureText('commands.txt'));
      const r = xorshift(3);
      for (let i = 0; i < 200; i++) {
        const payload = udp(1, 2, Buffer.alloc(r() % 120));
        const f = Buffer.concat([
          ethernet('00:00:00:00:00:99', '00:00:00:00:00:11', 0x0800),
          ipv4({ src: '10.0.2.1', dst: '10.0.1.10', ttl: 64, protocol: 17, payloadLength: payload.length }),
          payload,
        ]);
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
});
