// The P4 engine in the stats file and /metrics (issue 15): the segment's
// frame counters, the RDMA send-WQE filter's, the guest's device commands,
// the engine's own, and the program's counter arrays (cells that counted
// something, at most P4_STATS_MAX_CELLS per array, lowest index first, so a
// 2^20-cell array cannot blow up a scrape or the file).

import type { StatRow } from './stats-format';
import type { Emit } from './metric-families';

/** Most cells of one counter array shown (non-zero ones, lowest index first). */
const P4_STATS_MAX_CELLS = 64;

/** What the ops tools read of the engine on a device (lib/p4/device/attach.ts P4Attachment). */
export interface P4StatsSource {
  readonly programName: string;
  readonly engine: {
    readonly stats: {
      readonly frames: number;
      readonly dropped: number;
      readonly parserErrors: number;
      readonly budgetDrops: number;
    };
    readonly externs: {
      readonly counters: ReadonlyMap<string, { readonly packets: Float64Array; readonly bytes: Float64Array }>;
    };
  } | null;
  /** Plain objects of counters (P4SegmentStats, P4WqeStats): every own number is shown. */
  readonly segment: { readonly stats: object };
  readonly wqe: { readonly stats: object };
  readonly control: {
    readonly scope: string;
    readonly stats: { readonly commands: number; readonly refused: number; readonly loads: number };
  };
}

/** Counter-array cells worth showing: [array, index, packets, bytes], bounded. */
function p4CounterCells(p4: P4StatsSource): [string, number, number, number][] {
  const out: [string, number, number, number][] = [];
  const e = p4.engine;
  if (!e) return out;
  for (const [name, c] of e.externs.counters) {
    let shown = 0;
    for (let i = 0; i < c.packets.length && shown < P4_STATS_MAX_CELLS; i++) {
      if (c.packets[i] === 0 && c.bytes[i] === 0) continue;
      out.push([name, i, c.packets[i]!, c.bytes[i]!]);
      shown++;
    }
  }
  return out;
}

/** The "P4 Statistics" section's rows. */
export function p4Rows(p4: P4StatsSource): StatRow[] {
  const rows: StatRow[] = [
    ['program', p4.programName],
    ['guest_scope', p4.control.scope],
  ];
  const e = p4.engine;
  rows.push(
    ['engine_runs', e?.stats.frames ?? 0],
    ['engine_dropped', e?.stats.dropped ?? 0],
    ['engine_parser_errors', e?.stats.parserErrors ?? 0],
    ['engine_parser_budget_drops', e?.stats.budgetDrops ?? 0],
  );
  for (const [k, v] of counters(p4.segment.stats)) rows.push([`frames_${snake(k)}`, v]);
  for (const [k, v] of counters(p4.wqe.stats)) rows.push([`wqe_${snake(k)}`, v]);
  const c = p4.control.stats;
  rows.push(['guest_commands', c.commands], ['guest_commands_refused', c.refused], ['guest_loads', c.loads]);
  for (const [name, i, packets, bytes] of p4CounterCells(p4))
    rows.push([`counter_${name}[${i}]_packets`, packets], [`counter_${name}[${i}]_bytes`, bytes]);
  return rows;
}

/** The p4_* metric families (names without the server's prefix). */
export function p4Families(
  p4: P4StatsSource,
  add: (
    name: string,
    type: 'counter' | 'gauge',
    help: string,
    read: (emit: Emit) => void,
    labels?: readonly string[],
  ) => void,
): void {
  add(
    'p4_info',
    'gauge',
    'The P4 engine: program and guest scope (value 1)',
    (e) => e(1, { program: p4.programName, scope: p4.control.scope }),
    ['program', 'scope'],
  );
  add('p4_engine_runs_total', 'counter', 'Frames and WQEs run through the P4 program', (e) =>
    e(p4.engine?.stats.frames ?? 0),
  );
  add('p4_engine_dropped_total', 'counter', 'Frames and WQEs the P4 program dropped', (e) =>
    e(p4.engine?.stats.dropped ?? 0),
  );
  add(
    'p4_frames_total',
    'counter',
    'Ethernet frames through the P4 segment, by what happened',
    (e) => {
      for (const [k, v] of counters(p4.segment.stats)) e(v, { outcome: snake(k) });
    },
    ['outcome'],
  );
  add(
    'p4_wqes_total',
    'counter',
    'RDMA send WQEs through the P4 program, by what happened',
    (e) => {
      for (const [k, v] of counters(p4.wqe.stats)) e(v, { outcome: snake(k) });
    },
    ['outcome'],
  );
  add(
    'p4_guest_commands_total',
    'counter',
    'P4 device commands (70-72) from the guest, by outcome',
    (e) => {
      const c = p4.control.stats;
      e(c.commands, { outcome: 'ok' });
      e(c.refused, { outcome: 'refused' });
      e(c.loads, { outcome: 'loads' });
    },
    ['outcome'],
  );
  add(
    'p4_counter_packets_total',
    'counter',
    `P4 program counter arrays: packets per cell (non-zero cells, at most ${P4_STATS_MAX_CELLS} per array)`,
    (e) => {
      for (const [name, i, packets] of p4CounterCells(p4)) e(packets, { counter: name, index: String(i) });
    },
    ['counter', 'index'],
  );
  add(
    'p4_counter_bytes_total',
    'counter',
    `P4 program counter arrays: bytes per cell (non-zero cells, at most ${P4_STATS_MAX_CELLS} per array)`,
    (e) => {
      for (const [name, i, , bytes] of p4CounterCells(p4)) e(bytes, { counter: name, index: String(i) });
    },
    ['counter', 'index'],
  );
}

function snake(k: string): string {
  return k.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`);
}

function counters(o: object): [string, number][] {
  return Object.entries(o).filter((kv): kv is [string, number] => typeof kv[1] === 'number');
}
