// Per-program dispatch loops, generated once at load. The parser's states
// and a pipeline's nodes are closures called by index; a loop with one call
// site (`nodes[n](st)`) sees every node of every loaded program there, so V8
// treats it as megamorphic and inlines none of them (and two engines in one
// process, the bench's two or the segment's and another, share that site).
// Here each program gets its own loop function, compiled from source made
// of integers only (the node count, the start index, the budget: no name or
// value from the program reaches the source), with one call site per node
// in a switch, so each site always calls the same closure and can be
// inlined. Behaviour is the closures' own; only the dispatch changes.

import type { PacketState } from './packet-state';
import { checkInt, fromSource } from './integer-source';

type IndexedFn = (st: PacketState) => number;

/** Above this many nodes the plain indexed loop is used (a switch this long gains nothing). */
const MAX_SWITCH = 64;

/** `case i: n = f<i>(st); break;` for every node. */
function cases(count: number, to: string): string {
  let s = '';
  for (let i = 0; i < count; i++) s += `case ${i}: ${to} = f${i}(st); break;\n`;
  return s;
}

/**
 * The parser's driver: from state `init`, each state returns the next one's
 * index or a negative end code; stops after `maxSteps` states with `budget`.
 */
export function parserLoop(
  states: readonly IndexedFn[],
  init: number,
  maxSteps: number,
  budget: number,
): (st: PacketState) => number {
  checkInt(init, 'init');
  checkInt(maxSteps, 'maxSteps');
  checkInt(budget, 'budget');
  if (states.length > MAX_SWITCH) {
    return (st) => {
      let s = init;
      for (let steps = 0; steps < maxSteps; steps++) {
        s = states[s]!(st);
        if (s < 0) return s;
      }
      return budget;
    };
  }
  return fromSource(
    states,
    `return function parse(st) {
  let s = ${init};
  for (let steps = 0; steps < ${maxSteps}; steps++) {
    switch (s) {
${cases(states.length, 's')}    default: return s;
    }
    if (s < 0) return s;
  }
  return ${budget};
};`,
  );
}

/**
 * A pipeline's driver: from node `init` (or `end` for none), each node
 * returns the next one's index or `end`; at most `maxSteps` nodes, and it
 * stops when the frame has exited.
 */
export function nodeLoop(
  nodes: readonly IndexedFn[],
  init: number,
  end: number,
  maxSteps: number,
): (st: PacketState) => void {
  checkInt(init, 'init');
  checkInt(end, 'end');
  checkInt(maxSteps, 'maxSteps');
  if (nodes.length > MAX_SWITCH) {
    return (st) => {
      let n = init;
      for (let steps = 0; n !== end && steps < maxSteps && !st.exited; steps++) n = nodes[n]!(st);
    };
  }
  return fromSource(
    nodes,
    `return function run(st) {
  let n = ${init};
  for (let steps = 0; n !== ${end} && steps < ${maxSteps} && !st.exited; steps++) {
    switch (n) {
${cases(nodes.length, 'n')}    default: return;
    }
  }
};`,
  );
}
