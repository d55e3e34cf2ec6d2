// The order the frame cost estimate and the generator walk a program's
// graphs in (lib/p4/program/graph.ts).

import { expect } from 'chai';
import { topoOrder } from '../../../lib/p4/program/graph';

describe('p4 program graphs', () => {
  it('topoOrder: forward order of a DAG from its start, undefined for a cycle', () => {
    expect(topoOrder(0, [[1, 2], [3], [3, -1], []])).to.deep.equal([0, 2, 1, 3]);
    expect(topoOrder(2, [[1], [], [0, -1]])).to.deep.equal([2, 0, 1]);
    expect(topoOrder(0, [[1], [2], [0]])).to.equal(undefined);
    expect(topoOrder(0, [[0]])).to.equal(undefined);
    expect(topoOrder(0, [[5]])).to.equal(undefined);
  });
});
