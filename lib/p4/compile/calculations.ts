// The calculations (hash/checksum algorithms over field lists) that
// checksums, action profile selectors and modify_field_with_hash_based_offset
// use.

import { BitWriter } from '../frame/header-bits';
import { compileCsum16Num } from './csum16';
import { compileValue, ExprContext, NO_ARGS, Value } from './expr';
import { JsonPath, refuse } from '../program/load';
import { TypeValue } from '../program/schema';
import { PacketState } from '../frame/packet-state';

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
  // csum16 over fields: the number path (./csum16.ts), equal to the general one
  const num = compileCsum16Num(c, ctx);
  return num ? (st) => BigInt(num(st)) : general;
}

/** The general path: the inputs written into a bit image, the algorithm run over its bytes. */
export function compileImageCalculation(
  c: { algo: string; input: TypeValue[] },
  path: JsonPath,
  ctx: ExprContext,
): Calc {
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
        if (!f.wide)
          return (st) => {
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
