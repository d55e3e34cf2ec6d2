import { expect } from 'chai';
import type * as sinon from 'sinon';
import {
  DROP_OPCODE_SEQUENCE,
  DROP_PSN_OUT_OF_WINDOW,
  NAK_KIND_INVALID_REQUEST,
  NAK_KIND_REMOTE_ACCESS,
  NAK_KIND_REMOTE_OPERATIONAL,
  NAK_KIND_RNR,
  NAK_KIND_SEQUENCE,
} from '../../../lib/roce/counters';
import { decodeFrame, encodeFrame, frameHeaderBytes, RoceFrame, type RocePath } from '../../../lib/roce/frame';
import { opcodeName } from '../../../lib/roce/opcodes';
import { TransportHeaders } from '../../../lib/roce/packet';
import {
  ACCESS_LOCAL_WRITE,
  ACCESS_REMOTE_WRITE,
  EVENT_ERR_ACCESS,
  EVENT_ERR_REQUEST,
  QPS_ERR,
  QPS_RTS,
  WC_LOC_LEN_ERR,
  WC_REM_ACCESS_ERR,
  WC_REM_INV_REQ_ERR,
  WC_REM_OP_ERR,
  WC_RETRY_EXC_ERR,
  WC_RNR_RETRY_EXC_ERR,
  WC_SUCCESS,
  WC_WR_FLUSH_ERR,
  WR_ATOMIC_FETCH_AND_ADD,
  WR_RDMA_READ,
  WR_RDMA_WRITE,
  WR_SEND,
} from '../../../lib/roce/transport/types';
import { connectedPair, deliverAll, type Endpoint, fakeClock, pattern, settle } from './harness';

function opcodes(frames: Buffer[]): string[] {
  const f = new RoceFrame();
  return frames.map((b) => (decodeFrame(b, b.length, f) === 0 ? opcodeName(f.headers.opcode) : 'BAD'));
}

/** A frame for path with the given headers and payload. */
function craft(path: RocePath, fill: (h: TransportHeaders) => void, payload = Buffer.alloc(0)): Buffer {
  const h = new TransportHeaders();
  fill(h);
  const buf = Buffer.alloc(4400);
  payload.copy(buf, frameHeaderBytes(path, h.opcode));
  return buf.subarray(0, encodeFrame(buf, path, h, payload.length));
}

/** Deliver one round: a's frames to b and b's to a, nothing more. */
function step(a: Endpoint, b: Endpoint): void {
  deliverAll(a, b, a.out.splice(0));
  deliverAll(b, a, b.out.splice(0));
}

describe('roce/transport NAKs, retries and duplicates', () => {
  let clock: sinon.SinonFakeTimers;
  beforeEach(() => {
    clock = fakeClock();
  });
  afterEach(() => {
    clock.restore();
  });

  it('PSN sequence error: one lost middle packet gets one NAK, a go-back-N resend, and the data right', () => {
    const { a, b } = connectedPair();
    pattern(3000, 9).copy(a.mem.register(1, 0, 3000));
    const dst = b.mem.register(2, 0, 4096);
    b.postRecv(1, 2, 0, 4096);
    a.post({ wrId: 1, opcode: WR_SEND, sgl: [{ addr: 0, length: 3000, lkey: 1 }], length: 3000 });
    let n = 0;
    settle(clock, a, b, (from, to, frames) => {
      for (const fr of frames) if (!(from === a && n++ === 1)) to.port.receive(fr, fr.length);
    });
    expect(dst.subarray(0, 3000).equals(pattern(3000, 9))).to.equal(true);
    expect(b.port.counters.naksTx[NAK_KIND_SEQUENCE]).to.equal(1);
    expect(a.port.counters.naksRx[NAK_KIND_SEQUENCE]).to.equal(1);
    expect(b.port.counters.drops[DROP_PSN_OUT_OF_WINDOW]).to.equal(1);
    expect(a.port.counters.retransmits).to.equal(2);
    expect(opcodes(a.sent)).to.deep.equal([
      'RC_SEND_FIRST',
      'RC_SEND_MIDDLE',
      'RC_SEND_LAST',
      'RC_SEND_MIDDLE',
      'RC_SEND_LAST',
    ]);
    expect(a.sendCqes.map((c) => c.status)).to.deep.equal([WC_SUCCESS]);
    expect(b.recvCqes.map((c) => c.byteLen)).to.deep.equal([3000]);
  });

  it('RNR NAK: no receive WQE, the requester waits the RNR timer, then succeeds once one is posted', () => {
    const { a, b } = connectedPair((c) => {
      c.minRnrTimer = 14;
    }); // 1.28 ms
    b.mem.register(2, 0, 64);
    a.post({ wrId: 1, opcode: WR_SEND, inline: Buffer.from('hi'), length: 2 });
    step(a, b);
    expect(opcodes(b.sent)).to.deep.equal(['RC_ACKNOWLEDGE']);
    expect(b.port.counters.naksTx[NAK_KIND_RNR]).to.equal(1);
    expect(a.port.counters.naksRx[NAK_KIND_RNR]).to.equal(1);
    expect(a.qp.requester.rnrWaiting).to.equal(true);
    clock.tick(1);
    expect(a.out, 'nothing before the timer').to.have.length(0);
    b.postRecv(5, 2, 0, 64);
    clock.tick(1);
    expect(a.out).to.have.length(1);
    settle(clock, a, b);
    expect(b.recvCqes.map((c) => [c.wrId, c.byteLen])).to.deep.equal([[5, 2]]);
    expect(a.sendCqes.map((c) => c.status)).to.deep.equal([WC_SUCCESS]);
  });

  it('RNR NAKs beyond rnr_retry fail the WQE (RNR_RETRY_EXC_ERR), flush the rest and leave the responder up', () => {
    const { a, b } = connectedPair((c) => {
      c.rnrRetry = 2;
      c.minRnrTimer = 1;
    });
    a.post({ wrId: 1, opcode: WR_SEND, inline: Buffer.from('x'), length: 1 });
    a.post({ wrId: 2, opcode: WR_SEND, inline: Buffer.from('y'), length: 1 });
    settle(clock, a, b);
    expect(b.port.counters.naksTx[NAK_KIND_RNR]).to.equal(3);
    expect(a.sendCqes.map((c) => [c.wrId, c.status])).to.deep.equal([
      [1, WC_RNR_RETRY_EXC_ERR],
      [2, WC_WR_FLUSH_ERR],
    ]);
    expect(a.qp.state).to.equal(QPS_ERR);
    expect(b.qp.state).to.equal(QPS_RTS);
  });

  it('remote access error: a WRITE to a bad R_Key NAKs, fails both QPs, and raises ERR_ACCESS at the responder', () => {
    const { a, b } = connectedPair();
    a.mem.register(1, 0, 64);
    b.mem.register(0x10, 0, 64);
    a.post({
      wrId: 1,
      opcode: WR_RDMA_WRITE,
      sgl: [{ addr: 0, length: 8, lkey: 1 }],
      length: 8,
      remoteAddr: 0,
      rkey: 0x11,
    });
    a.post({ wrId: 2, opcode: WR_SEND, inline: Buffer.from('x'), length: 1 });
    settle(clock, a, b);
    expect(b.port.counters.naksTx[NAK_KIND_REMOTE_ACCESS]).to.equal(1);
    expect(a.port.counters.naksRx[NAK_KIND_REMOTE_ACCESS]).to.equal(1);
    expect(b.qp.state).to.equal(QPS_ERR);
    expect(b.events).to.deep.equal([EVENT_ERR_ACCESS]);
    expect(a.sendCqes.map((c) => [c.wrId, c.status])).to.deep.equal([
      [1, WC_REM_ACCESS_ERR],
      [2, WC_WR_FLUSH_ERR],
    ]);
    expect(a.qp.state).to.equal(QPS_ERR);
  });

  it('remote access error: a READ of a region without remote read, and a WRITE past its end', () => {
    for (const [op, len, addr] of [
      [WR_RDMA_READ, 8, 0],
      [WR_RDMA_WRITE, 8, 60],
    ] as const) {
      const { a, b } = connectedPair();
      a.mem.register(1, 0, 64);
      b.mem.register(0x10, 0, 64, ACCESS_LOCAL_WRITE | ACCESS_REMOTE_WRITE);
      a.post({
        wrId: 1,
        opcode: op,
        sgl: [{ addr: 0, length: len, lkey: 1 }],
        length: len,
        remoteAddr: addr,
        rkey: 0x10,
      });
      settle(clock, a, b);
      expect(a.sendCqes.map((c) => c.status)).to.deep.equal([WC_REM_ACCESS_ERR]);
      expect(b.events).to.deep.equal([EVENT_ERR_ACCESS]);
    }
  });

  it('invalid request: a misaligned atomic NAKs and raises ERR_REQUEST', () => {
    const { a, b } = connectedPair();
    a.mem.register(1, 0, 64);
    b.mem.register(0x10, 0, 64);
    a.post({
      wrId: 1,
      opcode: WR_ATOMIC_FETCH_AND_ADD,
      sgl: [{ addr: 0, length: 8, lkey: 1 }],
      length: 8,
      remoteAddr: 4,
      rkey: 0x10,
      swapLo: 1,
    });
    settle(clock, a, b);
    expect(b.port.counters.naksTx[NAK_KIND_INVALID_REQUEST]).to.equal(1);
    expect(b.events).to.deep.equal([EVENT_ERR_REQUEST]);
    expect(a.sendCqes.map((c) => c.status)).to.deep.equal([WC_REM_INV_REQ_ERR]);
  });

  it('invalid request: a SEND longer than the receive WQE completes it with LOC_LEN_ERR and NAKs', () => {
    const { a, b } = connectedPair();
    b.mem.register(2, 0, 64);
    b.postRecv(7, 2, 0, 4);
    a.post({ wrId: 1, opcode: WR_SEND, inline: Buffer.from('too long'), length: 8 });
    settle(clock, a, b);
    expect(b.recvCqes.map((c) => [c.wrId, c.status])).to.deep.equal([[7, WC_LOC_LEN_ERR]]);
    expect(a.sendCqes.map((c) => c.status)).to.deep.equal([WC_REM_INV_REQ_ERR]);
    expect(b.events).to.deep.equal([EVENT_ERR_REQUEST]);
  });

  it('invalid request: a SEND MIDDLE with no message in progress is out of opcode sequence', () => {
    const { a, b } = connectedPair();
    b.mem.register(2, 0, 4096);
    b.postRecv(7, 2, 0, 4096);
    b.port.receive(
      ...((fr) => [fr, fr.length] as const)(
        craft(
          a.path,
          (h) => {
            h.opcode = 0x01;
            h.destQp = 0x22;
            h.psn = 0;
            h.pkey = 0xffff;
          },
          Buffer.alloc(1024),
        ),
      ),
    );
    expect(b.port.counters.drops[DROP_OPCODE_SEQUENCE]).to.equal(1);
    expect(b.port.counters.naksTx[NAK_KIND_INVALID_REQUEST]).to.equal(1);
    expect(b.qp.state).to.equal(QPS_ERR);
    expect(b.events).to.deep.equal([EVENT_ERR_REQUEST]);
    expect(
      b.recvCqes.map((c) => [c.wrId, c.status]),
      'the posted receive is flushed',
    ).to.deep.equal([[7, WC_WR_FLUSH_ERR]]);
  });

  it('remote operational error: a NAK with code 3 fails the WQE with REM_OP_ERR', () => {
    const { a, b } = connectedPair();
    a.post({ wrId: 1, opcode: WR_SEND, inline: Buffer.from('x'), length: 1 });
    a.out.length = 0;
    a.port.receive(
      ...((fr) => [fr, fr.length] as const)(
        craft(b.path, (h) => {
          h.opcode = 0x11;
          h.destQp = 0x11;
          h.psn = 0;
          h.syndrome = 0x63;
          h.msn = 0;
        }),
      ),
    );
    expect(a.port.counters.naksRx[NAK_KIND_REMOTE_OPERATIONAL]).to.equal(1);
    expect(a.sendCqes.map((c) => c.status)).to.deep.equal([WC_REM_OP_ERR]);
    expect(a.qp.state).to.equal(QPS_ERR);
  });

  it('the retransmit timer: nothing comes back, so the local ACK timeout resends retry_cnt times, then RETRY_EXC_ERR', () => {
    const { a, b } = connectedPair((c) => {
      c.retryCnt = 3;
      c.timeout = 12;
    }); // 16.8 ms
    a.post({ wrId: 1, opcode: WR_SEND, inline: Buffer.from('x'), length: 1 });
    const start = clock.now;
    settle(clock, a, b, () => {
      /* a black hole */
    });
    expect(a.sendCqes.map((c) => c.status)).to.deep.equal([WC_RETRY_EXC_ERR]);
    expect(a.port.counters.timeouts).to.equal(4);
    expect(a.port.counters.retransmits).to.equal(3);
    expect(a.sent).to.have.length(4);
    expect(clock.now - start, 'four timeouts of 17 ms').to.equal(4 * 17);
    expect(a.qp.state).to.equal(QPS_ERR);
  });

  it('a lost ACK: the timeout resends, the responder sees a duplicate and ACKs again without a second receive', () => {
    const { a, b } = connectedPair((c) => {
      c.timeout = 10;
    });
    b.mem.register(2, 0, 64);
    b.postRecv(1, 2, 0, 64);
    b.postRecv(2, 2, 0, 64);
    a.post({ wrId: 1, opcode: WR_SEND, inline: Buffer.from('once'), length: 4 });
    let acks = 0;
    settle(clock, a, b, (from, to, frames) => {
      for (const fr of frames) if (!(from === b && acks++ === 0)) to.port.receive(fr, fr.length);
    });
    expect(b.recvCqes.map((c) => c.wrId)).to.deep.equal([1]);
    expect(b.port.counters.duplicates).to.equal(1);
    expect(a.sendCqes.map((c) => c.status)).to.deep.equal([WC_SUCCESS]);
    expect(a.port.counters.timeouts).to.equal(1);
  });

  it('a duplicate READ is answered again from the resource cache; a duplicate atomic is replayed, not executed', () => {
    const { a, b } = connectedPair((c) => {
      c.maxDestRdAtomic = 4;
      c.maxRdAtomic = 4;
    });
    const remote = b.mem.register(0x10, 0, 64);
    remote.write('readable', 16);
    a.mem.register(1, 0, 64);
    a.post({
      wrId: 1,
      opcode: WR_RDMA_READ,
      sgl: [{ addr: 0, length: 8, lkey: 1 }],
      length: 8,
      remoteAddr: 16,
      rkey: 0x10,
    });
    a.post({
      wrId: 2,
      opcode: WR_ATOMIC_FETCH_AND_ADD,
      sgl: [{ addr: 8, length: 8, lkey: 1 }],
      length: 8,
      remoteAddr: 0,
      rkey: 0x10,
      swapLo: 5,
    });
    const requests = [...a.out];
    settle(clock, a, b);
    expect(remote.readBigUInt64LE(0)).to.equal(5n);
    b.sent.length = 0;
    for (const r of requests) b.port.receive(r, r.length);
    expect(opcodes(b.sent)).to.deep.equal(['RC_RDMA_READ_RESPONSE_ONLY', 'RC_ATOMIC_ACKNOWLEDGE']);
    expect(remote.readBigUInt64LE(0), 'the add ran once').to.equal(5n);
    expect(b.port.counters.duplicates).to.equal(2);
    const f = new RoceFrame();
    expect(decodeFrame(b.sent[1]!, b.sent[1]!.length, f)).to.equal(0);
    expect([f.headers.origHi, f.headers.origLo]).to.deep.equal([0, 0]);
    settle(clock, a, b);
    expect(a.port.counters.duplicates, 'the requester drops the replayed answers').to.equal(2);
    expect(a.sendCqes.map((c) => c.status)).to.deep.equal([WC_SUCCESS, WC_SUCCESS]);
  });
});
