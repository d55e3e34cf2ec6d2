// A READ whose answer is slow: the local ACK timer resends the request for the
// rest while the old answer is still on its way. The old answer's MIDDLE and
// LAST packets at the PSNs the restart asked for carry the same bytes, so
// they are taken (before the fix they failed the READ with BAD_RESP_ERR);
// the restart's own answer then arrives as duplicates and is dropped.

import { expect } from 'chai';
import type * as sinon from 'sinon';
import { decodeFrame, RoceFrame } from '../../../lib/roce/frame';
import { opcodeName } from '../../../lib/roce/opcodes';
import {
  WC_RDMA_READ,
  WC_SUCCESS,
  WR_ATOMIC_FETCH_AND_ADD,
  WR_RDMA_READ,
  WR_RDMA_WRITE,
} from '../../../lib/roce/transport/types';
import { connectedPair, deliverAll, fakeClock, pattern } from './harness';

function names(frames: Buffer[]): string[] {
  const f = new RoceFrame();
  return frames.map((b) =>
    decodeFrame(b, b.length, f) === 0 ? `${opcodeName(f.headers.opcode)}@${f.headers.psn}` : 'BAD',
  );
}

describe('roce/transport RC: a READ restarted by the timer while its answer is on the way', () => {
  let clock: sinon.SinonFakeTimers;
  beforeEach(() => {
    clock = fakeClock();
  });
  afterEach(() => {
    clock.restore();
  });

  it("the old answer's later packets complete the READ with the right bytes", () => {
    const { a, b } = connectedPair();
    const remote = b.mem.register(0x55, 0x70000, 8192);
    pattern(4000, 8).copy(remote);
    const local = a.mem.register(1, 0x1000, 8192);
    a.post({
      wrId: 9,
      opcode: WR_RDMA_READ,
      sgl: [{ addr: 0x1000, length: 4000, lkey: 1 }],
      length: 4000,
      remoteAddr: 0x70000,
      rkey: 0x55,
    });
    deliverAll(a, b, a.out.splice(0));
    const answer = b.out.splice(0);
    expect(names(answer)).to.deep.equal([
      'RC_RDMA_READ_RESPONSE_FIRST@0',
      'RC_RDMA_READ_RESPONSE_MIDDLE@1',
      'RC_RDMA_READ_RESPONSE_MIDDLE@2',
      'RC_RDMA_READ_RESPONSE_LAST@3',
    ]);
    // The first response arrives; the rest are late, and the local ACK timer (timeout 14: 67 ms) runs out.
    deliverAll(b, a, answer.slice(0, 1));
    clock.tick(100);
    expect(names(a.out.splice(0))).to.deep.equal(['RC_RDMA_READ_REQUEST@1']);
    // Now the old answer's MIDDLE and LAST come in.
    deliverAll(b, a, answer.slice(1));
    expect(a.sendCqes).to.have.length(1);
    expect(a.sendCqes[0]).to.include({ wrId: 9, status: WC_SUCCESS, opcode: WC_RDMA_READ, byteLen: 4000 });
    expect(local.subarray(0, 4000).equals(pattern(4000, 8))).to.equal(true);
  });

  it('a response lost in the first of several READs: that READ alone is asked for again, the later answers are kept', () => {
    const { a, b } = connectedPair((c) => {
      c.maxRdAtomic = 4;
      c.maxDestRdAtomic = 4;
    });
    const remote = b.mem.register(0x55, 0x70000, 4 * 4096);
    pattern(4 * 4096, 3).copy(remote);
    const local = a.mem.register(1, 0x1000, 4 * 4096);
    const read = (i: number): void =>
      a.post({
        wrId: i,
        opcode: WR_RDMA_READ,
        sgl: [{ addr: 0x1000 + i * 4096, length: 4000, lkey: 1 }],
        length: 4000,
        remoteAddr: 0x70000 + i * 4096,
        rkey: 0x55,
      });
    // READ 0 (PSNs 0-3), a WRITE (4) into the last page, READs 1-3 (5-8, 9-12, 13-16).
    read(0);
    a.post({
      wrId: 10,
      opcode: WR_RDMA_WRITE,
      sgl: [{ addr: 0x1000, length: 96, lkey: 1 }],
      length: 96,
      remoteAddr: 0x70000 + 3 * 4096 + 4000,
      rkey: 0x55,
    });
    for (let i = 1; i < 4; i++) read(i);
    deliverAll(a, b, a.out.splice(0));
    clock.tick(0);
    const answer = b.out.splice(0);
    const lost = names(answer).indexOf('RC_RDMA_READ_RESPONSE_MIDDLE@2');
    expect(lost).to.be.at.least(0);
    deliverAll(
      b,
      a,
      answer.filter((_, i) => i !== lost),
    );
    // Go-back-N would ask again for all four READs and resend the WRITE; the gap asks for READ 0's rest only.
    const again = a.out.splice(0);
    expect(names(again)).to.deep.equal(['RC_RDMA_READ_REQUEST@2']);
    expect(a.sendCqes).to.have.length(0);
    deliverAll(a, b, again);
    const rest = b.out.splice(0);
    expect(names(rest)).to.deep.equal(['RC_RDMA_READ_RESPONSE_FIRST@2', 'RC_RDMA_READ_RESPONSE_LAST@3']);
    deliverAll(b, a, rest);
    // READ 0 completes, then the WRITE and READs 1-3 whose answers were kept meanwhile, in order.
    expect(a.sendCqes.map((c) => [c.wrId, c.status])).to.deep.equal([
      [0, WC_SUCCESS],
      [10, WC_SUCCESS],
      [1, WC_SUCCESS],
      [2, WC_SUCCESS],
      [3, WC_SUCCESS],
    ]);
    for (let i = 0; i < 4; i++) {
      const at = i * 4096;
      expect(local.subarray(at, at + 4000).equals(pattern(4 * 4096, 3).subarray(at, at + 4000)), `READ ${i}`).to.equal(
        true,
      );
    }
    expect(a.port.counters.retransmits).to.equal(1);
    expect(a.out).to.have.length(0);
  });

  it("an atomic's ACK lost before a later one's: that atomic alone is sent again, answered from the cache, not run twice", () => {
    const { a, b } = connectedPair((c) => {
      c.maxRdAtomic = 4;
      c.maxDestRdAtomic = 4;
    });
    const remote = b.mem.register(0x55, 0x70000, 4096);
    remote.writeBigUInt64LE(100n, 0);
    const local = a.mem.register(1, 0x1000, 4096);
    for (let i = 0; i < 3; i++)
      a.post({
        wrId: i,
        opcode: WR_ATOMIC_FETCH_AND_ADD,
        sgl: [{ addr: 0x1000 + i * 8, length: 8, lkey: 1 }],
        length: 8,
        remoteAddr: 0x70000,
        rkey: 0x55,
        swapLo: 5,
      });
    deliverAll(a, b, a.out.splice(0));
    const acks = b.out.splice(0);
    expect(names(acks)).to.deep.equal([
      'RC_ATOMIC_ACKNOWLEDGE@0',
      'RC_ATOMIC_ACKNOWLEDGE@1',
      'RC_ATOMIC_ACKNOWLEDGE@2',
    ]);
    // The first ACK is lost: the later ones are kept, and only the first atomic goes again.
    deliverAll(b, a, acks.slice(1));
    const again = a.out.splice(0);
    expect(names(again)).to.deep.equal(['RC_FETCH_ADD@0']);
    expect(a.sendCqes).to.have.length(0);
    deliverAll(a, b, again);
    deliverAll(b, a, b.out.splice(0));
    expect(a.sendCqes.map((c) => [c.wrId, c.status])).to.deep.equal([
      [0, WC_SUCCESS],
      [1, WC_SUCCESS],
      [2, WC_SUCCESS],
    ]);
    expect([0, 1, 2].map((i) => local.readBigUInt64LE(i * 8))).to.deep.equal([100n, 105n, 110n]);
    expect(remote.readBigUInt64LE(0), 'each add ran once').to.equal(115n);
  });
});
