// Mutated input: decoders and the frame parser never throw on any bytes, and
// a live manager and worker fed mutated streams on many connections stay up
// and keep serving. Seeded, so a failure repeats.

import { expect } from 'chai';
import {
  decodeFrameHeader, decodeHandshake, decodeIonicWireHeader, decodeNodeGids, decodeRegisterNode, decodeRegisterResp,
  decodeTopology, encodeFrameHeader, encodeHandshake, encodeIonicWireHeader, encodeNodeGids, encodeRegisterNode,
  encodeRegisterResp, encodeTopology,
} from '../../lib/mesh/codec';
import { FrameParser } from '../../lib/mesh/frame-parser';
import { AUTO_NODE_ID } from '../../lib/mesh/limits';
import { Mesh } from '../../lib/mesh/mesh';
import { MsgType } from '../../lib/mesh/messages';
import { joinWorker, MemoryLog, RawPeer, startManager, until } from './helpers';

/** xorshift32: small, seeded, good enough to pick bytes. */
function rng(seed: number): () => number {
  let x = seed >>> 0 || 1;
  return () => {
    x ^= x << 13; x >>>= 0;
    x ^= x >>> 17;
    x ^= x << 5; x >>>= 0;
    return x;
  };
}

const I = '0123456789abcdef';

function samples(): Buffer[] {
  const g = Buffer.alloc(16, 0xfe);
  return [
    encodeRegisterNode({ host: 'node-1', port: 7000, requestedId: AUTO_NODE_ID, instance: I }),
    encodeRegisterResp({ nodeId: 1, numNodes: 2, result: 0, managerInstance: I }),
    encodeHandshake({ nodeId: 1, result: 0, instance: I, peerInstance: I }),
    encodeTopology([{ id: 0, host: '', port: 1, alive: true, instance: I }, { id: 1, host: '10.0.0.1', port: 2, alive: false, instance: I }]),
    encodeNodeGids([{ nodeId: 1, gids: [g, g] }, { nodeId: 2, gids: [] }]),
    encodeIonicWireHeader({ op: 4, atomicCs: 0, srcQpId: 1, dstQpId: 2, reqId: 3, rkey: 4, length: 5, immBe: 6, status: 0 }),
  ];
}

function mutate(b: Buffer, next: () => number): Buffer {
  const out = Buffer.from(b);
  const kind = next() % 4;
  if (kind === 0 && out.length > 0) {
    for (let i = 0, n = 1 + (next() % 4); i < n; i++) out[next() % out.length] = next() & 0xff;
    return out;
  }
  if (kind === 1) return out.subarray(0, next() % (out.length + 1));
  if (kind === 2) return Buffer.concat([out, Buffer.from([next() & 0xff, next() & 0xff])]);
  const r = Buffer.alloc(next() % 300);
  for (let i = 0; i < r.length; i++) r[i] = next() & 0xff;
  return r;
}

describe('mesh: mutated input', function () {
  this.timeout(30000);

  it('decoders return values or errors for any bytes, never throw', () => {
    const next = rng(0x5eed);
    const decoders = [decodeRegisterNode, decodeRegisterResp, decodeHandshake, decodeTopology, decodeNodeGids, decodeIonicWireHeader];
    let accepted = 0;
    for (let i = 0; i < 20_000; i++) {
      const base = samples()[next() % 6]!;
      const bytes = mutate(base, next);
      for (const d of decoders) {
        const r = d(bytes);
        if (r.ok) accepted++;
      }
      if (bytes.length >= 32) decodeFrameHeader(bytes, 0);
    }
    expect(accepted).to.be.greaterThan(0);
  });

  it('the frame parser survives any stream', () => {
    const next = rng(0xf00d);
    for (let i = 0; i < 2000; i++) {
      const body = mutate(samples()[next() % 6]!, next);
      const frame = Buffer.concat([encodeFrameHeader({ type: 1 + (next() % 26), length: body.length, seq: i, src: 0, dst: 0 }), body]);
      const stream = mutate(Buffer.concat([frame, frame]), next);
      const p = new FrameParser({ onFrame: () => next() % 3 !== 0, onError: () => undefined });
      for (let at = 0; at < stream.length;) {
        const n = 1 + (next() % 64);
        p.push(stream.subarray(at, at + n));
        if (p.held) p.resume();
        at += n;
      }
      p.destroy();
    }
  });

  it('a manager and a worker fed mutated streams stay up and keep serving', async () => {
    const next = rng(0xbeef);
    const log = new MemoryLog('mgr');
    const meshes: Mesh[] = [];
    try {
      const mgr = await startManager({ log });
      meshes.push(mgr);
      const w1 = await joinWorker(mgr.listenPort);
      meshes.push(w1);
      for (let i = 0; i < 40; i++) {
        const target = i % 2 === 0 ? mgr.listenPort : w1.listenPort;
        const peer = await RawPeer.connect(target);
        const types = [MsgType.REGISTER_NODE, MsgType.HANDSHAKE, MsgType.NODE_GIDS, MsgType.MESH_TOPOLOGY, MsgType.IONIC, MsgType.HEARTBEAT];
        for (let k = 0; k < 4; k++) {
          const body = mutate(samples()[next() % 6]!, next);
          const frame = Buffer.concat([encodeFrameHeader({ type: types[next() % types.length]!, length: body.length, seq: k, src: next() % 4, dst: next() % 4 }), body]);
          peer.write(next() % 4 === 0 ? mutate(frame, next) : frame);
        }
        await new Promise((r) => setTimeout(r, 2));
        peer.destroy();
      }
      const w2 = await joinWorker(mgr.listenPort);
      meshes.push(w2);
      await until(() => w1.routeTo(w2.nodeId!) === 'direct', 'the real workers still link');
      expect(mgr.topology().filter((n) => n.alive).map((n) => n.id)).to.include.members([0, w1.nodeId!, w2.nodeId!]);
    } finally {
      await Promise.all(meshes.map((m) => m.close()));
    }
  });
});
