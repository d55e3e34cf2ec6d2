// The TCP/IP host's offload and batching paths against hand-built frames
// (spec/support/s3-frames.ts, not the code under test): a TSO super-frame
// and a partial checksum taken whole when the device says so (and dropped
// and counted without that word), one ACK per device TX pass, our window
// scaled by the shift a 1 MiB buffer needs, segments cut from many small
// writes, every frame's RX sum, and malformed super-frames dropped and
// counted, never thrown on.

import { expect } from 'chai';
import { TcpConnection, TcpStack } from '../../../lib/net/tcp-host';
import { FrameOffload, VirtioGso } from '../../../lib/net/vnet';
import { ACK, decode, FIN, Out, PSH, SYN, tcp } from '../../support/s3-frames';

const ISS = 1000;
const PORT = 9000;

/** The RFC 1071 sum of a span, byte by byte (the reference the stack's sums are held to). */
function referenceSum(b: Buffer): number {
  let s = 0;
  for (let i = 0; i < b.length; i += 2) s += (b[i]! << 8) | (i + 1 < b.length ? b[i + 1]! : 0);
  while (s > 0xffff) s = (s & 0xffff) + (s >>> 16);
  return s;
}

interface Rig {
  stack: TcpStack;
  out: Out[];
  sums: { frame: Buffer; l3Sum: number }[];
  conns: TcpConnection[];
  take(): Out[];
}

function rig(limits: object = {}): Rig {
  const out: Out[] = [];
  const sums: { frame: Buffer; l3Sum: number }[] = [];
  const conns: TcpConnection[] = [];
  const stack = new TcpStack({
    ip: '192.168.200.1',
    ports: [PORT],
    send: (f, l3Sum) => {
      out.push(decode(Buffer.from(f)));
      sums.push({ frame: Buffer.from(f), l3Sum: l3Sum ?? -1 });
    },
    onConnection: (c) => conns.push(c),
    iss: () => ISS,
    limits,
  });
  return { stack, out, sums, conns, take: () => out.splice(0) };
}

/** Established from port 40000, client ISN 0 (data starts at 1); window scale 7 offered unless `wscale` is null. */
function established(r: Rig, wscale: number | null = 7): TcpConnection {
  r.stack.claimTx(
    tcp({
      sport: 40000,
      dport: PORT,
      seq: 0,
      ack: 0,
      flags: SYN,
      window: 65535,
      mss: 8960,
      ...(wscale === null ? {} : { wscale }),
    }),
  );
  r.stack.claimTx(tcp({ sport: 40000, dport: PORT, seq: 1, ack: ISS + 1, flags: ACK, window: 65535 }));
  r.take();
  return r.conns[0]!;
}

/** A data segment from the guest as its stack hands a TSO super-frame to the NIC: IPv4 checksum 0, TCP field a seed. */
function superFrame(seq: number, data: Buffer): Buffer {
  const f = tcp({ sport: 40000, dport: PORT, seq, ack: ISS + 1, flags: ACK | PSH, window: 65535, data });
  f.writeUInt16BE(0, 14 + 10);
  f.writeUInt16BE(0x1234, 14 + 20 + 16);
  return f;
}

function tsoOffload(mss = 1448): FrameOffload {
  const o = new FrameOffload();
  o.gsoType = VirtioGso.TCPV4;
  o.gsoSize = mss;
  o.hdrLen = 54;
  o.needsCsum = true;
  o.csumStart = 34;
  o.csumOffset = 16;
  return o;
}

const readAll = (c: TcpConnection): Buffer => {
  const parts: Buffer[] = [];
  for (let b = c.read() as Buffer | null; b; b = c.read() as Buffer | null) parts.push(b);
  return Buffer.concat(parts);
};

describe('tcp host: offloads, ACK batching, windows', () => {
  it('a TSO super-frame of 60000 bytes is one segment with the offload word; without it, its checksums fail: dropped, counted', () => {
    const r = rig();
    const c = established(r);
    const data = Buffer.alloc(60000, 0x5a);
    expect(r.stack.claimTx(superFrame(1, data))).to.equal(true);
    expect(r.stack.counts.badFrames).to.equal(1);
    expect(r.take()).to.have.length(0);
    expect(r.stack.claimTx(superFrame(1, data), tsoOffload())).to.equal(true);
    expect(readAll(c).equals(data)).to.equal(true);
    const acks = r.take();
    expect(acks.map((o) => [o.ack, o.flags])).to.deep.equal([[60001, ACK]]);
    expect(r.stack.counts.badFrames).to.equal(1);
  });

  it('a partial checksum (needsCsum): the TCP sum is not checked, the IPv4 header still is', () => {
    const r = rig();
    const c = established(r);
    const o = new FrameOffload();
    o.needsCsum = true;
    o.csumStart = 34;
    o.csumOffset = 16;
    const f = tcp({
      sport: 40000,
      dport: PORT,
      seq: 1,
      ack: ISS + 1,
      flags: ACK,
      window: 65535,
      data: Buffer.from('hello'),
    });
    f.writeUInt16BE(0x4321, 14 + 20 + 16); // the seed, not a checksum
    expect(r.stack.claimTx(f, o)).to.equal(true);
    expect(readAll(c).toString()).to.equal('hello');
    const bad = tcp({
      sport: 40000,
      dport: PORT,
      seq: 6,
      ack: ISS + 1,
      flags: ACK,
      window: 65535,
      data: Buffer.from('x'),
    });
    bad[14 + 10]! ^= 0xff;
    expect(r.stack.claimTx(bad, o)).to.equal(true);
    expect(r.stack.counts.badFrames).to.equal(1);
    expect(c.readableLength).to.equal(0);
  });

  it('inside a device TX pass, data is acknowledged once at its end; a FIN at once; data we send carries the ACK instead', () => {
    const r = rig();
    const c = established(r);
    r.stack.txPass(true);
    for (let i = 0; i < 5; i++)
      r.stack.claimTx(
        tcp({
          sport: 40000,
          dport: PORT,
          seq: 1 + 100 * i,
          ack: ISS + 1,
          flags: ACK,
          window: 65535,
          data: Buffer.alloc(100, i),
        }),
      );
    expect(r.out).to.have.length(0);
    r.stack.txPass(false);
    expect(r.take().map((o) => [o.ack, o.data!.length])).to.deep.equal([[501, 0]]);
    // A FIN inside a pass: acknowledged at once, nothing more at the end.
    r.stack.txPass(true);
    r.stack.claimTx(tcp({ sport: 40000, dport: PORT, seq: 501, ack: ISS + 1, flags: ACK | FIN, window: 65535 }));
    expect(r.take().map((o) => o.ack)).to.deep.equal([502]);
    r.stack.txPass(false);
    expect(r.take()).to.have.length(0);
    // Our own data in the pass carries the acknowledgment: no bare ACK after it.
    const r2 = rig();
    const c2 = established(r2);
    r2.stack.txPass(true);
    r2.stack.claimTx(
      tcp({ sport: 40000, dport: PORT, seq: 1, ack: ISS + 1, flags: ACK, window: 65535, data: Buffer.from('q') }),
    );
    c2.write(Buffer.from('answer'));
    r2.stack.txPass(false);
    expect(r2.take().map((o) => [o.ack, o.data!.toString()])).to.deep.equal([[2, 'answer']]);
    expect(c.readableLength + c2.readableLength).to.be.greaterThan(0);
  });

  it('our window: scaled by 5 (a 1 MiB buffer) when the peer offers scaling, at most 65535 unscaled when it does not', () => {
    const r = rig();
    const c = established(r);
    r.stack.claimTx(superFrame(1, Buffer.alloc(40000)), tsoOffload());
    const [a] = r.take();
    expect(a!.window).to.equal(Math.floor((1024 * 1024 - 40000) / 32));
    readAll(c);
    const plain = rig();
    established(plain, null);
    plain.stack.claimTx(
      tcp({ sport: 40000, dport: PORT, seq: 1, ack: ISS + 1, flags: ACK, window: 65535, data: Buffer.alloc(1000) }),
    );
    expect(plain.take()[0]!.window).to.equal(65535);
  });

  it('segments are cut straight from many small writes queued behind a closed window: full MSS, the right bytes, PSH on the last', () => {
    const r = rig();
    const c = established(r);
    r.stack.claimTx(tcp({ sport: 40000, dport: PORT, seq: 1, ack: ISS + 1, flags: ACK, window: 0 })); // closed
    const all = Buffer.alloc(30000);
    for (let i = 0; i < all.length; i++) all[i] = (i * 7) & 0xff;
    for (let at = 0; at < all.length; at += 7) c.write(all.subarray(at, Math.min(all.length, at + 7)));
    expect(r.take()).to.have.length(0);
    r.stack.claimTx(tcp({ sport: 40000, dport: PORT, seq: 1, ack: ISS + 1, flags: ACK, window: 65535 })); // 8 MiB with shift 7
    const segs = r.take();
    expect(segs.map((o) => o.data!.length)).to.deep.equal([8960, 8960, 8960, 30000 - 3 * 8960]);
    expect(segs.every((o) => o.tcpOk && o.ipOk)).to.equal(true);
    expect(segs.map((o) => o.flags! & PSH)).to.deep.equal([0, 0, 0, PSH]);
    expect(Buffer.concat(segs.map((o) => o.data!)).equals(all)).to.equal(true);
  });

  it("every frame carries the RFC 1071 sum after its Ethernet header (the device's RX checksum needs no pass)", () => {
    const r = rig();
    const c = established(r);
    r.stack.claimTx(tcp({ sport: 40000, dport: PORT, seq: 1, ack: ISS + 1, flags: ACK, window: 65535 }));
    for (const n of [1, 2, 3, 1459, 1460, 8960, 9001]) c.write(Buffer.alloc(n, n & 0xff));
    expect(r.sums.length).to.be.greaterThan(7);
    for (const { frame, l3Sum } of r.sums) {
      if (frame.readUInt16BE(12) !== 0x0800) continue;
      expect(l3Sum, `frame of ${frame.length}`).to.equal(referenceSum(frame.subarray(14)));
    }
  });

  it('malformed super-frames are dropped and counted, never thrown on: a total length past the frame, a data offset past the segment', () => {
    const r = rig();
    const c = established(r);
    const long = superFrame(1, Buffer.alloc(3000));
    long.writeUInt16BE(60000, 14 + 2);
    expect(r.stack.claimTx(long, tsoOffload())).to.equal(true);
    const doff = superFrame(1, Buffer.alloc(20));
    doff[14 + 20 + 12] = 0xf0; // 60 bytes of header in a 40-byte segment
    expect(r.stack.claimTx(doff.subarray(0, 14 + 20 + 40), tsoOffload())).to.equal(true);
    expect(r.stack.counts.badFrames).to.equal(2);
    expect(c.readableLength).to.equal(0);
    expect(r.take()).to.have.length(0);
  });

  it('a super-frame past the receive window: the part that fits is taken, the rest dropped and counted (the guest sends it again)', () => {
    const r = rig({ rxLimit: 32 * 1024 });
    const c = established(r);
    r.stack.claimTx(superFrame(1, Buffer.alloc(50000, 1)), tsoOffload());
    expect(c.readableLength).to.equal(32 * 1024);
    expect(c.counts.dropped).to.equal(1);
    expect(r.take().map((o) => o.ack)).to.deep.equal([1 + 32 * 1024]);
  });
});
