// RDMA WRITE through the ionic device's loopback data path, driven by the
// guest model (spec/support/ionic: ionic.ko probe, ionic_rdma boot) the way
// libionic drives a QP: WQEs written into the SQ ring in guest memory,
// doorbells as posted BAR2 region writes, the CQ polled by its color bit in
// shared memory (./support/rdma-pair.ts). Two RC QPs of one guest, connected
// to each other; one 8 MiB MR (4 MiB source half, 4 MiB destination half).
//
// The server is the real rocm-ernic binary in its own process (no TAP: the
// loopback data path needs none), so the guest's polling does not share the
// device's event loop.
//
//   Rate: N WRITEs of 8 B, 4 KiB, 64 KiB and 1 MiB, the SQ kept full (one
//     doorbell per 32 WQEs), cycling over slots of the two halves (at most
//     1024 slots, at most 4 MiB each side). The destination is checked
//     against the source after each run: a run that moved nothing fails.
//     Baseline: host memcpy (Buffer.copy) of the same size over the same
//     slots of two 4 MiB Buffers, in this run; printed with the ratio.
//   Latency: one 8-byte WRITE at a time, from the doorbell write to its CQE
//     visible in guest memory (busy poll), median and p99. Baseline: the
//     guest model's smallest server round trip (g.sync(): a BAR0 REGION_READ
//     and its reply), in this run.
//   Also: the server's and the guest's CPU time over each rate run (/proc,
//     process.cpuUsage), as % of the run and (server) per WRITE: the
//     device's cost whatever else the machine was doing, and which side was
//     saturated. The load average is printed with them.
//
// Goals (informational): over 300,000 8-byte WRITEs per second; 1 MiB WRITEs
// at half of memcpy bandwidth or better. Prints figures; asserts nothing.
//
// Env: BENCH_RDMA_8B, BENCH_RDMA_4K, BENCH_RDMA_64K, BENCH_RDMA_1M (op counts),
// BENCH_RDMA_LAT (latency samples), BENCH_RDMA_WAIT (spin | sleep: how the
// guest waits for CQEs in the rate runs), BENCH_RDMA_NODE_FLAGS (extra node flags
// for the server, e.g. "--cpu-prof --cpu-prof-dir=/tmp/prof").

import { randomFillSync } from 'crypto';
import * as fs from 'fs';
import * as os from 'os';
import { IonicGuest } from '../spec/support/ionic/guest';
import { RdmaGuest } from '../spec/support/ionic/rdma-guest';
import { fmt } from './support/format';
import { RdmaPair } from './support/rdma-pair';
import { ServerProcess, startServerProcess, stopProcess } from './support/server-process';
import { cpuMs } from './support/cpu';

const KiB = 1024;
const MiB = 1024 * KiB;
const SQ_LOG2 = 10;
const BATCH = 32;
const MR_BYTES = 8 * MiB;
const MAX_SLOTS = 1024;
const LAT_N = Number(process.env.BENCH_RDMA_LAT ?? 2000);
const SIZES: readonly { size: number; n: number; label: string }[] = [
  { size: 8, n: Number(process.env.BENCH_RDMA_8B ?? 200000), label: '8 B' },
  { size: 4 * KiB, n: Number(process.env.BENCH_RDMA_4K ?? 50000), label: '4 KiB' },
  { size: 64 * KiB, n: Number(process.env.BENCH_RDMA_64K ?? 40000), label: '64 KiB' },
  { size: MiB, n: Number(process.env.BENCH_RDMA_1M ?? 4000), label: '1 MiB' },
];

/**
 * What the guest does when its CQ has nothing new: 'spin' (default) yields
 * with setImmediate and polls again, as libionic's busy poll does; 'sleep'
 * gives the CPU away for a timer tick (~1 ms; the SQ holds more than that
 * much work), for a machine with fewer free cores than the two processes.
 */
const WAIT = process.env.BENCH_RDMA_WAIT === 'sleep' ? 'sleep' : 'spin';
const immediate = (): Promise<void> =>
  new Promise((r) => {
    if (WAIT === 'sleep') setTimeout(r, 0);
    else setImmediate(r);
  });
const now = (): bigint => process.hrtime.bigint();
const secsSince = (t0: bigint): number => Number(now() - t0) / 1e9;

function slotsFor(size: number, half: number): number {
  return Math.max(1, Math.min(MAX_SLOTS, Math.floor(half / size)));
}

/** N WRITEs of `size` with the SQ kept full; seconds. */
async function writeRun(p: RdmaPair, size: number, n: number): Promise<number> {
  const slots = slotsFor(size, p.half);
  p.setSize(size);
  let posted = 0;
  let done = 0;
  const room = p.sqSize - 1;
  const t0 = now();
  while (done < n) {
    p.maybeRingCq();
    for (;;) {
      const want = Math.min(BATCH, n - posted);
      if (want === 0 || room - (posted - done) < want) break;
      for (let k = 0; k < want; k++, posted++) {
        const off = (posted % slots) * size;
        p.write(p.src + off, p.dst + off);
      }
      p.ringSq();
    }
    const got = p.poll();
    done += got;
    if (got === 0) await immediate();
  }
  const secs = secsSince(t0);
  p.ringCq();
  return secs;
}

/** Fill the source slots with fresh random bytes and zero the destination slots. */
function prepare(p: RdmaPair, bytes: number): void {
  randomFillSync(p.ram, p.src - p.g.base, bytes);
  p.ram.fill(0, p.dst - p.g.base, p.dst - p.g.base + bytes);
}

function verify(p: RdmaPair, bytes: number, what: string): void {
  const s = p.ram.subarray(p.src - p.g.base, p.src - p.g.base + bytes);
  const d = p.ram.subarray(p.dst - p.g.base, p.dst - p.g.base + bytes);
  if (!s.equals(d)) throw new Error(`${what}: the destination does not hold the source bytes; no figure`);
}

/** Host memcpy over the same slots, repeated for at least 200 ms; ops per second. */
function memcpyRate(size: number, n: number, half: number): number {
  const slots = slotsFor(size, half);
  const a = Buffer.allocUnsafeSlow(slots * size);
  const b = Buffer.allocUnsafeSlow(slots * size);
  randomFillSync(a);
  b.fill(0);
  let ops = 0;
  const t0 = now();
  let secs = 0;
  do {
    for (let i = 0; i < n; i++) {
      const off = (i % slots) * size;
      a.copy(b, off, off, off + size);
    }
    ops += n;
    secs = secsSince(t0);
  } while (secs < 0.2);
  if (!a.equals(b) && n >= slots) throw new Error('memcpy baseline: copy mismatch');
  return ops / secs;
}

function pct(sorted: Float64Array, q: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * q))]!;
}

/** One 8-byte WRITE at a time: doorbell write to CQE visible, in microseconds. */
function latency(p: RdmaPair, n: number): Float64Array {
  p.setSize(8);
  const out = new Float64Array(n);
  for (let i = 0; i < n; i++) {
    const off = (i % 64) * 8;
    p.write(p.src + off, p.dst + off);
    const t0 = now();
    p.ringSq();
    for (let spins = 1; !p.ready(); spins++) {
      if ((spins & 0xfff) === 0 && secsSince(t0) > 2)
        throw new Error(`latency: no CQE 2 s after the doorbell (op ${i})`);
    }
    out[i] = Number(now() - t0) / 1000;
    if (p.poll() !== 1) throw new Error('latency: more than one CQE for one WQE');
    p.maybeRingCq();
  }
  p.ringCq();
  return out.sort();
}

async function syncLatency(g: IonicGuest, n: number): Promise<Float64Array> {
  const out = new Float64Array(n);
  for (let i = 0; i < n; i++) {
    const t0 = now();
    await g.sync();
    out[i] = Number(now() - t0) / 1000;
  }
  return out.sort();
}

function startServer(sock: string): Promise<ServerProcess> {
  const nodeFlags = (process.env.BENCH_RDMA_NODE_FLAGS ?? '').split(/\s+/).filter(Boolean);
  return startServerProcess({ sock, args: ['-L', 'info'], nodeFlags });
}

async function main(): Promise<void> {
  const sock = `/tmp/ernic-rdma-bench-${process.pid}.sock`;
  const server = await startServer(sock);
  let g: IonicGuest | null = null;
  try {
    g = await IonicGuest.connect(sock, { ramSize: 64 << 20 });
    await g.probe();
    const r = await RdmaGuest.boot(g, { cpus: 8 });
    const p = await RdmaPair.create(g, r, { sqLog2: SQ_LOG2, mrBytes: MR_BYTES });

    // Warm both sides (JIT) with every size: up to 4000 WRITEs, at least 64 or 4 MiB.
    for (const s of SIZES)
      if (s.n > 0) await writeRun(p, s.size, Math.min(s.n, 4000, Math.max(64, (4 * MiB) / s.size)));

    const pid = server.proc.pid!;
    const load0 = os.loadavg()[0]!;
    console.log(
      `rdma benchmark (server: rocm-ernic in its own process, loopback data path; guest: the ionic.ko + ionic_rdma model;`,
    );
    console.log(
      `  RC RDMA WRITE QP ${p.sqSize} deep, one doorbell per ${BATCH} WQEs, CQ ${p.cqSize} polled by color (${WAIT}); MR ${MR_BYTES / MiB} MiB over 4 KiB pages)`,
    );
    console.log('');
    console.log(
      `  ${'size'.padStart(7)} ${'ops'.padStart(8)} | ${'device ops/s'.padStart(12)} ${'MiB/s'.padStart(9)} | ${'memcpy ops/s'.padStart(13)} ${'MiB/s'.padStart(9)} | ${'ratio'.padStart(6)} | server CPU  us/op | guest CPU`,
    );
    const figures = new Map<number, { ops: number; ratio: number; usPerOp: number; base: number }>();
    for (const s of SIZES) {
      if (!(s.n > 0)) continue;
      const slots = slotsFor(s.size, p.half);
      const bytes = Math.min(s.n, slots) * s.size;
      prepare(p, bytes);
      const c0 = cpuMs(pid);
      const u0 = process.cpuUsage();
      const secs = await writeRun(p, s.size, s.n);
      const u = process.cpuUsage(u0);
      const c1 = cpuMs(pid);
      verify(p, bytes, `${s.label} WRITE`);
      const ops = s.n / secs;
      const base = memcpyRate(s.size, s.n, p.half);
      const ratio = ops / base;
      const usPerOp = ((c1 - c0) * 1000) / s.n;
      figures.set(s.size, { ops, ratio, usPerOp, base });
      console.log(
        `  ${s.label.padStart(7)} ${String(s.n).padStart(8)} | ${fmt(ops).padStart(12)} ${fmt((ops * s.size) / MiB).padStart(9)} | ${fmt(base).padStart(13)} ${fmt((base * s.size) / MiB).padStart(9)} | ${ratio.toFixed(3).padStart(6)} | ${fmt((100 * (c1 - c0)) / 1000 / secs).padStart(9)}% ${fmt(usPerOp, 2).padStart(6)} | ${fmt((100 * (u.user + u.system)) / 1e6 / secs).padStart(8)}%   (${fmt(secs * 1000)} ms)`,
      );
    }

    console.log('');
    if (LAT_N > 0) {
      // Latency: warm up, then measure; the baseline right after.
      latency(p, 200);
      const lat = latency(p, LAT_N);
      await syncLatency(g, 200);
      const rt = await syncLatency(g, LAT_N);
      console.log(
        `  latency, 8 B WRITE, doorbell to CQE in memory (${LAT_N} ops): median ${pct(lat, 0.5).toFixed(1)} us, p99 ${pct(lat, 0.99).toFixed(1)} us`,
      );
      console.log(
        `  baseline, g.sync() round trip (BAR0 REGION_READ + reply):  median ${pct(rt, 0.5).toFixed(1)} us, p99 ${pct(rt, 0.99).toFixed(1)} us   ratio (median) ${(pct(lat, 0.5) / pct(rt, 0.5)).toFixed(2)}`,
      );
      console.log('');
    }
    const small = figures.get(8);
    const big = figures.get(MiB);
    // The CPU-bound figures: what the server's CPU per WRITE allows with a core of its own (clock tick 10 ms).
    const bound = (f: { usPerOp: number }): string => (f.usPerOp > 0 ? fmt(1e6 / f.usPerOp) : '?');
    if (small) {
      console.log(
        `  goal: >300k small (8 B) WRITEs/s: ${small.ops > 300000 ? 'yes' : 'no'} (${fmt(small.ops)}/s; the server's CPU per WRITE allows ${bound(small)}/s)`,
      );
    }
    if (big) {
      const cpuRatio = big.usPerOp > 0 ? (1e6 / big.usPerOp / big.base).toFixed(3) : '?';
      console.log(
        `  goal: 1 MiB WRITEs >= 0.5x memcpy bandwidth: ${big.ratio >= 0.5 ? 'yes' : 'no'} (${big.ratio.toFixed(3)}x; the server's CPU per WRITE allows ${cpuRatio}x)`,
      );
    }
    console.log(
      `  machine: ${os.cpus().length} CPUs, load average ${load0.toFixed(2)} at the start, ${os.loadavg()[0]!.toFixed(2)} at the end (server CPU: % of the run's wall time, and ms of CPU per 1000 WRITEs = us per WRITE)`,
    );
    if (g.violations.length) console.log(`  guest model violations: ${g.violations.join('; ')}`);
    g.dispose();
    g = null;
  } finally {
    g?.dispose();
    await stopProcess(server.proc);
    const extra = server
      .log()
      .split('\n')
      .filter((l) => l.trim() && !/serving|shutting down/.test(l));
    if (extra.length) console.log(`  server said:\n    ${extra.slice(0, 20).join('\n    ')}`);
    try {
      fs.unlinkSync(sock);
    } catch {
      /* gone */
    }
  }
}

main().catch((e: unknown) => {
  console.error(e);
  process.exit(1);
});
