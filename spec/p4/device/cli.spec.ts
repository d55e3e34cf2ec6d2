// The server's --p4 options through the built bin: a bad program names the
// file and the JSON path, a bad commands line its line number, an unknown
// guest scope what exists; each one line and exit 2, before anything starts.
// A good program with its commands starts and serves.

import { expect } from 'chai';
import { spawn, spawnSync } from 'child_process';
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import { tempSocketPath } from '../../support/fds';
import { FIXTURES, fixtureJson } from '../../support/p4';

const BIN = path.join(__dirname, '..', '..', '..', 'bin', 'rocm-ernic.js');

function run(args: string[]): { status: number | null; stderr: string } {
  const r = spawnSync(process.execPath, [BIN, '--socket', tempSocketPath('p4cli'), ...args], {
    encoding: 'utf8',
    timeout: 20000,
  });
  return { status: r.status, stderr: r.stderr };
}

function refused(args: string[], msg: RegExp): void {
  const r = run(args);
  expect(r.status, r.stderr).to.equal(2);
  expect(r.stderr.trim().split('\n'), r.stderr).to.have.length(1);
  expect(r.stderr).to.match(msg);
}

describe('p4: rocm-ernic --p4 options', () => {
  let dir: string;
  before(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ernic-p4-cli-'));
  });
  after(() => fs.rmSync(dir, { recursive: true, force: true }));

  it('refuses a program path that does not exist', () => {
    refused(['--p4-program', path.join(dir, 'nope.json')], /--p4-program .*nope\.json: cannot read/);
  });

  it('refuses a program that is not JSON', () => {
    const f = path.join(dir, 'garbage.json');
    fs.writeFileSync(f, '{ not json');
    refused(['--p4-program', f], /--p4-program .*garbage\.json: \(root\): not JSON/);
  });

  it('refuses an unknown guest scope, listing what exists', () => {
    refused(
      ['--p4', '--p4-guest-scope', 'everything'],
      /--p4-guest-scope everything: not a scope \(available: none, read, tables, program\)/,
    );
  });

  it('refuses --p4-commands without a program', () => {
    refused(['--p4-commands', path.join(dir, 'c.txt')], /--p4-commands .*needs --p4-program/);
  });

  it('--help lists the options and the default scope', () => {
    const r = spawnSync(process.execPath, [BIN, '--help'], { encoding: 'utf8' });
    for (const s of ['--p4', '--p4-program', '--p4-commands', '--p4-guest-scope', 'default none'])
      expect(r.stdout, s).to.include(s);
  });

  describe('with the fixture programs', () => {
    it('refuses a program with a bad value, naming its JSON path', () => {
      const p = fixtureJson('simple_router.json');
      p.pipelines[0].tables[0].match_type = 'fuzzy';
      const f = path.join(dir, 'bad-router.json');
      fs.writeFileSync(f, JSON.stringify(p));
      refused(['--p4-program', f], /--p4-program .*bad-router\.json: pipelines\[0\]\.tables\[0\]\.match_type/);
    });

    it('refuses a bad commands line with its line number', () => {
      const f = path.join(dir, 'commands.txt');
      fs.writeFileSync(
        f,
        '# entries\ntable_set_default ipv4_lpm _drop\n\ntable_add ipv4_lpm set_nhop 10.0.0.10/32 => 10.0.0.10\n',
      );
      refused(
        ['--p4-program', path.join(FIXTURES, 'simple_router.json'), '--p4-commands', f],
        /--p4-commands .*commands\.txt: line 4: /,
      );
    });

    it('starts with simple_router and its commands.txt and says so', async function () {
      const sock = tempSocketPath('p4cli-run');
      const child = spawn(
        process.execPath,
        [
          BIN,
          '--socket',
          sock,
          '-L',
          'info',
          '--p4-program',
          path.join(FIXTURES, 'simple_router.json'),
          '--p4-commands',
          path.join(FIXTURES, 'commands.txt'),
        ],
        { stdio: ['ignore', 'ignore', 'pipe'] },
      );
      let err = '';
      child.stderr.on('data', (d: Buffer) => {
        err += d.toString();
      });
      for (let i = 0; i < 200 && !/serving/.test(err); i++) await new Promise((r) => setTimeout(r, 50));
      const exited = new Promise((r) => child.once('exit', r));
      child.kill('SIGTERM');
      await exited;
      expect(err).to.match(/P4 program .*simple_router\.json \(9 commands\), guest scope none/);
    });
  });

  it('starts with the WQE program and a guest scope and says both', async () => {
    const root = path.join(__dirname, '..', '..', '..', '..');
    const sock = tempSocketPath('p4cli-wqe');
    const child = spawn(
      process.execPath,
      [
        BIN,
        '--socket',
        sock,
        '-L',
        'info',
        '--p4-program',
        path.join(root, 'fixtures', 'p4', 'rdma_fp8.json'),
        '--p4-commands',
        path.join(root, 'fixtures', 'p4', 'rdma_fp8.commands.txt'),
        '--p4-guest-scope',
        'tables',
      ],
      { stdio: ['ignore', 'ignore', 'pipe'] },
    );
    let err = '';
    child.stderr.on('data', (d: Buffer) => {
      err += d.toString();
    });
    for (let i = 0; i < 200 && !/serving/.test(err); i++) await new Promise((r) => setTimeout(r, 50));
    const exited = new Promise((r) => child.once('exit', r));
    child.kill('SIGTERM');
    await exited;
    expect(err).to.match(/P4 program .*rdma_fp8\.json \(4 commands, on RDMA send WQEs too\), guest scope tables/);
  });
});
