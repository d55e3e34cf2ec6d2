// Frames per second through the P4 engine (issue 15): simple_router with its
// commands.txt (every frame routed: parse Ethernet + IPv4, three table
// lookups, MAC rewrite, TTL-1, checksum update, deparse) against the engine
// with no program (an empty program: nothing parsed, no tables, the frame
// comes out as it went in), both through the same path, in the same run,
// interleaved. Two paths: P4Engine.processReused into the engine's output
// buffer (what the Ethernet segment runs: one result object, no allocation
// per frame, the frame copied into the engine's buffer) and P4Engine.process
// (a new result and a new Buffer per frame). Prints each rate (best round),
// the ratio of the best rounds against the goal (>= 0.5), the spread of the
// per-round ratios (each round's router rate over the no-program rate just
// before it) and the load average, since the machine may be shared. Reads
// the programs in fixtures/p4. Asserts nothing.

import * as os from 'os';
import { OutputMode, P4Engine } from '../lib/p4/engine/engine';
import { runCommands } from '../lib/p4/engine/commands';
import { ethernet, fixtureText, ipv4, udp } from '../spec/support/p4';

const GOAL = 0.5;
const ROUND_MS = Number(process.env.BENCH_P4_MS ?? 700);
const ROUNDS = 5;

/** The engine with no program: one parser state that accepts, empty pipelines, no deparser. */
const EMPTY_PROGRAM = {
  header_types: [
    {
      name: 'standard_metadata_t',
      id: 0,
      fields: [
        ['ingress_port', 9],
        ['packet_length', 32],
        ['egress_spec', 9],
        ['egress_port', 9],
        ['_padding', 5],
      ],
    },
  ],
  headers: [{ name: 'standard_metadata', id: 0, header_type: 'standard_metadata_t', metadata: true }],
  parsers: [
    {
      name: 'parser',
      id: 0,
      init_state: 'start',
      parse_states: [
        {
          name: 'start',
          id: 0,
          parser_ops: [],
          transition_key: [],
          transitions: [{ type: 'default', value: null, mask: null, next_state: null }],
        },
      ],
    },
  ],
  deparsers: [{ name: 'deparser', id: 0, order: [] }],
  actions: [],
  pipelines: [
    { name: 'ingress', id: 0, init_table: null, tables: [], conditionals: [] },
    { name: 'egress', id: 1, init_table: null, tables: [], conditionals: [] },
  ],
};

function frames(size: number): Buffer[] {
  // Alternating destinations routed to ports 1 and 2; TTL high enough never to reach 0.
  return ['10.0.0.10', '10.0.1.10'].map((dst) => {
    const payload = udp(1000, 2000, Buffer.alloc(Math.max(0, size - 14 - 20 - 8), 0x5a));
    return Buffer.concat([
      ethernet('00:00:00:00:00:99', '00:00:00:00:00:11', 0x0800),
      ipv4({ src: '10.0.2.1', dst, ttl: 64, protocol: 17, payloadLength: payload.length }),
      payload,
    ]);
  });
}

type Path = 'processReused' | 'process';

/** Frames per second through one path over ROUND_MS. */
function rate(engine: P4Engine, fs: Buffer[], path: Path): { fps: number; dropped: number } {
  let n = 0;
  let dropped = 0;
  const t0 = performance.now();
  let t = t0;
  while (t - t0 < ROUND_MS) {
    if (path === 'processReused') {
      for (let i = 0; i < 1024; i++) {
        const r = engine.processReused(fs[i & 1]!, 1 + (i & 1), OutputMode.ENGINE_BUFFER);
        if (r.dropped) dropped++;
      }
    } else {
      for (let i = 0; i < 1024; i++) {
        const r = engine.process(fs[i & 1]!, 1 + (i & 1));
        if (r.dropped) dropped++;
      }
    }
    n += 1024;
    t = performance.now();
  }
  return { fps: (n * 1000) / (t - t0), dropped };
}

function main(): void {
  const router = P4Engine.load(fixtureText('simple_router.json'));
  const cmds = runCommands(router, fixtureText('commands.txt'));
  if (!cmds.ok) throw new Error(`commands.txt line ${cmds.line} refused`);
  const empty = P4Engine.load(EMPTY_PROGRAM);
  const load = () => os.loadavg()[0]!.toFixed(2);
  console.log(
    `p4 bench: simple_router + commands.txt (${cmds.results.length} commands) vs no program, ${ROUNDS} interleaved rounds of ${ROUND_MS} ms, best round; load average ${load()} on ${os.cpus().length} CPUs`,
  );
  // both run as one generated function each when the generator takes them (lib/p4/codegen/)
  console.log(
    `p4 bench: generated function: simple_router ${router.generated ? 'yes' : `no (${router.codegenRefused})`}, no program ${empty.generated ? 'yes' : `no (${empty.codegenRefused})`}`,
  );
  for (const path of ['processReused', 'process'] as Path[]) {
    console.log(
      path === 'processReused'
        ? " processReused (into the engine buffer: the segment's path):"
        : ' process (a new result and Buffer per frame):',
    );
    for (const size of [64, 512, 1514]) {
      const fs = frames(size);
      // Warm-up: both engines compiled hot before measuring.
      rate(router, fs, path);
      rate(empty, fs, path);
      let best = { router: 0, empty: 0 };
      let routerDrops = 0;
      const ratios: number[] = [];
      for (let r = 0; r < ROUNDS; r++) {
        const a = rate(empty, fs, path);
        const b = rate(router, fs, path);
        routerDrops += b.dropped;
        ratios.push(b.fps / a.fps);
        best = { empty: Math.max(best.empty, a.fps), router: Math.max(best.router, b.fps) };
      }
      const ratio = best.router / best.empty;
      console.log(
        `  ${String(size).padStart(5)} B: no program ${(best.empty / 1e6).toFixed(2)} Mframes/s, simple_router ${(best.router / 1e6).toFixed(2)} Mframes/s` +
          ` (${routerDrops} dropped), ratio ${ratio.toFixed(2)} (goal >= ${GOAL}: ${ratio >= GOAL ? 'met' : 'NOT met'}); per round ${Math.min(...ratios).toFixed(2)}-${Math.max(...ratios).toFixed(2)}`,
      );
    }
  }
  console.log(`p4 bench: load average ${load()} at the end`);
}

main();
