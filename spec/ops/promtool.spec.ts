// promtool check metrics on what the programs really serve: a running
// rocm-ernic's /metrics (with a stats file, so the exporter has something of
// its own to read) and ernic-exporter --once over the fixture run directory
// and over that server's run directory. Skipped, saying why, without promtool.

import { expect } from 'chai';
import { spawn, spawnSync } from 'child_process';
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import { tempSocketPath } from '../support/fds';
import { needPromtool, promtoolCheck, samples } from './helpers';

const ROOT = path.join(__dirname, '..', '..', '..');
const SERVER = path.join(ROOT, 'dist', 'bin', 'rocm-ernic.js');
const EXPORTER = path.join(ROOT, 'dist', 'bin', 'ernic-exporter.js');

function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}

describe("ops: promtool check metrics on the server's /metrics and ernic-exporter --once", function () {
  this.timeout(60000);

  it("the exporter over the fixture run directory (every family, the C rocm-ernic's files included)", function () {
    needPromtool(this);
    const r = spawnSync(process.execPath, [EXPORTER, '--run-dir', path.join(ROOT, 'fixtures', 'ernic-run'), '--once'], {
      encoding: 'utf8',
    });
    expect(r.status, r.stderr).to.equal(0);
    expect(samples(r.stdout, 'ernic_rdma_qps').length).to.be.greaterThan(0);
    const c = promtoolCheck(r.stdout);
    expect(c.output, c.output).to.equal('');
    expect(c.status).to.equal(0);
  });

  it("a running server's /metrics, and the exporter reading its stats file", async function () {
    needPromtool(this);
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ernic-promtool-'));
    const sock = tempSocketPath('ops-promtool');
    const child = spawn(
      process.execPath,
      [SERVER, '--socket', sock, '-S', path.join(dir, '0.stats'), '--metrics-port', '0', '-L', 'info'],
      { stdio: ['ignore', 'ignore', 'pipe'] },
    );
    let err = '';
    child.stderr.on('data', (d: Buffer) => {
      err += d.toString();
    });
    try {
      let port = 0;
      for (let i = 0; i < 400 && !port; i++) {
        await sleep(25);
        port = Number(/metrics at http:\/\/127\.0\.0\.1:(\d+)\/metrics/.exec(err)?.[1] ?? 0);
      }
      expect(port, err).to.be.greaterThan(0);
      const m = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
      expect(samples(m, 'rocm_ernic_eth_port_octets_tx_total')).to.have.length(1);
      const c = promtoolCheck(m);
      expect(c.output, c.output).to.equal('');
      expect(c.status).to.equal(0);
      const once = spawnSync(process.execPath, [EXPORTER, '--run-dir', dir, '--once'], { encoding: 'utf8' });
      expect(once.status, once.stderr).to.equal(0);
      expect(samples(once.stdout, 'ernic_commands_total')).to.have.length(1);
      const e = promtoolCheck(once.stdout);
      expect(e.output, e.output).to.equal('');
      expect(e.status).to.equal(0);
    } finally {
      const exited = new Promise<unknown>((r) => child.once('exit', r));
      child.kill('SIGTERM');
      await exited;
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});
