// A pipeline (../compile/pipeline.ts's nodes) as source: its tables,
// conditions and action calls, each node once in order when the graph is
// acyclic, else a bounded loop.

import { END } from '../compile/pipeline';
import { NO_ARGS } from '../compile/expr';
import { topoOrder } from '../program/graph';
import { actionSource } from './actions';
import { CODEGEN_LIMITS, GenContext, int, no } from './context';
import { num } from './expr';
import { tableSource } from './tables';

export function pipelineSource(gen: GenContext, pi: number): string {
  const pl = gen.input.program.pipelines[pi]!;
  const index = new Map<string, number>();
  const names = [
    ...pl.tables.map((t) => t.name),
    ...pl.conditionals.map((c) => c.name),
    ...(pl.action_calls ?? []).map((c) => c.name),
  ];
  names.forEach((n, i) => index.set(n, i));
  if (names.length > CODEGEN_LIMITS.nodes) no('too many control nodes');
  if ((pl.action_profiles ?? []).length > 0) no('action profiles');
  const next = (n: string | null | undefined): number => {
    if (n === null || n === undefined) return END;
    const i = index.get(n);
    if (i === undefined) no('no such control node');
    return i;
  };
  const bodies: string[] = [];
  const edges: number[][] = [];
  pl.tables.forEach((t) => {
    const tb = tableSource(gen, t, next);
    bodies.push(tb.src);
    edges.push(tb.next);
  });
  pl.conditionals.forEach((c) => {
    const cond = num(gen, c.expression, { widths: undefined, args: 'NO' });
    const [tn, fn] = [next(c.true_next), next(c.false_next)];
    bodies.push(`nd = ${cond} !== 0 ? ${int(tn)} : ${int(fn)};\n`);
    edges.push([tn, fn]);
  });
  (pl.action_calls ?? []).forEach((c) => {
    const ca = [...gen.input.actions.values()].find((a) => a.id === c.action_id);
    if (!ca || ca.params.length > 0) no('an action call outside the subset');
    const n = next(c.next_node);
    const act = actionSource(gen, ca, gen.cap(NO_ARGS));
    bodies.push(`${act.src}nd = ${int(n)};\n${act.exits ? `if (ex) nd = ${int(END)};\n` : ''}`);
    edges.push([n]);
  });
  const init = next(pl.init_table);
  const order =
    init === END
      ? []
      : topoOrder(
          init,
          edges.map((e) => e.filter((n) => n !== END)),
        );
  if (order) {
    // acyclic (every well-formed pipeline): each node once, in an order where every edge goes forward,
    // so at most all of them run (the budget, the node count + 1, cannot run out); an exit ends it
    let src = `let nd = ${int(init)};\n`;
    for (const ni of order) src += `if (nd === ${int(ni)}) {\n${bodies[ni]!}}\n`;
    return `{ ${src}}\n`;
  }
  let cases = '';
  bodies.forEach((b, ni) => {
    cases += `case ${int(ni)}: {\n${b}break; }\n`;
  });
  return `for (let nd = ${int(init)}, steps = 0; nd !== ${int(END)} && steps < ${int(names.length + 1)} && !ex; steps++) {
switch (nd) {
${cases}default: nd = ${int(END)};
}
}
`;
}
