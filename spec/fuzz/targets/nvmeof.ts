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
import {
  ADDR,
  HOSTNQN,
  HostMemory,
  IN_CAPSULE,
  KEY,
  KEYED,
  KEYED_INV,
  SglSpec,
  sqe,
  SUBNQN,
  TestHost,
} from '../../targets/nvmeof/helpers';
import { CpuTurnWatch } from '../../targets/turn-watch';
import { EscapeWatch, FuzzFinding, FuzzRunOptions, registerTarget } from './index';
import type { NvmeofController } from '../../../lib/targets/nvmeof';

const TURN_LIMIT_MS = 50;
/** A command (not a held AER) must complete within this. */
const COMPLETE_MS = 20_000;
const ACTIONS_PER_EPOCH = 300;
/** The namespace only good commands name (their writes are read back). */
const CHECK_NSID = 7;
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
  #blocks = 0;
  #bs = 512;
  /** This epoch's guest memory. */
  #mem = new HostMemory(4096);

  constructor(o: FuzzRunOptions) {
    this.#o = o;
    this.#rnd = new Prng(o.seed ^ 0x4e564d45);
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
    this.#bs = rnd.pick([512, 4096]);
    const size = rnd.pick([1, 4, 16, 64]) * 1024 * 1024;
    this.#blocks = size / this.#bs;
    const namespaces: NvmeofNamespace[] = [
      new RamNamespace(1, size, this.#bs),
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
    this.#mem = mem;
    mem.key(KEY);
    mem.key(0x5678, HostMemory.BASE + 0x1000, 0x1000); // a small window: ranges past it are refused
    mem.async = rnd.below(3) === 0;
    this.note(
      `epoch ${this.stats.epochs}: ${size >> 20} MiB of ${this.#bs}-byte blocks${dir ? ', a file namespace' : ''}${mem.async ? ', DMA a turn later' : ''}`,
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
          const { capsule, what, held } = this.#watch.untimed(() => this.#capsule(h === admin || h === rogue));
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
      const w = await io.rw(0x01, 0, 4096 / this.#bs, ADDR.DATA, this.#bs);
      const r = await io.rw(0x02, 0, 4096 / this.#bs, ADDR.OUT, this.#bs);
      if (w.status !== 0 || r.status !== 0 || !mem.at(ADDR.OUT, 4096).equals(data))
        throw this.finding("a fresh host's write did not read back");
      io.queue.close();
    } finally {
      h.queue.close();
    }
  }

  // ---- capsules -------------------------------------------------------------------------------

  #sgl(len: number): SglSpec {
    const rnd = this.#rnd;
    switch (rnd.below(12)) {
      case 0:
        return { addr: ADDR.DATA, len, key: 0, type: KEYED };
      case 1:
        return { addr: ADDR.DATA, len, key: rnd.next(), type: KEYED };
      case 2:
        return {
          addr: rnd.pick([0, 2 ** 52, HostMemory.BASE + (1 << 20) - 10, Number.MAX_SAFE_INTEGER]),
          len,
          key: KEY,
          type: KEYED,
        };
      case 3:
        return { addr: HostMemory.BASE + 0x1000, len, key: 0x5678, type: KEYED };
      case 4:
        return { addr: rnd.below(8192), len, key: 0, type: IN_CAPSULE };
      case 5:
        return {
          addr: ADDR.DATA,
          len: rnd.pick([0, 1, len + 1, len - 1, 0xffffff, rnd.below(0x1000000)]),
          key: KEY,
          type: KEYED,
        };
      case 6:
        return {
          addr: ADDR.DATA,
          len,
          key: KEY,
          type: rnd.pick([0x00, 0x02, 0x30, 0x41, 0x4e, 0x50, 0xf0, rnd.below(256)]),
        };
      case 7:
        return { addr: ADDR.DATA, len, key: KEY, type: KEYED_INV };
      default:
        return { addr: ADDR.DATA + rnd.below(0x1000) * 16, len, key: KEY, type: KEYED };
    }
  }

  #nsid(): number {
    const rnd = this.#rnd;
    const n = rnd.pick([1, 1, 1, 1, 2, 3, 0, 0xffffffff, 0xfffffffe, rnd.next()]);
    return n === CHECK_NSID ? 1 : n;
  }

  /** One capsule: an admin or I/O command with random fields, a Fabrics command, or bytes. */
  #capsule(admin: boolean): { capsule: Buffer; what: string; held: boolean } {
    const rnd = this.#rnd;
    const cid = rnd.below(0x10000);
    const blocks = this.#blocks;
    if (rnd.below(25) === 0) {
      this.stats.raw++;
      const b = rnd.bytes(rnd.pick([0, 1, 16, 63, 64, 65, 100, 4160]));
      return { capsule: b, what: `raw ${b.length} bytes`, held: false };
    }
    const withData = (b: Buffer): Buffer => (rnd.below(6) === 0 ? Buffer.concat([b, rnd.bytes(rnd.below(9000))]) : b);
    const flags = rnd.below(15) === 0 ? rnd.below(256) : 0x40;
    if (rnd.below(8) === 0) {
      // Fabrics: Property Get/Set, Connect, Disconnect, anything
      const fctype = rnd.pick([0x00, 0x01, 0x04, 0x08, rnd.below(256)]);
      const offset = rnd.pick([0, 0x8, 0x14, 0x1c, 0x20, rnd.below(0x2000)]);
      const value =
        fctype === 0x00 && offset === 0x14
          ? rnd.pick([0x00460001, 0x00460000, 0x00464001, 0x00468001, 0, rnd.next()])
          : rnd.next();
      const capsule = sqe({
        opcode: 0x7f,
        cid,
        flags,
        nsid: fctype,
        sgl: fctype === 0x01 ? this.#sgl(1024) : undefined,
        cdw10: rnd.below(2) ? rnd.below(8) : rnd.next(),
        cdw11: fctype === 0x01 ? (rnd.below(5) << 16) | rnd.below(200) : offset,
        cdw12: value,
        cdw13: rnd.next(),
      });
      if (fctype === 0x01) {
        // Connect data in guest memory, half of it plausible.
        const d = Buffer.alloc(1024);
        rnd.bytes(16).copy(d, 0);
        d.writeUInt16LE(rnd.pick([0xffff, 1, 2, rnd.below(0x10000)]), 16);
        d.write(rnd.below(2) ? SUBNQN : rnd.bytes(40).toString('latin1'), 256, 255, 'latin1');
        d.write(rnd.below(2) ? HOSTNQN : rnd.bytes(rnd.below(300)).toString('latin1'), 512, 255, 'latin1');
        d.copy(this.#mem.at(ADDR.DATA, d.length)); // where most of the descriptors point
      }
      return { capsule: withData(capsule), what: `fabrics ${fctype} cdw11 ${offset}`, held: false };
    }
    if (admin) {
      const op = rnd.pick([
        0x06,
        0x06,
        0x02,
        0x02,
        0x09,
        0x0a,
        0x18,
        0x0c,
        0x08,
        0x00,
        0x01,
        0x05,
        0x80,
        rnd.below(256),
      ]);
      switch (op) {
        case 0x06: {
          // Identify
          const len = rnd.pick([4096, 4096, 0, 512, 8192]);
          return {
            capsule: withData(
              sqe({
                opcode: op,
                cid,
                flags,
                nsid: this.#nsid(),
                sgl: this.#sgl(len),
                cdw10: rnd.pick([0, 1, 2, 3, 6, 0x10, rnd.below(256)]),
                cdw11: rnd.below(4) === 0 ? rnd.next() : 0,
              }),
            ),
            what: 'identify',
            held: false,
          };
        }
        case 0x02: {
          // Get Log Page
          const numd = rnd.pick([127, 15, 1023, 0, 32767, rnd.below(0x10000)]);
          const bytes = (numd + 1) * 4;
          return {
            capsule: withData(
              sqe({
                opcode: op,
                cid,
                flags,
                nsid: this.#nsid(),
                sgl: this.#sgl(bytes),
                cdw10:
                  rnd.pick([0x01, 0x02, 0x03, 0x04, 0x70, rnd.below(256)]) |
                  (rnd.below(2) ? 0x8000 : 0) |
                  ((numd & 0xffff) << 16),
                cdw11: rnd.below(4) === 0 ? rnd.next() : 0,
                cdw12: rnd.pick([0, 4, 512, 3, rnd.next()]),
                cdw13: rnd.below(8) === 0 ? rnd.next() : 0,
              }),
            ),
            what: `get log ${numd}`,
            held: false,
          };
        }
        case 0x09:
        case 0x0a: // Set / Get Features
          return {
            capsule: withData(
              sqe({
                opcode: op,
                cid,
                flags,
                sgl: rnd.below(3) ? undefined : this.#sgl(16),
                cdw10:
                  rnd.pick([1, 2, 4, 5, 6, 7, 0x0a, 0x0b, 0x0f, 0x81, rnd.below(256)]) |
                  (rnd.below(4) === 0 ? rnd.below(8) << 8 : 0) |
                  (rnd.below(8) === 0 ? 0x80000000 : 0),
                cdw11: rnd.pick([0, 1, 0xffff, 5000, rnd.next()]),
              }),
            ),
            what: `features ${op}`,
            held: false,
          };
        case 0x0c:
          return { capsule: sqe({ opcode: op, cid, flags }), what: 'AER', held: true };
        case 0x08:
          return {
            capsule: sqe({ opcode: op, cid, flags, cdw10: (rnd.below(0x10000) << 16) | rnd.below(4) }),
            what: 'abort',
            held: false,
          };
        default:
          return {
            capsule: withData(
              sqe({
                opcode: op,
                cid,
                flags,
                nsid: this.#nsid(),
                sgl: this.#sgl(rnd.below(9000)),
                cdw10: rnd.next(),
                cdw11: rnd.next(),
              }),
            ),
            what: `admin op ${op}`,
            held: false,
          };
      }
    }
    const op = rnd.pick([0x01, 0x02, 0x02, 0x00, 0x08, 0x09, 0x09, rnd.below(256)]);
    if (rnd.below(2) === 0 && op <= 0x09) return this.#goodIo(op, cid);
    const slba = rnd.pick([0, 1, blocks - 1, blocks, blocks - 256, rnd.below(blocks), 2 ** 32, 2 ** 53 - 1]);
    switch (op) {
      case 0x01:
      case 0x02: {
        // Write / Read
        const nlb = rnd.pick([1, 8, 256, 257, 0x10000, rnd.below(300) + 1]);
        const len = Math.min(nlb * this.#bs, 0xffffff);
        const control = rnd.below(4) === 0 ? rnd.below(0x10000) : 0;
        return {
          capsule: withData(
            sqe({
              opcode: op,
              cid,
              flags,
              nsid: this.#nsid(),
              sgl: this.#sgl(len),
              cdw10: slba % 2 ** 32,
              cdw11: Math.floor(slba / 2 ** 32) % 2 ** 32,
              cdw12: (control << 16) | ((nlb - 1) & 0xffff),
            }),
          ),
          what: `${op === 1 ? 'write' : 'read'} ${nlb} @${slba}`,
          held: false,
        };
      }
      case 0x08: {
        // Write Zeroes: up to the whole namespace
        const nlb = rnd.pick([1, 0x10000, blocks, rnd.below(0x10000) + 1]);
        return {
          capsule: sqe({
            opcode: op,
            cid,
            flags,
            nsid: this.#nsid(),
            sgl: rnd.below(4) ? undefined : this.#sgl(rnd.below(100)),
            cdw10: slba % 2 ** 32,
            cdw11: Math.floor(slba / 2 ** 32) % 2 ** 32,
            cdw12: (nlb - 1) & 0xffff,
          }),
          what: `write zeroes ${nlb} @${slba}`,
          held: false,
        };
      }
      case 0x09: {
        // Dataset Management: up to 256 ranges, each up to the whole namespace
        const nr = rnd.pick([0, 1, 255, rnd.below(256)]);
        const ranges = Buffer.alloc((nr + 1) * 16);
        for (let i = 0; i <= nr; i++) {
          const s = rnd.pick([0, rnd.below(blocks), blocks, 2 ** 40]);
          ranges.writeUInt32LE(rnd.next(), i * 16);
          ranges.writeUInt32LE(
            rnd.pick([blocks, blocks - s > 0 ? blocks - s : 1, 1, 0, 0xffffffff, rnd.below(blocks + 1)]),
            i * 16 + 4,
          );
          ranges.writeBigUInt64LE(BigInt(s), i * 16 + 8);
        }
        const inCapsule = rnd.below(3) === 0;
        if (!inCapsule) ranges.copy(this.#mem.at(ADDR.DATA, ranges.length));
        const sgl = inCapsule
          ? { addr: 0, len: ranges.length, key: 0, type: IN_CAPSULE }
          : rnd.below(5)
            ? { addr: ADDR.DATA, len: rnd.pick([ranges.length, 4096]), key: KEY, type: KEYED }
            : this.#sgl(ranges.length);
        const capsule = sqe({
          opcode: op,
          cid,
          flags,
          nsid: this.#nsid(),
          sgl,
          cdw10: nr,
          cdw11: rnd.pick([0x4, 0x4, 0, 0x7, rnd.next()]),
        });
        return {
          capsule: inCapsule ? Buffer.concat([capsule, ranges]) : capsule,
          what: `dsm ${nr + 1} ranges`,
          held: false,
        };
      }
      default:
        return {
          capsule: withData(
            sqe({
              opcode: op,
              cid,
              flags,
              nsid: this.#nsid(),
              sgl: this.#sgl(rnd.below(0x30000)),
              cdw10: rnd.next(),
              cdw11: rnd.next(),
              cdw12: rnd.next(),
              cdw13: rnd.next(),
              cdw14: rnd.next(),
              cdw15: rnd.next(),
            }),
          ),
          what: `io op ${op}`,
          held: false,
        };
    }
  }

  /** An I/O command a host could send: nsid 1, a range inside the namespace, an exact keyed SGL within MDTS. */
  #goodIo(op: number, cid: number): { capsule: Buffer; what: string; held: boolean } {
    const rnd = this.#rnd;
    const maxNlb = Math.max(1, Math.floor((128 * 1024) / this.#bs));
    switch (op) {
      case 0x01:
      case 0x02: {
        const nlb = 1 + rnd.below(maxNlb);
        const slba = rnd.below(this.#blocks - nlb + 1);
        return {
          capsule: sqe({
            opcode: op,
            cid,
            nsid: 1,
            sgl: { addr: ADDR.DATA, len: nlb * this.#bs, key: KEY, type: rnd.below(4) ? KEYED : KEYED_INV },
            cdw10: slba,
            cdw12: nlb - 1,
          }),
          what: `good ${op === 1 ? 'write' : 'read'} ${nlb} @${slba}`,
          held: false,
        };
      }
      case 0x08: {
        const nlb = 1 + rnd.below(Math.min(0x10000, this.#blocks));
        const slba = rnd.below(this.#blocks - nlb + 1);
        return {
          capsule: sqe({ opcode: op, cid, nsid: 1, cdw10: slba, cdw12: nlb - 1 }),
          what: `good write zeroes ${nlb} @${slba}`,
          held: false,
        };
      }
      case 0x09: {
        const nr = rnd.below(256);
        const ranges = Buffer.alloc((nr + 1) * 16);
        for (let i = 0; i <= nr; i++) {
          const s = rnd.below(this.#blocks);
          ranges.writeUInt32LE(1 + rnd.below(this.#blocks - s), i * 16 + 4);
          ranges.writeBigUInt64LE(BigInt(s), i * 16 + 8);
        }
        ranges.copy(this.#mem.at(ADDR.DATA, ranges.length));
        return {
          capsule: sqe({
            opcode: op,
            cid,
            nsid: 1,
            sgl: { addr: ADDR.DATA, len: ranges.length, key: KEY, type: KEYED },
            cdw10: nr,
            cdw11: 0x4,
          }),
          what: `good dsm ${nr + 1} ranges`,
          held: false,
        };
      }
      default:
        return { capsule: sqe({ opcode: 0x00, cid, nsid: 1 }), what: 'good flush', held: false };
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
