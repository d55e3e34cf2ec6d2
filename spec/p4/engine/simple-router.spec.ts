// simple_router.json with its commands.txt: IPv4 frames in, frames out,
// compared byte-exact with frames built by hand: next-hop MAC as destination,
// the egress port's MAC as source, TTL decremented, header checksum
// recomputed (checked by an independent RFC 1071 sum). Misses, TTL 0 and
// non-IPv4 frames are dropped by the program's default actions.

import { expect } from 'chai';
import { P4Engine } from '../../../lib/p4/engine/engine';
import { runCommand, runCommands } from '../../../lib/p4/engine/commands';
import { ethernet, fixtureText, ipv4, ipv4Checksum, udp } from '../../support/p4';

describe('p4: simple_router with commands.txt', () => {
  let engine: P4Engine;
  beforeEach(() => {
    engine = P4Engine.load(fixtureText('simple_router.json'));
    const r = runCommands(engine, fixtureText('commands.txt'));
    expect(r.ok, JSON.stringify(r.results)).to.equal(true);
    expect(r.results).to.have.length(9);
  });

  const body = udp(1000, 2000, Buffer.from('payload bytes stay untouched'));
  function frameTo(dst: string, ttl: number): Buffer {
    return Buffer.concat([
      ethernet('00:00:00:00:00:99', '00:00:00:00:00:11', 0x0800),
      ipv4({ src: '10.0.2.1', dst, ttl, protocol: 17, payloadLength: body.length }),
      body,
    ]);
  }
  function expected(dst: string, ttl: number, dmac: string, smac: string): Buffer {
    const ip4 = ipv4({ src: '10.0.2.1', dst, ttl: ttl - 1, protocol: 17, payloadLength: body.length });
    return Buffer.concat([ethernet(dmac, smac, 0x0800), ip4, body]);
  }

  it('routes 10.0.0.10 out of port 1 with rewritten MACs, TTL-1 and a fresh checksum', () => {
    const r = engine.process(frameTo('10.0.0.10', 64), 7);
    expect(r.dropped).to.equal(false);
    expect(r.egressPort).to.equal(1);
    const want = expected('10.0.0.10', 64, '00:04:00:00:00:00', '00:aa:bb:00:00:00');
    expect(r.frame!.toString('hex')).to.equal(want.toString('hex'));
    expect(r.frame![14 + 8]).to.equal(63);
    expect(r.frame!.readUInt16BE(14 + 10)).to.equal(ipv4Checksum(r.frame!.subarray(14, 34)));
    expect(r.checksumError).to.equal(false);
  });

  it('routes 10.0.1.10 out of port 2', () => {
    const r = engine.process(frameTo('10.0.1.10', 2), 1);
    expect(r.egressPort).to.equal(2);
    expect(r.frame!.equals(expected('10.0.1.10', 2, '00:04:00:00:00:01', '00:aa:bb:00:00:01'))).to.equal(true);
  });

  it('marks a bad incoming checksum and still rewrites it on the way out', () => {
    const f = frameTo('10.0.0.10', 64);
    f.writeUInt16BE(0xbeef, 14 + 10);
    const r = engine.process(f, 0);
    expect(r.checksumError).to.equal(true);
    expect(r.frame!.readUInt16BE(14 + 10)).to.equal(ipv4Checksum(r.frame!.subarray(14, 34)));
  });

  it('drops an unrouted destination (ipv4_lpm default _drop)', () => {
    const r = engine.process(frameTo('10.9.9.9', 64), 0);
    expect(r.dropped).to.equal(true);
    expect(r.reason).to.equal('program');
    expect(r.frame).to.equal(undefined);
  });

  it('drops TTL 0 and non-IPv4 frames (no route: send_frame has no port 0)', () => {
    expect(engine.process(frameTo('10.0.0.10', 0), 0).dropped).to.equal(true);
    const arp = Buffer.concat([ethernet('ff:ff:ff:ff:ff:ff', '00:00:00:00:00:11', 0x0806), Buffer.alloc(28)]);
    expect(engine.process(arp, 0).dropped).to.equal(true);
  });

  it('routes by longest prefix once a /8 is added beside the /32s', () => {
    expect(runCommand(engine, 'table_add ipv4_lpm set_nhop 10.0.0.0/8 => 10.0.1.10 2').ok).to.equal(true);
    expect(engine.process(frameTo('10.200.0.1', 9), 0).egressPort).to.equal(2);
    expect(engine.process(frameTo('10.0.0.10', 9), 0).egressPort).to.equal(1);
  });

  it('a deleted entry stops matching', () => {
    const r = runCommand(engine, 'table_add ipv4_lpm set_nhop 192.168.0.0/16 => 10.0.0.10 1');
    expect(r.ok && r.handle !== undefined).to.equal(true);
    expect(engine.process(frameTo('192.168.3.4', 9), 0).dropped).to.equal(false);
    expect(runCommand(engine, `table_delete ipv4_lpm ${(r as { handle: number }).handle}`).ok).to.equal(true);
    expect(engine.process(frameTo('192.168.3.4', 9), 0).dropped).to.equal(true);
  });

  it('processes many frames with the same result (state reset between frames)', () => {
    const f = frameTo('10.0.0.10', 64);
    const first = engine.process(f, 0).frame!;
    for (let i = 0; i < 1000; i++) expect(engine.process(f, 0).frame!.equals(first)).to.equal(true);
    expect(engine.stats.frames).to.equal(1001);
  });

  it('refuses malformed commands with a reason, changing nothing', () => {
    const bad = [
      'table_add nosuch set_nhop 10.0.0.1/32 => 10.0.0.1 1',
      'table_add ipv4_lpm nosuch 10.0.0.1/32 => 10.0.0.1 1',
      'table_add ipv4_lpm set_nhop 10.0.0.1/33 => 10.0.0.1 1',
      'table_add ipv4_lpm set_nhop 10.0.0.1/32 => 10.0.0.1',
      'table_add ipv4_lpm set_nhop 10.0.0.1/32 => 10.0.0.1 512',
      'table_add forward set_dmac 10.0.0.10 => 00:04:00:00:00:00',
      'table_add send_frame rewrite_mac 1 => 00:aa:bb:00:00:00:00',
      'table_set_default ipv4_lpm set_nhop 1',
      'counter_read nosuch 0',
      'frobnicate',
      'x'.repeat(5000),
    ];
    for (const c of bad) {
      const r = runCommand(engine, c);
      expect(r.ok, c).to.equal(false);
      if (!r.ok) expect(r.error, c).to.be.a('string').and.not.equal('');
    }
    expect(engine.tables.get('ipv4_lpm')!.entries.size).to.equal(2);
    expect(engine.tables.get('forward')!.entries.size).to.equal(2);
  });

  it('never looks at the JSON again after load (the program object can be wrecked)', () => {
    const p = JSON.parse(fixtureText('simple_router.json'));
    const e = P4Engine.load(p);
    runCommands(e, fixtureText('commands.txt'));
    const before = e.process(frameTo('10.0.0.10', 64), 0).frame!;
    for (const obj of [p, e.program as any]) for (const k of Object.keys(obj)) delete obj[k];
    const after = e.process(frameTo('10.0.0.10', 64), 0).frame!;
    expect(after.equals(before)).to.equal(true);
  });
});
