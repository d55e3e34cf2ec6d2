// Frames are untrusted: random bytes and every truncation of a valid frame
// go through each fixture program without a throw, with the same result for
// the same input, and a deparsed frame never longer than its headers plus
// the input.

import { expect } from 'chai';
import { P4Engine } from '../../../lib/p4/engine/engine';
import { runCommands } from '../../../lib/p4/engine/commands';
import { ethernet, fixtureText, ipv4, tcp } from '../../support/p4';
import { xorshift } from '../../support/rng';

const PROGRAMS = [
  'simple_router.json',
  'l2_switch.json',
  'exact_match_1.json',
  'LPM_match_1.json',
  'ternary_match_1.json',
  'parser_deparser_1.json',
];

function describeResult(r: ReturnType<P4Engine['process']>): string {
  return JSON.stringify({ d: r.dropped, p: r.egressPort, f: r.frame?.toString('hex'), e: r.parserError });
}

describe('p4: untrusted frames', () => {
  for (const name of PROGRAMS) {
    it(`${name}: 2000 random frames, none throws, results repeat`, () => {
      const e = P4Engine.load(fixtureText(name));
      if (name === 'simple_router.json') runCommands(e, fixtureText('commands.txt'));
      const next = xorshift(0x5eed + name.length);
      for (let i = 0; i < 2000; i++) {
        const len = next() % 200;
        const f = Buffer.alloc(len);
        for (let k = 0; k < len; k++) f[k] = next() & 0xff;
        if (len > 13 && (next() & 1) === 1) f.writeUInt16BE(0x0800, 12); // steer half of them into IPv4
        if (len > 23 && (next() & 1) === 1) f[23] = (next() & 1) === 1 ? 6 : 17;
        const port = next() & 0x1ff;
        const a = describeResult(e.process(f, port));
        expect(describeResult(e.process(Buffer.from(f), port)), `case ${i}`).to.equal(a);
        const r = e.process(f, port);
        if (r.frame) expect(r.frame.length).to.be.at.most(len + 14 + 20 + 20 + 8);
      }
    });
  }

  it('parser_deparser_1: every truncation of a TCP frame parses what fits and re-emits the bytes', () => {
    const e = P4Engine.load(fixtureText('parser_deparser_1.json'));
    const full = Buffer.concat([
      ethernet('02:00:00:00:00:02', '02:00:00:00:00:01', 0x0800),
      ipv4({ src: '1.1.1.1', dst: '2.2.2.2', ttl: 9, protocol: 6, payloadLength: 24 }),
      tcp(1, 2, 3, Buffer.alloc(4, 7)),
    ]);
    for (let n = 0; n <= full.length; n++) {
      const part = full.subarray(0, n);
      const r = e.process(part, 0);
      expect(r.frame!.equals(part), `length ${n}`).to.equal(true);
    }
  });
});
