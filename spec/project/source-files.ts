// The source tree the project specs look at: every .ts file under lib, bin, protocol, spec and bench (build output
// and node_modules left out), relative to the repository root.

import * as fs from 'fs';
import * as path from 'path';

export const ROOT = path.join(__dirname, '..', '..', '..');
const SOURCE_TOPS = ['lib', 'bin', 'protocol', 'spec', 'bench'];

/** Every .ts file under the source folders, relative to the root, sorted. */
export function sourceFiles(): string[] {
  const out: string[] = [];
  const walk = (rel: string): void => {
    for (const e of fs.readdirSync(path.join(ROOT, rel), { withFileTypes: true })) {
      const child = path.join(rel, e.name);
      if (e.isDirectory()) {
        if (e.name !== 'node_modules' && e.name !== 'build') walk(child);
      } else if (e.name.endsWith('.ts')) out.push(child);
    }
  };
  for (const t of SOURCE_TOPS) walk(t);
  return out.sort();
}
