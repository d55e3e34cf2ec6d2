import { expect } from 'chai';
import type * as sinon from 'sinon';
import {
  QPS_RTS,
  WC_SUCCESS,
  WR_ATOMIC_FETCH_AND_ADD,
  WR_RDMA_READ,
  WR_RDMA_WRITE,
  WR_SEND,
} from '../../../lib/roce/transport/types';
import { xorshift } from '../../support/rng';
import { connectedPair, fakeClock, lossyWire, pattern, settle } from './harness';

// Real encoded frames between two endpoints through a link that loses and
// reorders them (seeded): every message must still arrive whole and in order,
// every READ and atomic must return the right bytes, and nothing may fail.
describe('roce/transport over a lossy, reordering wire', () => {
  let clock: sinon.SinonFakeTimers;
  beforeEach(() => {
    clock = fakeClock();
  });
  afterEach(() => {
    clock.restore();
  });

  for (const [seed, loss] of [
    [1, 0],
    [2, 5],
    [3, 10],
    [4, 20],
    [0x5eed, 10],
  ] as const) {
    it(`seed ${seed}, ${loss}% loss: SENDs, WRITEs, READs and atomics all complete with the right data`, () => {
      const { a, b } = connectedPair((c) => {
        c.pmtu = 512;
        c.timeout = 8;
        c.retryCnt = 7;
        c.rnrRetry = 7;
        c.maxRdAtomic = 4;
        c.maxDestRdAtomic = 4;
      });
      const next = xorshift(seed * 7919);
      const SIZE = 1 << 18;
      const aMem = a.mem.register(1, 0x100000, SIZE);
      const bMem = b.mem.register(2, 0x200000, SIZE);
      pattern(SIZE, seed).copy(aMem);
      pattern(SIZE, seed + 1).copy(bMem);
      const bRemote = pattern(SIZE, seed + 1);
      const sends: Buffer[] = [];
      const reads: Array<{ at: number; want: Buffer }> = [];
      let counter = 0n;
      // b's receive buffers: 64 of 2 KiB in its upper half.
      for (let i = 0; i < 64; i++) b.postRecv(1000 + i, 2, 0x200000 + SIZE / 2 + i * 2048, 2048);
      for (let i = 0; i < 60; i++) {
        const kind = next() % 4;
        const len = 1 + (next() % 2000);
        const off = next() % (SIZE / 4 - 2048);
        if (kind === 0) {
          sends.push(Buffer.from(aMem.subarray(off, off + len)));
          a.post({ wrId: i, opcode: WR_SEND, sgl: [{ addr: 0x100000 + off, length: len, lkey: 1 }], length: len });
        } else if (kind === 1) {
          // WRITE into b's lower quarter at off; mirror it.
          aMem.copy(bRemote, off, off, off + len);
          a.post({
            wrId: i,
            opcode: WR_RDMA_WRITE,
            sgl: [{ addr: 0x100000 + off, length: len, lkey: 1 }],
            length: len,
            remoteAddr: 0x200000 + off,
            rkey: 2,
          });
        } else if (kind === 2) {
          // READ b's second quarter (never written) into a's second quarter.
          const roff = SIZE / 4 + (next() % (SIZE / 4 - 2048));
          const at = SIZE / 4 + i * 64;
          reads.push({ at, want: Buffer.from(bRemote.subarray(roff, roff + 64)) });
          a.post({
            wrId: i,
            opcode: WR_RDMA_READ,
            sgl: [{ addr: 0x100000 + at, length: 64, lkey: 1 }],
            length: 64,
            remoteAddr: 0x200000 + roff,
            rkey: 2,
          });
        } else {
          counter += 3n;
          a.post({
            wrId: i,
            opcode: WR_ATOMIC_FETCH_AND_ADD,
            sgl: [{ addr: 0x100000 + SIZE - 8, length: 8, lkey: 1 }],
            length: 8,
            remoteAddr: 0x200000 + SIZE / 2 - 8,
            rkey: 2,
            swapLo: 3,
          });
        }
      }
      bRemote.writeBigUInt64LE(0n, SIZE / 2 - 8);
      bMem.writeBigUInt64LE(0n, SIZE / 2 - 8);
      settle(clock, a, b, lossyWire(seed, loss));
      expect(a.sendCqes.map((c) => c.wrId)).to.deep.equal([...Array(60).keys()]);
      expect(
        a.sendCqes.every((c) => c.status === WC_SUCCESS),
        JSON.stringify(a.sendCqes.find((c) => c.status)),
      ).to.equal(true);
      expect(b.recvCqes.map((c) => c.wrId)).to.deep.equal(sends.map((_, i) => 1000 + i));
      sends.forEach((s, i) => {
        const at = SIZE / 2 + i * 2048;
        expect(bMem.subarray(at, at + s.length).equals(s), `send ${i}`).to.equal(true);
        expect(b.recvCqes[i]!.byteLen).to.equal(s.length);
      });
      expect(bMem.subarray(0, SIZE / 4).equals(bRemote.subarray(0, SIZE / 4)), 'writes').to.equal(true);
      for (const r of reads) expect(aMem.subarray(r.at, r.at + 64).equals(r.want), `read at ${r.at}`).to.equal(true);
      expect(bMem.readBigUInt64LE(SIZE / 2 - 8), 'every add ran exactly once').to.equal(counter);
      expect(a.qp.state).to.equal(QPS_RTS);
      expect(b.qp.state).to.equal(QPS_RTS);
      expect(clock.countTimers()).to.equal(0);
      if (loss > 0) expect(a.port.counters.retransmits).to.be.greaterThan(0);
    });
  }
});
