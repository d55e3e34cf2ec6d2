// The import graph of the product (lib, bin, protocol), read from the
// TypeScript sources: which floor each file stands on, the imports that run
// back up a floor, the circles (files that reach each other through their
// imports), and the largest file. The spec beside it holds the figures to
// their goals; run this file with node (dist/spec/project/import-graph.js) to
// print them.
//
// FLOORS is the one place the allowed order is written down: a file may
// import files of its own floor and of the floors below it. A file's floor is
// the entry whose prefix matches it longest.

import * as fs from 'fs';
import * as path from 'path';

/** Bottom first. A prefix ending in '/' is a folder; otherwise one file. */
const FLOORS: readonly (readonly string[])[] = [
  ['protocol/'],
  ['lib/log.ts', 'lib/guard.ts', 'lib/latency-flags.ts', 'lib/native/'],
  ['lib/net/'],
  ['lib/vfio-user/'],
  ['lib/pci/'],
  ['lib/mesh/', 'lib/roce/'],
  ['lib/rdma/'],
  ['lib/targets/'],
  ['lib/ionic/'],
  ['lib/p4/'],
  ['lib/backends/'],
  ['lib/ops/'],
  ['lib/cli/', 'lib/index.ts', 'lib/examples/'],
  ['bin/'],
];

/** The top-level folders the graph reads. */
const ROOTS = ['protocol', 'lib', 'bin'];

interface ImportEdge {
  readonly from: string;
  readonly to: string;
}

export interface ImportGraph {
  /** Repository-relative paths of the .ts files, sorted. */
  readonly files: readonly string[];
  readonly edges: readonly ImportEdge[];
  readonly lines: ReadonlyMap<string, number>;
}

interface GraphFigures {
  /** Floors of FLOORS that hold at least one file. */
  readonly floors: number;
  /** The longest chain of rooms (top-level folders) importing one another, cycles of rooms collapsed. */
  readonly depth: number;
  /** Rooms importing a room on a higher floor ("lib/rdma -> lib/targets"), each with the imports that do it. */
  readonly arrowsUp: ReadonlyMap<string, readonly ImportEdge[]>;
  /** Files on no floor. */
  readonly unplaced: readonly string[];
  /** Strongly connected components of more than one file (or a file importing itself), each sorted. */
  readonly circles: readonly (readonly string[])[];
  readonly largest: { readonly file: string; readonly lines: number };
}

const SPECIFIER = /(?:\bfrom\s*|\bimport\s*\(\s*|\brequire\s*\(\s*|^\s*import\s+)['"]([^'"]+)['"]/gm;

function walk(root: string, rel: string, out: string[]): void {
  const dir = path.join(root, rel);
  if (!fs.existsSync(dir)) return;
  for (const e of fs.readdirSync(dir, { withFileTypes: true })) {
    const p = `${rel}/${e.name}`;
    if (e.isDirectory()) {
      if (e.name !== 'node_modules' && e.name !== 'build') walk(root, p, out);
    } else if (e.name.endsWith('.ts') && !e.name.endsWith('.d.ts')) out.push(p);
  }
}

function resolve(known: ReadonlySet<string>, from: string, spec: string): string | null {
  if (!spec.startsWith('.')) return null;
  const base = path.posix.normalize(path.posix.join(path.posix.dirname(from), spec));
  for (const c of [`${base}.ts`, `${base}/index.ts`, base]) if (known.has(c)) return c;
  return null;
}

/** Reads every .ts file under ROOTS of the repository at `root`. */
export function readImportGraph(root: string): ImportGraph {
  const files: string[] = [];
  for (const r of ROOTS) walk(root, r, files);
  files.sort();
  const known = new Set(files);
  const edges: ImportEdge[] = [];
  const lines = new Map<string, number>();
  for (const f of files) {
    // Comments go first, so an example import in a comment is not an edge.
    const text = fs.readFileSync(path.join(root, f), 'utf8');
    lines.set(f, text.split('\n').length - (text.endsWith('\n') ? 1 : 0));
    const code = text.replace(/\/\*[\s\S]*?\*\//g, '').replace(/(^|[^:'"`])\/\/.*$/gm, '$1');
    const seen = new Set<string>();
    for (const m of code.matchAll(SPECIFIER)) {
      const to = resolve(known, f, m[1]!);
      if (to && !seen.has(to)) {
        seen.add(to);
        edges.push({ from: f, to });
      }
    }
  }
  return { files, edges, lines };
}

/** Index into FLOORS of a file's floor, or -1. */
export function floorOf(file: string): number {
  let best = -1;
  let bestLen = -1;
  FLOORS.forEach((floor, i) => {
    for (const p of floor) {
      const hit = p.endsWith('/') ? file.startsWith(p) : file === p;
      if (hit && p.length > bestLen) {
        best = i;
        bestLen = p.length;
      }
    }
  });
  return best;
}

/** The room a file stands in: its top-level folder (lib/X), or the file itself at a top level. */
export function roomOf(file: string): string {
  const parts = file.split('/');
  if (parts[0] !== 'lib') return parts[0]!;
  return parts.length > 2 ? `lib/${parts[1]}` : file;
}

/** Tarjan's strongly connected components, iterative (the depth of a recursion would be the graph's). */
export function stronglyConnected(nodes: readonly string[], next: ReadonlyMap<string, readonly string[]>): string[][] {
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const onStack = new Set<string>();
  const stack: string[] = [];
  const out: string[][] = [];
  let counter = 0;
  for (const start of nodes) {
    if (index.has(start)) continue;
    const work: { node: string; i: number }[] = [{ node: start, i: 0 }];
    index.set(start, counter);
    low.set(start, counter);
    counter++;
    stack.push(start);
    onStack.add(start);
    while (work.length > 0) {
      const top = work[work.length - 1]!;
      const succ = next.get(top.node) ?? [];
      if (top.i < succ.length) {
        const w = succ[top.i++]!;
        if (!index.has(w)) {
          index.set(w, counter);
          low.set(w, counter);
          counter++;
          stack.push(w);
          onStack.add(w);
          work.push({ node: w, i: 0 });
        } else if (onStack.has(w)) low.set(top.node, Math.min(low.get(top.node)!, index.get(w)!));
        continue;
      }
      work.pop();
      if (work.length > 0) {
        const parent = work[work.length - 1]!.node;
        low.set(parent, Math.min(low.get(parent)!, low.get(top.node)!));
      }
      if (low.get(top.node) === index.get(top.node)) {
        const comp: string[] = [];
        for (;;) {
          const w = stack.pop()!;
          onStack.delete(w);
          comp.push(w);
          if (w === top.node) break;
        }
        out.push(comp.sort());
      }
    }
  }
  return out;
}

function adjacency(edges: readonly ImportEdge[], key: (f: string) => string): Map<string, string[]> {
  const next = new Map<string, string[]>();
  for (const e of edges) {
    const a = key(e.from);
    const b = key(e.to);
    const list = next.get(a) ?? [];
    if (!list.includes(b)) list.push(b);
    next.set(a, list);
  }
  return next;
}

/** Longest chain of rooms, with rooms that import each other collapsed into one. */
function roomDepth(g: ImportGraph): number {
  const rooms = [...new Set(g.files.map(roomOf))].sort();
  const crossing = g.edges.filter((e) => roomOf(e.from) !== roomOf(e.to));
  const comps = stronglyConnected(rooms, adjacency(crossing, roomOf));
  const compOf = new Map<string, number>();
  comps.forEach((c, i) => {
    for (const r of c) compOf.set(r, i);
  });
  const next = adjacency(crossing, (f) => String(compOf.get(roomOf(f))));
  // Tarjan emits components callees first: each one's depth is known before its callers'.
  const depth: number[] = [];
  comps.forEach((_, i) => {
    let d = 1;
    for (const s of next.get(String(i)) ?? []) if (Number(s) !== i) d = Math.max(d, depth[Number(s)]! + 1);
    depth[i] = d;
  });
  return Math.max(0, ...depth);
}

export function figures(g: ImportGraph): GraphFigures {
  const placed = new Set<number>();
  const unplaced: string[] = [];
  for (const f of g.files) {
    const fl = floorOf(f);
    if (fl < 0) unplaced.push(f);
    else placed.add(fl);
  }
  const arrowsUp = new Map<string, ImportEdge[]>();
  for (const e of g.edges) {
    if (floorOf(e.from) < 0 || floorOf(e.from) >= floorOf(e.to)) continue;
    const key = `${roomOf(e.from)} -> ${roomOf(e.to)}`;
    arrowsUp.set(key, [...(arrowsUp.get(key) ?? []), e]);
  }
  const next = adjacency(g.edges, (f) => f);
  const circles = stronglyConnected(g.files, next)
    .filter((c) => c.length > 1 || (next.get(c[0]!) ?? []).includes(c[0]!))
    .sort((a, b) => a[0]!.localeCompare(b[0]!));
  let largest = { file: '', lines: 0 };
  for (const [file, lines] of g.lines) if (lines > largest.lines) largest = { file, lines };
  return { floors: placed.size, depth: roomDepth(g), arrowsUp, unplaced, circles, largest };
}

/** The figures as text, for the report and docs/architecture.md. */
function describe(f: GraphFigures): string {
  const out = [
    `floors: ${f.floors} (rooms chained ${f.depth} deep)`,
    `arrows back up: ${f.arrowsUp.size}`,
    ...[...f.arrowsUp].map(([rooms, edges]) => `  ${rooms}: ${edges.map((e) => `${e.from} -> ${e.to}`).join(', ')}`),
    `circles: ${f.circles.length}`,
    ...f.circles.map((c) => `  ${c.join(' <-> ')}`),
    `largest file: ${f.largest.file} (${f.largest.lines} lines)`,
  ];
  if (f.unplaced.length > 0) out.push(`on no floor: ${f.unplaced.join(', ')}`);
  return out.join('\n');
}

if (require.main === module) {
  process.stdout.write(
    `${describe(figures(readImportGraph(process.argv[2] ?? path.join(__dirname, '..', '..', '..'))))}\n`,
  );
}
