// Tests are findable by module (issue 25): spec/ mirrors lib/. The test of lib/x/y.ts is under spec/x/
// (spec/x/y.spec.ts, or spec/x/y/*.spec.ts when it has several); bin/ and protocol/ are mirrored by spec/bin/ and
// spec/protocol/. Device tests, which drive the whole server through a socket, sit in the folder of the layer they
// exercise. Folders that hold no module's tests are named here: the shared guest models and rigs (support), the
// project's own checks (project), lint's config (lint), VM, fuzz, bench, tools and package tests.

import { expect } from 'chai';
import * as fs from 'fs';
import * as path from 'path';
import { ROOT, sourceFiles } from './source-files';

/** spec/ folders that mirror nothing, each with what it holds. */
const OWN_FOLDERS: Record<string, string> = {
  support: 'the guest models and rigs that spec and bench share',
  project: 'checks on the repository itself',
  lint: "ESLint's config",
  vm: 'tests in real guests under QEMU',
  fuzz: 'the fuzz runner and its targets',
  bench: "the benchmarks' own helpers",
  tools: 'the command-line tools and the Wireshark dissector',
  package: 'the npm package as published',
};

/** The folder a spec folder mirrors: spec/bin -> bin, spec/protocol -> protocol, spec/x -> lib/x. */
function mirrorOf(specDir: string): string {
  const rel = path.relative('spec', specDir);
  const top = rel.split(path.sep)[0]!;
  return top === 'bin' || top === 'protocol' ? rel : path.join('lib', rel);
}

/** How many modules of lib, bin and protocol have a spec at their mirrored path (an index.ts: its folder's specs). */
function mirroredModules(files: readonly string[]): { have: number; of: number } {
  const specs = new Set(files.filter((f) => f.endsWith('.spec.ts')));
  const specDirs = new Set([...specs].map((f) => path.dirname(f)));
  const modules = files.filter((f) => /^(lib|bin|protocol)\//.test(f) && !f.endsWith('.d.ts'));
  let have = 0;
  for (const m of modules) {
    const parts = m.slice(0, -3).split('/');
    const base = path.join('spec', ...(parts[0] === 'lib' ? parts.slice(1) : parts));
    const found =
      path.basename(m) === 'index.ts'
        ? specDirs.has(path.dirname(base))
        : specs.has(`${base}.spec.ts`) || specDirs.has(base);
    if (found) have++;
  }
  return { have, of: modules.length };
}

describe('project: spec mirrors lib', () => {
  const files = sourceFiles();

  it('every spec/ folder with tests mirrors a folder or module of lib, bin or protocol, or is one of the named own folders', () => {
    const dirs = new Set(files.filter((f) => f.endsWith('.spec.ts')).map((f) => path.dirname(f)));
    const stray = [...dirs]
      .filter((d) => d !== 'spec' && !(path.relative('spec', d).split(path.sep)[0]! in OWN_FOLDERS))
      // spec/x/y/ mirrors the folder lib/x/y/, or the module lib/x/y.ts when it has several specs
      .filter(
        (d) => !fs.existsSync(path.join(ROOT, mirrorOf(d))) && !fs.existsSync(path.join(ROOT, `${mirrorOf(d)}.ts`)),
      )
      .map((d) => `${d} (no ${mirrorOf(d)})`)
      .sort();
    expect(stray, 'move these specs under the folder mirroring the module they test').to.deep.equal([]);
  });

  it('every spec directly in spec/ tests a module directly in lib/', () => {
    const top = files.filter((f) => path.dirname(f) === 'spec' && f.endsWith('.spec.ts'));
    const stray = top.filter(
      (f) => !fs.existsSync(path.join(ROOT, 'lib', path.basename(f).replace(/\.spec\.ts$/, '.ts'))),
    );
    expect(stray).to.deep.equal([]);
  });

  it('bench imports from spec/ only the shared support place, spec/support/', () => {
    const stray = files
      .filter((f) => f.startsWith(`bench${path.sep}`))
      .flatMap((f) =>
        [...fs.readFileSync(path.join(ROOT, f), 'utf8').matchAll(/from '([^']+)'/g)]
          .map((m) => path.join(path.dirname(f), m[1]!))
          .filter(
            (target) => target.startsWith(`spec${path.sep}`) && !target.startsWith(`spec${path.sep}support${path.sep}`),
          )
          .map((target) => `${f} imports ${target}`),
      );
    expect(stray).to.deep.equal([]);
  });

  it('the modules with a spec at their mirrored path do not fall below 87', () => {
    const { have, of } = mirroredModules(files);
    expect(have, `${have} of ${of} modules`).to.be.at.least(87);
  });
});
