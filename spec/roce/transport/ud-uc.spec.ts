import { expect } from 'chai';
import type * as sinon from 'sinon';
import { DROP_BAD_QKEY, DROP_NO_RECV, DROP_PSN_OUT_OF_WINDOW } from '../../../lib/roce/counters';
import { decodeFrame, RoceFrame } from '../../../lib/roce/frame';
import { GSI_QKEY } from '../../../lib/roce/headers';
import { opcodeName } from '../../../lib/roce/opcodes';
import { GRH_BYTES } from '../../../lib/roce/transport/responder';
import {
  QPT_GSI,
  QPT_UC,
  QPT_UD,
  WC_LOC_LEN_ERR,
  WC_RECV,
  WC_SUCCESS,
  WR_RDMA_READ,
  WR_RDMA_WRITE,
  WR_SEND,
  WR_SEND_WITH_IMM,
} from '../../../lib/roce/transport/types';
import { ipv6Path } from '../paths';
import { connectedPair, type Endpoint, fakeClock, pattern, settle } from './harness';

function opcodes(e: Endpoint): string[] {
  const f = new RoceFrame();
  return e.sent.map((b) => (decodeFrame(b, b.length, f) === 0 ? opcodeName(f.headers.opcode) : 'BAD'));
}

describe('roce/transport UD and GSI', () => {
  let clock: sinon.SinonFakeTimers;
  beforeEach(() => {
    clock = fakeClock();
  });
  afterEach(() => {
    clock.restore();
  });

  it('a datagram arrives with its GRH (20 zero bytes and the IPv4 header), source QPN and immediate', () => {
    const { a, b } = connectedPair((c) => {
      c.qkey = 0x1234;
    }, QPT_UD);
    const dst = b.mem.register(2, 0, 256);
    b.postRecv(4, 2, 0, 256);
    a.post({
      wrId: 1,
      opcode: WR_SEND_WITH_IMM,
      inline: Buffer.from('datagram'),
      length: 8,
      imm: 99,
      ud: { path: a.path, destQpn: 0x22, qkey: 0x1234 },
    });
    settle(clock, a, b);
    expect(opcodes(a)).to.deep.equal(['UD_SEND_ONLY_WITH_IMMEDIATE']);
    expect(a.sendCqes.map((c) => [c.wrId, c.status])).to.deep.equal([[1, WC_SUCCESS]]);
    expect(b.recvCqes).to.deep.equal([
      {
        wrId: 4,
        status: WC_SUCCESS,
        opcode: WC_RECV,
        byteLen: GRH_BYTES + 8,
        signaled: true,
        hasImm: true,
        imm: 99,
        hasInv: false,
        invRkey: 0,
        srcQp: 0x11,
        hasGrh: true,
      },
    ]);
    expect(dst.subarray(0, 20).equals(Buffer.alloc(20))).to.equal(true);
    expect(dst[20]).to.equal(0x45);
    expect([...dst.subarray(20 + 12, 20 + 20)]).to.deep.equal([10, 0, 0, 1, 10, 0, 0, 2]);
    expect(dst.subarray(40, 48).toString()).to.equal('datagram');
    expect(opcodes(b), 'UD sends no ACK').to.deep.equal([]);
  });

  it('over IPv6 the GRH is the IPv6 header', () => {
    const { a, b } = connectedPair((c) => {
      c.qkey = 7;
    }, QPT_UD);
    const p6 = ipv6Path(1, 2);
    b.port.addGid(p6.dstGid);
    const dst = b.mem.register(2, 0, 256);
    b.postRecv(4, 2, 0, 256);
    a.post({
      wrId: 1,
      opcode: WR_SEND,
      inline: Buffer.from('six'),
      length: 3,
      ud: { path: p6, destQpn: 0x22, qkey: 7 },
    });
    settle(clock, a, b);
    expect(b.recvCqes.map((c) => c.byteLen)).to.deep.equal([43]);
    expect(dst[0]! >> 4).to.equal(6);
    expect(dst.subarray(24, 40).equals(p6.dstGid)).to.equal(true);
    expect(dst.subarray(40, 43).toString()).to.equal('six');
  });

  it('a wrong Q_Key is dropped and counted; so is a datagram with no receive WQE; neither completes anything', () => {
    const { a, b } = connectedPair((c) => {
      c.qkey = 0x1234;
    }, QPT_UD);
    b.mem.register(2, 0, 256);
    a.post({
      wrId: 1,
      opcode: WR_SEND,
      inline: Buffer.from('x'),
      length: 1,
      ud: { path: a.path, destQpn: 0x22, qkey: 0x4321 },
    });
    settle(clock, a, b);
    expect(b.port.counters.drops[DROP_BAD_QKEY]).to.equal(1);
    a.post({
      wrId: 2,
      opcode: WR_SEND,
      inline: Buffer.from('x'),
      length: 1,
      ud: { path: a.path, destQpn: 0x22, qkey: 0x1234 },
    });
    settle(clock, a, b);
    expect(b.port.counters.drops[DROP_NO_RECV]).to.equal(1);
    expect(b.recvCqes).to.deep.equal([]);
    expect(a.sendCqes.map((c) => c.status)).to.deep.equal([WC_SUCCESS, WC_SUCCESS]);
  });

  it('a datagram longer than the path MTU fails locally; one longer than the receive buffer completes with LOC_LEN_ERR', () => {
    const { a, b } = connectedPair((c) => {
      c.qkey = 1;
      c.pmtu = 256;
    }, QPT_UD);
    b.mem.register(2, 0, 256);
    b.postRecv(4, 2, 0, 48);
    a.post({
      wrId: 1,
      opcode: WR_SEND,
      inline: Buffer.alloc(300),
      length: 300,
      ud: { path: a.path, destQpn: 0x22, qkey: 1 },
    });
    expect(a.sendCqes.map((c) => c.status)).to.deep.equal([WC_LOC_LEN_ERR]);
    const { a: c, b: d } = connectedPair((q) => {
      q.qkey = 1;
    }, QPT_UD);
    d.mem.register(2, 0, 256);
    d.postRecv(4, 2, 0, 48);
    c.post({
      wrId: 1,
      opcode: WR_SEND,
      inline: Buffer.alloc(9),
      length: 9,
      ud: { path: c.path, destQpn: 0x22, qkey: 1 },
    });
    settle(clock, c, d);
    expect(d.recvCqes.map((x) => [x.wrId, x.status])).to.deep.equal([[4, WC_LOC_LEN_ERR]]);
  });

  it('QP1 carries a 256-byte MAD with the GSI Q_Key whatever the WQE says', () => {
    const { a: x, b: y } = gsiPair();
    const dst = y.mem.register(2, 0, 512);
    y.postRecv(1, 2, 0, 512);
    const mad = pattern(256, 7);
    x.post({ wrId: 1, opcode: WR_SEND, inline: mad, length: 256, ud: { path: x.path, destQpn: 1, qkey: 0 } });
    settle(clock, x, y);
    const f = new RoceFrame();
    expect(decodeFrame(x.sent[0]!, x.sent[0]!.length, f)).to.equal(0);
    expect(f.headers.qkey >>> 0).to.equal(GSI_QKEY);
    expect(f.headers.srcQp).to.equal(1);
    expect(y.recvCqes.map((c) => [c.srcQp, c.byteLen])).to.deep.equal([[1, 296]]);
    expect(dst.subarray(40, 296).equals(mad)).to.equal(true);
  });
});

/** Two QP1s, one per port. */
function gsiPair(): { a: Endpoint; b: Endpoint } {
  return connectedPair((c) => {
    c.qpn = 1;
    c.destQpn = 1;
  }, QPT_GSI);
}

describe('roce/transport UC', () => {
  let clock: sinon.SinonFakeTimers;
  beforeEach(() => {
    clock = fakeClock();
  });
  afterEach(() => {
    clock.restore();
  });

  it('SEND and WRITE without ACKs; a lost packet loses its message and the next one arrives', () => {
    const { a, b } = connectedPair((c) => {
      c.pmtu = 256;
    }, QPT_UC);
    pattern(600, 5).copy(a.mem.register(1, 0, 1024));
    const dst = b.mem.register(2, 0, 4096);
    b.postRecv(1, 2, 0, 1024);
    b.postRecv(2, 2, 1024, 1024);
    a.post({ wrId: 1, opcode: WR_SEND, sgl: [{ addr: 0, length: 600, lkey: 1 }], length: 600 });
    a.post({ wrId: 2, opcode: WR_SEND, sgl: [{ addr: 0, length: 600, lkey: 1 }], length: 600 });
    a.post({
      wrId: 3,
      opcode: WR_RDMA_WRITE,
      sgl: [{ addr: 0, length: 600, lkey: 1 }],
      length: 600,
      remoteAddr: 2048,
      rkey: 2,
    });
    expect(
      a.sendCqes.map((c) => [c.wrId, c.status]),
      'UC completes once sent',
    ).to.deep.equal([
      [1, 0],
      [2, 0],
      [3, 0],
    ]);
    let n = 0;
    settle(clock, a, b, (_from, to, frames) => {
      for (const fr of frames) if (n++ !== 1) to.port.receive(fr, fr.length);
    });
    expect(opcodes(a)).to.deep.equal([
      'UC_SEND_FIRST',
      'UC_SEND_MIDDLE',
      'UC_SEND_LAST',
      'UC_SEND_FIRST',
      'UC_SEND_MIDDLE',
      'UC_SEND_LAST',
      'UC_RDMA_WRITE_FIRST',
      'UC_RDMA_WRITE_MIDDLE',
      'UC_RDMA_WRITE_LAST',
    ]);
    expect(b.sent).to.have.length(0);
    expect(b.port.counters.drops[DROP_PSN_OUT_OF_WINDOW]).to.equal(1);
    // The first SEND's receive WQE was taken by its FIRST and is reused by the next message.
    expect(b.recvCqes.map((c) => [c.wrId, c.byteLen])).to.deep.equal([[1, 600]]);
    expect(dst.subarray(0, 600).equals(pattern(600, 5))).to.equal(true);
    expect(dst.subarray(2048, 2648).equals(pattern(600, 5))).to.equal(true);
  });

  it('refuses READ on UC before sending anything', () => {
    const { a } = connectedPair(undefined, QPT_UC);
    a.post({ wrId: 1, opcode: WR_RDMA_READ, length: 8, sgl: [] });
    expect(a.sendCqes.map((c) => c.status)).to.deep.equal([2]);
    expect(a.sent).to.have.length(0);
  });
});
