// The S3 host listener locked (issue: "the S3 host listener serves the token
// path without credentials"), against the real rocm-ernic binary in its own
// process with a guest (the ionic.ko + ionic_rdma model over its vfio-user
// socket) holding an MR that grants remote read and write:
//
// - without credentials, a host client's x-amz-rdma-token is refused (GET
//   and PUT), guest memory untouched, nothing stored; body requests work;
// - with credentials (ERNIC_S3_ACCESS_KEY/SECRET_KEY), a token header added
//   unsigned to a header-signed request or to a presigned URL is refused;
//   one the signature covers moves the bytes;
// - `listen=PORT` binds 127.0.0.1; a non-loopback address without
//   credentials is refused at start with one line saying what to set;
// - the listener takes at most 64 connections at once.

import { expect } from 'chai';
import type { ChildProcess } from 'child_process';
import { randomBytes } from 'crypto';
import * as http from 'http';
import * as net from 'net';
import { spawnSync } from 'child_process';
import * as path from 'path';
import { freePort } from '../../../bench/support/free-port';
import { startServerProcess, stopProcess } from '../../../bench/support/server-process';
import { S3_HOST_MAX_CONNECTIONS } from '../../../lib/targets/s3/endpoint';
import { tempSocketPath } from '../../support/fds';
import { IonicGuest } from '../../support/ionic/guest';
import { RdmaGuest } from '../../support/ionic/rdma-guest';
import { MrF } from '../../support/ionic/rdma-regs';
import { GuestMr, VerbsGuest } from '../../support/ionic/rdma-verbs';
import { presignPath, signHeaders } from '../../support/s3-sign';
import { mrTokenHex } from '../../support/s3-token';

const CREDS = { accessKeyId: 'HOSTKEY1', secretAccessKey: 'host-listener-secret' };
const MR_BYTES = 64 * 1024;
const BIN = path.join(__dirname, '..', '..', '..', 'bin', 'rocm-ernic.js');

interface Reply {
  status: number;
  headers: http.IncomingHttpHeaders;
  body: Buffer;
}

function request(
  port: number,
  method: string,
  target: string,
  headers: Record<string, string> = {},
  body?: Buffer,
): Promise<Reply> {
  return new Promise((resolve, reject) => {
    const req = http.request({ host: '127.0.0.1', port, method, path: target, headers, agent: false }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode!, headers: res.headers, body: Buffer.concat(chunks) }));
    });
    req.on('error', reject);
    req.end(body);
  });
}

interface Served {
  proc: ChildProcess;
  port: number;
  guest: IonicGuest;
  mr: GuestMr;
  log(): string;
  stop(): Promise<void>;
}

async function serve(env: NodeJS.ProcessEnv): Promise<Served> {
  const sock = tempSocketPath('s3host');
  const port = await freePort();
  const server = await startServerProcess({
    sock,
    env: { ...process.env, ...env },
    args: ['-L', 'info', '--backend', `s3:size=16M,maxpart=4M,listen=${port}`],
    ready: [/serving/, /S3 store bucket/],
    timeoutMs: 20_000,
  });
  const guest = await IonicGuest.connect(sock, { ramSize: 64 << 20, timeoutMs: 20_000 });
  try {
    await guest.probe();
    await guest.open(1, { ringLog2: 8 });
    const v = VerbsGuest.attach(guest, await RdmaGuest.boot(guest, { cpus: 4 }), 64);
    const mr = await v.createMr({
      key: (30 << 8) | 5,
      pages: MR_BYTES / 4096,
      flags: MrF.LOCAL_WRITE | MrF.REMOTE_WRITE | MrF.REMOTE_READ,
    });
    return {
      proc: server.proc,
      port,
      guest,
      mr,
      log: server.log,
      stop: async () => {
        guest.dispose();
        await stopProcess(server.proc);
      },
    };
  } catch (e) {
    guest.dispose();
    await stopProcess(server.proc);
    throw e;
  }
}

describe('s3 host listener: the token path is closed to unsigned host clients', function () {
  this.timeout(90_000);

  describe('without credentials', () => {
    let s: Served;
    before(async () => {
      s = await serve({ ERNIC_S3_ACCESS_KEY: undefined, ERNIC_S3_SECRET_KEY: undefined });
    });
    after(async () => {
      await s?.stop();
    });

    it('listen=PORT is bound on 127.0.0.1 only', () => {
      expect(s.log()).to.match(new RegExp(`127\\.0\\.0\\.1:${s.port}`));
    });

    it('GET and PUT by token are refused 403 with x-amz-rdma-reply 403; guest memory and the store untouched; body requests work', async () => {
      const secret = randomBytes(MR_BYTES);
      s.mr.write(0, secret);
      const obj = randomBytes(8192);
      expect((await request(s.port, 'PUT', '/ernic/plain', {}, obj)).status).to.equal(200);
      const get = await request(s.port, 'GET', '/ernic/plain', { 'x-amz-rdma-token': mrTokenHex(s.mr) });
      expect([get.status, get.headers['x-amz-rdma-reply']]).to.deep.equal([403, '403']);
      expect(get.body.toString()).to.contain('AccessDenied');
      const put = await request(s.port, 'PUT', '/ernic/stolen', {
        'x-amz-rdma-token': mrTokenHex(s.mr),
        'content-length': '0',
      });
      expect(put.status).to.equal(403);
      expect((await request(s.port, 'GET', '/ernic/stolen')).status, 'nothing stored from guest memory').to.equal(404);
      expect(s.mr.read(0, MR_BYTES).equals(secret), 'guest memory unchanged').to.equal(true);
      expect((await request(s.port, 'GET', '/ernic/plain')).body.equals(obj)).to.equal(true);
    });

    it(`holds at most ${S3_HOST_MAX_CONNECTIONS} connections at once; a request still works after they go`, async () => {
      const socks: net.Socket[] = [];
      let closedByServer = 0;
      try {
        for (let i = 0; i < S3_HOST_MAX_CONNECTIONS + 20; i++) {
          const c = net.connect(s.port, '127.0.0.1');
          c.on('error', () => undefined);
          c.on('close', () => {
            closedByServer++;
          });
          socks.push(c);
          await new Promise<void>((r) => {
            c.once('connect', () => r());
            c.once('error', () => r());
          });
        }
        const t0 = Date.now();
        while (closedByServer < 20 && Date.now() - t0 < 10_000) await new Promise((r) => setTimeout(r, 50));
        expect(closedByServer, 'connections past the cap closed by the server').to.equal(20);
      } finally {
        for (const c of socks) c.destroy();
      }
      await new Promise((r) => setTimeout(r, 200));
      expect((await request(s.port, 'GET', '/ernic/plain')).status).to.equal(200);
    });
  });

  describe('with credentials (SigV4)', () => {
    let s: Served;
    before(async () => {
      s = await serve({ ERNIC_S3_ACCESS_KEY: CREDS.accessKeyId, ERNIC_S3_SECRET_KEY: CREDS.secretAccessKey });
    });
    after(async () => {
      await s?.stop();
    });

    it('a token header the signature does not cover is refused (header-signed and presigned); a signed one moves the bytes', async () => {
      const host = `127.0.0.1:${s.port}`;
      const obj = randomBytes(8192);
      const putH = await signHeaders({ method: 'PUT', host, path: '/ernic/obj', body: obj }, CREDS);
      expect((await request(s.port, 'PUT', '/ernic/obj', putH, obj)).status).to.equal(200);
      const before = randomBytes(MR_BYTES);
      s.mr.write(0, before);
      const token = mrTokenHex(s.mr);

      // Signed without the token, the token added afterwards.
      const bare = await signHeaders({ method: 'GET', host, path: '/ernic/obj' }, CREDS);
      const added = await request(s.port, 'GET', '/ernic/obj', { ...bare, 'x-amz-rdma-token': token });
      expect([added.status, added.headers['x-amz-rdma-reply']]).to.deep.equal([403, '403']);
      expect(added.body.toString()).to.contain('must be a signed header');
      // A presigned GET (anyone holding the URL) plus an unsigned token.
      const url = await presignPath({ method: 'GET', host, path: '/ernic/obj' }, CREDS);
      expect((await request(s.port, 'GET', url)).body.equals(obj), 'the presigned URL itself works').to.equal(true);
      expect((await request(s.port, 'GET', url, { 'x-amz-rdma-token': token })).status).to.equal(403);
      // A PUT by token with the token unsigned: nothing read out of the guest.
      const putBare = await signHeaders(
        { method: 'PUT', host, path: '/ernic/stolen', headers: { 'content-length': '0' } },
        CREDS,
      );
      expect(
        (await request(s.port, 'PUT', '/ernic/stolen', { ...putBare, 'x-amz-rdma-token': token })).status,
      ).to.equal(403);
      // Unsigned altogether.
      expect((await request(s.port, 'GET', '/ernic/obj', { 'x-amz-rdma-token': token })).status).to.equal(403);
      expect(s.mr.read(0, MR_BYTES).equals(before), 'guest memory unchanged by every refusal').to.equal(true);

      // Signed with the token: the object lands in the MR.
      const signed = await signHeaders(
        { method: 'GET', host, path: '/ernic/obj', headers: { 'x-amz-rdma-token': token } },
        CREDS,
      );
      const ok = await request(s.port, 'GET', '/ernic/obj', signed);
      expect([ok.status, ok.headers['x-amz-rdma-bytes']]).to.deep.equal([200, String(obj.length)]);
      expect(s.mr.read(0, obj.length).equals(obj)).to.equal(true);
      // And presigned with the token among its signed headers.
      s.mr.write(0, Buffer.alloc(obj.length));
      const pre = await presignPath(
        { method: 'GET', host, path: '/ernic/obj', headers: { 'x-amz-rdma-token': token } },
        CREDS,
      );
      expect((await request(s.port, 'GET', pre, { 'x-amz-rdma-token': token })).status).to.equal(200);
      expect(s.mr.read(0, obj.length).equals(obj)).to.equal(true);
    });
  });

  it('a non-loopback listen= without credentials is refused at start, with one line saying what to set', () => {
    const env = { ...process.env };
    delete env['ERNIC_S3_ACCESS_KEY'];
    delete env['ERNIC_S3_SECRET_KEY'];
    const r = spawnSync(
      process.execPath,
      [BIN, '-s', tempSocketPath('s3refuse'), '--backend', 's3:listen=0.0.0.0:9123'],
      { env, encoding: 'utf8', timeout: 20_000 },
    );
    expect(r.status).to.equal(2);
    expect(r.stderr.trim().split('\n')).to.have.length(1);
    expect(r.stderr).to.match(
      /listen=0\.0\.0\.0:9123 is not loopback and no credentials are set: set ERNIC_S3_ACCESS_KEY and ERNIC_S3_SECRET_KEY/,
    );
  });
});
