// rocm-ernic's -S/--stats-file and --metrics-port/--metrics-host: help, one
// line and status 2 for a bad value, and a running server whose stats file
// follows a client's accesses, whose /metrics answers, and whose last word
// on SIGTERM is written to the file.

import { expect } from 'chai';
import { spawn, spawnSync } from 'child_process';
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import { parseStatsFile } from '../../lib/ops/stats-format';
import { VfioUserClient } from '../../lib/vfio-user/client';
import { tempSocketPath } from '../support/fds';
import { sample } from './helpers';

const BIN = path.join(__dirname, '..', '..', 'bin', 'rocm-ernic.js');

function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}

describe('ops: rocm-ernic -S and --metrics-port', function () {
  this.timeout(30000);
  let dir: string;
  beforeEach(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ernic-cli-'));
  });
  afterEach(() => fs.rmSync(dir, { recursive: true, force: true }));

  it('--help describes them', () => {
    const r = spawnSync(process.execPath, [BIN, '--help'], { encoding: 'utf8' });
    for (const s of ['-S, --stats-file', '--metrics-port', '--metrics-host', '127.0.0.1'])
      expect(r.stdout, s).to.include(s);
  });

  const bad: [string, string[], RegExp][] = [
    [
      'a stats file in a directory that does not exist',
      ['-S', '/nonexistent/dir/0.stats'],
      /--stats-file \/nonexistent\/dir\/0\.stats: cannot write: .*ENOENT/,
    ],
    ['a metrics port out of range', ['--metrics-port', '70000'], /--metrics-port 70000: expected a TCP port/],
    [
      'a metrics host it cannot listen on',
      ['--metrics-port', '0', '--metrics-host', '203.0.113.7'],
      /--metrics-port 0: cannot listen on 203\.0\.113\.7/,
    ],
  ];
  for (const [what, args, msg] of bad) {
    it(`refuses ${what} with one line and status 2`, () => {
      const r = spawnSync(process.execPath, [BIN, '--socket', tempSocketPath('ops-cli'), ...args], {
        encoding: 'utf8',
        timeout: 20000,
      });
      expect(r.status, r.stderr).to.equal(2);
      expect(r.stderr.trim().split('\n'), r.stderr).to.have.length(1);
      expect(r.stderr).to.match(msg);
    });
  }

  it("writes the file at start, follows a client's accesses, serves /metrics, and writes its last state on SIGTERM", async () => {
    const sock = tempSocketPath('ops-cli-run');
    const file = path.join(dir, '0.stats');
    const child = spawn(process.execPath, [BIN, '--socket', sock, '-S', file, '--metrics-port', '0', '-L', 'info'], {
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    let err = '';
    child.stderr.on('data', (d: Buffer) => {
      err += d.toString();
    });
    try {
      for (let i = 0; i < 200 && !fs.existsSync(sock); i++) await sleep(50);
      expect(fs.existsSync(sock), err).to.equal(true);
      const port = Number(/metrics at http:\/\/127\.0\.0\.1:(\d+)\/metrics/.exec(err)?.[1]);
      expect(port, err).to.be.greaterThan(0);
      const read = (): ReturnType<typeof parseStatsFile> => parseStatsFile(fs.readFileSync(file, 'utf8'));
      for (let i = 0; i < 100 && read().instance.connection !== 'disconnected (no client yet)'; i++) await sleep(50);
      expect(read().instance).to.include({
        socket: sock,
        backend: 'loopback',
        connection: 'disconnected (no client yet)',
      });

      const c = await VfioUserClient.connect(sock);
      const before = read().sections['Device Statistics']!.bar0_reads as number;
      expect(before, "the warm-up's accesses are not counted").to.equal(0);
      await c.regionRead(0, 0, 4);
      await c.regionRead(0, 0, 4);
      for (let i = 0; i < 100 && read().sections['Device Statistics']!.bar0_reads === before; i++) await sleep(50);
      expect(read().sections['Device Statistics']!.bar0_reads).to.equal(before + 2);
      expect(read().instance.connection).to.equal('connected');
      const m = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
      expect(sample(m, 'rocm_ernic_connection_up', { state: 'connected' })).to.equal(1);
      expect(sample(m, 'rocm_ernic_bar0_reads_total')).to.equal(before + 2);
      c.close();
    } finally {
      const exited = new Promise<number | null>((r) => child.once('exit', (code) => r(code)));
      child.kill('SIGTERM');
      expect(await exited, err).to.equal(0);
    }
    const last = parseStatsFile(fs.readFileSync(file, 'utf8'));
    expect(last.instance.connection).to.equal('disconnected (server stopped: SIGTERM)');
    expect(fs.readdirSync(dir)).to.deep.equal(['0.stats']);
  });
});
