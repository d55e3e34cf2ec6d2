// No source file over 600 lines, product, spec or bench (issue 25): a file that grows past it is split by what it
// holds, into files named by their content.

import { expect } from 'chai';
import * as fs from 'fs';
import * as path from 'path';
import { ROOT, sourceFiles } from './source-files';

const MAX_LINES = 600;

/** Lines as `wc -l` counts them: a last line without a newline counts too. */
function lineCount(text: string): number {
  if (text === '') return 0;
  const n = text.split('\n').length;
  return text.endsWith('\n') ? n - 1 : n;
}

describe('project: file size', () => {
  it(`no .ts file under lib, bin, protocol, spec or bench is over ${MAX_LINES} lines`, () => {
    const files = sourceFiles();
    expect(files.length, 'files checked').to.be.above(400);
    const over = files
      .map((rel) => ({ rel, lines: lineCount(fs.readFileSync(path.join(ROOT, rel), 'utf8')) }))
      .filter((f) => f.lines > MAX_LINES)
      .map((f) => `${f.rel}: ${f.lines} lines`);
    expect(over, `split these by what they hold (at most ${MAX_LINES} lines each)`).to.deep.equal([]);
  });

  it('counts lines as wc -l does', () => {
    expect([lineCount(''), lineCount('a\n'), lineCount('a\nb'), lineCount('a\nb\n')]).to.deep.equal([0, 1, 2, 2]);
  });
});
