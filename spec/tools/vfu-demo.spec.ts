// The vfu-demo command line: --socket-mode and --socket-group as rocm-ernic
// names them, --mode and --group still accepted, the shared conventions (-h,
// one-line failures with status 2), help that keeps values whole, and its
// routine lines logged at info.
import { expect } from 'chai';
import { ChildProcess, spawn } from 'child_process';
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';

const ROOT = path.join(__dirname, '..', '..', '..');
const BIN = path.join(ROOT, 'dist', 'bin', 'vfu-demo.js');

/** The environment without ERNIC_LOG_LEVEL, so that the default level (info) applies. */
const ENV = Object.fromEntries(Object.entries(process.env).filter(([k]) => k !== 'ERNIC_LOG_LEVEL'));

interface Run {
  status: number | null;
  stdout: string;
  stderr: string;
}

function run(args: readonly string[], nodeArgs: readonly string[] = []): Promise<Run> {
  return new Promise((resolve, reject) => {
    const c = spawn(process.execPath, [...nodeArgs, BIN, ...args], { env: ENV });
    let stdout = '',
      stderr = '';
    c.stdout.setEncoding('utf8').on('data', (s: string) => {
      stdout += s;
    });
    c.stderr.setEncoding('utf8').on('data', (s: string) => {
      stderr += s;
    });
    c.on('error', reject);
    c.on('close', (status) => resolve({ status, stdout, stderr }));
  });
}

/** Starts the server, waits for its socket; stop() sends SIGTERM and gives back its status and stderr. */
async function serve(
  args: readonly string[],
  socket: string,
): Promise<{ child: ChildProcess; stop: () => Promise<Run> }> {
  const child = spawn(process.execPath, [BIN, '--socket', socket, ...args], { env: ENV });
  let stderr = '';
  child.stderr!.setEncoding('utf8').on('data', (s: string) => {
    stderr += s;
  });
  const closed = new Promise<number | null>((r) => child.on('close', r));
  const end = Date.now() + 15000;
  while (!fs.existsSync(socket)) {
    if (child.exitCode !== null || Date.now() > end) throw new Error(`vfu-demo did not listen: ${stderr}`);
    await new Promise((r) => setTimeout(r, 20));
  }
  return {
    child,
    stop: async () => {
      child.kill('SIGTERM');
      return { status: await closed, stdout: '', stderr };
    },
  };
}

describe('vfu-demo command line', function () {
  this.timeout(60000);
  let dir: string;
  beforeEach(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'vfu-demo-spec-'));
  });
  afterEach(() => {
    fs.rmSync(dir, { recursive: true, force: true });
  });

  for (const [flags, label] of [
    [['--socket-mode', '600', '--socket-group', String(process.getgid!())], 'the new names'],
    [['--mode', '0640', '--group', String(process.getgid!())], 'the older names --mode and --group'],
  ] as const) {
    it(`sets the socket file's mode and group with ${label}`, async () => {
      const socket = path.join(dir, 'demo.sock');
      const s = await serve(flags, socket);
      const st = fs.statSync(socket);
      const r = await s.stop();
      expect(st.mode & 0o777).to.equal(parseInt(flags[1], 8));
      expect(st.gid).to.equal(process.getgid!());
      expect(r.status, r.stderr).to.equal(0);
    });
  }

  it('logs its routine lines at info, and nothing at warn; a SIGTERM as soon as the socket appears ends it cleanly', async () => {
    const socket = path.join(dir, 'demo.sock');
    const s = await serve([], socket);
    const r = await s.stop();
    expect(r.stderr).to.match(
      new RegExp(` info: vfu-demo: serving on ${socket.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}\n`),
    );
    expect(r.stderr).to.match(/ info: vfu-demo: SIGTERM, shutting down\n/);
    expect(r.stderr).to.not.match(/ (warn|error): /);
    expect(r.status).to.equal(0);
    expect(fs.existsSync(socket), 'socket file removed').to.equal(false);
  });

  for (const [args, why] of [
    [['--socket-mode', '999'], /^vfu-demo: --socket-mode 999: expected an octal mode such as 660$/],
    [['--mode', 'rw'], /^vfu-demo: --socket-mode rw: expected an octal mode such as 660$/],
    [['--mode', '600', '--socket-mode', '660'], /^vfu-demo: --socket-mode given more than once/],
    [['--socket', '/tmp/a', '--socket', '/tmp/b'], /^vfu-demo: --socket given more than once/],
    [['--log-level', 'loud'], /^vfu-demo: Invalid values: Argument: log-level, Given: "loud"/],
    [['--colour'], /^vfu-demo: Unknown argument: colour$/],
  ] as const) {
    it(`${args.join(' ')}: one line, status 2`, async () => {
      const r = await run(args);
      expect(r.status).to.equal(2);
      expect(r.stderr.trimEnd().split('\n'), r.stderr).to.have.length(1);
      expect(r.stderr.trimEnd()).to.match(why);
    });
  }

  for (const flag of ['-h', '--help']) {
    it(`${flag}: the new names in help, values whole at 80 columns, status 0`, async () => {
      const r = await run([flag], ['--import', 'data:text/javascript,process.stdout.columns=80']);
      expect(r.status, r.stderr).to.equal(0);
      const lines = r.stdout.split('\n').map((l) => l.trim());
      expect(lines.some((l) => l.startsWith('--socket-mode, --mode '))).to.equal(true);
      expect(lines.some((l) => l.startsWith('--socket-group, --group '))).to.equal(true);
      expect(lines).to.include('\'{"driver":"vfio-user-pci","socket":{"path":"/tmp/demo.sock","type":"unix"}}\'');
      expect(lines).to.include('vfu-demo --socket /tmp/demo.sock --socket-mode 660 --socket-group kvm');
    });
  }
});
