// ernicctl end to end, through its command line: three real rocm-ernic
// servers that form a mesh (manager + two workers), their manifest, sockets,
// TAPs in a bridge and mesh registration in their logs, status and stats, a
// refused second start, then stop: processes gone, TAPs, bridge, sockets and
// manifest removed. The TAP part needs root (and skips, saying so, without
// it); the part without TAPs runs as anyone. Whatever happens, the after hooks
// stop what was started and delete the links named here.

import { expect } from 'chai';
import { spawn, spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { Manifest, readManifest } from '../../lib/ops/manifest';
import { skipBecause } from '../support/skip';

const ERNICCTL = path.join(__dirname, '..', '..', 'bin', 'ernicctl.js');
const isRoot = process.getuid?.() === 0;
const hasTun = fs.existsSync('/dev/net/tun');
const hasIp = spawnSync('ip', ['-V']).status === 0;

interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
}

function ernicctl(...args: string[]): Promise<Run> {
  return ernicctlEnv({}, ...args);
}

function ernicctlEnv(extra: Record<string, string>, ...args: string[]): Promise<Run> {
  return new Promise((resolve, reject) => {
    const p = spawn(process.execPath, [ERNICCTL, ...args], {
      stdio: ['ignore', 'pipe', 'pipe'],
      env: { ...process.env, ...extra },
    });
    let stdout = '';
    let stderr = '';
    p.stdout.on('data', (d: Buffer) => {
      stdout += d.toString();
    });
    p.stderr.on('data', (d: Buffer) => {
      stderr += d.toString();
    });
    p.on('error', reject);
    p.on('close', (code) => resolve({ code, stdout, stderr }));
  });
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch {
    return false;
  }
  // A zombie child of ours counts as gone.
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    return !stat.slice(stat.lastIndexOf(')') + 2).startsWith('Z');
  } catch {
    return false;
  }
}

const linkExists = (name: string): boolean => fs.existsSync(`/sys/class/net/${name}`);
const masterOf = (name: string): string | null => {
  try {
    return path.basename(fs.readlinkSync(`/sys/class/net/${name}/master`));
  } catch {
    return null;
  }
};

function manifestOf(dir: string): Manifest {
  const r = readManifest(dir);
  if (!r.ok) throw new Error(r.error);
  if (!r.manifest) throw new Error(`no manifest in ${dir}`);
  return r.manifest;
}

/** Last resort after a failed test: kill what the manifest lists, delete our links. */
function forceCleanUp(dir: string, links: string[]): void {
  const r = readManifest(dir);
  if (r.ok && r.manifest)
    for (const i of r.manifest.instances) {
      try {
        process.kill(i.pid, 'SIGKILL');
      } catch {
        /* gone */
      }
    }
  for (const l of links) if (linkExists(l)) spawnSync('ip', ['link', 'del', l]);
  fs.rmSync(dir, { recursive: true, force: true });
}

/** A mesh port for this run (the pid spreads concurrent runs apart). */
const portFor = (offset: number): number => 20000 + ((process.pid * 7 + offset) % 20000);

describe('ernicctl: three instances forming a mesh, TAPs in a bridge (root)', function () {
  this.timeout(90000);
  const tag = String(process.pid % 100000);
  const bridge = `erb${tag}`;
  const prefix = `erc${tag}x`;
  const taps = [0, 1, 2].map((i) => `${prefix}${i}`);
  let dir = '';
  let started: Manifest | null = null;

  before(function () {
    if (!isRoot || !hasTun || !hasIp) {
      skipBecause(
        this,
        `ernicctl with TAPs needs root, /dev/net/tun and iproute2 (uid ${process.getuid?.()}, tun ${hasTun}, ip ${hasIp})`,
      );
    }
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ernicctl-'));
  });

  after(async function () {
    if (!dir) return;
    await ernicctl('stop', '--run-dir', dir, '--timeout', '3000');
    forceCleanUp(dir, [...taps, bridge]);
  });

  it('starts a manager and two workers; each listens, has its TAP in the bridge and registers with the mesh', async function () {
    const r = await ernicctl(
      'start',
      '3',
      '--run-dir',
      dir,
      '--log-dir',
      dir,
      '--tcp-port',
      String(portFor(1)),
      '--tap-prefix',
      prefix,
      '--bridge',
      bridge,
      '--log-level',
      'info',
      '--socket-mode',
      '660',
    );
    expect(r.code, r.stderr + r.stdout).to.equal(0);
    expect(r.stdout).to.include(`bridge ${bridge} created`);
    started = manifestOf(dir);
    const m = started;
    expect(m.instances.map((i) => [i.id, i.role, i.mesh_node])).to.deep.equal([
      [0, 'manager', 0],
      [1, 'worker', 1],
      [2, 'worker', 2],
    ]);
    expect(m.bridge).to.deep.equal({ name: bridge, created: true });
    for (const i of m.instances) {
      expect(i.socket).to.equal(path.join(dir, `${i.id}.sock`));
      const st = fs.statSync(i.socket);
      expect(st.isSocket(), i.socket).to.equal(true);
      expect((st.mode & 0o777).toString(8)).to.equal('660');
      expect(alive(i.pid)).to.equal(true);
      expect(Number(fs.readFileSync(i.pid_file, 'utf8'))).to.equal(i.pid);
      expect(i.tap).to.equal(taps[i.id]);
      expect(i.tap_created).to.equal(true);
      expect(masterOf(i.tap!)).to.equal(bridge);
      expect(i.mac).to.match(/^02:/);
      expect(i.stats).to.equal(path.join(dir, `${i.id}.stats`));
    }
    expect(m.instances[0]!.backend).to.equal(`tcp:manager:listen:${portFor(1)}`);
    expect(m.instances[2]!.backend).to.equal(`tcp:worker:127.0.0.1:${portFor(1)}`);
    // Registration as the servers logged it.
    const logs = m.instances.map((i) => fs.readFileSync(i.log, 'utf8'));
    expect(logs[0]).to.match(/mesh: node 1 registered/);
    expect(logs[0]).to.match(/mesh: node 2 registered/);
    expect(logs[1]).to.include('rocm-ernic: mesh node 1');
    expect(logs[2]).to.include('rocm-ernic: mesh node 2');
    // And with each other: the second worker links directly to the first.
    expect(logs[1] + logs[2]).to.match(/mesh: direct link to node [12] up/);
  });

  it('status --json reports every instance running with its socket, TAP and mesh node', async function () {
    if (!started) skipBecause(this, 'the instances did not start (see the failure above)');
    const r = await ernicctl('status', '--json', '--run-dir', dir);
    expect(r.code, r.stderr).to.equal(0);
    const s = JSON.parse(r.stdout) as {
      bridge: string;
      instances: {
        id: number;
        running: boolean;
        mesh_node: number;
        tap_up: boolean;
        socket_file: { mode: string };
        clients: number;
      }[];
    };
    expect(s.bridge).to.equal(bridge);
    expect(
      s.instances.map((i) => [i.id, i.running, i.mesh_node, i.tap_up, i.socket_file.mode, i.clients]),
    ).to.deep.equal([
      [0, true, 0, true, '0660', 0],
      [1, true, 1, true, '0660', 0],
      [2, true, 2, true, '0660', 0],
    ]);
    const table = await ernicctl('status', '--run-dir', dir);
    expect(table.stdout).to.include('3 of 3 running');
  });

  it('stats and logs read each instance', async function () {
    if (!started) skipBecause(this, 'the instances did not start (see the failure above)');
    const s = await ernicctl('stats', '1', '--json', '--run-dir', dir);
    expect(s.code, s.stderr).to.equal(0);
    const [one] = JSON.parse(s.stdout) as {
      id: number;
      running: boolean;
      rss_bytes: number;
      tap: Record<string, number>;
    }[];
    expect(one!.id).to.equal(1);
    expect(one!.running).to.equal(true);
    expect(one!.rss_bytes).to.be.greaterThan(1 << 20);
    expect(one!.tap).to.have.property('tx_packets');
    const l = await ernicctl('logs', '2', '-n', '200', '--run-dir', dir);
    expect(l.stdout).to.include('rocm-ernic: mesh node 2');
    const none = await ernicctl('logs', '9', '--run-dir', dir);
    expect(none.code).to.equal(1);
    expect(none.stderr).to.include('no instance 9');
  });

  it('refuses a second start while the instances run', async function () {
    if (!started) skipBecause(this, 'the instances did not start (see the failure above)');
    const r = await ernicctl(
      'start',
      '2',
      '--run-dir',
      dir,
      '--log-dir',
      dir,
      '--tcp-port',
      String(portFor(2)),
      '--tap-prefix',
      prefix,
      '--bridge',
      bridge,
    );
    expect(r.code).to.equal(1);
    expect(r.stderr).to.match(/lists 3 running instance\(s\).*ernicctl stop first/);
    expect(manifestOf(dir).instances.map((i) => i.pid)).to.deep.equal(started!.instances.map((i) => i.pid));
  });

  it('stop ends every server with SIGTERM and removes the TAPs, the bridge, the sockets and the manifest', async function () {
    if (!started) skipBecause(this, 'the instances did not start (see the failure above)');
    const r = await ernicctl('stop', '--run-dir', dir);
    expect(r.code, r.stderr).to.equal(0);
    expect(r.stdout).to.match(/instance 0 \(pid \d+\): stopped/);
    expect(r.stdout).to.not.include('killed');
    for (const i of started!.instances) {
      expect(alive(i.pid), `pid ${i.pid}`).to.equal(false);
      expect(fs.existsSync(i.socket)).to.equal(false);
      expect(fs.existsSync(i.pid_file)).to.equal(false);
      expect(linkExists(i.tap!), i.tap!).to.equal(false);
      // The server said why it went.
      expect(fs.readFileSync(i.log, 'utf8')).to.include('SIGTERM, shutting down');
    }
    expect(linkExists(bridge)).to.equal(false);
    expect(fs.existsSync(path.join(dir, 'instances.json'))).to.equal(false);
    const again = await ernicctl('stop', '--run-dir', dir);
    expect(again.code).to.equal(0);
    expect(again.stdout).to.include('nothing to stop');
  });
});

describe('ernicctl: instances without TAPs (any user)', function () {
  this.timeout(60000);
  let dir = '';

  before(function () {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ernicctl-notap-'));
  });
  after(async function () {
    await ernicctl('stop', '--run-dir', dir, '--timeout', '3000');
    forceCleanUp(dir, []);
  });

  it('starts a mesh of two; a server that died is reported by status and cleaned up by stop', async function () {
    const r = await ernicctl(
      'start',
      '2',
      '--no-tap',
      '--run-dir',
      dir,
      '--log-dir',
      dir,
      '--tcp-port',
      String(portFor(3)),
    );
    expect(r.code, r.stderr + r.stdout).to.equal(0);
    const m = manifestOf(dir);
    expect(m.instances.map((i) => [i.tap, i.mesh_node])).to.deep.equal([
      [null, 0],
      [null, 1],
    ]);
    expect(m.bridge).to.equal(null);
    process.kill(m.instances[1]!.pid, 'SIGKILL');
    for (let t = 0; t < 50 && alive(m.instances[1]!.pid); t++) await new Promise((res) => setTimeout(res, 100));
    const s = await ernicctl('status', '--run-dir', dir);
    expect(s.code).to.equal(3);
    expect(s.stdout).to.include('1 of 2 running');
    expect(s.stdout).to.match(/\n1\s+worker\s+\d+\s+gone/);
    const stop = await ernicctl('stop', '--run-dir', dir);
    expect(stop.code, stop.stderr).to.equal(0);
    expect(stop.stdout).to.match(/instance 1 \(pid \d+\): not running/);
    expect(stop.stdout).to.match(/instance 0 \(pid \d+\): stopped/);
    expect(alive(m.instances[0]!.pid)).to.equal(false);
    expect(fs.existsSync(m.instances[1]!.socket)).to.equal(false);
    expect(fs.existsSync(path.join(dir, 'instances.json'))).to.equal(false);
  });

  it('reports a server that cannot start (bad profile) in one line with its log, and leaves nothing behind', async function () {
    const r = await ernicctl(
      'start',
      '2',
      '--no-tap',
      '--run-dir',
      dir,
      '--log-dir',
      dir,
      '--tcp-port',
      String(portFor(4)),
      '--nic-profile',
      'no-such-card',
    );
    expect(r.code).to.equal(1);
    expect(r.stderr).to.match(/^ernicctl: instance 0: rocm-ernic exited with status 2/);
    expect(r.stderr).to.include('no-such-card');
    expect(fs.existsSync(path.join(dir, 'instances.json'))).to.equal(false);
    expect(fs.existsSync(path.join(dir, '0.sock'))).to.equal(false);
  });

  it('says so when the server program cannot be run at all', async function () {
    const r = await ernicctl(
      'start',
      '1',
      '--no-tap',
      '--run-dir',
      dir,
      '--log-dir',
      dir,
      '--backend',
      'loopback',
      '--server',
      '/nonexistent/rocm-ernic',
    );
    expect(r.code).to.equal(1);
    expect(r.stderr).to.match(/^ernicctl: instance 0: cannot run \/nonexistent\/rocm-ernic/);
    expect(fs.existsSync(path.join(dir, 'instances.json'))).to.equal(false);
  });

  it('refuses bad options with exit status 2 and teaches with --help', async function () {
    const bad = await ernicctl('start', '0', '--no-tap', '--run-dir', dir);
    expect(bad.code).to.equal(2);
    expect(bad.stderr).to.equal('ernicctl: instance count 0: expected 1 to 64\n');
    const unknown = await ernicctl('frob');
    expect(unknown.code).to.equal(2);
    const help = await ernicctl('--help');
    expect(help.code).to.equal(0);
    for (const w of ['start [count]', 'stop', 'status', 'stats [id]', 'logs [id]', 'instances.json', 'vfio-user-pci'])
      expect(help.stdout).to.include(w);
  });

  it('takes the count from ERNIC_INSTANCES when none is typed, and names the variable when it is not a number', async function () {
    const r = await ernicctlEnv(
      { ERNIC_INSTANCES: '1' },
      'start',
      '--no-tap',
      '--run-dir',
      dir,
      '--log-dir',
      dir,
      '--backend',
      'loopback',
    );
    expect(r.code, r.stderr + r.stdout).to.equal(0);
    expect(manifestOf(dir).instances.map((i) => i.id)).to.deep.equal([0]);
    expect((await ernicctl('stop', '--run-dir', dir)).code).to.equal(0);
    for (const v of ['abc', '2x', '-1', '65']) {
      const bad = await ernicctlEnv({ ERNIC_INSTANCES: v }, 'start', '--no-tap', '--run-dir', dir, '--log-dir', dir);
      expect(bad.code, v).to.equal(2);
      expect(bad.stderr).to.equal(`ernicctl: ERNIC_INSTANCES=${v}: expected an instance count from 1 to 64\n`);
    }
    const typed = await ernicctlEnv({ ERNIC_INSTANCES: 'abc' }, 'start', 'x', '--no-tap', '--run-dir', dir);
    expect(typed.stderr).to.equal('ernicctl: instance count x: expected an integer from 1 to 64\n');
    const port = await ernicctl('start', '1', '--tcp-port', 'abc', '--run-dir', dir);
    expect(port.stderr).to.equal('ernicctl: --tcp-port abc: expected a TCP port from 0 to 65535\n');
    const twice = await ernicctl('stop', '--timeout', '1', '--timeout', '2', '--run-dir', dir);
    expect([twice.code, twice.stderr]).to.deep.equal([
      2,
      'ernicctl: --timeout given more than once (it takes one value)\n',
    ]);
    expect(fs.existsSync(path.join(dir, 'instances.json'))).to.equal(false);
  });

  it("learns registration from the stats file whatever the servers' log level", async function () {
    const r = await ernicctl(
      'start',
      '2',
      '--no-tap',
      '--run-dir',
      dir,
      '--log-dir',
      dir,
      '--tcp-port',
      String(portFor(5)),
      '--log-level',
      'error',
    );
    expect(r.code, r.stderr + r.stdout).to.equal(0);
    expect(manifestOf(dir).instances.map((i) => i.mesh_node)).to.deep.equal([0, 1]);
    const s = await ernicctl('status', '--json', '--run-dir', dir);
    expect(
      (JSON.parse(s.stdout) as { instances: { mesh_node: number }[] }).instances.map((i) => i.mesh_node),
    ).to.deep.equal([0, 1]);
    expect((await ernicctl('stop', '--run-dir', dir)).code).to.equal(0);
  });
});

/**
 * A stand-in for rocm-ernic whose stats file and log disagree: its socket
 * exists at once but its stats file says `starting` for a while, and its log
 * claims mesh node 9 while its stats file gives a worker node 3 + id.
 */
const FAKE_SERVER = `
const fs = require('fs'), net = require('net');
const args = process.argv.slice(2);
if (args.includes('--help')) { console.log('--socket --stats-file'); process.exit(0); }
const arg = (n) => args[args.indexOf(n) + 1];
const stats = arg('--stats-file');
const id = Number(/(\\d+)\\.stats$/.exec(stats)[1]);
const worker = arg('--backend').startsWith('tcp:worker');
const write = (state, node) => {
  fs.writeFileSync(stats + '.new', '=== ROCm ERNIC Statistics ===\\nInstance:\\n  connection  : disconnected (no client yet)\\n'
    + '  state       : ' + state + '\\n  mesh_node   : ' + node + '\\n\\nWrite count : 1\\n');
  fs.renameSync(stats + '.new', stats);
};
write('starting', worker ? 'unregistered' : 0);
const srv = net.createServer().listen(arg('--socket'));
console.error('rocm-ernic: mesh node 9');
if (!process.env.FAKE_NEVER_LISTEN) setTimeout(() => {
  write('listening', worker ? 'unregistered' : 0);
  setTimeout(() => write('listening', worker ? 3 + id : 0), 200);
}, 300);
process.on('SIGTERM', () => { srv.close(); process.exit(0); });
process.on('SIGINT', () => { srv.close(); process.exit(0); });
`;

describe('ernicctl: state from the stats file, logs -f (a stand-in server)', function () {
  this.timeout(60000);
  let dir = '';
  let fake = '';

  before(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ernicctl-fake-'));
    fake = path.join(dir, 'fake-server.js');
    fs.writeFileSync(fake, FAKE_SERVER);
  });
  after(async function () {
    await ernicctl('stop', '--run-dir', dir, '--timeout', '3000');
    forceCleanUp(dir, []);
  });

  it('waits for state listening and takes the node id from the stats file, not the socket or the log', async function () {
    const r = await ernicctl(
      'start',
      '2',
      '--no-tap',
      '--run-dir',
      dir,
      '--log-dir',
      dir,
      '--server',
      `${process.execPath} ${fake}`,
      '--tcp-port',
      String(portFor(6)),
    );
    expect(r.code, r.stderr + r.stdout).to.equal(0);
    expect(manifestOf(dir).instances.map((i) => i.mesh_node)).to.deep.equal([0, 4]);
    expect(fs.readFileSync(path.join(dir, '1.log'), 'utf8')).to.include('mesh node 9');
    const s = await ernicctl('status', '--json', '--run-dir', dir);
    expect((JSON.parse(s.stdout) as { instances: { state: string }[] }).instances.map((i) => i.state)).to.deep.equal([
      'listening',
      'listening',
    ]);
  });

  it('logs -f prints what is appended, for every instance or one, and ends on SIGINT', async function () {
    if (!fs.existsSync(path.join(dir, 'instances.json')))
      skipBecause(this, 'the instances did not start (see the failure above)');
    const follow = async (args: string[], write: () => void, want: string): Promise<string> => {
      const p = spawn(process.execPath, [ERNICCTL, 'logs', '-f', '-n', '0', '--run-dir', dir, ...args], {
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      let out = '';
      let err = '';
      const seen = new Promise<void>((resolve) => {
        p.stdout.on('data', (d: Buffer) => {
          out += d.toString();
          if (out.includes(want)) resolve();
        });
      });
      p.stderr.on('data', (d: Buffer) => {
        err += d.toString();
      });
      const exited = new Promise<number | null>((resolve) => p.once('exit', (code) => resolve(code)));
      // Written once the follower has had time to start watching; what it prints comes from the watch.
      await new Promise((res) => setTimeout(res, 700));
      write();
      await Promise.race([seen, new Promise((res) => setTimeout(res, 10000))]);
      p.kill('SIGINT');
      expect(await exited, err).to.equal(0);
      return out;
    };
    const all = await follow(
      [],
      () => {
        fs.appendFileSync(path.join(dir, '0.log'), 'line for zero\n');
        fs.appendFileSync(path.join(dir, '1.log'), 'line for one, ');
        fs.appendFileSync(path.join(dir, '1.log'), 'in two writes\n');
      },
      'in two writes',
    );
    expect(all).to.include(`==> instance 0 (manager) ${path.join(dir, '0.log')} <==\nline for zero\n`);
    expect(all).to.include(`==> instance 1 (worker) ${path.join(dir, '1.log')} <==\nline for one, in two writes\n`);
    const one = await follow(
      ['--id', '1'],
      () => {
        fs.appendFileSync(path.join(dir, '0.log'), 'not this one\n');
        fs.appendFileSync(path.join(dir, '1.log'), 'only one\n');
      },
      'only one',
    );
    expect(one).to.equal('only one\n');
  });

  it('fails a server whose stats file never says listening, though its socket exists', async function () {
    expect((await ernicctl('stop', '--run-dir', dir)).code).to.equal(0);
    const r = await ernicctlEnv(
      { FAKE_NEVER_LISTEN: '1' },
      'start',
      '1',
      '--no-tap',
      '--run-dir',
      dir,
      '--log-dir',
      dir,
      '--backend',
      'loopback',
      '--server',
      `${process.execPath} ${fake}`,
      '--start-timeout',
      '800',
    );
    expect(r.code, r.stdout).to.equal(1);
    expect(r.stderr).to.match(/^ernicctl: instance 0: not listening on \S+0\.sock after 800 ms/);
    expect(fs.existsSync(path.join(dir, 'instances.json'))).to.equal(false);
  });
});
