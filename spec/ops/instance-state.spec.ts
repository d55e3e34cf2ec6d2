// What ernicctl reads of an instance (lib/ops/instance-state.ts): the state
// and mesh_node lines of its stats file, bounds checked, and the wait for
// them: woken by the directory's changes and by the child's exit, ended by
// its time limit, with no timer in between.

import { expect } from 'chai';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { DeviceActivity } from '../../lib/ops/activity';
import { instanceStateOf, readInstanceState, waitFor } from '../../lib/ops/instance-state';
import { StatsFileWriter } from '../../lib/ops/stats-file';
import { collectStats, MeshStatsSource } from '../../lib/ops/stats-source';
import { IonicDevice } from '../../lib/ionic/device';
import { DEVICE_MAC, testProfile } from '../support/ionic/rig';

const head = (lines: string): string => `=== ROCm ERNIC Statistics ===\nInstance:\n${lines}\n\nWrite count : 1\n`;

describe("ops: an instance's state from its stats file", function () {
  this.timeout(10000);
  let dir = '';
  beforeEach(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ernic-state-'));
  });
  afterEach(() => fs.rmSync(dir, { recursive: true, force: true }));

  it('reads state and mesh_node; a value outside its set or range is absent', () => {
    expect(instanceStateOf(head('  state       : listening\n  mesh_node   : 3'))).to.deep.equal({
      phase: 'listening',
      meshNode: 3,
    });
    expect(instanceStateOf(head('  state       : stopped\n  mesh_node   : unregistered'))).to.deep.equal({
      phase: 'stopped',
      meshNode: null,
    });
    expect(instanceStateOf(head('  connection  : connected'))).to.deep.equal({ phase: null, meshNode: null });
    for (const bad of [
      '  state       : __proto__',
      '  state       : LISTENING',
      '  mesh_node   : -1',
      '  mesh_node   : 99999999999999999999',
      '  mesh_node   : 4294967296',
    ]) {
      const st = instanceStateOf(head(bad));
      expect([st.phase, st.meshNode], bad).to.deep.equal([null, null]);
    }
  });

  it("reads what the server's writer writes, and nothing through a symlink", () => {
    const file = path.join(dir, '1.stats');
    const activity = new DeviceActivity();
    const node: { id: number | undefined } = { id: undefined };
    const mesh: MeshStatsSource = {
      stats: () => ({
        nodeId: node.id,
        role: 'worker',
        connections: 1,
        established: 1,
        outboundBytes: 0,
        inboundBytes: 0,
        inboundMessages: 0,
        heldConnections: 0,
        parserBytes: 0,
        inboundDropped: 0,
        relayDropped: 0,
        protocolErrors: 0,
      }),
    };
    const src = {
      device: new IonicDevice({ profile: testProfile(), mac: DEVICE_MAC }),
      socket: '/s',
      backend: 'tcp:worker:127.0.0.1:1',
      mac: 'm',
      connection: activity,
      mesh,
    };
    const w = new StatsFileWriter({ path: file, snapshot: (n) => collectStats(src, n) });
    w.follow(activity);
    activity.setPhase('starting');
    expect(readInstanceState(file)).to.deep.equal({ phase: 'starting', meshNode: null });
    node.id = 2;
    activity.setPhase('listening');
    expect(readInstanceState(file)).to.deep.equal({ phase: 'listening', meshNode: 2 });
    w.close();
    expect(readInstanceState(path.join(dir, 'none.stats'))).to.equal(null);
    fs.symlinkSync(file, path.join(dir, 'link.stats'));
    expect(readInstanceState(path.join(dir, 'link.stats'))).to.equal(null);
  });

  it('waits for a change in the directory, wakes on another event, and gives up at its time limit', async () => {
    const file = path.join(dir, '0.stats');
    const check = (): number | null => readInstanceState(file)?.meshNode ?? null;
    const t0 = Date.now();
    const pending = waitFor(check, { dirs: [dir], timeoutMs: 5000 });
    setTimeout(() => fs.writeFileSync(file, head('  mesh_node   : 7')), 50);
    expect(await pending).to.equal(7);
    expect(Date.now() - t0, 'woken by the write, not the time limit').to.be.below(4000);

    let wake: (() => void) | null = null;
    let gone = false;
    const exited = waitFor(() => (gone ? 'exited' : null), {
      dirs: [dir],
      timeoutMs: 5000,
      also: (fn) => {
        wake = fn;
      },
    });
    setTimeout(() => {
      gone = true;
      wake!();
    }, 30);
    expect(await exited).to.equal('exited');

    const t1 = Date.now();
    expect(await waitFor(() => null, { dirs: [dir, path.join(dir, 'missing')], timeoutMs: 150 })).to.equal(null);
    expect(Date.now() - t1).to.be.within(140, 3000);
  });
});
