#!/usr/bin/env node
// The package's install step: builds the native helper (ernic_native.node)
// with node-gyp. Only the server and the vfio-user library need it; the
// protocol codec, the CLIs' --help and ernic-exporter do not. So where the
// package is installed as a dependency, a failed build (no C compiler, make
// or python3) does not fail the install: it prints what is missing and how to
// build it later, and exits 0. In a checkout (`npm ci` for development or CI)
// the build must work, so a failure fails the install.
'use strict';

const { spawnSync } = require('child_process');
const fs = require('fs');
const path = require('path');

const nativeDir = __dirname;
const packageRoot = path.resolve(nativeDir, '..', '..');
const asDependency = path.basename(path.dirname(packageRoot)) === 'node_modules';

/** Is `cmd` an executable file in one of PATH's folders? */
function onPath(cmd) {
  for (const dir of (process.env.PATH || '').split(path.delimiter)) {
    if (dir === '') continue;
    try {
      fs.accessSync(path.join(dir, cmd), fs.constants.X_OK);
      return true;
    } catch {
      // not in this folder
    }
  }
  return false;
}

/** The build tools node-gyp needs on Linux that are not on PATH. */
function missingTools() {
  const missing = [];
  if (!onPath(process.env.CC || 'cc') && !onPath('gcc') && !onPath('clang')) missing.push('a C compiler (gcc)');
  if (!onPath(process.env.CXX || 'g++') && !onPath('clang++')) missing.push('a C++ compiler driver (g++)');
  if (!onPath('make')) missing.push('make');
  if (!onPath('python3') && !onPath('python')) missing.push('python3');
  return missing;
}

/** node-gyp as npm hands it to install scripts (npm_config_node_gyp), else from PATH. */
function nodeGyp(args) {
  const bundled = process.env.npm_config_node_gyp;
  if (bundled && fs.existsSync(bundled)) {
    return spawnSync(process.execPath, [bundled, ...args], { stdio: 'inherit' });
  }
  return spawnSync('node-gyp', args, { stdio: 'inherit' });
}

function main() {
  const missing = missingTools();
  let problem;
  if (missing.length > 0) {
    problem = `missing ${missing.join(', ')}`;
  } else {
    const r = nodeGyp(['rebuild', '--directory', nativeDir]);
    if (r.error) problem = `node-gyp could not run (${r.error.code || r.error.message})`;
    else if (r.status !== 0) problem = `node-gyp failed (exit ${r.status === null ? r.signal : r.status}; its output is above)`;
  }
  if (problem === undefined) return 0;

  const how = asDependency
    ? 'install g++, make and python3 (Debian: apt-get install g++ make python3), then run `npm rebuild rocm-ernic`'
    : 'install g++, make and python3 (Debian: apt-get install g++ make python3), then run `npm ci` or `npm run build`';
  process.stderr.write(
    `rocm-ernic: the native helper (lib/native/build/Release/ernic_native.node) was not built: ${problem}.\n` +
      'rocm-ernic/protocol, the --help of the commands and ernic-exporter work without it; ' +
      'the server (rocm-ernic), ernic-vfu and the vfio-user library need it.\n' +
      `To build it: ${how}.\n`,
  );
  return asDependency ? 0 : 1;
}

process.exitCode = main();
