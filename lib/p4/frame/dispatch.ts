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

export type IndexedFn = (st: PacketState) => number;

/** Above this many nodes the plain indexed loop is used (a switch this long gains nothing). */
const MAX_SWITCH = 64;

function checkInt(n: number, what: string): void {
  if (!Number.isSafeInteger(n)) throw new Error(`dispatch: ${what} ${n} is not an integer`);
}

/** `case i: n = f<i>(st); break;` for every node. */
function cases(count: number, to: string): string {
  let s = '';
  for (let i = 0; i < count; i++) s += `case ${i}: ${to} = f${i}(st); break;\n`;
  return s;
}

function build<T>(fns: readonly IndexedFn[], body: string): T {
  const params = fns.map((_, i) => `f${i}`);
  return new Function(...params, body)(...fns) as T;
}

/**
 * The parser's driver: from state `init`, each state returns the next one's
 * index or a negative end code; stops after `maxSteps` states with `budget`.
 */
export function parserLoop(states: readonly IndexedFn[], init: number, maxSteps: number, budget: number): (st: PacketState) => number {
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
  return build(states, `return function parse(st) {
  let s = ${init};
  for (let steps = 0; steps < ${maxSteps}; steps++) {
    switch (s) {
${cases(states.length, 's')}    default: return s;
    }
    if (s < 0) return s;
  }
  return ${budget};
};`);
}

/**
 * A pipeline's driver: from node `init` (or `end` for none), each node
 * returns the next one's index or `end`; at most `maxSteps` nodes, and it
 * stops when the frame has exited.
 */
export function nodeLoop(nodes: readonly IndexedFn[], init: number, end: number, maxSteps: number): (st: PacketState) => void {
  checkInt(init, 'init');
  checkInt(end, 'end');
  checkInt(maxSteps, 'maxSteps');
  if (nodes.length > MAX_SWITCH) {
    return (st) => {
      let n = init;
      for (let steps = 0; n !== end && steps < maxSteps && !st.exited; steps++) n = nodes[n]!(st);
    };
  }
  return build(nodes, `return function run(st) {
  let n = ${init};
  for (let steps = 0; n !== ${end} && steps < ${maxSteps} && !st.exited; steps++) {
    switch (n) {
${cases(nodes.length, 'n')}    default: return;
    }
  }
};`);
}

/** Above this many slots a layout's reset loops instead of writing each slot out. */
const MAX_UNROLLED_SLOTS = 512;

/**
 * PacketState.reset for one layout, every slot written out (measured here:
 * about a third of the time of the loops for simple_router's 24 number
 * slots). The source holds only integers (slot counts, initial validity bits).
 */
export function resetFunction(numSlots: number, bigSlots: number, initialValid: Uint8Array, stacks: number, noDigests: unknown): ((st: PacketState, frame: Buffer) => void) | undefined {
  checkInt(numSlots, 'numSlots');
  checkInt(bigSlots, 'bigSlots');
  checkInt(stacks, 'stacks');
  if (numSlots + bigSlots + 2 * initialValid.length + stacks > MAX_UNROLLED_SLOTS) return undefined;
  let src = 'return function reset(st, frame) {\nconst num = st.num; const big = st.big; const valid = st.valid; const ho = st.hdrOffset; const sn = st.stackNext;\n';
  for (let i = 0; i < numSlots; i++) src += `num[${i}] = 0;\n`;
  for (let i = 0; i < bigSlots; i++) src += `big[${i}] = 0n;\n`;
  for (let i = 0; i < initialValid.length; i++) src += `valid[${i}] = ${initialValid[i]! === 1 ? 1 : 0}; ho[${i}] = -1;\n`;
  for (let i = 0; i < stacks; i++) src += `sn[${i}] = 0;\n`;
  src += 'st.frame = frame; st.offset = 0; st.dropped = false; st.exited = false; st.parserError = 0; st.checksumError = false; st.digests = NO_DIGESTS;\n};';
  return new Function('NO_DIGESTS', src)(noDigests) as (st: PacketState, frame: Buffer) => void;
}
