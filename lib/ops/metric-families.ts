// Metric families read on scrape: each family is a prom-client Counter or
// Gauge whose collect() empties it and fills it from a reader, so a scrape
// sees the live values and nothing is counted twice (the counters live in
// the device; prom-client only formats them). Shared by the server's
// /metrics (metrics.ts) and ernic-exporter (exporter.ts).

import { Counter, Gauge, Registry } from 'prom-client';

export type Labels = Record<string, string>;
/** Report one sample. Counters below 0 or not finite are reported as 0. */
export type Emit = (value: number, labels?: Labels) => void;

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
    const labelNames = [...(s.labels ?? [])];
    if (s.type === 'counter') {
      new Counter({
        name: s.name, help: s.help, labelNames, registers: [reg],
        collect(this: Counter) {
          this.reset();
          s.read((v, l) => { if (l) this.inc(l, clean(v)); else this.inc(clean(v)); });
        },
      });
    } else {
      new Gauge({
        name: s.name, help: s.help, labelNames, registers: [reg],
        collect(this: Gauge) {
          this.reset();
          s.read((v, l) => { const x = Number.isFinite(v) ? v : 0; if (l) this.set(l, x); else this.set(x); });
        },
      });
    }
  }
}
