// VERSION negotiation through a real socket (docs/vfio-user-protocol.md 2.1, 3.3, 4.1, 5).
import { expect } from 'chai';
import * as fs from 'fs';
import * as native from '../../lib/native';
import { parseCapabilities } from '../../protocol/version';
import { msg } from '../support/bytes';
import { openFdCount, settle } from '../support/fds';
import {
  CMD,
  describeMsg,
  EINVAL,
  FLAG_REPLY,
  isErrorReply,
  QEMU_VERSION_JSON,
  RawPeer,
  regionAccessPayload,
  startServer,
  TestServer,
  versionPayload,
  waitDetached,
} from './raw-peer';

/** major, minor and the JSON text (NUL checked and stripped) of a VERSION reply. */
function versionReply(payload: Buffer): { major: number; minor: number; json: string } {
  expect(payload.length).to.be.greaterThan(4);
  expect(payload[payload.length - 1], 'JSON ends with NUL').to.equal(0);
  expect(payload.indexOf(0, 4), 'exactly one NUL, at the end').to.equal(payload.length - 1);
  return {
    major: payload.readUInt16LE(0),
    minor: payload.readUInt16LE(2),
    json: payload.toString('utf8', 4, payload.length - 1),
  };
}

describe('vfio-user server: VERSION negotiation', () => {
  let t: TestServer;
  let peer: RawPeer | null;
  let fdsBefore: number;

  beforeEach(async () => {
    t = await startServer('nego');
    peer = null;
    fdsBefore = openFdCount();
  });
  afterEach(async () => {
    peer?.close();
    await waitDetached(t.server);
    t.server.close();
  });

  /** After a refused negotiation: EOF, nothing leaked, and the next client is served. */
  async function expectClosedAndServerAlive(p: RawPeer): Promise<void> {
    await p.waitEof();
    p.close();
    await waitDetached(t.server);
    await settle();
    expect(openFdCount(), 'fds after the refused client').to.equal(fdsBefore);
    const next = await RawPeer.negotiated(t.path);
    next.close();
  }

  it('answers QEMU (0.0 with its 214-byte request) with major 0, minor 0 and a short valid JSON', async () => {
    peer = RawPeer.connect(t.path);
    const request = msg(7, CMD.VERSION, 0, versionPayload(0, 0, QEMU_VERSION_JSON));
    expect(request.length, 'the QEMU request this test models').to.equal(214);
    peer.send(request);
    const r = await peer.next();
    expect(r.id).to.equal(7);
    expect(r.command).to.equal(CMD.VERSION);
    expect(r.flags).to.equal(FLAG_REPLY);
    expect(r.error).to.equal(0);
    // QEMU's reply buffer is the size of its request (vfio-user-protocol.md 3.2).
    expect(r.size).to.be.lessThan(request.length);
    const v = versionReply(r.payload);
    expect(v.major).to.equal(0);
    expect(v.minor).to.equal(0);
    const caps = parseCapabilities(v.json);
    expect(caps.ok, v.json).to.equal(true);
    if (!caps.ok) return;
    const c = caps.value;
    expect(c.max_msg_fds).to.be.a('number').and.to.be.at.most(16).and.at.least(1);
    expect(c.max_data_xfer_size)
      .to.be.a('number')
      .and.to.be.at.least(4096)
      .and.at.most(64 << 20);
    if (c.max_dma_maps !== undefined) expect(c.max_dma_maps).to.be.at.most(65535);
    if (c.pgsizes !== undefined) expect(c.pgsizes & 0xfff, 'no page size below 4096').to.equal(0);
    // QEMU never gets a twin socket (it does not implement it) nor fds with the reply.
    expect(c.twin_socket).to.equal(undefined);
    expect(peer.receivedFds).to.deep.equal([]);
    expect(t.device.events).to.deep.equal(['attach']);
  });

  it("answers libvfio-user's client (0.2) with minor 2, and 0.7 with minor 2", async () => {
    for (const [minor, expected] of [
      [2, 2],
      [7, 2],
      [1, 1],
    ] as const) {
      const p = RawPeer.connect(t.path);
      const r = await p.request(
        1,
        CMD.VERSION,
        versionPayload(0, minor, '{"capabilities":{"max_msg_fds":32,"max_data_xfer_size":1024}}'),
      );
      expect(r.flags).to.equal(FLAG_REPLY);
      const v = versionReply(r.payload);
      expect(v.major).to.equal(0);
      expect(v.minor, `client minor ${minor}`).to.equal(expected);
      expect(parseCapabilities(v.json).ok).to.equal(true);
      p.close();
      await waitDetached(t.server);
    }
  });

  it('accepts VERSION without JSON and with "{}"', async () => {
    for (const payload of [versionPayload(0, 0), versionPayload(0, 0, '{}')]) {
      const p = RawPeer.connect(t.path);
      const r = await p.request(3, CMD.VERSION, payload);
      expect(r.flags, describeMsg(r)).to.equal(FLAG_REPLY);
      const v = versionReply(r.payload);
      expect(parseCapabilities(v.json).ok).to.equal(true);
      // The session works afterwards.
      const rd = await p.request(4, CMD.REGION_READ, regionAccessPayload(0, 0, 4));
      expect(rd.flags).to.equal(FLAG_REPLY);
      p.close();
      await waitDetached(t.server);
    }
  });

  it('refuses a first message that is not VERSION with EINVAL, then closes', async () => {
    peer = RawPeer.connect(t.path);
    peer.send(msg(9, CMD.REGION_READ, 0, regionAccessPayload(0, 0, 4)));
    const r = await peer.next();
    expect(isErrorReply(r, 9, CMD.REGION_READ, EINVAL), describeMsg(r)).to.equal(true);
    await peer.waitEof();
    expect(t.device.events, 'the device never saw the refused client').to.deep.equal([]);
    await expectClosedAndServerAlive(peer);
  });

  const refused: [string, Buffer][] = [
    ['major 1', versionPayload(1, 0, '{}')],
    ['major 999', versionPayload(999, 0)],
    ['an empty payload', Buffer.alloc(0)],
    ['a 2-byte payload', Buffer.from([0, 0])],
    ['JSON "{"', versionPayload(0, 0, '{')],
    ['JSON "\\""', versionPayload(0, 0, '"')],
    ['JSON without its NUL', versionPayload(0, 0, '{}', false)],
    ['JSON that is not an object', versionPayload(0, 0, '[1,2]')],
    ['capabilities not an object', versionPayload(0, 0, '{"capabilities": 5}')],
    ['max_msg_fds "x"', versionPayload(0, 0, '{"capabilities": {"max_msg_fds": "x"}}')],
    ['max_msg_fds -1', versionPayload(0, 0, '{"capabilities": {"max_msg_fds": -1}}')],
    ['max_msg_fds 1025', versionPayload(0, 0, '{"capabilities": {"max_msg_fds": 1025}}')],
    ['migration not an object', versionPayload(0, 0, '{"capabilities": {"migration": 1}}')],
    ['pgsize a string', versionPayload(0, 0, '{"capabilities": {"migration": {"pgsize": "4k"}}}')],
  ];
  for (const [what, payload] of refused) {
    it(`refuses VERSION with ${what}: EINVAL, then closes`, async () => {
      peer = RawPeer.connect(t.path);
      peer.send(msg(5, CMD.VERSION, 0, payload));
      const r = await peer.next();
      expect(isErrorReply(r, 5, CMD.VERSION, EINVAL), describeMsg(r)).to.equal(true);
      await expectClosedAndServerAlive(peer);
    });
  }

  it('accepts max_msg_fds 0 and 1024 (the inclusive bounds)', async () => {
    for (const n of [0, 1024]) {
      const p = RawPeer.connect(t.path);
      const r = await p.request(1, CMD.VERSION, versionPayload(0, 0, `{"capabilities": {"max_msg_fds": ${n}}}`));
      expect(r.flags, `max_msg_fds ${n}`).to.equal(FLAG_REPLY);
      p.close();
      await waitDetached(t.server);
    }
  });

  it('refuses a second VERSION with EINVAL and stays up', async () => {
    peer = await RawPeer.negotiated(t.path);
    const r = await peer.request(2, CMD.VERSION, versionPayload(0, 0, QEMU_VERSION_JSON));
    expect(isErrorReply(r, 2, CMD.VERSION, EINVAL), describeMsg(r)).to.equal(true);
    const rd = await peer.request(3, CMD.REGION_READ, regionAccessPayload(0, 0, 4));
    expect(rd.flags).to.equal(FLAG_REPLY);
    expect(peer.eof).to.equal(false);
    expect(t.device.events).to.deep.equal(['attach']);
  });

  it('closes an fd that comes with VERSION (EINVAL; the first message must carry no fds)', async () => {
    const efd = native.eventfd(0, true);
    const before = openFdCount();
    peer = RawPeer.connect(t.path);
    peer.send(msg(6, CMD.VERSION, 0, versionPayload(0, 0, QEMU_VERSION_JSON)), [efd]);
    const r = await peer.next();
    expect(isErrorReply(r, 6, CMD.VERSION, EINVAL), describeMsg(r)).to.equal(true);
    await peer.waitEof();
    peer.close();
    peer = null;
    await waitDetached(t.server);
    await settle();
    expect(openFdCount(), 'the server closed its copy of the fd').to.equal(before);
    fs.closeSync(efd);
  });

  it('closes an fd that comes with a second VERSION and stays up', async () => {
    peer = await RawPeer.negotiated(t.path);
    const efd = native.eventfd(0, true);
    const before = openFdCount();
    const r = await peer.request(8, CMD.VERSION, versionPayload(0, 0, '{}'), [efd]);
    expect(isErrorReply(r, 8, CMD.VERSION, EINVAL), describeMsg(r)).to.equal(true);
    expect(openFdCount()).to.equal(before);
    fs.closeSync(efd);
    expect((await peer.request(9, CMD.REGION_READ, regionAccessPayload(0, 0, 4))).flags).to.equal(FLAG_REPLY);
  });

  it('a VERSION split over two writes negotiates normally', async () => {
    peer = RawPeer.connect(t.path);
    const m = msg(11, CMD.VERSION, 0, versionPayload(0, 0, QEMU_VERSION_JSON));
    peer.send(m.subarray(0, 10));
    await settle(2);
    peer.send(m.subarray(10));
    const r = await peer.next();
    expect(r.flags).to.equal(FLAG_REPLY);
    expect(versionReply(r.payload).major).to.equal(0);
    expect(r.id).to.equal(11);
  });
});
