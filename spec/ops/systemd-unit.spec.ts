// docs/systemd/rocm-ernic@.service, rocm-ernic.target and ernic-exporter.service: `systemd-analyze
// verify` has nothing to say about them (the programs they name are put in a
// scratch directory as small wrappers around the compiled bins, since verify
// checks that they exist), the offline security review rates the unit's
// exposure low, and the unit keeps what the server needs: its TAP device,
// its socket directory, the address families it uses. Skipped, saying so,
// without systemd-analyze (Debian package: systemd).

import { expect } from 'chai';
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { skipBecause } from '../support/skip';

const ROOT = path.join(__dirname, '..', '..', '..');
const UNIT_DIR = path.join(ROOT, 'docs', 'systemd');
const DIST_BIN = path.join(__dirname, '..', '..', 'bin');
const hasAnalyze = spawnSync('systemd-analyze', ['--version']).status === 0;

function analyze(...args: string[]): { code: number | null; out: string } {
  const r = spawnSync('systemd-analyze', args, { encoding: 'utf8', timeout: 60000 });
  return { code: r.status, out: `${r.stdout}${r.stderr}`.trim() };
}

/** The unit's [Service] settings as key -> values (a key may repeat). */
function settings(text: string): Map<string, string[]> {
  const m = new Map<string, string[]>();
  for (const line of text.split('\n')) {
    const r = /^([A-Za-z]+)=(.*)$/.exec(line.trim());
    if (r) m.set(r[1]!, [...(m.get(r[1]!) ?? []), r[2]!]);
  }
  return m;
}

describe('systemd: rocm-ernic@.service', function () {
  this.timeout(60000);
  let scratch = '';
  const unitText = fs.readFileSync(path.join(UNIT_DIR, 'rocm-ernic@.service'), 'utf8');

  before(function () {
    if (!hasAnalyze) {
      skipBecause(this, 'systemd-analyze not found (apt-get install systemd)');
    }
    scratch = fs.mkdtempSync(path.join(os.tmpdir(), 'ernic-units-'));
    const bin = path.join(scratch, 'bin');
    const units = path.join(scratch, 'units');
    fs.mkdirSync(bin);
    fs.mkdirSync(units);
    for (const name of ['rocm-ernic', 'ernicctl']) {
      fs.writeFileSync(
        path.join(bin, name),
        `#!/bin/sh\nexec ${process.execPath} ${path.join(DIST_BIN, `${name}.js`)} "$@"\n`,
        { mode: 0o755 },
      );
    }
    fs.writeFileSync(path.join(units, 'rocm-ernic@.service'), unitText.replaceAll('/usr/local/bin/', `${bin}/`));
    fs.copyFileSync(path.join(UNIT_DIR, 'rocm-ernic.target'), path.join(units, 'rocm-ernic.target'));
  });

  after(function () {
    if (scratch) fs.rmSync(scratch, { recursive: true, force: true });
  });

  it('passes systemd-analyze verify without a word, as a template, an instance and with its target', function () {
    const units = path.join(scratch, 'units');
    fs.copyFileSync(path.join(units, 'rocm-ernic@.service'), path.join(units, 'rocm-ernic@3.service'));
    for (const files of [
      ['rocm-ernic@.service'],
      ['rocm-ernic@3.service'],
      ['rocm-ernic@.service', 'rocm-ernic.target'],
    ]) {
      const r = analyze('verify', ...files.map((f) => path.join(units, f)));
      expect(r.out, files.join(' ')).to.equal('');
      expect(r.code, files.join(' ')).to.equal(0);
    }
  });

  it('is what verify objects to when a program is missing (the check above is not empty)', function () {
    const units = path.join(scratch, 'units');
    const broken = path.join(units, 'rocm-ernic-broken@.service');
    fs.writeFileSync(broken, unitText);
    const r = analyze('verify', broken);
    expect(r.out).to.include('/usr/local/bin/');
    fs.rmSync(broken);
  });

  it('rates low in the offline security review (exposure at most 3.0)', function () {
    const r = analyze('security', '--offline=true', path.join(scratch, 'units', 'rocm-ernic@.service'));
    const m = /Overall exposure level for \S+: ([0-9.]+)/.exec(r.out);
    if (!m) {
      skipBecause(this, `no exposure figure from this systemd-analyze (${r.out.split('\n').pop()})`);
    }
    expect(Number(m[1])).to.be.at.most(3.0);
  });

  it('is Type=notify (ready once the socket listens) with Restart=on-failure, reading the per-instance environment file', function () {
    const s = settings(unitText);
    expect(s.get('Type')).to.deep.equal(['notify']);
    // The server reports readiness through systemd-notify, a child process.
    expect(s.get('NotifyAccess')).to.deep.equal(['all']);
    expect(s.get('Restart')).to.deep.equal(['on-failure']);
    expect(s.get('EnvironmentFile')).to.include('/etc/rocm-ernic/%i.env');
    const exec = s.get('ExecStart')![0]!;
    for (const v of [
      '--socket ${ERNIC_SOCKET}',
      '--backend ${ERNIC_BACKEND}',
      '--tap ${ERNIC_TAP}',
      '--mac ${ERNIC_MAC}',
      '--nic-profile ${ERNIC_PROFILE}',
      '--socket-mode ${ERNIC_SOCKET_MODE}',
      '$ERNIC_ARGS',
    ]) {
      expect(exec).to.include(v);
    }
  });

  it('is hardened but keeps the TAP device, the socket directory and the address families the server needs', function () {
    const s = settings(unitText);
    expect(s.get('DeviceAllow')).to.deep.equal(['/dev/net/tun rw']);
    expect(s.get('DevicePolicy')).to.deep.equal(['closed']);
    expect(s.get('PrivateDevices')).to.equal(undefined); // it would hide /dev/net/tun
    expect(s.get('PrivateNetwork')).to.equal(undefined); // the TAP and the mesh live in the host's network
    expect(s.get('MemoryDenyWriteExecute')).to.equal(undefined); // V8's JIT
    expect(s.get('AmbientCapabilities')![0]!.split(' ')).to.include('CAP_NET_ADMIN');
    expect(s.get('RuntimeDirectory')).to.deep.equal(['rocm-ernic']);
    expect(s.get('RuntimeDirectoryPreserve')).to.deep.equal(['yes']);
    expect(s.get('ProtectSystem')).to.deep.equal(['strict']);
    expect(s.get('RestrictAddressFamilies')![0]!.split(' ')).to.include.members(['AF_UNIX', 'AF_INET', 'AF_INET6']);
  });

  it('names only options rocm-ernic and ernicctl really have', function () {
    const help = spawnSync(process.execPath, [path.join(DIST_BIN, 'rocm-ernic.js'), '--help'], {
      encoding: 'utf8',
    }).stdout;
    const exec = settings(unitText).get('ExecStart')![0]!;
    for (const opt of exec.match(/--[a-z-]+/g)!) expect(help, opt).to.include(opt);
    const tap = spawnSync(process.execPath, [path.join(DIST_BIN, 'ernicctl.js'), 'tap', '--help'], {
      encoding: 'utf8',
    }).stdout;
    expect(tap).to.include('--bridge');
  });
});

describe('systemd: ernic-exporter.service', function () {
  this.timeout(60000);
  let scratch = '';
  const unitText = fs.readFileSync(path.join(UNIT_DIR, 'ernic-exporter.service'), 'utf8');

  before(function () {
    if (!hasAnalyze) {
      skipBecause(this, 'systemd-analyze not found (apt-get install systemd)');
    }
    scratch = fs.mkdtempSync(path.join(os.tmpdir(), 'ernic-exporter-unit-'));
    fs.mkdirSync(path.join(scratch, 'bin'));
    fs.mkdirSync(path.join(scratch, 'units'));
    fs.writeFileSync(
      path.join(scratch, 'bin', 'ernic-exporter'),
      `#!/bin/sh\nexec ${process.execPath} ${path.join(DIST_BIN, 'ernic-exporter.js')} "$@"\n`,
      { mode: 0o755 },
    );
    fs.writeFileSync(
      path.join(scratch, 'units', 'ernic-exporter.service'),
      unitText.replaceAll('/usr/local/bin/', `${path.join(scratch, 'bin')}/`),
    );
  });

  after(function () {
    if (scratch) fs.rmSync(scratch, { recursive: true, force: true });
  });

  it('passes systemd-analyze verify without a word', function () {
    const r = analyze('verify', path.join(scratch, 'units', 'ernic-exporter.service'));
    expect(r.out).to.equal('');
    expect(r.code).to.equal(0);
  });

  it('rates low in the offline security review (exposure at most 3.0)', function () {
    const r = analyze('security', '--offline=true', path.join(scratch, 'units', 'ernic-exporter.service'));
    const m = /Overall exposure level for \S+: ([0-9.]+)/.exec(r.out);
    if (!m) {
      skipBecause(this, `no exposure figure from this systemd-analyze (${r.out.split('\n').pop()})`);
    }
    expect(Number(m[1])).to.be.at.most(3.0);
  });

  it('is Type=exec with Restart=on-failure, hardened as the server unit is, without a capability', function () {
    const s = settings(unitText);
    const server = settings(fs.readFileSync(path.join(UNIT_DIR, 'rocm-ernic@.service'), 'utf8'));
    expect(s.get('Type')).to.deep.equal(['exec']);
    expect(s.get('Restart')).to.deep.equal(['on-failure']);
    for (const k of [
      'DynamicUser',
      'NoNewPrivileges',
      'ProtectSystem',
      'ProtectHome',
      'PrivateTmp',
      'ProtectKernelTunables',
      'ProtectKernelModules',
      'ProtectKernelLogs',
      'ProtectControlGroups',
      'ProtectClock',
      'ProtectHostname',
      'RestrictNamespaces',
      'RestrictRealtime',
      'RestrictSUIDSGID',
      'LockPersonality',
      'RemoveIPC',
      'SystemCallArchitectures',
      'SystemCallErrorNumber',
      'DevicePolicy',
    ]) {
      expect(s.get(k), k).to.deep.equal(server.get(k));
    }
    expect(s.get('CapabilityBoundingSet')).to.deep.equal(['']);
    expect(s.get('PrivateDevices')).to.deep.equal(['yes']);
    expect(s.get('ProtectProc'), "it reads the servers' /proc/PID/stat").to.equal(undefined);
    expect(s.get('RestrictAddressFamilies')![0]!.split(' ')).to.include.members(['AF_INET', 'AF_INET6']);
  });

  it("names only options ernic-exporter really has, on this host's address by default", function () {
    const help = spawnSync(process.execPath, [path.join(DIST_BIN, 'ernic-exporter.js'), '--help'], {
      encoding: 'utf8',
    }).stdout;
    const exec = settings(unitText).get('ExecStart')![0]!;
    const opts = exec.match(/--[a-z-]+/g)!;
    expect(opts).to.include.members(['--run-dir', '--metrics-host', '--metrics-port', '--log-level']);
    for (const opt of opts) expect(help, opt).to.include(opt);
    expect(settings(unitText).get('Environment')).to.include('ERNIC_EXPORTER_HOST=127.0.0.1');
  });
});
