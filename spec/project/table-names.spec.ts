// Each layout table has one name (issue 25): no local shorthand for a table (`const C = ionic_..._comp;`) and no
// import under another name (`import { ionic_admin_create_qp as CQP }`); code says the table's own name, so a
// search for it finds every use.

import { expect } from 'chai';
import * as fs from 'fs';
import * as path from 'path';
import { ROOT, sourceFiles } from './source-files';

/** Layout tables are named in snake_case (ionic_lif_getattr_comp, vfio_user_header, nvme_sqe). */
const TABLE = '[a-z][a-z0-9]*_[a-z0-9_]+';
const LOCAL_ALIAS = new RegExp(`\\bconst ([A-Za-z][A-Za-z0-9]*) = (${TABLE});`);
const IMPORT_ALIAS = new RegExp(`\\b(${TABLE}) as ([A-Za-z][A-Za-z0-9]*)\\b`);

describe('project: one name per table', () => {
  it('no file gives a layout table a second name', () => {
    const isTable = new RegExp(`^${TABLE}$`);
    const found: string[] = [];
    for (const rel of sourceFiles()) {
      const text = fs.readFileSync(path.join(ROOT, rel), 'utf8');
      text.split('\n').forEach((line, i) => {
        const local = LOCAL_ALIAS.exec(line);
        if (local && !/^\s*(\/\/|\*)/.test(line) && !isTable.test(local[1]!))
          found.push(`${rel}:${i + 1} ${local[1]} = ${local[2]}`);
      });
      for (const imp of text.matchAll(/^import(?:\s+type)?\s*\{([^}]*)\}\s*from/gm)) {
        for (const spec of imp[1]!.split(',')) {
          const alias = IMPORT_ALIAS.exec(spec);
          if (alias && !isTable.test(alias[2]!)) found.push(`${rel}: import ${alias[1]} as ${alias[2]}`);
        }
      }
    }
    expect(found, "use the table's own name").to.deep.equal([]);
  });
});
