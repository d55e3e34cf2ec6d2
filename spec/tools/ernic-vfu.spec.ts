// The ernic-vfu command line: exit statuses (0 same, 1 differences, 2 bad usage
// or could not run), names refused with the known list, --json documents
// checked against the fixture captures, -h on every subcommand, and a spawned
// server ended with everything it started (its process group), whether the
// replay ends, fails or is interrupted.
import { expect } from 'chai';
import { spawn } from 'child_process';
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import { vfio_user_header } from '../../protocol/layouts';
import { captureDecode } from '../../lib/vfio-user/capture-text';
import { CaptureWriter, CapturedMessage, readCapture } from '../../lib/vfio-user/pcapng';

const ROOT = path.join(__dirname, '..', '..', '..');
const FIX = path.join(ROOT, 'fixtures', 'vfio-user');
const BIN = path.join(ROOT, 'dist', 'bin', 'ernic-vfu.js');
const IDIO16 = path.join(ROOT, 'dist', 'lib', 'examples', 'idio16.js');
const DEMO = path.join(ROOT, 'dist', 'bin', 'vfu-demo.js');
const NODE = process.execPath;
const GPIO = path.join(FIX, 'qemu-boot-lvu-gpio.pcapng');

interface Run {
  status: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
}

/** Runs ernic-vfu without blocking the test's event loop; `started` sees the child (to signal it). */
function run(
  args: readonly string[],
  opts: { env?: NodeJS.ProcessEnv; nodeArgs?: readonly string[]; started?: (pid: number) => void } = {},
): Promise<Run> {
  return new Promise((resolve, reject) => {
    const c = spawn(NODE, [...(opts.nodeArgs ?? []), BIN, ...args], { env: opts.env ?? process.env });
    let stdout = '',
      stderr = '';
    c.stdout.setEncoding('utf8').on('data', (s: string) => {
      stdout += s;
    });
    c.stderr.setEncoding('utf8').on('data', (s: string) => {
      stderr += s;
    });
    c.on('error', reject);
    c.on('spawn', () => opts.started?.(c.pid!));
    c.on('close', (status, signal) => resolve({ status, signal, stdout, stderr }));
  });
}

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

function exists(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ESRCH') return false;
    throw e;
  }
}

/**
 * Waits until neither the group nor the child exists. An orphan that was
 * killed stays a zombie until init collects it, which here takes a second or
 * two: allow that, not a process that keeps running.
 */
async function gone(pgid: number, child: number, ms = 10000): Promise<boolean> {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    if (!exists(-pgid) && !exists(child)) return true;
    await sleep(50);
  }
  return false;
}

/** Reads `$$ $!` as the wrapper wrote them. */
function pids(file: string): [number, number] {
  const [a, b] = fs.readFileSync(file, 'utf8').trim().split(' ').map(Number);
  expect(Number.isSafeInteger(a) && a! > 1 && Number.isSafeInteger(b) && b! > 1, 'pid file').to.equal(true);
  return [a!, b!];
}

function reap(...ps: number[]): void {
  for (const p of ps) {
    try {
      process.kill(p, 'SIGKILL');
    } catch {
      /* gone */
    }
  }
}

describe('ernic-vfu command line', function () {
  this.timeout(60000);
  let dir: string;
  beforeEach(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ernic-vfu-spec-'));
  });
  afterEach(() => {
    fs.rmSync(dir, { recursive: true, force: true });
  });

  describe('replay --spawn', () => {
    it('exits 0 and prints the summary', async () => {
      const r = await run(['replay', GPIO, '--spawn', `${NODE} ${IDIO16} --socket {socket}`]);
      expect(r.status, r.stderr).to.equal(0);
      expect(r.stdout).to.match(
        /replayed 234 commands: 234 replies compared, 232 identical, 2 allowed by rules, 0 different/,
      );
    });

    it('takes a compound shell command', async () => {
      const r = await run([
        'replay',
        GPIO,
        '--only',
        'VERSION',
        '--spawn',
        `cd ${path.dirname(IDIO16)} && ${NODE} ${path.basename(IDIO16)} --socket {socket}`,
      ]);
      expect(r.status, r.stderr).to.equal(0);
      expect(r.stdout).to.match(
        /replayed 1 commands \(233 filtered out\): 1 replies compared, 0 identical, 1 allowed by rules, 0 different/,
      );
    });

    it("ends the whole process group: a wrapper's child does not outlive the replay", async () => {
      const pidFile = path.join(dir, 'pids');
      // Like `npm run start -- ...`: a wrapper whose child is the server; SIGTERM to the wrapper alone leaves the server running.
      const wrapper = `sh -c '${NODE} ${IDIO16} --socket {socket} & echo $$ $! > ${pidFile}; wait'`;
      // TMPDIR: the socket's temporary directory is made here, and must be removed.
      const r = await run(['replay', GPIO, '--spawn', wrapper], { env: { ...process.env, TMPDIR: dir } });
      const [pgid, child] = pids(pidFile);
      try {
        expect(r.status, r.stderr).to.equal(0);
        expect(await gone(pgid, child), `process group ${pgid} (server ${child}) still runs`).to.equal(true);
        expect(fs.readdirSync(dir)).to.deep.equal(['pids']);
      } finally {
        reap(child);
      }
    });

    it('ends the group on SIGINT and then ends by SIGINT itself', async () => {
      const pidFile = path.join(dir, 'pids');
      const socket = path.join(dir, 'silent.sock');
      const silent = path.join(dir, 'silent.js');
      // A server that accepts and never answers: the replay waits for the VERSION reply until interrupted.
      fs.writeFileSync(silent, 'require("net").createServer(() => {}).listen(process.argv[2]);\n');
      const wrapper = `sh -c '${NODE} ${silent} {socket} & echo $$ $! > ${pidFile}; wait'`;
      let cli = 0;
      const done = run(['replay', GPIO, '--connect', socket, '--spawn', wrapper, '--timeout', '60000'], {
        started: (pid) => {
          cli = pid;
        },
      });
      const end = Date.now() + 20000;
      while (!(fs.existsSync(socket) && fs.existsSync(pidFile)) && Date.now() < end) await sleep(20);
      await sleep(300);
      process.kill(cli, 'SIGINT');
      const r = await done;
      const [pgid, child] = pids(pidFile);
      try {
        expect(r.signal, `status ${r.status}: ${r.stderr}`).to.equal('SIGINT');
        expect(await gone(pgid, child), `process group ${pgid} (server ${child}) still runs`).to.equal(true);
      } finally {
        reap(child);
      }
    });

    it('ends the group when the server stops before listening: status 2 and why', async () => {
      const pidFile = path.join(dir, 'pids');
      const r = await run([
        'replay',
        GPIO,
        '--spawn',
        `sh -c 'sleep 60 & echo $$ $! > ${pidFile}; echo bad config >&2; exit 3'`,
      ]);
      const [pgid, child] = pids(pidFile);
      try {
        expect(r.status).to.equal(2);
        expect(r.stderr).to.match(
          /^ernic-vfu: the spawned server exited with status 3 before listening; its stderr ended with:\nbad config\n$/,
        );
        expect(await gone(pgid, child), `process group ${pgid} (sleep ${child}) still runs`).to.equal(true);
      } finally {
        reap(child);
      }
    });

    it('ends the group when the replay cannot run (connection refused): status 2', async () => {
      const pidFile = path.join(dir, 'pids');
      const socket = path.join(dir, 'dead.sock');
      const dead = path.join(dir, 'dead.js');
      // A socket file nobody listens on: listen, keep a second name for the file, close, then give it the awaited name.
      fs.writeFileSync(
        dead,
        [
          'const net = require("net"), fs = require("fs"); const p = process.argv[2];',
          'const s = net.createServer().listen(p + ".real", () => { fs.linkSync(p + ".real", p + ".keep");',
          '  s.close(() => { fs.renameSync(p + ".keep", p); setInterval(() => {}, 1000); }); });',
        ].join('\n'),
      );
      const wrapper = `sh -c '${NODE} ${dead} {socket} & echo $$ $! > ${pidFile}; wait'`;
      const r = await run(['replay', GPIO, '--connect', socket, '--spawn', wrapper]);
      const [pgid, child] = pids(pidFile);
      try {
        expect(r.status, r.stderr).to.equal(2);
        expect(r.stderr).to.match(/^ernic-vfu: replay against .*dead\.sock: .*refused/i);
        expect(await gone(pgid, child), `process group ${pgid} (server ${child}) still runs`).to.equal(true);
      } finally {
        reap(child);
      }
    });
  });

  describe('exit statuses', () => {
    it('--spawn with a --connect path that exists already: 2, nothing started', async () => {
      const socket = path.join(dir, 'there.sock');
      const marker = path.join(dir, 'started');
      fs.writeFileSync(socket, '');
      const r = await run([
        'replay',
        GPIO,
        '--connect',
        socket,
        '--spawn',
        `touch ${marker}; ${NODE} ${IDIO16} --socket {socket}`,
      ]);
      expect(r.status).to.equal(2);
      expect(r.stderr).to.match(
        /^ernic-vfu: --connect .*there\.sock exists already; with --spawn it must be the new server's/,
      );
      expect(fs.existsSync(marker)).to.equal(false);
    });

    it('cannot connect: 2, not 1 (1 means differences)', async () => {
      const r = await run(['replay', GPIO, '--connect', path.join(dir, 'missing.sock')]);
      expect(r.status).to.equal(2);
      expect(r.stderr).to.match(/^ernic-vfu: replay against .*missing\.sock: connect: no such file/i);
      expect(r.stdout).to.equal('');
    });

    it('a missing capture: 2 and a clear message', async () => {
      const r = await run(['show', '/nonexistent.pcapng']);
      expect(r.status).to.equal(2);
      expect(r.stderr).to.match(/ernic-vfu: \/nonexistent.pcapng: .*no such file/i);
    });

    it('a file that is not a capture: 2', async () => {
      const f = path.join(dir, 'not.pcapng');
      fs.writeFileSync(f, 'not a capture at all');
      const r = await run(['compare', f, GPIO]);
      expect(r.status).to.equal(2);
      expect(r.stderr).to.match(/not a pcapng file/);
    });

    // Status 2 and one line for each: bad usage, and asking for what the capture does not have.
    for (const [args, why] of [
      [
        ['show', GPIO, '--command', 'FOO'],
        /--command FOO: unknown command FOO; known: VERSION, DMA_MAP, .*MIG_DATA_WRITE$/,
      ],
      [
        ['show', GPIO, '--command', 'dma_map,Nope,x'],
        /--command dma_map,Nope,x: unknown commands NOPE, X; known: VERSION/,
      ],
      [
        ['replay', GPIO, '--connect', 'x.sock', '--only', 'VERSION,BOGUS'],
        /--only VERSION,BOGUS: unknown command BOGUS; known: VERSION, .*, errors$/,
      ],
      [['replay', GPIO, '--connect', 'x.sock', '--only', ','], /--only ,: expected comma-separated command names/],
      [
        ['replay', GPIO, '--connect', 'x.sock', '--timeout', 'abc'],
        /--timeout abc: expected milliseconds from 1 to 3600000/,
      ],
      [['replay', GPIO, '--connect', 'x.sock', '--timeout', '0'], /--timeout 0: expected milliseconds from 1/],
      [['show', GPIO, '--conn', '-1'], /--conn -1: expected a connection index from 0 to 65535/],
      [['compare', GPIO, GPIO, '--conn', '1x'], /--conn 1x: expected a connection index/],
      [['show', GPIO, '--conn', '1', '--conn', '2'], /--conn given more than once/],
      [
        ['replay', GPIO, '--connect', 'x.sock', '--conn', '3'],
        /qemu-boot-lvu-gpio\.pcapng: no connection 3 \(it has 0\)$/,
      ],
      [['compare', GPIO, GPIO, '--conn', '1'], /qemu-boot-lvu-gpio\.pcapng: no connection 1 \(it has 0\)$/],
      [['show', GPIO, '--conn', '2'], /qemu-boot-lvu-gpio\.pcapng: no connection 2 \(it has 0\)$/],
      [['replay', GPIO], /replay needs --connect SOCKET or --spawn COMMAND/],
      [['replay', GPIO, '--spawn', ' '], /--spawn: expected a command/],
      [['frobnicate'], /Unknown argument: frobnicate/],
      [[], /name a command: record, replay, compare or show/],
    ] as const) {
      it(`${args.map((a) => (a.startsWith(ROOT) ? path.relative(ROOT, a) : a)).join(' ') || '(nothing)'}: bad usage, one line, status 2`, async () => {
        const r = await run(args);
        expect(r.status).to.equal(2);
        const lines = r.stderr.trimEnd().split('\n');
        expect(lines, r.stderr).to.have.length(1);
        expect(lines[0]).to.match(/^ernic-vfu: /);
        expect(lines[0]).to.match(why);
        expect(r.stdout).to.equal('');
      });
    }

    it('show --command takes names in any case and shows only those', async () => {
      const msgs = readCapture(path.join(FIX, 'client-lvu-sample.pcapng'));
      const want = msgs.filter((m) => m.comment.name === 'DMA_UNMAP').map((m) => m.frame);
      expect(want.length).to.be.greaterThan(0);
      const r = await run([
        'show',
        path.join(FIX, 'client-lvu-sample.pcapng'),
        '--command',
        'dma_unmap',
        '--conn',
        '0',
      ]);
      expect(r.status, r.stderr).to.equal(0);
      const frames = r.stdout
        .trim()
        .split('\n')
        .map((l) => Number(l.trim().split(/\s+/)[0]));
      expect(frames).to.deep.equal(want);
    });
  });

  describe('--json', () => {
    const HDR = vfio_user_header.SIZE;

    function checkPointsAt(
      messages: readonly CapturedMessage[],
      d: { conn: number; index: number | null; frame: number; command: string },
    ): CapturedMessage {
      const m = messages.find((x) => x.frame === d.frame);
      expect(m, `frame ${d.frame}`).to.not.equal(undefined);
      expect(m!.comment.name).to.equal(d.command);
      expect(m!.comment.conn).to.equal(d.conn);
      expect(messages.filter((x) => x.comment.conn === d.conn)[d.index!]).to.equal(m);
      return m!;
    }

    it('replay: the verdict, the counts and each allowed reply, from the gpio capture', async () => {
      const r = await run(['replay', GPIO, '--json', '--spawn', `${NODE} ${IDIO16} --socket {socket}`]);
      expect(r.status, r.stderr).to.equal(0);
      const j = JSON.parse(r.stdout);
      expect(j).to.include({ command: 'replay', capture: GPIO, conn: 0, verdict: 'same' });
      expect(j.counts).to.deep.equal({
        sent: 234,
        skipped: 0,
        compared: 234,
        identical: 232,
        allowed: 2,
        different: 0,
      });
      expect(j.differences).to.deep.equal([]);
      const messages = readCapture(GPIO);
      expect(j.allowed.map((a: { rule: string }) => a.rule).sort()).to.deep.equal([
        'unimplemented-bar-registers',
        'version-capabilities',
      ]);
      for (const a of j.allowed) checkPointsAt(messages, a);
    });

    it('replay against another device: status 1, each difference with where, what and the recorded bytes', async () => {
      const json = await run([
        'replay',
        GPIO,
        '--json',
        '--spawn',
        `${NODE} ${DEMO} --log-level none --socket {socket}`,
      ]);
      const text = await run(['replay', GPIO, '--spawn', `${NODE} ${DEMO} --log-level none --socket {socket}`]);
      expect(json.status, json.stderr).to.equal(1);
      expect(text.status, text.stderr).to.equal(1);
      const j = JSON.parse(json.stdout);
      expect(j.verdict).to.equal('different');
      expect(j.counts.different).to.equal(j.differences.length);
      expect(j.counts.compared).to.equal(j.counts.identical + j.counts.allowed + j.counts.different);
      // The same differences as the text output, line for line.
      const diffLines = text.stdout.split('\n').filter((l) => l.startsWith('DIFF '));
      expect(
        j.differences.map(
          (d: { frame: number; command: string; what: string }) => `DIFF frame ${d.frame} ${d.command}: ${d.what}`,
        ),
      ).to.deep.equal(diffLines);
      expect(text.stdout).to.contain(`${j.counts.different} different`);
      const messages = readCapture(GPIO);
      let payloads = 0;
      for (const d of j.differences) {
        const m = checkPointsAt(messages, d);
        expect(d.fields.length).to.be.greaterThan(0);
        for (const f of d.fields) {
          expect(f.expected).to.not.equal(f.actual);
          if (f.field === 'payload') {
            payloads++;
            expect(f.expected).to.match(/^([0-9a-f]{2})+$/);
            expect(m.bytes.toString('hex', HDR + f.offset).startsWith(f.expected)).to.equal(true);
          } else if (f.field === 'error') {
            expect(f.expected).to.equal(m.comment.error);
          } else if (f.field === 'flags') {
            expect(f.expected).to.equal(m.comment.flags);
          } else if (f.field === 'msg_size') {
            expect(f.expected).to.equal(m.comment.size);
          }
        }
      }
      expect(payloads).to.be.greaterThan(0);
    });

    it('compare: the same two captures as the docs, verdict same', async () => {
      const ours = path.join(FIX, 'qemu-boot-ernic-idio16.pcapng');
      const r = await run(['compare', GPIO, ours, '--json']);
      expect(r.status, r.stderr).to.equal(0);
      const j = JSON.parse(r.stdout);
      expect(j).to.include({ command: 'compare', reference: GPIO, ours, verdict: 'same' });
      expect(j.counts).to.deep.equal({ compared: 468, identical: 466, allowed: 2, different: 0 });
      const messages = readCapture(ours);
      for (const a of j.allowed) checkPointsAt(messages, a);
    });

    it('compare: a changed reply is reported with its field, offset, expected and actual bytes; status 1', async () => {
      const ref = readCapture(GPIO);
      const changed = path.join(dir, 'changed.pcapng');
      const w = new CaptureWriter(changed, 'test');
      const target = ref.filter((m) => m.comment.type === 'reply' && m.comment.name === 'REGION_READ').at(-1)!;
      const at = target.bytes.length - 1;
      for (const m of ref) {
        const bytes = Buffer.from(m.bytes);
        if (m === target) bytes[at] ^= 0xff;
        w.writeMessage(m.comment, bytes, m.timestampUs);
      }
      w.close();
      const r = await run(['compare', GPIO, changed, '--json']);
      expect(r.status, r.stderr).to.equal(1);
      const j = JSON.parse(r.stdout);
      expect(j.verdict).to.equal('different');
      expect(j.counts.different).to.equal(1);
      const d = j.differences[0];
      expect(d).to.include({ conn: 0, frame: target.frame, command: 'REGION_READ' });
      checkPointsAt(readCapture(changed), d);
      expect(d.fields).to.deep.equal([
        {
          field: 'payload',
          offset: at - HDR,
          expected: target.bytes.toString('hex', at),
          actual: (target.bytes[at]! ^ 0xff).toString(16).padStart(2, '0'),
        },
      ]);
    });

    it('show: one document with the messages, as the capture has them', async () => {
      const file = path.join(FIX, 'client-lvu-sample.pcapng');
      const r = await run(['show', file, '--json', '--command', 'DMA_MAP,region_read']);
      expect(r.status, r.stderr).to.equal(0);
      const j = JSON.parse(r.stdout);
      const want = readCapture(file).filter((m) => m.comment.name === 'DMA_MAP' || m.comment.name === 'REGION_READ');
      expect(j.command).to.equal('show');
      expect(j.count).to.equal(want.length);
      expect(j.messages.map((m: { frame: number }) => m.frame)).to.deep.equal(want.map((m) => m.frame));
      j.messages.forEach((m: Record<string, unknown>, i: number) => {
        const c = want[i]!.comment;
        expect(m).to.include({
          dir: c.dir,
          conn: c.conn,
          id: c.id,
          cmd: c.cmd,
          name: c.name,
          type: c.type,
          size: c.size,
          flags: c.flags,
          error: c.error,
          length: want[i]!.bytes.length,
        });
        expect(m.fds).to.deep.equal(c.fds);
        expect(m.decode).to.equal(captureDecode(c, want[i]!.bytes));
      });
      expect(j.messages.some((m: { decode: string }) => /^addr=0x/.test(m.decode))).to.equal(true);
    });

    it('a reader that stops early (| head) does not turn the status into a crash', async () => {
      const c = spawn(NODE, [BIN, 'show', GPIO, '--json']);
      let stderr = '';
      c.stderr.setEncoding('utf8').on('data', (t: string) => {
        stderr += t;
      });
      c.once('spawn', () => c.stdout.destroy()); // like `| head -c 1`: the reader is gone before the output
      const status = await new Promise<number | null>((r) => c.on('close', r));
      expect(stderr).to.equal('');
      expect(status).to.equal(0);
    });

    it('without --json the output is text', async () => {
      const r = await run(['compare', GPIO, path.join(FIX, 'qemu-boot-ernic-idio16.pcapng')]);
      expect(r.status).to.equal(0);
      expect(r.stdout).to.match(
        /^allowed by rule .*\n.*\ncompared 468 messages: 466 identical, 2 allowed by rules, 0 different\n$/,
      );
    });
  });

  describe('help', () => {
    const at80 = ['--import', 'data:text/javascript,process.stdout.columns=80'];
    for (const sub of ['', 'record', 'replay', 'compare', 'show']) {
      for (const flag of ['-h', '--help']) {
        it(`${sub || '(top)'} ${flag}: help on stdout, status 0, the exit statuses`, async () => {
          const r = await run([...(sub ? [sub] : []), flag], { nodeArgs: at80 });
          expect(r.status, r.stderr).to.equal(0);
          expect(r.stdout).to.match(new RegExp(`^ernic-vfu ${sub || '<command>'}`));
          expect(r.stdout).to.match(/Exit status/);
          expect(r.stderr).to.equal('');
        });
      }
    }

    it('at 80 columns the examples and the exit statuses stay whole', async () => {
      const r = await run(['replay', '-h'], { nodeArgs: at80 });
      const lines = r.stdout.split('\n').map((l) => l.trim());
      for (const whole of [
        'ernic-vfu replay fixtures/vfio-user/qemu-boot-lvu-gpio.pcapng \\',
        '--spawn "npm run -s example:idio16 -- --socket {socket}"',
        '--spawn "npm run -s start -- --socket {socket}"',
        '1  differences found (replay, compare)',
      ])
        expect(lines, whole).to.include(whole);
    });
  });
});
