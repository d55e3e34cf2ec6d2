// The product's imports keep to the floors (spec/project/import-graph.ts
// writes the order down): no import runs back up a floor, no files import
// each other round a circle, every file stands on a floor.
import { expect } from 'chai';
import * as path from 'path';
import { figures, floorOf, ImportGraph, readImportGraph, roomOf, stronglyConnected } from './import-graph';

const ROOT = path.join(__dirname, '..', '..', '..');

describe('project: the import graph', () => {
  const g = readImportGraph(ROOT);
  const f = figures(g);

  it('reads the product files and their imports', () => {
    expect(g.files).to.include('lib/ionic/device.ts');
    expect(g.files).to.include('protocol/field.ts');
    expect(g.edges.length).to.be.greaterThan(g.files.length);
    expect(g.edges).to.deep.include({ from: 'lib/ionic/device.ts', to: 'lib/pci/index.ts' });
  });

  it('every file stands on a floor', () => {
    expect(f.unplaced).to.deep.equal([]);
  });

  it('no import runs back up a floor', () => {
    const lines = [...f.arrowsUp].map(
      ([rooms, edges]) => `${rooms}: ${edges.map((e) => `${e.from} -> ${e.to}`).join(', ')}`,
    );
    expect(lines, lines.join('\n')).to.deep.equal([]);
  });

  it('no files import each other round a circle', () => {
    expect(f.circles.map((c) => c.join(' <-> '))).to.deep.equal([]);
  });

  it('finds a planted arrow back up and a planted circle', () => {
    const planted: ImportGraph = {
      files: ['lib/ionic/a.ts', 'lib/rdma/b.ts', 'lib/rdma/c.ts'],
      edges: [
        { from: 'lib/ionic/a.ts', to: 'lib/rdma/b.ts' },
        { from: 'lib/rdma/b.ts', to: 'lib/rdma/c.ts' },
        { from: 'lib/rdma/c.ts', to: 'lib/rdma/b.ts' },
        { from: 'lib/rdma/c.ts', to: 'lib/ionic/a.ts' },
      ],
      lines: new Map([
        ['lib/ionic/a.ts', 3],
        ['lib/rdma/b.ts', 700],
        ['lib/rdma/c.ts', 1],
      ]),
    };
    const p = figures(planted);
    expect([...p.arrowsUp.keys()]).to.deep.equal(['lib/rdma -> lib/ionic']);
    expect(p.circles).to.deep.equal([['lib/ionic/a.ts', 'lib/rdma/b.ts', 'lib/rdma/c.ts']]);
    expect(p.largest).to.deep.equal({ file: 'lib/rdma/b.ts', lines: 700 });
  });

  it('places files by the longest prefix and names rooms by top-level folder', () => {
    expect(floorOf('lib/log.ts')).to.be.lessThan(floorOf('lib/net/checksum.ts'));
    expect(floorOf('lib/rdma/x.ts')).to.be.lessThan(floorOf('lib/ionic/x.ts'));
    expect(floorOf('lib/unknown.ts')).to.equal(-1);
    expect(roomOf('lib/rdma/datapath/cqe.ts')).to.equal('lib/rdma');
    expect(roomOf('lib/log.ts')).to.equal('lib/log.ts');
    expect(roomOf('bin/rocm-ernic.ts')).to.equal('bin');
  });

  it('finds strongly connected components in a long chain without recursing', () => {
    const n = 20000;
    const nodes = Array.from({ length: n }, (_, i) => `n${i}`);
    const next = new Map(nodes.map((x, i) => [x, [nodes[(i + 1) % n]!]] as const));
    expect(stronglyConnected(nodes, next).map((c) => c.length)).to.deep.equal([n]);
  });
});
