// The S3 store's TCP endpoint against hand-built frame sequences: ARP, ICMP
// echo, the handshake, data both ways with cumulative ACKs, retransmission
// on (fake) timers, FIN both ways, RST for segments nobody owns, and two
// connections side by side. Frames in are built by spec/support/s3-frames.ts,
// frames out decoded by it; neither uses the code under test.

import { expect } from 'chai';
import * as sinon from 'sinon';
import { TcpConnection, TcpStack } from '../../../lib/net/tcp-host';
import {
  ACK,
  arpRequest,
  decode,
  echoRequest,
  FIN,
  GUEST_IP,
  GUEST_MAC,
  Out,
  PSH,
  RST,
  STORE_MAC,
  SYN,
  tcp,
} from '../../support/s3-frames';

const ISS = 1000;
const PORT = 9000;

interface Rig {
  stack: TcpStack;
  out: Out[];
  conns: TcpConnection[];
  take(): Out[];
}

function rig(opts: { limits?: object; maxConnections?: number } = {}): Rig {
  const out: Out[] = [];
  const conns: TcpConnection[] = [];
  const stack = new TcpStack({
    ip: '192.168.200.1',
    ports: [PORT],
    send: (f) => out.push(decode(Buffer.from(f))),
    onConnection: (c) => conns.push(c),
    iss: () => ISS,
    ...opts,
  });
  return { stack, out, conns, take: () => out.splice(0) };
}

const tick = (): Promise<void> => new Promise((r) => setImmediate(r));

/** Handshake from `sport` with client ISN `cisn`; returns the connection. */
function connect(r: Rig, sport: number, cisn: number, mss = 1460, window = 65535): TcpConnection {
  expect(r.stack.claimTx(tcp({ sport, dport: PORT, seq: cisn, ack: 0, flags: SYN, window, mss }))).to.equal(true);
  const [synack] = r.take();
  expect(synack!.flags).to.equal(SYN | ACK);
  expect(r.stack.claimTx(tcp({ sport, dport: PORT, seq: cisn + 1, ack: ISS + 1, flags: ACK, window }))).to.equal(true);
  expect(r.take()).to.have.length(0);
  return r.conns[r.conns.length - 1]!;
}

describe('s3 tcp: ARP and ICMP', () => {
  it('answers ARP for its address from 02:53:<ip> and ignores other addresses', () => {
    const r = rig();
    expect(r.stack.claimTx(arpRequest(Buffer.from([192, 168, 200, 1])))).to.equal(true);
    const [rep] = r.take();
    expect(rep!.type).to.equal(0x0806);
    expect(rep!.dst).to.deep.equal(GUEST_MAC);
    expect(rep!.src).to.deep.equal(STORE_MAC);
    const a = rep!.body;
    expect(a.readUInt16BE(6)).to.equal(2);
    expect(a.subarray(8, 14)).to.deep.equal(STORE_MAC);
    expect([...a.subarray(14, 18)]).to.deep.equal([192, 168, 200, 1]);
    expect(a.subarray(18, 24)).to.deep.equal(GUEST_MAC);
    expect(a.subarray(24, 28)).to.deep.equal(GUEST_IP);
    expect(r.stack.claimTx(arpRequest(Buffer.from([192, 168, 200, 2])))).to.equal(false);
    expect(r.out).to.have.length(0);
  });

  it('answers ICMP echo with the same id, sequence and data', () => {
    const r = rig();
    expect(r.stack.claimTx(echoRequest(0x1234, 7, Buffer.from('ping payload')))).to.equal(true);
    const [rep] = r.take();
    expect(rep!.ipOk).to.equal(true);
    expect(rep!.proto).to.equal(1);
    const m = rep!.body;
    expect(m[0]).to.equal(0);
    expect(m.readUInt16BE(4)).to.equal(0x1234);
    expect(m.readUInt16BE(6)).to.equal(7);
    expect(m.subarray(8).toString()).to.equal('ping payload');
    let s = 0;
    for (let i = 0; i < m.length; i += 2) s += (m[i]! << 8) | (m[i + 1] ?? 0);
    while (s > 0xffff) s = (s & 0xffff) + (s >>> 16);
    expect(s).to.equal(0xffff);
  });

  it('does not claim frames for another MAC, and drops a bad IPv4 checksum addressed to it', () => {
    const r = rig();
    const f = echoRequest(1, 1, Buffer.alloc(4));
    const other = Buffer.from(f);
    other[5] = 0x99;
    expect(r.stack.claimTx(other)).to.equal(false);
    const bad = Buffer.from(f);
    bad[14 + 10] ^= 0xff;
    expect(r.stack.claimTx(bad)).to.equal(true);
    expect(r.out).to.have.length(0);
    expect(r.stack.counts.badFrames).to.equal(1);
  });
});

describe('s3 tcp: connections', () => {
  afterEach(() => sinon.restore());

  it("handshake: SYN-ACK carries our MSS (8960, a jumbo guest's), acks the ISN, both checksums hold; the ACK establishes", () => {
    const r = rig();
    r.stack.claimTx(tcp({ sport: 40000, dport: PORT, seq: 5000, ack: 0, flags: SYN, window: 65535, mss: 1460 }));
    const [sa] = r.take();
    expect(sa!.ipOk).to.equal(true);
    expect(sa!.tcpOk).to.equal(true);
    expect([sa!.sport, sa!.dport, sa!.seq, sa!.ack, sa!.mss]).to.deep.equal([PORT, 40000, ISS, 5001, 8960]);
    expect(r.conns).to.have.length(0);
    r.stack.claimTx(tcp({ sport: 40000, dport: PORT, seq: 5001, ack: ISS + 1, flags: ACK, window: 65535 }));
    expect(r.conns).to.have.length(1);
    expect(r.conns[0]!.remoteAddress).to.equal('192.168.200.10');
    expect(r.conns[0]!.remotePort).to.equal(40000);
  });

  it('in-order data reaches the stream and is acked cumulatively; a gap is dropped with a duplicate ACK', async () => {
    const r = rig();
    const c = connect(r, 40001, 100);
    const got: Buffer[] = [];
    c.on('data', (d: Buffer) => got.push(d));
    r.stack.claimTx(
      tcp({
        sport: 40001,
        dport: PORT,
        seq: 101,
        ack: ISS + 1,
        flags: ACK | PSH,
        window: 65535,
        data: Buffer.from('hello '),
      }),
    );
    expect(r.take().map((o) => o.ack)).to.deep.equal([107]);
    r.stack.claimTx(
      tcp({ sport: 40001, dport: PORT, seq: 120, ack: ISS + 1, flags: ACK, window: 65535, data: Buffer.from('later') }),
    );
    expect(r.take().map((o) => [o.ack, o.flags])).to.deep.equal([[107, ACK]]);
    // A retransmission overlapping what was taken: only the new tail counts.
    r.stack.claimTx(
      tcp({
        sport: 40001,
        dport: PORT,
        seq: 101,
        ack: ISS + 1,
        flags: ACK,
        window: 65535,
        data: Buffer.from('hello world'),
      }),
    );
    expect(r.take().map((o) => o.ack)).to.deep.equal([112]);
    await tick();
    expect(Buffer.concat(got).toString()).to.equal('hello world');
  });

  it('sends in segments of the peer MSS (536) within its window, PSH on the last', () => {
    const r = rig();
    const c = connect(r, 40002, 0, 536, 2000);
    c.write(Buffer.alloc(3000, 0x61));
    const segs = r.take();
    expect(segs.map((o) => o.data!.length)).to.deep.equal([536, 536, 536, 392]); // 2000 bytes of window
    expect(segs.map((o) => o.seq)).to.deep.equal([ISS + 1, ISS + 537, ISS + 1073, ISS + 1609]);
    expect(segs[3]!.flags! & PSH).to.equal(0);
    r.stack.claimTx(tcp({ sport: 40002, dport: PORT, seq: 1, ack: ISS + 2001, flags: ACK, window: 2000 }));
    const rest = r.take();
    expect(rest.map((o) => o.data!.length)).to.deep.equal([536, 464]);
    expect(rest[1]!.flags! & PSH).to.equal(PSH);
  });

  it('window scaling (RFC 7323): offered in the SYN, answered with the shift our 1 MiB buffer needs (5); later windows scaled, so more than 64 KiB flies; not without the offer', () => {
    const r = rig();
    r.stack.claimTx(tcp({ sport: 40010, dport: PORT, seq: 0, ack: 0, flags: SYN, window: 1000, mss: 1460, wscale: 7 }));
    const [sa] = r.take();
    expect([sa!.mss, sa!.wscale, sa!.tcpOk, sa!.window]).to.deep.equal([8960, 5, true, 65535]);
    r.stack.claimTx(tcp({ sport: 40010, dport: PORT, seq: 1, ack: ISS + 1, flags: ACK, window: 1024 })); // 1024 << 7 = 128 KiB
    const c = r.conns[0]!;
    c.write(Buffer.alloc(200_000, 0x62));
    const flying = r.take().reduce((n, o) => n + o.data!.length, 0);
    expect(flying).to.equal(131072);
    // Without the offer the same window field means 1024 bytes, and the SYN-ACK carries no scale.
    const plain = rig();
    plain.stack.claimTx(tcp({ sport: 40011, dport: PORT, seq: 0, ack: 0, flags: SYN, window: 1000, mss: 1460 }));
    expect(plain.take()[0]!.wscale).to.equal(undefined);
    plain.stack.claimTx(tcp({ sport: 40011, dport: PORT, seq: 1, ack: ISS + 1, flags: ACK, window: 1024 }));
    plain.conns[0]!.write(Buffer.alloc(5000, 0x62));
    expect(plain.take().reduce((n, o) => n + o.data!.length, 0)).to.equal(1024);
    // A shift above 14 is taken as 14: 65535 << 14 (1 GiB). In flight stays within txLimit (256 KiB) all the same:
    // every segment of a window is built in one call, and a guest picks the window.
    const big = rig();
    big.stack.claimTx(
      tcp({ sport: 40012, dport: PORT, seq: 0, ack: 0, flags: SYN, window: 1000, mss: 1460, wscale: 30 }),
    );
    big.take();
    big.stack.claimTx(tcp({ sport: 40012, dport: PORT, seq: 1, ack: ISS + 1, flags: ACK, window: 65535 }));
    big.conns[0]!.write(Buffer.alloc(400_000, 0x63));
    expect(big.take().reduce((n, o) => n + o.data!.length, 0)).to.equal(256 * 1024);
    // The ACK of all of it lets the rest go.
    big.stack.claimTx(tcp({ sport: 40012, dport: PORT, seq: 1, ack: ISS + 1 + 256 * 1024, flags: ACK, window: 65535 }));
    expect(big.take().reduce((n, o) => n + o.data!.length, 0)).to.equal(400_000 - 256 * 1024);
  });

  it('every byte sent sits at its own sequence number when an ACK frees a waiting writer (a large window, writes past txLimit, then end)', async () => {
    const r = rig();
    r.stack.claimTx(tcp({ sport: 40013, dport: PORT, seq: 0, ack: 0, flags: SYN, window: 1000, mss: 1460, wscale: 7 }));
    r.take();
    r.stack.claimTx(tcp({ sport: 40013, dport: PORT, seq: 1, ack: ISS + 1, flags: ACK, window: 8192 })); // 1 MiB
    const c = r.conns[0]!;
    const src = Buffer.alloc(700_000);
    for (let i = 0; i < src.length; i++) src[i] = (i * 31 + (i >> 11)) & 0xff;
    // Like http.Server: a small head, a body past txLimit (the writer waits), then the end.
    c.write(src.subarray(0, 300));
    c.write(src.subarray(300, 400_000));
    c.write(src.subarray(400_000));
    c.end();
    const seen = new Map<number, Buffer>();
    const record = (segs: Out[]): void => {
      for (const o of segs) if (o.data!.length) seen.set(o.seq!, o.data!);
    };
    record(r.take());
    // ACK in steps: each frees room below txLimit, releasing the writer inside the ACK's processing.
    for (let acked = 0; acked < src.length;) {
      acked = Math.min(src.length, acked + 50_000);
      r.stack.claimTx(tcp({ sport: 40013, dport: PORT, seq: 1, ack: ISS + 1 + acked, flags: ACK, window: 8192 }));
      await tick();
      record(r.take());
    }
    expect(seen.size).to.be.greaterThan(400);
    for (const [seq, data] of seen) {
      const off = seq - (ISS + 1);
      expect(data.equals(src.subarray(off, off + data.length)), `segment at offset ${off}`).to.equal(true);
    }
  });

  it('retransmits from the oldest unacked byte on the timer, doubling it, and stops once acked', () => {
    const clock = sinon.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
    const r = rig();
    const c = connect(r, 40003, 0);
    c.write(Buffer.from('0123456789'));
    expect(r.take().map((o) => o.data!.toString())).to.deep.equal(['0123456789']);
    clock.tick(199);
    expect(r.out).to.have.length(0);
    clock.tick(1);
    let re = r.take();
    expect(re.map((o) => [o.seq, o.data!.toString()])).to.deep.equal([[ISS + 1, '0123456789']]);
    clock.tick(399);
    expect(r.out).to.have.length(0);
    clock.tick(1);
    re = r.take();
    expect(re).to.have.length(1);
    expect(c.counts.retransmits).to.equal(2);
    // A partial ACK: the rest goes again on the next expiry.
    r.stack.claimTx(tcp({ sport: 40003, dport: PORT, seq: 1, ack: ISS + 5, flags: ACK, window: 65535 }));
    r.take();
    clock.tick(200);
    expect(r.take().map((o) => [o.seq, o.data!.toString()])).to.deep.equal([[ISS + 5, '456789']]);
    r.stack.claimTx(tcp({ sport: 40003, dport: PORT, seq: 1, ack: ISS + 11, flags: ACK, window: 65535 }));
    clock.tick(10000);
    expect(r.take()).to.have.length(0);
  });

  it('resets the connection after the retry limit', () => {
    const clock = sinon.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
    const r = rig({ limits: { retries: 2 } });
    const c = connect(r, 40004, 0);
    const errs: Error[] = [];
    c.on('error', (e) => errs.push(e));
    c.write(Buffer.from('x'));
    clock.tick(200 + 400 + 800);
    const last = r.take().pop()!;
    expect(last.flags! & RST).to.equal(RST);
    expect(r.stack.connectionCount).to.equal(0);
  });

  it('a peer that stops answering after our end(): the stream closes without an error event nobody would hear', async () => {
    const clock = sinon.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
    const r = rig({ limits: { retries: 2 } });
    const c = connect(r, 40006, 0);
    let closed = false;
    c.on('close', () => {
      closed = true;
    });
    c.end('unanswered');
    await tick();
    clock.tick(200 + 400 + 800);
    // An 'error' emitted here with no listener would be an uncaught exception (mocha fails the test on it).
    await tick();
    await tick();
    expect(r.take().pop()!.flags! & RST).to.equal(RST);
    expect(r.stack.connectionCount).to.equal(0);
    expect(closed).to.equal(true);
  });

  it('peer FIN first: end on the stream, ACK; our end() sends FIN; its ACK closes', async () => {
    const r = rig();
    const c = connect(r, 40005, 0);
    let ended = false;
    c.on('end', () => {
      ended = true;
    });
    c.resume();
    r.stack.claimTx(
      tcp({
        sport: 40005,
        dport: PORT,
        seq: 1,
        ack: ISS + 1,
        flags: ACK | FIN,
        window: 65535,
        data: Buffer.from('bye'),
      }),
    );
    expect(r.take().map((o) => o.ack)).to.deep.equal([5]);
    await tick();
    expect(ended).to.equal(true);
    c.end('ok');
    await tick();
    const outs = r.take();
    expect(outs.map((o) => [o.seq, o.flags! & FIN, o.data!.toString()])).to.deep.equal([
      [ISS + 1, 0, 'ok'],
      [ISS + 3, FIN, ''],
    ]);
    r.stack.claimTx(tcp({ sport: 40005, dport: PORT, seq: 5, ack: ISS + 4, flags: ACK, window: 65535 }));
    expect(r.stack.connectionCount).to.equal(0);
  });

  it('our FIN first: FIN_WAIT, then the peer FIN is acked and the connection is gone', async () => {
    const r = rig();
    const c = connect(r, 40006, 0);
    c.resume();
    c.end();
    await tick();
    const [fin] = r.take();
    expect((fin?.flags ?? 0) & FIN).to.equal(FIN);
    r.stack.claimTx(tcp({ sport: 40006, dport: PORT, seq: 1, ack: ISS + 2, flags: ACK, window: 65535 }));
    expect(r.stack.connectionCount).to.equal(1);
    r.stack.claimTx(tcp({ sport: 40006, dport: PORT, seq: 1, ack: ISS + 2, flags: ACK | FIN, window: 65535 }));
    expect(r.take().map((o) => [o.ack, o.flags])).to.deep.equal([[2, ACK]]);
    expect(r.stack.connectionCount).to.equal(0);
  });

  it('RST for segments nobody owns: ACK to an unknown connection, SYN to a closed port', () => {
    const r = rig();
    r.stack.claimTx(tcp({ sport: 40007, dport: PORT, seq: 77, ack: 4242, flags: ACK, window: 100 }));
    r.stack.claimTx(tcp({ sport: 40007, dport: 81, seq: 9, ack: 0, flags: SYN, window: 100 }));
    const [a, b] = r.take();
    expect([a!.flags, a!.seq]).to.deep.equal([RST, 4242]);
    expect([b!.flags, b!.seq, b!.ack]).to.deep.equal([RST | ACK, 0, 10]);
    // Never an RST for an RST.
    r.stack.claimTx(tcp({ sport: 40007, dport: PORT, seq: 77, ack: 0, flags: RST, window: 0 }));
    expect(r.out).to.have.length(0);
  });

  it('a peer RST in window destroys the stream with ECONNRESET', async () => {
    const r = rig();
    const c = connect(r, 40008, 0);
    const errs: NodeJS.ErrnoException[] = [];
    c.on('error', (e) => errs.push(e));
    r.stack.claimTx(tcp({ sport: 40008, dport: PORT, seq: 1, ack: 0, flags: RST, window: 0 }));
    await tick();
    expect(errs.map((e) => e.code)).to.deep.equal(['ECONNRESET']);
    expect(r.stack.connectionCount).to.equal(0);
  });

  it('two connections keep their own data and sequence numbers', async () => {
    const r = rig();
    const a = connect(r, 41000, 10);
    const b = connect(r, 41001, 20_000);
    const got = { a: '', b: '' };
    a.on('data', (d: Buffer) => {
      got.a += d;
    });
    b.on('data', (d: Buffer) => {
      got.b += d;
    });
    r.stack.claimTx(
      tcp({ sport: 41001, dport: PORT, seq: 20_001, ack: ISS + 1, flags: ACK, window: 65535, data: Buffer.from('B') }),
    );
    r.stack.claimTx(
      tcp({ sport: 41000, dport: PORT, seq: 11, ack: ISS + 1, flags: ACK, window: 65535, data: Buffer.from('AA') }),
    );
    expect(r.take().map((o) => [o.dport, o.ack])).to.deep.equal([
      [41001, 20_002],
      [41000, 13],
    ]);
    a.write('to-a');
    b.write('to-b');
    expect(r.take().map((o) => [o.dport, o.data!.toString()])).to.deep.equal([
      [41000, 'to-a'],
      [41001, 'to-b'],
    ]);
    await tick();
    expect(got).to.deep.equal({ a: 'AA', b: 'B' });
  });

  it('bounded: a SYN past maxConnections gets RST; the window shrinks while the reader does not read', () => {
    const r = rig({ maxConnections: 1, limits: { rxLimit: 4000, mss: 1460 } });
    const c = connect(r, 42000, 0);
    r.stack.claimTx(tcp({ sport: 42001, dport: PORT, seq: 0, ack: 0, flags: SYN, window: 65535 }));
    expect(r.take().map((o) => o.flags)).to.deep.equal([RST | ACK]);
    c.pause();
    r.stack.claimTx(
      tcp({ sport: 42000, dport: PORT, seq: 1, ack: ISS + 1, flags: ACK, window: 65535, data: Buffer.alloc(1460) }),
    );
    r.stack.claimTx(
      tcp({ sport: 42000, dport: PORT, seq: 1461, ack: ISS + 1, flags: ACK, window: 65535, data: Buffer.alloc(1460) }),
    );
    r.stack.claimTx(
      tcp({ sport: 42000, dport: PORT, seq: 2921, ack: ISS + 1, flags: ACK, window: 65535, data: Buffer.alloc(1460) }),
    );
    const acks = r.take();
    expect(acks.map((o) => [o.ack, o.window])).to.deep.equal([
      [1461, 2540],
      [2921, 1080],
      [4001, 0],
    ]);
  });

  it('setTimeout: idle timeout as net.Socket has it (http.Server keep-alive), re-armed by traffic, off with 0', () => {
    const clock = sinon.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
    const r = rig();
    const c = connect(r, 43000, 0);
    let fired = 0;
    c.setTimeout(1000, () => {
      fired++;
    });
    clock.tick(900);
    r.stack.claimTx(
      tcp({ sport: 43000, dport: PORT, seq: 1, ack: ISS + 1, flags: ACK, window: 65535, data: Buffer.from('x') }),
    );
    clock.tick(900);
    expect(fired).to.equal(0);
    clock.tick(100);
    expect(fired).to.equal(1);
    c.setTimeout(0);
    clock.tick(5000);
    expect(fired).to.equal(1);
  });

  it('SYN-RECEIVED: an ACK that does not acknowledge the SYN-ACK gets an RST at its ack number; the right one still establishes', () => {
    const r = rig();
    r.stack.claimTx(tcp({ sport: 44000, dport: PORT, seq: 10, ack: 0, flags: SYN, window: 65535 }));
    r.take();
    r.stack.claimTx(tcp({ sport: 44000, dport: PORT, seq: 11, ack: 5, flags: ACK, window: 65535 }));
    expect(r.take().map((o) => [o.flags, o.seq])).to.deep.equal([[RST, 5]]);
    r.stack.claimTx(tcp({ sport: 44000, dport: PORT, seq: 11, ack: ISS + 1, flags: ACK, window: 65535 }));
    expect(r.conns).to.have.length(1);
  });
});
