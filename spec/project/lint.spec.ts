// The tree passes ESLint (typescript-eslint's recommended rules, the config
// in spec/lint/eslint.config.mjs) and is formatted as prettier would
// (.prettierrc.json): run here so the README's test command and CI hold it,
// and by hand with `npm run lint` (`npm run format` rewrites).

import { expect } from 'chai';
import { ESLint } from 'eslint';
import * as fs from 'fs';
import * as path from 'path';
import * as prettier from 'prettier';
import { ROOT, sourceFiles } from './source-files';

const PATTERNS = ['lib/**/*.ts', 'bin/**/*.ts', 'protocol/**/*.ts', 'spec/**/*.ts', 'bench/**/*.ts'];

describe('project: lint', function () {
  this.timeout(300_000);

  it('ESLint finds no problem in lib, bin, protocol, spec or bench', async () => {
    const eslint = new ESLint({ cwd: ROOT, overrideConfigFile: path.join(ROOT, 'spec', 'lint', 'eslint.config.mjs') });
    const results = await eslint.lintFiles(PATTERNS);
    expect(results.length, 'files linted').to.be.above(400);
    const problems = results.flatMap((r) =>
      r.messages.map((m) => `${path.relative(ROOT, r.filePath)}:${m.line}:${m.column} ${m.ruleId ?? ''} ${m.message}`),
    );
    expect(problems).to.deep.equal([]);
  });

  it('every source file is formatted as prettier formats it', async () => {
    const files = sourceFiles();
    expect(files.length, 'files checked').to.be.above(400);
    const unformatted: string[] = [];
    for (const rel of files) {
      const file = path.join(ROOT, rel);
      const options = await prettier.resolveConfig(file);
      expect(options, `.prettierrc.json applies to ${rel}`).to.not.equal(null);
      const source = fs.readFileSync(file, 'utf8');
      if (!(await prettier.check(source, { ...options, filepath: file }))) unformatted.push(rel);
    }
    expect(unformatted, 'run `npm run format`').to.deep.equal([]);
  });
});
