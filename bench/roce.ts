// RDMA between two servers as RoCEv2 on an Ethernet wire (`--backend roce`),
// beside the TCP mesh, in the same run. Four rocm-ernic server processes:
// A and B with `--backend roce --tap`, their TAPs on one Linux bridge (made
// here, MTU 9000, so a 4096-byte path MTU fits; needs root), and C and D
// joined by the TCP mesh on loopback (manager and worker). Each server is
// driven by its own guest model in this process (spec/support/ionic: ionic.ko
// probe, ionic_rdma boot, the verbs helper), with one RC QP connected to its
// partner's; every WQE is an RDMA WRITE from the left guest's MR into the
// right guest's.
//
//   Latency: one signaled 8-byte WRITE at a time, doorbell to CQE seen in the
//     sender's CQ (polled after each turn of the event loop); median and p99.
//   Throughput: 1 MiB WRITEs with BENCH_ROCE_WINDOW in flight for
//     BENCH_ROCE_SECS seconds per round; MB/s (10^6 bytes). The right MR is
//     zeroed before each round and checked byte for byte after it: a round
//     that moved nothing fails. The guest waits for CQEs as bench:mesh's does
//     (BENCH_MESH_WAIT, nap by default: asleep between peeks at the CQ).
//   RoCE and mesh rounds alternate (BENCH_ROCE_ROUNDS each) after a warm-up,
//     and are pooled, so a change in the machine's load lands on both.
//   Wire ceiling: before the servers start, a writer in this process and a
//     reader in a child move path-MTU frames across the same bridge, one
//     TAP write per frame (bench/support/tap-wire.ts): the most a design
//     that writes each frame to the TAP can reach here. Then the same with
//     UDP segmentation offload on both TAPs (15 packets per write and read):
//     what a sender that hands the TAP GSO buffers could reach.
//   Also: the RoCE transport's counters of the sending server (packets,
//     retransmits, NAKs) from its stats file.
//
// Goal (informational): RoCE 1 MiB WRITE throughput >= 0.8x the mesh's.
// Prints figures; asserts nothing.
//
// Env: BENCH_ROCE_LAT (latency samples, 1000), BENCH_ROCE_WINDOW (16),
// BENCH_ROCE_SECS (3), BENCH_ROCE_ROUNDS (3), BENCH_ROCE_PMTU (log2 of the
// path MTU, 8-12, 12), BENCH_ROCE_USO (1: the servers run with --tap-uso; 0: one TAP write per packet).

import { execFileSync } from 'child_process';
import { randomFillSync } from 'crypto';
import * as fs from 'fs';
import * as os from 'os';
import { v4 } from '../spec/support/ionic/rdma-verbs';
import { QpF } from '../spec/support/ionic/rdma-regs';
import { cleanupSync, Server, startServer, stopChild } from './mesh-processes';
import { CqPoller, connectSide, guestSide, Side } from './mesh-guest';
import { envNumber } from './support/env';
import { rdmaThroughput, verify } from './mesh-writes';
import { freePort } from './support/free-port';
import { tapWireRate } from './support/tap-wire';

const KiB = 1024;
const MiB = 1024 * KiB;
const BIG = MiB;
const LAT_N = envNumber('BENCH_ROCE_LAT', 1000, 10, 100000);
const WINDOW = envNumber('BENCH_ROCE_WINDOW', 16, 1, 64);
const SECS = envNumber('BENCH_ROCE_SECS', 3, 1, 120, false);
const ROUNDS = envNumber('BENCH_ROCE_ROUNDS', 3, 1, 20);
const PMTU_LOG2 = envNumber('BENCH_ROCE_PMTU', 12, 8, 12);
const IP_A = '10.26.9.1';
const IP_B = '10.26.9.2';
const MAC_A = Buffer.from('02726f63650a', 'hex');
const MAC_B = Buffer.from('02726f63650b', 'hex');
const QP_A = 20;
const QP_B = 30;
const SHAPE = { mrBytes: WINDOW * BIG, cqId: 5, cqLog2: 8, sqLog2: 6 } as const;
const LAT_SLOTS = 512;
/** BENCH_ROCE_USO (1): the RoCE servers' TAPs take UDP GSO buffers (--tap-uso). */
const USO_FLAG = envNumber('BENCH_ROCE_USO', 1, 0, 1) === 1 ? ['--tap-uso'] : ['--no-tap-uso'];
/** A path-MTU RoCEv2 frame of a middle WRITE packet: Ethernet, IPv4, UDP, BTH, payload, ICRC. */
const WIRE_FRAME = 14 + 20 + 8 + 12 + (1 << PMTU_LOG2) + 4;

const now = (): bigint => process.hrtime.bigint();
const secsSince = (t0: bigint): number => Number(now() - t0) / 1e9;
const turn = (): Promise<void> => new Promise((r) => setImmediate(r));
const fmt = (v: number, digits = 0): string =>
  v.toLocaleString('en-US', { maximumFractionDigits: digits, minimumFractionDigits: digits });

/** A bridge and two TAPs on it, removed again on exit. */
class Bridge {
  readonly br: string;
  readonly taps: [string, string];
  constructor(tag: string) {
    this.br = `erbr${tag}`;
    this.taps = [`erta${tag}`, `ertb${tag}`];
  }
  up(): void {
    const ip = (...args: string[]): void => {
      execFileSync('ip', args, { stdio: ['ignore', 'ignore', 'pipe'] });
    };
    ip('link', 'add', 'name', this.br, 'type', 'bridge');
    ip('link', 'set', this.br, 'mtu', '9000', 'up');
    for (const t of this.taps) {
      ip('tuntap', 'add', 'dev', t, 'mode', 'tap');
      ip('link', 'set', t, 'mtu', '9000', 'master', this.br, 'up');
    }
  }
  down(): void {
    for (const dev of [...this.taps, this.br]) {
      try {
        execFileSync('ip', ['link', 'del', dev], { stdio: 'ignore' });
      } catch {
        /* gone */
      }
    }
  }
}

/** Post an RDMA WRITE of the left MR's bytes [off, off + len) into the right MR at the same offset (no doorbell). */
function postWrite(a: Side, b: Side, id: number, off: number, len: number): void {
  a.v.postSend(
    a.qp,
    { op: 4 /* RDMA_WRITE */, id, sges: [a.mr.sge(off, len)], remote: { va: b.mr.va + off, rkey: b.mr.key } },
    false,
  );
}

async function latency(a: Side, b: Side, cq: CqPoller, n: number): Promise<Float64Array> {
  const out = new Float64Array(n);
  for (let i = 0; i < n; i++) {
    postWrite(a, b, i, (i % LAT_SLOTS) * 8, 8);
    const t0 = now();
    a.v.ringSq(a.qp);
    let got = cq.poll();
    while (got === 0) {
      await turn();
      got = cq.poll();
      if (got === 0 && secsSince(t0) > 5) throw new Error(`latency: no CQE 5 s after the doorbell (op ${i})`);
    }
    out[i] = Number(now() - t0) / 1000;
  }
  cq.report();
  return out.sort();
}

interface Rate {
  bytes: number;
  secs: number;
  /** CPU ms of the sending server, the receiving server and this process (the guests). */
  cpu: [number, number, number];
}

/**
 * `secs` of 1 MiB WRITEs, WINDOW in flight; the guest waits for CQEs as bench:mesh's does (BENCH_MESH_WAIT, nap
 * by default: a guest that spun here would take one of a 2-core machine's cores from the servers).
 */
async function throughput(a: Side, b: Side, cq: CqPoller, secs: number, pids: readonly number[]): Promise<Rate> {
  b.bytes.fill(0, 0, WINDOW * BIG);
  const r = await rdmaThroughput(a, b, cq, [...pids], WINDOW, secs, 0, BIG, secs + 30);
  verify(a, b, Math.min(r.bytes / BIG, WINDOW) * BIG, 'throughput');
  return { bytes: r.bytes, secs: r.secs, cpu: [r.cpu.peer[0]!.all, r.cpu.peer[1]!.all, r.cpu.self.all] };
}

const mbps = (r: Rate): number => r.bytes / r.secs / 1e6;
const pct = (s: Float64Array, q: number): number => s[Math.min(s.length - 1, Math.floor(s.length * q))]!;

interface Pair {
  readonly name: string;
  /** The sending and receiving servers' pids. */
  readonly pids: readonly number[];
  readonly a: Side;
  readonly b: Side;
  readonly cq: CqPoller;
}

/** The RoCE counters the sending server's stats file shows (RoCE Statistics), by name. */
function roceCounters(statsFile: string): Map<string, number> {
  const out = new Map<string, number>();
  let text = '';
  try {
    text = fs.readFileSync(statsFile, 'utf8');
  } catch {
    return out;
  }
  const at = text.indexOf('RoCE Statistics:');
  if (at < 0) return out;
  for (const line of text.slice(at).split('\n').slice(1)) {
    const m = /^\s+(\w+)\s*:\s*(\d+)/.exec(line);
    if (!m) break;
    out.set(m[1]!, Number(m[2]));
  }
  return out;
}

async function main(): Promise<void> {
  if (process.getuid?.() !== 0) throw new Error('bench:roce needs root (it makes a bridge and two TAPs)');
  const tag = String(process.pid % 100000);
  const bridge = new Bridge(tag);
  const servers: Server[] = [];
  const sides: Side[] = [];
  const statsA = `/tmp/ernic-roce-bench-${tag}-a.stats`;
  const statsB = `/tmp/ernic-roce-bench-${tag}-b.stats`;
  process.on('exit', () => {
    cleanupSync();
    bridge.down();
  });
  try {
    bridge.up();
    const load0 = os.loadavg()[0]!;
    // What the wire allows a design that writes each frame to a TAP, before the servers take the TAPs.
    const wireFps = await tapWireRate(bridge.taps[0], bridge.taps[1], WIRE_FRAME, 2);
    const usoFps = await tapWireRate(bridge.taps[0], bridge.taps[1], WIRE_FRAME, 2, 'uso').catch(() => NaN);
    // The RoCE pair: their TAPs on the bridge.
    for (const [i, name] of ['A', 'B'].entries()) {
      const sock = `/tmp/ernic-roce-bench-${tag}-${name.toLowerCase()}.sock`;
      const extra = ['--tap', bridge.taps[i]!, ...USO_FLAG, '--stats-file', i === 0 ? statsA : statsB];
      servers.push(await startServer(`${name} (roce)`, sock, 'roce', '', [/serving/], extra));
    }
    // The mesh pair on loopback.
    const port = await freePort();
    const sockC = `/tmp/ernic-roce-bench-${tag}-c.sock`;
    const sockD = `/tmp/ernic-roce-bench-${tag}-d.sock`;
    servers.push(
      await startServer('C (mesh manager)', sockC, `tcp:manager:listen:${port}`, `::ffff:${IP_A}`, [/serving/]),
    );
    servers.push(
      await startServer('D (mesh worker)', sockD, `tcp:worker:127.0.0.1:${port}`, `::ffff:${IP_B}`, [
        /serving/,
        /mesh node 1/,
      ]),
    );
    const [ra, rb, ma, mb] = [
      await guestSide(servers[0]!.sock, 0x501, QP_A, SHAPE),
      await guestSide(servers[1]!.sock, 0x702, QP_B, SHAPE),
      await guestSide(sockC, 0x501, QP_A, SHAPE),
      await guestSide(sockD, 0x702, QP_B, SHAPE),
    ];
    sides.push(ra, rb, ma, mb);
    const access = QpF.REMOTE_WRITE | QpF.REMOTE_READ;
    await ra.v.connect(ra.qp, QP_B, {
      access,
      pmtu: PMTU_LOG2,
      tpl: { sip: v4(IP_A), dip: v4(IP_B), smac: MAC_A, dmac: MAC_B },
    });
    await rb.v.connect(rb.qp, QP_A, {
      access,
      pmtu: PMTU_LOG2,
      tpl: { sip: v4(IP_B), dip: v4(IP_A), smac: MAC_B, dmac: MAC_A },
    });
    await connectSide(ma, QP_B, IP_A, IP_B);
    await connectSide(mb, QP_A, IP_B, IP_A);
    const pairs: Pair[] = [
      { name: 'RoCE', pids: [servers[0]!.proc.pid!, servers[1]!.proc.pid!], a: ra, b: rb, cq: new CqPoller(ra) },
      { name: 'mesh', pids: [servers[2]!.proc.pid!, servers[3]!.proc.pid!], a: ma, b: mb, cq: new CqPoller(ma) },
    ];
    for (const p of pairs) randomFillSync(p.a.bytes, 0, WINDOW * BIG);

    // Warm-up (the servers' JIT), then the latency of each.
    for (const p of pairs) await throughput(p.a, p.b, p.cq, 1, p.pids);
    const lat = new Map<string, Float64Array>();
    for (const p of pairs) lat.set(p.name, await latency(p.a, p.b, p.cq, LAT_N));
    const rates = new Map<string, Rate[]>(pairs.map((p) => [p.name, []]));
    for (let r = 0; r < ROUNDS; r++) {
      const order = r % 2 === 0 ? pairs : [...pairs].reverse();
      for (const p of order) rates.get(p.name)!.push(await throughput(p.a, p.b, p.cq, SECS, p.pids));
    }
    await new Promise((r) => setTimeout(r, 1500)); // one more stats-file write
    const pooled = (name: string): Rate =>
      rates.get(name)!.reduce(
        (t, x) => ({
          bytes: t.bytes + x.bytes,
          secs: t.secs + x.secs,
          cpu: [t.cpu[0] + x.cpu[0], t.cpu[1] + x.cpu[1], t.cpu[2] + x.cpu[2]] as [number, number, number],
        }),
        { bytes: 0, secs: 0, cpu: [0, 0, 0] as [number, number, number] },
      );
    const roce = pooled('RoCE');
    const mesh = pooled('mesh');
    const lr = lat.get('RoCE')!;
    const lm = lat.get('mesh')!;
    const out: string[] = [];
    out.push(
      `bench:roce  ${new Date().toISOString()}  node ${process.version}  ${os.cpus().length} CPUs, load ${fmt(load0, 2)}`,
    );
    out.push(
      `wire: two TAPs on Linux bridge ${bridge.br} (MTU 9000), path MTU ${1 << PMTU_LOG2}; mesh: TCP on loopback (plaintext)`,
    );
    out.push('');
    out.push(`8 B WRITE round trip (${LAT_N} samples, doorbell to CQE):`);
    out.push(`  RoCE   median ${fmt(pct(lr, 0.5), 1)} us   p99 ${fmt(pct(lr, 0.99), 1)} us`);
    out.push(`  mesh   median ${fmt(pct(lm, 0.5), 1)} us   p99 ${fmt(pct(lm, 0.99), 1)} us`);
    out.push(`  ratio RoCE/mesh (median): ${fmt(pct(lr, 0.5) / pct(lm, 0.5), 2)}x`);
    out.push('');
    out.push(`1 MiB WRITE throughput (window ${WINDOW}, ${ROUNDS} rounds of ${SECS} s each, alternating):`);
    out.push(
      `  RoCE   ${fmt(mbps(roce))} MB/s   rounds: ${rates
        .get('RoCE')!
        .map((x) => fmt(mbps(x)))
        .join(', ')}`,
    );
    out.push(
      `  mesh   ${fmt(mbps(mesh))} MB/s   rounds: ${rates
        .get('mesh')!
        .map((x) => fmt(mbps(x)))
        .join(', ')}`,
    );
    out.push(`  ratio RoCE/mesh: ${fmt(mbps(roce) / mbps(mesh), 2)}x (goal >= 0.80x)`);
    const wireMBps = (wireFps * (1 << PMTU_LOG2)) / 1e6;
    out.push(
      `  wire ceiling: one process writing ${fmt(WIRE_FRAME)}-byte frames to TAP ${bridge.taps[0]} as fast as it can,` +
        ` another reading ${bridge.taps[1]}: ${fmt(wireFps)} frames/s across the bridge,`,
    );
    out.push(
      `    ${fmt(wireMBps)} MB/s of payload at one frame per path MTU: ${fmt(wireMBps / mbps(mesh), 2)}x the mesh` +
        ` (the most any one-write-per-frame design reaches); RoCE is at ${fmt(mbps(roce) / wireMBps, 2)}x of it`,
    );
    const usoMBps = (usoFps * (1 << PMTU_LOG2)) / 1e6;
    out.push(
      Number.isFinite(usoFps)
        ? `  the same wire with UDP segmentation offload (15 packets per write and per read, TUN_F_USO4/6):` +
            ` ${fmt(usoFps)} packets/s, ${fmt(usoMBps)} MB/s of payload: ${fmt(usoMBps / mbps(mesh), 2)}x the mesh`
        : `  the same wire with UDP segmentation offload: not measured (this kernel's TAP refuses TUN_F_USO4/6)`,
    );
    const perMiB = (r: Rate, i: number): string => fmt(r.cpu[i]! / (r.bytes / MiB), 2);
    const busy = (r: Rate, i: number): string => fmt((100 * r.cpu[i]!) / (r.secs * 1000));
    for (const [name, r] of [
      ['RoCE', roce],
      ['mesh', mesh],
    ] as const)
      out.push(
        `  ${name} CPU ms per MiB: sender ${perMiB(r, 0)}, receiver ${perMiB(r, 1)}, guests ${perMiB(r, 2)}` +
          ` (busy ${busy(r, 0)}%, ${busy(r, 1)}%, ${busy(r, 2)}% of the run)`,
      );
    const c = roceCounters(statsA);
    if (c.size > 0) {
      const keys = [
        'tx_packets',
        'rx_packets',
        'acks_rx',
        'retransmits',
        'timeouts',
        'naks_rx_psn_sequence',
        'icrc_errors',
      ];
      out.push('');
      out.push(`server A's RoCE counters: ${keys.map((k) => `${k} ${fmt(c.get(k) ?? 0)}`).join(', ')}`);
    }
    const cb = roceCounters(statsB);
    const bKeys = ['rx_packets', 'acks_tx', 'duplicates', 'naks_tx_psn_sequence'];
    const drops = [...cb].filter(([k, v]) => k.startsWith('drops_') && v > 0).map(([k, v]) => `${k} ${fmt(v)}`);
    if (cb.size > 0)
      out.push(
        `server B's RoCE counters: ${[...bKeys.map((k) => `${k} ${fmt(cb.get(k) ?? 0)}`), ...drops].join(', ')}`,
      );
    process.stdout.write(`${out.join('\n')}\n`);
  } finally {
    for (const s of sides) s.g.dispose();
    for (const s of servers) await stopChild(s.proc);
    bridge.down();
    for (const f of [statsA, statsB]) {
      try {
        fs.unlinkSync(f);
      } catch {
        /* none */
      }
    }
  }
}

main().catch((e: unknown) => {
  process.stderr.write(`bench:roce: ${(e as Error).message}\n`);
  process.exitCode = 1;
});
