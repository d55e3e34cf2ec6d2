// P4Segment: simple_router between the guest (port 1) and the host link
// (port 2) through the FrameEndpoint hooks: routed frames leave rewritten on
// the right side, drops are claimed, unchanged frames are left to the device,
// l2_switch floods to the other side only.

import { expect } from 'chai';
import { P4Engine } from '../../../lib/p4/engine/engine';
import { runCommand, runCommands } from '../../../lib/p4/engine/commands';
import { P4Segment } from '../../../lib/p4/device/segment';
import { ethernet, fixtureText, ipv4, udp } from '../../support/p4';

function rig(program: string) {
  const engine = P4Engine.load(fixtureText(program));
  const host: Buffer[] = [];
  const guest: Buffer[] = [];
  const digests: bigint[][] = [];
  const seg = new P4Segment(engine, {
    toHost: (f) => (host.push(Buffer.from(f)), true),
    toGuest: (f) => guest.push(Buffer.from(f)),
    onDigest: (d) => d.forEach((x) => digests.push(x.values)),
  });
  return { engine, seg, host, guest, digests };
}

const body = udp(1, 2, Buffer.alloc(18, 3));
const ipFrame = (dst: string, ttl = 64) =>
  Buffer.concat([
    ethernet('00:00:00:00:00:99', '00:00:00:00:00:11', 0x0800),
    ipv4({ src: '10.0.2.1', dst, ttl, protocol: 17, payloadLength: body.length }),
    body,
  ]);

describe('p4: the engine on the Ethernet segment', () => {
  it('simple_router: guest to host and host to guest, rewritten, claimed', () => {
    const { engine, seg, host, guest } = rig('simple_router.json');
    expect(runCommands(engine, fixtureText('commands.txt')).ok).to.equal(true);
    expect(seg.claimTx(ipFrame('10.0.1.10'))).to.equal(true);
    expect(host).to.have.length(1);
    expect(host[0]!.subarray(0, 12).toString('hex')).to.equal('00040000000100aabb000001');
    expect(host[0]![14 + 8]).to.equal(63);
    expect(seg.claimRx(ipFrame('10.0.0.10'))).to.equal(true);
    expect(guest).to.have.length(1);
    expect(guest[0]!.subarray(0, 12).toString('hex')).to.equal('00040000000000aabb000000');
    expect(seg.claimTx(ipFrame('10.0.0.10'))).to.equal(true); // hairpin back to the guest
    expect(guest).to.have.length(2);
    expect(seg.claimTx(ipFrame('10.9.9.9'))).to.equal(true);
    expect(seg.stats).to.deep.include({ fromGuest: 3, fromHost: 1, dropped: 1, toHost: 1, toGuest: 2, passed: 0 });
  });

  it('l2_switch: unchanged frames to the natural side are left to the device; floods go to the other side', () => {
    const { engine, seg, host, guest, digests } = rig('l2_switch.json');
    for (const c of [
      'table_set_default smac mac_learn',
      'table_set_default dmac broadcast',
      'table_add dmac forward 00:00:00:00:00:02 => 2',
      'table_add dmac forward 00:00:00:00:00:05 => 7',
    ]) {
      expect(runCommand(engine, c).ok, c).to.equal(true);
    }
    const f = (dst: string) => Buffer.concat([ethernet(dst, '00:00:00:00:00:01', 0x88b5), Buffer.alloc(46)]);
    expect(seg.claimTx(f('00:00:00:00:00:02'))).to.equal(false); // to port 2, unchanged: the device sends it
    expect(seg.claimTx(f('ff:ff:ff:ff:ff:ff'))).to.equal(false); // flood from the guest: only the host side
    expect(seg.claimRx(f('ff:ff:ff:ff:ff:ff'))).to.equal(false); // flood from the host: only the guest side
    expect(seg.claimTx(f('00:00:00:00:00:05'))).to.equal(true); // port 7 exists nowhere
    expect([host.length, guest.length]).to.deep.equal([0, 0]);
    expect(seg.stats).to.deep.include({ passed: 3, unknownPort: 1 });
    expect(digests[0]).to.deep.equal([1n, 1n]);
    expect(digests[2]).to.deep.equal([1n, 2n]);
  });
});
