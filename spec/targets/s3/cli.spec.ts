// `rocm-ernic --backend s3[:...]` through the built binary: every mistake is
// one line on stderr and exit status 2 before the socket exists (bad option
// values, unknown options, credentials half set, a host listener that cannot
// listen, a dir= that cannot be made); and a run with listen=, dir= and SigV4
// credentials, where an SDK client's object survives a SIGTERM and a restart
// on the same directory.

import { GetObjectCommand, PutObjectCommand, S3Client } from '@aws-sdk/client-s3';
import { expect } from 'chai';
import { ChildProcess, spawn, spawnSync } from 'child_process';
import * as fs from 'fs';
import * as net from 'net';
import * as os from 'os';
import * as path from 'path';
import { tempSocketPath } from '../../support/fds';

const BIN = path.join(__dirname, '..', '..', '..', 'bin', 'rocm-ernic.js');
const CREDS = { ERNIC_S3_ACCESS_KEY: 'CLIKEY', ERNIC_S3_SECRET_KEY: 'cli-secret' };

function run(args: string[], env: Record<string, string> = {}): { status: number | null; stderr: string } {
  const r = spawnSync(process.execPath, [BIN, ...args], {
    encoding: 'utf8',
    env: { ...process.env, ...env },
    timeout: 20000,
  });
  return { status: r.status, stderr: r.stderr };
}

async function freePort(): Promise<number> {
  const s = net.createServer();
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  const port = (s.address() as net.AddressInfo).port;
  await new Promise<void>((r) => s.close(() => r()));
  return port;
}

function start(args: string[], env: Record<string, string>): Promise<{ child: ChildProcess; log: () => string }> {
  const child = spawn(process.execPath, [BIN, ...args], {
    stdio: ['ignore', 'ignore', 'pipe'],
    env: { ...process.env, ...env },
  });
  let text = '';
  child.stderr!.on('data', (d: Buffer) => {
    text += d.toString();
  });
  return new Promise((resolve, reject) => {
    const t0 = Date.now();
    const check = (): void => {
      if (child.exitCode !== null) {
        reject(new Error(`exited ${child.exitCode}: ${text}`));
        return;
      }
      if (/serving/.test(text)) {
        resolve({ child, log: () => text });
        return;
      }
      if (Date.now() - t0 > 15000) {
        child.kill('SIGKILL');
        reject(new Error(`did not start: ${text}`));
        return;
      }
      setTimeout(check, 20);
    };
    check();
  });
}

function stop(child: ChildProcess): Promise<number | null> {
  return new Promise((resolve) => {
    child.once('exit', (code) => resolve(code));
    child.kill('SIGTERM');
  });
}

describe('rocm-ernic --backend s3 (the built binary)', function () {
  this.timeout(60000);

  it('refuses every mistake in one line, exit 2, before the socket exists', async () => {
    const busy = net.createServer();
    await new Promise<void>((r) => busy.listen(0, '127.0.0.1', r));
    const busyPort = (busy.address() as net.AddressInfo).port;
    try {
      const cases: [string, string, Record<string, string>, RegExp][] = [
        ['bad size', 's3:size=lots', {}, /s3 backend: bad size 'lots'/],
        ['unknown option', 's3:bucket=ernic,colour=blue', {}, /s3 backend: unknown option 'colour'/],
        ['bad bucket', 's3:bucket=No_Such', {}, /s3 backend: bad bucket 'No_Such'/],
        ['maxpart above size', 's3:size=1M,maxpart=2M', {}, /maxpart 2097152 is larger than size 1048576/],
        ['bad ip', 's3:ip=300.1.1.1', {}, /s3 backend: bad ip '300\.1\.1\.1'/],
        ['bad listen', 's3:listen=nowhere', {}, /s3 backend: bad listen 'nowhere'/],
        [
          'half the credentials',
          's3',
          { ERNIC_S3_SECRET_KEY: 'x' },
          /ERNIC_S3_ACCESS_KEY and ERNIC_S3_SECRET_KEY go together/,
        ],
        [
          'a secret with a space',
          's3',
          { ERNIC_S3_ACCESS_KEY: 'K', ERNIC_S3_SECRET_KEY: 'a b' },
          /ERNIC_S3_SECRET_KEY: expected 1 to 128 printable/,
        ],
        [
          'a listener that cannot listen',
          `s3:listen=127.0.0.1:${busyPort}`,
          {},
          new RegExp(`cannot listen on 127\\.0\\.0\\.1:${busyPort}`),
        ],
        ['a dir= that cannot be made', 's3:dir=/proc/nope/s3', {}, /cannot open the store/],
      ];
      for (const [what, backend, env, re] of cases) {
        const sock = tempSocketPath('cli-s3-bad');
        const r = run(['--socket', sock, '--backend', backend], env);
        expect(r.status, `${what}: ${r.stderr}`).to.equal(2);
        const lines = r.stderr
          .trim()
          .split('\n')
          .filter((l) => !/ warn: /.test(l));
        expect(lines, what).to.have.length(1);
        expect(lines[0], what)
          .to.match(/^rocm-ernic: /)
          .and.to.match(re);
        expect(fs.existsSync(sock), `${what}: socket`).to.equal(false);
      }
    } finally {
      busy.close();
    }
  });

  it('listen=, dir= and credentials: a signed PUT survives SIGTERM and a restart on the same dir; unsigned requests are refused', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ernic-s3-cli-'));
    const port = await freePort();
    const args = ['--backend', `s3:size=8M,maxpart=4M,listen=127.0.0.1:${port},dir=${dir}`, '-L', 'info'];
    const endpoint = `http://127.0.0.1:${port}`;
    const client = new S3Client({
      endpoint,
      region: 'us-east-1',
      forcePathStyle: true,
      maxAttempts: 1,
      credentials: { accessKeyId: CREDS.ERNIC_S3_ACCESS_KEY, secretAccessKey: CREDS.ERNIC_S3_SECRET_KEY },
    });
    try {
      let srv = await start(['--socket', tempSocketPath('cli-s3'), ...args], CREDS);
      expect(srv.log()).to.match(
        /S3 store bucket ernic at http:\/\/192\.168\.200\.1:9000, also http:\/\/127\.0\.0\.1:\d+: 0 objects/,
      );
      expect(srv.log()).to.contain('SigV4 required');
      await client.send(
        new PutObjectCommand({ Bucket: 'ernic', Key: 'kept/one', Body: 'acknowledged before the stop' }),
      );
      const unsigned = await fetch(`${endpoint}/ernic/kept/one`);
      expect(unsigned.status).to.equal(403);
      expect(await stop(srv.child)).to.equal(0);
      srv = await start(['--socket', tempSocketPath('cli-s3'), ...args], CREDS);
      expect(srv.log()).to.match(/: 1 objects/);
      const got = await client.send(new GetObjectCommand({ Bucket: 'ernic', Key: 'kept/one' }));
      expect(await got.Body!.transformToString()).to.equal('acknowledged before the stop');
      expect(await stop(srv.child)).to.equal(0);
    } finally {
      client.destroy();
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});
