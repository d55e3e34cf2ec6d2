// The mesh across hosts, as near as one machine gets: two network namespaces
// joined by a veth pair (10.201.0.1/24 and 10.201.0.2/24), a manager in one
// and a worker in the other, each a rocm-ernic process run with
// `ip netns exec`, over TLS with a pre-shared key. The worker registers (its
// stats file's mesh_node line); a third server with another key is refused
// with one line on each side naming the other's address; and a server
// without credentials will not dial across at all. Needs root (namespaces).

import { expect } from 'chai';
import { execFileSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { readInstanceState, waitFor as waitForState } from '../../lib/ops/instance-state';
import { skipBecause } from '../support/skip';
import { tempSocketPath } from '../support/fds';
import { makeTestPki, ServerProcess, TestPki } from './tls-support';

const tag = (process.pid % 100000).toString(36);
const NS_A = `ernic-${tag}-a`;
const NS_B = `ernic-${tag}-b`;
const VETH_A = `ev${tag}a`;
const VETH_B = `ev${tag}b`;
const IP_A = '10.201.0.1';
const IP_B = '10.201.0.2';
const PORT = 7400 + (process.pid % 500);

function ip(...args: string[]): void {
  execFileSync('ip', args, { stdio: ['ignore', 'ignore', 'pipe'] });
}

function quietly(f: () => void): void {
  try {
    f();
  } catch {
    /* already gone */
  }
}

/** The mesh node a stats file reports, once it does (fs.watch on its directory, as ernicctl waits). */
async function meshNodeOf(file: string, server: ServerProcess, ms = 20_000): Promise<number> {
  const node = await waitForState(() => (server.exited ? -1 : (readInstanceState(file)?.meshNode ?? null)), {
    dirs: [path.dirname(file)],
    timeoutMs: ms,
    also: (wake) => server.proc.once('exit', wake),
  });
  if (node === null || node < 0) throw new Error(`no mesh_node in ${file} after ${ms} ms: ${server.output}`);
  return node;
}

describe('mesh: across two network namespaces over TLS (root)', function () {
  this.timeout(90000);
  let pki: TestPki;
  let made = false;
  const servers: ServerProcess[] = [];
  const files: string[] = [];

  before(function () {
    if (process.getuid?.() !== 0) skipBecause(this, 'needs root to create network namespaces');
    try {
      execFileSync('ip', ['netns', 'list'], { stdio: 'ignore' });
    } catch {
      skipBecause(this, 'no ip netns here');
    }
    pki = makeTestPki();
    try {
      ip('netns', 'add', NS_A);
      made = true;
      ip('netns', 'add', NS_B);
      ip('link', 'add', VETH_A, 'type', 'veth', 'peer', 'name', VETH_B);
      ip('link', 'set', VETH_A, 'netns', NS_A);
      ip('link', 'set', VETH_B, 'netns', NS_B);
      ip('-n', NS_A, 'addr', 'add', `${IP_A}/24`, 'dev', VETH_A);
      ip('-n', NS_B, 'addr', 'add', `${IP_B}/24`, 'dev', VETH_B);
      for (const [ns, dev] of [
        [NS_A, VETH_A],
        [NS_B, VETH_B],
      ] as const) {
        ip('-n', ns, 'link', 'set', 'lo', 'up');
        ip('-n', ns, 'link', 'set', dev, 'up');
      }
    } catch (e) {
      const why = (e as { stderr?: Buffer }).stderr?.toString().trim() || (e as Error).message;
      skipBecause(this, `cannot set up network namespaces: ${why}`);
    }
  });

  after(async () => {
    await Promise.all(servers.splice(0).map((s) => s.stop()));
    for (const f of files) fs.rmSync(f, { force: true });
    if (made) {
      quietly(() => ip('netns', 'del', NS_A));
      quietly(() => ip('netns', 'del', NS_B));
    }
    pki?.remove();
  });

  function server(ns: string, args: string[]): { s: ServerProcess; stats: string } {
    const sock = tempSocketPath(`netns-${ns}`);
    const stats = path.join(pki.dir, `${ns}-${servers.length}.stats`);
    files.push(sock, stats);
    const s = new ServerProcess(['--socket', sock, '-S', stats, '-L', 'info', ...args], {
      netns: ns,
      env: { ...process.env, ERNIC_MESH_PSK_FILE: '', CREDENTIALS_DIRECTORY: '' },
    });
    servers.push(s);
    return { s, stats };
  }

  it('a worker in the other namespace registers over TLS; another key is refused on both sides; no credentials, no dial', async () => {
    const mgr = server(NS_A, ['--backend', `tcp:manager:${IP_A}:${PORT}`, '--mesh-psk', pki.psk1]);
    await mgr.s.waitFor(
      new RegExp(
        `mesh: manager listening on port ${PORT} at ${IP_A.replace(/\./g, '\\.')} .*TLS 1\\.3, pre-shared key`,
      ),
    );

    const w = server(NS_B, ['--backend', `tcp:worker:${IP_A}:${PORT}`, '--mesh-psk', pki.psk1]);
    expect(await meshNodeOf(w.stats, w.s)).to.equal(1);
    await mgr.s.waitFor(new RegExp(`mesh: node 1 registered from ${IP_B.replace(/\./g, '\\.')}`));

    const bad = server(NS_B, ['--backend', `tcp:worker:${IP_A}:${PORT}`, '--mesh-psk', pki.psk2]);
    await bad.s.waitFor(
      new RegExp(
        `warn: mesh: TLS with ${IP_A.replace(/\./g, '\\.')}:${PORT} failed: the peer refused our pre-shared key`,
      ),
    );
    await mgr.s.waitFor(
      new RegExp(
        `warn: mesh: refused ${IP_B.replace(/\./g, '\\.')}:\\d+: wrong pre-shared key: the peer holds key [0-9a-f]{16}, we hold key [0-9a-f]{16}`,
      ),
    );
    expect(readInstanceState(bad.stats)?.meshNode ?? null).to.equal(null);
    expect(mgr.s.output).to.not.match(/node 2 registered/);

    const open = server(NS_B, ['--backend', `tcp:worker:${IP_A}:${PORT}`]);
    expect(await open.s.exitCode()).to.equal(2);
    expect(open.s.output).to.match(
      /no mesh credentials, so the mesh stays on loopback .* the manager at 10\.201\.0\.1 is not; give it a key/,
    );
  });
});
