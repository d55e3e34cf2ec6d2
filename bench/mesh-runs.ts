// bench/mesh.ts run several times (BENCH_MESH_RUNS > 1): each run is the whole measurement in fresh processes (the
// script again as a child with BENCH_MESH_RUN_OF set), which hands its figures back on one RESULT_TAG line; the
// parent prints a line per run, the median run's report in full, and the verdicts on the median.

import { spawn } from 'child_process';
import { fmt } from './support/format';
import { trackChild, untrackChild } from './mesh-processes';

/** Starts the line a run's child hands its parent its figures on (JSON after it). */
export const RESULT_TAG = '#mesh-run-result ';

const MiB = 1024 * 1024;

/** The script to run again, how many times, and the throughput message size (bytes, and as printed). */
interface SeveralRuns {
  script: string;
  runs: number;
  size: number;
  sizeText: string;
}

/** What one run hands its parent (the last line of its output, after RESULT_TAG). */
export interface RunResult {
  ratio: number;
  ours: number;
  raw: number;
  lat: number | null;
  cpuA: number;
  cpuB: number;
  cpuSender: number;
  cpuReceiver: number;
  /** Over TLS (null: BENCH_MESH_TLS=0). */
  tlsRatio: number | null;
  tlsOurs: number | null;
  tlsRaw: number | null;
  /** The 8 B round trip over TLS against raw TLS's ping-pong, medians. */
  tlsLat: number | null;
}

/**
 * BENCH_MESH_RUNS > 1: the whole measurement again in fresh processes each
 * time (this script as a child with BENCH_MESH_RUN_OF set), a line per run as
 * it ends, the median run's report in full and the verdict on the median.
 * Fresh processes because what moves the ratio most is per process lifetime
 * (in one run raw TCP held 4,500-4,750 MB/s in all three rounds, in the next
 * 3,350-4,000), which rounds within a run cannot average out.
 */
export async function severalRuns(o: SeveralRuns): Promise<void> {
  const results: { r: RunResult; out: string }[] = [];
  console.log(
    `mesh benchmark: ${o.runs} runs, each in fresh processes (BENCH_MESH_RUNS); the median run's report follows them`,
  );
  for (let i = 1; i <= o.runs; i++) {
    const child = spawn(process.execPath, [o.script], {
      env: { ...process.env, BENCH_MESH_RUN_OF: `${i}/${o.runs}` },
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    trackChild(child);
    let out = '';
    child.stdout!.setEncoding('utf8');
    child.stdout!.on('data', (d: string) => {
      out += d;
    });
    const code = await new Promise<number | null>((r) => child.on('close', (c) => r(c)));
    untrackChild(child);
    const line = out.split('\n').find((l) => l.startsWith(RESULT_TAG));
    if (code !== 0 || !line) {
      process.stdout.write(out);
      throw new Error(`run ${i} of ${o.runs} failed (exit ${code}); its output is above`);
    }
    const r = JSON.parse(line.slice(RESULT_TAG.length)) as RunResult;
    results.push({
      r,
      out: out
        .split('\n')
        .filter((l) => !l.startsWith(RESULT_TAG))
        .join('\n'),
    });
    console.log(
      `  run ${i}/${o.runs}: ${o.sizeText} WRITEs ${r.ratio.toFixed(3)}x raw (${fmt(r.ours)} against ${fmt(r.raw)} MB/s), ` +
        `CPU ms/MiB A ${fmt(r.cpuA, 2)} B ${fmt(r.cpuB, 2)}, raw sender ${fmt(r.cpuSender, 2)} receiver ${fmt(r.cpuReceiver, 2)}` +
        (r.lat !== null ? `; 8 B round trip ${r.lat.toFixed(2)}x raw` : '') +
        (r.tlsRatio !== null
          ? `; TLS ${r.tlsRatio.toFixed(3)}x raw TLS (${fmt(r.tlsOurs ?? 0)} against ${fmt(r.tlsRaw ?? 0)} MB/s)`
          : '') +
        (r.tlsLat !== null ? `; 8 B round trip over TLS ${r.tlsLat.toFixed(2)}x raw TLS` : ''),
    );
  }
  const sorted = [...results].sort((x, y) => x.r.ratio - y.r.ratio);
  const median = sorted[(sorted.length - 1) >> 1]!;
  console.log('');
  console.log(`---- the median run (${median.r.ratio.toFixed(3)}x) in full ----`);
  console.log(median.out.trimEnd());
  console.log('');
  const ratios = results.map((x) => x.r.ratio);
  const met = ratios.filter((x) => x >= 0.8).length;
  console.log(
    `  ${o.sizeText} WRITE ratio over ${o.runs} runs: median ${median.r.ratio.toFixed(3)}, ` +
      `${sorted[0]!.r.ratio.toFixed(3)}-${sorted[sorted.length - 1]!.r.ratio.toFixed(3)}; ${met} of ${o.runs} runs at >= 0.8`,
  );
  console.log(
    o.size === MiB
      ? `  goal: 1 MiB WRITEs >= 0.8x raw TCP (median run): ${median.r.ratio >= 0.8 ? 'met' : 'NOT met'} (${median.r.ratio.toFixed(3)}x)`
      : `  (the goal is for 1 MiB WRITEs; these runs used ${o.sizeText})`,
  );
  const tls = results
    .map((x) => x.r.tlsRatio)
    .filter((x): x is number => x !== null)
    .sort((x, y) => x - y);
  if (tls.length > 0) {
    const mid = tls[(tls.length - 1) >> 1]!;
    console.log(
      `  ${o.sizeText} WRITE ratio over TLS, ${tls.length} runs: median ${mid.toFixed(3)}, ${tls[0]!.toFixed(3)}-${tls[tls.length - 1]!.toFixed(3)}; ` +
        `${tls.filter((x) => x >= 0.8).length} of ${tls.length} runs at >= 0.8`,
    );
    if (o.size === MiB)
      console.log(
        `  goal: 1 MiB WRITEs over TLS >= 0.8x raw TLS (median of the runs' TLS ratios): ${mid >= 0.8 ? 'met' : 'NOT met'} (${mid.toFixed(3)}x)`,
      );
  }
  // The 8 B round trip against the raw ping-pong, plaintext and over TLS: goal within 3x (median of the runs' ratios).
  for (const [what, pick] of [
    ['', (r: RunResult) => r.lat],
    [' over TLS', (r: RunResult) => r.tlsLat],
  ] as const) {
    const xs = results
      .map((x) => pick(x.r))
      .filter((x): x is number => x !== null)
      .sort((x, y) => x - y);
    if (xs.length === 0) continue;
    const mid = xs[(xs.length - 1) >> 1]!;
    console.log(
      `  goal: 8 B WRITE round trip${what} within 3x the raw ping-pong (median of ${xs.length} runs' ratios, ${xs[0]!.toFixed(2)}-${xs[xs.length - 1]!.toFixed(2)}): ` +
        `${mid <= 3 ? 'met' : 'NOT met'} (${mid.toFixed(2)}x)`,
    );
  }
}
