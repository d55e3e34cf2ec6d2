// The NVMe-oF target, in process: command capsules straight into NvmeofQueue
// (the entry the RDMA transport hands every capsule to) and CM MADs into a
// CmResponder. Each epoch builds a target (a RAM namespace of random size and
// block size, sometimes a file namespace, and a namespace the random commands
// never name, where good writes are read back), connects an admin queue and
// I/O queues as a host does, and mixes good commands with random ones, a few
// at once as one doorbell would bring them: opcodes, fields, lengths, SGL
// descriptors (keyed, in capsule, bad; key 0, unknown keys, lengths past
// MDTS), Dataset Management ranges, Write Zeroes of the whole namespace,
// Property Set of CC (resets, shutdown), Connects with random data, and
// capsules that are not capsules; and MADs: REQ, RTU, DREQ, DREP, REJ, MRA
// with random fields, and random bytes.
//
// A finding: an exception that escapes, a command the controller failed
// inside itself (its error log line), a command that never completes (held
// AERs aside, until the teardown that must complete them), a good write that
// does not read back, a target that no longer connects and serves a fresh
// host, a CM responder whose books do not balance (a connection closed twice,
// one left after a reset, a good REQ refused), or a loop turn over 50 ms
// (the runner's figure, confirmed by this thread's CPU time).
//
// The random capsules come from ./nvmeof-capsules.ts; the CM MADs are made here.

import { promises as fsp } from 'fs';
import * as os from 'os';
import * as path from 'path';
import { guardStats } from '../../../lib/guard';
import type { Logger } from '../../../lib/log';
import {
  Cqe,
  FileNamespace,
  NvmeofNamespace,
  NvmeofSubsystem,
  NvmeofTarget,
  RamNamespace,
} from '../../../lib/targets/nvmeof';
import { CmConnection, CmPeer, CmResponder, guidFromMac, MAX_CM_CONNECTIONS } from '../../../lib/targets/nvmeof/rdma';
import { Prng } from '../../support/ionic/rig';
import { ATTR, drep, dreq, madHeader, rej, req, rtu } from '../../targets/nvmeof/cm-mads';
import { ADDR, HostMemory, KEY, SUBNQN, TestHost } from '../../targets/nvmeof/helpers';
import { CpuTurnWatch } from '../../targets/turn-watch';
import { CHECK_NSID, CapsuleEpoch, NvmeCapsules } from './nvmeof-capsules';
import { EscapeWatch, FuzzFinding, FuzzRunOptions, registerTarget } from './index';
import type { NvmeofController } from '../../../lib/targets/nvmeof';

const TURN_LIMIT_MS = 50;
/** A command (not a held AER) must complete within this. */
const COMPLETE_MS = 20_000;
const ACTIONS_PER_EPOCH = 300;
const CHECK_BLOCKS = 256;

interface NvmeFuzzStats {
  epochs: number;
  commands: number;
  good: number;
  raw: number;
  batches: number;
  mads: number;
  /** Completions: success, and any error status. */
  ok: number;
  errors: number;
  maxCpuTurnMs: number;
}

/** Error-level log lines are the controller telling of its own bug; everything else is dropped. */
class ErrorLog implements Logger {
  readonly errors: string[] = [];
  readonly debugEnabled = false;
  error(message: string, meta?: Record<string, unknown>): void {
    this.errors.push(`${message} ${JSON.stringify(meta ?? {})}`);
  }
  warn(): void {
    /* refusals are expected */
  }
  info(): void {
    /* connections come and go */
  }
  debug(): void {
    /* off */
  }
}

class NvmeFuzzer {
  readonly stats: NvmeFuzzStats = {
    epochs: 0,
    commands: 0,
    good: 0,
    raw: 0,
    batches: 0,
    mads: 0,
    ok: 0,
    errors: 0,
    maxCpuTurnMs: 0,
  };
  readonly #rnd: Prng;
  readonly #o: FuzzRunOptions;
  readonly #trail: string[] = [];
  readonly #escapes = new EscapeWatch();
  readonly #watch = new CpuTurnWatch();
  readonly #log = new ErrorLog();
  /** This epoch's namespace geometry and guest memory, which the capsules read. */
  readonly #epochState: CapsuleEpoch = { blocks: 0, bs: 512, mem: new HostMemory(4096) };
  readonly #capsules: NvmeCapsules;

  constructor(o: FuzzRunOptions) {
    this.#o = o;
    this.#rnd = new Prng(o.seed ^ 0x4e564d45);
    this.#capsules = new NvmeCapsules(this.#rnd, this.#epochState, this.stats);
  }

  note(s: string): void {
    this.#trail.push(s);
    if (this.#trail.length > 12) this.#trail.shift();
  }

  finding(what: string): FuzzFinding {
    return new FuzzFinding(what, this.#o.seed, this.stats.epochs, [...this.#trail]);
  }

  async run(): Promise<NvmeFuzzStats> {
    this.#escapes.start();
    const watch = this.#watch.start();
    let atLongest: string[] = [];
    watch.onMax = (cpu) => {
      if (cpu > 10) atLongest = [...this.#trail];
    };
    const contained0 = guardStats.contained;
    const start = Date.now();
    let shown = 0;
    try {
      while (Date.now() - start < this.#o.ms) {
        this.stats.epochs++;
        await this.#epoch(start);
        this.note('CM MADs');
        this.#cm();
        this.stats.maxCpuTurnMs = watch.maxCpuMs;
        if (guardStats.contained !== contained0) throw this.finding('the last-resort guard caught a bug');
        if (this.#escapes.seen.length > 0) throw this.finding(`an exception escaped: ${this.#escapes.seen[0]}`);
        if (this.#log.errors.length > 0)
          throw this.finding(`the controller logged its own failure: ${this.#log.errors[0]}`);
        if (this.#o.longestTurnMs() > TURN_LIMIT_MS && watch.maxCpuMs > TURN_LIMIT_MS) {
          this.#trail.splice(0, this.#trail.length, ...atLongest);
          throw this.finding(
            `a loop turn of ${this.#o.longestTurnMs().toFixed(1)} ms (${watch.maxCpuMs.toFixed(1)} ms of this thread's CPU, ending after the actions below)`,
          );
        }
        if (Date.now() - shown >= 1000) {
          shown = Date.now();
          this.#o.progress(summary(this.stats));
        }
      }
    } finally {
      watch.stop();
      this.#escapes.stop();
    }
    return this.stats;
  }

  // ---- one epoch of capsules ------------------------------------------------------------------

  async #epoch(start: number): Promise<void> {
    const rnd = this.#rnd;
    this.#epochState.bs = rnd.pick([512, 4096]);
    const size = rnd.pick([1, 4, 16, 64]) * 1024 * 1024;
    this.#epochState.blocks = size / this.#epochState.bs;
    const namespaces: NvmeofNamespace[] = [
      new RamNamespace(1, size, this.#epochState.bs),
      new RamNamespace(CHECK_NSID, CHECK_BLOCKS * 512, 512),
    ];
    let dir: string | null = null;
    if (rnd.below(4) === 0) {
      dir = await fsp.mkdtemp(path.join(os.tmpdir(), 'ernic-fuzz-nvme-'));
      namespaces.push(await FileNamespace.open(3, path.join(dir, 'ns3'), 4 * 1024 * 1024, rnd.pick([512, 4096])));
    }
    const subsystem = new NvmeofSubsystem<NvmeofController>({
      nqn: SUBNQN,
      model: 'rocm-ernic NVMe-oF target',
      serial: 'ERNICFUZZ',
      namespaces,
      maxIoQueues: 4,
      inCapsuleBytes: rnd.pick([0, 0, 4096, 8192]),
    });
    const target = new NvmeofTarget({
      subsystem,
      port: { traddr: '192.168.200.1', trsvcid: '4420', portid: 1 },
      logger: this.#log,
    });
    const mem = new HostMemory(1 << 20);
    this.#epochState.mem = mem;
    mem.key(KEY);
    mem.key(0x5678, HostMemory.BASE + 0x1000, 0x1000); // a small window: ranges past it are refused
    mem.async = rnd.below(3) === 0;
    this.note(
      `epoch ${this.stats.epochs}: ${size >> 20} MiB of ${this.#epochState.bs}-byte blocks${dir ? ', a file namespace' : ''}${mem.async ? ', DMA a turn later' : ''}`,
    );
    const hosts: TestHost[] = [];
    /** Every submission in flight: its promise, and whether it may be held (an AER). */
    const pending = new Set<{ p: Promise<Cqe>; held: boolean; what: string }>();
    const submit = (h: TestHost, capsule: Buffer, what: string, held = false): Promise<Cqe> => {
      this.stats.commands++;
      const p = h.queue.submit(capsule);
      const entry = { p, held, what };
      pending.add(entry);
      void p.then(
        (c) => {
          pending.delete(entry);
          if ((c.status & 0x7ff) === 0) this.stats.ok++;
          else this.stats.errors++;
        },
        (e: unknown) => {
          this.#escapes.seen.push(`submit rejected (${what}): ${String(e)}`);
        },
      );
      return p;
    };
    try {
      const admin = new TestHost(target, mem);
      hosts.push(admin);
      await admin.connect({ kato: rnd.pick([0, 0, 5000, 120_000]) });
      await admin.enable();
      const cntlid = admin.queue.controller?.cntlid ?? 0;
      for (let qid = 1; qid <= 1 + rnd.below(3); qid++) {
        const io = new TestHost(target, mem);
        hosts.push(io);
        await io.connect({ qid, sqsize: 127, cntlid });
      }
      const rogue = new TestHost(target, mem); // never connected properly: random Connects and commands
      hosts.push(rogue);
      for (let i = 0; i < ACTIONS_PER_EPOCH && Date.now() - start < this.#o.ms; i++) {
        // Each batch on a turn of its own, as each doorbell is its own vfio-user message: with a RAM namespace and
        // this in-memory DMA a whole epoch would otherwise run as one turn of microtasks.
        await new Promise<void>((r) => setImmediate(r));
        // A host whose controller was reset or shut down by a random Property Set enables it again, as Linux does.
        const ctrl = admin.queue.controller;
        if (ctrl?.alive && !ctrl.ready && rnd.below(4) === 0) {
          this.note('enable again');
          await admin.propSet(0x14, 0);
          await admin.enable();
        }
        const x = rnd.below(100);
        if (x < 8) {
          await this.#checkFlow(mem, hosts);
          continue;
        }
        // One doorbell's worth: 1 to 16 capsules submitted together.
        const n = x < 60 ? 1 : 1 + rnd.below(16);
        this.stats.batches++;
        const batch: Promise<Cqe>[] = [];
        mem.failing = rnd.below(20) === 0; // now and then the transport fails every transfer of a batch
        for (let k = 0; k < n; k++) {
          const h = rnd.below(10) === 0 ? rogue : rnd.below(4) === 0 ? admin : rnd.pick(hosts);
          const { capsule, what, held } = this.#watch.untimed(() => this.#capsules.capsule(h === admin || h === rogue));
          this.note(`${h === rogue ? 'rogue' : h === admin ? 'admin' : `io${h.queue.qid}`} ${what}`);
          const p = submit(h, capsule, what, held);
          if (!held) batch.push(p);
        }
        const t = await within(Promise.all(batch), COMPLETE_MS);
        mem.failing = false;
        if (t === LATE) {
          const late = [...pending]
            .filter((e) => !e.held)
            .map((e) => e.what)
            .slice(0, 3);
          throw this.finding(`commands did not complete in ${COMPLETE_MS} ms: ${late.join('; ')}`);
        }
      }
      mem.failing = false;
      // The target still serves a fresh host, as a reconnecting one would find it.
      this.note('a fresh host');
      await this.#freshHost(target);
    } finally {
      // Teardown completes what is held (AERs): every submission must settle.
      this.note('teardown');
      for (const h of hosts) h.queue.close();
      const left = await within(Promise.all([...pending].map((e) => e.p)), COMPLETE_MS);
      await target.close();
      if (dir) await fsp.rm(dir, { recursive: true, force: true });
      if (left === LATE)
        throw this.finding(
          `submissions still pending after the queues closed: ${[...pending]
            .map((e) => e.what)
            .slice(0, 3)
            .join('; ')}`,
        );
    }
  }

  /** A connected host on the check namespace: writes, reads back, compares. */
  async #checkFlow(mem: HostMemory, hosts: TestHost[]): Promise<void> {
    const rnd = this.#rnd;
    const h = rnd.pick(hosts.slice(1, -1));
    if (!h?.queue.controller?.ready || mem.failing) return;
    this.stats.good++;
    const nlb = 1 + rnd.below(64);
    const slba = rnd.below(CHECK_BLOCKS - nlb);
    const data = this.#watch.untimed(() => rnd.bytes(nlb * 512));
    data.copy(mem.at(ADDR.DATA, data.length));
    this.note(`check: write ${nlb} blocks at ${slba} of nsid ${CHECK_NSID}`);
    const w = await h.rw(0x01, slba, nlb, ADDR.DATA, 512, { nsid: CHECK_NSID });
    if (w.status !== 0) return; // a reset or shutdown of the controller may refuse it: fine
    mem.at(ADDR.OUT, data.length).fill(0);
    const r = await h.rw(0x02, slba, nlb, ADDR.OUT, 512, { nsid: CHECK_NSID });
    if (r.status !== 0) return;
    if (!mem.at(ADDR.OUT, data.length).equals(data)) {
      // Only this flow writes there, one at a time: what was written must come back.
      throw this.finding(`${nlb} blocks written at ${slba} of the check namespace read back different`);
    }
  }

  async #freshHost(target: NvmeofTarget): Promise<void> {
    const mem = new HostMemory(1 << 20);
    mem.key(KEY);
    const h = new TestHost(target, mem);
    try {
      const c = await within(h.connect(), COMPLETE_MS);
      if (c === LATE || c.status !== 0)
        throw this.finding(`a fresh host could not connect (${c === LATE ? 'no answer' : c.status.toString(16)})`);
      await h.enable();
      const io = new TestHost(target, mem);
      const ic = await io.connect({ qid: 1, sqsize: 127, cntlid: h.queue.controller!.cntlid });
      if (ic.status !== 0) throw this.finding(`a fresh host's I/O queue could not connect (${ic.status.toString(16)})`);
      const data = Buffer.alloc(4096, 0x5a);
      data.copy(mem.at(ADDR.DATA, 4096));
      const w = await io.rw(0x01, 0, 4096 / this.#epochState.bs, ADDR.DATA, this.#epochState.bs);
      const r = await io.rw(0x02, 0, 4096 / this.#epochState.bs, ADDR.OUT, this.#epochState.bs);
      if (w.status !== 0 || r.status !== 0 || !mem.at(ADDR.OUT, 4096).equals(data))
        throw this.finding("a fresh host's write did not read back");
      io.queue.close();
    } finally {
      h.queue.close();
    }
  }

  // ---- CM MADs --------------------------------------------------------------------------------

  /** Random and good MADs into a CmResponder with a host that records what it is told; its books checked. */
  #cm(): void {
    const rnd = this.#rnd;
    const open = new Set<number>();
    const sent: Buffer[] = [];
    let closedTwice = '';
    const cm = new CmResponder({
      ip: '192.168.200.1',
      port: 4420,
      maxIoQueues: 4,
      caGuid: guidFromMac(Buffer.from([2, 0, 192, 168, 200, 1])),
      host: {
        sendMad: (mad) => {
          sent.push(Buffer.from(mad));
        },
        open: (c: CmConnection) => {
          if (rnd.below(10) === 0) return false;
          open.add(c.targetQpn);
          return true;
        },
        closed: (c: CmConnection) => {
          if (!open.delete(c.targetQpn)) closedTwice = `connection ${c.targetQpn} closed twice or never opened`;
        },
      },
      cntlidLive: () => rnd.below(2) === 0,
      random: () => rnd.next() / 2 ** 32,
    });
    const peer = (): CmPeer => ({
      gid: Buffer.from(`00000000000000000000ffffc0a8c8${rnd.pick(['02', '03', '04'])}`, 'hex'),
      mac: Buffer.from([0x52, 0x54, 0, 0, 0, rnd.below(4)]),
      vlanTci: rnd.pick([-1, -1, 5]),
    });
    const comm: number[] = [];
    this.#watch.untimed(() => {
      for (let i = 0; i < 400; i++) {
        this.stats.mads++;
        const x = rnd.below(12);
        let mad: Buffer;
        if (x < 4) {
          const commId = rnd.next();
          comm.push(commId);
          mad = req({
            commId,
            qpn: rnd.below(4096),
            qid: rnd.pick([0, 1, 2, 5, rnd.below(0x10000)]),
            hsqsize: rnd.pick([31, 127, 0, 128, rnd.below(0x10000)]),
            hrqsize: rnd.pick([32, 128, 0, 129, rnd.below(0x10000)]),
            cntlid: rnd.pick([0, 1, rnd.below(0x10000)]),
            recfmt: rnd.below(8) === 0 ? 1 : 0,
            service: rnd.below(8) === 0 ? rnd.next() : undefined,
            transport: rnd.below(8) === 0 ? 1 : 0,
            ipVersion: rnd.below(10) === 0 ? 6 : 4,
          });
        } else if (x < 6) mad = rtu(rnd.pick([...comm, rnd.next()]), rnd.next());
        else if (x < 8)
          mad = dreq(
            rnd.pick([...comm, rnd.next()]),
            rnd.next(),
            rnd.pick([0x00c00000, 0x00c00001, rnd.below(0x1000000)]),
          );
        else if (x < 9) mad = drep(rnd.next(), rnd.next());
        else if (x < 10) mad = rej(rnd.next(), rnd.next(), rnd.below(4), rnd.below(40));
        else if (x < 11) mad = madHeader(rnd.pick([ATTR.MRA, 0x17, 0x18, rnd.below(0x10000)]));
        else mad = rnd.bytes(rnd.pick([256, 100, 300]));
        if (rnd.below(6) === 0) for (let k = rnd.below(6); k >= 0; k--) mad[rnd.below(mad.length)] = rnd.next() & 0xff;
        cm.receive(mad, peer());
        if (closedTwice) throw this.finding(`CM: ${closedTwice}`);
        if (cm.size > MAX_CM_CONNECTIONS || cm.size !== open.size)
          throw this.finding(`CM: ${cm.size} connections against ${open.size} the host holds`);
      }
      // A good REQ is still accepted, and a reset leaves nothing.
      const before = sent.length;
      const good = req({ commId: 0x600dd00d, qpn: 77 });
      const host = cm.size;
      cm.receive(good, {
        gid: Buffer.from('00000000000000000000ffffc0a8c8fe', 'hex'),
        mac: Buffer.from([0x52, 0x54, 0, 0, 1, 1]),
        vlanTci: -1,
      });
      const answer = sent[before];
      if (host < MAX_CM_CONNECTIONS && open.size === host + 1 && (!answer || answer.readUInt16BE(16) !== ATTR.REP))
        throw this.finding('CM: a good REQ was not answered with a REP');
      cm.reset();
      if (cm.size !== 0 || open.size !== 0)
        throw this.finding(`CM: ${cm.size} connections (${open.size} held) after a reset`);
    });
  }
}

const LATE = Symbol('late');

function within<T>(p: Promise<T>, ms: number): Promise<T | typeof LATE> {
  return new Promise((resolve) => {
    const t = setTimeout(() => resolve(LATE), ms);
    p.then(
      (v) => {
        clearTimeout(t);
        resolve(v);
      },
      () => {
        clearTimeout(t);
        resolve(LATE);
      },
    );
  });
}

function summary(s: NvmeFuzzStats): string {
  return (
    `${s.epochs} epochs, ${s.commands} capsules in ${s.batches} batches (${s.raw} not capsules), ${s.good} write/read-back checks, ` +
    `completions ${s.ok} ok / ${s.errors} errors; ${s.mads} CM MADs; longest turn ${s.maxCpuTurnMs.toFixed(1)} ms of CPU`
  );
}

registerTarget({
  name: 'nvmeof',
  describe:
    "NVMe-oF capsules into the controller's queues (random opcodes, fields, SGLs, lengths, DSM ranges) and CM MADs into the responder",
  async run(o) {
    const f = new NvmeFuzzer(o);
    return summary(await f.run());
  },
});
