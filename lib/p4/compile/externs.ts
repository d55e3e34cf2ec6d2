// The program's stateful objects: counter, meter and register arrays, and
// the calculations (hash/checksum algorithms over field lists) that
// checksums and modify_field_with_hash_based_offset use.

import { BitWriter } from '../frame/header-bits';
import { compileCsum16Num } from './csum16';
import { compileValue, ExprContext, NO_ARGS, Value } from './expr';
import { JsonPath, refuse } from '../program/load';
import { Program, TypeValue } from '../program/schema';
import { PacketState } from '../frame/packet-state';

/** Largest counter/meter/register array the loader accepts. */
export const MAX_ARRAY_SIZE = 1 << 20;

export class CounterArray {
  readonly packets: Float64Array;
  readonly bytes: Float64Array;
  constructor(readonly name: string, size: number) {
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

export const enum Color {
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
  constructor(readonly name: string, readonly size: number, readonly bytesMode: boolean, readonly now: () => number) {
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

export class RegisterArray {
  readonly cells: bigint[];
  readonly mask: bigint;
  constructor(readonly name: string, size: number, readonly bitwidth: number) {
    this.cells = new Array<bigint>(size).fill(0n);
    this.mask = (1n << BigInt(bitwidth)) - 1n;
  }
}

// ---- calculations ----

function csum16(b: Buffer, len = b.length): bigint {
  let sum = 0;
  for (let i = 0; i + 1 < len; i += 2) sum += (b[i]! << 8) | b[i + 1]!;
  if (len % 2 === 1) sum += b[len - 1]! << 8;
  while (sum > 0xffff) sum = (sum & 0xffff) + Math.floor(sum / 0x10000);
  return BigInt(~sum & 0xffff);
}

function reflectedCrc(poly: number, width: 16 | 32) {
  const table = new Uint32Array(256);
  for (let i = 0; i < 256; i++) {
    let c = i;
    for (let k = 0; k < 8; k++) c = c & 1 ? (c >>> 1) ^ poly : c >>> 1;
    table[i] = c >>> 0;
  }
  const init = width === 32 ? 0xffffffff : 0;
  const xorOut = width === 32 ? 0xffffffff : 0;
  return (b: Buffer, len = b.length): bigint => {
    let c = init;
    for (let i = 0; i < len; i++) c = (table[(c ^ b[i]!) & 0xff]! ^ (c >>> 8)) >>> 0;
    return BigInt((c ^ xorOut) >>> 0);
  };
}

function identity(b: Buffer, len = b.length): bigint {
  let v = 0n;
  for (let i = 0; i < len; i++) v = (v << 8n) | BigInt(b[i]!);
  return v;
}

/** Supported `algo` names: csum16, crc32 (IEEE), crc16 (CRC-16/ARC), identity. */
// crc32 stays a table loop, not zlib.crc32: hash inputs are header fields (a
// 13-byte 5-tuple: 23 ns here, 78 ns through zlib's native call).
/** Each takes the input bytes and how many of them count (default all: the calculations pass their scratch buffer). */
// A null-prototype object read with an own-property check: an `algo` from the program such as
// "valueOf" finds nothing.
export const ALGORITHMS: Readonly<Record<string, (b: Buffer, len?: number) => bigint>> = Object.freeze(
  Object.assign(Object.create(null) as Record<string, (b: Buffer, len?: number) => bigint>, {
    csum16,
    crc32: reflectedCrc(0xedb88320, 32),
    crc16: reflectedCrc(0xa001, 16),
    identity,
  }),
);

export type Calc = (st: PacketState) => bigint;

/** Compiles a calculation (list of inputs + algorithm); inputs of invalid headers are skipped. */
export function compileCalculation(c: { algo: string; input: TypeValue[] }, path: JsonPath, ctx: ExprContext): Calc {
  const general = compileImageCalculation(c, path, ctx); // refuses what it cannot run
  // csum16 over fields: the number path (./checksum.ts), equal to the general one
  const num = compileCsum16Num(c, ctx);
  return num ? (st) => BigInt(num(st)) : general;
}

/** The general path: the inputs written into a bit image, the algorithm run over its bytes. */
export function compileImageCalculation(c: { algo: string; input: TypeValue[] }, path: JsonPath, ctx: ExprContext): Calc {
  const algo = Object.hasOwn(ALGORITHMS, c.algo) ? ALGORITHMS[c.algo] : undefined; // the name comes from the program file
  if (!algo) refuse([...path, 'algo'], 'unsupported hash algorithm', c.algo);
  const w = new BitWriter();
  type Part = (st: PacketState) => void;
  const parts: Part[] = c.input.map((inp, ii) => {
    const ip: JsonPath = [...path, 'input', ii];
    switch (inp.type) {
      case 'field': {
        const f = ctx.layout.field(inp.value, [...ip, 'value']);
        const h = f.header;
        if (!f.wide) return (st) => {
          if (st.valid[h]) w.putNum(st.num[f.slot]!, f.width);
        };
        return (st) => {
          if (st.valid[h]) w.put(st.big[f.slot]!, f.width);
        };
      }
      case 'hexstr': {
        if (!inp.bitwidth) refuse(ip, 'a hexstr input needs a bitwidth', inp);
        const v: Value = compileValue(inp, ctx, ip);
        const width = inp.bitwidth;
        return (st) => w.put(v(st, NO_ARGS), width);
      }
      case 'header': {
        const h = ctx.layout.header(inp.value, [...ip, 'value']);
        return (st) => {
          if (!st.valid[h.index]) return;
          for (const f of h.fields) w.put(st.get(f), f.width);
        };
      }
      case 'payload':
        return (st) => w.putBytes(st.frame.subarray(st.offset));
      default:
        return refuse([...ip, 'type'], 'unsupported calculation input', inp.type);
    }
  });
  return (st) => {
    w.reset();
    for (let i = 0; i < parts.length; i++) parts[i]!(st);
    return algo(w.buf, w.length);
  };
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
      if (m.rate_count !== 2) refuse(['meter_arrays', i, 'rate_count'], 'only 2-rate meters are supported', m.rate_count);
      const ma = new MeterArray(m.name, m.size, m.type === 'bytes', now);
      if (m.is_direct) {
        if (!m.binding) refuse(['meter_arrays', i, 'binding'], 'a direct meter names its table', null);
        if (!m.result_target) refuse(['meter_arrays', i, 'result_target'], 'a direct meter names its result field', null);
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
