// parser_deparser_1.json: Ethernet -> IPv4 -> TCP | UDP. Frames built by hand
// parse into the right fields (including the sub-byte ones) and deparse
// byte-exact; a short frame stops the parser with PacketTooShort and still
// comes out unchanged.

import { expect } from 'chai';
import { P4Engine } from '../../../lib/p4/engine/engine';
import { PacketState, ParserError } from '../../../lib/p4/frame/packet-state';
import { ethernet, fixtureText, ipv4, tcp, udp } from '../../support/p4';

describe('p4: parser_deparser_1 parse/deparse', () => {
  let engine: P4Engine;
  let L: P4Engine['layout'];
  before(function () {
    engine = P4Engine.load(fixtureText('parser_deparser_1.json'));
    L = engine.layout;
  });
  const get = (st: PacketState, h: string, f: string) => st.get(L.headerByName.get(h)!.byName.get(f)!);
  const valid = (st: PacketState, h: string) => st.valid[L.headerByName.get(h)!.index];

  const payload = Buffer.from('hello, p4 world');
  const udpFrame = Buffer.concat([
    ethernet('02:00:00:00:00:02', '02:00:00:00:00:01', 0x0800),
    ipv4({ src: '10.0.0.1', dst: '10.0.0.2', ttl: 64, protocol: 17, payloadLength: 8 + payload.length }),
    udp(4791, 5000, payload),
  ]);
  const tcpFrame = Buffer.concat([
    ethernet('02:00:00:00:00:02', '02:00:00:00:00:01', 0x0800),
    ipv4({ src: '10.0.0.1', dst: '10.0.0.2', ttl: 7, protocol: 6, payloadLength: 20 + payload.length }),
    tcp(1234, 80, 0xdeadbeef, payload),
  ]);

  it('extracts Ethernet, IPv4 and UDP fields', () => {
    const st = engine.parse(udpFrame);
    expect([valid(st, 'ethernet'), valid(st, 'ipv4'), valid(st, 'udp'), valid(st, 'tcp')]).to.deep.equal([1, 1, 1, 0]);
    expect(get(st, 'ethernet', 'dstAddr')).to.equal(0x020000000002n);
    expect(get(st, 'ethernet', 'etherType')).to.equal(0x0800n);
    expect(get(st, 'ipv4', 'version')).to.equal(4n);
    expect(get(st, 'ipv4', 'ihl')).to.equal(5n);
    expect(get(st, 'ipv4', 'flags')).to.equal(2n); // DF
    expect(get(st, 'ipv4', 'fragOffset')).to.equal(0n);
    expect(get(st, 'ipv4', 'srcAddr')).to.equal(0x0a000001n);
    expect(get(st, 'udp', 'dstPort')).to.equal(5000n);
    expect(st.offset).to.equal(14 + 20 + 8);
  });

  it('extracts TCP with its 4-bit data offset', () => {
    const st = engine.parse(tcpFrame);
    expect(valid(st, 'tcp')).to.equal(1);
    expect(valid(st, 'udp')).to.equal(0);
    expect(get(st, 'tcp', 'seqNo')).to.equal(0xdeadbeefn);
    expect(get(st, 'tcp', 'dataOffset')).to.equal(5n);
    expect(get(st, 'tcp', 'res')).to.equal(0n);
    expect(get(st, 'tcp', 'flags')).to.equal(0x18n);
  });

  for (const [name, frame] of [
    ['UDP', udpFrame],
    ['TCP', tcpFrame],
    [
      'ARP (Ethernet only)',
      Buffer.concat([ethernet('ff:ff:ff:ff:ff:ff', '02:00:00:00:00:01', 0x0806), Buffer.alloc(28, 0x11)]),
    ],
    [
      'IPv4/ICMP (no L4 header parsed)',
      Buffer.concat([
        ethernet('02:00:00:00:00:02', '02:00:00:00:00:01', 0x0800),
        ipv4({ src: '1.2.3.4', dst: '5.6.7.8', ttl: 1, protocol: 1, payloadLength: 8 }),
        Buffer.alloc(8, 0xaa),
      ]),
    ],
  ] as const) {
    it(`round-trips ${name} byte-exact through process()`, () => {
      const r = engine.process(frame, 3);
      expect(r.dropped).to.equal(false);
      expect(r.frame!.equals(frame)).to.equal(true);
      expect(r.frame).to.not.equal(frame);
    });
  }

  it('re-emits modified sub-byte fields in place', () => {
    const st = engine.parse(tcpFrame);
    const f = (h: string, n: string) => L.headerByName.get(h)!.byName.get(n)!;
    st.set(f('ipv4', 'flags'), 5n);
    st.set(f('ipv4', 'fragOffset'), 0x1abcn);
    st.set(f('tcp', 'res'), 0xfn);
    const out = engine.deparse(st);
    expect(out.readUInt16BE(14 + 6)).to.equal((5 << 13) | 0x1abc);
    expect(out[14 + 20 + 12]).to.equal(0x5f);
    expect(out.subarray(14 + 40).equals(payload)).to.equal(true);
  });

  it('stops at a short IPv4 header with PacketTooShort and passes the frame through', () => {
    const short = udpFrame.subarray(0, 14 + 12);
    const r = engine.process(short, 0);
    expect(r.parserError).to.equal(ParserError.PacketTooShort);
    expect(r.frame!.equals(short)).to.equal(true);
    expect(engine.parse(short).valid[L.headerByName.get('ipv4')!.index]).to.equal(0);
  });

  it('handles an empty frame', () => {
    const r = engine.process(Buffer.alloc(0), 0);
    expect(r.parserError).to.equal(ParserError.PacketTooShort);
    expect(r.frame!.length).to.equal(0);
  });
});
