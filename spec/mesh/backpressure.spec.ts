// Bounded memory under pressure: a peer that never reads fills our send
// queue to its bound and no further (requests 32 MiB, replies up to twice
// that); a node whose consumer holds messages stops reading at the inbound
// bound, which pushes back to the sender as 'queue-full' and comes back as
// 'writable'; the manager holds a relay source while the destination has no
// room; queued requests can be taken back.

import { expect } from 'chai';
import { getField } from '../../protocol/field';
import { encodeIonicWireHeader, encodeRegisterNode } from '../../lib/mesh/codec';
import { AUTO_NODE_ID, CONNECTION_QUEUE_BYTES, MAX_FRAME_PAYLOAD, REQUEST_QUEUE_BYTES } from '../../lib/mesh/limits';
import { Mesh } from '../../lib/mesh/mesh';
import { ionic_wire_hdr } from '../../lib/mesh/layouts';
import { MeshMessage } from '../../lib/mesh/mesh-message';
import { IonicWireOp, MsgType } from '../../lib/mesh/messages';
import { FRAME_OVERHEAD } from '../../lib/mesh/outbound-queue';
import { joinWorker, MemoryLog, RawPeer, startManager, until } from './helpers';

const MiB = 1024 * 1024;

function ionic(reqId: number, op: number = IonicWireOp.WRITE): Buffer {
  return encodeIonicWireHeader({
    op,
    atomicCs: 0,
    srcQpId: 1,
    dstQpId: 2,
    reqId,
    rkey: 9,
    length: 0,
    immBe: 0,
    status: 0,
  });
}

/** Register a hand-driven worker that may stop reading; port 0 so nobody dials it directly. */
async function rawWorker(port: number, instance: string): Promise<RawPeer> {
  const peer = await RawPeer.connect(port);
  peer.send(MsgType.REGISTER_NODE, encodeRegisterNode({ host: '', port: 0, requestedId: AUTO_NODE_ID, instance }));
  await peer.waitFrame(MsgType.REGISTER_RESP);
  return peer;
}

/** Send until the queue refuses, letting writes drain into the kernel between refusals until it refuses for good. */
async function fill(m: Mesh, to: number, payload: Buffer, reply: boolean, reqBase = 0): Promise<number> {
  let queued = 0;
  let stuck = 0;
  for (let i = 0; i < 100_000 && stuck < 3; i++) {
    const r = m.send(to, MsgType.IONIC, ionic(reqBase + i, reply ? IonicWireOp.ACK : IonicWireOp.WRITE), payload, {
      reply,
      tag: 5,
    });
    if (r === 'queued') {
      queued++;
      stuck = 0;
      continue;
    }
    expect(r).to.equal('queue-full');
    stuck++;
    await new Promise((res) => setTimeout(res, 20));
  }
  return queued;
}

describe('mesh: backpressure and bounded memory', function () {
  this.timeout(30000);
  const meshes: Mesh[] = [];
  const raws: RawPeer[] = [];
  afterEach(async () => {
    for (const r of raws.splice(0)) r.destroy();
    await Promise.all(meshes.splice(0).map((m) => m.close()));
  });

  it('a peer that never reads gets at most 32 MiB of requests queued, then queue-full; replies past its 64 MiB close it', async () => {
    const log = new MemoryLog('mgr');
    const mgr = await startManager({ log });
    meshes.push(mgr);
    const peer = await rawWorker(mgr.listenPort, '0000000000000101');
    raws.push(peer);
    await until(() => mgr.routeTo(1) === 'direct', 'route');
    peer.socket.pause();
    const payload = Buffer.alloc(MiB - 92);
    const frameBytes = 32 + 60 + payload.length + FRAME_OVERHEAD;
    const requests = await fill(mgr, 1, payload, false);
    const afterRequests = mgr.stats().outboundBytes;
    expect(afterRequests).to.be.at.most(REQUEST_QUEUE_BYTES);
    expect(afterRequests).to.be.greaterThan(REQUEST_QUEUE_BYTES - frameBytes);
    expect(mgr.send(1, MsgType.IONIC, ionic(1), payload)).to.equal('queue-full');
    // Queued requests can be taken back (a flushed QP), which makes room.
    const back = mgr.takeBack(5);
    expect(back).to.be.greaterThan(10);
    expect(mgr.stats().outboundBytes).to.be.lessThan(afterRequests);
    // Our answers fill the rest of its room; the one that does not fit ends the connection (it is not reading).
    let peak = 0;
    let replies = 0;
    let r: string = 'queued';
    for (let i = 0; i < 1000 && r === 'queued'; i++) {
      r = mgr.send(1, MsgType.IONIC, ionic(100_000 + i, IonicWireOp.ACK), payload, { reply: true });
      if (r === 'queued') replies++;
      peak = Math.max(peak, mgr.stats().outboundBytes);
    }
    expect(r).to.equal('no-route');
    expect(peak).to.be.at.most(CONNECTION_QUEUE_BYTES);
    expect(requests + replies).to.be.lessThan(64 + 64);
    expect(mgr.routeTo(1)).to.equal(undefined);
    // A paused socket sees its end only once it reads again.
    peer.socket.resume();
    await peer.waitClose();
    expect(log.has(/reply queue over its bound .*the peer is not reading/)).to.equal(true);
    expect(mgr.stats().outboundBytes).to.equal(0);
  });

  it('a peer that reads again gets everything and the sender hears writable', async () => {
    const mgr = await startManager();
    meshes.push(mgr);
    const peer = await rawWorker(mgr.listenPort, '0000000000000102');
    raws.push(peer);
    await until(() => mgr.routeTo(1) === 'direct', 'route');
    peer.socket.pause();
    const payload = Buffer.alloc(4 * MiB);
    const queued = await fill(mgr, 1, payload, false);
    let writable = 0;
    mgr.on('writable', (id) => {
      if (id === 1) writable++;
    });
    const frames = (): number => peer.frames.filter((f) => f.header.type === MsgType.IONIC).length;
    peer.socket.resume();
    await until(() => frames() === queued, 'every queued frame delivered');
    expect(writable).to.be.greaterThan(0);
    await until(() => mgr.stats().outboundBytes === 0, 'queue empty');
    expect(
      peer.frames.filter((f) => f.header.type === MsgType.IONIC).map((f) => getField(f.body, 0, ionic_wire_hdr.req_id)),
    ).to.deep.equal(Array.from({ length: queued }, (_, i) => i));
  });

  it('a consumer that holds messages stops the reading at the inbound bound, and the sender sees queue-full', async () => {
    const mgr = await startManager();
    meshes.push(mgr);
    const sender = await joinWorker(mgr.listenPort, {
      limits: { requestQueueBytes: 256 * 1024, connectionQueueBytes: 512 * 1024 },
    });
    const receiver = await joinWorker(mgr.listenPort, { limits: { inboundQueueMessages: 8, inboundQueueBytes: MiB } });
    meshes.push(sender, receiver);
    await until(() => sender.routeTo(2) === 'direct' && receiver.routeTo(1) === 'direct', 'direct link');
    const held: (() => void)[] = [];
    const order: number[] = [];
    receiver.on('message', (m: MeshMessage) => {
      order.push(getField(m.header, 0, ionic_wire_hdr.req_id));
      held.push(m.retain());
    });
    const pressure: number[] = [];
    receiver.on('pressure', (ms) => pressure.push(ms));
    const payload = Buffer.alloc(16 * 1024);
    let sent = 0;
    let full = false;
    for (let i = 0; i < 20_000 && !full; i++) {
      const r = sender.send(2, MsgType.IONIC, ionic(sent), payload);
      if (r === 'queued') sent++;
      else {
        // Let the bytes move; it is full for good once the receiver stopped reading and the kernel buffers filled.
        await new Promise((res) => setTimeout(res, 20));
        full = sender.send(2, MsgType.IONIC, ionic(sent), payload) === 'queue-full';
        if (!full) sent++;
      }
    }
    expect(full).to.equal(true);
    expect(receiver.stats().inboundMessages).to.equal(8);
    expect(receiver.stats().inboundBytes).to.be.at.most(MiB);
    expect(receiver.stats().heldConnections).to.equal(1);
    expect(order.length).to.equal(8);
    await until(() => pressure.length > 0, 'pressure reported');
    // Let go: reading resumes, the sender hears writable, everything arrives in order.
    let writable = 0;
    sender.on('writable', (id) => {
      if (id === 2) writable++;
    });
    receiver.removeAllListeners('message');
    receiver.on('message', (m: MeshMessage) => order.push(getField(m.header, 0, ionic_wire_hdr.req_id)));
    for (const r of held.splice(0)) r();
    await until(() => order.length === sent, 'all delivered');
    expect(order).to.deep.equal(Array.from({ length: sent }, (_, i) => i));
    expect(writable).to.be.greaterThan(0);
    expect(receiver.stats().inboundMessages).to.equal(0);
    expect(receiver.stats().heldConnections).to.equal(0);
  });

  it('the manager holds a relay source while the destination has no room, and drops nothing', async () => {
    const mgr = await startManager({ limits: { requestQueueBytes: 256 * 1024, connectionQueueBytes: 512 * 1024 } });
    meshes.push(mgr);
    const w1 = await joinWorker(mgr.listenPort, {
      limits: { requestQueueBytes: 256 * 1024, connectionQueueBytes: 512 * 1024 },
    });
    meshes.push(w1);
    const dest = await rawWorker(mgr.listenPort, '0000000000000103');
    raws.push(dest);
    await until(() => w1.routeTo(2) === 'relay', 'relay route');
    dest.socket.pause();
    const payload = Buffer.alloc(64 * 1024);
    const queued = await fill(w1, 2, payload, false);
    expect(mgr.stats().heldConnections).to.equal(1);
    expect(mgr.stats().outboundBytes).to.be.at.most(512 * 1024);
    expect(mgr.stats().parserBytes).to.be.at.most(MAX_FRAME_PAYLOAD);
    dest.socket.resume();
    const frames = (): number => dest.frames.filter((f) => f.header.type === MsgType.IONIC).length;
    await until(() => frames() === queued, 'every relayed frame delivered');
    expect(dest.frames.filter((f) => f.header.type === MsgType.IONIC).every((f) => f.header.src === 1)).to.equal(true);
    expect(mgr.stats().relayDropped).to.equal(0);
    expect(mgr.stats().heldConnections).to.equal(0);
  });
});
