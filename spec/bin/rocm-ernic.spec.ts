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

function run(
  args: string[],
  env: Record<string, string> = {},
): { status: number | null; stdout: string; stderr: string } {
  const r = spawnSync(process.execPath, [BIN, ...args], {
    encoding: 'utf8',
    env: { ...process.env, ...env },
    timeout: 20000,
  });
  return { status: r.status, stdout: r.stdout, stderr: r.stderr };
}

describe('rocm-ernic command line', () => {
  it('--help teaches: options, examples, profiles and the inject grammar', () => {
    const r = run(['--help']);
    expect(r.status).to.equal(0);
    for (const s of [
      '--socket',
      '--backend',
      '--tap',
      '--mac',
      '--nic-profile',
      '--inject',
      '--log-level',
      '--log-file',
      'Examples:',
      'compat',
      'dsc-25',
      'every:N',
      'vfio-user-pci',
    ]) {
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
    [
      'an unknown nvmeof option',
      ['--backend', 'nvmeof:ip=10.0.0.1,frob=1'],
      {},
      /nvmeof backend: unknown option 'frob'/,
    ],
    [
      'an nvmeof namespace file that cannot be opened',
      ['--backend', 'nvmeof:file=/proc/nope/ns.img'],
      {},
      /--backend nvmeof:file=\/proc\/nope\/ns\.img: cannot open the namespace/,
    ],
    ['a bad log level', ['--log-level', 'chatty'], {}, /chatty/],
    ['a bad ERNIC_LOG_LEVEL', [], { ERNIC_LOG_LEVEL: 'loud' }, /ERNIC_LOG_LEVEL=loud/],
    ['a TAP name no interface can have', ['--tap', 'x'.repeat(20)], {}, /--tap x+: no such interface/],
    ['an interface that is not a TAP', ['--tap', 'lo'], {}, /--tap lo: cannot attach/],
    ['an unknown option', ['--frobnicate'], {}, /frobnicate/],
    [
      '--backend given twice',
      ['--backend', 'nvmeof', '--backend', 's3'],
      {},
      /^rocm-ernic: --backend given more than once/,
    ],
    [
      '--nic-profile given twice',
      ['--nic-profile', 'compat', '--nic-profile', 'dsc-25'],
      {},
      /--nic-profile given more than once/,
    ],
    ['--socket given twice (once by its alias)', ['-s', '/tmp/ernic-a.sock'], {}, /--socket given more than once/],
    ['--tap given twice', ['--tap', 'a', '--tap', 'b'], {}, /--tap given more than once/],
    [
      '--metrics-port given twice',
      ['--metrics-port', '1', '--metrics-port', '2'],
      {},
      /--metrics-port given more than once/,
    ],
    [
      'a TAP that does not exist (never a new, unconfigured one)',
      ['--tap', 'ernicnosuch0'],
      {},
      /--tap ernicnosuch0: no such interface \(create it first: ip tuntap add dev ernicnosuch0 mode tap/,
    ],
    [
      'a metrics port that is not a number',
      ['--metrics-port', 'abc'],
      {},
      /--metrics-port abc: expected a TCP port from 0 to 65535/,
    ],
    ['a metrics port out of range', ['--metrics-port', '65536'], {}, /--metrics-port 65536: expected a TCP port/],
    [
      'a negotiation timeout that is not a number',
      ['--negotiation-timeout', '10s'],
      {},
      /--negotiation-timeout 10s: expected milliseconds from 1 to 3600000/,
    ],
    [
      'a config file that does not exist',
      ['--config', '/nonexistent/ernic.json'],
      {},
      /--config \/nonexistent\/ernic\.json: cannot read/,
    ],
    ['a bad log format', ['--log-format', 'xml'], {}, /xml/],
  ];
  for (const [what, args, env, msg] of bad) {
    it(`refuses ${what} with one line and status 2`, () => {
      const r = run(['--socket', tempSocketPath('cli'), ...args], env);
      expect(r.status, r.stderr).to.equal(2);
      expect(r.stderr.trim().split('\n'), r.stderr).to.have.length(1);
      expect(r.stderr).to.match(msg);
    });
  }

  it('-h is --help', () => {
    const a = run(['-h']);
    expect(a.status, a.stderr).to.equal(0);
    expect(a.stdout).to.equal(run(['--help']).stdout);
  });

  it('--help keeps every value whole: backend keys, the QEMU line and the examples are never split', () => {
    const r = run(['--help'], {});
    const lines = r.stdout.split('\n');
    for (const v of [
      'nqn=nvmet-test',
      'ip=192.168.200.1',
      'maxpart=256M',
      'listen=[HOST:]PORT',
      'tcp:manager:listen:PORT',
      'ERNIC_TCP_SEND_TIMEOUT_MS',
      `'{"driver":"vfio-user-pci","socket":{"path":"/tmp/vfio-user-rocm-ernic.sock","type":"unix"}}'`,
    ]) {
      expect(
        lines.some((l) => l.includes(v)),
        v,
      ).to.equal(true);
    }
    // Nothing is laid out wider than the help width (yargs breaks words only when a line would be).
    expect(Math.max(...lines.map((l) => l.length))).to.be.at.most(110);
  });

  it('--print-profile prints the layered profile as an .ini that loads back as the same profile', () => {
    const r = run(['--nic-profile', 'dsc-25', '--print-profile']);
    expect(r.status, r.stderr).to.equal(0);
    expect(r.stdout).to.match(/^name = compat\+dsc-25$/m);
    const file = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'ernic-prof-')), 'p.ini');
    fs.writeFileSync(file, r.stdout);
    const again = run(['--nic-profile', file, '--print-profile']);
    expect(again.status, again.stderr).to.equal(0);
    // The same settings (only the name line differs: the file's layer name).
    const body = (t: string): string[] => t.split('\n').filter((l) => !/^(#|name =)/.test(l));
    expect(body(again.stdout)).to.deep.equal(body(r.stdout));
    fs.rmSync(path.dirname(file), { recursive: true, force: true });
  });

  it('completion prints a shell completion script, and completes option values', () => {
    const r = run(['completion']);
    expect(r.status, r.stderr).to.equal(0);
    expect(r.stdout).to.include('complete -o bashdefault -o default -F _rocm-ernic_yargs_completions rocm-ernic');
    const c = run(['--get-yargs-completions', 'rocm-ernic', '--log-format', '']);
    expect(c.stdout.trim().split('\n')).to.deep.equal(['text', 'json']);
  });

  async function serveUntil(
    args: string[],
    env: Record<string, string>,
    until: (err: string) => boolean,
  ): Promise<{ err: string; code: number | null }> {
    const child = spawn(process.execPath, [BIN, ...args], {
      stdio: ['ignore', 'ignore', 'pipe'],
      env: { ...process.env, ...env },
    });
    let err = '';
    const exited = new Promise<number | null>((r) => child.once('close', (code) => r(code)));
    // The condition is checked as stderr grows and, for conditions on files, every 50 ms.
    await new Promise<void>((resolve, reject) => {
      const done = (e?: Error): void => {
        clearTimeout(t);
        clearInterval(tick);
        e ? reject(e) : resolve();
      };
      const t = setTimeout(() => done(new Error(`timed out; stderr: ${err}`)), 15000);
      const tick = setInterval(() => {
        if (until(err)) done();
      }, 50);
      child.stderr.on('data', (d: Buffer) => {
        err += d.toString();
        if (until(err)) done();
      });
      child.once('exit', () => done(until(err) ? undefined : new Error(`exited early: ${err}`)));
    });
    child.kill('SIGTERM');
    const code = await exited; // 'close': stderr has ended, so err holds the exit lines too
    return { err, code };
  }

  it('--config FILE: options from a JSON file, the command line winning; unknown keys refused', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ernic-cfg-'));
    const sock = tempSocketPath('cli-cfg');
    fs.writeFileSync(
      path.join(dir, 'ok.json'),
      JSON.stringify({ socket: sock, 'nic-profile': 'dsc-25', inject: ['rx-lost=every:100'], 'log-level': 'warn' }),
    );
    const { err, code } = await serveUntil(['--config', path.join(dir, 'ok.json'), '-L', 'info'], {}, (e) =>
      /serving/.test(e),
    );
    expect(code).to.equal(0);
    expect(err).to.include(`serving ${sock} (profile compat+dsc-25`);
    expect(err).to.include('inject rx-lost every 100th');
    fs.writeFileSync(path.join(dir, 'bad.json'), JSON.stringify({ socket: sock, frobnicate: 1 }));
    const bad = run(['--config', path.join(dir, 'bad.json')]);
    expect(bad.status).to.equal(2);
    expect(bad.stderr).to.match(/frobnicate/);
    fs.writeFileSync(path.join(dir, 'notjson.json'), 'socket = x');
    const nj = run(['--config', path.join(dir, 'notjson.json')]);
    expect(nj.status).to.equal(2);
    expect(nj.stderr).to.match(/--config .*notjson\.json: not JSON/);
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it('routine lines are info, not warnings; --log-format json gives one object a line', async () => {
    const sock = tempSocketPath('cli-json');
    const { err, code } = await serveUntil(['--socket', sock, '--log-format', 'json'], {}, (e) => /serving/.test(e));
    expect(code).to.equal(0);
    const lines = err
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as { level: string; message: string; time: string });
    const serving = lines.find((l) => l.message.includes('serving'));
    expect(serving?.level).to.equal('info');
    expect(Number.isNaN(Date.parse(serving!.time))).to.equal(false);
    const quietSock = tempSocketPath('cli-quiet');
    const quiet = await serveUntil(['--socket', quietSock, '-L', 'warn', '--metrics-port', '0'], {}, () =>
      fs.existsSync(quietSock),
    );
    expect(quiet.err).to.not.match(/serving|metrics at/);
  });

  it('text lines carry no timestamp when stderr is the journal (JOURNAL_STREAM names it)', async () => {
    // The child's stderr is a pipe; JOURNAL_STREAM names that pipe only if we
    // know its device and inode, so give the child a stream we can stat: a file.
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ernic-journal-'));
    const file = path.join(dir, 'err');
    const fd = fs.openSync(file, 'w');
    const st = fs.fstatSync(fd);
    const sock = tempSocketPath('cli-journal');
    const child = spawn(process.execPath, [BIN, '--socket', sock], {
      stdio: ['ignore', 'ignore', fd],
      env: { ...process.env, JOURNAL_STREAM: `${st.dev}:${st.ino}` },
    });
    fs.closeSync(fd);
    for (let i = 0; i < 200 && !/serving/.test(fs.readFileSync(file, 'utf8')); i++)
      await new Promise((r) => setTimeout(r, 50));
    const exited = new Promise<number | null>((r) => child.once('exit', (code) => r(code)));
    child.kill('SIGTERM');
    expect(await exited).to.equal(0);
    const text = fs.readFileSync(file, 'utf8');
    expect(text).to.match(/^info: rocm-ernic: serving /m);
    expect(text).to.not.match(/^\d{4}-\d\d-\d\dT/m);
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it('tells systemd it is ready (systemd-notify --ready) once the socket listens, only under NOTIFY_SOCKET', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ernic-notify-'));
    const record = path.join(dir, 'calls');
    // A stand-in systemd-notify on PATH that records how it was called and whether the socket existed then.
    fs.writeFileSync(
      path.join(dir, 'systemd-notify'),
      `#!/bin/sh\nfor s in "$ERNIC_TEST_SOCK"; do [ -S "$s" ] && echo socket-up >> "${record}"; done\necho "$@" >> "${record}"\n`,
      { mode: 0o755 },
    );
    const sock = tempSocketPath('cli-notify');
    const env = {
      PATH: `${dir}:${process.env.PATH ?? ''}`,
      NOTIFY_SOCKET: '/run/systemd/notify',
      ERNIC_TEST_SOCK: sock,
    };
    const { code } = await serveUntil(
      ['--socket', sock],
      env,
      () => fs.existsSync(record) && fs.readFileSync(record, 'utf8').includes('--ready'),
    );
    expect(code).to.equal(0);
    const calls = fs.readFileSync(record, 'utf8').trim().split('\n');
    expect(calls[0]).to.equal('socket-up');
    expect(calls[1]).to.match(
      new RegExp(`^--ready --pid=\\d+ --status=serving ${sock.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')} `),
    );
    // Without NOTIFY_SOCKET it is not called.
    fs.rmSync(record);
    await serveUntil(['--socket', tempSocketPath('cli-nonotify')], { PATH: env.PATH }, (e) => /serving/.test(e));
    expect(fs.existsSync(record)).to.equal(false);
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it('--loop-watch reports the longest event-loop turn in the stats file and the exit line', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ernic-lw-'));
    const stats = path.join(dir, 's.stats');
    const sock = tempSocketPath('cli-lw');
    const { err, code } = await serveUntil(['--socket', sock, '--loop-watch', '-S', stats], {}, (e) =>
      /serving/.test(e),
    );
    expect(code).to.equal(0);
    expect(err).to.match(/SIGTERM, shutting down \(longest event-loop turn \d+\.\d ms\)/);
    expect(fs.readFileSync(stats, 'utf8')).to.match(/loop_turn_max_ms\s*:\s*\d/);
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it('serves a client, then SIGTERM shuts down and removes the socket', async () => {
    const sock = tempSocketPath('cli-run');
    const child = spawn(process.execPath, [BIN, '--socket', sock, '-L', 'info'], {
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    let err = '';
    child.stderr.on('data', (d: Buffer) => {
      err += d.toString();
    });
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
    const child = spawn(
      process.execPath,
      [BIN, '--socket', sock, '-L', 'info', '--backend', `nvmeof:size=2M,bs=4096,file=${img},port=4421`],
      { stdio: ['ignore', 'ignore', 'pipe'] },
    );
    let err = '';
    child.stderr.on('data', (d: Buffer) => {
      err += d.toString();
    });
    for (let i = 0; i < 100 && !fs.existsSync(sock); i++) await new Promise((r) => setTimeout(r, 50));
    expect(fs.existsSync(sock), err).to.equal(true);
    expect(fs.statSync(img).size).to.equal(2 * 1024 * 1024);
    expect(err).to.match(
      /NVMe-oF target nvmet-test at 192\.168\.200\.1:4421, namespace 1: 2097152 bytes \(4096-byte blocks\)/,
    );
    const exited = new Promise<number | null>((r) => child.once('exit', (code) => r(code)));
    child.kill('SIGTERM');
    expect(await exited).to.equal(0);
    fs.rmSync(path.dirname(img), { recursive: true, force: true });
  });
});
