// The process-wide budget of frame bodies the parsers hold (partial frames
// included): its rules as data, a parser that waits for room without
// buffering the body and goes on when woken, a gate that refuses a body
// before any of it is buffered, and the health check closing a connection
// whose partial frame sits on room while others wait.

import { expect } from 'chai';
import * as sinon from 'sinon';
import type { MeshConnection } from '../../lib/mesh/connection';
import { encodeFrameHeader } from '../../lib/mesh/codec';
import { FrameParser } from '../../lib/mesh/frame-parser';
import { HealthCheck } from '../../lib/mesh/health-check';
import { partialFrames, PartialFrameBudget, Waiter } from '../../lib/mesh/inbound-budget';
import { PARTIAL_FRAME_BYTES, PARTIAL_FRAME_MS } from '../../lib/mesh/limits';
import { FrameHeader, MsgType } from '../../lib/mesh/messages';
import { MeshError } from '../../lib/mesh/errors';

class W implements Waiter {
  closed = false;
  woken = 0;
  onWake: () => void = () => undefined;
  unhold(): void {
    this.woken++;
    this.onWake();
  }
}

const turn = (): Promise<void> => new Promise((r) => setImmediate(r));

function frame(type: number, body: Buffer): Buffer {
  return Buffer.concat([encodeFrameHeader({ type, length: body.length, seq: 1, src: 1, dst: 0 }), body]);
}

/** A parser whose sink keeps what it gets, gated by `allows`, woken through `waiter`. */
function gated(
  waiter: W,
  allows: (h: FrameHeader) => boolean = () => true,
): { p: FrameParser; got: Buffer[]; errors: MeshError[] } {
  const got: Buffer[] = [];
  const errors: MeshError[] = [];
  const p = new FrameParser({
    onFrame: (_h, b) => {
      got.push(Buffer.from(b));
      return true;
    },
    onError: (e) => {
      errors.push(e);
    },
  });
  p.setGate({ waiter, allows });
  waiter.onWake = () => p.resume();
  return { p, got, errors };
}

describe('mesh: partial frames against the process-wide budget', () => {
  let start = 0;
  beforeEach(() => {
    start = partialFrames.bytes;
  });
  afterEach(() => {
    partialFrames.setLimit(PARTIAL_FRAME_BYTES);
    expect(partialFrames.bytes, 'every charge given back').to.equal(start);
  });

  it('the budget: an empty one takes any body, later ones wait in order, room wakes the first', async () => {
    const b = new PartialFrameBudget(100);
    const [w1, w2, w3] = [new W(), new W(), new W()];
    expect(b.take(500, w1)).to.equal(true);
    expect(b.take(10, w2)).to.equal(false);
    expect(b.take(10, w3)).to.equal(false);
    expect(b.waiting).to.equal(2);
    // A small body does not overtake the queue.
    expect(b.take(1, new W())).to.equal(false);
    b.give(500);
    w2.onWake = () => {
      expect(b.take(10, w2)).to.equal(true);
    };
    w3.onWake = () => {
      expect(b.take(10, w3)).to.equal(true);
    };
    await turn();
    expect([w2.woken, w3.woken]).to.deep.equal([1, 1]);
    // Bytes already here are charged whatever the room.
    expect(b.take(1000, null)).to.equal(true);
    expect(b.bytes).to.equal(1020);
    b.forget(w2);
    expect(() => b.give(2000)).to.throw(/more than it charged/);
  });

  it('a parser waits for room without buffering the body, then goes on when woken', async () => {
    partialFrames.setLimit(start + 1000);
    const wa = new W();
    const wb = new W();
    const a = gated(wa);
    const b = gated(wb);
    const bigA = frame(MsgType.DATA, Buffer.alloc(3000, 1));
    const bigB = frame(MsgType.DATA, Buffer.alloc(600, 2));
    // A: the header and part of the body; charged (an empty budget takes any one).
    a.p.push(bigA.subarray(0, 100));
    expect(a.p.charged).to.equal(3000);
    // B: its header and a few body bytes; there is no room: it waits with nothing of the body buffered.
    b.p.push(bigB.subarray(0, 40));
    expect([b.p.held, b.p.waitingForRoom, b.p.charged]).to.deep.equal([true, true, 0]);
    b.p.push(bigB.subarray(40, 100));
    expect(b.p.bufferedBytes).to.be.at.most(100);
    // A completes; its body is taken; B is woken, charged, and takes what it kept and what comes after.
    a.p.push(bigA.subarray(100));
    expect(a.got.map((x) => x.length)).to.deep.equal([3000]);
    await turn();
    expect(wb.woken).to.equal(1);
    expect([b.p.held, b.p.charged]).to.deep.equal([false, 600]);
    b.p.push(bigB.subarray(100));
    expect(b.got.map((x) => x.equals(Buffer.alloc(600, 2)))).to.deep.equal([true]);
    expect(b.p.charged).to.equal(0);
  });

  it('a gate refuses a data body on a link that is not established before any of it is buffered', () => {
    const w = new W();
    const g = gated(w, (h) => h.type !== MsgType.DATA);
    g.p.push(frame(MsgType.DATA, Buffer.alloc(5000)).subarray(0, 64));
    expect(g.errors.map((e) => e.code)).to.deep.equal(['PROTOCOL']);
    expect([g.p.stopped, g.p.charged, g.got.length]).to.deep.equal([true, 0, 0]);
  });

  it('a parser destroyed half-way gives its charge back and leaves the queue', () => {
    partialFrames.setLimit(start + 100);
    const [wa, wb] = [new W(), new W()];
    const a = gated(wa);
    const b = gated(wb);
    a.p.push(frame(MsgType.DATA, Buffer.alloc(1000)).subarray(0, 50));
    b.p.push(frame(MsgType.DATA, Buffer.alloc(1000)).subarray(0, 50));
    expect([a.p.charged, b.p.waitingForRoom, partialFrames.waiting]).to.deep.equal([1000, true, 1]);
    b.p.destroy();
    expect(partialFrames.waiting).to.equal(0);
    a.p.destroy();
  });

  describe('the health check', () => {
    let clock: sinon.SinonFakeTimers;
    beforeEach(() => {
      clock = sinon.useFakeTimers({
        now: 1_000_000,
        toFake: ['setInterval', 'clearInterval', 'setTimeout', 'clearTimeout', 'Date'],
      });
    });
    afterEach(() => clock.restore());

    it('closes a connection whose partial frame holds room for PARTIAL_FRAME_MS while others wait, and only then', () => {
      const HB = 1000;
      const closed: string[] = [];
      const conn = (partialSince: number): MeshConnection =>
        ({
          established: true,
          outgoing: true,
          closed: false,
          kind: 'peer',
          lastHeardAt: Date.now(),
          openedAt: Date.now(),
          remoteAddress: '127.0.0.1',
          parser: { partialSince, charged: 4096, setGate: () => undefined },
          close: (why: string) => {
            closed.push(why);
          },
        }) as unknown as MeshConnection;
      const slow = conn(Date.now());
      const conns = new Set<MeshConnection>([slow]);
      // Its peer answers every ping (it is alive, only its frame is slow).
      const hc = new HealthCheck(HB, {
        role: 'worker',
        connections: conns,
        onTick: () => undefined,
        ping: (c) => {
          (c as unknown as { lastHeardAt: number }).lastHeardAt = Date.now();
        },
      });
      hc.start();
      // Nobody waits: a slow frame is left alone.
      clock.tick(PARTIAL_FRAME_MS + HB);
      expect(closed).to.deep.equal([]);
      // Someone waits for room now.
      partialFrames.setLimit(start + 1);
      const held = partialFrames.take(1, null);
      const waiter = new W();
      expect([held, partialFrames.take(10, waiter)]).to.deep.equal([true, false]);
      clock.tick(HB);
      expect(closed).to.have.length(1);
      expect(closed[0]).to.match(/partial frame held 4096 bytes of room/);
      hc.stop();
      partialFrames.forget(waiter);
      partialFrames.give(1);
    });
  });
});
