// A table node as source: the lookup (one-part number tables written out as
// ../compile/tables/lookups.ts does, the others through lookupNumbers), the
// direct counter, the entry's or the default's action by index, the next node.

import type { CompiledAction } from '../compile/actions';
import { END } from '../compile/pipeline';
import type { MatchTable } from '../compile/tables/match-table';
import type { Program } from '../program/schema';
import { actionSource } from './actions';
import { CODEGEN_LIMITS, GenContext, int, no, v } from './context';

/** A table node: the lookup, the direct counter, the entry's or the default's action by index, the next node. */
export function tableSource(
  gen: GenContext,
  t: Program['pipelines'][number]['tables'][number],
  next: (n: string | null | undefined) => number,
): { src: string; next: number[] } {
  const mt = gen.input.tables.get(t.name);
  if (!mt || mt.profile || mt.meter) no('a table outside the subset');
  const view = mt.numberView();
  if (!view) no('a table off the number path');
  const T = gen.cap(mt);
  const nt = t.next_tables;
  const hitMiss = nt.has('__HIT__') || nt.has('__MISS__');
  const onHit = hitMiss ? next(nt.get('__HIT__')) : END;
  const onMiss = hitMiss ? next(nt.get('__MISS__')) : END;
  const baseNext = next(t.base_default_next);
  const byAction = new Map<CompiledAction, number>();
  const possible = new Set<CompiledAction>(mt.actions.values());
  if (mt.defaultEntry) possible.add(mt.defaultEntry.action); // the JSON's default may name any action
  if (possible.size > CODEGEN_LIMITS.actionsPerTable) no('too many actions in a table');
  for (const a of possible) byAction.set(a, baseNext);
  if (!hitMiss) {
    for (const [a, n] of nt) {
      const ca = mt.actions.get(a);
      if (!ca) no('next_tables names no action of the table');
      byAction.set(ca, next(n));
    }
  }
  let src = `let e;\n${lookupSource(gen, mt, view, T)}`;
  if (mt.withCounters) src += 'if (e !== undefined) { e.packets++; e.bytes += len; }\n';
  src += `const c = e !== undefined ? e : ${T}.defaultEntry;\n`;
  src += `if (c === undefined) nd = ${int(hitMiss ? onMiss : baseNext)};\nelse {\nconst a = c.args;\nswitch (c.action.index) {\n`;
  let exits = false;
  for (const ca of possible) {
    const to = hitMiss ? `e !== undefined ? ${int(onHit)} : ${int(onMiss)}` : int(byAction.get(ca));
    const act = actionSource(gen, ca, 'a');
    exits ||= act.exits;
    src += `case ${int(ca.index)}: {\n${act.src}nd = ${to}; break; }\n`;
  }
  src += `default: throw new Error('p4: an action this table cannot run');\n}\n}\n`;
  if (exits) src += `if (ex) nd = ${int(END)};\n`;
  const nexts = hitMiss ? [onHit, onMiss] : [baseNext, ...byAction.values()];
  return { src, next: nexts };
}

/** The lookup into `e`: one-part number tables written out as MatchTable.directNode does, the others through lookupNumbers. */
function lookupSource(
  gen: GenContext,
  mt: MatchTable,
  view: NonNullable<ReturnType<MatchTable['numberView']>>,
  T: string,
): string {
  const keys = mt.keys;
  if (keys.length === 0) return '';
  const k0 = keys[0]!;
  if (keys.length === 1 && k0.slot >= 0 && view.mode !== 'ordered') {
    const sm = gen.cap(view.small);
    const sk = gen.cap(view.small.keys);
    const se = gen.cap(view.small.entries);
    const i32 = view.int32;
    // the short array's scan written out (it holds at most small.keys.length entries): no loop, so
    // no interrupt check per entry, and the first match wins as in the loop
    const scan = (match: (i: string) => string): string =>
      Array.from(
        { length: view.small.keys.length },
        (_, i) => `if (n0 > ${int(i)} && ${match(int(i))}) e = ${se}[${int(i)}];`,
      ).join('\nelse ');
    const x = gen.r(k0.slot);
    if (view.mode === 'exact') {
      return `{ const k = ${i32 ? `${x} | 0` : x}; const n0 = ${sm}.n;
if (n0 < 0) e = ${gen.cap(view.exact)}.get(k);
else {\n${scan((i) => `${i32 ? gen.cap(view.small.pre) : sk}[${i}] === k`)} } }
`;
    }
    const ps = gen.cap(view.prefixes);
    const q = (x: string) => (i32 ? `${x} | 0` : x);
    // the short array's entries: for an int32 table (the key below 2^32) the prefix test is
    // ((k ^ value) & mask) === 0 on int32s, the same match as floor(k / 2^(w - len)) === prefix
    const prefix =
      i32 && gen.withinWidths
        ? `{ const pre = ${gen.cap(view.small.pre)}; const msk = ${gen.cap(view.small.msk)};\n${scan((i) => `((k ^ pre[${i}]) & msk[${i}]) === 0`)} }`
        : `{ const dv = ${gen.cap(view.small.divs)};\n${scan((i) => `(${q(`Math.floor(k / dv[${i}])`)}) === ${sk}[${i}]`)} }`;
    return `{ const k = ${x}; const n0 = ${sm}.n;
if (n0 >= 0) ${prefix}
else for (let j = 0; j < ${ps}.length; j++) { const pm = ${ps}[j]; const q = Math.floor(k / pm.div); e = pm.map.get(${q('q')}); if (e !== undefined) break; } }
`;
  }
  const kv = gen.cap(new Float64Array(keys.length));
  let src = '';
  keys.forEach((k, i) => {
    let x: string;
    if (k.validHeader >= 0) x = v(k.validHeader);
    else if (k.fieldSlot < 0) no('a key part of no number field');
    else if (k.numMask !== undefined) x = `((${gen.r(k.fieldSlot)} & ${int(k.numMask)}) >>> 0)`;
    else x = gen.r(k.fieldSlot);
    src += `${kv}[${int(i)}] = ${x};\n`;
  });
  return `${src}e = ${T}.lookupNumbers(${kv});\n`;
}
