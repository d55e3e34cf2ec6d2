// The program's stateful objects: counter, meter and register arrays.

import { refuse } from '../program/load';
import { Program } from '../program/schema';

/** Largest counter/meter/register array the loader accepts. */
const MAX_ARRAY_SIZE = 1 << 20;

class CounterArray {
  readonly packets: Float64Array;
  readonly bytes: Float64Array;
  constructor(
    readonly name: string,
    size: number,
  ) {
    this.packets = new Float64Array(size);
    this.bytes = new Float64Array(size);
  }
  count(i: number, len: number): void {
    if (i < 0 || i >= this.packets.length) return;
    this.packets[i]! += 1;
    this.bytes[i]! += len;
  }
  reset(): void {
    this.packets.fill(0);
    this.bytes.fill(0);
  }
}

const enum Color {
  Green = 0,
  Yellow = 1,
  Red = 2,
}

/** Two-rate three-color meters (RFC 2698); a meter whose rates were never set marks everything green. */
export class MeterArray {
  /** Per meter: [cir, cbs, pir, pbs] in units (packets or bytes) per microsecond / units; NaN = unset. */
  readonly rates: Float64Array;
  readonly tokens: Float64Array; // [tc, tp] per meter
  readonly last: Float64Array;
  /** Direct meters: the table they are bound to and the field that gets the color (resolved by the table). */
  direct: { binding: string; resultTarget: unknown; index: number } | undefined;
  constructor(
    readonly name: string,
    readonly size: number,
    readonly bytesMode: boolean,
    readonly now: () => number,
  ) {
    this.rates = new Float64Array(size * 4).fill(NaN);
    this.tokens = new Float64Array(size * 2);
    this.last = new Float64Array(size);
  }
  setRates(i: number, cir: number, cbs: number, pir: number, pbs: number): void {
    this.rates.set([cir, cbs, pir, pbs], i * 4);
    this.tokens[i * 2] = cbs;
    this.tokens[i * 2 + 1] = pbs;
    this.last[i] = this.now();
  }
  execute(i: number, len: number): Color {
    if (i < 0 || i >= this.size || Number.isNaN(this.rates[i * 4]!)) return Color.Green;
    const [cir, cbs, pir, pbs] = this.rates.subarray(i * 4, i * 4 + 4);
    const t = this.now();
    const dt = Math.max(0, t - this.last[i]!);
    this.last[i] = t;
    const tc = Math.min(cbs!, this.tokens[i * 2]! + dt * cir!);
    const tp = Math.min(pbs!, this.tokens[i * 2 + 1]! + dt * pir!);
    const n = this.bytesMode ? len : 1;
    if (tp < n) {
      this.tokens[i * 2] = tc;
      this.tokens[i * 2 + 1] = tp;
      return Color.Red;
    }
    if (tc < n) {
      this.tokens[i * 2] = tc;
      this.tokens[i * 2 + 1] = tp - n;
      return Color.Yellow;
    }
    this.tokens[i * 2] = tc - n;
    this.tokens[i * 2 + 1] = tp - n;
    return Color.Green;
  }
}

class RegisterArray {
  readonly cells: bigint[];
  readonly mask: bigint;
  constructor(
    readonly name: string,
    size: number,
    readonly bitwidth: number,
  ) {
    this.cells = new Array<bigint>(size).fill(0n);
    this.mask = (1n << BigInt(bitwidth)) - 1n;
  }
}

/** The stateful objects of one loaded program, by name. */
export class Externs {
  readonly counters = new Map<string, CounterArray>();
  readonly meters = new Map<string, MeterArray>();
  readonly registers = new Map<string, RegisterArray>();

  constructor(p: Program, now: () => number) {
    p.counter_arrays.forEach((c, i) => {
      if (c.size > MAX_ARRAY_SIZE) refuse(['counter_arrays', i, 'size'], `larger than ${MAX_ARRAY_SIZE}`, c.size);
      this.counters.set(c.name, new CounterArray(c.name, c.size));
    });
    p.meter_arrays.forEach((m, i) => {
      if (m.size > MAX_ARRAY_SIZE) refuse(['meter_arrays', i, 'size'], `larger than ${MAX_ARRAY_SIZE}`, m.size);
      if (m.rate_count !== 2)
        refuse(['meter_arrays', i, 'rate_count'], 'only 2-rate meters are supported', m.rate_count);
      const ma = new MeterArray(m.name, m.size, m.type === 'bytes', now);
      if (m.is_direct) {
        if (!m.binding) refuse(['meter_arrays', i, 'binding'], 'a direct meter names its table', null);
        if (!m.result_target)
          refuse(['meter_arrays', i, 'result_target'], 'a direct meter names its result field', null);
        ma.direct = { binding: m.binding, resultTarget: m.result_target, index: i };
      }
      this.meters.set(m.name, ma);
    });
    p.register_arrays.forEach((r, i) => {
      if (r.size > MAX_ARRAY_SIZE) refuse(['register_arrays', i, 'size'], `larger than ${MAX_ARRAY_SIZE}`, r.size);
      this.registers.set(r.name, new RegisterArray(r.name, r.size, r.bitwidth));
    });
  }
}
