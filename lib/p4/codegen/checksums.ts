// Checksums (../compile/csum16.ts's runs, as ../compile/checksums.ts
// applies them) as source: verify after the parser, update before the
// deparse, in int32 arithmetic when every term allows it.

import { csum16Plan, Csum16Plan, payloadSum, singleRun } from '../compile/csum16';
import type { ExprContext } from '../compile/expr';
import { f, fieldOf, GenContext, int, no, v } from './context';
import { num } from './expr';

/** The int32 form's end: two folds take a sum below 2^31 to 16 bits (the loop's result), then the complement. */
const INT_FOLD = ' s = (s & 0xffff) + (s >>> 16); s = (s & 0xffff) + (s >>> 16); const x = ~s & 0xffff;';

export function checksumsSource(gen: GenContext): { verify: string; update: string; decl: string } {
  const { program: p, layout } = gen.input;
  const names = new Set<string>();
  for (const c of p.calculations) {
    if (names.has(c.name)) no('two calculations of one name');
    names.add(c.name);
  }
  const ctx: ExprContext = { layout, runtimeData: 0, parser: false };
  let verify = '';
  let update = '';
  let decl = '';
  for (const c of p.checksums) {
    const target = fieldOf(layout, c.target);
    if (c.update !== false && target) gen.m(target.slot); // an update writes it before later checksums read it
  }
  for (const [ci, c] of p.checksums.entries()) {
    const calc = p.calculations.find((x) => x.name === c.calculation);
    if (!calc || c.type !== 'generic') no('a checksum outside the subset');
    const plan = csum16Plan(calc, ctx);
    if (!plan) no('a checksum off the number path');
    const target = fieldOf(layout, c.target);
    if (!target || target.wide) no('a checksum into no number field');
    const h = target.header;
    const sum = csum(gen, plan);
    const t = f(target.slot);
    const tr = c.verify !== false ? gen.r(target.slot) : t;
    const mt = gen.m(target.slot);
    if (target.width >= 16 && !c.if_cond && c.verify !== false && c.update !== false && splits(gen, plan, h)) {
      // verify sums the inputs nothing after the parser writes once; update adds the others to it
      const ss = `ss${int(ci)}`;
      decl += `let ${ss} = 0;\n`;
      verify += `if (${v(h)} === 1) { let s = 0;${intTerms(gen, plan, false)} ${ss} = s;${intTerms(gen, plan, true)}${INT_FOLD} if (x !== ${tr}) cerr = true; }\n`;
      update += `if (${v(h)} === 1) { let s = ${ss};${intTerms(gen, plan, true)}${INT_FOLD} ${t} = x;${mt} }\n`;
      continue;
    }
    if (target.width >= 16 && !c.if_cond) {
      if (c.verify !== false) verify += `if (${v(h)} === 1) { ${sum} if (x !== ${tr}) cerr = true; }\n`;
      if (c.update !== false) update += `if (${v(h)} === 1) { ${sum} ${t} = x;${mt} }\n`;
      continue;
    }
    const m = int(2 ** Math.min(target.width, 16));
    const cond = c.if_cond ? ` && ${num(gen, c.if_cond, { widths: undefined, args: 'NO' })} !== 0` : '';
    if (c.verify !== false) verify += `if (${v(h)} === 1${cond}) { ${sum} if (x % ${m} !== ${tr}) cerr = true; }\n`;
    if (c.update !== false) update += `if (${v(h)} === 1${cond}) { ${sum} ${t} = x % ${m};${mt} }\n`;
  }
  return { verify, update, decl };
}

/**
 * Whether verify's sum can be kept for update: the int32 form, the target's
 * and every run's header validity unchanged after the parser (so both sums
 * cover the same runs), and only some inputs writable in between.
 */
function splits(gen: GenContext, plan: Csum16Plan, target: number): boolean {
  if (!intForm(gen, plan) || gen.validWrites.has(target)) return false;
  return plan.runs.every((r) => r.header < 0 || !gen.validWrites.has(r.header));
}

/** The int32 form's terms (see #csum): those of inputs nothing writes after the parser (with the constants), or the others. */
function intTerms(gen: GenContext, plan: Csum16Plan, written: boolean): string {
  const residue = (k: number) => (k === 0 ? 0 : k % 65535 === 0 ? 65535 : k % 65535);
  let src = '';
  for (const run of plan.runs) {
    const terms = run.slots
      .flatMap((sl, i) => (gen.writes.has(sl) === written ? [` + ${intTerm(gen, sl, run.muls[i]!)}`] : []))
      .join('');
    const k = written ? '' : int(residue(run.constant));
    if (terms === '' && (written || run.constant === 0)) continue;
    if (run.header < 0) src += ` s += ${k || '0'};`;
    else src += ` if (${v(run.header)} !== 0) s += ${k || '0'}${terms};`;
  }
  return src;
}

/** One input's int32 term: v * 2^s, or its two 16-bit halves added when it needs more than 16 bits. */
function intTerm(gen: GenContext, slot: number, mul: number): string {
  const sh = Math.round(Math.log2(mul));
  const x = sh === 0 ? gen.r(slot) : `(${gen.r(slot)} << ${int(sh)})`;
  return gen.widths[slot]! + sh <= 16 ? x : `((${x} >>> 16) + (${x} & 0xffff))`;
}

/** The int32 form applies: every field within its width, no payload, every term within 32 bits. */
function intForm(gen: GenContext, plan: Csum16Plan): boolean {
  const bits = (mul: number) => Math.round(Math.log2(mul));
  return (
    gen.withinWidths &&
    plan.phase < 0 &&
    plan.runs.length <= 64 &&
    plan.runs.every(
      (r) =>
        r.slots.length <= 64 &&
        r.split.every((x) => !x) &&
        r.slots.every((sl, i) => gen.widths[sl]! + bits(r.muls[i]!) <= 32),
    )
  );
}

/**
 * Statements leaving the folded, complemented sum in a const `x`: the
 * value ../compile/csum16.ts computes. In int32 arithmetic when it can: the
 * folded result depends only on the sum modulo 65535 and on whether the
 * sum is 0 (the fold keeps the residue and ends in 1..0xffff for a
 * positive sum), so each term v * 2^s may be replaced by its two 16-bit
 * halves added (2^16 = 1 modulo 65535; zero only when v is), and the
 * constant by its residue (kept non-zero), when every term fits 32 bits;
 * the sum then stays below 2^31 and two folds finish it.
 */
function csum(gen: GenContext, plan: Csum16Plan): string {
  const fold =
    ' while (s > 0xffff) { const q = Math.floor(s / 0x10000); s = s - q * 0x10000 + q; } const x = ~s & 0xffff;';
  if (intForm(gen, plan)) return `let s = 0;${intTerms(gen, plan, false)}${intTerms(gen, plan, true)}${INT_FOLD}`;
  const term = (slot: number, mul: number, split: boolean): string =>
    split
      ? `(Math.floor(${gen.r(slot)} / 4294967296) + (${f(slot)} - Math.floor(${f(slot)} / 4294967296) * 4294967296)) * ${int(mul)}`
      : `${gen.r(slot)} * ${int(mul)}`;
  let s: string;
  const single = singleRun(plan);
  if (single) {
    const terms = single.slots.map((sl, i) => term(sl, single.muls[i]!, false)).join(' + ');
    s = `let s = ${int(single.constant)}; if (${v(single.header)} !== 0) s = s + ${terms};`;
  } else {
    s = 'let s = 0;';
    for (const run of plan.runs) {
      const terms = run.slots.map((sl, i) => ` + ${term(sl, run.muls[i]!, run.split[i]!)}`).join('');
      s +=
        run.header < 0
          ? ` s += ${int(run.constant)};`
          : ` if (${v(run.header)} !== 0) s += ${int(run.constant)}${terms};`;
    }
    if (plan.phase >= 0) s += ` s += ${gen.cap(payloadSum)}(frame, off, ${plan.phase === 8 ? 'true' : 'false'});`;
  }
  return `${s}${fold}`;
}
