// The parser (../compile/parser.ts's number path) as source: each state's
// extracts, sets and verifies, its transition, and the loop or, for an
// acyclic parser, the states in order.

import { ACCEPT, BUDGET, MAX_PARSE_STEPS, REJECT } from '../compile/parser';
import { ParserError } from '../frame/packet-state';
import { topoOrder } from '../program/graph';
import { hexToBig, POW2 } from '../program/numbers';
import { NARROW_BITS } from '../program/layout';
import type { Program } from '../program/schema';
import { CODEGEN_LIMITS, f, fieldOf, GenContext, int, no, o, v } from './context';
import { num } from './expr';
import { readWindow } from './windows';

export function parserSource(gen: GenContext): string {
  const { program: p, layout } = gen.input;
  const parser = p.parsers[0];
  if (!parser || p.parsers.length !== 1) no('not one parser');
  if (parser.parse_states.length > CODEGEN_LIMITS.states) no('too many parse states');
  const index = new Map<string, number>();
  parser.parse_states.forEach((s, i) => index.set(s.name, i));
  const init = index.get(parser.init_state);
  if (init === undefined) no('no initial parse state');
  const bodies: string[] = [];
  const edges: number[][] = [];
  parser.parse_states.forEach((s, si) => {
    // `brk` leaves the state's code: the loop form's switch, or the straight-line form's labelled block
    const brk = `BRK${si}`;
    let body = '';
    for (const op of s.parser_ops) {
      const params = op.parameters as { type?: string; value?: unknown }[];
      switch (op.op) {
        case 'extract': {
          const prm = params[0];
          if (params.length !== 1 || !prm || prm.type !== 'regular') no('an extract other than of a regular header');
          const h = layout.headerByName.get(prm.value as string);
          if (!h || h.metadata) no('an extract of no wire header');
          const plan = gen.plan(h);
          body += `if (off + ${int(h.bytes)} > len) { perr = ${int(ParserError.PacketTooShort)}; s = ${int(REJECT)}; ${brk} }\n`;
          body += '{ const p = off;\n';
          for (let g = 0; g < plan.n; g++) body += readWindow(gen, plan, g, 'frame', 'p');
          body += `${v(h.index)} = 1; ${o(h.index)} = p; off = p + ${int(h.bytes)}; }\n`;
          break;
        }
        case 'set': {
          if (params.length !== 2) no('a malformed set');
          const dst = fieldOf(layout, params[0]!.value);
          if (!dst || dst.wide) no('a set of no number field');
          // compileValue's bigint, stored with & mask: the same as the number wrapped to the width
          const m = int(POW2[dst.width]);
          body += `{ const x = ${num(gen, params[1], { widths: undefined, args: 'NO' })} % ${m}; ${f(dst.slot)} = x < 0 ? x + ${m} : x;${gen.m(dst.slot)} }\n`;
          break;
        }
        case 'verify': {
          if (params.length !== 2) no('a malformed verify');
          body += `if (${num(gen, params[0], { widths: undefined, args: 'NO' })} === 0) { perr = ${int(ParserError.VerifyFailed)}; s = ${int(REJECT)}; ${brk} }\n`;
          break;
        }
        default:
          no('a parser operation outside the subset');
      }
    }
    const t = transition(gen, s, index);
    bodies.push(body + t.src);
    edges.push(t.next);
  });
  const order = topoOrder(init, edges);
  if (order) {
    // acyclic: each reachable state once, in an order where every transition goes forward, so a
    // frame visits at most all of them (<= MAX_PARSE_STEPS: the budget cannot run out)
    let src = `let s = ${int(init)};\n`;
    for (const si of order)
      src += `st${int(si)}: if (s === ${int(si)}) {\n${bodies[si]!.split(`BRK${si}`).join(`break st${int(si)};`)}}\n`;
    return `${src}const pr = s;\n`;
  }
  let cases = '';
  bodies.forEach((b, si) => {
    cases += `case ${int(si)}: {\n${b.split(`BRK${si}`).join('break;')}break; }\n`;
  });
  return `let pr = ${int(BUDGET)};
parse: for (let s = ${int(init)}, steps = 0; steps < ${int(MAX_PARSE_STEPS)}; steps++) {
switch (s) {
${cases}default: pr = s; break parse;
}
if (s < 0) { pr = s; break; }
}
`;
}

/** A state's transition on the number path (fields only: a key of <= 32 bits, or <= 48 without masks). */
function transition(
  gen: GenContext,
  s: Program['parsers'][number]['parse_states'][number],
  index: Map<string, number>,
): { src: string; next: number[] } {
  const layout = gen.layout;
  let key = '';
  let keyBits = 0;
  for (const k of s.transition_key) {
    if (k.type !== 'field') no('a transition key other than fields');
    const fi = fieldOf(layout, k.value);
    if (!fi || fi.wide) no('a transition key of no number field');
    const bytes = Math.ceil(fi.width / 8);
    key = key === '' ? gen.r(fi.slot) : `(${key} * ${int(POW2[bytes * 8])} + ${gen.r(fi.slot)})`;
    keyBits += bytes * 8;
  }
  const arms = s.transitions.map((t) => {
    const kind = t.type ?? (t.value === 'default' ? 'default' : 'hexstr');
    const next = t.next_state === null ? ACCEPT : index.get(t.next_state);
    if (next === undefined) no('no such parse state');
    const mask = t.mask === null || t.mask === undefined ? null : hexToBig(t.mask);
    if (kind === 'default') return { kind: 0, value: 0n, mask: null, next };
    if (kind !== 'hexstr' || t.value === null || !/^0x[0-9a-fA-F]+$/.test(t.value))
      no('a transition outside the subset');
    return { kind: 1, value: BigInt(t.value), mask, next };
  });
  if (!(keyBits <= NARROW_BITS || (keyBits <= 48 && arms.every((a) => a.mask === null))))
    no('a transition key off the number path');
  const next = arms.map((a) => a.next).filter((n) => n >= 0);
  if (arms.length === 0) return { src: `s = ${int(ACCEPT)};\n`, next };
  let src = key === '' ? '' : `{ const key = ${key};\n`;
  let closed = false;
  let n = 0;
  for (const a of arms) {
    if (a.kind === 0) {
      src += `${n > 0 ? 'else ' : ''}s = ${int(a.next)};\n`;
      closed = true;
      break;
    }
    if (key === '') no('a value transition without a key');
    if (a.mask === null) src += `${n > 0 ? 'else ' : ''}if (key === ${int(Number(a.value))}) s = ${int(a.next)};\n`;
    else {
      if ((a.value & a.mask) >> 32n !== 0n) continue; // never matches (./parser.ts kind 3)
      src += `${n > 0 ? 'else ' : ''}if (((key & ${int(Number(a.mask & 0xffffffffn) | 0)}) >>> 0) === ${int(Number(a.value & a.mask))}) s = ${int(a.next)};\n`;
    }
    n++;
  }
  if (!closed) src += `${n > 0 ? 'else ' : ''}{ perr = ${int(ParserError.NoMatch)}; s = ${int(REJECT)}; }\n`;
  return { src: key === '' ? src : `${src}}\n`, next };
}
