// The deparse (the engine's deparse into a new buffer, its own buffer or,
// in place, the input frame) as source: only the windows the program may
// have written are written where a header did not move.

import type { Program } from '../program/schema';
import { GenContext, GenMode, int, no, o, v } from './context';
import { writeWindow } from './windows';

export function deparseSource(gen: GenContext, p: Program): string {
  const layout = gen.layout;
  const written = gen.input.written;
  const order = (p.deparsers[0]?.order ?? []).map((n) => {
    const h = layout.headerByName.get(n);
    if (!h || h.metadata) no('a deparser entry of no wire header');
    const plan = gen.plan(h);
    const all: number[] = [];
    const only: number[] = [];
    for (let g = 0; g < plan.n; g++) {
      all.push(g);
      const fs = plan.fields.slice(plan.first[g]!, plan.first[g]! + plan.count[g]!);
      if (!written || fs.some((x) => written.has(x))) only.push(g);
    }
    return { h, plan, all, only };
  });
  // A window no code writes after the parser holds the bytes it was extracted from: nothing to write
  // where the header did not move, a copy from where it was extracted where it did (so its fields'
  // locals are dead after their last read). A lazy field's window: written from its local once an
  // action wrote it, else the same as an unwritten one.
  const windows = (e: (typeof order)[number], gs: number[], b: string, base: string, moved: boolean) =>
    gs
      .map((g) => {
        const first = e.plan.first[g]!;
        const slot = e.plan.slot[first]!;
        let copy = '';
        for (let k = 0; k < e.plan.len[g]!; k++)
          copy += ` ${b}[${base} + ${int(e.plan.at[g]! + k)}] = frame[${o(e.h.index)} + ${int(e.plan.at[g]! + k)}];`;
        if (e.plan.fields.slice(first, first + e.plan.count[g]!).every((fi) => !gen.writes.has(fi.slot)))
          return moved ? `{${copy} }\n` : '';
        const w = writeWindow(e.plan, g, b, base);
        if (e.plan.count[g] !== 1 || !gen.lazy.has(slot)) return w;
        return moved ? `if (m${int(slot)}) ${w}else {${copy} }\n` : `if (m${int(slot)}) ${w}`;
      })
      .join('');
  let src = 'let hb = 0;\n';
  for (const e of order) src += `if (${v(e.h.index)} !== 0) hb += ${int(e.h.bytes)};\n`;
  src += 'const olen = len - off + hb;\nlet ip = false;\n';
  // in place: every valid header where it was extracted, the lengths equal; only the windows the program may write
  let check = 'let at = 0; ip = true;\n';
  for (const e of order)
    check += `if (${v(e.h.index)} !== 0) { if (${o(e.h.index)} !== at) ip = false; at += ${int(e.h.bytes)}; }\n`;
  check += 'if (at !== off) ip = false;\n';
  let inPlace = '';
  for (const e of order)
    inPlace += `if (${v(e.h.index)} !== 0) { const q = ${o(e.h.index)};\n${windows(e, e.only, 'frame', 'q', false)}}\n`;
  src += `if (mode === ${int(GenMode.IN_PLACE)}) { ${check}if (ip) {\n${inPlace}r.frame = frame; } }\n`;
  let emit = '';
  for (const e of order) {
    emit += `if (${v(e.h.index)} !== 0) {
if (same && ${o(e.h.index)} === at) { const q = at;
${windows(e, e.only, 'out', 'q', false)}} else { const q = at;
${windows(e, e.all, 'out', 'q', true)}}
at += ${int(e.h.bytes)}; }
`;
  }
  src += `if (!ip) {
const out = mode === ${int(GenMode.NEW_BUFFER)} ? ${gen.cap(Buffer)}.allocUnsafe(olen) : ${gen.cap(gen.input.view)}(olen);
const same = hb === off;
if (same) frame.copy(out, 0);
let at = 0;
${emit}if (!same) frame.copy(out, at, off);
r.frame = out;
}
`;
  return src;
}
