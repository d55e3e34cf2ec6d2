// The npm package as a user gets it: what `npm pack` ships, what works
// without the native helper (an install without a C compiler), and the
// install step that builds it. Fast and offline: `npm pack --dry-run
// --ignore-scripts` only lists files, and the helper is made unavailable
// through ERNIC_NATIVE_ADDON pointing at a file that does not exist.
import { expect } from 'chai';
import { spawnSync } from 'child_process';
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import { ADDON_ENV, buildAdvice } from '../../lib/native';
import { tempSocketPath } from '../support/fds';

const ROOT = path.join(__dirname, '..', '..', '..');
const DIST = path.join(ROOT, 'dist');
const NO_ADDON = { [ADDON_ENV]: path.join(os.tmpdir(), 'rocm-ernic-no-such-addon', 'ernic_native.node') };

interface Run {
  status: number | null;
  stdout: string;
  stderr: string;
}

function node(args: string[], env: Record<string, string> = {}, cwd = ROOT): Run {
  const r = spawnSync(process.execPath, args, {
    cwd,
    encoding: 'utf8',
    env: { ...process.env, ...env },
    timeout: 30000,
  });
  return { status: r.status, stdout: r.stdout, stderr: r.stderr };
}

describe('package: npm pack', function () {
  this.timeout(60000);
  let files: string[] = [];

  before(() => {
    const r = spawnSync('npm', ['pack', '--dry-run', '--json', '--ignore-scripts'], {
      cwd: ROOT,
      encoding: 'utf8',
      timeout: 60000,
      env: { ...process.env, npm_config_loglevel: 'silent' },
    });
    expect(r.status, r.stderr).to.equal(0);
    const parsed = JSON.parse(r.stdout) as { files: { path: string }[] }[];
    files = parsed[0]!.files.map((f) => f.path);
  });

  it('ships the commands, the library, the codec, the profiles and the native sources', () => {
    for (const f of [
      'package.json',
      'README.md',
      'dist/bin/rocm-ernic.js',
      'dist/bin/ernic-exporter.js',
      'dist/lib/index.js',
      'dist/lib/index.d.ts',
      'dist/protocol/index.js',
      'dist/protocol/index.d.ts',
      'dist/lib/examples/idio16.js',
      'lib/native/ernic_native.c',
      'lib/native/binding.gyp',
      'lib/native/install.js',
      'docs/embedding.md',
    ]) {
      expect(files, f).to.include(f);
    }
    const inis = fs.readdirSync(path.join(ROOT, 'profiles')).filter((f) => f.endsWith('.ini'));
    expect(inis.length).to.be.greaterThan(0);
    for (const f of inis) expect(files, f).to.include(`profiles/${f}`);
  });

  it('leaves out the specs, benches, CI, fixtures, TypeScript sources, source maps and the native build', () => {
    const unwanted = files.filter(
      (f) =>
        /^(dist\/spec|dist\/bench|spec|bench|\.ci|fixtures|lib\/native\/build)\//.test(f) ||
        f.endsWith('.map') ||
        (f.endsWith('.ts') && !f.endsWith('.d.ts')) ||
        f.startsWith('.'),
    );
    expect(unwanted).to.deep.equal([]);
  });

  it('points every bin, main and export at a shipped file', () => {
    const pkg = JSON.parse(fs.readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as {
      main: string;
      types: string;
      bin: Record<string, string>;
      exports: Record<string, string | Record<string, string>>;
      os: string[];
    };
    const targets = [pkg.main, pkg.types, ...Object.values(pkg.bin)];
    for (const e of Object.values(pkg.exports)) targets.push(...(typeof e === 'string' ? [e] : Object.values(e)));
    for (const t of targets) expect(files, t).to.include(path.posix.normalize(t));
    expect(pkg.exports).to.have.property('./examples/idio16');
    expect(pkg.os).to.deep.equal(['linux']);
  });
});

describe('package: without the native helper', function () {
  this.timeout(60000);

  it('rocm-ernic --help prints the usage and exits 0', () => {
    const r = node([path.join(DIST, 'bin', 'rocm-ernic.js'), '--help'], NO_ADDON);
    expect(r.status, r.stderr).to.equal(0);
    expect(r.stdout).to.include('--socket');
    expect(r.stderr).to.equal('');
  });

  for (const bin of ['ernicctl', 'ernic-vfu', 'ernic-exporter', 'vfu-demo']) {
    it(`${bin} --help prints its usage and exits 0`, () => {
      const r = node([path.join(DIST, 'bin', `${bin}.js`), '--help'], NO_ADDON);
      expect(r.status, r.stderr).to.equal(0);
      expect(r.stdout + r.stderr).to.match(new RegExp(`^${bin}\\b`));
      expect(r.stderr).to.not.include('ernic_native');
    });
  }

  it('the protocol codec decodes a message', () => {
    const script = `
      const p = require(${JSON.stringify(path.join(DIST, 'protocol'))});
      const b = Buffer.alloc(16);
      b.writeUInt16LE(7, 0); b.writeUInt16LE(13, 2); b.writeUInt32LE(16, 4);
      const m = p.decodeMessage(b);
      if (!m.ok) throw new Error(m.error.message);
      process.stdout.write(p.commandName(m.value.header.command) + ' ' + m.value.header.id);`;
    const r = node(['-e', script], NO_ADDON);
    expect(r.status, r.stderr).to.equal(0);
    expect(r.stdout).to.equal('DEVICE_RESET 7');
  });

  it('the library entry point loads (the addon is needed only when a server starts)', () => {
    const r = node(
      [
        '-e',
        `const m = require(${JSON.stringify(path.join(DIST, 'lib', 'index.js'))});
      process.stdout.write(typeof m.VfioUserServer + ' ' + typeof m.protocol.decodeMessage);`,
      ],
      NO_ADDON,
    );
    expect(r.status, r.stderr).to.equal(0);
    expect(r.stdout).to.equal('function function');
  });

  it('ernic-exporter --once scrapes an empty run directory', () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ernic-pkg-'));
    try {
      const r = node([path.join(DIST, 'bin', 'ernic-exporter.js'), '--once', '-d', dir], NO_ADDON);
      expect(r.status, r.stderr).to.equal(0);
      expect(r.stdout).to.match(/^ernic_instances 0$/m);
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  it('the server stops with one line that says how to build the helper, status 2', () => {
    const sock = tempSocketPath('pkg');
    const r = node([path.join(DIST, 'bin', 'rocm-ernic.js'), '--socket', sock], NO_ADDON);
    expect(r.status, r.stderr).to.equal(2);
    const lines = r.stderr.trim().split('\n');
    expect(lines, r.stderr).to.have.length(1);
    expect(lines[0]).to.match(/native helper ernic_native\.node is not built/);
    expect(lines[0]).to.match(/`npm ci` or `npm run build`/);
    expect(fs.existsSync(sock)).to.equal(false);
  });

  it('advises `npm rebuild rocm-ernic` where the package is an installed dependency', () => {
    expect(buildAdvice(path.join('/srv', 'app', 'node_modules', 'rocm-ernic'))).to.match(
      /^build it with `npm rebuild rocm-ernic` \(needs g\+\+, make and python3\)$/,
    );
    expect(buildAdvice(path.join('/home', 'me', 'rocm-ernic'))).to.include(
      '`npm ci` or `npm run build` in /home/me/rocm-ernic',
    );
  });
});

describe('package: install step (lib/native/install.js) without build tools', function () {
  this.timeout(30000);
  let tmp = '';
  before(() => {
    tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'ernic-install-'));
  });
  after(() => {
    fs.rmSync(tmp, { recursive: true, force: true });
  });

  /** install.js copied into `<tmp>/<root>/lib/native`, run with a PATH that holds no compiler, make or python. */
  function installIn(root: string): Run {
    const dir = path.join(tmp, root, 'lib', 'native');
    fs.mkdirSync(dir, { recursive: true });
    fs.copyFileSync(path.join(ROOT, 'lib', 'native', 'install.js'), path.join(dir, 'install.js'));
    const empty = path.join(tmp, 'empty-bin');
    fs.mkdirSync(empty, { recursive: true });
    return node([path.join(dir, 'install.js')], { PATH: empty, CC: '', CXX: '' }, path.join(tmp, root));
  }

  it('as a dependency: says what is missing and how to build later, and does not fail the install', () => {
    const r = installIn(path.join('app', 'node_modules', 'rocm-ernic'));
    expect(r.status, r.stderr).to.equal(0);
    expect(r.stderr).to.include('missing a C compiler (gcc), a C++ compiler driver (g++), make, python3');
    expect(r.stderr).to.include('`npm rebuild rocm-ernic`');
  });

  it('in a checkout: fails, so `npm ci` shows a broken build', () => {
    const r = installIn('checkout');
    expect(r.status).to.equal(1);
    expect(r.stderr).to.include('`npm ci` or `npm run build`');
  });
});
