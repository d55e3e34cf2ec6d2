// ernic-exporter: Prometheus metrics for every rocm-ernic instance of a
// host, read from the run directory on each scrape (no polling loop):
//
//   RUN_DIR/instances.json   the launcher's manifest (ernicctl writes it,
//                            docs/instances.md): {instances: [...]} or a bare
//                            array, one entry per instance {id, role, pid,
//                            mac, socket, stats?, vm: {...}}
//   RUN_DIR/<id>.stats       each instance's stats file (rocm-ernic -S), or
//                            the entry's `stats` path; a stats file without
//                            an entry counts when its stem is an integer
//
// The metric names are the C rocm-ernic's ernic_* set, except where the server
// serves the same quantity: then both use the one name of SHARED_FAMILIES
// (metric-families.ts), ernic_ here and rocm_ernic_ there
// (docs/operations.md lists them; docs/grafana-ernic.json uses them).
// Labels: ernic_id (the instance number) and role, plus mac on
// ernic_instance_up, vm_name on the VM series, state (connected,
// disconnected or stopped) on ernic_connection_up and qp on the per-QP
// series (at most QP_METRICS_MAX QPs per instance).
// A stats-file-only instance (no manifest entry) has role "unknown".

import * as fs from 'fs';
import * as path from 'path';
import { Registry } from 'prom-client';
import { z } from 'zod';
import {
  ConnectionState,
  FamilySpec,
  Labels,
  qpCounterName,
  registerFamilies,
  SHARED_FAMILIES,
  SharedFamily,
} from './metric-families';
import { QP_METRICS_MAX } from './metrics';
import {
  INTERNAL_ERRORS_KEY,
  parseStatsFile,
  ParsedStats,
  SECTION_DEVICE,
  SECTION_QPS,
  STATE_KEY,
  StatRecord,
} from './stats-format';

export const EXPORTER_PORT = 9840;
/** The prefix of every family the exporter serves (the server's is rocm_ernic_). */
const EXPORTER_PREFIX = 'ernic_';
export const DEFAULT_RUN_DIR = '/run/rocm-ernic';
export const MANIFEST = 'instances.json';
/** Instance ids are small; a bigger one in the manifest is refused, not made a label. */
const MAX_ID = 999_999_999;
/** A stats file is a few KiB (256 QP blocks at most): more than this is not one of ours. */
const MAX_STATS_BYTES = 4 << 20;
/** USER_HZ: the unit of /proc/<pid>/stat start times on every Linux architecture Node runs on. */
const CLOCK_TICKS = 100;

const vmSchema = z
  .object({
    vm_name: z.string().optional(),
    name: z.string().optional(),
    attached: z.boolean().optional(),
    vm_pid: z.number().int().positive().optional(),
    gpu_passthrough: z.union([z.boolean(), z.number()]).optional(),
    gpus: z.array(z.unknown()).optional(),
  })
  .passthrough();

const entrySchema = z
  .object({
    id: z.union([z.number().int().nonnegative().max(MAX_ID), z.string().regex(/^\d{1,9}$/)]),
    role: z.string().optional(),
    pid: z.number().int().positive().optional(),
    mac: z.string().optional(),
    socket: z.string().optional(),
    /** The instance's stats file, when not RUN_DIR/<id>.stats (ernicctl records it). */
    stats: z.string().optional(),
    vm: vmSchema.nullable().optional(),
  })
  .passthrough();

const manifestSchema = z.union([z.array(entrySchema), z.object({ instances: z.array(entrySchema) }).passthrough()]);

interface VmView {
  readonly name: string;
  readonly attached: boolean;
  readonly uptimeSeconds: number | null;
  readonly gpuPassthrough: boolean;
}

interface InstanceView {
  readonly id: string;
  readonly role: string;
  readonly mac: string;
  readonly up: boolean;
  readonly uptimeSeconds: number | null;
  readonly vm: VmView | null;
  readonly stats: ParsedStats | null;
}

interface RunDirView {
  readonly instances: readonly InstanceView[];
  /** Why instances.json was not used (absent is not an error). */
  readonly manifestError: string | null;
  /** Whether the run directory exists (it may appear later: nothing is shown until then). */
  readonly present?: boolean;
}

/** Process helpers, replaceable in tests. */
export interface ProcessProbe {
  alive(pid: number): boolean;
  /** Seconds since the process started, or null. */
  uptime(pid: number): number | null;
}

const linuxProcesses: ProcessProbe = {
  alive(pid) {
    try {
      process.kill(pid, 0);
      return true;
    } catch (e) {
      return (e as NodeJS.ErrnoException).code === 'EPERM';
    }
  },
  uptime(pid) {
    try {
      const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
      // Fields after the command name (which may hold spaces) start at field 3; starttime is field 22.
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      const start = Number(fields[19]) / CLOCK_TICKS;
      const since = Number(fs.readFileSync('/proc/uptime', 'utf8').split(' ')[0]);
      return Number.isFinite(start) && Number.isFinite(since) ? Math.max(0, since - start) : null;
    } catch {
      return null;
    }
  },
};

/** Read at most `max` bytes of a regular file (not through a symlink's loop or a FIFO that never ends). */
async function readBounded(file: string, max: number): Promise<string> {
  const fh = await fs.promises.open(file, fs.constants.O_RDONLY | fs.constants.O_NONBLOCK);
  try {
    const st = await fh.stat();
    if (!st.isFile()) throw new Error(`${file}: not a regular file`);
    if (st.size > max) throw new Error(`${file}: ${st.size} bytes, more than ${max}`);
    const buf = Buffer.alloc(st.size);
    const { bytesRead } = await fh.read(buf, 0, buf.length, 0);
    return buf.subarray(0, bytesRead).toString('utf8');
  } finally {
    await fh.close();
  }
}

async function readStats(file: string): Promise<ParsedStats | null> {
  try {
    return parseStatsFile(await readBounded(file, MAX_STATS_BYTES));
  } catch {
    return null;
  }
}

/** Everything one scrape shows: the manifest and every stats file, read now (without blocking the event loop). */
export async function readRunDir(dir: string, probe: ProcessProbe = linuxProcesses): Promise<RunDirView> {
  let manifestError: string | null = null;
  let entries: z.infer<typeof entrySchema>[] = [];
  const manifestPath = path.join(dir, MANIFEST);
  try {
    const parsed = manifestSchema.safeParse(JSON.parse(await readBounded(manifestPath, MAX_STATS_BYTES)));
    if (parsed.success) entries = Array.isArray(parsed.data) ? parsed.data : parsed.data.instances;
    else
      manifestError = `${manifestPath}: ${parsed.error.issues[0]?.path.join('.') || '(top)'}: ${parsed.error.issues[0]?.message ?? 'invalid'}`;
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== 'ENOENT') manifestError = `${manifestPath}: ${(e as Error).message}`;
  }
  let files: string[] = [];
  let present = true;
  try {
    files = (await fs.promises.readdir(dir)).filter((f) => /^\d{1,9}\.stats$/.test(f));
  } catch {
    present = false; // no run directory (yet): nothing to show
  }
  const ids = new Set<string>();
  const out: InstanceView[] = [];
  for (const e of entries) {
    const id = String(Number(e.id));
    if (ids.has(id)) continue;
    ids.add(id);
    const stats = await readStats(e.stats !== undefined ? path.resolve(dir, e.stats) : path.join(dir, `${id}.stats`));
    const alive = e.pid !== undefined ? probe.alive(e.pid) : stats !== null;
    const vm = e.vm ?? null;
    const vmName = vm?.vm_name ?? vm?.name ?? `vm${id}`;
    const vmAlive = vm?.vm_pid !== undefined ? probe.alive(vm.vm_pid) : false;
    out.push({
      id,
      role: e.role ?? 'unknown',
      mac: e.mac ?? String(stats?.instance.mac ?? ''),
      up: alive,
      uptimeSeconds: alive && e.pid !== undefined ? probe.uptime(e.pid) : null,
      vm: vm
        ? {
            name: vmName,
            attached: vm.attached === true,
            uptimeSeconds: vmAlive && vm.vm_pid !== undefined ? probe.uptime(vm.vm_pid) : null,
            gpuPassthrough:
              vm.gpu_passthrough === true ||
              (typeof vm.gpu_passthrough === 'number' && vm.gpu_passthrough > 0) ||
              (vm.gpus?.length ?? 0) > 0,
          }
        : null,
      stats,
    });
  }
  for (const f of files.sort((a, b) => parseInt(a, 10) - parseInt(b, 10))) {
    const id = String(parseInt(f, 10));
    if (ids.has(id)) continue;
    ids.add(id);
    const stats = await readStats(path.join(dir, f));
    out.push({
      id,
      role: 'unknown',
      mac: String(stats?.instance.mac ?? ''),
      up: stats !== null,
      uptimeSeconds: null,
      vm: null,
      stats,
    });
  }
  return { instances: out, manifestError, present };
}

function num(r: StatRecord | undefined, key: string): number | undefined {
  const v = r?.[key];
  return typeof v === 'number' ? v : undefined;
}

/**
 * The state label of connection_up for a stats file: the server's `state`
 * line says stopped; otherwise the connection line's first word, which is
 * "connected" or "disconnected" (the C rocm-ernic's files and ours). A file a
 * server wrote as it stopped before it had a state line says "server
 * stopped" in its connection line. Anything else: no sample.
 */
export function connectionStateOf(s: ParsedStats): ConnectionState | null {
  if (s.instance[STATE_KEY] === 'stopped') return 'stopped';
  const text = s.instance.connection;
  if (typeof text !== 'string') return null;
  const word = /^[a-z]+/.exec(text)?.[0];
  if (word === 'connected') return 'connected';
  if (word !== 'disconnected') return null;
  return text.startsWith('disconnected (server stopped') ? 'stopped' : 'disconnected';
}

/** The exporter's metric families, reading `view()` (the current scrape's run directory). */
export function exporterFamilies(view: () => RunDirView, qpMax = QP_METRICS_MAX): FamilySpec[] {
  const f: FamilySpec[] = [];
  const base = (i: InstanceView): Labels => ({ ernic_id: i.id, role: i.role });
  const each =
    (fn: (i: InstanceView, emit: (v: number, l?: Labels) => void) => void) =>
    (emit: (v: number, l?: Labels) => void): void => {
      for (const i of view().instances) fn(i, emit);
    };
  const add = (
    name: string,
    type: 'counter' | 'gauge',
    help: string,
    labels: readonly string[],
    read: FamilySpec['read'],
  ): void => {
    f.push({ name, type, help, labels, read });
  };
  const device = (i: InstanceView): StatRecord | undefined => i.stats?.sections[SECTION_DEVICE];

  // ---- cluster and instances -------------------------------------------------------------------
  add('ernic_instances', 'gauge', 'rocm-ernic instances known (manifest entries and stats files)', [], (e) =>
    e(view().instances.length),
  );
  add(
    'ernic_instance_up',
    'gauge',
    "Whether the instance's process is running (or, without a pid, has a stats file)",
    ['ernic_id', 'role', 'mac'],
    each((i, e) => e(i.up ? 1 : 0, { ...base(i), mac: i.mac })),
  );
  add(
    'ernic_instance_uptime_seconds',
    'gauge',
    "Seconds since the instance's process started",
    ['ernic_id', 'role'],
    each((i, e) => {
      if (i.uptimeSeconds !== null) e(i.uptimeSeconds, base(i));
    }),
  );

  // ---- VMs ---------------------------------------------------------------------------------------
  add('ernic_vms', 'gauge', 'VMs attached to an instance', [], (e) =>
    e(view().instances.filter((i) => i.vm?.attached).length),
  );
  const vmLabels = ['ernic_id', 'role', 'vm_name'];
  add(
    'ernic_vm_attached',
    'gauge',
    "Whether the instance's VM is attached",
    vmLabels,
    each((i, e) => {
      if (i.vm) e(i.vm.attached ? 1 : 0, { ...base(i), vm_name: i.vm.name });
    }),
  );
  add(
    'ernic_vm_uptime_seconds',
    'gauge',
    "Seconds since the VM's process started",
    vmLabels,
    each((i, e) => {
      if (i.vm && i.vm.uptimeSeconds !== null) e(i.vm.uptimeSeconds, { ...base(i), vm_name: i.vm.name });
    }),
  );
  add(
    'ernic_vm_gpu_passthrough',
    'gauge',
    'Whether the VM has a GPU passed through',
    vmLabels,
    each((i, e) => {
      if (i.vm) e(i.vm.gpuPassthrough ? 1 : 0, { ...base(i), vm_name: i.vm.name });
    }),
  );

  // ---- traffic and device counters, from the stats file's Device Statistics --------------------
  const L = ['ernic_id', 'role'];
  const counter = (name: string, help: string, value: (d: StatRecord) => number | undefined): void => {
    add(
      name,
      'counter',
      help,
      L,
      each((i, e) => {
        const d = device(i);
        const v = d && value(d);
        if (v !== undefined) e(v, base(i));
      }),
    );
  };
  const key =
    (k: string) =>
    (d: StatRecord): number | undefined =>
      num(d, k);
  const sum =
    (...ks: string[]) =>
    (d: StatRecord): number | undefined => {
      const vs = ks.map((k) => num(d, k));
      return vs.every((v) => v === undefined) ? undefined : vs.reduce<number>((a, v) => a + (v ?? 0), 0);
    };
  const shared = (q: SharedFamily, value: (d: StatRecord) => number | undefined, what: string): void => {
    counter(EXPORTER_PREFIX + q.name, `${q.help} (${what})`, value);
  };
  counter('ernic_ip_bytes_tx_total', 'Ethernet bytes the guest sent (total_ip_bytes_tx)', key('total_ip_bytes_tx'));
  counter('ernic_ip_bytes_rx_total', 'Ethernet bytes the guest received (total_ip_bytes_rx)', key('total_ip_bytes_rx'));
  counter('ernic_ip_bytes_total', 'Ethernet bytes both ways', sum('total_ip_bytes_tx', 'total_ip_bytes_rx'));
  shared(SHARED_FAMILIES.rdmaTxBytes, key('total_bytes_sent'), 'total_bytes_sent');
  shared(SHARED_FAMILIES.rdmaRxBytes, key('total_bytes_received'), 'total_bytes_received');
  shared(SHARED_FAMILIES.rdmaReadBytes, key('total_bytes_rdma_read'), 'total_bytes_rdma_read');
  shared(SHARED_FAMILIES.rdmaWriteBytes, key('total_bytes_rdma_write'), 'total_bytes_rdma_write');
  counter(
    'ernic_rdma_bytes_total',
    'RDMA payload bytes: sent, received, read and written',
    sum('total_bytes_sent', 'total_bytes_received', 'total_bytes_rdma_read', 'total_bytes_rdma_write'),
  );
  shared(SHARED_FAMILIES.resets, key('reset_count'), 'reset_count');
  add(
    EXPORTER_PREFIX + SHARED_FAMILIES.internalErrors.name,
    SHARED_FAMILIES.internalErrors.type,
    `${SHARED_FAMILIES.internalErrors.help} (${INTERNAL_ERRORS_KEY})`,
    L,
    each((i, e) => {
      const v = num(i.stats?.instance, INTERNAL_ERRORS_KEY);
      if (v !== undefined) e(v, base(i));
    }),
  );
  shared(SHARED_FAMILIES.commands, key('commands'), 'commands');
  shared(SHARED_FAMILIES.interrupts, key('interrupts'), 'interrupts');
  counter('ernic_mmio_reads_total', 'MMIO reads (mmio_reads_total)', key('mmio_reads_total'));
  counter('ernic_mmio_writes_total', 'MMIO writes (mmio_writes_total)', key('mmio_writes_total'));
  add(
    'ernic_stats_writes_total',
    'counter',
    'Times the stats file was written (Write count)',
    L,
    each((i, e) => {
      if (i.stats?.writeCount != null) e(i.stats.writeCount, base(i));
    }),
  );
  add(
    EXPORTER_PREFIX + SHARED_FAMILIES.connectionUp.name,
    SHARED_FAMILIES.connectionUp.type,
    `${SHARED_FAMILIES.connectionUp.help} (the stats file's state and connection lines)`,
    ['ernic_id', 'role', 'state'],
    each((i, e) => {
      const state = i.stats && connectionStateOf(i.stats);
      if (state) e(state === 'connected' ? 1 : 0, { ...base(i), state });
    }),
  );

  // ---- per QP ------------------------------------------------------------------------------------
  add(
    EXPORTER_PREFIX + SHARED_FAMILIES.qps.name,
    SHARED_FAMILIES.qps.type,
    `${SHARED_FAMILIES.qps.help} on the instance (qp_count, else the QP blocks)`,
    L,
    each((i, e) => {
      if (!i.stats) return;
      e(num(i.stats.sections[SECTION_QPS], 'qp_count') ?? i.stats.qps.size, base(i));
    }),
  );
  const qpCounters: readonly [string, string][] = [
    ['bytes_sent', 'Bytes the QP sent'],
    ['bytes_received', 'Bytes the QP received'],
    ['bytes_rdma_read', 'RDMA READ bytes of the QP'],
    ['bytes_rdma_write', 'RDMA WRITE bytes of the QP'],
    ['wqes_processed', 'Send WQEs the QP ran'],
    ['cqes_posted', 'Completions written for the QP'],
    ['doorbell_send', 'Send queue doorbells of the QP'],
    ['doorbell_recv', 'Receive queue doorbells of the QP'],
  ];
  for (const [k, help] of qpCounters) {
    add(
      EXPORTER_PREFIX + qpCounterName(k),
      'counter',
      `${help} (the ${qpMax} lowest QP ids of each instance)`,
      ['ernic_id', 'role', 'qp'],
      each((i, e) => {
        if (!i.stats) return;
        const qps = [...i.stats.qps.entries()].sort(([a], [b]) => Number(a) - Number(b)).slice(0, qpMax);
        for (const [qp, r] of qps) {
          const v = num(r, k);
          if (v !== undefined) e(v, { ...base(i), qp });
        }
      }),
    );
  }
  return f;
}

/** Reads the run directory once per scrape and renders it. */
export class ErnicExporter {
  readonly registry = new Registry();
  readonly #dir: string;
  readonly #probe: ProcessProbe;
  #view: RunDirView = { instances: [], manifestError: null };
  /** The last manifest problem (reported once per change). */
  lastError: string | null = null;

  /** Whether the run directory existed at the last scrape. */
  get runDirPresent(): boolean {
    return this.#view.present !== false;
  }

  constructor(runDir: string, opts: { probe?: ProcessProbe; qpMax?: number } = {}) {
    this.#dir = runDir;
    this.#probe = opts.probe ?? linuxProcesses;
    registerFamilies(
      this.registry,
      exporterFamilies(() => this.#view, opts.qpMax),
    );
  }

  /** Read the run directory now and render every family. `onError` hears a new manifest problem. */
  async scrape(onError?: (message: string) => void): Promise<string> {
    this.#view = await readRunDir(this.#dir, this.#probe);
    const err = this.#view.manifestError;
    if (err !== this.lastError) {
      this.lastError = err;
      if (err) onError?.(err);
    }
    return this.registry.metrics();
  }
}
