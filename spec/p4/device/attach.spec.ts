// The P4 engine on the device (lib/p4/device/attach.ts): simple_router with its
// commands.txt between the guest (port 1) and the host link (port 2), driven
// through the in-process device by the guest model, with a fake host link
// capturing what leaves. Routed frames leave rewritten (MACs, TTL-1, fresh
// checksum); unrouted ones are gone and counted; a frame routed back to the
// side it came from goes back there.

import { expect } from 'chai';
import { attachP4, p4FromCli } from '../../../lib/p4/device/attach';
import type { P4Segment } from '../../../lib/p4/device/segment';
import { IonicGuest } from '../../support/ionic/guest';
import { Rig } from '../../support/ionic/rig';
import { FakeLink } from '../../support/ionic/wire';
import { ethernet, FIXTURES, ipv4, ipv4Checksum, udp } from '../../support/p4';
import * as path from 'path';

const body = udp(1000, 2000, Buffer.from('payload bytes stay untouched by the router'));
function frameTo(dst: string, ttl: number): Buffer {
  return Buffer.concat([
    ethernet('00:00:00:00:00:99', '00:00:00:00:00:11', 0x0800),
    ipv4({ src: '10.0.2.1', dst, ttl, protocol: 17, payloadLength: body.length }),
    body,
  ]);
}
function routed(dst: string, ttl: number, dmac: string, smac: string): Buffer {
  return Buffer.concat([
    ethernet(dmac, smac, 0x0800),
    ipv4({ src: '10.0.2.1', dst, ttl: ttl - 1, protocol: 17, payloadLength: body.length }),
    body,
  ]);
}

describe('p4: simple_router on the device between the guest and the host link', () => {
  let rig: Rig;
  let g: IonicGuest;
  let link: FakeLink;
  let seg: P4Segment;

  before(async () => {
    const setup = p4FromCli({
      program: path.join(FIXTURES, 'simple_router.json'),
      commands: path.join(FIXTURES, 'commands.txt'),
    });
    if (!setup.ok) throw new Error(setup.error);
    expect(setup.value!.commands).to.equal(9);
    expect(setup.value!.guestScope).to.equal('none');
    link = new FakeLink();
    rig = await Rig.start({ link });
    seg = attachP4(rig.device, setup.value!.engine).segment;
    expect(seg).to.not.equal(null);
    g = await rig.probed(1, {});
  });
  after(async () => rig?.close());

  it('a guest frame to a routed address leaves on the host link rewritten: MACs, TTL-1, checksum', async () => {
    link.sent.length = 0;
    await g.sendFrame(frameTo('10.0.1.10', 64));
    expect(link.sent).to.have.length(1);
    const out = link.sent[0]!;
    const want = routed('10.0.1.10', 64, '00:04:00:00:00:01', '00:aa:bb:00:00:01');
    expect(out.toString('hex')).to.equal(want.toString('hex'));
    expect(out[14 + 8]).to.equal(63);
    expect(out.readUInt16BE(14 + 10)).to.equal(ipv4Checksum(out.subarray(14, 34)));
    expect(seg.stats.toHost).to.equal(1);
  });

  it('an unrouted guest frame is dropped: nothing on the host link, counted', async () => {
    link.sent.length = 0;
    const before = seg.stats.dropped;
    await g.sendFrame(frameTo('10.9.9.9', 64));
    await g.sendFrame(frameTo('10.0.1.10', 0)); // TTL 0: dropped too
    expect(link.sent).to.have.length(0);
    expect(seg.stats.dropped).to.equal(before + 2);
    expect(rig.device.lif.link).to.equal(link);
  });

  it('a guest frame routed to port 1 comes back to the guest, rewritten', async () => {
    link.sent.length = 0;
    await g.sendFrame(frameTo('10.0.0.10', 9));
    const f = await g.waitRxFrame();
    expect(f.data.subarray(0, f.len).toString('hex')).to.equal(
      routed('10.0.0.10', 9, '00:04:00:00:00:00', '00:aa:bb:00:00:00').toString('hex'),
    );
    expect(link.sent).to.have.length(0);
  });

  it('a host-link frame routed to port 1 reaches the guest rewritten; an unrouted one never does', async () => {
    g.takeRx();
    link.inject(frameTo('10.9.9.9', 64));
    link.inject(frameTo('10.0.0.10', 33));
    const f = await g.waitRxFrame();
    expect(
      f.data.subarray(0, f.len).equals(routed('10.0.0.10', 33, '00:04:00:00:00:00', '00:aa:bb:00:00:00')),
    ).to.equal(true);
    expect(g.takeRx()).to.have.length(0);
    expect(seg.stats.fromHost).to.equal(2);
  });

  it('a host-link frame routed to port 2 goes back out on the host link', () => {
    link.sent.length = 0;
    link.inject(frameTo('10.0.1.10', 5));
    expect(link.sent).to.have.length(1);
    expect(link.sent[0]!.equals(routed('10.0.1.10', 5, '00:04:00:00:00:01', '00:aa:bb:00:00:01'))).to.equal(true);
  });
});

describe('p4: --p4 without a program', () => {
  it('the segment has no program: frames pass as without --p4 (uncounted)', async () => {
    const setup = p4FromCli({ p4: true });
    expect(setup.ok && setup.value && setup.value.engine).to.equal(null);
    const link = new FakeLink();
    const rig = await Rig.start({ link });
    try {
      const att = attachP4(rig.device, null);
      expect(att.segment.engine).to.equal(null);
      const g = await rig.probed(1, {});
      const f = frameTo('10.9.9.9', 64);
      await g.sendFrame(f);
      expect(link.sent).to.have.length(1);
      expect(link.sent[0]!.equals(f)).to.equal(true);
      expect(att.segment.stats.fromGuest).to.equal(0);
    } finally {
      await rig.close();
    }
  });

  it('no --p4 option at all: no engine', () => {
    expect(p4FromCli({})).to.deep.equal({ ok: true, value: null });
  });
});
