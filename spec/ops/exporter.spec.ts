// ernic-exporter (lib/ops/exporter.ts, bin/ernic-exporter.ts) on the
// fixture run directory fixtures/ernic-run: an ernicctl-style instances.json
// (a manager with an attached VM, a worker that died, a worker with no stats
// file yet), stats files in our layout and in the C rocm-ernic's, a stats file
// with no manifest entry, and files that must be ignored. Process liveness
// comes from a fake probe so the fixture's pids mean what the test says.

import { expect } from 'chai';
import { spawn, spawnSync } from 'child_process';
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import { IonicDevice } from '../../lib/ionic/device';
import { connectionStateOf, ErnicExporter, ProcessProbe, readRunDir } from '../../lib/ops/exporter';
import { CONNECTION_STATES } from '../../lib/ops/metric-families';
import { parseStatsFile } from '../../lib/ops/stats-format';
import { StatsFileWriter } from '../../lib/ops/stats-file';
import { collectStats } from '../../lib/ops/stats-source';
import { DEVICE_MAC, testProfile } from '../support/ionic/rig';
import { needPromtool, promtoolCheck, sample, samples } from './helpers';

const ROOT = path.join(__dirname, '..', '..', '..');
const RUN = path.join(ROOT, 'fixtures', 'ernic-run');
const BIN = path.join(ROOT, 'dist', 'bin', 'ernic-exporter.js');

/** 1001 (instance 0), 2001 (its VM) and 1003 (instance 2) run; 1002 is gone. */
const probe: ProcessProbe = {
  alive: (pid) => pid === 1001 || pid === 2001 || pid === 1003,
  uptime: (pid) => (({ 1001: 120, 2001: 60, 1003: 5 }) as Record<number, number>)[pid] ?? null,
};

function tempRun(): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ernic-run-'));
  for (const f of fs.readdirSync(RUN)) fs.copyFileSync(path.join(RUN, f), path.join(dir, f));
  return dir;
}

describe('ops: ernic-exporter', () => {
  it("sees the manifest's instances and the stats files without an entry, ignoring other files", async () => {
    const v = await readRunDir(RUN, probe);
    expect(v.manifestError).to.equal(null);
    expect(v.instances.map((i) => [i.id, i.role, i.up, i.stats !== null])).to.deep.equal([
      ['0', 'manager', true, true],
      ['1', 'worker', false, true],
      ['2', 'worker', true, false],
      ['3', 'unknown', true, true],
    ]);
    expect(v.instances[0]!.vm).to.deep.equal({ name: 'vm0', attached: true, uptimeSeconds: 60, gpuPassthrough: true });
    expect(v.instances[3]!.mac).to.equal('72:6f:63:6d:2d:03');
  });

  it("serves the C rocm-ernic's ernic_* metrics from them", async () => {
    const m = await new ErnicExporter(RUN, { probe }).scrape();
    const i0 = { ernic_id: '0', role: 'manager' };
    const i1 = { ernic_id: '1', role: 'worker' };
    expect(sample(m, 'ernic_instances')).to.equal(4);
    expect(sample(m, 'ernic_instance_up', { ...i0, mac: '72:6f:63:6d:2d:00' })).to.equal(1);
    expect(sample(m, 'ernic_instance_up', i1)).to.equal(0);
    expect(sample(m, 'ernic_instance_up', { ernic_id: '3', role: 'unknown' })).to.equal(1);
    expect(sample(m, 'ernic_instance_uptime_seconds', i0)).to.equal(120);
    expect(sample(m, 'ernic_instance_uptime_seconds', i1)).to.equal(undefined);
    expect(sample(m, 'ernic_vms')).to.equal(1);
    expect(sample(m, 'ernic_vm_attached', { ...i0, vm_name: 'vm0' })).to.equal(1);
    expect(sample(m, 'ernic_vm_attached', { ...i1, vm_name: 'vm1' })).to.equal(0);
    expect(sample(m, 'ernic_vm_uptime_seconds', { ...i0, vm_name: 'vm0' })).to.equal(60);
    expect(sample(m, 'ernic_vm_gpu_passthrough', { ...i0, vm_name: 'vm0' })).to.equal(1);
    expect(sample(m, 'ernic_ip_bytes_tx_total', i0)).to.equal(5000);
    expect(sample(m, 'ernic_ip_bytes_rx_total', i0)).to.equal(6000);
    expect(sample(m, 'ernic_ip_bytes_total', i0)).to.equal(11000);
    expect(sample(m, 'ernic_rdma_tx_bytes_total', i0)).to.equal(1000);
    expect(sample(m, 'ernic_rdma_rx_bytes_total', i0)).to.equal(2000);
    expect(sample(m, 'ernic_rdma_read_bytes_total', i0)).to.equal(3000);
    expect(sample(m, 'ernic_rdma_write_bytes_total', i0)).to.equal(4000);
    expect(sample(m, 'ernic_rdma_bytes_total', i0)).to.equal(10000);
    expect(sample(m, 'ernic_resets_total', i0)).to.equal(2);
    expect(sample(m, 'ernic_commands_total', i0)).to.equal(120);
    expect(sample(m, 'ernic_interrupts_total', i0)).to.equal(640);
    expect(sample(m, 'ernic_mmio_reads_total', i0)).to.equal(5000);
    expect(sample(m, 'ernic_mmio_writes_total', i0)).to.equal(3800);
    expect(sample(m, 'ernic_stats_writes_total', i0)).to.equal(41);
    expect(sample(m, 'ernic_connection_up', { ...i0, state: 'connected' })).to.equal(1);
    // The state label takes one of three words; the free text stays in the stats file.
    expect(sample(m, 'ernic_connection_up', { ...i1, state: 'disconnected' })).to.equal(0);
    expect(sample(m, 'ernic_connection_up', { ernic_id: '3', state: 'connected' })).to.equal(1);
    const states = samples(m, 'ernic_connection_up').map((l) => /state="([^"]*)"/.exec(l)![1]);
    expect(states).to.have.length(3);
    for (const st of states) expect(CONNECTION_STATES, st).to.include(st);
    expect(sample(m, 'ernic_rdma_qps', i0), 'qp_count, not the blocks shown').to.equal(3);
    expect(sample(m, 'ernic_rdma_qps', i1), 'the C file: its blocks').to.equal(1);
    expect(sample(m, 'ernic_qp_bytes_sent_total', { ...i0, qp: '10' })).to.equal(1000);
    expect(sample(m, 'ernic_qp_bytes_received_total', { ...i0, qp: '11' })).to.equal(1000);
    expect(sample(m, 'ernic_qp_bytes_rdma_read_total', { ...i0, qp: '10' })).to.equal(3000);
    expect(sample(m, 'ernic_qp_bytes_rdma_write_total', { ...i0, qp: '10' })).to.equal(4000);
    expect(sample(m, 'ernic_qp_wqes_processed_total', { ...i0, qp: '10' })).to.equal(7);
    expect(sample(m, 'ernic_qp_cqes_posted_total', { ...i0, qp: '11' })).to.equal(1);
    expect(sample(m, 'ernic_qp_doorbell_send_total', { ...i1, qp: '0x5a5a' })).to.equal(2);
    expect(sample(m, 'ernic_qp_doorbell_recv_total', { ...i0, qp: '11' })).to.equal(9);
    // Instance 2 has no stats file: its traffic series are absent, not zero.
    expect(samples(m, 'ernic_commands_total').filter((l) => l.includes('ernic_id="2"'))).to.deep.equal([]);
  });

  it('reads the run directory again on every scrape', async () => {
    const dir = tempRun();
    try {
      const ex = new ErnicExporter(dir, { probe });
      expect(sample(await ex.scrape(), 'ernic_commands_total', { ernic_id: '3' })).to.equal(1);
      fs.writeFileSync(
        path.join(dir, '3.stats'),
        fs
          .readFileSync(path.join(dir, '3.stats'), 'utf8')
          .replace('commands                : 1', 'commands                : 9'),
      );
      fs.rmSync(path.join(dir, '1.stats'));
      const m = await ex.scrape();
      expect(sample(m, 'ernic_commands_total', { ernic_id: '3' })).to.equal(9);
      expect(sample(m, 'ernic_commands_total', { ernic_id: '1' })).to.equal(undefined);
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  it('takes a bare array manifest; a broken one is reported once and the stats files still count', async () => {
    const dir = tempRun();
    try {
      fs.writeFileSync(path.join(dir, 'instances.json'), JSON.stringify([{ id: 3, role: 'worker', pid: 1003 }]));
      let v = await readRunDir(dir, probe);
      expect(v.instances.map((i) => [i.id, i.role])).to.deep.equal([
        ['3', 'worker'],
        ['0', 'unknown'],
        ['1', 'unknown'],
      ]);
      fs.writeFileSync(path.join(dir, 'instances.json'), '{"instances": [{"id": "x"}]');
      v = await readRunDir(dir, probe);
      expect(v.manifestError).to.match(/instances\.json: .*JSON/);
      expect(v.instances.map((i) => i.id)).to.deep.equal(['0', '1', '3']);
      const errors: string[] = [];
      const ex = new ErnicExporter(dir, { probe });
      await ex.scrape((e) => errors.push(e));
      await ex.scrape((e) => errors.push(e));
      expect(errors).to.have.length(1);
      fs.rmSync(path.join(dir, 'instances.json'));
      expect((await readRunDir(dir, probe)).manifestError, 'no manifest is not an error').to.equal(null);
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  it('reads what the server writes (the formatter and the parser agree through the exporter)', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ernic-run-'));
    try {
      const d = new IonicDevice({ profile: testProfile(), mac: DEVICE_MAC });
      d.counters.bar0Reads = 77;
      d.counters.bar0Writes = 5;
      d.counters.doorbells = 6;
      const src = {
        device: d,
        socket: '/tmp/n.sock',
        backend: 'loopback',
        mac: '02:00:00:00:00:01',
        connection: { connected: true, state: 'connected' },
      };
      const w = new StatsFileWriter({ path: path.join(dir, '4.stats'), snapshot: (n) => collectStats(src, n) });
      w.writeNow(true);
      w.writeNow(true);
      const m = await new ErnicExporter(dir, { probe }).scrape();
      const l = { ernic_id: '4', role: 'unknown' };
      expect(sample(m, 'ernic_mmio_reads_total', l)).to.equal(77);
      expect(sample(m, 'ernic_mmio_writes_total', l)).to.equal(11);
      expect(sample(m, 'ernic_stats_writes_total', l)).to.equal(2);
      expect(sample(m, 'ernic_connection_up', { ...l, state: 'connected' })).to.equal(1);
      expect(sample(m, 'ernic_instance_up', { ...l, mac: '02:00:00:00:00:01' })).to.equal(1);
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  it('promtool check metrics has no findings (the QP count is ernic_rdma_qps, not ernic_qp_count, whose _count promtool reserves for histograms)', async function () {
    needPromtool(this);
    const m = await new ErnicExporter(RUN, { probe }).scrape();
    expect(samples(m, 'ernic_rdma_qps').length).to.be.greaterThan(0);
    const r = promtoolCheck(m);
    expect(r.output, r.output).to.equal('');
    expect(r.status).to.equal(0);
  });

  it('the connection state label: stopped from the state line or the text a stopping server wrote, nothing for text it does not know', () => {
    const parsed = (instance: string): ReturnType<typeof parseStatsFile> =>
      parseStatsFile(`=== ROCm ERNIC Statistics ===\nInstance:\n${instance}\n`);
    expect(connectionStateOf(parsed('  connection  : connected (FLR)'))).to.equal('connected');
    expect(connectionStateOf(parsed('  connection  : disconnected (no client yet)'))).to.equal('disconnected');
    expect(connectionStateOf(parsed('  connection  : disconnected (server stopped: SIGTERM)'))).to.equal('stopped');
    expect(
      connectionStateOf(parsed('  connection  : disconnected (lost connection)\n  state       : stopped')),
    ).to.equal('stopped');
    expect(connectionStateOf(parsed('  connection  : reconnecting soon'))).to.equal(null);
    expect(connectionStateOf(parsed('  socket      : /x'))).to.equal(null);
  });

  describe('the command line', () => {
    it('--help teaches the run directory, the manifest, the metrics and the Prometheus config', () => {
      const r = spawnSync(process.execPath, [BIN, '--help'], { encoding: 'utf8' });
      expect(r.status).to.equal(0);
      for (const s of [
        '--run-dir',
        '--metrics-port',
        '--metrics-host',
        '--metrics-port, --port',
        '--metrics-host, --host',
        '9840',
        '127.0.0.1',
        '--once',
        'instances.json',
        '<id>.stats',
        'rocm-ernic -S',
        'ernic_rdma_qps',
        'wqes_processed',
        'scrape_configs',
        'grafana-ernic.json',
      ]) {
        expect(r.stdout, s).to.include(s);
      }
      expect(r.stdout).to.not.match(/-p,/);
    });

    it('refuses bad options with one line and status 2, naming the text typed', () => {
      const cases: [string[], RegExp][] = [
        [
          ['--run-dir', RUN, '--metrics-port', '70000'],
          /^ernic-exporter: --metrics-port 70000: expected a TCP port from 0 to 65535$/,
        ],
        [['--run-dir', RUN, '--port', 'abc'], /^ernic-exporter: --metrics-port abc: expected a TCP port/],
        [['--run-dir', RUN, '-p', '9841'], /^ernic-exporter: .*\bp\b/],
        [['--run-dir', RUN, '--metrics-port', '1', '--metrics-port', '2'], /given more than once/],
        [['--run-dir', path.join(RUN, 'instances.json')], /^ernic-exporter: --run-dir .*: not a directory$/],
        [['--bogus'], /^ernic-exporter: /],
      ];
      for (const [args, msg] of cases) {
        const r = spawnSync(process.execPath, [BIN, ...args], { encoding: 'utf8' });
        expect(r.status, `${args.join(' ')}: ${r.stderr}`).to.equal(2);
        expect(r.stderr.trim().split('\n'), r.stderr).to.have.length(1);
        expect(r.stderr.trim()).to.match(msg);
      }
    });

    it('starts without its run directory, serves zero instances, and picks them up once it appears', async () => {
      const parent = fs.mkdtempSync(path.join(os.tmpdir(), 'ernic-late-'));
      const dir = path.join(parent, 'run');
      const child = spawn(process.execPath, [BIN, '--run-dir', dir, '--metrics-port', '0', '-L', 'info'], {
        stdio: ['ignore', 'ignore', 'pipe'],
      });
      let err = '';
      child.stderr.on('data', (d: Buffer) => {
        err += d.toString();
      });
      try {
        let port = 0;
        for (let i = 0; i < 200 && !port; i++) {
          await new Promise((res) => setTimeout(res, 25));
          port = Number(/127\.0\.0\.1:(\d+)\/metrics/.exec(err)?.[1] ?? 0);
        }
        expect(port, err).to.be.greaterThan(0);
        expect(err).to.match(/ info: ernic-exporter: \S+ does not exist yet: serving zero instances/);
        expect(err).to.not.include(' warn: ');
        expect(sample(await (await fetch(`http://127.0.0.1:${port}/metrics`)).text(), 'ernic_instances')).to.equal(0);
        fs.mkdirSync(dir);
        fs.copyFileSync(path.join(RUN, '3.stats'), path.join(dir, '3.stats'));
        const m = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
        expect(sample(m, 'ernic_instances')).to.equal(1);
        expect(sample(m, 'ernic_commands_total', { ernic_id: '3' })).to.equal(1);
        expect(err).to.match(/ info: ernic-exporter: \S+ appeared/);
      } finally {
        const exited = new Promise<number | null>((res) => child.once('exit', (code) => res(code)));
        child.kill('SIGTERM');
        expect(await exited, err).to.equal(0);
        fs.rmSync(parent, { recursive: true, force: true });
      }
      expect(err).to.match(/ info: ernic-exporter: SIGTERM, shutting down/);
      const once = spawnSync(process.execPath, [BIN, '--run-dir', '/nonexistent/ernic', '--once'], {
        encoding: 'utf8',
      });
      expect(once.status, once.stderr).to.equal(0);
      expect(sample(once.stdout, 'ernic_instances')).to.equal(0);
    });

    it('--once prints one scrape', () => {
      const r = spawnSync(process.execPath, [BIN, '--run-dir', RUN, '--once'], { encoding: 'utf8' });
      expect(r.status, r.stderr).to.equal(0);
      expect(sample(r.stdout, 'ernic_instances')).to.equal(4);
      expect(sample(r.stdout, 'ernic_commands_total', { ernic_id: '0' })).to.equal(120);
    });

    it('serves /metrics over HTTP on 127.0.0.1 by default, logs its address at info, and stops on SIGTERM', async () => {
      const child = spawn(process.execPath, [BIN, '--run-dir', RUN, '--metrics-port', '0', '-L', 'info'], {
        stdio: ['ignore', 'ignore', 'pipe'],
      });
      let err = '';
      child.stderr.on('data', (d: Buffer) => {
        err += d.toString();
      });
      let port = 0;
      for (let i = 0; i < 200 && !port; i++) {
        await new Promise((r) => setTimeout(r, 25));
        port = Number(/127\.0\.0\.1:(\d+)\/metrics/.exec(err)?.[1] ?? 0);
      }
      expect(port, err).to.be.greaterThan(0);
      expect(err).to.match(/ info: ernic-exporter: .* at http:\/\/127\.0\.0\.1:\d+\/metrics/);
      const body = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
      expect(sample(body, 'ernic_qp_wqes_processed_total', { ernic_id: '0', qp: '10' })).to.equal(7);
      const exited = new Promise<number | null>((r) => child.once('exit', (code) => r(code)));
      child.kill('SIGTERM');
      expect(await exited).to.equal(0);
    });
  });
});
