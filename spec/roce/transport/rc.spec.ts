import { expect } from 'chai';
import type * as sinon from 'sinon';
import { decodeFrame, RoceFrame } from '../../../lib/roce/frame';
import { opcodeName } from '../../../lib/roce/opcodes';
import {
  EVENT_COMM_EST,
  QPS_RTR,
  QPS_RTS,
  WC_COMP_SWAP,
  WC_FETCH_ADD,
  WC_RDMA_READ,
  WC_RDMA_WRITE,
  WC_RECV,
  WC_RECV_RDMA_WITH_IMM,
  WC_SEND,
  WC_SUCCESS,
  WR_ATOMIC_CMP_AND_SWP,
  WR_ATOMIC_FETCH_AND_ADD,
  WR_RDMA_READ,
  WR_RDMA_WRITE,
  WR_RDMA_WRITE_WITH_IMM,
  WR_SEND,
  WR_SEND_WITH_IMM,
  WR_SEND_WITH_INV,
} from '../../../lib/roce/transport/types';
import { connectedPair, type Endpoint, fakeClock, pattern, settle } from './harness';

/** The opcode names of the frames an endpoint sent, in order. */
function opcodes(e: Endpoint): string[] {
  const f = new RoceFrame();
  return e.sent.map((b) => (decodeFrame(b, b.length, f) === 0 ? opcodeName(f.headers.opcode) : 'BAD'));
}

function psns(e: Endpoint): number[] {
  const f = new RoceFrame();
  return e.sent.map((b) => (decodeFrame(b, b.length, f) === 0 ? f.headers.psn : -1));
}

describe('roce/transport RC', () => {
  let clock: sinon.SinonFakeTimers;
  beforeEach(() => {
    clock = fakeClock();
  });
  afterEach(() => {
    clock.restore();
  });

  it('SEND of 3000 bytes over a 1024 MTU: first/middle/last, data in the receive WQE, COMM_EST at the responder', () => {
    const { a, b } = connectedPair();
    b.qp.modify(QPS_RTR); // back to RTR for the COMM_EST check: only a packet taken in RTR raises it
    const src = a.mem.register(1, 0x1000, 4096);
    pattern(3000, 1).copy(src);
    const dst = b.mem.register(2, 0x8000, 4096);
    b.postRecv(77, 2, 0x8000, 4096);
    a.post({
      wrId: 5,
      opcode: WR_SEND,
      sgl: [
        { addr: 0x1000, length: 1000, lkey: 1 },
        { addr: 0x1000 + 1000, length: 2000, lkey: 1 },
      ],
      length: 3000,
    });
    settle(clock, a, b);
    expect(opcodes(a)).to.deep.equal(['RC_SEND_FIRST', 'RC_SEND_MIDDLE', 'RC_SEND_LAST']);
    expect(opcodes(b)).to.deep.equal(['RC_ACKNOWLEDGE']);
    expect(dst.subarray(0, 3000).equals(pattern(3000, 1))).to.equal(true);
    expect(b.recvCqes).to.deep.include({
      wrId: 77,
      status: WC_SUCCESS,
      opcode: WC_RECV,
      byteLen: 3000,
      signaled: true,
      hasImm: false,
      imm: 0,
      hasInv: false,
      invRkey: 0,
      srcQp: 0,
      hasGrh: false,
    });
    expect(a.sendCqes.map((c) => [c.wrId, c.status, c.opcode])).to.deep.equal([[5, WC_SUCCESS, WC_SEND]]);
    expect(b.events).to.deep.equal([EVENT_COMM_EST]);
    expect(clock.countTimers(), 'no timer left once everything is acknowledged').to.equal(0);
  });

  it('SEND with immediate and with invalidate report them in the receive completion; inline data is sent', () => {
    const { a, b } = connectedPair();
    b.mem.register(2, 0, 64);
    b.postRecv(1, 2, 0, 32);
    b.postRecv(2, 2, 32, 32);
    a.post({ wrId: 1, opcode: WR_SEND_WITH_IMM, inline: Buffer.from('imm!'), length: 4, imm: 0xcafef00d });
    a.post({ wrId: 2, opcode: WR_SEND_WITH_INV, inline: Buffer.from('inv!'), length: 4, imm: 0x1234 });
    settle(clock, a, b);
    expect(opcodes(a)).to.deep.equal(['RC_SEND_ONLY_WITH_IMMEDIATE', 'RC_SEND_ONLY_WITH_INVALIDATE']);
    expect(b.recvCqes.map((c) => [c.wrId, c.hasImm, c.imm, c.hasInv, c.invRkey, c.byteLen])).to.deep.equal([
      [1, true, 0xcafef00d, false, 0, 4],
      [2, false, 0, true, 0x1234, 4],
    ]);
    expect(b.mem.regions.get(2)!.buf.subarray(0, 4).toString()).to.equal('imm!');
  });

  it('RDMA WRITE (multi-packet) and WRITE with immediate land in remote memory; only the immediate takes a receive WQE', () => {
    const { a, b } = connectedPair((c) => {
      c.pmtu = 256;
    });
    const src = a.mem.register(1, 0x1000, 1024);
    pattern(1000, 2).copy(src);
    const dst = b.mem.register(0x99, 0x40000, 2048);
    b.postRecv(9, 0x99, 0x40000 + 1500, 16);
    a.post({
      wrId: 1,
      opcode: WR_RDMA_WRITE,
      sgl: [{ addr: 0x1000, length: 1000, lkey: 1 }],
      length: 1000,
      remoteAddr: 0x40000,
      rkey: 0x99,
    });
    a.post({
      wrId: 2,
      opcode: WR_RDMA_WRITE_WITH_IMM,
      sgl: [{ addr: 0x1000, length: 10, lkey: 1 }],
      length: 10,
      remoteAddr: 0x40000 + 1024,
      rkey: 0x99,
      imm: 7,
    });
    settle(clock, a, b);
    expect(opcodes(a)).to.deep.equal([
      'RC_RDMA_WRITE_FIRST',
      'RC_RDMA_WRITE_MIDDLE',
      'RC_RDMA_WRITE_MIDDLE',
      'RC_RDMA_WRITE_LAST',
      'RC_RDMA_WRITE_ONLY_WITH_IMMEDIATE',
    ]);
    expect(dst.subarray(0, 1000).equals(pattern(1000, 2))).to.equal(true);
    expect(dst.subarray(1024, 1034).equals(pattern(10, 2))).to.equal(true);
    expect(b.recvCqes.map((c) => [c.wrId, c.opcode, c.byteLen, c.imm])).to.deep.equal([
      [9, WC_RECV_RDMA_WITH_IMM, 10, 7],
    ]);
    expect(a.sendCqes.map((c) => [c.wrId, c.opcode])).to.deep.equal([
      [1, WC_RDMA_WRITE],
      [2, WC_RDMA_WRITE],
    ]);
  });

  it('RDMA READ of 2500 bytes: response first/middle/last scattered into the SGL', () => {
    const { a, b } = connectedPair();
    const remote = b.mem.register(0x55, 0x70000, 4096);
    pattern(2500, 3).copy(remote, 100);
    const local = a.mem.register(1, 0x1000, 4096);
    a.post({
      wrId: 3,
      opcode: WR_RDMA_READ,
      sgl: [
        { addr: 0x1000, length: 2000, lkey: 1 },
        { addr: 0x1000 + 3000, length: 500, lkey: 1 },
      ],
      length: 2500,
      remoteAddr: 0x70000 + 100,
      rkey: 0x55,
    });
    settle(clock, a, b);
    expect(opcodes(a)).to.deep.equal(['RC_RDMA_READ_REQUEST']);
    expect(opcodes(b)).to.deep.equal([
      'RC_RDMA_READ_RESPONSE_FIRST',
      'RC_RDMA_READ_RESPONSE_MIDDLE',
      'RC_RDMA_READ_RESPONSE_LAST',
    ]);
    const want = pattern(2500, 3);
    expect(local.subarray(0, 2000).equals(want.subarray(0, 2000))).to.equal(true);
    expect(local.subarray(3000, 3500).equals(want.subarray(2000))).to.equal(true);
    expect(a.sendCqes).to.have.length(1);
    expect(a.sendCqes[0]).to.include({ wrId: 3, status: WC_SUCCESS, opcode: WC_RDMA_READ, byteLen: 2500 });
    expect(psns(b)).to.deep.equal([0, 1, 2]);
  });

  it('compare-and-swap and fetch-and-add: remote u64 changed, original value returned', () => {
    const { a, b } = connectedPair();
    const remote = b.mem.register(0x66, 0x9000, 64);
    remote.writeBigUInt64LE(0xffffffffn, 8);
    const local = a.mem.register(1, 0, 64);
    a.post({
      wrId: 1,
      opcode: WR_ATOMIC_FETCH_AND_ADD,
      sgl: [{ addr: 0, length: 8, lkey: 1 }],
      length: 8,
      remoteAddr: 0x9008,
      rkey: 0x66,
      swapHi: 0,
      swapLo: 1,
    });
    a.post({
      wrId: 2,
      opcode: WR_ATOMIC_CMP_AND_SWP,
      sgl: [{ addr: 8, length: 8, lkey: 1 }],
      length: 8,
      remoteAddr: 0x9008,
      rkey: 0x66,
      cmpHi: 1,
      cmpLo: 0,
      swapHi: 0xaabbccdd,
      swapLo: 0x11223344,
    });
    a.post({
      wrId: 3,
      opcode: WR_ATOMIC_CMP_AND_SWP,
      sgl: [{ addr: 16, length: 8, lkey: 1 }],
      length: 8,
      remoteAddr: 0x9008,
      rkey: 0x66,
      cmpHi: 0,
      cmpLo: 0,
      swapHi: 0,
      swapLo: 5,
    });
    settle(clock, a, b);
    expect(opcodes(a)).to.deep.equal(['RC_FETCH_ADD', 'RC_COMPARE_SWAP', 'RC_COMPARE_SWAP']);
    expect(opcodes(b)).to.deep.equal(['RC_ATOMIC_ACKNOWLEDGE', 'RC_ATOMIC_ACKNOWLEDGE', 'RC_ATOMIC_ACKNOWLEDGE']);
    expect(local.readBigUInt64LE(0)).to.equal(0xffffffffn);
    expect(local.readBigUInt64LE(8)).to.equal(0x100000000n);
    expect(local.readBigUInt64LE(16)).to.equal(0xaabbccdd11223344n);
    expect(remote.readBigUInt64LE(8), 'the last compare failed: value unchanged').to.equal(0xaabbccdd11223344n);
    expect(a.sendCqes.map((c) => [c.wrId, c.opcode, c.status])).to.deep.equal([
      [1, WC_FETCH_ADD, 0],
      [2, WC_COMP_SWAP, 0],
      [3, WC_COMP_SWAP, 0],
    ]);
  });

  it('PSNs wrap at 2^24 inside a message, and the ACK covers across the wrap', () => {
    const { a, b } = connectedPair((c) => {
      c.sqPsn = 0xfffffe;
      c.rqPsn = 0xfffffe;
      c.pmtu = 256;
    });
    a.mem.register(1, 0, 1024);
    const dst = b.mem.register(2, 0, 1024);
    b.postRecv(1, 2, 0, 1024);
    const data = pattern(1024, 4);
    data.copy(a.mem.regions.get(1)!.buf);
    a.post({ wrId: 1, opcode: WR_SEND, sgl: [{ addr: 0, length: 1024, lkey: 1 }], length: 1024 });
    settle(clock, a, b);
    expect(psns(a)).to.deep.equal([0xfffffe, 0xffffff, 0, 1]);
    expect(psns(b)).to.deep.equal([1]);
    expect(dst.equals(data)).to.equal(true);
    expect(a.sendCqes.map((c) => c.status)).to.deep.equal([WC_SUCCESS]);
    expect(a.qp.requester.ackedPsn).to.equal(1);
  });

  it('coalesces ACKs: many messages in one turn get one ACK', () => {
    const { a, b } = connectedPair();
    a.mem.register(1, 0, 64);
    b.mem.register(2, 0, 64 * 20);
    for (let i = 0; i < 20; i++) b.postRecv(i, 2, i * 64, 64);
    for (let i = 0; i < 20; i++)
      a.post({ wrId: i, opcode: WR_SEND, sgl: [{ addr: 0, length: 16, lkey: 1 }], length: 16 });
    settle(clock, a, b);
    expect(a.sent).to.have.length(20);
    expect(opcodes(b)).to.deep.equal(['RC_ACKNOWLEDGE']);
    expect(psns(b)).to.deep.equal([19]);
    expect(a.sendCqes.map((c) => c.wrId)).to.deep.equal([...Array(20).keys()]);
    expect(b.port.counters.acksTx).to.equal(1);
  });

  it('an unsignaled SEND still retires its WQE, marked unsignaled', () => {
    const { a, b } = connectedPair();
    b.mem.register(2, 0, 64);
    b.postRecv(1, 2, 0, 64);
    a.post({ wrId: 1, opcode: WR_SEND, inline: Buffer.from('x'), length: 1, signaled: false });
    settle(clock, a, b);
    expect(a.sendCqes.map((c) => [c.wrId, c.signaled])).to.deep.equal([[1, false]]);
  });

  it('keeps at most max_rd_atomic READs outstanding', () => {
    const { a, b } = connectedPair((c) => {
      c.maxRdAtomic = 2;
      c.maxDestRdAtomic = 2;
    });
    b.mem.register(0x55, 0, 4096);
    a.mem.register(1, 0, 4096);
    for (let i = 0; i < 5; i++)
      a.post({
        wrId: i,
        opcode: WR_RDMA_READ,
        sgl: [{ addr: i * 8, length: 8, lkey: 1 }],
        length: 8,
        remoteAddr: 0,
        rkey: 0x55,
      });
    expect(a.out.length, 'two requests before any response').to.equal(2);
    expect(a.qp.requester.rdOutstanding).to.equal(2);
    settle(clock, a, b);
    expect(a.sendCqes.map((c) => [c.wrId, c.status])).to.deep.equal([0, 1, 2, 3, 4].map((i) => [i, WC_SUCCESS]));
    expect(a.qp.state).to.equal(QPS_RTS);
  });
});

describe('roce/transport RC ACK ordering', () => {
  let clock: sinon.SinonFakeTimers;
  beforeEach(() => {
    clock = fakeClock();
  });
  afterEach(() => {
    clock.restore();
  });

  it('an ACK owed before a READ covers only what came before it: nothing is resent', () => {
    const { a, b } = connectedPair();
    a.mem.register(1, 0, 64);
    b.mem.register(2, 0, 64);
    a.post({ wrId: 1, opcode: WR_RDMA_WRITE, inline: Buffer.from('w'), length: 1, remoteAddr: 0, rkey: 2 });
    a.post({
      wrId: 2,
      opcode: WR_RDMA_READ,
      sgl: [{ addr: 8, length: 8, lkey: 1 }],
      length: 8,
      remoteAddr: 8,
      rkey: 2,
    });
    a.post({
      wrId: 3,
      opcode: WR_ATOMIC_FETCH_AND_ADD,
      sgl: [{ addr: 16, length: 8, lkey: 1 }],
      length: 8,
      remoteAddr: 16,
      rkey: 2,
      swapLo: 1,
    });
    settle(clock, a, b);
    expect(opcodes(b)).to.deep.equal(['RC_ACKNOWLEDGE', 'RC_RDMA_READ_RESPONSE_ONLY', 'RC_ATOMIC_ACKNOWLEDGE']);
    expect(psns(b)).to.deep.equal([0, 1, 2]);
    expect(a.port.counters.retransmits).to.equal(0);
    expect(a.sendCqes.map((c) => c.status)).to.deep.equal([0, 0, 0]);
  });
});

describe('roce/transport RC local checks', () => {
  let clock: sinon.SinonFakeTimers;
  beforeEach(() => {
    clock = fakeClock();
  });
  afterEach(() => {
    clock.restore();
  });

  it('a remote address that is not a safe integer fails the WQE locally (LOC_QP_OP_ERR) and sends nothing', () => {
    for (const remoteAddr of [-1, 2 ** 53, Number.MAX_SAFE_INTEGER - 2, NaN]) {
      const { a } = connectedPair();
      a.mem.register(1, 0, 64);
      a.post({
        wrId: 1,
        opcode: WR_RDMA_WRITE,
        sgl: [{ addr: 0, length: 8, lkey: 1 }],
        length: 8,
        remoteAddr,
        rkey: 2,
      });
      expect(
        a.sendCqes.map((c) => c.status),
        String(remoteAddr),
      ).to.deep.equal([2]);
      expect(a.sent).to.have.length(0);
    }
  });

  it('a path MTU the IBTA does not have is refused at create', () => {
    expect(() =>
      connectedPair((c) => {
        c.pmtu = 1500;
      }),
    ).to.throw(RangeError);
  });
});
