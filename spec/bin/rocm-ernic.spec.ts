// The server's command line: help, one-line errors with status 2 for every
// bad option, and a clean shutdown that removes the socket.
import { expect } from 'chai';
import { spawn, spawnSync } from 'child_process';
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import { VfioUserClient } from '../../lib/vfio-user/client';
import { tempSocketPath } from '../support/fds';

const BIN = path.join(__dirname, '..', '..', 'bin', 'rocm-ernic.js');

function run(args: string[], env: Record<string, string> = {}): { status: number | null; stdout: string; stderr: string } {
  const r = spawnSync(process.execPath, [BIN, ...args], { encoding: 'utf8', env: { ...process.env, ...env }, timeout: 20000 });
  return { status: r.status, stdout: r.stdout, stderr: r.stderr };
}

describe('rocm-ernic command line', () => {
  it('--help teaches: options, examples, profiles and the inject grammar', () => {
    const r = run(['--help']);
    expect(r.status).to.equal(0);
    for (const s of ['--socket', '--backend', '--tap', '--mac', '--nic-profile', '--inject', '--log-level', '--log-file', 'Examples:', 'compat', 'dsc-25', 'every:N', 'vfio-user-pci']) {
      expect(r.stdout, s).to.include(s);
    }
  });

  const bad: [string, string[], Record<string, string>, RegExp][] = [
    ['an unknown profile', ['--nic-profile', 'dsc-99'], {}, /unknown NIC profile 'dsc-99'/],
    ['a profile file that does not exist', ['--nic-profile', './nope.ini'], {}, /nope\.ini/],
    ['a bad inject spec', ['--inject', 'tx-drop=every:0'], {}, /--inject 'tx-drop=every:0': N must be at least 1/],
    ['a multicast MAC', ['--mac', '01:02:03:04:05:06'], {}, /--mac 01:02:03:04:05:06/],
    ['a malformed MAC', ['--mac', 'zz'], {}, /--mac zz/],
    ['an unknown backend', ['--backend', 'rdma-magic'], {}, /--backend rdma-magic: unknown backend/],
    ['a bad nvmeof option value', ['--backend', 'nvmeof:size=bogus'], {}, /nvmeof backend: bad size 'bogus'/],
    ['an unknown nvmeof option', ['--backend', 'nvmeof:ip=10.0.0.1,frob=1'], {}, /nvmeof backend: unknown option 'frob'/],
    ['an nvmeof namespace file that cannot be opened', ['--backend', 'nvmeof:file=/proc/nope/ns.img'], {}, /--backend nvmeof:file=\/proc\/nope\/ns\.img: cannot open the namespace/],
    ['a bad log level', ['--log-level', 'chatty'], {}, /chatty/],
    ['a bad ERNIC_LOG_LEVEL', [], { ERNIC_LOG_LEVEL: 'loud' }, /ERNIC_LOG_LEVEL=loud/],
    ['a TAP that does not exist or cannot be opened', ['--tap', 'x'.repeat(20)], {}, /--tap x+: cannot attach/],
    ['an unknown option', ['--frobnicate'], {}, /frobnicate/],
  ];
  for (const [what, args, env, msg] of bad) {
    it(`refuses ${what} with one line and status 2`, () => {
      const r = run(['--socket', tempSocketPath('cli'), ...args], env);
      expect(r.status, r.stderr).to.equal(2);
      expect(r.stderr.trim().split('\n'), r.stderr).to.have.length(1);
      expect(r.stderr).to.match(msg);
    });
  }

  it('serves a client, then SIGTERM shuts down and removes the socket', async () => {
    const sock = tempSocketPath('cli-run');
    const child = spawn(process.execPath, [BIN, '--socket', sock, '-L', 'warn'], { stdio: ['ignore', 'ignore', 'pipe'] });
    let err = '';
    child.stderr.on('data', (d: Buffer) => { err += d.toString(); });
    for (let i = 0; i < 100 && !fs.existsSync(sock); i++) await new Promise((r) => setTimeout(r, 50));
    expect(fs.existsSync(sock), err).to.equal(true);
    const c = await VfioUserClient.connect(sock);
    const cfg = await c.regionRead(7, 0, 4);
    expect(cfg.readUInt32LE(0)).to.equal(0x10021dd8);
    c.close();
    const exited = new Promise<number | null>((r) => child.once('exit', (code) => r(code)));
    child.kill('SIGTERM');
    expect(await exited).to.equal(0);
    expect(fs.existsSync(sock)).to.equal(false);
    expect(err).to.match(/serving .*profile compat/);
  });

  it('--backend nvmeof:file=...: the namespace file is made before QEMU can connect; SIGTERM closes it and exits 0', async () => {
    const sock = tempSocketPath('cli-nvmeof');
    const img = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'ernic-ns-')), 'ns0.img');
    const child = spawn(process.execPath, [BIN, '--socket', sock, '-L', 'warn', '--backend', `nvmeof:size=2M,bs=4096,file=${img},port=4421`], { stdio: ['ignore', 'ignore', 'pipe'] });
    let err = '';
    child.stderr.on('data', (d: Buffer) => { err += d.toString(); });
    for (let i = 0; i < 100 && !fs.existsSync(sock); i++) await new Promise((r) => setTimeout(r, 50));
    expect(fs.existsSync(sock), err).to.equal(true);
    expect(fs.statSync(img).size).to.equal(2 * 1024 * 1024);
    expect(err).to.match(/NVMe-oF target nvmet-test at 192\.168\.200\.1:4421, namespace 1: 2097152 bytes \(4096-byte blocks\)/);
    const exited = new Promise<number | null>((r) => child.once('exit', (code) => r(code)));
    child.kill('SIGTERM');
    expect(await exited).to.equal(0);
    fs.rmSync(path.dirname(img), { recursive: true, force: true });
  });
});
