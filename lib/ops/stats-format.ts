// The stats file (`rocm-ernic -S PATH`): a plain-text snapshot of the
// device's counters that people read with `cat` and ernic-exporter parses.
// This module is pure: a snapshot record in, text out (formatStatsFile), and
// text in, records out (parseStatsFile). Reading the live device is
// stats-source.ts; writing the file is stats-file.ts.
//
// The layout is the C rocm-ernic's, so its tools keep working:
//
//   === ROCm ERNIC Statistics ===
//   Instance:
//     socket      : /tmp/nic0.sock
//     connection  : connected
//
//   Write count : 7
//
//   Device Statistics:
//     commands                : 42
//
//   Per-QP Statistics:
//     QP 10:
//       doorbell_send  : 3
//       WQEs by opcode:
//         SEND                  : 3
//
// Parsing contract: every value line holds the separator " : " exactly once
// where the key ends (labels are padded, then " : " is appended, so a long
// label can never swallow the space before the colon); a line at column 0
// ending in ':' starts a section; "QP <id>:" starts a QP block inside
// "Per-QP Statistics:"; "WQEs by opcode:" starts that QP's histogram; a blank
// line ends the QP. Values are integers, or text when they are not.

/** The file's first line: tools recognise the format by it. */
export const STATS_TITLE = '=== ROCm ERNIC Statistics ===';
export const SEP = ' : ';
const SECTION_INSTANCE = 'Instance';
export const SECTION_DEVICE = 'Device Statistics';
export const SECTION_QPS = 'Per-QP Statistics';
const HISTOGRAM_TITLE = 'WQEs by opcode';
const WRITE_COUNT = 'Write count';
/** Instance key of the server's phase (starting, listening, stopped): what ernicctl waits on. */
export const STATE_KEY = 'state';
/** Instance key of the mesh node id: an integer once registered, else MESH_UNREGISTERED. */
export const MESH_NODE_KEY = 'mesh_node';
/** Bugs of ours the last-resort guard contained since the server started (lib/guard.ts). */
export const INTERNAL_ERRORS_KEY = 'internal_errors';
export const MESH_UNREGISTERED = 'unregistered';
/** Key prefix of a histogram entry once parsed (opcode_SEND). */
const OPCODE_KEY_PREFIX = 'opcode_';

/** Label widths (padding only: a longer label still gets its " : "). */
const WIDTH_INSTANCE = 11;
const WIDTH_SECTION = 23;
const WIDTH_QP = 14;
const WIDTH_OPCODE = 21;

/**
 * The histogram's opcode names, in the order the file lists them (the C
 * rocm-ernic's 18, which tools key on). Ours is the subset the ionic v1 send
 * verbs reach (OPCODE_NAMES); the others stay 0 and are never printed.
 */
export const HISTOGRAM_ORDER: readonly string[] = [
  'RDMA_WRITE',
  'RDMA_WRITE_WITH_IMM',
  'SEND',
  'SEND_WITH_IMM',
  'RDMA_READ',
  'ATOMIC_CMP_AND_SWP',
  'ATOMIC_FETCH_AND_ADD',
  'LSO',
  'SEND_WITH_INV',
  'RDMA_READ_WITH_INV',
  'LOCAL_INV',
  'FAST_REG_MR',
  'MASKED_ATOMIC_CMP_SWP',
  'MASKED_ATOMIC_FETCH',
  'BIND_MW',
  'REG_SIG_MR',
  'ERROR',
  'SEND_DC',
];
/** Opcodes outside HISTOGRAM_ORDER are summed under this name. */
const OTHER_OPCODES = '(other opcodes)';

/** Histogram name of each send verb, indexed by SendVerb (lib/rdma/datapath/wqe-layout.ts, the v1 opcode). */
export const OPCODE_NAMES: readonly string[] = [
  'SEND',
  'SEND_WITH_INV',
  'SEND_WITH_IMM',
  'RDMA_READ',
  'RDMA_WRITE',
  'RDMA_WRITE_WITH_IMM',
  'ATOMIC_CMP_AND_SWP',
  'ATOMIC_FETCH_AND_ADD',
  'FAST_REG_MR',
  'LOCAL_INV',
  'BIND_MW',
];

type StatValue = number | string;
export type StatRow = readonly [string, StatValue];

export interface StatsSection {
  readonly title: string;
  readonly rows: readonly StatRow[];
}

export interface QpBlock {
  readonly id: number;
  readonly rows: readonly StatRow[];
  /** Count per histogram name (any order; printed in HISTOGRAM_ORDER, non-zero only). */
  readonly opcodes: readonly (readonly [string, number])[];
}

export interface StatsSnapshot {
  /** socket, backend, pci, mac, connection. */
  readonly instance: readonly StatRow[];
  /** Files written so far, this one included. */
  readonly writeCount: number;
  /** "Device Statistics" first, then any others. */
  readonly sections: readonly StatsSection[];
  /** Rows of the Per-QP section before the blocks (qp_count, qps_shown). */
  readonly qpSummary: readonly StatRow[];
  readonly qps: readonly QpBlock[];
}

function valueText(v: StatValue): string {
  if (typeof v === 'string') return v.replace(/[\r\n]+/g, ' ');
  return Number.isFinite(v) ? String(Math.trunc(v)) : '0';
}

function row(indent: string, width: number, key: string, v: StatValue): string {
  return `${indent}${key.padEnd(width)}${SEP}${valueText(v)}`;
}

/** The whole file. */
export function formatStatsFile(s: StatsSnapshot): string {
  const out: string[] = [STATS_TITLE, `${SECTION_INSTANCE}:`];
  for (const [k, v] of s.instance) out.push(row('  ', WIDTH_INSTANCE, k, v));
  out.push('', `${WRITE_COUNT}${SEP}${s.writeCount}`, '');
  for (const sec of s.sections) {
    out.push(`${sec.title}:`);
    const width = Math.max(WIDTH_SECTION, ...sec.rows.map(([k]) => k.length));
    for (const [k, v] of sec.rows) out.push(row('  ', width, k, v));
    out.push('');
  }
  out.push(`${SECTION_QPS}:`);
  for (const [k, v] of s.qpSummary) out.push(row('  ', WIDTH_SECTION, k, v));
  for (const qp of s.qps) {
    out.push(`  QP ${qp.id}:`);
    for (const [k, v] of qp.rows) out.push(row('    ', WIDTH_QP, k, v));
    out.push(`    ${HISTOGRAM_TITLE}:`);
    const counts = new Map(qp.opcodes);
    let other = 0;
    for (const [name, n] of qp.opcodes) if (!HISTOGRAM_ORDER.includes(name)) other += n;
    for (const name of HISTOGRAM_ORDER) {
      const n = counts.get(name) ?? 0;
      if (n > 0) out.push(row('      ', WIDTH_OPCODE, name, n));
    }
    if (other > 0) out.push(row('      ', WIDTH_OPCODE, OTHER_OPCODES, other));
    out.push('');
  }
  if (s.qps.length === 0) out.push('');
  return out.join('\n');
}

// ---- parsing ----------------------------------------------------------------------------------

export type StatRecord = Record<string, StatValue>;

export interface ParsedStats {
  /** Whether the first line was STATS_TITLE. */
  readonly titled: boolean;
  readonly instance: StatRecord;
  /** "Write count", or null when absent. */
  readonly writeCount: number | null;
  /** Every section but Instance, by title (the Per-QP section holds its summary rows). */
  readonly sections: Readonly<Record<string, StatRecord>>;
  /** QP blocks by id as written; histogram entries as opcode_<NAME>. */
  readonly qps: ReadonlyMap<string, StatRecord>;
}

function parseValue(text: string): StatValue {
  return /^-?\d+$/.test(text) ? Number(text) : text;
}

/** Read a stats file back. Never throws: lines it does not understand are skipped. */
export function parseStatsFile(text: string): ParsedStats {
  const lines = text.split(/\r?\n/);
  // Keys and titles come from the file: records without a prototype, so "__proto__" is just a key.
  const record = (): StatRecord => Object.create(null) as StatRecord;
  const instance: StatRecord = record();
  const sections: Record<string, StatRecord> = Object.create(null) as Record<string, StatRecord>;
  const qps = new Map<string, StatRecord>();
  let writeCount: number | null = null;
  let section: StatRecord | null = null;
  let inQps = false;
  let qp: StatRecord | null = null;
  let histogram = false;
  for (const raw of lines) {
    const line = raw.replace(/\s+$/, '');
    if (line === '') {
      histogram = false;
      qp = null;
      continue;
    }
    const sep = line.indexOf(SEP);
    if (sep < 0) {
      if (line.startsWith('===')) continue;
      const t = line.trim();
      if (!t.endsWith(':')) continue;
      const title = t.slice(0, -1);
      if (line[0] !== ' ') {
        // A section at column 0.
        qp = null;
        histogram = false;
        inQps = title === SECTION_QPS;
        section = title === SECTION_INSTANCE ? instance : (sections[title] ??= record());
      } else if (inQps && /^QP \S+$/.test(title)) {
        qp = record();
        histogram = false;
        qps.set(title.slice(3), qp);
      } else if (qp && title === HISTOGRAM_TITLE) {
        histogram = true;
      }
      continue;
    }
    const key = line.slice(0, sep).trim();
    const value = parseValue(line.slice(sep + SEP.length).trim());
    if (line[0] !== ' ') {
      if (key === WRITE_COUNT && typeof value === 'number') writeCount = value;
      section = null;
      continue;
    }
    if (qp) qp[histogram ? OPCODE_KEY_PREFIX + key : key] = value;
    else if (section) section[key] = value;
  }
  return { titled: lines[0] === STATS_TITLE, instance, writeCount, sections, qps };
}
