// Protocol-layer benchmark, our server beside the floor (a minimal C program
// that only reads each message and writes the reply), in the same run:
//
// - REGION_READ round trips (4 bytes), timed by a C client that blocks in
//   read() as a QEMU vCPU does on an MMIO read (bench/floor/vfu-rtt.c). Each
//   server is started fresh for each round; the first BENCH_WARMUP requests of
//   a connection are the warm-up window (reported apart: its p99 shows JIT
//   warm-up), the next BENCH_ROUND_TRIPS are measured. Rounds alternate
//   floor/ours and their samples are pooled, so a passing disturbance on the
//   machine does not land on one server only. Median, p99, p99.9, max and the
//   count over 1 ms, with the ratios.
// - The rate of posted (NO_REPLY) REGION_WRITEs from the TypeScript client.
//
// Client and server run pinned to the same CPU (taskset, when available; the
// same for both servers; BENCH_PIN=split puts them on two CPUs, none leaves
// them to the scheduler). Ours is the real server, `rocm-ernic` itself
// (dist/bin/rocm-ernic.js): each round trip reads the NIC's BAR0 signature,
// as a vCPU's MMIO read would. BENCH_STANDIN=1 adds a second, labelled row:
// bench/support/bench-server.ts, the vfio-user server with a 4 KiB memory BAR
// and nothing of the NIC (what the protocol layer alone costs). Prints the
// figures, the ratios and the goals, judged on the real server: median and
// p99.9 within 2x of the floor, no sample over 1 ms, posted writes above
// 200,000 per second. Asserts nothing.

import { ChildProcess, execFileSync, spawn } from 'child_process';
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import { VfioUserClient } from '../lib/vfio-user/client';

const ROOT = path.join(__dirname, '..', '..');
const OUT = path.join(ROOT, 'bench', 'out');
const ROUND_TRIPS = Number(process.env.BENCH_ROUND_TRIPS ?? 20000);
const WARMUP = Number(process.env.BENCH_WARMUP ?? 2000);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
const POSTED = Number(process.env.BENCH_POSTED ?? 200000);
const BATCH = 64;

// ---- pinning -------------------------------------------------------------------------

interface Pinning {
  /** How a server, and the client, are started: a command prefix. */
  readonly server: string[];
  readonly client: string[];
  /** The CPU list for this process (the TypeScript client of the posted writes), or null. */
  readonly self: string | null;
  readonly describe: string;
}

function hasTaskset(): boolean {
  try {
    execFileSync('taskset', ['-p', String(process.pid)], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}

function choosePinning(): Pinning {
  const mode = process.env.BENCH_PIN ?? 'same';
  const cpus = os.cpus().length;
  if (mode === 'none' || !hasTaskset()) {
    return {
      server: [],
      client: [],
      self: null,
      describe: mode === 'none' ? 'not pinned (BENCH_PIN=none)' : 'not pinned (no taskset)',
    };
  }
  const last = cpus - 1;
  if (mode === 'split' && cpus >= 2) {
    return {
      server: ['taskset', '-c', String(last)],
      client: ['taskset', '-c', String(last - 1)],
      self: String(last - 1),
      describe: `server on CPU ${last}, client on CPU ${last - 1} (taskset), the same for both servers`,
    };
  }
  return {
    server: ['taskset', '-c', String(last)],
    client: ['taskset', '-c', String(last)],
    self: String(last),
    describe: `server and client both on CPU ${last} (taskset -c ${last}), the same for both servers`,
  };
}

// ---- processes -----------------------------------------------------------------------

/**
 * Start a server; it is ready when it prints its first line on stdout (the
 * floor, bench-server), or, with `readyOnStderr`, a line matching it (rocm-ernic logs).
 */
function startServer(prefix: string[], cmd: string, args: string[], readyOnStderr?: RegExp): Promise<ChildProcess> {
  const argv = [...prefix, cmd, ...args];
  return new Promise((resolve, reject) => {
    const p = spawn(argv[0]!, argv.slice(1), { stdio: ['ignore', 'pipe', readyOnStderr ? 'pipe' : 'inherit'] });
    p.once('error', reject);
    p.once('exit', (code) => reject(new Error(`${cmd} exited (${code}) before it was ready`)));
    if (readyOnStderr) {
      let text = '';
      p.stderr!.on('data', (d: Buffer) => {
        text += d.toString();
        if (readyOnStderr.test(text)) {
          text = '';
          resolve(p);
        }
      });
    } else {
      p.stdout!.once('data', () => resolve(p));
    }
  });
}

/** Wait for a server that exits when its client leaves (`kill` for one that does not). */
function stopServer(p: ChildProcess, kill = false): Promise<void> {
  return new Promise((resolve) => {
    if (p.exitCode !== null || p.signalCode !== null) {
      resolve();
      return;
    }
    const timer = setTimeout(() => p.kill(), kill ? 0 : 2000);
    p.once('exit', () => {
      clearTimeout(timer);
      resolve();
    });
  });
}

function run(argv: string[]): Promise<void> {
  return new Promise((resolve, reject) => {
    const p = spawn(argv[0]!, argv.slice(1), { stdio: ['ignore', 'inherit', 'inherit'] });
    p.once('error', reject);
    p.once('exit', (code) => (code === 0 ? resolve() : reject(new Error(`${argv.join(' ')} exited with ${code}`))));
  });
}

// ---- round trips -----------------------------------------------------------------------

interface Samples {
  warm: number[];
  measured: number[];
  rounds: Stats[];
}

interface Ours {
  label: string;
  sock: string;
  server: Server;
  samples: Samples;
  posted: number;
}

interface Server {
  start(): Promise<ChildProcess>;
  /** It stays up after its client leaves. */
  readonly kill: boolean;
}

/** One round: a fresh server, one connection, WARMUP + ROUND_TRIPS round trips. Times in us. */
async function roundTrips(server: Server, sock: string, rtt: string, pin: Pinning, into: Samples): Promise<void> {
  const p = await server.start();
  const file = path.join(OUT, `rtt-${process.pid}.bin`);
  try {
    await run([...pin.client, rtt, sock, String(WARMUP + ROUND_TRIPS), file]);
  } finally {
    await stopServer(p, server.kill);
  }
  const raw = fs.readFileSync(file);
  fs.unlinkSync(file);
  const round: number[] = [];
  for (let i = 0; i < WARMUP + ROUND_TRIPS; i++) {
    const us = raw.readUInt32LE(i * 4) / 1000;
    (i < WARMUP ? into.warm : into.measured).push(us);
    round.push(us);
  }
  into.rounds.push(stats(round));
}

interface Stats {
  median: number;
  p99: number;
  p999: number;
  max: number;
  over1ms: number;
  n: number;
}

function stats(samples: number[]): Stats {
  const s = Float64Array.from(samples).sort();
  const at = (q: number): number => s[Math.min(s.length - 1, Math.floor(s.length * q))]!;
  let over = 0;
  for (const x of s) if (x > 1000) over++;
  return { median: at(0.5), p99: at(0.99), p999: at(0.999), max: s[s.length - 1]!, over1ms: over, n: s.length };
}

// ---- posted writes -----------------------------------------------------------------------

async function postedRate(sock: string): Promise<number> {
  const c = await VfioUserClient.connect(sock);
  for (let i = 0; i < 2000; i++) await c.regionRead(0, 0, 4);
  const data = Buffer.from([1, 2, 3, 4]);
  const t0 = process.hrtime.bigint();
  for (let i = 0; i < POSTED; i++) {
    c.postRegionWrite(0, (i & 63) * 4, data);
    if (i % BATCH === BATCH - 1) c.flush();
    // Keep the pipe from filling: every so often wait for the server to catch up.
    if (i % 8192 === 8191) await c.regionRead(0, 0, 4);
  }
  await c.regionRead(0, 0, 4);
  const secs = Number(process.hrtime.bigint() - t0) / 1e9;
  c.close();
  return POSTED / secs;
}

// ---- machine load ----------------------------------------------------------------------

/** CPU time from /proc/stat, in ticks: [steal, total]. */
function cpuTicks(): [number, number] {
  try {
    const f = fs.readFileSync('/proc/stat', 'utf8').split('\n')[0]!.trim().split(/\s+/).slice(1).map(Number);
    return [f[7] ?? 0, f.reduce((a, b) => a + b, 0)];
  } catch {
    return [0, 0];
  }
}

async function main(): Promise<void> {
  fs.mkdirSync(OUT, { recursive: true });
  const floorBin = path.join(OUT, 'vfu-floor');
  const rttBin = path.join(OUT, 'vfu-rtt');
  execFileSync('cc', ['-O2', '-o', floorBin, path.join(ROOT, 'bench', 'floor', 'vfu-floor.c')]);
  execFileSync('cc', ['-O2', '-o', rttBin, path.join(ROOT, 'bench', 'floor', 'vfu-rtt.c')]);
  const pin = choosePinning();
  // All threads of this process: it is the client of the posted writes.
  if (pin.self !== null)
    execFileSync('taskset', ['-a', '-p', '-c', pin.self, String(process.pid)], { stdio: 'ignore' });
  const load0 = os.loadavg()[0]!;
  const [steal0, total0] = cpuTicks();

  const floorSock = path.join(OUT, `floor-${process.pid}.sock`);
  const floorServer: Server = { start: () => startServer(pin.server, floorBin, [floorSock]), kill: false };
  // The servers measured against the floor: the real one always, the stand-in on request.
  const realSock = path.join(OUT, `ours-${process.pid}.sock`);
  const ourServers: Ours[] = [
    {
      label: 'rocm-ernic (BAR0)',
      sock: realSock,
      samples: { warm: [], measured: [], rounds: [] },
      posted: 0,
      server: {
        start: () =>
          startServer(
            pin.server,
            process.execPath,
            [path.join(__dirname, '..', 'bin', 'rocm-ernic.js'), '--socket', realSock, '-L', 'info'],
            /serving/,
          ),
        kill: true,
      },
    },
  ];
  if (process.env.BENCH_STANDIN === '1') {
    const sock = path.join(OUT, `standin-${process.pid}.sock`);
    ourServers.push({
      label: 'stand-in (4 KiB BAR)',
      sock,
      samples: { warm: [], measured: [], rounds: [] },
      posted: 0,
      server: {
        start: () =>
          startServer(pin.server, process.execPath, [path.join(__dirname, 'support', 'bench-server.js'), sock]),
        kill: false,
      },
    });
  }

  const floor: Samples = { warm: [], measured: [], rounds: [] };
  for (let r = 0; r < ROUNDS; r++) {
    await roundTrips(floorServer, floorSock, rttBin, pin, floor);
    for (const o of ourServers) await roundTrips(o.server, o.sock, rttBin, pin, o.samples);
  }

  let p = await floorServer.start();
  const floorPosted = await postedRate(floorSock);
  await stopServer(p);
  for (const o of ourServers) {
    p = await o.server.start();
    o.posted = await postedRate(o.sock);
    await stopServer(p, o.server.kill);
  }

  const [steal1, total1] = cpuTicks();
  const f = stats(floor.measured);
  const fw = stats(floor.warm);
  const real = ourServers[0]!;
  const o = stats(real.samples.measured);
  const ow = stats(real.samples.warm);
  const fmt = (n: number, w = 9): string => n.toFixed(1).padStart(w);
  const ratio = (a: number, b: number, w = 8): string => `${(a / b).toFixed(1).padStart(w)}x`;
  const stealPct = total1 > total0 ? (100 * (steal1 - steal0)) / (total1 - total0) : 0;

  console.log(
    `protocol benchmark: ${ROUNDS} rounds per server (alternating), each ${WARMUP} warm-up + ${ROUND_TRIPS} measured REGION_READ round trips`,
  );
  console.log(
    `  timed by a C client (bench/floor/vfu-rtt.c, blocking reads, one request at a time); posted writes from the TypeScript client`,
  );
  console.log(`  pinning: ${pin.describe}`);
  console.log(
    `  machine: ${os.cpus().length} CPUs, load average ${load0.toFixed(2)} at start, CPU steal ${stealPct.toFixed(1)}% during the run`,
  );
  console.log(`round trip, us (after warm-up: ${f.n} samples each)`);
  console.log(`                          median       p99     p99.9       max  over 1 ms   warm-up p99  (max)`);
  const row = (name: string, s: Stats, w: Stats): void =>
    console.log(
      `  ${name.padEnd(20)} ${fmt(s.median)} ${fmt(s.p99)} ${fmt(s.p999)} ${fmt(s.max)} ${String(s.over1ms).padStart(10)} ${fmt(w.p99, 13)}  (${w.max.toFixed(0)})`,
    );
  row('floor (C, no work)', f, fw);
  for (const x of ourServers) {
    const m = stats(x.samples.measured);
    const w = stats(x.samples.warm);
    row(x.label, m, w);
    console.log(
      `  ${'  ratio to floor'.padEnd(20)}${ratio(m.median, f.median)}${ratio(m.p99, f.p99, 9)}${ratio(m.p999, f.p999, 9)}${ratio(m.max, f.max, 9)}${''.padStart(11)}${ratio(w.p99, fw.p99, 13)}`,
    );
  }
  const perRound = (x: Samples): string => x.rounds.map((r) => `${r.p999.toFixed(0)}/${r.over1ms}`).join('  ');
  console.log(
    `  per round, warm-up included (p99.9 us / samples over 1 ms): floor ${perRound(floor)}; ${ourServers.map((x) => `${x.label} ${perRound(x.samples)}`).join('; ')}`,
  );
  console.log(`posted writes/s (TypeScript client, same pinning)`);
  console.log(
    `  floor ${floorPosted.toFixed(0)}   ${ourServers.map((x) => `${x.label} ${x.posted.toFixed(0)} (${(x.posted / floorPosted).toFixed(2)}x)`).join('   ')}`,
  );
  const oursPosted = real.posted;
  const met = (ok: boolean): string => (ok ? 'met' : 'NOT met');
  const oursOver = o.over1ms + ow.over1ms;
  console.log(`goals (on ${real.label}):`);
  console.log(`  median within 2x of the floor: ${met(o.median <= 2 * f.median)}`);
  console.log(`  p99.9 within 2x of the floor: ${met(o.p999 <= 2 * f.p999)}`);
  console.log(
    `  no sample over 1 ms: ${met(oursOver === 0)} (ours: ${o.over1ms} after warm-up + ${ow.over1ms} in warm-up windows; floor: ${f.over1ms} + ${fw.over1ms}${f.over1ms + fw.over1ms > 0 ? ': the machine stalled the floor too' : ''})`,
  );
  console.log(`  posted writes above 200,000/s: ${met(oursPosted > 200000)}`);
}

main().catch((e: unknown) => {
  console.error(e);
  process.exit(1);
});
