// Unused exports gone (issue 25): every name a module exports is imported by another file, unless the package
// publishes it (package.json "exports": lib/index.ts, protocol/index.ts, lib/vfio-user/index.ts,
// lib/examples/idio16.ts, and what they re-export). A name only its own file uses is not exported; a name nothing
// uses is not there. Read from the sources with the TypeScript compiler's parser and module resolution.

import { expect } from 'chai';
import * as fs from 'fs';
import * as path from 'path';
import * as ts from 'typescript';
import { ROOT, sourceFiles } from './source-files';

const PUBLISHED = ['lib/index.ts', 'protocol/index.ts', 'lib/vfio-user/index.ts', 'lib/examples/idio16.ts'];
const ALL = '*';

interface Reexport {
  readonly from: string;
  readonly name: string;
  readonly target: string;
  readonly orig: string;
}

/** Every exported name of the source tree that no other file imports (nor a published entry re-exports), as file:line name. */
function unusedExports(): string[] {
  const options: ts.CompilerOptions = {
    module: ts.ModuleKind.CommonJS,
    moduleResolution: ts.ModuleResolutionKind.Node10,
  };
  const files = sourceFiles().map((f) => path.join(ROOT, f));
  const exported = new Map<string, Map<string, number>>();
  const used = new Map<string, Set<string>>();
  const stars = new Map<string, string[]>();
  const reexports: Reexport[] = [];
  const use = (file: string, name: string): void => {
    if (!used.has(file)) used.set(file, new Set());
    used.get(file)!.add(name);
  };
  const isUsed = (file: string, name: string): boolean => {
    const u = used.get(file);
    return !!u && (u.has(name) || u.has(ALL));
  };
  const resolve = (from: string, spec: string): string | null => {
    if (!spec.startsWith('.')) return null;
    const r = ts.resolveModuleName(spec, from, options, ts.sys).resolvedModule;
    return r && !r.isExternalLibraryImport ? path.resolve(r.resolvedFileName) : null;
  };
  for (const f of files) {
    const sf = ts.createSourceFile(f, fs.readFileSync(f, 'utf8'), ts.ScriptTarget.ES2022, true);
    const ex = new Map<string, number>();
    exported.set(f, ex);
    const line = (n: ts.Node): number => sf.getLineAndCharacterOfPosition(n.getStart()).line + 1;
    for (const st of sf.statements) {
      if (ts.isImportDeclaration(st)) {
        const t = resolve(f, (st.moduleSpecifier as ts.StringLiteral).text);
        const c = st.importClause;
        if (!t || !c) continue;
        if (c.name) use(t, 'default');
        if (c.namedBindings && ts.isNamespaceImport(c.namedBindings)) use(t, ALL);
        else if (c.namedBindings) for (const e of c.namedBindings.elements) use(t, (e.propertyName ?? e.name).text);
      } else if (ts.isExportDeclaration(st)) {
        const t = st.moduleSpecifier ? resolve(f, (st.moduleSpecifier as ts.StringLiteral).text) : null;
        if (!st.exportClause) {
          if (t) stars.set(f, [...(stars.get(f) ?? []), t]);
        } else if (ts.isNamespaceExport(st.exportClause)) {
          if (t) use(t, ALL);
          ex.set(st.exportClause.name.text, line(st));
        } else {
          for (const e of st.exportClause.elements) {
            ex.set(e.name.text, line(st));
            if (t) reexports.push({ from: f, name: e.name.text, target: t, orig: (e.propertyName ?? e.name).text });
          }
        }
      } else if (ts.isExportAssignment(st)) {
        ex.set('default', line(st));
      } else if (ts.canHaveModifiers(st) && ts.getModifiers(st)?.some((m) => m.kind === ts.SyntaxKind.ExportKeyword)) {
        const isDefault = ts.getModifiers(st)!.some((m) => m.kind === ts.SyntaxKind.DefaultKeyword);
        if (ts.isVariableStatement(st)) {
          for (const d of st.declarationList.declarations) if (ts.isIdentifier(d.name)) ex.set(d.name.text, line(st));
        } else {
          const name = (st as ts.DeclarationStatement).name;
          if (name && ts.isIdentifier(name)) ex.set(isDefault ? 'default' : name.text, line(st));
        }
      }
    }
    // import('x') and require('x'), and import('x').T in types
    const walk = (n: ts.Node): void => {
      if (
        ts.isCallExpression(n) &&
        n.arguments.length === 1 &&
        ts.isStringLiteral(n.arguments[0]!) &&
        (n.expression.kind === ts.SyntaxKind.ImportKeyword ||
          (ts.isIdentifier(n.expression) && n.expression.text === 'require'))
      ) {
        const t = resolve(f, (n.arguments[0] as ts.StringLiteral).text);
        if (t) use(t, ALL);
      }
      if (ts.isImportTypeNode(n) && ts.isLiteralTypeNode(n.argument) && ts.isStringLiteral(n.argument.literal)) {
        const t = resolve(f, n.argument.literal.text);
        if (t) use(t, n.qualifier && ts.isIdentifier(n.qualifier) ? n.qualifier.text : ALL);
      }
      ts.forEachChild(n, walk);
    };
    walk(sf);
  }
  for (const p of PUBLISHED) use(path.join(ROOT, p), ALL);
  // A used re-export uses what it names; a used name of a file with `export *` is looked for in its sources.
  for (let changed = true; changed;) {
    changed = false;
    for (const r of reexports) {
      if (isUsed(r.from, r.name) && !isUsed(r.target, r.orig)) {
        use(r.target, r.orig);
        changed = true;
      }
    }
    for (const [f, targets] of stars) {
      for (const name of used.get(f) ?? []) {
        for (const t of targets) {
          if (name === ALL ? !isUsed(t, ALL) : !exported.get(f)!.has(name) && !isUsed(t, name)) {
            use(t, name);
            changed = true;
          }
        }
      }
    }
  }
  const out: string[] = [];
  for (const [f, ex] of exported)
    for (const [name, at] of ex) if (!isUsed(f, name)) out.push(`${path.relative(ROOT, f)}:${at} ${name}`);
  return out.sort();
}

describe('project: unused exports', () => {
  it('every exported name is imported somewhere, or published by package.json "exports"', () => {
    expect(unusedExports(), 'drop the export (or the name, when nothing uses it)').to.deep.equal([]);
  });
});
