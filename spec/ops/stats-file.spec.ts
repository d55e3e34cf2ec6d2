// The stats file writer (lib/ops/stats-file.ts): written whole by rename, on
// change only, one timer at most, one follow-up check after a write, nothing
// scheduled when idle; a reset writes at once; a path it cannot write is an
// error at startup and a rate-limited warning later.

import { expect } from 'chai';
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import { DeviceActivity } from '../../lib/ops/activity';
import { StatsFileWriter, temporaryName, writeReplacing } from '../../lib/ops/stats-file';
import { instanceRows } from '../../lib/ops/stats-source';
import { parseStatsFile, StatsSnapshot } from '../../lib/ops/stats-format';
import type { Logger } from '../../lib/log';
import type { RegionHandler, VfioUserDevice } from '../../lib/vfio-user/device';

const INTERVAL = 40;

function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}

/** A counter the test moves, as a snapshot. */
class Fake {
  value = 0;
  snapshot = (writeCount: number): StatsSnapshot => ({
    instance: [['connection', 'connected']],
    writeCount,
    sections: [{ title: 'Device Statistics', rows: [['commands', this.value]] }],
    qpSummary: [],
    qps: [],
  });
}

function memoryLog(): Logger & { warnings: string[] } {
  const warnings: string[] = [];
  return {
    warnings,
    error() {},
    warn(m: string) {
      warnings.push(m);
    },
    info() {},
    debug() {},
    debugEnabled: false,
  };
}

function read(file: string): { commands: unknown; writeCount: number | null } {
  const p = parseStatsFile(fs.readFileSync(file, 'utf8'));
  return { commands: p.sections['Device Statistics']?.commands, writeCount: p.writeCount };
}

describe('ops: stats file writer', () => {
  let dir: string;
  let file: string;
  let fake: Fake;
  let w: StatsFileWriter;

  beforeEach(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ernic-stats-'));
    file = path.join(dir, '0.stats');
    fake = new Fake();
    w = new StatsFileWriter({ path: file, snapshot: fake.snapshot, intervalMs: INTERVAL });
  });
  afterEach(() => {
    w.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it('writes the whole file at once, by rename (a new inode each time, no temporary file left)', () => {
    w.writeNow(true);
    const ino1 = fs.statSync(file).ino;
    fake.value = 5;
    w.writeNow();
    expect(fs.statSync(file).ino).to.not.equal(ino1);
    expect(read(file)).to.deep.equal({ commands: 5, writeCount: 2 });
    expect(fs.readdirSync(dir)).to.deep.equal(['0.stats']);
  });

  it('a change arms one timer; it writes, checks once more, then schedules nothing while idle', async () => {
    w.writeNow(true);
    expect(w.scheduled).to.equal(false);
    fake.value = 1;
    for (let i = 0; i < 100; i++) w.markDirty(); // many changes, one timer
    expect(w.scheduled).to.equal(true);
    expect(read(file).commands).to.equal(0); // not yet
    for (let i = 0; i < 100 && w.writes < 2; i++) await sleep(10);
    expect(read(file)).to.deep.equal({ commands: 1, writeCount: 2 });
    expect(w.scheduled, 'the follow-up check').to.equal(true);
    for (let i = 0; i < 100 && w.scheduled; i++) await sleep(10);
    expect(w.scheduled, 'idle: nothing scheduled').to.equal(false);
    expect(w.writes, 'the follow-up found nothing new').to.equal(2);
    expect(w.idleChecks).to.equal(1);
    await sleep(3 * INTERVAL);
    expect(w.writes).to.equal(2);
  });

  it('the follow-up check catches a change made after the write (work finishing on its own)', async () => {
    w.writeNow(true);
    fake.value = 1;
    w.markDirty();
    for (let i = 0; i < 100 && w.writes < 2; i++) await sleep(5);
    fake.value = 2; // no markDirty: a completion nobody reported
    for (let i = 0; i < 100 && w.writes < 3; i++) await sleep(5);
    expect(read(file)).to.deep.equal({ commands: 2, writeCount: 3 });
  });

  it('a check that finds the content unchanged writes nothing (the write count is not a change)', async () => {
    w.writeNow(true);
    w.markDirty();
    for (let i = 0; i < 100 && w.scheduled; i++) await sleep(5);
    expect(w.writes).to.equal(1);
    expect(read(file).writeCount).to.equal(1);
  });

  it('follows a device: an access marks it dirty, a reset writes at once', () => {
    const activity = new DeviceActivity();
    w.follow(activity);
    const calls: string[] = [];
    const region: RegionHandler = {
      size: 16,
      readable: true,
      writable: true,
      read(_o, dst) {
        calls.push('read');
        dst.fill(7);
        return 0;
      },
      write() {
        calls.push('write');
        return 0;
      },
    };
    const inner: VfioUserDevice = {
      resetSupported: true,
      region: (i) => (i === 0 ? region : undefined),
      irqCount: () => 0,
      attach() {
        calls.push('attach');
      },
      detach() {
        calls.push('detach');
      },
      reset(r) {
        calls.push(`reset ${r}`);
      },
    };
    const dev = activity.wrap(inner);
    expect(dev.region(0)).to.equal(dev.region(0)); // one wrapper, kept
    expect(dev.region(1)).to.equal(undefined);
    const dst = Buffer.alloc(4);
    expect(dev.region(0)!.read(0, dst)).to.equal(0);
    expect(dst[0]).to.equal(7);
    expect(w.scheduled).to.equal(true);
    dev.attach({} as never);
    expect(activity.state).to.equal('connected');
    dev.reset('device-reset');
    expect(w.scheduled, 'the reset wrote; nothing pending').to.equal(false);
    expect(w.writes).to.equal(1);
    expect(parseStatsFile(fs.readFileSync(file, 'utf8')).instance.connection).to.equal('connected');
    expect(activity.state).to.equal('connected (device reset)');
    dev.detach();
    expect([activity.connected, activity.state]).to.deep.equal([false, 'disconnected (lost connection)']);
    expect(calls).to.deep.equal(['read', 'attach', 'reset device-reset', 'detach']);
  });

  it('refuses a path it cannot write at startup (strict), later only warns (rate limited)', () => {
    const bad = new StatsFileWriter({
      path: path.join(dir, 'no-such-dir', '0.stats'),
      snapshot: fake.snapshot,
      log: memoryLog(),
    });
    expect(() => bad.writeNow(true)).to.throw(/ENOENT/);
    const log = memoryLog();
    const later = new StatsFileWriter({ path: path.join(dir, 'no-such-dir', '0.stats'), snapshot: fake.snapshot, log });
    for (let i = 0; i < 50; i++) expect(later.writeNow()).to.equal(false);
    expect(log.warnings.length).to.be.within(1, 10);
    expect(log.warnings[0]).to.match(/cannot write the stats file .*no-such-dir/);
  });

  it('follows no symlink planted at any name the writer used to write (the old temporary name, the file itself)', () => {
    const victim = path.join(dir, 'victim');
    fs.writeFileSync(victim, 'precious\n');
    // The temporary name the old writer used (.NAME.PID.tmp), and the stats path itself.
    const oldTmp = path.join(dir, `.0.stats.${process.pid}.tmp`);
    fs.symlinkSync(victim, oldTmp);
    fs.symlinkSync(victim, file);
    fake.value = 3;
    w.writeNow(true);
    w.writeNow(true);
    expect(fs.readFileSync(victim, 'utf8')).to.equal('precious\n');
    expect(fs.lstatSync(file).isSymbolicLink(), 'the symlink at the stats path is replaced, not followed').to.equal(
      false,
    );
    expect(read(file)).to.deep.equal({ commands: 3, writeCount: 2 });
    expect(fs.lstatSync(oldTmp).isSymbolicLink(), 'a planted link is left alone').to.equal(true);
    expect(fs.readdirSync(dir).sort()).to.deep.equal(['.0.stats.' + process.pid + '.tmp', '0.stats', 'victim']);
  });

  it('creates its temporary file exclusively under a random name, and leaves nothing when the rename fails', () => {
    const names = new Set(Array.from({ length: 100 }, () => temporaryName(file)));
    expect(names.size).to.equal(100);
    for (const n of names) expect(path.basename(n)).to.match(/^\.0\.stats\.[0-9a-f]{16}\.tmp$/);
    // A directory at the final name: rename fails, the temporary file is removed, nothing else is touched.
    fs.mkdirSync(file);
    expect(() => writeReplacing(file, 'x')).to.throw(/EISDIR|ENOTEMPTY|EEXIST/);
    expect(fs.readdirSync(dir)).to.deep.equal(['0.stats']);
  });

  it("writes at once when the server's phase changes, with the state line (what ernicctl waits for)", () => {
    const activity = new DeviceActivity();
    const snap = (n: number): StatsSnapshot => ({
      ...fake.snapshot(n),
      instance: instanceRows({ device: {} as never, socket: '/s', backend: 'b', mac: 'm', connection: activity }),
    });
    const pw = new StatsFileWriter({ path: file, snapshot: snap, intervalMs: INTERVAL });
    pw.follow(activity);
    pw.writeNow(true);
    expect(parseStatsFile(fs.readFileSync(file, 'utf8')).instance.state, 'no phase reported: no line').to.equal(
      undefined,
    );
    activity.setPhase('starting');
    activity.setPhase('listening');
    expect(pw.writes).to.equal(3);
    expect(pw.scheduled).to.equal(false);
    expect(parseStatsFile(fs.readFileSync(file, 'utf8')).instance.state).to.equal('listening');
    activity.setPhase('listening');
    expect(pw.writes, 'the same phase again is no change').to.equal(3);
    pw.close();
  });

  it('close() cancels a pending write and arms nothing more', async () => {
    w.markDirty();
    w.close();
    expect(w.scheduled).to.equal(false);
    w.markDirty();
    expect(w.scheduled).to.equal(false);
    await sleep(2 * INTERVAL);
    expect(fs.existsSync(file)).to.equal(false);
  });
});
