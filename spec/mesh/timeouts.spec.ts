// Every mesh deadline under sinon fake timers (real sockets, fake clock):
// heartbeats and death after three intervals on both sides, a connection
// that never registers, the worker's reconnect backoff, and the send timeout
// (the manager's being half the workers'). No assertion depends on the wall
// clock: time moves only when the test ticks it.

import { expect } from 'chai';
import * as net from 'node:net';
import * as sinon from 'sinon';
import {
  decodeRegisterNode,
  encodeFrameHeader,
  encodeIonicWireHeader,
  encodeRegisterNode,
  encodeRegisterResp,
} from '../../lib/mesh/codec';
import { FrameParser } from '../../lib/mesh/frame-parser';
import { AUTO_NODE_ID, DEAD_AFTER_INTERVALS, RECONNECT_MIN_MS } from '../../lib/mesh/limits';
import { Mesh } from '../../lib/mesh/mesh';
import { FrameHeader, IonicWireOp, MsgType } from '../../lib/mesh/messages';
import { LOCAL, MemoryLog, RawPeer, startManager, startWorker } from './helpers';

const HB = 1000;
const INSTANCE = '00000000000000aa';

/** Let real I/O run: a few turns of the loop (setImmediate is not faked). */
async function io(turns = 20): Promise<void> {
  for (let i = 0; i < turns; i++) await new Promise((r) => setImmediate(r));
}

/** Let real I/O run until `cond` holds (bounded number of turns, no clock). */
async function ioUntil(cond: () => boolean, what: string, turns = 20000): Promise<void> {
  for (let i = 0; i < turns; i++) {
    if (cond()) return;
    await new Promise((r) => setImmediate(r));
  }
  throw new Error(`never happened: ${what}`);
}

function count(peer: RawPeer, type: number): number {
  return peer.frames.filter((f) => f.header.type === type).length;
}

async function registerRaw(port: number): Promise<RawPeer> {
  const peer = await RawPeer.connect(port);
  peer.send(
    MsgType.REGISTER_NODE,
    encodeRegisterNode({ host: '', port: 0, requestedId: AUTO_NODE_ID, instance: INSTANCE }),
  );
  await ioUntil(() => count(peer, MsgType.REGISTER_RESP) === 1, 'registration reply');
  return peer;
}

/** A manager played by hand: accepts, answers registration, then does what the test says. */
class FakeManager {
  readonly server = net.createServer((s) => this.#accept(s));
  readonly registrations: { requestedId: number; instance: string }[] = [];
  readonly received: FrameHeader[] = [];
  sockets: net.Socket[] = [];
  port = 0;

  async listen(): Promise<void> {
    await new Promise<void>((r) => this.server.listen(0, LOCAL, () => r()));
    this.port = (this.server.address() as net.AddressInfo).port;
  }

  #accept(s: net.Socket): void {
    this.sockets.push(s);
    s.on('error', () => undefined);
    const parser = new FrameParser({
      onFrame: (h, body) => {
        this.received.push(h);
        if (h.type === MsgType.REGISTER_NODE) {
          const d = decodeRegisterNode(body);
          if (!d.ok) throw new Error(d.error.detail);
          this.registrations.push({ requestedId: d.value.requestedId, instance: d.value.instance });
          const resp = encodeRegisterResp({ nodeId: 7, numNodes: 2, result: 0, managerInstance: '00000000000000bb' });
          s.write(
            Buffer.concat([
              encodeFrameHeader({ type: MsgType.REGISTER_RESP, length: resp.length, seq: 1, src: 0, dst: 7 }),
              resp,
            ]),
          );
        }
        return true;
      },
      onError: () => s.destroy(),
    });
    s.on('data', (c: Buffer) => parser.push(c));
  }

  close(): Promise<void> {
    for (const s of this.sockets) s.destroy();
    return new Promise((r) => this.server.close(() => r()));
  }
}

describe('mesh: deadlines (fake timers)', function () {
  this.timeout(20000);
  let clock: sinon.SinonFakeTimers;
  const meshes: Mesh[] = [];
  const cleanups: (() => unknown)[] = [];

  beforeEach(() => {
    clock = sinon.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'setInterval', 'clearInterval', 'Date'] });
  });
  afterEach(async () => {
    clock.restore();
    for (const c of cleanups.splice(0)) await c();
    await Promise.all(meshes.splice(0).map((m) => m.close()));
  });

  it('the manager pings each worker every interval and declares a silent one dead after three', async () => {
    const log = new MemoryLog('mgr');
    const mgr = await startManager({ heartbeatMs: HB, log });
    meshes.push(mgr);
    const peer = await registerRaw(mgr.listenPort);
    cleanups.push(() => peer.destroy());
    const downs: [number, string][] = [];
    mgr.on('peer-down', (id, why) => downs.push([id, why]));
    for (let i = 1; i < DEAD_AFTER_INTERVALS; i++) {
      clock.tick(HB);
      await ioUntil(() => count(peer, MsgType.HEARTBEAT) === i, `heartbeat ${i}`);
    }
    expect(peer.closed).to.equal(false);
    clock.tick(HB);
    await ioUntil(() => peer.closed, 'the silent worker closed');
    expect(downs).to.deep.equal([[1, 'node 1: nothing heard for 3 heartbeat intervals']]);
    expect(mgr.topology().find((n) => n.id === 1)!.alive).to.equal(false);
    expect(log.has(/node 1 is dead: nothing heard for 3 heartbeat intervals/)).to.equal(true);
  });

  it('a worker that answers stays alive for as long as it answers', async () => {
    const mgr = await startManager({ heartbeatMs: HB });
    meshes.push(mgr);
    const peer = await registerRaw(mgr.listenPort);
    cleanups.push(() => peer.destroy());
    peer.events.on('frame', (h: FrameHeader) => {
      if (h.type === MsgType.HEARTBEAT) peer.send(MsgType.HEARTBEAT_RESP, Buffer.alloc(0), { src: 1 });
    });
    for (let i = 1; i <= 10; i++) {
      clock.tick(HB);
      await ioUntil(() => count(peer, MsgType.HEARTBEAT) === i, `heartbeat ${i}`);
      await io();
    }
    expect(peer.closed).to.equal(false);
    expect(mgr.routeTo(1)).to.equal('direct');
  });

  it('closes a connection that never registers after three intervals', async () => {
    const mgr = await startManager({ heartbeatMs: HB });
    meshes.push(mgr);
    const peer = await RawPeer.connect(mgr.listenPort);
    cleanups.push(() => peer.destroy());
    await io();
    clock.tick(2 * HB);
    await io();
    expect(peer.closed).to.equal(false);
    clock.tick(HB);
    await ioUntil(() => peer.closed, 'unregistered connection closed');
  });

  it('a worker pings a quiet manager, gives up after three intervals, and registers again under its id with backoff', async () => {
    const fake = new FakeManager();
    await fake.listen();
    cleanups.push(() => fake.close());
    const w = await startWorker(fake.port, { heartbeatMs: HB });
    meshes.push(w);
    await ioUntil(() => w.nodeId === 7, 'registered');
    expect(fake.registrations).to.deep.equal([{ requestedId: AUTO_NODE_ID, instance: w.instance }]);
    const down = new Promise<string>((r) => w.once('peer-down', (_id, why) => r(why)));
    clock.tick(HB);
    await ioUntil(() => fake.received.some((h) => h.type === MsgType.HEARTBEAT), 'worker heartbeat');
    clock.tick(HB);
    await io();
    expect(fake.registrations.length).to.equal(1);
    clock.tick(HB);
    expect(await down).to.match(/nothing heard for 3 heartbeat intervals/);
    // The first retry waits the shortest backoff.
    clock.tick(RECONNECT_MIN_MS - 1);
    await io();
    expect(fake.registrations.length).to.equal(1);
    clock.tick(1);
    await ioUntil(() => fake.registrations.length === 2, 'second registration');
    expect(fake.registrations[1]).to.deep.equal({ requestedId: 7, instance: w.instance });
  });

  it('retries an unreachable manager with a doubling backoff', async () => {
    const fake = new FakeManager();
    await fake.listen();
    const port = fake.port;
    await fake.close();
    const w = await startWorker(port, { heartbeatMs: HB });
    meshes.push(w);
    // Each attempt is refused at once.
    const again = new FakeManager();
    // Advance through 100, 200, 400 ms of backoff, then bring the manager up on the same port.
    await io(50);
    clock.tick(100);
    await io(50);
    clock.tick(200);
    await io(50);
    await new Promise<void>((r) => again.server.listen(port, LOCAL, () => r()));
    cleanups.push(() => again.close());
    clock.tick(399);
    await io(50);
    expect(again.registrations.length).to.equal(0);
    clock.tick(1);
    await ioUntil(() => again.registrations.length === 1, 'registered after backoff');
  });

  it('shuts a connection down when nothing goes out for the send timeout; the manager waits half as long', async () => {
    const mgr = await startManager({
      heartbeatMs: 600_000,
      sendTimeoutMs: 4000,
      limits: { requestQueueBytes: 1 << 20 },
    });
    meshes.push(mgr);
    expect(mgr.sendTimeoutMs).to.equal(2000);
    const peer = await registerRaw(mgr.listenPort);
    cleanups.push(() => peer.destroy());
    peer.socket.pause();
    const hdr = encodeIonicWireHeader({
      op: IonicWireOp.WRITE,
      atomicCs: 0,
      srcQpId: 1,
      dstQpId: 1,
      reqId: 1,
      rkey: 1,
      length: 0,
      immBe: 0,
      status: 0,
    });
    const payload = Buffer.alloc(256 * 1024);
    let queued = 0;
    // Fill the kernel's buffers and then the send queue.
    for (let round = 0; round < 2000; round++) {
      const r = mgr.send(1, MsgType.IONIC, hdr, payload);
      if (r === 'queued') queued++;
      else {
        expect(r).to.equal('queue-full');
        let last = -1;
        // Let writes settle: stop when the queue stops moving.
        for (let i = 0; i < 200; i++) {
          await io(5);
          const now = mgr.stats().outboundBytes;
          if (now === last) break;
          last = now;
        }
        if (mgr.send(1, MsgType.IONIC, hdr, payload) === 'queue-full') break;
        queued++;
      }
    }
    expect(queued).to.be.greaterThan(4);
    const down = new Promise<string>((r) => mgr.once('peer-down', (_id, why) => r(why)));
    clock.tick(1999);
    await io();
    expect(peer.closed).to.equal(false);
    clock.tick(1);
    expect(await down).to.match(/send timeout: nothing written for 2000 ms/);
    expect(mgr.stats().outboundBytes).to.equal(0);
  });

  it('a worker uses the full send timeout', async () => {
    const fake = new FakeManager();
    await fake.listen();
    cleanups.push(() => fake.close());
    const w = await startWorker(fake.port, { sendTimeoutMs: 4000 });
    meshes.push(w);
    expect(w.sendTimeoutMs).to.equal(4000);
  });
});
