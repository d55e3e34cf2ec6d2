// Actions compiled to closures: each primitive call becomes one closure, an
// action runs its closures in order. The primitives are the common ones of
// bmv2's simple_switch / simple_router (P4_14 names and their P4_16
// equivalents); anything else is refused with its JSON path at load time.

import { Calc } from './calculations';
import { Externs } from './externs';
import { ActionArgs, compileNum, compileValue, ExprContext, NumValue, shiftLeft, Value } from './expr';
import { JsonPath, refuse } from '../program/load';
import { Program, TypeValue } from '../program/schema';
import { FieldInfo } from '../program/layout';
import { hexToBig, POW2 } from '../program/numbers';
import { PacketState } from '../frame/packet-state';

type ActionFn = (st: PacketState, rd: ActionArgs) => void;

export interface CompiledAction {
  readonly id: number;
  /** Dense index (the action's position in the program), for per-action tables. */
  readonly index: number;
  readonly name: string;
  /** Bitwidth of each runtime_data parameter (control plane values are truncated to it). */
  readonly params: readonly { name: string; bitwidth: number }[];
  readonly run: ActionFn;
}

export interface ActionEnv {
  readonly externs: Externs;
  readonly calcs: Map<string, Calc>;
  /** Learn lists by id: the field readers of each element. */
  readonly learnLists: Map<number, Value[]>;
  /** standard_metadata.egress_spec when the program has it (drop sets it to DROP_PORT). */
  readonly egressSpec: FieldInfo | undefined;
}

/** simple_switch's drop port. */
export const DROP_PORT = 511;

type Prim = (st: PacketState, rd: ActionArgs) => void;

function dest(ctx: ExprContext, tv: TypeValue | undefined, path: JsonPath): FieldInfo {
  if (!tv || tv.type !== 'field') refuse(path, 'the destination must be a field', tv);
  return ctx.layout.field(tv.value, [...path, 'value']);
}

function arity(params: readonly TypeValue[], min: number, max: number, path: JsonPath, op: string): void {
  if (params.length < min || params.length > max)
    refuse([...path, 'parameters'], `${op} takes ${min === max ? min : `${min}-${max}`} parameters`, params.length);
}

function named<T>(map: Map<string, T>, tv: TypeValue | undefined, type: string, path: JsonPath): T {
  if (!tv || tv.type !== type) refuse(path, `expected a ${type}`, tv);
  const x = map.get(tv.value as string);
  if (!x) refuse([...path, 'value'], `no such ${type}`, tv.value);
  return x;
}

/**
 * Assignment. Into a number-stored field, without bigint: action data and
 * fields no wider than the destination are copied, wider ones wrapped, and
 * number expressions (compileNum) wrapped to the width.
 */
function assign(dst: FieldInfo, src: TypeValue, v: Value, ctx: ExprContext): Prim {
  const slot = dst.slot;
  if (!dst.wide) {
    const m = POW2[dst.width]!;
    if (src.type === 'runtime_data' || src.type === 'local') {
      const i = src.value as number;
      const w = ctx.runtimeWidths?.[i] ?? Infinity;
      if (w <= dst.width)
        return (st, rd) => {
          st.num[slot] = rd.num[i]!;
        };
      const mask = dst.mask;
      return (st, rd) => {
        st.num[slot] = Number(rd.big[i]! & mask);
      };
    }
    if (src.type === 'field') {
      const hv = ctx.layout.hiddenValid(src.value);
      const f = hv === undefined ? ctx.layout.field(src.value, []) : undefined;
      if (f && !f.wide) {
        const from = f.slot;
        if (f.width <= dst.width)
          return (st) => {
            st.num[slot] = st.num[from]!;
          };
        return (st) => {
          st.num[slot] = st.num[from]! % m;
        };
      }
    }
    const nv: NumValue | undefined = compileNum(src, ctx);
    if (nv) {
      return (st, rd) => {
        const r = nv(st, rd) % m;
        st.num[slot] = r < 0 ? r + m : r;
      };
    }
  }
  return (st, rd) => st.set(dst, v(st, rd));
}

// A Map (the op names come from the program; only the cases below reach it).
const arith = new Map<string, (a: bigint, b: bigint) => bigint>([
  ['add', (a, b) => a + b],
  ['subtract', (a, b) => a - b],
  ['bit_and', (a, b) => a & b],
  ['bit_or', (a, b) => a | b],
  ['bit_xor', (a, b) => a ^ b],
  ['shift_left', shiftLeft],
  ['shift_right', (a, b) => (b < 0n || b > 4096n ? 0n : a >> b)],
]);

function compilePrimitive(op: string, params: TypeValue[], ctx: ExprContext, env: ActionEnv, path: JsonPath): Prim {
  const v = (i: number): Value => compileValue(params[i], ctx, [...path, 'parameters', i]);
  const pp = (i: number): JsonPath => [...path, 'parameters', i];
  switch (op) {
    case 'modify_field':
    case 'assign': {
      arity(params, 2, op === 'assign' ? 2 : 3, path, op);
      const dst = dest(ctx, params[0], pp(0));
      const src = v(1);
      if (params.length === 3) {
        const mask = v(2);
        return (st, rd) => {
          const m = mask(st, rd);
          st.set(dst, (st.get(dst) & ~m) | (src(st, rd) & m));
        };
      }
      return assign(dst, params[1]!, src, ctx);
    }
    case 'add_to_field':
    case 'subtract_from_field': {
      arity(params, 2, 2, path, op);
      const dst = dest(ctx, params[0], pp(0));
      const x = v(1);
      const nx = dst.wide ? undefined : compileNum(params[1], ctx);
      const sg = op === 'add_to_field' ? 1 : -1;
      const m = POW2[dst.width]!;
      const slot = dst.slot;
      const c = nx && params[1]!.type === 'hexstr' ? sg * Number(hexToBig(params[1]!.value as string)) : NaN;
      if (Math.abs(c) < m) {
        // a constant step (TTL - 1): one add and one compare, no %
        return (st) => {
          const r = st.num[slot]! + c;
          st.num[slot] = r < 0 ? r + m : r >= m ? r - m : r;
        };
      }
      if (nx) {
        return (st, rd) => {
          const r = (st.num[slot]! + sg * nx(st, rd)) % m;
          st.num[slot] = r < 0 ? r + m : r;
        };
      }
      const sign = op === 'add_to_field' ? 1n : -1n;
      return (st, rd) => st.set(dst, st.get(dst) + sign * x(st, rd));
    }
    case 'add':
    case 'subtract':
    case 'bit_and':
    case 'bit_or':
    case 'bit_xor':
    case 'shift_left':
    case 'shift_right': {
      arity(params, 3, 3, path, op);
      const dst = dest(ctx, params[0], pp(0));
      const a = v(1);
      const b = v(2);
      const f = arith.get(op)!;
      return (st, rd) => st.set(dst, f(a(st, rd), b(st, rd)));
    }
    case 'drop':
    case 'mark_to_drop':
    case 'mark_for_drop': {
      const es = env.egressSpec;
      return (st) => {
        st.dropped = true;
        if (es) st.num[es.slot] = DROP_PORT;
      };
    }
    case 'exit':
      return (st) => {
        st.exited = true;
      };
    case 'no_op':
    case 'log_msg':
      return () => {};
    case 'add_header':
    case 'remove_header': {
      arity(params, 1, 1, path, op);
      const tv = params[0]!;
      if (tv.type !== 'header') refuse(pp(0), `${op} takes a header`, tv);
      const h = ctx.layout.header(tv.value, [...pp(0), 'value']);
      if (op === 'remove_header')
        return (st) => {
          st.valid[h.index] = 0;
        };
      return (st) => {
        if (st.valid[h.index]) return;
        st.valid[h.index] = 1;
        for (const f of h.fields) st.set(f, 0n); // a newly added header starts zeroed
      };
    }
    case 'copy_header':
    case 'assign_header': {
      arity(params, 2, 2, path, op);
      const [d, s] = [params[0]!, params[1]!];
      if (d.type !== 'header' || s.type !== 'header')
        refuse([...path, 'parameters'], `${op} takes two headers`, params);
      const hd = ctx.layout.header(d.value, [...pp(0), 'value']);
      const hs = ctx.layout.header(s.value, [...pp(1), 'value']);
      if (hd.fields.length !== hs.fields.length || hd.fields.some((f, i) => f.width !== hs.fields[i]!.width)) {
        refuse([...path, 'parameters'], 'headers of different types', [d.value, s.value]);
      }
      return (st) => {
        st.valid[hd.index] = st.valid[hs.index]!;
        for (let i = 0; i < hd.fields.length; i++) st.set(hd.fields[i]!, st.get(hs.fields[i]!));
      };
    }
    case 'count': {
      arity(params, 2, 2, path, op);
      const c = named(env.externs.counters, params[0], 'counter_array', pp(0));
      const idx = v(1);
      return (st, rd) => c.count(Number(idx(st, rd)), st.frame.length);
    }
    case 'execute_meter': {
      arity(params, 3, 3, path, op);
      const m = named(env.externs.meters, params[0], 'meter_array', pp(0));
      const idx = v(1);
      const dst = dest(ctx, params[2], pp(2));
      return (st, rd) => st.set(dst, BigInt(m.execute(Number(idx(st, rd)), st.frame.length)));
    }
    case 'register_read': {
      arity(params, 3, 3, path, op);
      const dst = dest(ctx, params[0], pp(0));
      const r = named(env.externs.registers, params[1], 'register_array', pp(1));
      const idx = v(2);
      return (st, rd) => {
        const i = Number(idx(st, rd));
        st.set(dst, i >= 0 && i < r.cells.length ? r.cells[i]! : 0n);
      };
    }
    case 'register_write': {
      arity(params, 3, 3, path, op);
      const r = named(env.externs.registers, params[0], 'register_array', pp(0));
      const idx = v(1);
      const val = v(2);
      return (st, rd) => {
        const i = Number(idx(st, rd));
        if (i >= 0 && i < r.cells.length) r.cells[i] = val(st, rd) & r.mask;
      };
    }
    case 'modify_field_with_hash_based_offset': {
      arity(params, 4, 4, path, op);
      const dst = dest(ctx, params[0], pp(0));
      const base = v(1);
      const calc = named(env.calcs, params[2], 'calculation', pp(2));
      const size = v(3);
      return (st, rd) => {
        const n = size(st, rd);
        st.set(dst, base(st, rd) + (n > 0n ? calc(st) % n : 0n));
      };
    }
    case 'generate_digest': {
      arity(params, 2, 2, path, op);
      const tv = params[1]!;
      if (tv.type !== 'hexstr' || typeof tv.value !== 'string' || !/^0x[0-9a-fA-F]+$/.test(tv.value))
        refuse(pp(1), 'generate_digest takes a learn list id (a hexstring)', tv);
      const id = Number(BigInt(tv.value));
      const list = env.learnLists.get(id);
      if (!list) refuse([...pp(1), 'value'], 'no learn list with this id', tv.value);
      return (st, rd) => {
        st.addDigest({ list: id, values: list.map((r) => r(st, rd)) });
      };
    }
    default:
      return refuse([...path, 'op'], 'unsupported primitive', op);
  }
}

export function compileActions(p: Program, ctx0: ExprContext, env: ActionEnv): CompiledAction[] {
  const seen = new Set<string>();
  const ids = new Set<number>();
  return p.actions.map((a, ai) => {
    const path: JsonPath = ['actions', ai];
    if (seen.has(a.name)) refuse([...path, 'name'], 'duplicate action name', a.name);
    if (ids.has(a.id)) refuse([...path, 'id'], 'duplicate action id', a.id);
    seen.add(a.name);
    ids.add(a.id);
    const ctx: ExprContext = {
      ...ctx0,
      runtimeData: a.runtime_data.length,
      runtimeWidths: a.runtime_data.map((r) => r.bitwidth),
      parser: false,
    };
    const prims: Prim[] = [];
    // _jump / _jump_if_zero (p4c's if/else inside actions): only forward jumps, so an action ends
    const jumps: { cond: Value | undefined; target: number }[] = [];
    a.primitives.forEach((pr, pi) => {
      const pp: JsonPath = [...path, 'primitives', pi];
      if (pr.op === '_jump' || pr.op === '_jump_if_zero') {
        const n = pr.op === '_jump' ? 1 : 2;
        if (pr.parameters.length !== n)
          refuse([...pp, 'parameters'], `${pr.op} takes ${n} parameters`, pr.parameters.length);
        const off = pr.parameters[n - 1]!;
        const target =
          off.type === 'hexstr' && typeof off.value === 'string' && /^0x[0-9a-fA-F]+$/.test(off.value)
            ? Number(BigInt(off.value))
            : NaN;
        if (!(target > pi && target <= a.primitives.length))
          refuse([...pp, 'parameters', n - 1], 'only forward jumps within the action', off.value);
        const cond = n === 2 ? compileValue(pr.parameters[0], ctx, [...pp, 'parameters', 0]) : undefined;
        jumps[pi] = { cond, target };
        prims.push(() => {});
        return;
      }
      prims.push(compilePrimitive(pr.op, pr.parameters, ctx, env, pp));
    });
    let run: ActionFn;
    const [p0, p1, p2] = prims;
    if (prims.length === 0) run = () => {};
    else if (jumps.length === 0 && prims.length === 1)
      run = p0!; // nothing follows an exit
    else if (jumps.length === 0 && prims.length === 2) {
      run = (st, rd) => {
        p0!(st, rd);
        if (!st.exited) p1!(st, rd);
      };
    } else if (jumps.length === 0 && prims.length === 3) {
      run = (st, rd) => {
        p0!(st, rd);
        if (st.exited) return;
        p1!(st, rd);
        if (!st.exited) p2!(st, rd);
      };
    } else if (jumps.length === 0) {
      run = (st, rd) => {
        for (let i = 0; i < prims.length; i++) {
          prims[i]!(st, rd);
          if (st.exited) return;
        }
      };
    } else {
      run = (st, rd) => {
        let i = 0;
        while (i < prims.length) {
          const j = jumps[i];
          if (j) {
            i = j.cond === undefined || j.cond(st, rd) === 0n ? j.target : i + 1;
            continue;
          }
          prims[i]!(st, rd);
          if (st.exited) return;
          i++;
        }
      };
    }
    return {
      id: a.id,
      index: ai,
      name: a.name,
      params: a.runtime_data.map((r) => ({ name: r.name, bitwidth: r.bitwidth })),
      run,
    };
  });
}
