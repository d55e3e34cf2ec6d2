// Workers as separate processes around a manager in this one: registration,
// a message between two processes, the GID table, a worker killed with
// SIGKILL (the others carry on), and one stopped with SIGSTOP (it costs only
// its connections; after SIGCONT it registers again under its id).

import { expect } from 'chai';
import { ChildProcess, fork } from 'node:child_process';
import * as path from 'node:path';
import { Mesh } from '../../lib/mesh/mesh';
import { MemoryLog, startManager, waitFor } from './helpers';

// Heartbeats cross real processes here, so they run on real time. The only
// window the test relies on is the one that must close (a SIGSTOPped worker
// declared dead, awaited as an event); the interval is long enough that a
// live worker starved of CPU on a loaded machine for a second or two is never
// declared dead by mistake. The detection rule itself is tested on a fake
// clock in timeouts.spec.ts.
const HB = 1000;

type Report = Record<string, unknown> & { ev: string };

class Child {
  readonly reports: Report[] = [];
  readonly proc: ChildProcess;

  constructor(
    port: number,
    readonly gid: string,
  ) {
    this.proc = fork(path.join(__dirname, 'fixtures', 'worker-process.js'), [String(port), gid, String(HB)], {
      stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
      execArgv: [],
    });
    this.proc.on('message', (m: Report) => {
      this.reports.push(m);
      this.proc.emit('report', m);
    });
  }

  next(pred: (r: Report) => boolean, ms = 15000): Promise<Report> {
    const have = this.reports.find(pred);
    if (have) return Promise.resolve(have);
    return waitFor<[Report]>(this.proc, 'report', pred, ms).then(([r]) => r);
  }

  /** Wait for a report that comes after this call. */
  fresh(pred: (r: Report) => boolean, ms = 15000): Promise<Report> {
    return waitFor<[Report]>(this.proc, 'report', pred, ms).then(([r]) => r);
  }

  /** Wait for a report at index `from` or later. */
  since(from: number, pred: (r: Report) => boolean, ms = 15000): Promise<Report> {
    const have = this.reports.slice(from).find(pred);
    if (have) return Promise.resolve(have);
    return this.fresh(pred, ms);
  }

  command(cmd: Record<string, unknown>): void {
    this.proc.send(cmd);
  }

  kill(signal: NodeJS.Signals): void {
    this.proc.kill(signal);
  }
}

describe('mesh: workers in separate processes', function () {
  this.timeout(40000);
  let mgr: Mesh | undefined;
  const children: Child[] = [];
  afterEach(async () => {
    for (const c of children.splice(0)) {
      c.kill('SIGCONT');
      c.kill('SIGKILL');
    }
    await mgr?.close();
    mgr = undefined;
  });

  it('registers, talks, shares GIDs, survives a SIGKILL and a SIGSTOP', async () => {
    const log = new MemoryLog('mgr');
    mgr = await startManager({ heartbeatMs: HB, log });
    const port = mgr.listenPort;
    const ids: number[] = [];
    for (let i = 1; i <= 3; i++) {
      const c = new Child(port, `10.0.0.${i}`);
      children.push(c);
      ids.push((await c.next((r) => r.ev === 'registered')).id as number);
    }
    expect(ids).to.deep.equal([1, 2, 3]);
    const [c1, c2, c3] = children as [Child, Child, Child];

    // A message from process 1 to process 3, over their direct link.
    await c1.next((r) => r.ev === 'peer-up' && r.id === 3 && r.route === 'direct');
    const got = c3.fresh((r) => r.ev === 'message');
    c1.command({ op: 'send', to: 3, text: 'hello from 1' });
    expect(await got).to.deep.include({ from: 1, text: 'hello from 1' });

    // The GID table reached every process.
    for (;;) {
      const answer = c1.fresh((r) => r.ev === 'lookup');
      c1.command({ op: 'lookup', gid: '10.0.0.3' });
      if ((await answer).id === 3) break;
      await new Promise((r) => setTimeout(r, 20));
    }
    expect(mgr.lookupGid(Buffer.from('00000000000000000000ffff0a000002', 'hex'))).to.equal(2);

    // SIGKILL process 2: the manager notices at once (the kernel closes its socket); the others carry on.
    const dead2 = waitFor<[number, string]>(mgr, 'peer-down', (id) => id === 2);
    const topo1 = c1.fresh(
      (r) => r.ev === 'topology' && (r.nodes as [number, boolean][]).some(([id, alive]) => id === 2 && !alive),
    );
    c2.kill('SIGKILL');
    await dead2;
    await topo1;
    const got2 = c3.fresh((r) => r.ev === 'message');
    c1.command({ op: 'send', to: 3, text: 'still here' });
    expect(await got2).to.deep.include({ from: 1, text: 'still here' });

    // SIGSTOP process 3: it goes silent; the manager declares it dead after three intervals.
    const dead3 = waitFor<[number, string]>(mgr, 'peer-down', (id) => id === 3);
    c3.kill('SIGSTOP');
    const [, why] = await dead3;
    expect(why).to.match(/nothing heard for 3 heartbeat intervals/);
    await c1.next((r) => r.ev === 'peer-down' && r.id === 3);
    // SIGCONT: it finds its links gone and registers again under its id.
    const mark1 = c1.reports.length;
    const again = c3.fresh((r) => r.ev === 'registered');
    c3.kill('SIGCONT');
    expect((await again).id).to.equal(3);
    expect(mgr.topology().find((n) => n.id === 3)?.alive).to.equal(true);
    await c1.since(mark1, (r) => r.ev === 'peer-up' && r.id === 3 && r.route === 'direct');
    const got3 = c3.fresh((r) => r.ev === 'message');
    c1.command({ op: 'send', to: 3, text: 'welcome back' });
    expect(await got3).to.deep.include({ from: 1, text: 'welcome back' });
  });
});
