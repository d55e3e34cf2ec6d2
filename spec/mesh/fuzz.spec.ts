// Mutated input: decoders and the frame parser never throw on any bytes, and
// a live manager and worker fed mutated streams on many connections stay up
// and keep serving. Seeded, so a failure repeats.

import { expect } from 'chai';
import {
  decodeFrameHeader,
  decodeHandshake,
  decodeIonicWireHeader,
  decodeNodeGids,
  decodeRegisterNode,
  decodeRegisterResp,
  decodeTopology,
  encodeFrameHeader,
  encodeHandshake,
  encodeIonicWireHeader,
  encodeNodeGids,
  encodeRegisterNode,
  encodeRegisterResp,
  encodeTopology,
} from '../../lib/mesh/codec';
import { FrameParser } from '../../lib/mesh/frame-parser';
import { AUTO_NODE_ID } from '../../lib/mesh/limits';
import { Mesh } from '../../lib/mesh/mesh';
import { MsgType } from '../../lib/mesh/messages';
import { joinWorker, MemoryLog, RawPeer, startManager, until } from './helpers';
import { xorshift as rng } from '../support/rng';

const I = '0123456789abcdef';

function samples(): Buffer[] {
  const g = Buffer.alloc(16, 0xfe);
  return [
    encodeRegisterNode({ host: 'node-1', port: 7000, requestedId: AUTO_NODE_ID, instance: I }),
    encodeRegisterResp({ nodeId: 1, numNodes: 2, result: 0, managerInstance: I }),
    encodeHandshake({ nodeId: 1, result: 0, incarnation: I, peerIncarnation: I, linkKey: Buffer.alloc(16, 7) }),
    encodeTopology([
      { id: 0, host: '', port: 1, alive: true, incarnation: I, linkKey: Buffer.alloc(16) },
      { id: 1, host: '10.0.0.1', port: 2, alive: false, incarnation: I, linkKey: Buffer.alloc(16, 9) },
    ]),
    encodeNodeGids([
      { nodeId: 1, gids: [g, g] },
      { nodeId: 2, gids: [] },
    ]),
    encodeIonicWireHeader({
      op: 4,
      atomicCs: 0,
      srcQpId: 1,
      dstQpId: 2,
      reqId: 3,
      rkey: 4,
      length: 5,
      immBe: 6,
      status: 0,
    }),
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
    const decoders = [
      decodeRegisterNode,
      decodeRegisterResp,
      decodeHandshake,
      decodeTopology,
      decodeNodeGids,
      decodeIonicWireHeader,
    ];
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

  // What the parser gives out for a stream, read in chunks of random sizes with
  // random refusals (each refused frame is offered again on resume()).
  interface Parsed {
    frames: { type: number; seq: number; body: string }[];
    error: string | null;
    stoppedAfterError: boolean;
    buffered: number;
  }
  function parse(stream: Buffer, next: (() => number) | null): Parsed {
    const out: Parsed = { frames: [], error: null, stoppedAfterError: true, buffered: 0 };
    const p = new FrameParser({
      onFrame: (h, body) => {
        if (out.error !== null) out.stoppedAfterError = false; // a frame after the error: the parser did not stop
        if (next && next() % 3 === 0) return false;
        out.frames.push({ type: h.type, seq: h.seq, body: body.toString('hex') });
        return true;
      },
      onError: (e) => {
        if (out.error !== null) out.stoppedAfterError = false; // a second error
        out.error = e.code;
      },
    });
    for (let at = 0; at < stream.length;) {
      const n = next ? 1 + (next() % 64) : stream.length;
      p.push(stream.subarray(at, at + n));
      // Refused frames are offered again until taken (the owner resumes when it can).
      for (let guard = 0; p.held && guard < 1000; guard++) p.resume();
      at += n;
    }
    if (out.error !== null && !p.stopped) out.stoppedAfterError = false;
    out.buffered = p.bufferedBytes;
    p.destroy();
    return out;
  }

  const FRAMING_CODES = ['BAD_MAGIC', 'UNKNOWN_TYPE', 'UNSUPPORTED_TYPE', 'FRAME_TOO_LARGE', 'BAD_LENGTH', 'OVERFLOW'];

  it('the frame parser gives any stream the same frames and error whatever the chunking, and stops at the first error', () => {
    const next = rng(0xf00d);
    let withError = 0;
    let withFrames = 0;
    for (let i = 0; i < 2000; i++) {
      const body = mutate(samples()[next() % 6]!, next);
      const frame = Buffer.concat([
        encodeFrameHeader({ type: 1 + (next() % 26), length: body.length, seq: i, src: 0, dst: 0 }),
        body,
      ]);
      const stream = mutate(Buffer.concat([frame, frame]), next);
      const whole = parse(stream, null);
      const chunked = parse(stream, next);
      expect(chunked.frames, `stream ${i}`).to.deep.equal(whole.frames);
      expect(chunked.error, `stream ${i}`).to.equal(whole.error);
      for (const r of [whole, chunked]) {
        expect(r.stoppedAfterError, `stream ${i}: nothing after the first error`).to.equal(true);
        if (r.error !== null) expect(FRAMING_CODES, `stream ${i}`).to.include(r.error);
      }
      if (whole.error !== null) withError++;
      if (whole.frames.length) withFrames++;
    }
    // The mutations reach both outcomes, so the comparison above is not vacuous.
    expect(withError).to.be.greaterThan(200);
    expect(withFrames).to.be.greaterThan(200);
  });

  it('valid frames are all delivered, byte for byte, in any chunking; garbage after them costs only what follows', () => {
    const next = rng(0x5eed);
    for (let i = 0; i < 500; i++) {
      const frames: Buffer[] = [];
      const expected: Parsed['frames'] = [];
      for (let k = 0, n = 1 + (next() % 5); k < n; k++) {
        const t = next() % 6;
        const body = samples()[t]!;
        const type = [
          MsgType.REGISTER_NODE,
          MsgType.REGISTER_RESP,
          MsgType.HANDSHAKE,
          MsgType.MESH_TOPOLOGY,
          MsgType.NODE_GIDS,
          MsgType.IONIC,
        ][t]!;
        frames.push(Buffer.concat([encodeFrameHeader({ type, length: body.length, seq: k, src: 0, dst: 0 }), body]));
        expected.push({ type, seq: k, body: body.toString('hex') });
      }
      const good = parse(Buffer.concat(frames), next);
      expect(good.error, `stream ${i}`).to.equal(null);
      expect(good.frames, `stream ${i}`).to.deep.equal(expected);
      expect(good.buffered, `stream ${i}: nothing left over`).to.equal(0);
      // A bad magic after the valid frames: they still arrive, then one BAD_MAGIC and nothing more.
      const garbage = Buffer.alloc(32, 0xa5);
      const bad = parse(Buffer.concat([...frames, garbage, frames[0]!]), next);
      expect(bad.frames, `stream ${i}`).to.deep.equal(expected);
      expect(bad.error, `stream ${i}`).to.equal('BAD_MAGIC');
      expect(bad.stoppedAfterError).to.equal(true);
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
        const types = [
          MsgType.REGISTER_NODE,
          MsgType.HANDSHAKE,
          MsgType.NODE_GIDS,
          MsgType.MESH_TOPOLOGY,
          MsgType.IONIC,
          MsgType.HEARTBEAT,
        ];
        for (let k = 0; k < 4; k++) {
          const body = mutate(samples()[next() % 6]!, next);
          const frame = Buffer.concat([
            encodeFrameHeader({
              type: types[next() % types.length]!,
              length: body.length,
              seq: k,
              src: next() % 4,
              dst: next() % 4,
            }),
            body,
          ]);
          peer.write(next() % 4 === 0 ? mutate(frame, next) : frame);
        }
        await new Promise((r) => setTimeout(r, 2));
        peer.destroy();
      }
      const w2 = await joinWorker(mgr.listenPort);
      meshes.push(w2);
      await until(() => w1.routeTo(w2.nodeId!) === 'direct', 'the real workers still link');
      expect(
        mgr
          .topology()
          .filter((n) => n.alive)
          .map((n) => n.id),
      ).to.include.members([0, w1.nodeId!, w2.nodeId!]);
    } finally {
      await Promise.all(meshes.map((m) => m.close()));
    }
  });
});
