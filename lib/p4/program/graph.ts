// Orders over a program's graphs (parse states, control nodes): the frame
// cost estimate and the generator both need to know whether one is acyclic.

/**
 * The nodes reachable from `init` in an order where every edge goes
 * forward (a depth-first post-order, reversed), or undefined when they
 * form a cycle. Edges to negative indices (the end codes) are ignored.
 */
export function topoOrder(init: number, edges: readonly (readonly number[])[]): number[] | undefined {
  const state = new Uint8Array(edges.length); // 0 new, 1 on the path, 2 done
  const post: number[] = [];
  // iterative (the graph comes from the program): a stack of [node, next edge index]
  const stack: [number, number][] = [[init, 0]];
  state[init] = 1;
  while (stack.length > 0) {
    const top = stack[stack.length - 1]!;
    const [n, i] = top;
    const out = edges[n]!;
    if (i < out.length) {
      top[1]++;
      const m = out[i]!;
      if (m < 0) continue;
      if (m >= edges.length) return undefined;
      if (state[m] === 1) return undefined;
      if (state[m] === 0) {
        state[m] = 1;
        stack.push([m, 0]);
      }
      continue;
    }
    state[n] = 2;
    post.push(n);
    stack.pop();
  }
  return post.reverse();
}
