// rocm-ernic in a process of its own, as an operator runs it: with a key, a
// plaintext client that sends REGISTER gets nothing back and never joins;
// without credentials it refuses (status 2, one line saying how to give
// them) to listen on or dial anything but loopback, and listen:PORT binds
// 127.0.0.1; 1,000 idle connections to the mesh port cost it a bounded
// number of descriptors while a vfio-user client still reads config space.

import { expect } from 'chai';
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as net from 'node:net';
import * as path from 'node:path';
import { encodeFrameHeader, encodeRegisterNode } from '../../lib/mesh/codec';
import { AUTO_NODE_ID } from '../../lib/mesh/limits';
import { Mesh } from '../../lib/mesh/mesh';
import { MsgType } from '../../lib/mesh/messages';
import { VfioUserClient } from '../../lib/vfio-user/client';
import { tempSocketPath } from '../support/fds';
import { LOCAL, MemoryLog, waitFor } from './helpers';
import { BIN, creds, freePort, makeTestPki, ServerProcess, TestPki, writeKeyFile } from './tls-support';

/** Listening TCP sockets of a process (its network namespace's /proc/PID/net/tcp), as "a.b.c.d:port". */
function listeningOf(pid: number): string[] {
  const out: string[] = [];
  for (const line of fs.readFileSync(`/proc/${pid}/net/tcp`, 'utf8').split('\n').slice(1)) {
    const f = line.trim().split(/\s+/);
    if (f.length < 4 || f[3] !== '0A') continue;
    const [hexIp, hexPort] = f[1]!.split(':') as [string, string];
    const ip = [3, 2, 1, 0].map((i) => parseInt(hexIp.slice(i * 2, i * 2 + 2), 16)).join('.');
    out.push(`${ip}:${parseInt(hexPort, 16)}`);
  }
  return out;
}

function fdCount(pid: number): number {
  return fs.readdirSync(`/proc/${pid}/fd`).length;
}

function run(args: string[], env: NodeJS.ProcessEnv = {}): { status: number | null; stderr: string } {
  const r = spawnSync(process.execPath, [BIN, '--socket', tempSocketPath('meshcli'), ...args], {
    encoding: 'utf8',
    env: { ...process.env, ...env },
    timeout: 20000,
  });
  return { status: r.status, stderr: r.stderr };
}

describe('rocm-ernic: the mesh over TLS, a server in its own process', function () {
  this.timeout(60000);
  let pki: TestPki;
  const servers: ServerProcess[] = [];
  const meshes: Mesh[] = [];
  const sockets: net.Socket[] = [];

  before(() => {
    pki = makeTestPki();
  });
  after(() => pki?.remove());
  afterEach(async () => {
    for (const s of sockets.splice(0)) s.destroy();
    await Promise.all(meshes.splice(0).map((m) => m.close()));
    await Promise.all(servers.splice(0).map((s) => s.stop()));
  });

  async function serve(
    args: string[],
    ready = /rocm-ernic: serving /,
  ): Promise<{ server: ServerProcess; sock: string }> {
    const sock = tempSocketPath('meshtls');
    const server = new ServerProcess(['--socket', sock, '-L', 'debug', ...args]);
    servers.push(server);
    await server.waitFor(ready);
    return { server, sock };
  }

  it('with a key: a plaintext client sending REGISTER gets no byte back, is closed and never registers', async () => {
    const port = await freePort();
    const { server } = await serve(['--backend', `tcp:manager:listen:${port}`, '--mesh-psk', pki.psk1]);
    const s = net.connect(port, LOCAL);
    sockets.push(s);
    let back = 0;
    s.on('data', (d: Buffer) => {
      back += d.length;
    });
    s.on('error', () => undefined);
    await new Promise<void>((r) => s.once('connect', () => r()));
    const body = encodeRegisterNode({ host: '', port: 0, requestedId: AUTO_NODE_ID, instance: '00000000000000aa' });
    s.write(
      Buffer.concat([
        encodeFrameHeader({ type: MsgType.REGISTER_NODE, length: body.length, seq: 1, src: 0, dst: 0 }),
        body,
      ]),
    );
    await new Promise<void>((r) => s.once('close', () => r()));
    expect(back).to.equal(0);
    await server.waitFor(/warn: mesh: refused 127\.0\.0\.1:\d+: it sent a plaintext mesh frame/);
    // A worker with the key is the first to register: node 1.
    const w = await Mesh.start({
      config: { role: 'worker', manager: { kind: 'ipv4', host: LOCAL, port } },
      credentials: creds({ psk: pki.psk1 }),
      log: new MemoryLog('w'),
    });
    meshes.push(w);
    const [id] = await waitFor<[number]>(w, 'registered');
    expect(id).to.equal(1);
    await server.waitFor(/mesh: node 1 registered from 127\.0\.0\.1/);
    expect(server.output).to.not.match(/node 2 registered/);
  });

  it('listen:PORT binds 127.0.0.1 alone; an explicit address with a key binds that address', async () => {
    const port = await freePort();
    const { server } = await serve(['--backend', `tcp:manager:listen:${port}`]);
    expect(listeningOf(server.proc.pid!)).to.include(`127.0.0.1:${port}`);
    expect(listeningOf(server.proc.pid!)).to.not.include(`0.0.0.0:${port}`);
    expect(server.output).to.match(
      new RegExp(
        `mesh: manager listening on port ${port} at 127\\.0\\.0\\.1 \\(instance [0-9a-f]+; no credentials: plaintext, loopback only\\)`,
      ),
    );
    const port2 = await freePort();
    const { server: s2 } = await serve(['--backend', `tcp:manager:0.0.0.0:${port2}`, '--mesh-psk', pki.psk1]);
    expect(listeningOf(s2.proc.pid!)).to.include(`0.0.0.0:${port2}`);
    expect(s2.output).to.match(/TLS 1\.3, pre-shared key [0-9a-f]{16} \(--mesh-psk /);
  });

  it('without credentials refuses anything but loopback with status 2 and one line saying how to give them', () => {
    const cases: [string[], RegExp][] = [
      [['--backend', 'tcp:manager:0.0.0.0:7000'], /listening on 0\.0\.0\.0 is not/],
      [['--backend', 'tcp:manager:[::]:7000'], /listening on :: is not/],
      [['--backend', 'tcp:worker:10.1.2.3:7000'], /the manager at 10\.1\.2\.3 is not/],
      [['--backend', 'tcp:worker:127.0.0.1:7000', '--mesh-advertise', '192.0.2.7'], /listening on 192\.0\.2\.7 is not/],
    ];
    for (const [args, re] of cases) {
      const r = run(args, { ERNIC_MESH_PSK_FILE: '', CREDENTIALS_DIRECTORY: '' });
      expect(r.status, r.stderr).to.equal(2);
      expect(r.stderr.trim().split('\n'), r.stderr).to.have.length(1);
      expect(r.stderr).to.match(re);
      expect(r.stderr).to.match(
        /^rocm-ernic: --backend \S+: no mesh credentials, so the mesh stays on loopback .*give it a key \(--mesh-psk FILE, ERNIC_MESH_PSK_FILE=FILE or the systemd credential mesh-psk\) or certificates \(--mesh-cert, --mesh-key and --mesh-ca\)/,
      );
    }
  });

  it('refuses unusable credential options with status 2 and one line', () => {
    const open = writeKeyFile(path.join(pki.dir, 'cli-open.psk'), fs.readFileSync(pki.psk1), 0o644);
    const cases: [string[], NodeJS.ProcessEnv, RegExp][] = [
      [['--backend', 'loopback', '--mesh-psk', pki.psk1], {}, /^rocm-ernic: --mesh-psk: only with a mesh backend/],
      [
        ['--backend', 'tcp:manager:listen:7000', '--mesh-psk', open],
        {},
        /--mesh-psk .*cli-open\.psk: open to group or others \(mode 644\); chmod 600/,
      ],
      [
        ['--backend', 'tcp:manager:listen:7000'],
        { ERNIC_MESH_PSK_FILE: path.join(pki.dir, 'missing') },
        /ERNIC_MESH_PSK_FILE .*missing: cannot open: ENOENT/,
      ],
      [
        ['--backend', 'tcp:manager:listen:7000', '--mesh-cert', pki.nodeA.cert],
        {},
        /--mesh-cert, --mesh-key and --mesh-ca go together/,
      ],
      [
        ['--backend', 'tcp:manager:listen:7000', '--mesh-psk', pki.psk1, '--mesh-advertise', '10.0.0.1'],
        {},
        /--mesh-advertise 10\.0\.0\.1: only a worker advertises/,
      ],
    ];
    for (const [args, env, re] of cases) {
      const r = run(args, env);
      expect(r.status, r.stderr).to.equal(2);
      expect(r.stderr.trim().split('\n'), r.stderr).to.have.length(1);
      expect(r.stderr).to.match(re);
    }
  });

  it('1,000 idle connections to the mesh port cost a bounded number of descriptors; the vfio-user socket is still served', async function () {
    this.timeout(120000);
    const port = await freePort();
    const { server, sock } = await serve(['--backend', `tcp:manager:listen:${port}`, '--mesh-psk', pki.psk1]);
    const pid = server.proc.pid!;
    const fds0 = fdCount(pid);
    let settled = 0;
    let connected = 0;
    const openOne = (): Promise<void> =>
      new Promise((resolve) => {
        const s = net.connect(port, LOCAL);
        sockets.push(s);
        s.on('error', () => undefined);
        s.once('connect', () => {
          connected++;
          settled++;
          resolve();
        });
        s.once('close', () => {
          if (s.connecting) settled++;
          resolve();
        });
      });
    // In waves of 100, as fast as the kernel takes them (past the listen backlog the kernel
    // itself holds some back; they reach the server as it drains its queue).
    for (let wave = 0; wave < 10; wave++) await Promise.all(Array.from({ length: 100 }, openOne));
    expect(settled).to.equal(1000);
    expect(connected).to.be.greaterThan(0);
    await server.waitFor(
      /warn: mesh: refused a connection from 127\.0\.0\.1: 32 connections from 127\.0\.0\.1 already waiting to register \(the most from one address\)/,
    );
    // The server holds at most its pending room from one address (32); the rest it closes unread.
    const fds = fdCount(pid);
    expect(fds - fds0, `server fds ${fds0} -> ${fds}`).to.be.at.most(40);
    const c = await VfioUserClient.connect(sock);
    try {
      const id = await c.regionRead(7, 0, 4);
      expect(id.readUInt16LE(0).toString(16)).to.equal('1dd8');
      expect(id.readUInt16LE(2).toString(16)).to.equal('1002');
    } finally {
      c.close();
    }
    expect(fdCount(pid) - fds0).to.be.at.most(40);
  });
});
