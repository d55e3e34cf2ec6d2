// The mesh over TLS 1.3, in this process: a manager and workers with a
// pre-shared key or with certificates register, link directly and move data;
// a wrong key, a certificate of another CA, a key against certificates and a
// plaintext peer are each refused with one line on each side naming the
// peer's address and the reason, and never register. Also: credentials as
// the CLI loads them (and refuses them), the loopback-only rule without
// credentials, and the admission bounds on inbound connections.

import { expect } from 'chai';
import * as fs from 'node:fs';
import * as net from 'node:net';
import * as path from 'node:path';
import * as tls from 'node:tls';
import { randomBytes } from 'node:crypto';
import { encodeIonicWireHeader, encodeRegisterNode } from '../../lib/mesh/codec';
import { AUTO_NODE_ID } from '../../lib/mesh/limits';
import { Mesh } from '../../lib/mesh/mesh';
import { meshExposure, MeshStartOptions } from '../../lib/mesh/exposure';
import { MeshMessage } from '../../lib/mesh/mesh-message';
import { IonicWireOp, MsgType } from '../../lib/mesh/messages';
import { loadMeshCredentials, MeshCredentials, pskKeyId } from '../../lib/mesh/tls';
import { meshSecurityFromCli } from '../../lib/mesh/index';
import { isLoopbackAddress } from '../../lib/mesh/address';
import { encodeFrameHeader } from '../../lib/mesh/codec';
import { LOCAL, MemoryLog, until, waitFor } from './helpers';
import { creds, makeTestPki, TestPki, writeKeyFile } from './tls-support';

function ionic(reqId: number): Buffer {
  return encodeIonicWireHeader({
    op: IonicWireOp.SEND,
    atomicCs: 0,
    srcQpId: 1,
    dstQpId: 2,
    reqId,
    rkey: 0,
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

function registerFrame(instance: string): Buffer {
  const body = encodeRegisterNode({ host: '', port: 0, requestedId: AUTO_NODE_ID, instance });
  return Buffer.concat([
    encodeFrameHeader({ type: MsgType.REGISTER_NODE, length: body.length, seq: 1, src: 0, dst: 0 }),
    body,
  ]);
}

describe('mesh: TLS 1.3 links', function () {
  this.timeout(30000);
  let pki: TestPki;
  const meshes: Mesh[] = [];
  const sockets: net.Socket[] = [];
  const track = (m: Mesh): Mesh => {
    meshes.push(m);
    return m;
  };

  before(function () {
    this.timeout(60000);
    pki = makeTestPki();
  });
  after(() => pki?.remove());
  afterEach(async () => {
    for (const s of sockets.splice(0)) s.destroy();
    await Promise.all(meshes.splice(0).map((m) => m.close()));
  });

  async function manager(
    credentials: MeshCredentials | null,
    log = new MemoryLog('mgr'),
    extra: Partial<MeshStartOptions> = {},
  ): Promise<Mesh> {
    return track(
      await Mesh.start({ config: { role: 'manager', listen: { host: LOCAL, port: 0 } }, credentials, log, ...extra }),
    );
  }

  async function worker(
    port: number,
    credentials: MeshCredentials | null,
    log = new MemoryLog('w'),
    extra: Partial<MeshStartOptions> = {},
  ): Promise<Mesh> {
    return track(
      await Mesh.start({
        config: { role: 'worker', manager: { kind: 'ipv4', host: LOCAL, port } },
        peerListen: { host: LOCAL },
        credentials,
        log,
        ...extra,
      }),
    );
  }

  /** A manager and two workers with `c`; data from worker 2 to the manager and to worker 1 over a direct link. */
  async function moveData(c: MeshCredentials): Promise<void> {
    const mgr = await manager(c);
    const w1 = await worker(mgr.listenPort, c);
    await waitFor(w1, 'registered');
    const w2 = await worker(mgr.listenPort, c);
    await waitFor(w2, 'registered');
    expect([w1.nodeId, w2.nodeId]).to.deep.equal([1, 2]);
    await until(() => w1.routeTo(2) === 'direct' && w2.routeTo(1) === 'direct', 'a direct link between the workers');
    const atMgr = collect(mgr);
    const atW1 = collect(w1);
    const big = randomBytes(3 << 20);
    expect(w2.send(0, MsgType.IONIC, ionic(1), Buffer.from('to the manager'))).to.equal('queued');
    expect(w2.send(1, MsgType.IONIC, ionic(2), big)).to.equal('queued');
    await until(() => atMgr.length === 1 && atW1.length === 1, 'both messages delivered');
    expect(atMgr[0]!.payload.toString()).to.equal('to the manager');
    expect(atW1[0]!.from).to.equal(2);
    expect(Buffer.compare(atW1[0]!.payload, big)).to.equal(0);
    expect(mgr.secured && w1.secured && w2.secured).to.equal(true);
    expect(mgr.tlsRefusals + w1.tlsRefusals + w2.tlsRefusals).to.equal(0);
  }

  it('with a pre-shared key: workers register, link directly and move data', async () => {
    await moveData(creds({ psk: pki.psk1 }));
  });

  it('with certificates of the mesh CA: workers register, link directly and move data', async () => {
    const mgr = await manager(creds({ cert: pki.nodeA.cert, key: pki.nodeA.key, ca: pki.ca }));
    await mgr.close();
    await moveData(creds({ cert: pki.nodeB.cert, key: pki.nodeB.key, ca: pki.ca }));
  });

  it('refuses a worker with another key: one line on each side with the address and the reason; it never registers', async () => {
    const mlog = new MemoryLog('mgr');
    const wlog = new MemoryLog('w');
    const k1 = creds({ psk: pki.psk1 });
    const k2 = creds({ psk: pki.psk2 });
    const mgr = await manager(k1, mlog);
    const w = await worker(mgr.listenPort, k2, wlog);
    await until(() => mgr.tlsRefusals > 0 && w.tlsRefusals > 0, 'both sides refused');
    const id1 = (k1 as { keyId: string }).keyId;
    const id2 = (k2 as { keyId: string }).keyId;
    expect(
      mlog.has(
        new RegExp(
          `^mesh: refused 127\\.0\\.0\\.1:\\d+: wrong pre-shared key: the peer holds key ${id2}, we hold key ${id1}$`,
        ),
        'warn',
      ),
    ).to.equal(true);
    expect(
      wlog.has(
        new RegExp(`^mesh: TLS with 127\\.0\\.0\\.1:${mgr.listenPort} failed: the peer refused our pre-shared key`),
        'warn',
      ),
    ).to.equal(true);
    expect(w.nodeId).to.equal(undefined);
    expect(mgr.topology().map((n) => n.id)).to.deep.equal([0]);
  });

  it("refuses a node of another CA, each side naming the other's address and the reason", async () => {
    const mlog = new MemoryLog('mgr');
    const slog = new MemoryLog('stranger');
    const mgr = await manager(creds({ cert: pki.nodeA.cert, key: pki.nodeA.key, ca: pki.ca }), mlog);
    // It trusts only its own CA: it refuses our certificate, and we never see its.
    const s = await worker(
      mgr.listenPort,
      creds({ cert: pki.stranger.cert, key: pki.stranger.key, ca: pki.otherCa }),
      slog,
    );
    await until(() => mgr.tlsRefusals > 0 && s.tlsRefusals > 0, 'both sides refused');
    expect(
      slog.has(
        new RegExp(
          `^mesh: TLS with 127\\.0\\.0\\.1:${mgr.listenPort} failed: the peer's certificate is not accepted: not signed by the mesh's CA`,
        ),
        'warn',
      ),
    ).to.equal(true);
    expect(
      mlog.has(
        /^mesh: refused 127\.0\.0\.1:\d+: the peer hung up during the TLS handshake \(it does not accept our credentials\)$/,
        'warn',
      ),
    ).to.equal(true);
    expect(s.nodeId).to.equal(undefined);
    expect(mgr.topology().map((n) => n.id)).to.deep.equal([0]);
  });

  it('refuses a node of another CA that trusts ours: the manager names the certificate, the node sees its link closed unanswered', async () => {
    const mlog = new MemoryLog('mgr');
    const slog = new MemoryLog('stranger');
    const mgr = await manager(creds({ cert: pki.nodeA.cert, key: pki.nodeA.key, ca: pki.ca }), mlog);
    // A CA bundle with ours lets it accept the manager; the manager still refuses its certificate.
    const bundle = path.join(pki.dir, 'both-cas.pem');
    fs.writeFileSync(bundle, Buffer.concat([fs.readFileSync(pki.otherCa), fs.readFileSync(pki.ca)]));
    const s = await worker(mgr.listenPort, creds({ cert: pki.stranger.cert, key: pki.stranger.key, ca: bundle }), slog);
    await until(
      () => mgr.tlsRefusals > 0 && slog.has(/closed our registration link before answering/),
      'both sides said so',
    );
    expect(
      mlog.has(
        /^mesh: refused 127\.0\.0\.1:\d+: the peer's certificate \(CN=stranger\) is not accepted: not signed by the mesh's CA \([A-Z_]+\)$/,
        'warn',
      ),
    ).to.equal(true);
    expect(
      slog.has(
        new RegExp(
          `^mesh: 127\\.0\\.0\\.1:${mgr.listenPort} closed our registration link before answering: it may not accept our credentials`,
        ),
        'warn',
      ),
    ).to.equal(true);
    expect(s.nodeId).to.equal(undefined);
    expect(mgr.topology().map((n) => n.id)).to.deep.equal([0]);
  });

  it('refuses a key against certificates, both ways', async () => {
    const mlog = new MemoryLog('mgr');
    const wlog = new MemoryLog('w');
    const mgr = await manager(creds({ cert: pki.nodeA.cert, key: pki.nodeA.key, ca: pki.ca }), mlog);
    const w = await worker(mgr.listenPort, creds({ psk: pki.psk1 }), wlog);
    await until(() => mgr.tlsRefusals > 0 && w.tlsRefusals > 0, 'both sides refused');
    // The manager answers with its certificate, which a node holding a key does not take.
    expect(
      wlog.has(/^mesh: TLS with 127\.0\.0\.1:\d+ failed: the peer's certificate is not accepted/, 'warn'),
    ).to.equal(true);
    expect(mlog.has(/^mesh: refused 127\.0\.0\.1:\d+: the peer hung up during the TLS handshake/, 'warn')).to.equal(
      true,
    );
    await w.close();

    const m2log = new MemoryLog('mgr2');
    const w2log = new MemoryLog('w2');
    const mgr2 = await manager(creds({ psk: pki.psk1 }), m2log);
    const w2 = await worker(mgr2.listenPort, creds({ cert: pki.nodeB.cert, key: pki.nodeB.key, ca: pki.ca }), w2log);
    await until(() => mgr2.tlsRefusals > 0 && w2.tlsRefusals > 0, 'both sides refused');
    expect(m2log.has(/^mesh: refused 127\.0\.0\.1:\d+: the peer offered no pre-shared key/, 'warn')).to.equal(true);
    expect(w2log.has(/^mesh: TLS with 127\.0\.0\.1:\d+ failed: the peer refused the handshake/, 'warn')).to.equal(true);
    expect(w2.nodeId).to.equal(undefined);
  });

  it("names a stranger's PSK identity in printable text, cut short", async () => {
    const mlog = new MemoryLog('mgr');
    const mgr = await manager(creds({ psk: pki.psk1 }), mlog);
    const c = tls.connect({
      port: mgr.listenPort,
      host: LOCAL,
      minVersion: 'TLSv1.3',
      ciphers: 'TLS_AES_128_GCM_SHA256',
      checkServerIdentity: () => undefined,
      pskCallback: () => ({ psk: randomBytes(32), identity: `evil\nmesh: forged line${'x'.repeat(100)}` }),
    });
    sockets.push(c);
    c.on('error', () => undefined);
    await until(() => mgr.tlsRefusals === 1, 'refused');
    const line = mlog.lines.find((l) => l.message.startsWith('mesh: refused'))!.message;
    expect(line).to.match(
      /^mesh: refused 127\.0\.0\.1:\d+: wrong pre-shared key: the peer holds identity 'evil\?mesh: forged linex+', we hold key [0-9a-f]{16}$/,
    );
    expect(line.length).to.be.lessThan(200);
  });

  it('reads no frame before the handshake: a plaintext REGISTER gets no byte back and registers nothing', async () => {
    const mlog = new MemoryLog('mgr');
    const mgr = await manager(creds({ psk: pki.psk1 }), mlog);
    const s = net.connect(mgr.listenPort, LOCAL);
    sockets.push(s);
    let back = 0;
    s.on('data', (d: Buffer) => {
      back += d.length;
    });
    s.on('error', () => undefined);
    await new Promise<void>((r) => s.once('connect', () => r()));
    s.write(registerFrame('00000000000000aa'));
    await new Promise<void>((r) => s.once('close', () => r()));
    expect(back).to.equal(0);
    expect(
      mlog.has(
        /^mesh: refused 127\.0\.0\.1:\d+: it sent a plaintext mesh frame \(a server without credentials\?\)$/,
        'warn',
      ),
    ).to.equal(true);
    expect(mgr.topology().map((n) => n.id)).to.deep.equal([0]);
    expect(mgr.inboundConnections()).to.deep.equal({ all: 0, pending: 0 });
  });

  it('a TLS client with the key but no registration is closed at the admission deadline; its slot comes back', async () => {
    const mlog = new MemoryLog('mgr');
    const k = creds({ psk: pki.psk1 }) as Extract<MeshCredentials, { kind: 'psk' }>;
    const mgr = await manager(k, mlog, { admission: { timeoutMs: 400 } });
    const c = tls.connect({
      port: mgr.listenPort,
      host: LOCAL,
      minVersion: 'TLSv1.3',
      ciphers: 'TLS_AES_128_GCM_SHA256',
      checkServerIdentity: () => undefined,
      pskCallback: () => ({ psk: k.key, identity: `rocm-ernic-mesh/${k.keyId}` }),
    });
    sockets.push(c);
    c.on('error', () => undefined);
    await new Promise<void>((r) => c.once('secureConnect', () => r()));
    await until(() => mgr.inboundConnections().pending === 1, 'one pending link');
    await new Promise<void>((r) => c.once('close', () => r()));
    expect(mlog.has(/^mesh: closing 127\.0\.0\.1:\d+: not registered within 400 ms of connecting$/, 'warn')).to.equal(
      true,
    );
    await until(() => mgr.inboundConnections().all === 0, 'the slot released');
  });

  it('closes a connection that never starts its handshake at the admission deadline', async () => {
    const mlog = new MemoryLog('mgr');
    const mgr = await manager(creds({ psk: pki.psk1 }), mlog, { admission: { timeoutMs: 300 } });
    const s = net.connect(mgr.listenPort, LOCAL);
    sockets.push(s);
    s.on('error', () => undefined);
    await new Promise<void>((r) => s.once('close', () => r()));
    expect(mlog.has(/^mesh: closing 127\.0\.0\.1:\d+: no TLS handshake within 300 ms of connecting$/, 'warn')).to.equal(
      true,
    );
    await until(
      () => mgr.inboundConnections().all === 0 && mgr.inboundConnections().pending === 0,
      'the slot released',
    );
    expect(mgr.tlsRefusals).to.equal(0);
  });

  it('bounds pending connections per source and in all; past them a socket is closed unread', async () => {
    const mlog = new MemoryLog('mgr');
    const mgr = await manager(null, mlog, { admission: { maxPendingPerSource: 3, maxPending: 5, timeoutMs: 60_000 } });
    const open = (): Promise<net.Socket> =>
      new Promise((resolve) => {
        const s = net.connect(mgr.listenPort, LOCAL, () => resolve(s));
        s.on('error', () => undefined);
        sockets.push(s);
      });
    const held = [await open(), await open(), await open()];
    await until(() => mgr.inboundConnections().pending === 3, 'three pending');
    const fourth = await open();
    await new Promise<void>((r) => fourth.once('close', () => r()));
    expect(
      mlog.has(
        /^mesh: refused a connection from 127\.0\.0\.1: 3 connections from 127\.0\.0\.1 already waiting to register \(the most from one address\)$/,
        'warn',
      ),
    ).to.equal(true);
    expect(held.every((s) => !s.destroyed)).to.equal(true);
    // Another source (127.0.0.2 is loopback too) has room up to the total.
    const other = (): Promise<net.Socket> =>
      new Promise((resolve) => {
        const s = net.connect({ port: mgr.listenPort, host: LOCAL, localAddress: '127.0.0.2' }, () => resolve(s));
        s.on('error', () => undefined);
        sockets.push(s);
      });
    await other();
    await other();
    await until(() => mgr.inboundConnections().pending === 5, 'five pending');
    const sixth = await other();
    await new Promise<void>((r) => sixth.once('close', () => r()));
    expect(
      mlog.has(
        /^mesh: refused a connection from 127\.0\.0\.2: 5 connections already waiting to register \(the most\)$/,
        'warn',
      ),
    ).to.equal(true);
    // A registration frees its slot's pending place.
    held[0]!.write(registerFrame('00000000000000bb'));
    await until(
      () => mgr.inboundConnections().pending === 4 && mgr.inboundConnections().all === 5,
      'registered: no longer pending',
    );
    expect(mgr.admissionRefusals).to.equal(2);
  });
});

describe('mesh: credentials as the CLI loads them', function () {
  this.timeout(60000);
  let pki: TestPki;
  before(() => {
    pki = makeTestPki();
  });
  after(() => pki?.remove());

  const refusal = (files: Parameters<typeof loadMeshCredentials>[0], env: Record<string, string> = {}): string => {
    const r = loadMeshCredentials(files, env);
    return r.ok ? '(accepted)' : r.error;
  };

  it('takes a key from --mesh-psk, ERNIC_MESH_PSK_FILE or $CREDENTIALS_DIRECTORY/mesh-psk, in that order', () => {
    const credDir = fs.mkdtempSync(path.join(pki.dir, 'cred-'));
    writeKeyFile(path.join(credDir, 'mesh-psk'), fs.readFileSync(pki.psk2), 0o444);
    const id1 = pskKeyId(fs.readFileSync(pki.psk1));
    const id2 = pskKeyId(fs.readFileSync(pki.psk2));
    const idOf = (files: Parameters<typeof loadMeshCredentials>[0], env: Record<string, string>): string => {
      const r = loadMeshCredentials(files, env);
      if (!r.ok || !r.value || r.value.kind !== 'psk') throw new Error(r.ok ? 'no key' : r.error);
      return r.value.keyId;
    };
    expect(idOf({ psk: pki.psk1 }, { ERNIC_MESH_PSK_FILE: pki.psk2, CREDENTIALS_DIRECTORY: credDir })).to.equal(id1);
    expect(idOf({}, { ERNIC_MESH_PSK_FILE: pki.psk1, CREDENTIALS_DIRECTORY: credDir })).to.equal(id1);
    expect(idOf({}, { CREDENTIALS_DIRECTORY: credDir })).to.equal(id2);
    expect(loadMeshCredentials({}, { CREDENTIALS_DIRECTORY: pki.dir })).to.deep.equal({ ok: true, value: null });
    expect(loadMeshCredentials({}, {})).to.deep.equal({ ok: true, value: null });
  });

  it('refuses unusable keys and certificates with one line naming the file and what is wrong', () => {
    const short = writeKeyFile(path.join(pki.dir, 'short.psk'), randomBytes(16));
    const open = writeKeyFile(path.join(pki.dir, 'open.psk'), randomBytes(32), 0o644);
    const huge = writeKeyFile(path.join(pki.dir, 'huge.psk'), randomBytes(300));
    const link = path.join(pki.dir, 'link.psk');
    fs.symlinkSync(pki.psk1, link);
    const cases: [Parameters<typeof loadMeshCredentials>[0], RegExp][] = [
      [
        { psk: short },
        /^--mesh-psk .*short\.psk: 16 bytes, a key is at least 32 \(make one: head -c 32 \/dev\/urandom > /,
      ],
      [{ psk: open }, /^--mesh-psk .*open\.psk: open to group or others \(mode 644\); chmod 600 /],
      [{ psk: huge }, /^--mesh-psk .*huge\.psk: 300 bytes, at most 256/],
      [{ psk: link }, /^--mesh-psk .*link\.psk: cannot open: a symbolic link/],
      [{ psk: path.join(pki.dir, 'none.psk') }, /^--mesh-psk .*none\.psk: cannot open: ENOENT$/],
      [{ psk: pki.dir }, /: not a regular file$/],
      [{ cert: pki.nodeA.cert, key: pki.nodeA.key }, /^--mesh-cert, --mesh-key and --mesh-ca go together/],
      [{ psk: pki.psk1, cert: pki.nodeA.cert, key: pki.nodeA.key, ca: pki.ca }, /give a key or certificates, not both/],
      [
        { cert: pki.nodeA.cert, key: pki.nodeB.key, ca: pki.ca },
        /^--mesh-key .*node-b\.key: not the key of --mesh-cert/,
      ],
      [
        { cert: pki.stranger.cert, key: pki.stranger.key, ca: pki.ca },
        /^--mesh-cert .*stranger\.pem: not issued by any certificate in --mesh-ca .* \(peers would refuse it\)$/,
      ],
      [{ cert: pki.psk1, key: pki.nodeA.key, ca: pki.ca }, /^--mesh-cert .*one\.psk: not a PEM certificate/],
      [{ cert: pki.nodeA.cert, key: pki.nodeA.key, ca: pki.psk1 }, /^--mesh-ca .*one\.psk: no PEM certificate in it$/],
    ];
    for (const [files, re] of cases) {
      const e = refusal(files);
      expect(e, JSON.stringify(files)).to.match(re);
      expect(e.includes('\n'), e).to.equal(false);
    }
    fs.chmodSync(pki.nodeA.key, 0o640);
    try {
      expect(refusal({ cert: pki.nodeA.cert, key: pki.nodeA.key, ca: pki.ca })).to.match(
        /^--mesh-key .*node-a\.key: open to group or others \(mode 640\)/,
      );
    } finally {
      fs.chmodSync(pki.nodeA.key, 0o600);
    }
    expect(refusal({ cert: pki.nodeA.cert, key: pki.nodeA.key, ca: pki.ca })).to.equal('(accepted)');
  });
});

describe('mesh: without credentials, loopback only', function () {
  this.timeout(20000);
  const meshes: Mesh[] = [];
  afterEach(async () => {
    await Promise.all(meshes.splice(0).map((m) => m.close()));
  });

  it('knows loopback addresses', () => {
    for (const a of ['127.0.0.1', '127.255.0.9', '::1', '::ffff:127.0.0.1', '0:0:0:0:0:0:0:1'])
      expect(isLoopbackAddress(a), a).to.equal(true);
    for (const a of ['0.0.0.0', '::', '10.0.0.1', '128.0.0.1', '::2', '::ffff:10.0.0.1', 'localhost', 'fe80::1%lo'])
      expect(isLoopbackAddress(a), a).to.equal(false);
  });

  it('refuses to listen on, dial or advertise anything else, with the line saying how to give credentials', async () => {
    const cases: [MeshStartOptions, RegExp][] = [
      [{ config: { role: 'manager', listen: { host: '0.0.0.0', port: 7000 } } }, /and listening on 0\.0\.0\.0 is not/],
      [{ config: { role: 'manager', listen: { host: '::', port: 7000 } } }, /and listening on :: is not/],
      [
        { config: { role: 'worker', manager: { kind: 'ipv4', host: '10.0.0.1', port: 7000 } } },
        /and the manager at 10\.0\.0\.1 is not/,
      ],
      [
        {
          config: { role: 'worker', manager: { kind: 'ipv4', host: '127.0.0.1', port: 7000 } },
          advertiseHost: '192.0.2.7',
        },
        /and listening on 192\.0\.2\.7 is not/,
      ],
      [
        {
          config: { role: 'worker', manager: { kind: 'ipv4', host: '127.0.0.1', port: 7000 } },
          peerListen: { host: '192.0.2.7' },
        },
        /and listening on 192\.0\.2\.7 is not/,
      ],
    ];
    for (const [o, re] of cases) {
      const line = meshExposure(o);
      expect(line, JSON.stringify(o.config)).to.match(re);
      expect(line).to.match(
        /^no mesh credentials, so the mesh stays on loopback \(127\.0\.0\.0\/8, ::1\) .*; give it a key \(--mesh-psk FILE, ERNIC_MESH_PSK_FILE=FILE or the systemd credential mesh-psk\) or certificates \(--mesh-cert, --mesh-key and --mesh-ca\)/,
      );
      let threw = '';
      try {
        meshes.push(await Mesh.start(o));
      } catch (e) {
        threw = (e as Error).message;
      }
      expect(threw).to.equal(line);
    }
    // The CLI's path says the same before anything starts.
    const r = meshSecurityFromCli({ config: { role: 'manager', listen: { host: '0.0.0.0', port: 7000 } } }, {}, {});
    expect(r.ok ? '' : r.error).to.match(/^no mesh credentials.*listening on 0\.0\.0\.0 is not/);
  });

  it("binds 127.0.0.1 for listen:PORT and a worker's peer listener, and every address with credentials", async function () {
    const pki = makeTestPki();
    try {
      const mgr = await Mesh.start({ config: { role: 'manager', listen: { port: 0 } }, log: new MemoryLog('m') });
      meshes.push(mgr);
      expect(mgr.listenAddress).to.equal('127.0.0.1');
      const w = await Mesh.start({
        config: { role: 'worker', manager: { kind: 'ipv4', host: LOCAL, port: mgr.listenPort } },
        log: new MemoryLog('w'),
      });
      meshes.push(w);
      expect(w.listenAddress).to.equal('127.0.0.1');
      const k = creds({ psk: pki.psk1 });
      const w2 = await Mesh.start({
        config: { role: 'worker', manager: { kind: 'ipv4', host: LOCAL, port: mgr.listenPort } },
        credentials: k,
        log: new MemoryLog('w2'),
      });
      meshes.push(w2);
      expect(['::', '0.0.0.0']).to.include(w2.listenAddress);
      const w3 = await Mesh.start({
        config: { role: 'worker', manager: { kind: 'ipv4', host: LOCAL, port: mgr.listenPort } },
        credentials: k,
        advertiseHost: '127.0.0.3',
        log: new MemoryLog('w3'),
      });
      meshes.push(w3);
      expect(w3.listenAddress).to.equal('127.0.0.3');
    } finally {
      pki.remove();
    }
  });

  it('dials a host name only at loopback addresses', async () => {
    const log = new MemoryLog('w');
    const tried: string[] = [];
    const w = await Mesh.start({
      config: { role: 'worker', manager: { kind: 'name', host: 'far.test', port: 7000 } },
      resolve: async (name) => {
        tried.push(name);
        return ['192.0.2.1'];
      },
      log,
    });
    meshes.push(w);
    await until(
      () =>
        log.has(
          /^mesh: not dialling 192\.0\.2\.1:7000: no mesh credentials, so the mesh stays on loopback; give it a key/,
          'warn',
        ),
      'the refusal',
    );
    expect(tried[0]).to.equal('far.test');
    expect(w.nodeId).to.equal(undefined);
  });
});
