// The listening socket: taking over paths safely, mode, cleanup, one client at a time.
import { expect } from 'chai';
import * as fs from 'fs';
import * as net from 'net';
import * as native from '../../../lib/native';
import { SocketInUseError, VfioUserServer } from '../../../lib/vfio-user/server';
import { openFdCount, settle, tempSocketPath } from '../../support/fds';
import { ScratchDevice } from '../../support/scratch-device';
import {
  CMD,
  FLAG_REPLY,
  QEMU_VERSION_JSON,
  RawPeer,
  regionAccessPayload,
  versionPayload,
  waitDetached,
} from '../raw-peer';
import { msg } from '../../support/bytes';

describe('vfio-user server: the listening socket', () => {
  const servers: VfioUserServer[] = [];
  const paths: string[] = [];
  let fdsBefore: number;

  function path(tag: string): string {
    const p = tempSocketPath(tag);
    paths.push(p);
    return p;
  }

  function server(socketPath: string, mode?: number): VfioUserServer {
    const s = new VfioUserServer(
      mode === undefined
        ? { socketPath, device: new ScratchDevice() }
        : { socketPath, device: new ScratchDevice(), mode },
    );
    servers.push(s);
    return s;
  }

  beforeEach(() => {
    fdsBefore = openFdCount();
  });
  afterEach(async () => {
    for (const s of servers.splice(0)) s.close();
    for (const p of paths.splice(0)) fs.rmSync(p, { force: true });
    await settle();
    expect(openFdCount(), 'no fd leaked').to.equal(fdsBefore);
  });

  it('refuses a path where a live server listens (SocketInUseError) and leaves that server working', async () => {
    const p = path('live');
    const first = server(p);
    await first.listen();
    const second = server(p);
    const err = await second.listen().then(
      () => null,
      (e: unknown) => e,
    );
    expect(err).to.be.instanceOf(SocketInUseError);
    expect((err as SocketInUseError).code).to.equal('ESOCKETINUSE');
    const c = await RawPeer.negotiated(p);
    expect((await c.request(1, CMD.REGION_READ, regionAccessPayload(0, 0, 4))).flags).to.equal(FLAG_REPLY);
    // The second server's liveness probe was a (short) client of the first.
    expect(first.sessionsServed).to.equal(2);
    c.close();
    await waitDetached(first);
  });

  it("refuses a live server's path even while its backlog is full", async () => {
    const p = path('backlog');
    const first = server(p);
    await first.listen();
    // One attached client; the others wait in the backlog (16) until connect() fails with EAGAIN.
    const attached = await RawPeer.negotiated(p);
    const waiting: net.Socket[] = [];
    let refused: string | null = null;
    for (let i = 0; i < 64 && !refused; i++) {
      const s = net.connect(p);
      waiting.push(s);
      refused = await new Promise<string | null>((resolve) => {
        s.once('connect', () => resolve(null));
        s.once('error', (e: NodeJS.ErrnoException) => resolve(e.code ?? 'error'));
      });
    }
    expect(refused, 'the backlog filled up').to.equal('EAGAIN');
    try {
      const err = await server(p)
        .listen()
        .then(
          () => null,
          (e: unknown) => e,
        );
      expect(err).to.be.instanceOf(SocketInUseError);
      expect(fs.lstatSync(p).isSocket(), 'the live socket file is still there').to.equal(true);
    } finally {
      for (const s of waiting) s.destroy();
      attached.close();
      await waitDetached(first);
    }
  });

  it('replaces a stale socket file (no listener behind it)', async () => {
    const p = path('stale');
    const fd = native.listen(p, 1);
    fs.closeSync(fd);
    expect(fs.lstatSync(p).isSocket()).to.equal(true);
    const s = server(p);
    await s.listen();
    const c = await RawPeer.negotiated(p);
    expect(s.sessionsServed).to.equal(1);
    c.close();
    await waitDetached(s);
  });

  it('refuses a regular file at the path and leaves it untouched', async () => {
    const p = path('file');
    fs.writeFileSync(p, 'precious data');
    fs.chmodSync(p, 0o600);
    const err = await server(p)
      .listen()
      .then(
        () => null,
        (e: unknown) => e,
      );
    expect(err).to.be.instanceOf(SocketInUseError);
    expect(fs.readFileSync(p, 'utf8')).to.equal('precious data');
    expect(fs.statSync(p).mode & 0o777).to.equal(0o600);
  });

  it('refuses a directory and a symlink at the path', async () => {
    const dir = path('dir');
    fs.mkdirSync(dir);
    expect(
      await server(dir)
        .listen()
        .then(
          () => null,
          (e: unknown) => e,
        ),
    ).to.be.instanceOf(SocketInUseError);
    expect(fs.statSync(dir).isDirectory()).to.equal(true);
    fs.rmdirSync(dir);
    const target = path('target');
    fs.writeFileSync(target, 'x');
    const link = path('link');
    fs.symlinkSync(target, link);
    expect(
      await server(link)
        .listen()
        .then(
          () => null,
          (e: unknown) => e,
        ),
    ).to.be.instanceOf(SocketInUseError);
    expect(fs.readFileSync(target, 'utf8')).to.equal('x');
  });

  it('sets the socket mode from the options (0o660)', async () => {
    const p = path('mode');
    await server(p, 0o660).listen();
    expect(fs.statSync(p).mode & 0o777).to.equal(0o660);
  });

  it('removes the socket file on close(), and close() is idempotent', async () => {
    const p = path('close');
    const s = server(p);
    await s.listen();
    expect(fs.existsSync(p)).to.equal(true);
    s.close();
    expect(fs.existsSync(p)).to.equal(false);
    s.close();
    expect(() => native.connect(p)).to.throw();
  });

  it('keeps a second client waiting while the first is attached, then serves it', async () => {
    const p = path('queue');
    const s = server(p);
    await s.listen();
    const first = await RawPeer.negotiated(p);
    const second = RawPeer.connect(p);
    second.send(msg(1, CMD.VERSION, 0, versionPayload(0, 0, QEMU_VERSION_JSON)));
    await new Promise((r) => setTimeout(r, 100));
    expect(second.inbox, 'no answer while the first client is attached').to.have.length(0);
    expect(s.sessionsServed).to.equal(1);
    // The first client still works meanwhile.
    expect((await first.request(2, CMD.REGION_READ, regionAccessPayload(0, 0, 4))).flags).to.equal(FLAG_REPLY);
    first.close();
    const v = await second.next();
    expect([v.id, v.command, v.flags]).to.deep.equal([1, CMD.VERSION, FLAG_REPLY]);
    expect(s.sessionsServed).to.equal(2);
    expect((await second.request(3, CMD.REGION_READ, regionAccessPayload(0, 0, 4))).flags).to.equal(FLAG_REPLY);
    second.close();
    await waitDetached(s);
  });

  it('closes the attached client on close()', async () => {
    const p = path('shutdown');
    const s = server(p);
    await s.listen();
    const c = await RawPeer.negotiated(p);
    s.close();
    await c.waitEof();
    c.close();
    expect(s.session).to.equal(null);
  });
});
