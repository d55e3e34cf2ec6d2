// The mesh over real TCP sockets on loopback, a manager and several workers
// in this process: registration and ids, topology, direct links and relay,
// rejoin and restart, a restarted manager, GID fan-out, eviction at 64
// nodes, version and magic checks, and malformed frames (the connection
// closes with a logged reason and everything else carries on).

import { expect } from 'chai';
import * as net from 'node:net';
import { getField } from '../../protocol/field';
import {
  encodeIonicWireHeader,
  encodeNodeGids,
  encodeRegisterNode,
  encodeHandshake,
  decodeRegisterResp,
  decodeHandshake,
  incarnationOf,
} from '../../lib/mesh/codec';
import { gidFromText } from '../../lib/mesh/address';
import { AUTO_NODE_ID, MAX_NODES } from '../../lib/mesh/limits';
import { Mesh } from '../../lib/mesh/mesh';
import { ionic_wire_hdr } from '../../lib/mesh/layouts';
import { MeshMessage } from '../../lib/mesh/mesh-message';
import { IonicWireOp, MsgType, NodeInfo } from '../../lib/mesh/messages';
import { Be, joinWorker, LOCAL, MemoryLog, RawPeer, startManager, startWorker, until, waitFor } from './helpers';
import { skipBecause } from '../support/skip';

const gid = (t: string): Buffer => gidFromText(t)!;

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

function collect(m: Mesh): MeshMessage[] {
  const got: MeshMessage[] = [];
  m.on('message', (msg) => got.push(msg));
  return got;
}

async function registerRaw(
  port: number,
  instance: string,
  requestedId = AUTO_NODE_ID,
  listenPort = 0,
  from?: string,
): Promise<{ peer: RawPeer; id: number; result: number }> {
  const peer = await RawPeer.connect(port, LOCAL, from);
  peer.send(MsgType.REGISTER_NODE, encodeRegisterNode({ host: '', port: listenPort, requestedId, instance }));
  const f = await peer.waitFrame(MsgType.REGISTER_RESP);
  const d = decodeRegisterResp(f.body);
  if (!d.ok) throw new Error(d.error.detail);
  return { peer, id: d.value.nodeId, result: d.value.result };
}

const inst = (n: number): string => (0x1000 + n).toString(16).padStart(16, '0');

describe('mesh: nodes over TCP', function () {
  this.timeout(20000);
  const meshes: Mesh[] = [];
  const raws: RawPeer[] = [];
  const track = <T extends Mesh>(m: T): T => {
    meshes.push(m);
    return m;
  };
  afterEach(async () => {
    for (const r of raws.splice(0)) r.destroy();
    await Promise.all(meshes.splice(0).map((m) => m.close()));
  });

  it('registers workers with ids in arrival order and links them lower id -> higher id', async () => {
    const mgr = track(await startManager());
    const w1 = track(await joinWorker(mgr.listenPort));
    const w2 = track(await joinWorker(mgr.listenPort));
    const w3 = track(await joinWorker(mgr.listenPort));
    expect([mgr.nodeId, w1.nodeId, w2.nodeId, w3.nodeId]).to.deep.equal([0, 1, 2, 3]);
    await until(
      () => w1.routeTo(2) === 'direct' && w1.routeTo(3) === 'direct' && w2.routeTo(3) === 'direct',
      'direct links',
    );
    await until(
      () => w3.routeTo(1) === 'direct' && w3.routeTo(2) === 'direct' && w2.routeTo(1) === 'direct',
      'accepted links',
    );
    for (const w of [w1, w2, w3]) {
      expect(w.routeTo(0)).to.equal('direct');
      await until(() => w.topology().length === 4, 'full topology');
      expect(w.topology().map((n) => [n.id, n.alive])).to.deep.equal([
        [0, true],
        [1, true],
        [2, true],
        [3, true],
      ]);
    }
    expect(mgr.topology().map((n) => n.id)).to.deep.equal([0, 1, 2, 3]);
    expect([1, 2, 3].map((id) => mgr.routeTo(id))).to.deep.equal(['direct', 'direct', 'direct']);
  });

  it('carries data messages with their headers between every pair, manager included', async () => {
    const mgr = track(await startManager());
    const w1 = track(await joinWorker(mgr.listenPort));
    const w2 = track(await joinWorker(mgr.listenPort));
    await until(() => w1.routeTo(2) === 'direct' && w2.routeTo(1) === 'direct', 'direct link');
    const at0 = collect(mgr);
    const at1 = collect(w1);
    const at2 = collect(w2);
    expect(
      w1.send(2, MsgType.IONIC, ionic(11), [Buffer.from('part one,'), Buffer.from(' part two')], {
        srcQpn: 5,
        dstQpn: 6,
      }),
    ).to.equal('queued');
    expect(w2.send(1, MsgType.IONIC, ionic(12), Buffer.from('back'))).to.equal('queued');
    expect(w2.send(0, MsgType.DATA, Buffer.alloc(0), Buffer.from('to the manager'))).to.equal('queued');
    expect(mgr.send(1, MsgType.RDMA_WRITE, Buffer.alloc(16, 1), Buffer.from('from the manager'))).to.equal('queued');
    await until(() => at0.length === 1 && at1.length === 2 && at2.length === 1, 'deliveries');
    const m = at2[0]!;
    expect([m.from, m.type, m.srcQpn, m.dstQpn]).to.deep.equal([1, MsgType.IONIC, 5, 6]);
    expect(getField(m.header, 0, ionic_wire_hdr.req_id)).to.equal(11);
    expect(m.payload.toString()).to.equal('part one, part two');
    const byFrom = at1
      .map((x) => [x.from, x.type, x.payload.toString()])
      .sort((a, b) => (a[0] as number) - (b[0] as number));
    expect(byFrom).to.deep.equal([
      [0, MsgType.RDMA_WRITE, 'from the manager'],
      [2, MsgType.IONIC, 'back'],
    ]);
    expect([at0[0]!.from, at0[0]!.payload.toString()]).to.deep.equal([2, 'to the manager']);
  });

  it('refuses what it cannot send', async () => {
    const mgr = track(await startManager());
    const w1 = track(await joinWorker(mgr.listenPort));
    expect(w1.send(1, MsgType.IONIC, ionic(1))).to.equal('no-route');
    expect(w1.send(42, MsgType.IONIC, ionic(1))).to.equal('no-route');
    expect(w1.send(0, MsgType.HEARTBEAT, Buffer.alloc(0))).to.equal('bad-message');
    expect(w1.send(0, MsgType.IONIC, Buffer.alloc(60))).to.equal('bad-message');
    expect(w1.send(0, MsgType.IONIC, Buffer.alloc(12))).to.equal('bad-message');
    expect(w1.send(0, MsgType.DATA, Buffer.alloc(0), [Buffer.alloc(16 << 20), Buffer.alloc(1)])).to.equal('too-large');
    const unregistered = track(await startWorker(1));
    expect(unregistered.send(0, MsgType.DATA, Buffer.alloc(0))).to.equal('no-route');
  });

  it('relays through the manager when two workers have no direct link', async () => {
    const log = new MemoryLog('mgr');
    const mgr = track(await startManager({ log }));
    const w1 = track(await joinWorker(mgr.listenPort));
    // w2 advertises an address nobody listens on, so w1 cannot dial it.
    const w2 = track(await joinWorker(mgr.listenPort, { advertiseHost: '127.0.0.2' }));
    await until(() => w1.routeTo(2) === 'relay' && w2.routeTo(1) === 'relay', 'relay routes');
    const at1 = collect(w1);
    const at2 = collect(w2);
    expect(w1.send(2, MsgType.IONIC, ionic(21), Buffer.from('via the manager'))).to.equal('queued');
    expect(w2.send(1, MsgType.IONIC, ionic(22, IonicWireOp.ACK), Buffer.alloc(0), { reply: true })).to.equal('queued');
    await until(() => at1.length === 1 && at2.length === 1, 'relayed deliveries');
    expect([at2[0]!.from, at2[0]!.payload.toString()]).to.deep.equal([1, 'via the manager']);
    expect(at1[0]!.from).to.equal(2);
    expect(mgr.stats().relayDropped).to.equal(0);
  });

  it('a worker that comes back (same instance) keeps its id; a restarted one (new instance) gets a new id', async () => {
    const mgr = track(await startManager());
    const w1 = track(await joinWorker(mgr.listenPort, { instance: inst(1) }));
    const w2 = track(await joinWorker(mgr.listenPort));
    expect([w1.nodeId, w2.nodeId]).to.deep.equal([1, 2]);
    const down = waitFor<[number, string]>(mgr, 'peer-down', (id) => id === 1);
    await w1.close();
    await down;
    await until(() => mgr.topology().find((n) => n.id === 1)?.alive === false, 'node 1 dead');
    const back = track(await joinWorker(mgr.listenPort, { instance: inst(1) }));
    expect(back.nodeId).to.equal(1);
    await until(() => mgr.topology().find((n) => n.id === 1)?.alive === true, 'node 1 alive');
    await back.close();
    await until(() => mgr.topology().find((n) => n.id === 1)?.alive === false, 'node 1 dead again');
    const fresh = track(await joinWorker(mgr.listenPort));
    expect(fresh.nodeId).to.equal(3);
    // The direct link between the returning node and node 2 comes back too.
    const again = track(await joinWorker(mgr.listenPort, { instance: inst(1) }));
    expect(again.nodeId).to.equal(1);
    await until(() => again.routeTo(2) === 'direct' && w2.routeTo(1) === 'direct', 'link 1-2 again');
  });

  it('a raw registration asking for a held id with another instance gets a new id', async () => {
    const mgr = track(await startManager());
    const a = await registerRaw(mgr.listenPort, inst(1));
    raws.push(a.peer);
    expect(a.id).to.equal(1);
    a.peer.destroy();
    await until(() => mgr.topology().find((n) => n.id === 1)?.alive === false, 'node 1 dead');
    const impostor = await registerRaw(mgr.listenPort, inst(2), 1);
    raws.push(impostor.peer);
    expect(impostor.id).to.equal(2);
    const original = await registerRaw(mgr.listenPort, inst(1), 1);
    raws.push(original.peer);
    expect(original.id).to.equal(1);
  });

  it("a second registration with a live node's nonce is refused (EBUSY) and leaves the live node alone; once its link is gone it rejoins", async () => {
    const mgr = track(await startManager());
    const first = await registerRaw(mgr.listenPort, inst(1));
    raws.push(first.peer);
    const downs: number[] = [];
    mgr.on('peer-down', (id) => downs.push(id));
    const second = await registerRaw(mgr.listenPort, inst(1), first.id);
    raws.push(second.peer);
    expect(second.result).to.equal(-16);
    await second.peer.waitClose();
    // The live node was pinged (so a dead link would show) and kept.
    await first.peer.waitFrame(MsgType.HEARTBEAT);
    expect(first.peer.closed).to.equal(false);
    expect(mgr.topology().find((n) => n.id === first.id)?.alive).to.equal(true);
    expect(mgr.routeTo(first.id)).to.equal('direct');
    expect(downs).to.deep.equal([]);
    first.peer.destroy();
    await until(() => mgr.topology().find((n) => n.id === first.id)?.alive === false, 'node dead');
    const back = await registerRaw(mgr.listenPort, inst(1), first.id);
    raws.push(back.peer);
    expect([back.result, back.id]).to.deep.equal([0, first.id]);
  });

  it('a restarted manager gets its workers back under their ids, and the direct links stay up', async () => {
    const mgr = track(await startManager());
    const port = mgr.listenPort;
    const w1 = track(await joinWorker(port));
    const w2 = track(await joinWorker(port));
    await until(() => w1.routeTo(2) === 'direct', 'direct link');
    const lost = waitFor<[number, string]>(w1, 'peer-down', (id) => id === 0);
    await mgr.close();
    await lost;
    expect(w1.routeTo(2)).to.equal('direct');
    const mgr2 = track(
      await Mesh.start({ config: { role: 'manager', listen: { host: LOCAL, port } }, log: new MemoryLog('mgr2') }),
    );
    await until(() => mgr2.topology().filter((n) => n.alive).length === 3, 'workers back');
    expect(mgr2.topology().map((n) => n.id)).to.deep.equal([0, 1, 2]);
    expect([w1.nodeId, w2.nodeId]).to.deep.equal([1, 2]);
    await until(() => w1.routeTo(0) === 'direct' && w2.routeTo(0) === 'direct', 'manager links');
    const w3 = track(await joinWorker(port));
    expect(w3.nodeId).to.equal(3);
  });

  it('fans GIDs out, gives a late joiner the whole table, and takes GIDs learned later', async () => {
    const mgr = track(await startManager({ guestGids: [gid('10.0.0.100')] }));
    const w1 = track(await joinWorker(mgr.listenPort, { guestGids: [gid('fe80::1'), gid('10.0.0.1')] }));
    const w2 = track(await joinWorker(mgr.listenPort, { guestGids: [gid('fe80::2')] }));
    await until(() => w1.lookupGid(gid('fe80::2')) === 2 && w2.lookupGid(gid('10.0.0.1')) === 1, 'fan-out');
    expect(mgr.lookupGid(gid('fe80::1'))).to.equal(1);
    expect(w1.lookupGid(gid('10.0.0.100'))).to.equal(0);
    expect(w1.lookupGid(gid('fe80::1'))).to.equal(1);
    expect(w1.lookupGid(gid('fe80::99'))).to.equal(undefined);
    const late = track(await joinWorker(mgr.listenPort, { guestGids: [gid('fe80::3')] }));
    await until(
      () =>
        late.lookupGid(gid('10.0.0.100')) === 0 &&
        late.lookupGid(gid('fe80::1')) === 1 &&
        late.lookupGid(gid('fe80::2')) === 2,
      'late joiner has the whole table',
    );
    await until(() => w1.lookupGid(gid('fe80::3')) === 3, 'others learn the late joiner');
    expect(w2.addLocalGid(gid('fe80::22'))).to.equal(true);
    expect(w2.addLocalGid(gid('fe80::22'))).to.equal(false);
    await until(
      () => w1.lookupGid(gid('fe80::22')) === 2 && late.lookupGid(gid('fe80::22')) === 2,
      'learned GID fanned out',
    );
    // Two claimants: the GID names neither.
    late.addLocalGid(gid('fe80::2'));
    await until(
      () => mgr.lookupGid(gid('fe80::2')) === undefined && w1.lookupGid(gid('fe80::2')) === undefined,
      'conflict',
    );
    mgr.addLocalGid(gid('10.0.0.101'));
    await until(() => w1.lookupGid(gid('10.0.0.101')) === 0, 'manager GID learned later');
  });

  it('keeps a dead node in the table and evicts the one dead longest when 64 are registered, reusing its id', async () => {
    const log = new MemoryLog('mgr');
    const mgr = track(await startManager({ log }));
    const peers: RawPeer[] = [];
    for (let i = 1; i < MAX_NODES; i++) {
      // Eight loopback hosts: at most 8 live nodes register from one address.
      const r = await registerRaw(mgr.listenPort, inst(i), AUTO_NODE_ID, 0, `127.0.0.${1 + (i % 8)}`);
      raws.push(r.peer);
      peers.push(r.peer);
      expect(r.id).to.equal(i);
    }
    const full = await registerRaw(mgr.listenPort, inst(100), AUTO_NODE_ID, 0, '127.0.0.9');
    raws.push(full.peer);
    expect(full.result).to.equal(-28);
    await full.peer.waitClose();
    expect(log.has(/node table full/)).to.equal(true);
    peers[8]!.destroy(); // node 9 dies first
    await until(() => mgr.topology().find((n) => n.id === 9)?.alive === false, 'node 9 dead');
    const t = Date.now();
    await until(() => Date.now() > t + 2, 'the clock to move');
    peers[4]!.destroy(); // then node 5
    await until(() => mgr.topology().find((n) => n.id === 5)?.alive === false, 'node 5 dead');
    const next = await registerRaw(mgr.listenPort, inst(101), AUTO_NODE_ID, 0, '127.0.0.9');
    raws.push(next.peer);
    // Ids stay inside the table: the evicted node's id is the only free one.
    expect(next.id).to.equal(9);
    expect(mgr.topology().find((n) => n.id === 9)?.incarnation).to.equal(incarnationOf(inst(101)));
    expect(mgr.topology().find((n) => n.id === 5)?.alive).to.equal(false);
    expect(mgr.topology().length).to.equal(64);
    expect(log.has(/node 9 evicted/)).to.equal(true);
  });

  it('refuses a registration of another version with EPROTO and closes', async () => {
    const log = new MemoryLog('mgr');
    const mgr = track(await startManager({ log }));
    const peer = await RawPeer.connect(mgr.listenPort);
    raws.push(peer);
    const v4 = new Be().text('', 256).u16(0).u32(AUTO_NODE_ID).u32(4).build();
    peer.send(MsgType.REGISTER_NODE, v4);
    const resp = await peer.waitFrame(MsgType.REGISTER_RESP);
    const d = decodeRegisterResp(resp.body);
    expect(d.ok && d.value.result).to.equal(-71);
    await peer.waitClose();
    expect(log.has(/registration version 4, want 6/)).to.equal(true);
    expect(mgr.topology().length).to.equal(1);
  });

  it("a worker refuses a handshake of another version, from a higher id, meant for another instance, or without the pair's link key", async () => {
    const mgr = track(await startManager());
    const w1 = track(await joinWorker(mgr.listenPort));
    const w2 = track(await joinWorker(mgr.listenPort));
    await until(() => w2.topology().length === 3, 'topology');
    const ask = async (body: Buffer, src: number): Promise<number> => {
      const p = await RawPeer.connect(w2.listenPort);
      raws.push(p);
      p.send(MsgType.HANDSHAKE, body, { src, dst: 2 });
      const r = await p.waitFrame(MsgType.HANDSHAKE_RESP);
      await p.waitClose();
      const d = decodeHandshake(r.body);
      return d.ok ? d.value.result : 999;
    };
    const inc1 = incarnationOf(w1.instance);
    const inc2 = incarnationOf(w2.instance);
    const key = w1.topology().find((n) => n.id === 2)!.linkKey;
    expect(await ask(new Be().u32(1).u32(4).build(), 1)).to.equal(-71);
    expect(
      await ask(
        encodeHandshake({ nodeId: 1, result: 0, incarnation: inc1, peerIncarnation: inc2, linkKey: key, version: 5 }),
        1,
      ),
    ).to.equal(-71);
    expect(
      await ask(
        encodeHandshake({ nodeId: 3, result: 0, incarnation: inst(3), peerIncarnation: inc2, linkKey: key }),
        3,
      ),
    ).to.equal(-22);
    expect(
      await ask(
        encodeHandshake({ nodeId: 1, result: 0, incarnation: inc1, peerIncarnation: inst(77), linkKey: key }),
        1,
      ),
    ).to.equal(-116);
    expect(
      await ask(
        encodeHandshake({ nodeId: 1, result: 0, incarnation: inst(78), peerIncarnation: inc2, linkKey: key }),
        1,
      ),
    ).to.equal(-116);
    // Everything public right, but not the pair's key: whoever it is, it is not node 1.
    expect(
      await ask(
        encodeHandshake({
          nodeId: 1,
          result: 0,
          incarnation: inc1,
          peerIncarnation: inc2,
          linkKey: Buffer.alloc(16, 1),
        }),
        1,
      ),
    ).to.equal(-22);
    // The real link is unaffected.
    await until(() => w1.routeTo(2) === 'direct', 'direct link');
  });

  it('closes connections that send malformed frames, logs why, and stays up', async () => {
    const log = new MemoryLog('mgr');
    const mgr = track(await startManager({ log }));
    const hdr = (type: number, len: number, magic = 0x52444d41): Buffer =>
      new Be().u32(magic).u32(type).u32(len).u32(1).u32(0).u32(0).u32(0).u32(0).build();
    const cases: { name: string; registered: boolean; bytes: (id: number) => Buffer; log: RegExp }[] = [
      { name: 'bad magic', registered: false, bytes: () => hdr(12, 274, 0xdeadbeef), log: /BAD_MAGIC/ },
      { name: 'unknown type', registered: true, bytes: () => hdr(200, 0), log: /UNKNOWN_TYPE/ },
      { name: 'retired type', registered: true, bytes: () => hdr(19, 0), log: /UNSUPPORTED_TYPE/ },
      { name: 'oversized frame', registered: true, bytes: () => hdr(24, 0x7fffffff), log: /FRAME_TOO_LARGE/ },
      { name: 'short ionic frame', registered: true, bytes: () => hdr(24, 8), log: /BAD_LENGTH/ },
      {
        name: 'data before registering',
        registered: false,
        bytes: () => Buffer.concat([hdr(6, 1), Buffer.alloc(1)]),
        log: /data before registration/,
      },
      {
        name: 'short GID record',
        registered: true,
        bytes: () => Buffer.concat([hdr(25, 100), Buffer.alloc(100)]),
        log: /BAD_LENGTH/,
      },
      {
        name: 'bad GID record',
        registered: true,
        bytes: () => Buffer.concat([hdr(25, 136), new Be().u32(0).u32(9).zeros(128).build()]),
        log: /TOO_MANY|claims 9 GIDs/,
      },
      {
        name: 'spoofed source',
        registered: true,
        bytes: () =>
          Buffer.concat([
            new Be().u32(0x52444d41).u32(24).u32(60).u32(1).u32(55).u32(0).u32(0).u32(0).build(),
            ionic(1),
          ]),
        log: /claims to be from node 55/,
      },
      {
        name: 'ionic without its magic',
        registered: true,
        bytes: (id) =>
          Buffer.concat([
            new Be().u32(0x52444d41).u32(24).u32(60).u32(1).u32(id).u32(0).u32(0).u32(0).build(),
            Buffer.alloc(60),
          ]),
        log: /without the ionic magic/,
      },
    ];
    let n = 0;
    for (const c of cases) {
      n++;
      let peer: RawPeer;
      let id = 0;
      if (c.registered) {
        const r = await registerRaw(mgr.listenPort, inst(200 + n));
        peer = r.peer;
        id = r.id;
      } else {
        peer = await RawPeer.connect(mgr.listenPort);
      }
      raws.push(peer);
      peer.write(c.bytes(id));
      await peer.waitClose();
      await until(() => log.lines.some((l) => c.log.test(l.message)), `log for ${c.name}`);
    }
    // Still serving.
    const w = track(await joinWorker(mgr.listenPort));
    expect(w.nodeId).to.be.a('number');
    expect(mgr.stats().protocolErrors).to.be.greaterThan(4);
  });

  it('closes a direct link whose peer sends a frame for another node', async () => {
    const mgr = track(await startManager());
    track(await joinWorker(mgr.listenPort));
    const w2 = track(await joinWorker(mgr.listenPort));
    await until(() => w2.topology().length === 3, 'topology');
    const w1 = w2.topology().find((n) => n.id === 1)!;
    const p = await RawPeer.connect(w2.listenPort);
    raws.push(p);
    // Speak as node 1 with what node 1 knows (its incarnation, the pair's key), then misaddress a message.
    p.send(
      MsgType.HANDSHAKE,
      encodeHandshake({
        nodeId: 1,
        result: 0,
        incarnation: w1.incarnation,
        peerIncarnation: incarnationOf(w2.instance),
        linkKey: w1.linkKey,
      }),
      { src: 1, dst: 2 },
    );
    await p.waitFrame(MsgType.HANDSHAKE_RESP);
    p.write(
      Buffer.concat([new Be().u32(0x52444d41).u32(24).u32(60).u32(1).u32(1).u32(7).u32(0).u32(0).build(), ionic(1)]),
    );
    await p.waitClose();
  });

  it('handles NODE_GIDS for another node from a worker by dropping it', async () => {
    const log = new MemoryLog('mgr');
    const mgr = track(await startManager({ log }));
    const r = await registerRaw(mgr.listenPort, inst(1));
    raws.push(r.peer);
    r.peer.send(MsgType.NODE_GIDS, encodeNodeGids([{ nodeId: 7, gids: [gid('fe80::7')] }]), { src: 1 });
    r.peer.send(MsgType.NODE_GIDS, encodeNodeGids([{ nodeId: 1, gids: [gid('fe80::1')] }]), { src: 1 });
    await until(() => mgr.lookupGid(gid('fe80::1')) === 1, 'own GIDs taken');
    expect(mgr.lookupGid(gid('fe80::7'))).to.equal(undefined);
    expect(log.has(/advertised GIDs for another node/)).to.equal(true);
    expect(r.peer.closed).to.equal(false);
  });

  it('reports peer-up and peer-down with routes and a reason', async () => {
    const mgr = track(await startManager());
    const events: string[] = [];
    const w1 = track(await startWorker(mgr.listenPort));
    w1.on('peer-up', (id, route) => events.push(`up ${id} ${route}`));
    w1.on('peer-down', (id) => events.push(`down ${id}`));
    await waitFor(w1, 'registered');
    const w2 = track(await joinWorker(mgr.listenPort));
    await until(() => events.includes('up 2 direct'), 'direct up');
    const topo = waitFor<[readonly NodeInfo[]]>(w1, 'topology', (nodes) => nodes.some((n) => n.id === 2 && !n.alive));
    await w2.close();
    await topo;
    await until(() => events.includes('down 2'), 'down');
    expect(events[0]).to.equal('up 0 direct');
  });

  it('works over IPv6 loopback', async function () {
    const probe = net.createServer();
    const ok = await new Promise<boolean>((resolve) => {
      probe.once('error', () => resolve(false));
      probe.listen(0, '::1', () => resolve(true));
    });
    probe.close();
    if (!ok) skipBecause(this, 'no IPv6 loopback here (cannot listen on ::1)');
    const mgr = track(await startManager({}, '::1'));
    const w1 = track(await joinWorker(mgr.listenPort, {}, '::1'));
    const w2 = track(await joinWorker(mgr.listenPort, {}, '::1'));
    await until(() => w1.routeTo(2) === 'direct', 'IPv6 direct link');
    expect(mgr.topology().find((n) => n.id === 1)!.host).to.equal('::1');
    const got = collect(w2);
    w1.send(2, MsgType.IONIC, ionic(1), Buffer.from('six'));
    await until(() => got.length === 1, 'delivery');
    expect(got[0]!.payload.toString()).to.equal('six');
  });

  it('tries each address a host name resolves to', async () => {
    const mgr = track(await startManager());
    const tried: string[] = [];
    const w = track(
      await Mesh.start({
        config: { role: 'worker', manager: { kind: 'name', host: 'manager.test', port: mgr.listenPort } },
        peerListen: { host: LOCAL },
        resolve: async (name) => {
          tried.push(name);
          return ['127.0.0.3', LOCAL];
        },
        log: new MemoryLog('w'),
      }),
    );
    await waitFor(w, 'registered');
    expect(tried).to.deep.equal(['manager.test']);
    expect(w.nodeId).to.equal(1);
  });
});
