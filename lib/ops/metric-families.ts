// Metric families read on scrape: each family is a prom-client Counter or
// Gauge whose collect() empties it and fills it from a reader, so a scrape
// sees the live values and nothing is counted twice (the counters live in
// the device; prom-client only formats them). Shared by the server's
// /metrics (metrics.ts) and ernic-exporter (exporter.ts).

import { Counter, Gauge, Registry } from 'prom-client';

export type Labels = Record<string, string>;
/** Report one sample. Counters below 0 or not finite are reported as 0. */
export type Emit = (value: number, labels?: Labels) => void;

/**
 * A counter's name: `base` with `_total` appended unless it already ends so
 * (some of the ionic stat fields do: octets_tx_total). Every counter name of
 * the server and the exporter is made here, so none ends in _total_total.
 */
export function counterName(base: string): string {
  return base.endsWith('_total') ? base : `${base}_total`;
}

/** A quantity both the server (prefix rocm_ernic_) and ernic-exporter (prefix ernic_) serve. */
export interface SharedFamily {
  /** The name after the prefix. */
  readonly name: string;
  readonly type: 'counter' | 'gauge';
  readonly help: string;
}

/**
 * One name per quantity: what the server counts and the exporter reads back
 * from the stats file is served under the same name by both, only the
 * prefix says which one serves it (the labels differ: the server's carry
 * {device, port}, the exporter's {ernic_id, role}).
 */
export const SHARED_FAMILIES = {
  resets: { name: 'resets_total', type: 'counter', help: 'Device resets (RESET command, DEVICE_RESET, FLR)' },
  commands: { name: 'commands_total', type: 'counter', help: 'Device commands and RDMA admin commands executed' },
  interrupts: { name: 'interrupts_total', type: 'counter', help: 'MSI-X interrupts delivered to the guest' },
  rdmaTxBytes: { name: rdmaCounterName('tx_bytes'), type: 'counter', help: 'SEND payload bytes sent' },
  rdmaRxBytes: { name: rdmaCounterName('rx_bytes'), type: 'counter', help: 'SEND payload bytes received' },
  rdmaReadBytes: { name: rdmaCounterName('rdma_read_bytes'), type: 'counter', help: 'RDMA READ payload bytes' },
  rdmaWriteBytes: { name: rdmaCounterName('rdma_write_bytes'), type: 'counter', help: 'RDMA WRITE payload bytes' },
  qps: { name: 'rdma_qps', type: 'gauge', help: 'QPs alive' },
  internalErrors: {
    name: 'internal_errors_total',
    type: 'counter',
    help: "Bugs of ours the last-resort guard contained, each failing one unit of work (an access answered EIO, a QP to ERR, a command refused); above 0 is worth a bug report with the log's error lines",
  },
  connectionUp: {
    name: 'connection_up',
    type: 'gauge',
    help: 'Whether a VM (QEMU) is connected (1) or not (0); state: connected, disconnected or stopped',
  },
} as const satisfies Readonly<Record<string, SharedFamily>>;

/** The name of an RDMA device counter (lib/rdma/counters.ts DEVICE_COUNTER_NAMES) after the prefix. */
export function rdmaCounterName(counter: string): string {
  return counterName(`rdma_${counter.replace(/^rdma_/, '')}`);
}

/** The name of a per-QP counter (lib/rdma/counters.ts QP_COUNTER_NAMES) after the prefix. */
export function qpCounterName(counter: string): string {
  return counterName(`qp_${counter}`);
}

/** The values of the state label of connection_up: a small fixed set (the free text stays in the stats file). */
export const CONNECTION_STATES = ['connected', 'disconnected', 'stopped'] as const;
export type ConnectionState = (typeof CONNECTION_STATES)[number];

export interface FamilySpec {
  /** Full name; a counter's ends in _total. */
  readonly name: string;
  readonly help: string;
  readonly type: 'counter' | 'gauge';
  readonly labels?: readonly string[];
  /** Called on every scrape. */
  read(emit: Emit): void;
}

function clean(v: number): number {
  return Number.isFinite(v) && v > 0 ? v : 0;
}

/** Register every family in `reg`. */
export function registerFamilies(reg: Registry, specs: readonly FamilySpec[]): void {
  for (const s of specs) {
    // A name that breaks the convention is a bug of ours: refuse it before anything is served.
    if (
      s.type === 'counter' ? !s.name.endsWith('_total') || s.name.endsWith('_total_total') : s.name.endsWith('_total')
    ) {
      throw new Error(
        `metric ${s.name}: a ${s.type}'s name ${s.type === 'counter' ? 'ends in one _total' : 'does not end in _total'}`,
      );
    }
    if (/_(count|sum|bucket)$/.test(s.name))
      throw new Error(`metric ${s.name}: _count, _sum and _bucket belong to histograms and summaries`);
    const labelNames = [...(s.labels ?? [])];
    if (s.type === 'counter') {
      new Counter({
        name: s.name,
        help: s.help,
        labelNames,
        registers: [reg],
        collect(this: Counter) {
          this.reset();
          s.read((v, l) => {
            if (l) this.inc(l, clean(v));
            else this.inc(clean(v));
          });
        },
      });
    } else {
      new Gauge({
        name: s.name,
        help: s.help,
        labelNames,
        registers: [reg],
        collect(this: Gauge) {
          this.reset();
          s.read((v, l) => {
            const x = Number.isFinite(v) ? v : 0;
            if (l) this.set(l, x);
            else this.set(x);
          });
        },
      });
    }
  }
}
