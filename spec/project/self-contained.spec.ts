// The repository stands alone: a clone with nothing beside it has every input
// its tests, docs and scripts use. Nothing may reach outside it (a sibling
// ../shared design folder existed while the project was built; users never
// have it), and every relative link in the docs opens.
import { expect } from 'chai';
import { execFileSync } from 'child_process';
import * as fs from 'fs';
import * as path from 'path';

const ROOT = path.join(__dirname, '..', '..', '..');

/** The files of the repository: git's list when this is a checkout, else a walk that skips build output. */
function repoFiles(): string[] {
  try {
    return execFileSync('git', ['ls-files', '-z'], { cwd: ROOT, encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] })
      .split('\0')
      .filter(Boolean);
  } catch {
    const out: string[] = [];
    const walk = (rel: string): void => {
      for (const e of fs.readdirSync(path.join(ROOT, rel), { withFileTypes: true })) {
        const p = rel ? `${rel}/${e.name}` : e.name;
        if (e.isDirectory()) {
          if (!['node_modules', 'dist', '.git', 'build'].includes(e.name)) walk(p);
        } else out.push(p);
      }
    };
    walk('');
    return out;
  }
}

const TEXT = /\.(ts|js|sh|md|json|ini|txt|service|target|example|lua|py|gyp|c|yml|yaml)$|^\.ci\/run$/;

describe('project: a clone stands alone', () => {
  const files = repoFiles().filter((f) => TEXT.test(f) && fs.existsSync(path.join(ROOT, f)));

  it('finds the repository files', () => {
    expect(files).to.include('package.json');
    expect(files.length).to.be.greaterThan(100);
  });

  it('no file refers to a sibling ../shared folder or to the machine it was built on', () => {
    const self = path.relative(
      ROOT,
      path.join(__dirname, '..', '..', '..', 'spec', 'project', 'self-contained.spec.ts'),
    );
    const offenders: string[] = [];
    for (const f of files) {
      if (f === self) continue;
      const text = fs.readFileSync(path.join(ROOT, f), 'utf8');
      text.split('\n').forEach((line, i) => {
        if (/\.\.\/shared\b|'\.\.', 'shared'|\/work\/shared\b|\/work\/main\b/.test(line))
          offenders.push(`${f}:${i + 1}: ${line.trim().slice(0, 120)}`);
      });
    }
    expect(offenders, offenders.join('\n')).to.deep.equal([]);
  });

  it('every relative link in the Markdown docs opens a file of the repository', () => {
    const broken: string[] = [];
    // fixtures/ holds upstream documents unchanged, with links into their own trees.
    for (const f of files.filter((x) => x.endsWith('.md') && !x.startsWith('fixtures/'))) {
      // Code spans are code, not links (`nodes[n](st)`).
      const text = fs.readFileSync(path.join(ROOT, f), 'utf8').replace(/`[^`\n]*`/g, '');
      for (const m of text.matchAll(/\]\(([^)\s]+)\)/g)) {
        const target = m[1]!.split('#')[0]!;
        if (!target || /^[a-z][a-z0-9+.-]*:/i.test(target)) continue; // http:, mailto:, ...
        if (!fs.existsSync(path.join(ROOT, path.dirname(f), target))) broken.push(`${f}: ${m[1]}`);
      }
    }
    expect(broken, broken.join('\n')).to.deep.equal([]);
  });

  it('comments and docs cite only what a clone can open (docs pages, not design notes left outside the repository)', () => {
    // Each citation names a docs page of this repository: docs/driver-contract.md as "ionic Ethernet E2.3" or
    // "ionic RDMA R4.8", docs/vfio-user-protocol.md by section, docs/mesh.md and the others by heading. The C
    // implementation is "the C rocm-ernic" (README). A "// Fix:" note is history: git log has it; a comment says why.
    const cites: ReadonlyArray<readonly [RegExp, string]> = [
      [/\breference\/[\w-]+\.md|\breference [0-9]/, 'a reference/*.md note (not in the repository)'],
      [/architecture\.rst/, 'architecture.rst (not in the repository)'],
      [/\b(STYLE|DESIGN)\.md\b|anchor-rocm-ernic|\banchor [0-9]/, 'a design note (not in the repository)'],
      [/\bcontract [0-9]/, 'a bare "contract N.N" (say ionic Ethernet E2.3 or ionic RDMA R4.8)'],
      [/\bthe C design\b/i, '"the C design" (say the C rocm-ernic)'],
      [/\/\/ Fix:/i, 'a "// Fix:" changelog comment'],
    ];
    const self = 'spec/project/self-contained.spec.ts';
    const offenders: string[] = [];
    for (const f of files) {
      if (f === self || f.startsWith('fixtures/')) continue;
      fs.readFileSync(path.join(ROOT, f), 'utf8')
        .split('\n')
        .forEach((line, i) => {
          for (const [re, what] of cites)
            if (re.test(line)) offenders.push(`${f}:${i + 1}: ${what}: ${line.trim().slice(0, 100)}`);
        });
    }
    expect(offenders, offenders.join('\n')).to.deep.equal([]);
  });

  it('every "ionic Ethernet EN.N" or "ionic RDMA RN.N" names a section of docs/driver-contract.md', () => {
    const contract = fs.readFileSync(path.join(ROOT, 'docs', 'driver-contract.md'), 'utf8');
    const sections = new Set([...contract.matchAll(/^## ([ER][0-9]+(?:\.[0-9]+)?) /gm)].map((m) => m[1]!));
    expect(sections.size).to.be.greaterThan(20);
    const unknown: string[] = [];
    for (const f of files.filter((x) => !x.startsWith('fixtures/'))) {
      fs.readFileSync(path.join(ROOT, f), 'utf8')
        .split('\n')
        .forEach((line, i) => {
          for (const m of line.matchAll(/\bionic (?:RDMA|Ethernet) ([ER][0-9]+(?:\.[0-9]+)?)\b/g)) {
            if (!sections.has(m[1]!)) unknown.push(`${f}:${i + 1}: ${m[0]}`);
          }
        });
    }
    expect(unknown, unknown.join('\n')).to.deep.equal([]);
  });

  it('every skip in the specs says why (skipBecause, never a bare mocha skip)', () => {
    const bare: string[] = [];
    for (const f of files.filter((x) => x.startsWith('spec/') && x.endsWith('.ts') && x !== 'spec/support/skip.ts')) {
      fs.readFileSync(path.join(ROOT, f), 'utf8')
        .split('\n')
        .forEach((line, i) => {
          if (/\b(this|ctx)\.skip\(\)|\b(it|describe)\.skip\(/.test(line)) bare.push(`${f}:${i + 1}: ${line.trim()}`);
        });
    }
    expect(bare, bare.join('\n')).to.deep.equal([]);
  });

  it('the README links every page of docs/', () => {
    const readme = fs.readFileSync(path.join(ROOT, 'README.md'), 'utf8');
    const pages = files.filter((f) => /^docs\/[^/]+\.md$/.test(f) || f === 'docs/wireshark/README.md');
    expect(pages.length).to.be.greaterThan(10);
    const missing = pages.filter((p) => !readme.includes(`](${p})`));
    expect(missing, `not linked from README.md: ${missing.join(', ')}`).to.deep.equal([]);
  });

  it('the P4 fixtures the specs read are in fixtures/p4, with their upstream license', () => {
    for (const f of [
      'simple_router.json',
      'commands.txt',
      'l2_switch.json',
      'exact_match_1.json',
      'LPM_match_1.json',
      'ternary_match_1.json',
      'parser_deparser_1.json',
      'LICENSE',
      'README.md',
    ]) {
      expect(fs.existsSync(path.join(ROOT, 'fixtures', 'p4', f)), f).to.equal(true);
    }
    expect(fs.readFileSync(path.join(ROOT, 'fixtures', 'p4', 'LICENSE'), 'utf8')).to.include('Apache License');
  });
});
