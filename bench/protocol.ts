// Protocol-layer benchmark: from the TypeScript client, the round trip of a
// 4-byte REGION_READ (median, p99) and the rate of posted (NO_REPLY)
// REGION_WRITEs, against our server and, in the same run, against the floor:
// a minimal C program that only reads each message and writes the reply.
// Prints the figures and the ratios. Goals: median within 2x of the floor,
// posted writes above 200,000 per second.

import { ChildProcess, execFileSync, spawn } from 'child_process';
import * as fs from 'fs';
import * as path from 'path';
import { VfioUserClient } from '../lib/vfio-user/client';

const ROOT = path.join(__dirname, '..', '..');
const OUT = path.join(ROOT, 'bench', 'out');
const ROUND_TRIPS = Number(process.env.BENCH_ROUND_TRIPS ?? 20000);
const POSTED = Number(process.env.BENCH_POSTED ?? 200000);
const BATCH = 64;

interface Figures { median: number; p99: number; postedPerSec: number }

function startProcess(cmd: string, args: string[]): Promise<ChildProcess> {
  return new Promise((resolve, reject) => {
    const p = spawn(cmd, args, { stdio: ['ignore', 'pipe', 'inherit'] });
    p.once('error', reject);
    p.stdout!.once('data', () => resolve(p));
  });
}

async function measure(socket: string): Promise<Figures> {
  const c = await VfioUserClient.connect(socket);
  for (let i = 0; i < 2000; i++) await c.regionRead(0, 0, 4);
  const times = new Float64Array(ROUND_TRIPS);
  for (let i = 0; i < ROUND_TRIPS; i++) {
    const t0 = process.hrtime.bigint();
    await c.regionRead(0, 0, 4);
    times[i] = Number(process.hrtime.bigint() - t0) / 1000;
  }
  times.sort();
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
  return { median: times[Math.floor(ROUND_TRIPS / 2)]!, p99: times[Math.floor(ROUND_TRIPS * 0.99)]!, postedPerSec: POSTED / secs };
}

async function main(): Promise<void> {
  fs.mkdirSync(OUT, { recursive: true });
  const floorBin = path.join(OUT, 'vfu-floor');
  execFileSync('cc', ['-O2', '-o', floorBin, path.join(ROOT, 'bench', 'floor', 'vfu-floor.c')]);

  const floorSock = path.join(OUT, `floor-${process.pid}.sock`);
  const floor = await startProcess(floorBin, [floorSock]);
  const f = await measure(floorSock);
  floor.kill();

  const oursSock = path.join(OUT, `ours-${process.pid}.sock`);
  const ours = await startProcess(process.execPath, [path.join(__dirname, 'support', 'bench-server.js'), oursSock]);
  const o = await measure(oursSock);
  ours.kill();

  const fmt = (n: number): string => n.toFixed(1).padStart(9);
  console.log(`protocol benchmark (${ROUND_TRIPS} round trips, ${POSTED} posted writes, TypeScript client)`);
  console.log(`                         median us    p99 us   posted writes/s`);
  console.log(`  floor (C, no work)   ${fmt(f.median)} ${fmt(f.p99)}   ${f.postedPerSec.toFixed(0).padStart(12)}`);
  console.log(`  rocm-ernic server    ${fmt(o.median)} ${fmt(o.p99)}   ${o.postedPerSec.toFixed(0).padStart(12)}`);
  console.log(`  ratio ours/floor     ${fmt(o.median / f.median)}x ${fmt(o.p99 / f.p99)}x  ${(o.postedPerSec / f.postedPerSec).toFixed(2).padStart(12)}x`);
  console.log(`  goals: median within 2x of the floor: ${o.median <= 2 * f.median ? 'met' : 'NOT met'}; posted writes above 200,000/s: ${o.postedPerSec > 200000 ? 'met' : 'NOT met'}`);
}

main().catch((e: unknown) => { console.error(e); process.exit(1); });
