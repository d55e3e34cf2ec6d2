// Frames really crossing a host TAP. The server opens the TAP in the root
// namespace (as --tap does), then the TAP is moved into a network namespace
// of its own and given 10.99.0.1/24 there, so the kernel on the other side is
// a real IPv4 stack: it answers the guest's ARP and ICMP echo requests, and
// sends UDP datagrams (bash /dev/udp, no extra tools) and ARP requests to the
// guest. Skipped unless root with /dev/net/tun.

import { expect } from 'chai';
import { spawn } from 'child_process';
import { TapLink } from '../../lib/ionic/tap';
import { IonicGuest, RxFrame, txCmd } from '../support/ionic/guest';
import { TxOp } from '../support/ionic/regs';
import { pattern, TCP_PSH, tcpFrame } from '../support/ionic/tcp-frames';
import { canUseTap, DEVICE_MAC, Rig, run, runQuiet } from '../support/ionic/rig';
import { skipBecause } from '../support/skip';
import {
  arp,
  BROADCAST,
  ETH_IPV4,
  ethernet,
  icmpEcho,
  ip,
  ipv4,
  macText,
  parseArp,
  parseEcho,
  parseIpv4,
  parseUdp,
} from '../support/ionic/wire';

const HOST_IP = '10.99.0.1';
const GUEST_IP = '10.99.0.2';

/** Run a shell command inside the namespace without blocking the event loop (the server lives in it). */
function nsExec(ns: string, script: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const p = spawn('ip', ['netns', 'exec', ns, 'bash', '-c', script], { stdio: 'ignore' });
    p.on('error', reject);
    p.on('exit', (code) => resolve(code ?? -1));
  });
}

describe('ionic: frames through a host TAP in a network namespace', function () {
  const suffix = process.pid % 1000000;
  const ns = `ernic-t${suffix}`;
  const tap = `ernt${suffix}`;
  let tapLink: TapLink | null = null;
  let rig: Rig | null = null;
  let g: IonicGuest;
  let hostMac: Buffer;

  const isArpReply = (f: RxFrame): boolean => parseArp(f.data)?.op === 2;

  before(async function () {
    if (!canUseTap()) skipBecause(this, 'needs root and /dev/net/tun for a TAP');
    runQuiet('ip', ['netns', 'del', ns]);
    runQuiet('ip', ['link', 'del', tap]);
    run('ip', ['tuntap', 'add', 'dev', tap, 'mode', 'tap']);
    tapLink = new TapLink(tap);
    rig = await Rig.start({ link: tapLink });
    run('ip', ['netns', 'add', ns]);
    run('ip', ['link', 'set', 'dev', tap, 'netns', ns]);
    run('ip', ['netns', 'exec', ns, 'sysctl', '-qw', 'net.ipv6.conf.all.disable_ipv6=1']);
    run('ip', ['netns', 'exec', ns, 'sysctl', '-qw', 'net.ipv6.conf.default.disable_ipv6=1']);
    run('ip', ['-n', ns, 'link', 'set', 'dev', tap, 'addrgenmode', 'none']);
    run('ip', ['-n', ns, 'addr', 'add', `${HOST_IP}/24`, 'dev', tap]);
    run('ip', ['-n', ns, 'link', 'set', 'dev', 'lo', 'up']);
    run('ip', ['-n', ns, 'link', 'set', 'dev', tap, 'up']);
    const info = JSON.parse(run('ip', ['-n', ns, '-j', 'link', 'show', 'dev', tap])) as Array<{ address: string }>;
    hostMac = Buffer.from(info[0]!.address.split(':').map((h) => parseInt(h, 16)));
    g = await rig.probed(1);
  });

  after(async () => {
    // The device closes the TAP fd; then the namespace (and the TAP in it) goes.
    if (rig) await rig.close();
    tapLink?.close();
    runQuiet('ip', ['netns', 'del', ns]);
    runQuiet('ip', ['link', 'del', tap]);
  });

  afterEach(() => {
    if (rig) expect(g.violations).to.deep.equal([]);
  });

  it("guest to host: an ARP request for 10.99.0.1 gets the kernel's ARP reply on the RX queue", async () => {
    expect((await g.sendFrame(arp(1, DEVICE_MAC, ip(GUEST_IP), BROADCAST, ip(HOST_IP)))).status).to.equal(0);
    const r = await g.waitRxFrame({ match: isArpReply });
    const a = parseArp(r.data)!;
    expect(r.status).to.equal(0);
    expect(r.len).to.equal(42);
    expect([a.senderIp, a.targetIp]).to.deep.equal([HOST_IP, GUEST_IP]);
    expect(macText(a.senderMac)).to.equal(macText(hostMac));
    expect(macText(a.targetMac)).to.equal(macText(DEVICE_MAC));
    expect(macText(r.data.subarray(0, 6))).to.equal(macText(DEVICE_MAC));
  });

  it('guest to host: ICMP echo requests (56 bytes, and 1400 bytes in SG pieces) get matching echo replies', async () => {
    const sizes = [56, 1400];
    for (const [i, size] of sizes.entries()) {
      const data = Buffer.alloc(size);
      for (let k = 0; k < size; k++) data[k] = (k * 13 + i) & 0xff;
      const frame = ethernet(
        hostMac,
        DEVICE_MAC,
        ETH_IPV4,
        ipv4(ip(GUEST_IP), ip(HOST_IP), 1, icmpEcho(8, 0x4e43, i + 1, data), 100 + i),
      );
      const pieces = size > 1000 ? [34, 8, 700, frame.length - 742] : [frame.length];
      expect((await g.sendFrame(frame, { pieces })).status).to.equal(0);
      const r = await g.waitRxFrame({ match: (f) => parseEcho(f.data)?.type === 0 });
      const e = parseEcho(r.data)!;
      expect([e.id, e.seq, e.checksumOk, parseIpv4(r.data)!.headerOk]).to.deep.equal([0x4e43, i + 1, true, true]);
      expect(e.data.equals(data)).to.equal(true);
      expect(r.len).to.equal(14 + 20 + 8 + size);
      expect(parseIpv4(r.data)!.src).to.equal(HOST_IP);
    }
  });

  it('host to guest: UDP datagrams arrive in order with their exact lengths, one completion per descriptor', async () => {
    run('ip', ['-n', ns, 'neigh', 'replace', GUEST_IP, 'lladdr', macText(DEVICE_MAC), 'dev', tap, 'nud', 'permanent']);
    const sizes = [1, 100, 700, 1472];
    const script = sizes.map((n) => `printf '%*s' ${n} '' > /dev/udp/${GUEST_IP}/7001`).join('; ');
    expect(await nsExec(ns, script)).to.equal(0);
    const got: RxFrame[] = [];
    for (let i = 0; i < sizes.length; i++)
      got.push(await g.waitRxFrame({ match: (f) => parseUdp(f.data)?.dstPort === 7001 }));
    expect(got.map((r) => r.status)).to.deep.equal([0, 0, 0, 0]);
    // Frames below the 60-byte minimum are padded by nobody on a TAP: 14 + 20 + 8 + payload.
    expect(got.map((r) => r.len)).to.deep.equal(sizes.map((n) => 42 + n));
    expect(got.map((r) => parseUdp(r.data)!.data.length)).to.deep.equal(sizes);
    expect(got.every((r) => parseUdp(r.data)!.data.equals(Buffer.alloc(parseUdp(r.data)!.data.length, 0x20)))).to.equal(
      true,
    );
    for (let i = 1; i < got.length; i++) expect(got[i]!.index).to.equal((got[i - 1]!.index + 1) % 64);
    run('ip', ['-n', ns, 'neigh', 'del', GUEST_IP, 'dev', tap]);
  });

  it('host to guest and back: the kernel ARPs for the guest, the guest answers, and the queued datagram follows', async () => {
    runQuiet('ip', ['-n', ns, 'neigh', 'flush', 'dev', tap]);
    g.takeRx();
    const sent = nsExec(ns, `printf hello > /dev/udp/${GUEST_IP}/7002`);
    const req = await g.waitRxFrame({ match: (f) => parseArp(f.data)?.op === 1 });
    const a = parseArp(req.data)!;
    expect([a.senderIp, a.targetIp]).to.deep.equal([HOST_IP, GUEST_IP]);
    expect(req.data.subarray(0, 6).equals(BROADCAST)).to.equal(true);
    expect((await g.sendFrame(arp(2, DEVICE_MAC, ip(GUEST_IP), a.senderMac, ip(HOST_IP)))).status).to.equal(0);
    const u = await g.waitRxFrame({ match: (f) => parseUdp(f.data)?.dstPort === 7002 });
    expect(parseUdp(u.data)!.data.toString()).to.equal('hello');
    expect(await sent).to.equal(0);
  });

  it('guest to host: a TSO run reaches the kernel as one 64,000-byte TCP packet (its RST acknowledges all of it)', async () => {
    // No listener on the port: the kernel resets, acknowledging seq + the whole payload (the segment has no ACK flag).
    const seq = 0x10000000;
    const { frame, hdrLen } = tcpFrame({
      payload: pattern(64000),
      tsoSeed: true,
      flags: TCP_PSH,
      seq,
      src: ip(GUEST_IP),
      dst: ip(HOST_IP),
      dstMac: hostMac,
    });
    DEVICE_MAC.copy(frame, 6);
    const base = g.alloc(frame.length);
    frame.copy(g.mem(base, frame.length));
    const run: { desc: Buffer }[] = [];
    for (let off = 0; off < frame.length;) {
      const take = Math.min(frame.length - off, off === 0 ? hdrLen + 1448 : 1448);
      const d = Buffer.alloc(16);
      d.writeBigUInt64LE(
        txCmd(TxOp.TSO, (off === 0 ? 0x4 : 0) | (off + take >= frame.length ? 0x8 : 0), 0, base + off),
        0,
      );
      d.writeUInt16LE(take, 8);
      d.writeUInt16LE(hdrLen, 12);
      d.writeUInt16LE(1448, 14);
      run.push({ desc: d });
      off += take;
    }
    expect((await g.postTxRun(0, run)).status).to.equal(0);
    const rst = await g.waitRxFrame({
      match: (f) => f.data.length >= 54 && f.data[23] === 6 && (f.data[47]! & 0x04) !== 0,
    });
    expect(rst.data.readUInt32BE(42)).to.equal(seq + 64000);
  });

  it('counts on both sides agree: the TAP received exactly the frames the device reports sent', async () => {
    rig!.device.stats.flush();
    const sentByDevice = g.lifStat('tx_ucast_packets') + g.lifStat('tx_bcast_packets') + g.lifStat('tx_mcast_packets');
    const j = JSON.parse(run('ip', ['-n', ns, '-s', '-j', 'link', 'show', 'dev', tap])) as Array<{
      stats64: { rx: { packets: number }; tx: { packets: number } };
    }>;
    expect(sentByDevice).to.equal(4 + 45); // ARP request, two echo requests, ARP reply, the TSO run's 45 segments
    // The TSO run crossed the TAP as one GSO packet.
    expect(j[0]!.stats64.rx.packets).to.equal(4 + 1);
    expect(g.lifStat('rx_ucast_packets') + g.lifStat('rx_bcast_packets')).to.be.at.least(8);
  });
});
