// Dialled sockets read where their connection asks (dial.ts): over plain TCP
// and over TLS alike, a large frame's body lands in the place its owner gives
// (no 'data' events, no copy of ours), and bytes that arrive before the
// connection takes the socket (a TLS peer's first frames can come with the
// end of its handshake) are kept for it, up to a bound.

import { expect } from 'chai';
import * as sinon from 'sinon';
import * as net from 'node:net';
import type * as tls from 'node:tls';
import { randomBytes } from 'node:crypto';
import { encodeFrameHeader } from '../../lib/mesh/codec';
import { ConnectionOwner, MeshConnection } from '../../lib/mesh/connection';
import { dial, Resolver } from '../../lib/mesh/dial';
import { FrameHeader, MsgType } from '../../lib/mesh/messages';
import { MeshTls } from '../../lib/mesh/tls';
import { LOCAL, until } from './helpers';
import { creds, makeTestPki, TestPki } from './tls-support';

const BODY = 300 * 1024;
const EARLY_BODY = 200 * 1024;

function ionicFrame(body: Buffer): Buffer {
  return Buffer.concat([encodeFrameHeader({ type: MsgType.IONIC, length: body.length, seq: 1, src: 0, dst: 1 }), body]);
}

/** An owner that places every large body into `target` and records what it saw. */
function recordingOwner(target: Buffer) {
  const seen = { frames: [] as FrameHeader[], placed: [] as number[], closed: '' };
  const owner: ConnectionOwner = {
    onFrame: (_c, h, _b, placed) => {
      seen.frames.push(h);
      seen.placed.push(placed);
      return true;
    },
    place: (_c, _h, head) => {
      head.copy(target, 0);
      return { views: [target.subarray(head.length)], done: () => undefined };
    },
    onProtocolError: () => undefined,
    onClose: (_c, reason) => {
      seen.closed = reason;
    },
    onWritable: () => undefined,
  };
  return { owner, seen };
}

function connectionOn(socket: net.Socket, owner: ConnectionOwner): MeshConnection {
  return new MeshConnection(socket, owner, {
    sendTimeoutMs: 5000,
    kind: 'peer',
    outgoing: true,
    limits: { requestBytes: 1 << 20, connectionBytes: 1 << 20, controlBytes: 1 << 16 },
  });
}

describe('mesh: dialled sockets', function () {
  this.timeout(20000);
  let pki: TestPki;
  const servers: net.Server[] = [];
  const sockets: net.Socket[] = [];

  before(() => {
    pki = makeTestPki();
  });
  after(() => pki.remove());
  afterEach(async () => {
    for (const s of sockets.splice(0)) s.destroy();
    await Promise.all(servers.splice(0).map((s) => new Promise((r) => s.close(r))));
  });

  /** A server (TLS with `secure`) that writes `bytes` to each client as soon as it can. */
  async function serve(bytes: Buffer, secure?: MeshTls): Promise<number> {
    const greet = (s: net.Socket): void => {
      sockets.push(s);
      s.on('error', () => undefined);
      s.write(bytes);
    };
    const server = secure ? secure.createServer(5000) : net.createServer();
    server.on(secure ? 'secureConnection' : 'connection', greet);
    servers.push(server);
    await new Promise<void>((r) => server.listen(0, LOCAL, r));
    return (server.address() as net.AddressInfo).port;
  }

  async function dialled(port: number, secure?: MeshTls): Promise<net.Socket> {
    const resolve: Resolver = Object.assign(async (h: string) => [h], {
      ...(secure ? { open: secure.connect.bind(secure) } : {}),
    });
    const r = await dial(LOCAL, port, resolve, { cancelled: false });
    if (!r.ok) throw new Error(r.error);
    sockets.push(r.socket);
    return r.socket;
  }

  for (const mode of ['plain TCP', 'TLS'] as const) {
    it(`${mode}: keeps what arrives before the connection takes the socket, then places a large body where its owner asks`, async () => {
      const secure = mode === 'TLS' ? new MeshTls(creds({ psk: pki.psk1 })) : undefined;
      // Under the 256 KiB kept for a connection that has not taken its socket yet.
      const body = randomBytes(EARLY_BODY);
      const port = await serve(ionicFrame(body), secure);
      const socket = await dialled(port, secure);
      if (secure) await new Promise((r) => (socket as tls.TLSSocket).once('secureConnect', r));
      // Long enough for the whole frame to be read before anyone takes the socket.
      await new Promise((r) => setTimeout(r, 200));
      const target = Buffer.alloc(EARLY_BODY);
      const { owner, seen } = recordingOwner(target);
      const conn = connectionOn(socket, owner);
      await until(() => seen.frames.length === 1, 'the frame');
      expect(seen.frames[0]!.length).to.equal(EARLY_BODY);
      expect(target.equals(body)).to.equal(true);
      expect(socket.listenerCount('data')).to.equal(0, 'reads go through onread, not data events');
      conn.close('done');
    });
  }

  it('TLS: a large body sent after the connection took the socket is read in place, straight from the decryption', async () => {
    const secure = new MeshTls(creds({ psk: pki.psk1 }));
    const body = randomBytes(BODY);
    const port = await serve(Buffer.alloc(0), secure);
    const socket = await dialled(port, secure);
    await new Promise((r) => (socket as tls.TLSSocket).once('secureConnect', r));
    const target = Buffer.alloc(BODY);
    const { owner, seen } = recordingOwner(target);
    const conn = connectionOn(socket, owner);
    const inPlace = sinon.spy(conn.parser, 'filledInPlace');
    await until(() => sockets.length === 2, 'the accepted socket');
    sockets[1]!.write(ionicFrame(body));
    await until(() => seen.frames.length === 1, 'the frame');
    expect(target.equals(body)).to.equal(true);
    // All but the first reads (the header and the head offered for placement) went by the socket into the target.
    const direct = inPlace.getCalls().reduce((t, c) => t + (c.args[0] as number), 0);
    expect(direct).to.be.greaterThan(BODY - 64 * 1024);
    conn.close('done');
  });

  it('closes a socket whose peer sends over 256 KiB before its connection takes it', async () => {
    const port = await serve(randomBytes(400 * 1024));
    const socket = await dialled(port);
    const closed = new Promise<string>((r) => socket.once('error', (e) => r(e.message)));
    expect(await closed).to.match(/over 256 KiB before its link was open/);
  });
});
