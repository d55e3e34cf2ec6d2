// The whole program per frame as one generated function: the parser's
// states, checksum verify and update, the pipelines' tables, conditions and
// actions, and the deparse written out in one function, with every header
// field in a JS local instead of a typed-array slot (P4Engine runs it for
// process() and processReused() when the program is in the subset below;
// the closures of the other modules stay the reference, and run the rest).
//
// What it does is the closures' behaviour, shape for shape: the same
// window reads and writes as ../frame/header-bits.ts, the number path of
// ../compile/expr.ts (compileNum) for conditions and assignments,
// ../compile/csum16.ts's runs, the
// tables' own lookup structures (read, never copied), the same bounded
// loops (MAX_PARSE_STEPS states, a pipeline's node count + 1 nodes).
// spec/p4/codegen/ runs both over the same frames and compares.
//
// The source is made of fixed code shapes and integers only: slot, header,
// state, node and action indices, widths, byte offsets, shifts, masks and
// constants, each checked with Number.isSafeInteger before it is written.
// No string from the program (a name, a hexstring) ever reaches the source;
// the tables, bigint masks and constants the code needs are passed in as
// parameters (c0, c1, ...). Anything outside the subset (wide fields,
// stacks, lookahead, value sets, bigint expressions, counters/meters/
// registers in actions, profiles, ...) refuses, and the interpreter runs
// the program as before.

import { DROP_PORT } from '../compile/actions';
import { ACCEPT, BUDGET } from '../compile/parser';
import { planOf, W } from '../frame/header-bits';
import { NO_DIGESTS } from '../frame/packet-state';
import type { Layout } from '../program/layout';
import { checksumsSource } from './checksums';
import { CODEGEN_LIMITS, CodegenInput, f, GeneratedRun, GenContext, int, no, o, Unsupported, v } from './context';
import { deparseSource } from './deparser';
import { parserSource } from './parser';
import { pipelineSource } from './pipeline';

type Generated = { readonly run: GeneratedRun; readonly source: string } | { readonly refused: string };

/** One build of the program's source in the parts' order (the parser, the pipelines, then the checksums around them, the deparse), compiled. */
function build(gen: GenContext): { run: GeneratedRun; source: string } {
  const { program: p, layout, slots: sl } = gen.input;
  gen.checkLayout();
  let src = 'return function run(frame, port, mode, r) {\n';
  src += `${gen.cap(gen.input.stats)}.frames++;\nconst len = frame.length;\n`;
  src += `if (len > ${int(gen.input.maxFrame)}) { ${drop(gen, 'too-long', '0')} }\n`;
  const decl: string[] = [];
  for (let i = 0; i < layout.numSlots; i++) decl.push(`${f(i)} = 0`);
  layout.headers.forEach((h) => decl.push(`${v(h.index)} = ${h.metadata ? 1 : 0}`, `${o(h.index)} = -1`));
  for (const slot of gen.lazy) decl.push(`m${int(slot)} = false`);
  src += `let ${decl.join(', ')};\n`;
  src += `let off = 0, perr = 0, dropped = false, ex = false, cerr = false, dg = ${gen.cap(NO_DIGESTS)};\n`;
  if (sl.ingressPort >= 0) src += `${f(sl.ingressPort)} = port & 0x1ff;\n`;
  if (sl.packetLength >= 0) src += `${f(sl.packetLength)} = len;\n`;
  src += parserSource(gen);
  src += `if (pr === ${int(BUDGET)}) { ${gen.cap(gen.input.stats)}.budgetDrops++; ${drop(gen, 'parser-budget', 'perr')} }\n`;
  src += `if (pr !== ${int(ACCEPT)}) ${gen.cap(gen.input.stats)}.parserErrors++;\n`;
  // the pipelines first (what they may write is known then), the checksums around them
  let mid = gen.input.ingress >= 0 ? pipelineSource(gen, gen.input.ingress) : '';
  const es = sl.egressSpec >= 0 ? ` || ${gen.r(sl.egressSpec)} === ${int(DROP_PORT)}` : '';
  mid += `if (dropped${es}) { ${drop(gen, 'program', 'perr')} }\n`;
  if (sl.egressPort >= 0 && sl.egressSpec >= 0 && gen.input.specWritten)
    mid += `${f(sl.egressPort)} = ${gen.r(sl.egressSpec)};${gen.m(sl.egressPort)}\n`;
  mid += 'ex = false;\n';
  if (gen.input.egress >= 0) mid += pipelineSource(gen, gen.input.egress);
  mid += `if (dropped) { ${drop(gen, 'program', 'perr')} }\n`;
  const { verify, update, decl: sums } = checksumsSource(gen);
  src += sums + verify + mid + update;
  src += deparseSource(gen, p);
  const ep = sl.egressPort >= 0 ? gen.r(sl.egressPort) : '0';
  const mg = `(${sl.mgid >= 0 ? gen.r(sl.mgid) : '0'} || ${sl.mcastGrp >= 0 ? gen.r(sl.mcastGrp) : '0'})`;
  src += `r.dropped = false; r.reason = undefined; r.egressPort = ${ep}; r.multicastGroup = ${mg}; r.parserError = perr; r.checksumError = cerr; r.digests = dg;\n};`;
  if (src.length > CODEGEN_LIMITS.source) no('the generated source is too long');
  const names = gen.caps.map((_, i) => `c${i}`);
  const run = new Function(...names, src)(...gen.caps) as GeneratedRun;
  return { run, source: src };
}

/** The drop of the interpreter's processReused (stats.dropped counted; digests so far kept). */
function drop(gen: GenContext, reason: 'too-long' | 'parser-budget' | 'program', parserError: string): string {
  const dg = reason === 'too-long' ? gen.cap(NO_DIGESTS) : 'dg';
  return `${gen.cap(gen.input.stats)}.dropped++; r.frame = undefined; r.dropped = true; r.reason = '${reason}'; r.egressPort = 0; r.multicastGroup = 0; r.parserError = ${parserError}; r.checksumError = false; r.digests = ${dg}; return;`;
}

/** Wire fields alone in their window that the code never reads (see GenContext's lazy). */
function lazyFields(layout: Layout, reads: ReadonlySet<number>): Set<number> {
  const lazy = new Set<number>();
  for (const h of layout.headers) {
    if (h.metadata) continue;
    const plan = planOf(h);
    for (let g = 0; g < plan.n; g++) {
      const slot = plan.slot[plan.first[g]!]!;
      if (plan.count[g] === 1 && plan.kind[g] !== W.GENERAL && !reads.has(slot)) lazy.add(slot);
    }
  }
  return lazy;
}

/** The program as one generated function, or why not (the interpreter then runs it). */
export function generateProgram(input: CodegenInput): Generated {
  try {
    const first = new GenContext(input);
    const built = build(first);
    const lazy = lazyFields(input.layout, first.reads);
    return lazy.size === 0 ? built : build(new GenContext(input, lazy));
  } catch (e) {
    if (e instanceof Unsupported) return { refused: e.message };
    // anything else is a generator bug: the closures, the reference, run the program instead
    return { refused: `the generator failed: ${(e as Error)?.message ?? String(e)}` };
  }
}
