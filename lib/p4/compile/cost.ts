// What one frame may cost a loaded program at most, estimated once at load
// from the program itself, so that a program (a guest's through P4_LOAD, or
// an operator's) whose frames would hold the event loop for long is refused
// before it runs. Without it a 426 KiB program of 1,500 tables, each running
// a 200-primitive action as its default, took 29-49 ms per frame.
//
// The unit is about one closure call, plus one per 64-bit digit a bigint
// operation walks (a product: the digits of one operand times the other's).
// Per frame: the state reset, the parser (an acyclic parser visits each
// state at most once; a cyclic one up to MAX_PARSE_STEPS times its heaviest
// state), the checksums, each pipeline (acyclic: each node at most once;
// cyclic: its node budget times its heaviest node), the deparse. A table
// node counts its key, its lookup and the heaviest action it may run; the
// entries a ternary/range table scans are not counted (their number is
// bounded by max_size and, for a guest, by its entry budget). Called after
// the compile accepted the program, so every name resolves and expressions
// nest at most MAX_EXPRESSION_PATH deep (the recursion below is bounded by
// that, not by the program).

import { topoOrder } from '../program/graph';
import { MAX_VALUE_BITS } from './expr';
import { JsonPath, refuse } from '../program/load';
import { MAX_PARSE_STEPS } from './parser';
import { Action, ExpressionValue, Pipeline, Program, TypeValue } from '../program/schema';
import { Layout } from '../program/layout';

/** Most a frame may cost (the heaviest shapes ran 4-10 ms per frame at it, on a shared 2-CPU machine). */
export const MAX_FRAME_COST = 100_000;
/** An expression node on the bigint path (a BigInt made of a number field, an operation, a store). */
const NODE = 3;
/** Each value a digest carries (a bigint in a new array of a new object). */
const DIGEST_VALUE = 6;

/** Bigint digits an operation on `bits`-wide values walks (numbers up to 48 bits: none). */
function digits(bits: number): number {
  return bits <= 48 ? 0 : Math.ceil(Math.min(bits, MAX_VALUE_BITS) / 64);
}

interface Costed {
  cost: number;
  bits: number;
}

const ONE_BIT = new Set(['==', '!=', '>', '>=', '<', '<=', 'and', 'or', 'not', 'd2b', 'valid']);

class Estimator {
  readonly #actions = new Map<string, number>();
  readonly #calcs = new Map<string, number>();
  readonly #registers = new Map<string, number>();
  readonly #learnLists = new Map<number, number>();

  constructor(
    readonly p: Program,
    readonly layout: Layout,
    readonly maxFrame: number,
  ) {
    for (const r of p.register_arrays) this.#registers.set(r.name, r.bitwidth);
    for (const c of p.calculations) this.#calcs.set(c.name, this.calc(c.input));
    for (const l of p.learn_lists)
      this.#learnLists.set(
        l.id,
        l.elements.reduce((n, e) => n + DIGEST_VALUE + this.value(e, undefined).cost, 8),
      );
    for (const a of p.actions) this.#actions.set(a.name, this.action(a));
  }

  #fieldBits(ref: unknown): number {
    if (!Array.isArray(ref) || ref.length !== 2) return 1;
    return this.layout.headerByName.get(ref[0] as string)?.byName.get(ref[1] as string)?.width ?? 1;
  }

  #headerFields(name: unknown): number {
    return typeof name === 'string' ? (this.layout.headerByName.get(name)?.fields.length ?? 0) : 0;
  }

  /** A value's cost and the width of what it computes (an upper bound). */
  value(tv: unknown, widths: readonly number[] | undefined): Costed {
    if (tv === null || typeof tv !== 'object') return { cost: 1, bits: 1 };
    const { type, value, bitwidth } = tv as TypeValue;
    switch (type) {
      case 'field': {
        const bits = this.#fieldBits(value);
        return { cost: 1 + digits(bits), bits };
      }
      case 'hexstr':
        return {
          cost: 1,
          bits: typeof value === 'string' ? Math.max(1, value.replace(/^-?0x0*/, '').length * 4) : (bitwidth ?? 1),
        };
      case 'runtime_data':
      case 'local': {
        const bits = (typeof value === 'number' ? widths?.[value] : undefined) ?? MAX_VALUE_BITS;
        return { cost: 1, bits };
      }
      case 'lookahead': {
        const bits = Array.isArray(value) && typeof value[1] === 'number' ? value[1] : 1;
        return { cost: 1 + Math.ceil(bits / 8), bits };
      }
      case 'register': {
        const idx = Array.isArray(value) ? this.value(value[1], widths) : { cost: 1, bits: 1 };
        const bits = Array.isArray(value) ? (this.#registers.get(value[0] as string) ?? MAX_VALUE_BITS) : 1;
        return { cost: 1 + idx.cost, bits };
      }
      case 'expression':
        return this.#expression(value, widths);
      default:
        return { cost: 1, bits: 1 };
    }
  }

  #expression(ev: unknown, widths: readonly number[] | undefined): Costed {
    if (ev === null || typeof ev !== 'object') return { cost: 1, bits: 1 };
    const e = ev as ExpressionValue;
    const none: Costed = { cost: 0, bits: 0 };
    const l = e.left === null || e.left === undefined ? none : this.value(e.left, widths);
    const r =
      e.right === null || e.right === undefined || typeof e.right === 'number' ? none : this.value(e.right, widths);
    const c = e.cond === undefined ? none : this.value(e.cond, widths);
    const sub = l.cost + r.cost + c.cost + NODE - 1;
    const wide = Math.max(l.bits, r.bits);
    if (e.op === 'valid') return { cost: 1, bits: 1 };
    if (ONE_BIT.has(e.op)) return { cost: 1 + sub + digits(wide), bits: 1 };
    switch (e.op) {
      case '*':
        return {
          cost: 1 + sub + Math.max(1, digits(l.bits)) * Math.max(1, digits(r.bits)),
          bits: Math.min(l.bits + r.bits, MAX_VALUE_BITS),
        };
      case '/':
      case '%':
        return { cost: 1 + sub + Math.max(1, digits(l.bits)) * Math.max(1, digits(r.bits)), bits: l.bits };
      case '<<': {
        const bits = Math.min(l.bits + 4096, MAX_VALUE_BITS);
        return { cost: 1 + sub + digits(bits), bits };
      }
      case '+':
      case '-':
        return { cost: 1 + sub + digits(wide), bits: Math.min(wide + 1, MAX_VALUE_BITS) };
      case '&':
        return { cost: 1 + sub + digits(wide), bits: Math.min(l.bits, r.bits) };
      case '?':
        return { cost: 1 + sub, bits: wide };
      case 'two_comp_mod':
        return { cost: 1 + sub + 2 * digits(Math.max(l.bits, 4096)), bits: 4096 };
      default: // | ^ ~ >> b2d
        return { cost: 1 + sub + digits(wide), bits: e.op === 'b2d' ? r.bits : wide };
    }
  }

  /** A calculation: its inputs written bit by bit, then the algorithm over the bytes. */
  calc(inputs: readonly TypeValue[]): number {
    let cost = 1;
    let bits = 0;
    for (const inp of inputs) {
      if (inp.type === 'payload') {
        cost += Math.ceil(this.maxFrame / 4); // copied, then hashed byte by byte
        bits += this.maxFrame * 8;
      } else if (inp.type === 'header') {
        const h = typeof inp.value === 'string' ? this.layout.headerByName.get(inp.value) : undefined;
        for (const f of h?.fields ?? []) {
          cost += 1 + digits(f.width);
          bits += f.width;
        }
      } else {
        const v = this.value(inp, undefined);
        cost += v.cost;
        bits += inp.bitwidth ?? v.bits;
      }
    }
    return cost + Math.ceil(bits / 64);
  }

  action(a: Action): number {
    const widths = a.runtime_data.map((d) => d.bitwidth);
    let cost = 1;
    for (const pr of a.primitives) {
      cost += 1;
      for (const prm of pr.parameters) cost += this.value(prm, widths).cost;
      const p0 = pr.parameters[0];
      const p1 = pr.parameters[1];
      const p2 = pr.parameters[2];
      switch (pr.op) {
        case 'add_header': // each field zeroed through a bigint
          cost += NODE * this.#headerFields(p0?.value);
          break;
        case 'remove_header':
          break;
        case 'copy_header':
        case 'assign_header':
          cost += 2 * NODE * this.#headerFields(p0?.value);
          break;
        case 'modify_field_with_hash_based_offset':
          cost += (typeof p2?.value === 'string' ? this.#calcs.get(p2.value) : undefined) ?? 1;
          break;
        case 'generate_digest':
          cost +=
            p1?.type === 'hexstr' && typeof p1.value === 'string' && /^0x[0-9a-fA-F]+$/.test(p1.value)
              ? (this.#learnLists.get(Number(BigInt(p1.value))) ?? 1)
              : 1;
          break;
        default:
          if (p0?.type === 'field') cost += digits(this.#fieldBits(p0.value));
      }
    }
    return cost;
  }

  #actionById(id: number): number {
    const a = this.p.actions.find((x) => x.id === id);
    return a ? (this.#actions.get(a.name) ?? 1) : 1;
  }

  /** Acyclic: each node at most once; cyclic: `budget` runs of the heaviest. */
  static #graph(costs: readonly number[], edges: readonly (readonly number[])[], init: number, budget: number): number {
    if (init < 0 || costs.length === 0) return 0;
    const order = topoOrder(init, edges);
    if (order) return order.reduce((n, i) => n + costs[i]!, 0);
    return budget * Math.max(...costs);
  }

  parser(): number {
    const ps = this.p.parsers[0];
    if (!ps) return 0;
    const index = new Map<string, number>();
    ps.parse_states.forEach((s, i) => index.set(s.name, i));
    const costs: number[] = [];
    const edges: number[][] = [];
    for (const s of ps.parse_states) {
      let cost = 1;
      for (const op of s.parser_ops) {
        const prm = op.parameters as { type?: string; value?: unknown }[];
        if (op.op === 'extract') {
          const h =
            prm[0]?.type === 'stack'
              ? this.layout.stackByName.get(prm[0].value as string)?.headers[0]
              : this.layout.headerByName.get(prm[0]?.value as string)?.index;
          cost += 1 + (h === undefined ? 0 : (this.layout.headers[h]?.fields.length ?? 0));
        } else {
          cost += 1;
          for (const x of prm) cost += this.value(x, undefined).cost;
        }
      }
      let keyBits = 0;
      for (const k of s.transition_key) {
        const v = this.value(k, undefined);
        cost += v.cost;
        keyBits += Math.ceil(v.bits / 8) * 8;
      }
      cost += s.transitions.length * (1 + digits(keyBits));
      costs.push(cost);
      edges.push(s.transitions.map((t) => (t.next_state === null ? -1 : (index.get(t.next_state) ?? -1))));
    }
    return Estimator.#graph(costs, edges, index.get(ps.init_state) ?? -1, MAX_PARSE_STEPS);
  }

  pipeline(pl: Pipeline): number {
    const index = new Map<string, number>();
    const names = [
      ...pl.tables.map((t) => t.name),
      ...pl.conditionals.map((c) => c.name),
      ...(pl.action_calls ?? []).map((c) => c.name),
    ];
    names.forEach((n, i) => index.set(n, i));
    const at = (n: string | null | undefined): number => (n === null || n === undefined ? -1 : (index.get(n) ?? -1));
    const profiles = new Map<string, number>();
    for (const ap of pl.action_profiles ?? []) profiles.set(ap.name, ap.selector ? this.calc(ap.selector.input) : 0);
    const costs: number[] = [];
    const edges: number[][] = [];
    for (const t of pl.tables) {
      let cost = 1;
      for (const k of t.key) {
        const bits = k.match_type === 'valid' ? 1 : this.#fieldBits(k.target);
        cost += 1 + digits(bits) + (k.match_type === 'lpm' ? bits : 0); // an lpm key: a probe per prefix length
      }
      let heaviest = t.default_entry ? this.#actionById(t.default_entry.action_id) : 0;
      for (const a of t.actions) heaviest = Math.max(heaviest, this.#actions.get(a) ?? 1);
      cost += heaviest + (t.action_profile === undefined ? 0 : (profiles.get(t.action_profile) ?? 0)) + 2;
      costs.push(cost);
      edges.push([...t.next_tables.values(), t.base_default_next].map(at));
    }
    for (const c of pl.conditionals) {
      costs.push(1 + this.value(c.expression, undefined).cost);
      edges.push([at(c.true_next), at(c.false_next)]);
    }
    for (const c of pl.action_calls ?? []) {
      costs.push(1 + this.#actionById(c.action_id));
      edges.push([at(c.next_node)]);
    }
    return Estimator.#graph(costs, edges, at(pl.init_table), names.length + 1);
  }

  checksums(): number {
    let cost = 0;
    for (const c of this.p.checksums) {
      const calc = this.#calcs.get(c.calculation) ?? 1;
      cost += 2 * (calc + 1) + (c.if_cond ? 2 * this.value(c.if_cond, undefined).cost : 0);
    }
    return cost;
  }

  deparser(): number {
    let cost = 2;
    for (const n of this.p.deparsers[0]?.order ?? []) cost += 1 + this.#headerFields(n);
    return cost;
  }
}

/**
 * The estimate of a frame's cost; refuses (P4LoadError naming the
 * heaviest part) a program over MAX_FRAME_COST.
 */
export function checkFrameCost(p: Program, layout: Layout, maxFrame: number): number {
  const est = new Estimator(p, layout, maxFrame);
  const parts: [JsonPath, number][] = [
    [[], 1 + Math.ceil((layout.numSlots + layout.bigSlots + layout.headers.length + layout.stacks.length) / 16)],
    [['parsers', 0], est.parser()],
    [['checksums'], est.checksums()],
    ...p.pipelines.map((pl, i): [JsonPath, number] => [['pipelines', i], est.pipeline(pl)]),
    [['deparsers', 0], est.deparser()],
  ];
  const total = parts.reduce((n, [, c]) => n + c, 0);
  if (total > MAX_FRAME_COST) {
    const [where, most] = parts.reduce((a, b) => (b[1] > a[1] ? b : a));
    refuse(
      where,
      `a frame could cost about ${total} operations (${most} here); a program may cost at most ${MAX_FRAME_COST} per frame`,
    );
  }
  return total;
}
