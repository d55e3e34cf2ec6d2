// The program's parser compiled to an array of state closures, each returning
// the next state's index (ACCEPT when done, REJECT on a parser error). The
// driver is a loop with a budget (MAX_PARSE_STEPS): a program that loops
// between states stops there and the frame is dropped, never hangs.

import { compileParseExtract } from '../frame/header-bits';
import { parserLoop } from '../frame/dispatch';
import { compileValue, ExprContext, NO_ARGS, Value } from './expr';
import { JsonPath, refuse } from '../program/load';
import { Program } from '../program/schema';
import { hexToBig, POW2 } from '../program/numbers';
import { Layout, NARROW_BITS } from '../program/layout';
import { PacketState, ParserError } from '../frame/packet-state';
import { declareVsets, MAX_VSET_MASKS, ValueSet, VsetView } from './vsets';

/** Parse states one frame may pass through (loops end here). */
export const MAX_PARSE_STEPS = 64;
export const ACCEPT = -1;
export const REJECT = -2;
/** Parse returned because the budget ran out. */
export const BUDGET = -3;

type StateFn = (st: PacketState) => number;

export interface ParseVsets {
  /** Each declared parse value set by name (control plane adds to them). */
  readonly sets: Map<string, ValueSet>;
}

export type CompiledParser = (st: PacketState) => number;

/** Reads `width` (<= 32) bits at bit offset `bit` of `buf` as a number; the caller checked the length. */
function peekNum(buf: Buffer, bit: number, width: number): number {
  let v = 0;
  let left = width;
  while (left > 0) {
    const inByte = bit & 7;
    const take = Math.min(8 - inByte, left);
    v = v * POW2[take]! + ((buf[bit >> 3]! >> (8 - inByte - take)) & ((1 << take) - 1));
    bit += take;
    left -= take;
  }
  return v;
}

export function compileParser(p: Program, layout: Layout, vsets: ParseVsets): CompiledParser {
  if (p.parsers.length === 0) refuse(['parsers'], 'the program has no parser');
  if (p.parsers.length > 1) refuse(['parsers', 1], 'only one parser is supported');
  const parser = p.parsers[0]!;
  const base: JsonPath = ['parsers', 0];
  for (const [name, set] of declareVsets(p)) vsets.sets.set(name, set);
  const index = new Map<string, number>();
  parser.parse_states.forEach((s, i) => {
    if (index.has(s.name)) refuse([...base, 'parse_states', i, 'name'], 'duplicate parse state', s.name);
    index.set(s.name, i);
  });
  const extracts = layout.headers.map((h) => compileParseExtract(h));
  const ctx: ExprContext = { layout, runtimeData: 0, parser: true };

  const states: StateFn[] = parser.parse_states.map((s, si) => {
    const sp: JsonPath = [...base, 'parse_states', si];
    const ops: ((st: PacketState) => boolean)[] = s.parser_ops.map((op, oi) => {
      const opPath: JsonPath = [...sp, 'parser_ops', oi];
      const params = op.parameters as { type?: string; value?: unknown }[];
      // Each parameter is an object {type, value}: a null or a number here would
      // otherwise reach a property read below (found by the p4 fuzz target).
      params.forEach((p, i) => {
        if (typeof p !== 'object' || p === null || Array.isArray(p))
          refuse([...opPath, 'parameters', i], 'a parameter is an object {type, value}', p);
      });
      switch (op.op) {
        case 'extract': {
          const prm = params[0];
          if (params.length !== 1 || !prm)
            refuse([...opPath, 'parameters'], 'extract takes one parameter', op.parameters);
          if (prm.type === 'regular') {
            const h = layout.header(prm.value, [...opPath, 'parameters', 0, 'value']);
            if (h.metadata)
              refuse([...opPath, 'parameters', 0, 'value'], 'cannot extract a metadata header', prm.value);
            return extracts[h.index]!;
          }
          if (prm.type === 'stack') {
            const sk = layout.stack(prm.value, [...opPath, 'parameters', 0, 'value']);
            const per = sk.headers.map((hi) => extracts[hi]!);
            const k = sk.index;
            return (st) => {
              const n = st.stackNext[k]!;
              if (n >= per.length) {
                st.parserError = ParserError.StackOutOfBounds;
                return false;
              }
              if (!per[n]!(st)) return false;
              st.stackNext[k] = n + 1;
              return true;
            };
          }
          return refuse([...opPath, 'parameters', 0, 'type'], 'unsupported extract target', prm.type);
        }
        case 'set': {
          if (params.length !== 2) refuse([...opPath, 'parameters'], 'set takes two parameters', op.parameters);
          const dst = layout.field(params[0]!.value, [...opPath, 'parameters', 0, 'value']);
          const src = compileValue(params[1], ctx, [...opPath, 'parameters', 1]);
          return (st) => {
            st.set(dst, src(st, NO_ARGS));
            return true;
          };
        }
        case 'advance':
        case 'shift': {
          if (params.length !== 1) refuse([...opPath, 'parameters'], `${op.op} takes one parameter`, op.parameters);
          const v = compileValue(params[0], ctx, [...opPath, 'parameters', 0]);
          const unit = op.op === 'shift' ? 8n : 1n;
          return (st) => {
            const bits = v(st, NO_ARGS) * unit;
            if (bits < 0n || bits % 8n !== 0n || st.offset + Number(bits / 8n) > st.frame.length) {
              st.parserError = ParserError.PacketTooShort;
              return false;
            }
            st.offset += Number(bits / 8n);
            return true;
          };
        }
        case 'verify': {
          if (params.length !== 2) refuse([...opPath, 'parameters'], 'verify takes two parameters', op.parameters);
          const c = compileValue(params[0], ctx, [...opPath, 'parameters', 0]);
          return (st) => {
            if (c(st, NO_ARGS) !== 0n) return true;
            st.parserError = ParserError.VerifyFailed;
            return false;
          };
        }
        default:
          return refuse([...opPath, 'op'], 'unsupported parser operation', op.op);
      }
    });

    // transition key: each part byte-padded, concatenated (JSON_format.md)
    type KeyPart = {
      v: Value;
      n: ((st: PacketState) => number) | undefined;
      slot: number;
      bytes: number;
      lookBits: number;
    };
    const keyParts: KeyPart[] = s.transition_key.map((k, ki) => {
      const kp: JsonPath = [...sp, 'transition_key', ki];
      if (k.type === 'field') {
        const f = layout.field(k.value, [...kp, 'value']);
        const slot = f.slot;
        return {
          v: compileValue(k, ctx, kp),
          n: f.wide ? undefined : (st: PacketState) => st.num[slot]!,
          slot: f.wide ? -1 : slot,
          bytes: Math.ceil(f.width / 8),
          lookBits: 0,
        };
      }
      if (k.type === 'lookahead') {
        const lv = k.value as [number, number];
        const v = compileValue(k, ctx, kp);
        const [off, width] = [Number(lv[0]), Number(lv[1])];
        // read only after the length check below
        const n = width <= NARROW_BITS ? (st: PacketState) => peekNum(st.frame, st.offset * 8 + off, width) : undefined;
        return { v, n, slot: -1, bytes: Math.ceil(width / 8), lookBits: off + width };
      }
      return refuse([...kp, 'type'], 'unsupported transition key', k.type);
    });
    const keyBits = keyParts.reduce((n, k) => n + k.bytes * 8, 0);
    const lookNeed = Math.max(0, ...keyParts.map((k) => k.lookBits));

    type Arm = { kind: 0 | 1 | 2; value: bigint; mask: bigint | null; vset?: VsetView; next: number };
    const arms: Arm[] = s.transitions.map((t, ti) => {
      const tp: JsonPath = [...sp, 'transitions', ti];
      const kind = t.type ?? (t.value === 'default' ? 'default' : 'hexstr');
      let next = ACCEPT;
      if (t.next_state !== null) {
        const n = index.get(t.next_state);
        if (n === undefined) refuse([...tp, 'next_state'], 'no such parse state', t.next_state);
        next = n;
      }
      if (t.mask !== null && t.mask !== undefined && !/^0x[0-9a-fA-F]+$/.test(t.mask))
        refuse([...tp, 'mask'], 'not a hexstring', t.mask);
      const mask = t.mask === null || t.mask === undefined ? null : hexToBig(t.mask);
      if (kind === 'default') return { kind: 0, value: 0n, mask: null, next };
      if (kind === 'parse_vset') {
        if (t.value === null) refuse([...tp, 'value'], 'a parse_vset transition names the set');
        const set = vsets.sets.get(t.value);
        if (!set) refuse([...tp, 'value'], 'no such parse value set', t.value);
        const view = set.view(mask);
        if (!view) refuse([...tp, 'mask'], `a parse value set tested under more than ${MAX_VSET_MASKS} masks`, t.mask);
        return { kind: 2, value: 0n, mask, vset: view, next };
      }
      if (t.value === null || !/^0x[0-9a-fA-F]+$/.test(t.value)) refuse([...tp, 'value'], 'not a hexstring', t.value);
      if (keyParts.length === 0) refuse([...tp, 'value'], 'a value transition needs a transition key', t.value);
      return { kind: 1, value: BigInt(t.value), mask, next };
    });

    // The number path: a key of at most 32 bits, or at most 48 without masks.
    const numeric =
      keyParts.every((k) => k.n !== undefined) &&
      (keyBits <= NARROW_BITS || (keyBits <= 48 && arms.every((a) => a.mask === null)));
    if (numeric) {
      const parts = keyParts.map((k) => ({ n: k.n!, mul: POW2[k.bytes * 8]! }));
      // a masked value arm compares (key & mask) with (value & mask), both below 2^32 here; one whose
      // (value & mask) has higher bits never matches (kind 3)
      const kinds = Uint8Array.from(arms, (a) =>
        a.kind === 1 && a.mask !== null && (a.value & a.mask) >> 32n !== 0n ? 3 : a.kind,
      );
      const values = Float64Array.from(arms, (a) => Number(a.mask === null ? a.value : a.value & a.mask));
      const masks = Int32Array.from(arms, (a) => (a.mask === null ? 0 : Number(a.mask & 0xffffffffn) | 0));
      const masked = Uint8Array.from(arms, (a) => (a.mask === null ? 0 : 1));
      const nexts = Int32Array.from(arms, (a) => a.next);
      const views = arms.map((a) => a.vset);
      // The common state: extracts, then one key part (a field) against plain values, or no key at all.
      const simple =
        keyParts.length <= 1 && lookNeed === 0 && arms.every((a) => a.kind === 0 || (a.kind === 1 && a.mask === null));
      if (simple) {
        const [op0, op1] = ops;
        const run: (st: PacketState) => boolean =
          ops.length === 0
            ? () => true
            : ops.length === 1
              ? op0!
              : ops.length === 2
                ? (st) => op0!(st) && op1!(st)
                : (st) => ops.every((o) => o(st));
        const dflt = arms.findIndex((a) => a.kind === 0);
        const n = dflt < 0 ? arms.length : dflt; // value arms before the default
        const vals = values.subarray(0, n);
        const tos = nexts.subarray(0, n);
        const noMatch = arms.length === 0 ? ACCEPT : dflt < 0 ? REJECT : nexts[dflt]!;
        if (keyParts.length === 0 || n === 0) {
          if (ops.length === 0 && noMatch !== REJECT) return () => noMatch; // a start state that only moves on
          return (st) => {
            if (!run(st)) return REJECT;
            if (noMatch === REJECT) st.parserError = ParserError.NoMatch;
            return noMatch;
          };
        }
        const read = keyParts[0]!.n!;
        const slot = keyParts[0]!.slot;
        if (slot >= 0 && ops.length === 1) {
          // one extract, then one field against values (parse_ethernet on etherType)
          return (st) => {
            if (!op0!(st)) return REJECT;
            const key = st.num[slot]!;
            for (let i = 0; i < n; i++) if (key === vals[i]) return tos[i]!;
            if (noMatch === REJECT) st.parserError = ParserError.NoMatch;
            return noMatch;
          };
        }
        return (st) => {
          if (!run(st)) return REJECT;
          const key = read(st);
          for (let i = 0; i < n; i++) if (key === vals[i]) return tos[i]!;
          if (noMatch === REJECT) st.parserError = ParserError.NoMatch;
          return noMatch;
        };
      }
      return (st: PacketState): number => {
        for (let i = 0; i < ops.length; i++) if (!ops[i]!(st)) return REJECT;
        if (kinds.length === 0) return ACCEPT;
        if (lookNeed > 0 && st.offset * 8 + lookNeed > st.frame.length * 8) {
          st.parserError = ParserError.PacketTooShort;
          return REJECT;
        }
        let key = 0;
        for (let i = 0; i < parts.length; i++) key = key * parts[i]!.mul + parts[i]!.n(st);
        for (let i = 0; i < kinds.length; i++) {
          const kind = kinds[i]!;
          if (kind === 0) return nexts[i]!;
          if (kind === 1) {
            if (masked[i] === 0 ? key === values[i] : (key & masks[i]!) >>> 0 === values[i]) return nexts[i]!;
          } else if (kind === 2) {
            // one probe of the set's view under this arm's mask (numbers: the key is below 2^48)
            if (views[i]!.num.has(masked[i] === 0 ? key : (key & masks[i]!) >>> 0)) return nexts[i]!;
          }
        }
        st.parserError = ParserError.NoMatch;
        return REJECT;
      };
    }

    return (st: PacketState): number => {
      for (let i = 0; i < ops.length; i++) if (!ops[i]!(st)) return REJECT;
      if (arms.length === 0) return ACCEPT;
      let key = 0n;
      if (keyParts.length > 0) {
        if (lookNeed > 0 && st.offset * 8 + lookNeed > st.frame.length * 8) {
          st.parserError = ParserError.PacketTooShort;
          return REJECT;
        }
        for (let i = 0; i < keyParts.length; i++) {
          const kp = keyParts[i]!;
          key = (key << BigInt(kp.bytes * 8)) | kp.v(st, NO_ARGS);
        }
      }
      for (let i = 0; i < arms.length; i++) {
        const a = arms[i]!;
        if (a.kind === 0) return a.next;
        if (a.kind === 1) {
          if (a.mask === null ? key === a.value : (key & a.mask) === (a.value & a.mask)) return a.next;
        } else if (a.vset!.big.has(a.mask === null ? key : key & a.mask)) return a.next;
      }
      st.parserError = ParserError.NoMatch;
      return REJECT;
    };
  });

  const init = index.get(parser.init_state);
  if (init === undefined) refuse([...base, 'init_state'], 'no such parse state', parser.init_state);

  return parserLoop(states, init, MAX_PARSE_STEPS, BUDGET);
}
