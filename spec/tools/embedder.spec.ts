// An embedder's view of the package: a fresh project in a temp dir installs
// this repository by path ("rocm-ernic": "file:<root>", which npm links) and
// uses it only through the public entry points of package.json `exports`:
// 'rocm-ernic', 'rocm-ernic/vfio-user' and 'rocm-ernic/protocol'. Its example
// (a tiny device with one BAR handler, as in docs/embedding.md) must
// type-check with --strict and node16 resolution (which honours `exports`),
// then run: listen on a temp socket, answer one region read, close. A deep
// import past `exports` must be refused by tsc and by node. Needs the
// compiled dist/ and the native helper, which `npm ci` builds.
import { expect } from 'chai';
import { execFile } from 'child_process';
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';

const ROOT = process.env.VFU_REPO_ROOT ?? path.join(__dirname, '..', '..', '..');
const TSC = path.join(ROOT, 'node_modules', 'typescript', 'bin', 'tsc');
const TYPE_ROOTS = path.join(ROOT, 'node_modules', '@types');

/** BAR0 offset 0 of the example device reads as this (ASCII "ERNC"). */
const MAGIC = 0x45524e43;

const EXAMPLE = `
import { existsSync } from 'fs';
import { nullLogger, PciFunction, protocol, VfioUserServer } from 'rocm-ernic';
import type { BarHandler, GuestMemory } from 'rocm-ernic';
import { MemStatus, PciRegionIndex, VfioUserClient } from 'rocm-ernic/vfio-user';
import { Command, commandName } from 'rocm-ernic/protocol';

const ID = Buffer.alloc(4);
ID.writeUInt32LE(${MAGIC});

/** BAR0: a read-only ID register at 0, zeros elsewhere; writes are dropped. */
const bar0: BarHandler = {
  read(offset: number, dst: Buffer): number {
    for (let i = 0; i < dst.length; i++) dst[i] = offset + i < 4 ? ID[offset + i]! : 0;
    return 0;
  },
  write(): number { return 0; },
};

function firstByte(memory: GuestMemory | undefined): number {
  const b = Buffer.alloc(1);
  return memory?.read(0, b) === MemStatus.OK ? b[0]! : -1;
}

async function main(socketPath: string): Promise<void> {
  const device = new PciFunction({
    vendorId: 0x1dd8, deviceId: 0xee02, subsystemVendorId: 0x1dd8, subsystemId: 1, classCode: 0xff0000,
    bars: [{ index: 0, size: 0x1000, kind: 'mem32', handler: bar0 }],
  });
  const server = new VfioUserServer({ socketPath, device, log: nullLogger });
  await server.listen();
  const listening = existsSync(socketPath);
  const client = await VfioUserClient.connect(socketPath);
  const id = await client.regionRead(PciRegionIndex.BAR0, 0, 4);
  const unmapped = firstByte(device.context?.memory);
  client.close();
  server.close();
  console.log(JSON.stringify({
    listening, id: id.readUInt32LE(0), unmapped,
    command: commandName(Command.REGION_READ), sameCodec: protocol.commandName === commandName,
  }));
}

main(process.argv[2]!).catch((e: unknown) => { console.error(e); process.exit(1); });
`;

/** What tsc refuses: a module inside the package that `exports` does not list. */
const DEEP_IMPORT = `
import { PciFunction } from 'rocm-ernic/dist/lib/pci/function';
export const fn: typeof PciFunction = PciFunction;
`;

interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
}

function run(cmd: string, args: string[], cwd: string, timeoutMs: number): Promise<Run> {
  return new Promise((resolve) => {
    execFile(cmd, args, { cwd, timeout: timeoutMs, encoding: 'utf8', maxBuffer: 16 << 20 }, (err, stdout, stderr) => {
      const code = err ? (typeof err.code === 'number' ? err.code : null) : 0;
      resolve({ code, stdout, stderr });
    });
  });
}

function tscArgs(file: string, emit: boolean): string[] {
  return [
    TSC,
    '--pretty',
    'false',
    '--strict',
    '--target',
    'es2022',
    '--module',
    'node16',
    '--moduleResolution',
    'node16',
    '--types',
    'node',
    '--typeRoots',
    TYPE_ROOTS,
    ...(emit ? ['--outDir', 'out'] : ['--noEmit']),
    file,
  ];
}

describe('embedder: a project that installs rocm-ernic by path', function () {
  this.timeout(120000);
  let dir = '';
  let tscExample: Run;
  let tscDeep: Run;

  before(async function () {
    for (const built of ['dist/lib/index.d.ts', 'dist/lib/vfio-user/index.d.ts', 'dist/protocol/index.d.ts']) {
      expect(fs.existsSync(path.join(ROOT, built)), `${built} (npm ci builds it)`).to.equal(true);
    }
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ernic-embedder-'));
    fs.writeFileSync(
      path.join(dir, 'package.json'),
      JSON.stringify(
        {
          name: 'embedder-example',
          version: '1.0.0',
          private: true,
          dependencies: { 'rocm-ernic': `file:${ROOT}` },
        },
        null,
        2,
      ),
    );
    const npmArgs = ['install', '--no-audit', '--no-fund', '--ignore-scripts', '--no-package-lock'];
    // A file: dependency is a link, so nothing needs the registry; ask it only if offline mode refuses.
    let npm = await run('npm', [...npmArgs, '--offline'], dir, 60000);
    if (npm.code !== 0) npm = await run('npm', npmArgs, dir, 60000);
    expect(npm.code, `npm install: ${npm.stderr}`).to.equal(0);
    expect(fs.realpathSync(path.join(dir, 'node_modules', 'rocm-ernic'))).to.equal(fs.realpathSync(ROOT));
    fs.writeFileSync(path.join(dir, 'example.ts'), EXAMPLE);
    fs.writeFileSync(path.join(dir, 'deep.ts'), DEEP_IMPORT);
    // The two compilations are independent: run them side by side.
    [tscExample, tscDeep] = await Promise.all([
      run(process.execPath, tscArgs('example.ts', true), dir, 90000),
      run(process.execPath, tscArgs('deep.ts', false), dir, 90000),
    ]);
  });

  after(function () {
    if (dir) fs.rmSync(dir, { recursive: true, force: true });
  });

  it('type-checks the example with --strict and node16 resolution, silently', function () {
    expect(tscExample.stdout + tscExample.stderr).to.equal('');
    expect(tscExample.code).to.equal(0);
  });

  it('runs the example: it listens on a temp socket, answers a BAR0 read, and closes', async function () {
    const socket = path.join(dir, 'example.sock');
    const r = await run(process.execPath, [path.join('out', 'example.js'), socket], dir, 10000);
    expect(r.stderr).to.equal('');
    expect(r.code).to.equal(0);
    const out = JSON.parse(r.stdout.trim()) as Record<string, unknown>;
    expect(out).to.deep.equal({ listening: true, id: MAGIC, unmapped: -1, command: 'REGION_READ', sameCodec: true });
    expect(fs.existsSync(socket), 'socket removed on close').to.equal(false);
  });

  it('tsc refuses a deep import that package.json exports does not list', function () {
    expect(tscDeep.code).to.not.equal(0);
    expect(tscDeep.stdout).to.match(
      /deep\.ts\(2,\d+\): error TS2307: Cannot find module 'rocm-ernic\/dist\/lib\/pci\/function'/,
    );
  });

  it('node refuses the same deep import at run time', async function () {
    const r = await run(process.execPath, ['-e', "require('rocm-ernic/dist/lib/pci/function')"], dir, 10000);
    expect(r.code).to.not.equal(0);
    expect(r.stderr).to.contain('ERR_PACKAGE_PATH_NOT_EXPORTED');
  });

  it('node resolves the three entry points to dist/', async function () {
    const script =
      "console.log(JSON.stringify(['rocm-ernic', 'rocm-ernic/vfio-user', 'rocm-ernic/protocol', 'rocm-ernic/package.json'].map((m) => require.resolve(m))))";
    const r = await run(process.execPath, ['-e', script], dir, 10000);
    expect(r.code, r.stderr).to.equal(0);
    const resolved = (JSON.parse(r.stdout) as string[]).map((p) =>
      path.relative(fs.realpathSync(ROOT), fs.realpathSync(p)),
    );
    expect(resolved).to.deep.equal([
      'dist/lib/index.js',
      'dist/lib/vfio-user/index.js',
      'dist/protocol/index.js',
      'package.json',
    ]);
  });
});

describe('embedder: the examples in lib/examples', function () {
  it('import only from the public entry points', function () {
    const public_ = new Set(['../index', '../vfio-user', '../../protocol']);
    const dirPath = path.join(ROOT, 'lib', 'examples');
    const files = fs.readdirSync(dirPath).filter((f) => f.endsWith('.ts'));
    expect(files).to.include.members(['idio16.ts', 'demo-device.ts']);
    for (const f of files) {
      const text = fs.readFileSync(path.join(dirPath, f), 'utf8');
      const relative = [...text.matchAll(/from '(\.[^']*)'/g)].map((m) => m[1]!);
      expect(relative.length, f).to.be.above(0);
      for (const spec of relative) expect(public_.has(spec), `${f} imports '${spec}'`).to.equal(true);
    }
  });
});
