// The TCP mesh from a hostile peer: a manager and a worker, each with a device
// and a guest model and an RDMA QP pair connected across the mesh, while raw
// peers connect to both listen ports and send mutated control frames, RDMA
// requests naming random QPs, rkeys, addresses and lengths (some after a real
// registration, so they pass the framing and reach the responder), frames cut
// short, and oversized lengths then silence. Between rounds the real pair
// must still move data correctly: an RDMA WRITE across the mesh lands byte
// for byte. A finding: an exception escaping, the real pair failing, or a
// loop turn over the limit (wall time confirmed by this thread's CPU time).
//
// Two targets: `mesh` (plaintext on loopback) and `mesh-tls`, where the
// meshes run TLS 1.3 with a pre-shared key and every hostile peer holds the
// key: an authenticated peer gone bad, the case the mesh's RC rules and
// bounds exist for (TLS only keeps out the peers without the key).

import {
  encodeFrameHeader,
  encodeHandshake,
  encodeIonicWireHeader,
  encodeNodeGids,
  encodeRegisterNode,
  encodeRegisterResp,
  encodeTopology,
} from '../../../lib/mesh/codec';
import { randomBytes } from 'crypto';
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import { AUTO_NODE_ID } from '../../../lib/mesh/limits';
import { loadMeshCredentials, MeshCredentials } from '../../../lib/mesh/tls';
import { IonicWireOp, MsgType } from '../../../lib/mesh/messages';
import { cqesOf, meshGuests, RawPeer } from '../../mesh/helpers';
import { MrF, QpT, WOp } from '../../support/ionic/rdma-regs';
import { v4 } from '../../support/ionic/rdma-verbs';
import { FuzzFinding, FuzzRunOptions, registerTarget } from './index';
import { xorshift } from '../../support/rng';
import { CpuTurnWatch } from '../../targets/turn-watch';

const IP_A = '10.66.0.1';
const IP_B = '10.66.0.2';
const ALL = MrF.LOCAL_WRITE | MrF.REMOTE_WRITE | MrF.REMOTE_READ | MrF.REMOTE_ATOMIC;
const I = '0123456789abcdef';

function mutate(b: Buffer, next: () => number): Buffer {
  const out = Buffer.from(b);
  switch (next() % 5) {
    case 0:
      for (let i = 0, n = 1 + (next() % 4); i < n && out.length; i++) out[next() % out.length] = next() & 0xff;
      return out;
    case 1:
      return out.subarray(0, next() % (out.length + 1));
    case 2:
      return Buffer.concat([out, Buffer.from([next() & 0xff, next() & 0xff])]);
    case 3:
      return out; // unchanged: valid frames reach the roles and the responder
    default: {
      const r = Buffer.alloc(next() % 300);
      for (let i = 0; i < r.length; i++) r[i] = next() & 0xff;
      return r;
    }
  }
}

/** A fresh pre-shared key in a 0600 file of its own, loaded as the mesh loads --mesh-psk; the directory goes at `remove`. */
function freshPsk(): { credentials: MeshCredentials; remove(): void } {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ernic-fuzz-psk-'));
  const file = path.join(dir, 'mesh.psk');
  fs.writeFileSync(file, randomBytes(32), { mode: 0o600 });
  const r = loadMeshCredentials({ psk: file }, {});
  if (!r.ok || !r.value) throw new Error(`fuzz mesh-tls: the key did not load: ${r.ok ? 'no credentials' : r.error}`);
  return { credentials: r.value, remove: () => fs.rmSync(dir, { recursive: true, force: true }) };
}

registerTarget({
  name: 'mesh',
  describe: 'mesh frames from hostile peers against a manager and a worker with guests and a live RDMA pair',
  run: (o) => fuzzMesh(o, null),
});

registerTarget({
  name: 'mesh-tls',
  describe: 'the same over TLS 1.3 (pre-shared key), from peers that hold the key: authenticated and hostile',
  async run(o) {
    const key = freshPsk();
    try {
      return await fuzzMesh(o, key.credentials);
    } finally {
      key.remove();
    }
  },
});

async function fuzzMesh(o: FuzzRunOptions, credentials: MeshCredentials | null): Promise<string> {
  const next = xorshift(o.seed);
  const watch = new CpuTurnWatch().start();
  const pair = await meshGuests(IP_A, IP_B, 64, credentials);
  const { manager, worker, a, b } = pair;
  const counts = { peers: 0, frames: 0, registered: 0, rdmaRequests: 0, stalls: 0, checks: 0 };
  const trail: string[] = [];
  const note = (s: string): void => {
    trail.push(s);
    if (trail.length > 12) trail.shift();
  };
  let escaped: unknown = null;
  const onEscape = (e: unknown): void => {
    escaped = e;
  };
  process.on('uncaughtException', onEscape);
  try {
    const acq = await a.createCq(40);
    const bcq = await b.createCq(40);
    const A = await a.createMr({ key: 0x501, pages: 4, flags: ALL });
    const B = await b.createMr({ key: 0x702, pages: 4, flags: ALL });
    const qa = await a.createQp(20, QpT.RC, { sqCq: acq, rqCq: acq });
    const qb = await b.createQp(30, QpT.RC, { sqCq: bcq, rqCq: bcq });
    await a.connect(qa, qb.id, { tpl: { sip: v4(IP_A), dip: v4(IP_B) } });
    await b.connect(qb, qa.id, { tpl: { sip: v4(IP_B), dip: v4(IP_A) } });
    const ports = [manager.listenPort, worker.listenPort];
    const t0 = Date.now();
    let shown = t0;
    let round = 0;
    while (Date.now() - t0 < o.ms) {
      round++;
      // A handful of hostile peers this round.
      const peers: RawPeer[] = [];
      for (let p = 0; p < 4; p++) {
        const port = ports[next() % 2]!;
        const peer = await RawPeer.connect(port, undefined, undefined, credentials ?? undefined);
        peers.push(peer);
        counts.peers++;
        let src = next() % 4;
        if (next() % 2 === 0) {
          // A real registration first, so what follows is judged past the framing.
          peer.send(
            MsgType.REGISTER_NODE,
            encodeRegisterNode({
              host: '127.0.0.1',
              port: 1 + (next() % 60000),
              requestedId: AUTO_NODE_ID,
              instance: I,
            }),
          );
          counts.registered++;
          src = 2 + (next() % 8);
        }
        for (let k = 0; k < 1 + (next() % 12); k++) {
          const kind = next() % 8;
          let frame: Buffer;
          if (kind < 4) {
            // An RDMA request or response naming whatever it likes.
            const op = 1 + (next() % 10);
            const len = [0, 1, 8, 64, 4096, 65536, 0xffffffff][next() % 7]!;
            const hdr = encodeIonicWireHeader({
              op,
              atomicCs: 0,
              srcQpId: next() % 64,
              dstQpId: [qa.id, qb.id, next() % 64][next() % 3]!,
              reqId: next(),
              rkey: [A.key, B.key, next()][next() % 3]!,
              length: len,
              immBe: next(),
              status: next() % 4,
            });
            const body = Buffer.concat([
              hdr,
              Buffer.alloc(op === IonicWireOp.WRITE || op === IonicWireOp.SEND ? Math.min(len, 4096) : 0, 0xee),
            ]);
            frame = Buffer.concat([
              encodeFrameHeader({ type: MsgType.IONIC, length: body.length, seq: k, src, dst: next() % 3 }),
              mutate(body, next),
            ]);
            counts.rdmaRequests++;
          } else {
            const samples = [
              () => encodeRegisterNode({ host: 'x', port: 1, requestedId: next() % 100, instance: I }),
              () => encodeRegisterResp({ nodeId: next() % 70, numNodes: next() % 70, result: 0, managerInstance: I }),
              () =>
                encodeHandshake({
                  nodeId: next() % 70,
                  result: 0,
                  incarnation: I,
                  peerIncarnation: I,
                  linkKey: Buffer.alloc(16, next() & 0xff),
                }),
              () =>
                encodeTopology([
                  {
                    id: next() % 70,
                    host: '10.0.0.9',
                    port: 2,
                    alive: true,
                    incarnation: I,
                    linkKey: Buffer.alloc(16),
                  },
                ]),
              () => encodeNodeGids([{ nodeId: next() % 70, gids: [Buffer.alloc(16, next() & 0xff)] }]),
            ];
            const types = [
              MsgType.REGISTER_NODE,
              MsgType.REGISTER_RESP,
              MsgType.HANDSHAKE,
              MsgType.MESH_TOPOLOGY,
              MsgType.NODE_GIDS,
              MsgType.HEARTBEAT,
              1 + (next() % 30),
            ];
            const body = mutate(samples[next() % samples.length]!(), next);
            frame = Buffer.concat([
              encodeFrameHeader({
                type: types[next() % types.length]!,
                length: body.length,
                seq: k,
                src,
                dst: next() % 3,
              }),
              body,
            ]);
          }
          if (next() % 10 === 0) frame = mutate(frame, next);
          if (next() % 16 === 0) {
            // A header promising a large body, then only part of it: the peer stalls.
            frame = Buffer.concat([
              encodeFrameHeader({ type: MsgType.IONIC, length: 1 << (10 + (next() % 14)), seq: k, src, dst: 0 }),
              Buffer.alloc(next() % 512),
            ]);
            counts.stalls++;
          }
          peer.write(frame);
          counts.frames++;
          note(`round ${round} peer ${p} frame ${k} (${frame.length} B)`);
        }
      }
      await new Promise((r) => setTimeout(r, 2));
      for (const peer of peers) peer.socket.destroy();
      if (escaped)
        throw new FuzzFinding(
          `an exception escaped: ${(escaped as Error).stack ?? String(escaped)}`,
          o.seed,
          round,
          trail,
        );
      // Wall time alone also counts time this thread waited for a CPU on a busy machine: its own CPU time must confirm it.
      if (o.longestTurnMs() > o.turnLimitMs && watch.maxCpuMs > o.turnLimitMs) {
        throw new FuzzFinding(
          `a loop turn of ${o.longestTurnMs().toFixed(1)} ms (${watch.maxCpuMs.toFixed(1)} ms of this thread's CPU)`,
          o.seed,
          round,
          trail,
        );
      }
      // Every 20 rounds: the real pair still moves data.
      if (round % 20 === 0) {
        const data = Buffer.alloc(3000);
        for (let i = 0; i < data.length; i++) data[i] = (i * 7 + round) & 0xff;
        A.write(0, data);
        a.postSend(qa, {
          op: WOp.RDMA_WRITE,
          id: round,
          sges: [A.sge(0, data.length)],
          remote: { va: B.va + 100, rkey: B.key },
        });
        const c = await cqesOf(a, acq, 1).catch((e: unknown) => {
          throw new FuzzFinding(`the real WRITE did not complete: ${String(e)}`, o.seed, round, trail);
        });
        if (c[0]!.error || !B.read(100, data.length).equals(data))
          throw new FuzzFinding(
            `the real WRITE failed (error ${c[0]!.error}, status ${c[0]!.statusLength})`,
            o.seed,
            round,
            trail,
          );
        counts.checks++;
      }
      if (Date.now() - shown >= 1000) {
        shown = Date.now();
        o.progress(
          `${round} rounds, ${counts.peers} peers, ${counts.frames} frames (${counts.rdmaRequests} RDMA, ${counts.stalls} stalls, ${counts.registered} registered first), ${counts.checks} real WRITEs checked`,
        );
      }
    }
    return `${credentials ? 'over TLS, peers holding the key: ' : ''}${round} rounds, ${counts.peers} peers, ${counts.frames} frames (${counts.rdmaRequests} RDMA, ${counts.stalls} stalls, ${counts.registered} registered first), ${counts.checks} real WRITEs checked; longest turn ${watch.maxCpuMs.toFixed(1)} ms of CPU`;
  } finally {
    process.off('uncaughtException', onEscape);
    watch.stop();
    await pair.close();
  }
}
