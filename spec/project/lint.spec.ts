// The tree passes ESLint (typescript-eslint's recommended rules, the config
// in spec/lint/eslint.config.mjs): run here so the README's test command and
// CI hold it, and by hand with `npm run lint`.

import { expect } from 'chai';
import { ESLint } from 'eslint';
import * as path from 'path';

const ROOT = path.join(__dirname, '..', '..', '..');
const PATTERNS = ['lib/**/*.ts', 'bin/**/*.ts', 'protocol/**/*.ts', 'spec/**/*.ts', 'bench/**/*.ts'];

describe('project: lint', function () {
  this.timeout(300_000);

  it('ESLint finds no problem in lib, bin, protocol, spec or bench', async () => {
    const eslint = new ESLint({ cwd: ROOT, overrideConfigFile: path.join(ROOT, 'spec', 'lint', 'eslint.config.mjs') });
    const results = await eslint.lintFiles(PATTERNS);
    expect(results.length, 'files linted').to.be.above(400);
    const problems = results.flatMap((r) => r.messages.map((m) => `${path.relative(ROOT, r.filePath)}:${m.line}:${m.column} ${m.ruleId ?? ''} ${m.message}`));
    expect(problems).to.deep.equal([]);
  });
});
