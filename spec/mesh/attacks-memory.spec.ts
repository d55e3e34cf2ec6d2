// Memory a peer can make a server hold, against a real server in its own
// process (rocm-ernic --backend tcp:manager:listen:PORT), measured as the
// growth of its VmRSS (/proc/PID/status):
//
// - a peer that never reads while the server has data for it (frames the
//   manager relays to it from another raw worker, as fast as it takes them):
//   bounded by its 64 MiB send queue, charged with an honest per-frame cost;
// - 63 registered peers, each sending a 16 MiB frame one byte short: the
//   bodies are charged to the process-wide 64 MiB partial-frame budget
//   before anything is buffered, and the rest wait with their sockets
//   paused (the bytes stay in the kernel); each waiting connection keeps at
//   most one read (256 KiB) of what it sent, besides its read buffer;
// - 63 unregistered peers doing the same: refused at the frame header.

import { expect } from 'chai';
import { encodeFrameHeader, encodeIonicWireHeader, encodeRegisterNode, decodeRegisterResp } from '../../lib/mesh/codec';
import { AUTO_NODE_ID } from '../../lib/mesh/limits';
import { IonicWireOp, MsgType } from '../../lib/mesh/messages';
import { startMeshServer, MeshServer } from './fixtures/server';
import { LOCAL, RawPeer } from './helpers';

const MiB = 1024 * 1024;
const FRAME = 16 * MiB;
/** The documented bounds these attacks meet. */
const SEND_QUEUE_MIB = 64;
const PARTIAL_MIB = 64;
/** What a waiting connection may keep: one read buffer and one read of tail (dial.ts reads 256 KiB at a time). */
const PER_WAITING_CONNECTION_MIB = 0.5;
/** Allocator and GC slack on top of a bound. */
const MARGIN_MIB = 40;

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

async function registered(port: number, n: number, from: string): Promise<{ peer: RawPeer; id: number }> {
  const peer = await RawPeer.connect(port, LOCAL, from);
  peer.send(
    MsgType.REGISTER_NODE,
    encodeRegisterNode({
      host: '',
      port: 0,
      requestedId: AUTO_NODE_ID,
      instance: (0xbeef00 + n).toString(16).padStart(16, '0'),
    }),
  );
  const d = decodeRegisterResp((await peer.waitFrame(MsgType.REGISTER_RESP)).body);
  if (!d.ok || d.value.result !== 0) throw new Error(`registration ${n} refused`);
  return { peer, id: d.value.nodeId };
}

/** Largest RSS seen over `ms`, sampled every 250 ms. */
async function peakRss(srv: MeshServer, ms: number): Promise<number> {
  let peak = 0;
  for (let t = 0; t < ms; t += 250) {
    peak = Math.max(peak, await srv.rssMiB());
    await sleep(250);
  }
  return peak;
}

describe('mesh attacks: memory against a server process', function () {
  this.timeout(120_000);
  let srv: MeshServer | undefined;
  const peers: RawPeer[] = [];
  afterEach(async () => {
    for (const p of peers.splice(0)) p.destroy();
    await srv?.stop();
    srv = undefined;
  });

  it('a peer that never reads while the manager relays to it costs at most its send queue', async () => {
    srv = await startMeshServer();
    const src = await registered(srv.port, 1, '127.0.0.2');
    const sink = await registered(srv.port, 2, '127.0.0.3');
    peers.push(src.peer, sink.peer);
    sink.peer.socket.pause();
    const before = await srv.rssMiB();
    // ACKs: small frames in the reply room, as many as the manager takes, for 8 s.
    const ack = encodeIonicWireHeader({
      op: IonicWireOp.ACK,
      atomicCs: 0,
      srcQpId: 1,
      dstQpId: 2,
      reqId: 1,
      rkey: 0,
      length: 0,
      immBe: 0,
      status: 0,
    });
    const one = Buffer.concat([
      encodeFrameHeader({ type: MsgType.IONIC, length: ack.length, seq: 1, src: src.id, dst: sink.id }),
      ack,
    ]);
    const batch = Buffer.concat(new Array<Buffer>(2000).fill(one));
    const t0 = Date.now();
    let sent = 0;
    const pump = (): void => {
      while (Date.now() - t0 < 8000 && !src.peer.closed) {
        sent += 2000;
        if (!src.peer.socket.write(batch)) {
          src.peer.socket.once('drain', pump);
          return;
        }
      }
    };
    pump();
    const peak = await peakRss(srv, 8000);
    console.log(
      `      relay to a peer that never reads: ${sent} frames offered; RSS ${before.toFixed(1)} -> peak ${peak.toFixed(1)} MiB (+${(peak - before).toFixed(1)}; bound ${SEND_QUEUE_MIB} + ${MARGIN_MIB} margin)`,
    );
    expect(peak - before).to.be.at.most(SEND_QUEUE_MIB + MARGIN_MIB);
  });

  it('63 registered peers each holding a 16 MiB frame one byte short cost at most the partial-frame budget', async () => {
    srv = await startMeshServer();
    const before = await srv.rssMiB();
    const body = Buffer.alloc(FRAME - 1 - 60, 0x5a);
    for (let i = 0; i < 63; i++) {
      const p = await registered(srv.port, 100 + i, `127.0.1.${1 + (i % 8)}`);
      peers.push(p.peer);
      const h = encodeIonicWireHeader({
        op: IonicWireOp.SEND,
        atomicCs: 0,
        srcQpId: 1,
        dstQpId: 2,
        reqId: i,
        rkey: 0,
        length: FRAME - 60,
        immBe: 0,
        status: 0,
      });
      p.peer.write(encodeFrameHeader({ type: MsgType.IONIC, length: FRAME, seq: 1, src: p.id, dst: 0 }));
      p.peer.write(h);
      p.peer.write(body);
    }
    const peak = await peakRss(srv, 6000);
    const bound = PARTIAL_MIB + 63 * PER_WAITING_CONNECTION_MIB;
    console.log(
      `      63 partial 16 MiB frames (registered): RSS ${before.toFixed(1)} -> peak ${peak.toFixed(1)} MiB (+${(peak - before).toFixed(1)}; bound ${bound} + ${MARGIN_MIB} margin)`,
    );
    expect(peak - before).to.be.at.most(bound + MARGIN_MIB);
  });

  it('63 unregistered peers sending a 16 MiB frame are refused at its header', async () => {
    srv = await startMeshServer();
    const before = await srv.rssMiB();
    const body = Buffer.alloc(FRAME - 1);
    for (let i = 0; i < 63; i++) {
      const p = await RawPeer.connect(srv.port, LOCAL, `127.0.2.${1 + (i % 8)}`);
      peers.push(p);
      p.write(encodeFrameHeader({ type: MsgType.DATA, length: FRAME, seq: 1, src: 0, dst: 0 }));
      p.write(body);
    }
    const peak = await peakRss(srv, 4000);
    console.log(
      `      63 partial 16 MiB frames (unregistered): RSS ${before.toFixed(1)} -> peak ${peak.toFixed(1)} MiB (+${(peak - before).toFixed(1)})`,
    );
    expect(peak - before).to.be.at.most(63 * PER_WAITING_CONNECTION_MIB + MARGIN_MIB);
    expect(srv.log()).to.match(/before the link is established|data before registration/);
  });
});
