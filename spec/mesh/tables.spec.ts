// The mesh's tables as data: the manager's node registry, the GID table, a
// connection's send queue and the inbound queue's room (with fake timers for
// its deadlines).

import { expect } from 'chai';
import * as sinon from 'sinon';
import { GidTable } from '../../lib/mesh/gid-table';
import { InboundBudget, Waiter } from '../../lib/mesh/inbound-budget';
import {
  AUTO_NODE_ID,
  INBOUND_STALL_MS,
  LOST_PEER_MS,
  NO_CONSUMER_DROP_MS,
  resolveLimits,
} from '../../lib/mesh/limits';
import { FRAME_OVERHEAD, OutboundQueue, OutFrame } from '../../lib/mesh/outbound-queue';
import { PendingRequests } from '../../lib/mesh/pending';
import { Errno, NodeRegistry } from '../../lib/mesh/registry';
import { incarnationOf } from '../../lib/mesh/codec';

const inst = (n: number): string => n.toString(16).padStart(16, '0');

function reg(
  r: NodeRegistry,
  instance: number,
  requestedId = AUTO_NODE_ID,
  source = '10.0.0.1',
): ReturnType<NodeRegistry['register']> {
  return r.register({ instance: inst(instance), requestedId, host: '10.0.0.1', port: 1, source });
}

function idOf(o: ReturnType<NodeRegistry['register']>): number {
  if (!o.ok) throw new Error(o.reason);
  return o.id;
}

describe('mesh: tables', () => {
  describe('node registry', () => {
    it('gives ids in arrival order, starting at 1 (the manager is 0)', () => {
      const r = new NodeRegistry(64, { instance: inst(1000), host: '', port: 5000 });
      expect([idOf(reg(r, 1)), idOf(reg(r, 2)), idOf(reg(r, 3))]).to.deep.equal([1, 2, 3]);
      expect(r.entries().map((e) => e.id)).to.deep.equal([0, 1, 2, 3]);
    });

    it('a quiet node that comes back keeps its id; a restarted one gets a new id', () => {
      const r = new NodeRegistry(64, { instance: inst(1000), host: '', port: 5000 });
      idOf(reg(r, 1));
      const two = idOf(reg(r, 2));
      r.markDead(two, 100);
      const back = reg(r, 2, two);
      expect(back).to.deep.equal({ ok: true, id: two, rejoined: true });
      expect(r.get(two)!.alive).to.equal(true);
      // Same id asked for by a new instance while the entry exists: a new id.
      r.markDead(two, 200);
      expect(idOf(reg(r, 22, two))).to.equal(3);
      // The same instance asking for auto still gets its own id back.
      expect(idOf(reg(r, 2))).to.equal(two);
    });

    it('hands ids back after a manager restart and keeps every id inside the table', () => {
      const r = new NodeRegistry(8, { instance: inst(1000), host: '', port: 5000 });
      expect(idOf(reg(r, 7, 7))).to.equal(7);
      expect(idOf(reg(r, 5, 5))).to.equal(5);
      // New ids: the first free ones, never past the table's last (7 here).
      expect([idOf(reg(r, 8)), idOf(reg(r, 9)), idOf(reg(r, 10))]).to.deep.equal([1, 2, 3]);
      // A request past the table's range is a request for a new id.
      expect(idOf(reg(r, 11, 0x7fffffff))).to.equal(4);
      expect(idOf(reg(r, 12, 40))).to.equal(6);
      expect(r.entries().map((e) => e.id)).to.deep.equal([0, 1, 2, 3, 4, 5, 6, 7]);
      expect(reg(r, 13).ok).to.equal(false);
    });

    it("refuses a live node's nonce from another connection (EBUSY) and does not touch the live node", () => {
      const r = new NodeRegistry(64, { instance: inst(1000), host: '', port: 5000 });
      const one = idOf(
        r.register({ instance: inst(1), requestedId: AUTO_NODE_ID, host: 'victim', port: 7000, source: '10.0.0.1' }),
      );
      const thief = r.register({ instance: inst(1), requestedId: one, host: 'thief', port: 9999, source: '10.0.0.66' });
      expect(thief).to.deep.include({ ok: false, errno: Errno.EBUSY, busy: one });
      expect(r.get(one)).to.deep.include({ alive: true, host: 'victim', port: 7000 });
      // Once its link is gone, the same process comes back under its id.
      r.markDead(one, 5);
      expect(
        r.register({ instance: inst(1), requestedId: AUTO_NODE_ID, host: 'victim', port: 7001, source: '10.0.0.1' }),
      ).to.deep.equal({ ok: true, id: one, rejoined: true });
    });

    it('gives incarnations, not nonces, to be shown; a new process on a reused id has a new one', () => {
      const r = new NodeRegistry(3, { instance: inst(1000), host: '', port: 5000 });
      const a = idOf(reg(r, 1));
      const b = idOf(reg(r, 2));
      expect(r.get(a)!.incarnation).to.equal(incarnationOf(inst(1)));
      expect(r.get(a)!.incarnation).to.not.equal(inst(1));
      r.markDead(a, 1);
      expect(idOf(reg(r, 3))).to.equal(a);
      expect(r.get(a)!.incarnation).to.equal(incarnationOf(inst(3)));
      expect(b).to.equal(2);
    });

    it('bounds the live nodes of one source address; dead ones do not count', () => {
      const r = new NodeRegistry(64, { instance: inst(1000), host: '', port: 5000 }, 2);
      idOf(reg(r, 1, AUTO_NODE_ID, '10.0.0.7'));
      const second = idOf(reg(r, 2, AUTO_NODE_ID, '10.0.0.7'));
      const third = reg(r, 3, AUTO_NODE_ID, '10.0.0.7');
      expect(third).to.deep.include({ ok: false, errno: Errno.EUSERS });
      expect(reg(r, 3, AUTO_NODE_ID, '10.0.0.8').ok).to.equal(true);
      r.markDead(second, 1);
      expect(reg(r, 4, AUTO_NODE_ID, '10.0.0.7').ok).to.equal(true);
    });

    it('evicts the node dead longest when full, and refuses when none is dead', () => {
      const r = new NodeRegistry(4, { instance: inst(1000), host: '', port: 5000 });
      expect([idOf(reg(r, 1)), idOf(reg(r, 2)), idOf(reg(r, 3))]).to.deep.equal([1, 2, 3]);
      const full = reg(r, 4);
      expect(full.ok).to.equal(false);
      if (!full.ok) expect(full.errno).to.equal(Errno.ENOSPC);
      r.markDead(3, 100);
      r.markDead(1, 200);
      // The evicted node's id goes to the newcomer (peers tell them apart by incarnation).
      expect(reg(r, 5)).to.deep.equal({ ok: true, id: 3, rejoined: false, evicted: 3 });
      expect(reg(r, 6)).to.deep.equal({ ok: true, id: 1, rejoined: false, evicted: 1 });
      expect(r.entries().map((e) => e.id)).to.deep.equal([0, 1, 2, 3]);
      // An evicted node that comes back is new.
      expect(reg(r, 3).ok).to.equal(false);
      r.markDead(2, 300);
      expect(idOf(reg(r, 3))).to.equal(2);
    });

    it('never marks the manager dead', () => {
      const r = new NodeRegistry(64, { instance: inst(1000), host: '', port: 5000 });
      expect(r.markDead(0, 1)).to.equal(false);
      expect(r.markDead(9, 1)).to.equal(false);
    });
  });

  describe('GID table', () => {
    const g = (n: number): Buffer =>
      Buffer.from(`fe80000000000000000000000000${n.toString(16).padStart(4, '0')}`, 'hex');

    it('looks GIDs up exactly; a replaced set forgets the old GIDs', () => {
      const t = new GidTable();
      t.set(1, [g(1), g(2)]);
      t.set(2, [g(3)]);
      expect([t.lookup(g(1)), t.lookup(g(2)), t.lookup(g(3)), t.lookup(g(4))]).to.deep.equal([1, 1, 2, undefined]);
      t.set(1, [g(2)]);
      expect([t.lookup(g(1)), t.lookup(g(2))]).to.deep.equal([undefined, 1]);
      t.remove(2);
      expect(t.lookup(g(3))).to.equal(undefined);
      expect(t.nodes()).to.deep.equal([1]);
    });

    it('a GID claimed by two nodes names neither until one lets go', () => {
      const t = new GidTable();
      t.set(1, [g(1)]);
      expect(t.set(2, [g(1), g(2)]).map((x) => x.toString('hex'))).to.deep.equal([g(1).toString('hex')]);
      expect(t.lookup(g(1))).to.equal(undefined);
      expect(t.conflicted(g(1))).to.equal(true);
      t.set(2, [g(2)]);
      expect(t.lookup(g(1))).to.equal(1);
    });

    it("keeps copies, not the caller's buffers", () => {
      const t = new GidTable();
      const mine = g(9);
      t.set(1, [mine]);
      mine.fill(0);
      expect(t.lookup(g(9))).to.equal(1);
    });
  });

  describe('send queue', () => {
    const limits = { requestBytes: 2500, connectionBytes: 5000, controlBytes: 500 };
    const f = (cls: OutFrame['cls'], bytes: number, tag?: number): OutFrame =>
      tag === undefined
        ? { parts: [Buffer.alloc(bytes)], bytes, cls }
        : { parts: [Buffer.alloc(bytes)], bytes, cls, tag };

    it('bounds requests, then replies at twice the room, control apart', () => {
      const q = new OutboundQueue(limits);
      const req = 1000 - FRAME_OVERHEAD;
      expect([q.offer(f('request', req)), q.offer(f('request', req))]).to.deep.equal(['queued', 'queued']);
      expect(q.offer(f('request', req))).to.equal('queue-full');
      expect(q.offer(f('reply', req))).to.equal('queued');
      expect(q.offer(f('reply', req))).to.equal('queued');
      expect(q.offer(f('reply', req))).to.equal('queued');
      expect(q.offer(f('reply', req))).to.equal('queue-full');
      expect(q.dataBytes).to.equal(5000);
      expect(q.offer(f('control', 300))).to.equal('queued');
      expect(q.offer(f('control', 300))).to.equal('overflow');
    });

    it('an empty queue takes any one frame', () => {
      const q = new OutboundQueue(limits);
      expect(q.offer(f('request', 5000))).to.equal('queued');
      expect(q.offer(f('request', 1))).to.equal('queue-full');
    });

    it('heartbeats go first, at most one of each kind waiting', () => {
      const q = new OutboundQueue(limits);
      q.offer(f('request', 10));
      const hb = f('heartbeat', 32);
      const ans = f('heartbeat', 32);
      expect(q.offerHeartbeat(hb, false)).to.equal(true);
      expect(q.offerHeartbeat(f('heartbeat', 32), false)).to.equal(false);
      expect(q.offerHeartbeat(ans, true)).to.equal(true);
      expect(q.offerHeartbeat(f('heartbeat', 32), true)).to.equal(false);
      expect(q.next()).to.equal(ans);
      expect(q.next()).to.equal(hb);
      expect(q.next()!.cls).to.equal('request');
      expect(q.next()).to.equal(undefined);
    });

    it('frames stay charged until done(); takeBack removes only queued frames with the tag', () => {
      const q = new OutboundQueue(limits);
      q.offer(f('request', 100, 7));
      q.offer(f('request', 100, 8));
      q.offer(f('request', 100, 7));
      const first = q.next()!;
      expect(q.takeBack(7)).to.equal(1);
      expect(q.length).to.equal(1);
      expect(q.dataBytes).to.equal(2 * (100 + FRAME_OVERHEAD));
      q.done(first);
      expect(q.dataBytes).to.equal(100 + FRAME_OVERHEAD);
      expect(q.next()!.tag).to.equal(8);
    });

    it('stays bounded under a flood of tiny frames', () => {
      const q = new OutboundQueue({ requestBytes: 32 << 20, connectionBytes: 64 << 20, controlBytes: 4 << 20 });
      let n = 0;
      while (q.offer(f('request', 0)) === 'queued') n++;
      expect(n).to.equal(Math.floor((32 << 20) / FRAME_OVERHEAD));
    });
  });

  describe('inbound queue room', () => {
    let clock: sinon.SinonFakeTimers;
    beforeEach(() => {
      clock = sinon.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'setImmediate', 'clearImmediate', 'Date'] });
    });
    afterEach(() => clock.restore());

    class W implements Waiter {
      closed = false;
      woken = 0;
      constructor(private readonly onWake: () => void = () => undefined) {}
      unhold(): void {
        this.woken++;
        this.onWake();
      }
    }

    it('bounds bytes and messages, an empty queue taking any one message', () => {
      const b = new InboundBudget(100, 3, { onStall: () => undefined });
      const w = new W();
      expect(b.charge(500, w)).to.equal('charged');
      expect(b.charge(1, w)).to.equal('wait');
      b.release(500);
      expect(b.charge(60, w)).to.equal('charged');
      expect(b.charge(30, w)).to.equal('charged');
      expect(b.charge(20, new W())).to.equal('wait');
      b.release(60);
      expect(b.charge(5, w)).to.equal('wait');
    });

    it('wakes waiters in order when room appears', () => {
      const b = new InboundBudget(100, 100, { onStall: () => undefined });
      const holder = new W();
      b.charge(100, holder);
      const order: string[] = [];
      const w1: W = new W(() => {
        if (b.charge(50, w1) === 'charged') order.push('w1');
      });
      const w2: W = new W(() => {
        if (b.charge(50, w2) === 'charged') order.push('w2');
      });
      expect(b.charge(50, w1)).to.equal('wait');
      expect(b.charge(50, w2)).to.equal('wait');
      b.release(100);
      clock.runAll();
      expect(order).to.deep.equal(['w1', 'w2']);
      expect(b.waiting).to.equal(0);
    });

    it('reports a stall every INBOUND_STALL_MS while someone waits', () => {
      const stalls: number[] = [];
      const b = new InboundBudget(10, 10, { onStall: (ms) => stalls.push(ms) });
      b.charge(10, new W());
      const w = new W();
      b.charge(10, w);
      clock.tick(INBOUND_STALL_MS - 1);
      expect(stalls).to.deep.equal([]);
      clock.tick(1);
      expect(stalls).to.deep.equal([INBOUND_STALL_MS]);
      clock.tick(INBOUND_STALL_MS);
      expect(stalls).to.deep.equal([INBOUND_STALL_MS, 2 * INBOUND_STALL_MS]);
      b.forget(w);
      clock.tick(10 * INBOUND_STALL_MS);
      expect(stalls.length).to.equal(2);
    });

    it('with no consumer for NO_CONSUMER_DROP_MS, a full queue drops instead of waiting', () => {
      const b = new InboundBudget(10, 10, { onStall: () => undefined });
      b.charge(10, new W());
      b.setConsumerPresent(false);
      const w = new W();
      expect(b.charge(5, w)).to.equal('wait');
      clock.tick(NO_CONSUMER_DROP_MS);
      expect(b.dropping).to.equal(true);
      expect(b.charge(5, w)).to.equal('drop');
      expect(b.dropped).to.equal(1);
      expect(b.setConsumerPresent(true)).to.equal(1);
      expect(b.dropping).to.equal(false);
      expect(b.charge(5, w)).to.equal('wait');
    });
  });

  describe('pending requests (lost peer)', () => {
    let clock: sinon.SinonFakeTimers;
    beforeEach(() => {
      clock = sinon.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'Date'] });
    });
    afterEach(() => clock.restore());

    it('expires a request whose reply never comes after LOST_PEER_MS, one timer for the table', () => {
      const expired: [number, string][] = [];
      const p = new PendingRequests<string>((id, v) => expired.push([id, v]));
      const a = p.add('a')!;
      clock.tick(1000);
      const b = p.add('b')!;
      const c = p.add('c')!;
      expect(p.take(c)).to.equal('c');
      expect(p.take(c)).to.equal(undefined);
      expect(clock.countTimers()).to.equal(1);
      clock.tick(LOST_PEER_MS - 1001);
      expect(expired).to.deep.equal([]);
      clock.tick(1);
      expect(expired).to.deep.equal([[a, 'a']]);
      clock.tick(1000);
      expect(expired).to.deep.equal([
        [a, 'a'],
        [b, 'b'],
      ]);
      expect(clock.countTimers()).to.equal(0);
      expect(p.take(a)).to.equal(undefined);
    });

    it("drops a destroyed QP's requests silently, and fails those of an unreachable peer at once", () => {
      const expired: string[] = [];
      const p = new PendingRequests<{ qp: number; node: number }>((_id, v) => expired.push(`${v.qp}@${v.node}`));
      p.add({ qp: 1, node: 1 });
      p.add({ qp: 2, node: 1 });
      p.add({ qp: 2, node: 2 });
      expect(p.dropWhere((v) => v.qp === 1)).to.equal(1);
      expect(p.expireWhere((v) => v.node === 2)).to.equal(1);
      expect(expired).to.deep.equal(['2@2']);
      expect(p.size).to.equal(1);
      p.dispose();
      expect(clock.countTimers()).to.equal(0);
    });

    it('gives distinct non-zero ids and refuses past its bound', () => {
      const p = new PendingRequests<number>(() => undefined, 1000, 3);
      const ids = [p.add(1), p.add(2), p.add(3)];
      expect(new Set(ids).size).to.equal(3);
      expect(ids.includes(0)).to.equal(false);
      expect(p.add(4)).to.equal(undefined);
      p.dispose();
    });
  });

  it('limits can be lowered, never raised', () => {
    expect(resolveLimits({ requestQueueBytes: 10 }).requestQueueBytes).to.equal(10);
    expect(() => resolveLimits({ requestQueueBytes: (32 << 20) + 1 })).to.throw(RangeError);
    expect(() => resolveLimits({ maxNodes: 0 })).to.throw(RangeError);
  });
});
