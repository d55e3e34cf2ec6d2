// A guest model of ionic.ko: drives the emulated NIC the way the stock Linux
// driver does, through a real vfio-user socket and memfd guest RAM.
//
// Written from the driver's point of view (reference/ionic-eth-contract.md):
// commands are built and completions parsed here with our own offsets
// (./regs.ts), never with lib/ionic's layouts or helpers, so a misreading of
// the contract in lib/ionic fails a test instead of being mirrored.
//
// How it works, as the driver does:
// - Device commands: data window, 64-byte command, done = 0, doorbell = 1,
//   then poll `done` by reading it (each read is a REGION_READ round trip).
// - BAR writes are posted (NO_REPLY), as QEMU sends memory-BAR writes; any
//   later read is ordered after them.
// - Interrupts: one eventfd per MSI-X vector, watched with native.watch. The
//   callback drains the eventfd and runs that vector's "NAPI": it walks the
//   CQs by color, completes descriptors, refills RX, and returns credits with
//   UNMASK | RESET_COALESCE. Waiting callers are woken after each pass.
// - Anything the device does that the driver would choke on (a bad color,
//   comp_index out of range or out of order, a length past the buffer) is
//   recorded in `violations`; tests assert it stays empty.

import * as fs from 'fs';
import * as native from '../../../lib/native';
import { GuestRam, VfioUserClient } from '../../../lib/vfio-user/client';
import {
  ADMINQ_LENGTH, Attr, Bar0, Cfg, COLOR, CRED_RESET_COALESCE, CRED_UNMASK, DevId, DRIVER_FEATURES, Feature, FW_RUNNING,
  IRQ_INDEX_MSIX, LifId, LifInfo, LifStatName, LifStats, Match, NOTIFYQ_LENGTH, Op, PAGE, PortCfg, PortId, PortInfo, QCtl, QF,
  QId, QT, Region, RxMode, SIGNATURE_DEVI, St, TxOp,
} from './regs';

// ---- little-endian helpers (ours, on purpose) ---------------------------------------------

export function u64(buf: Buffer, at: number): number {
  const v = buf.readBigUInt64LE(at);
  if (v > BigInt(Number.MAX_SAFE_INTEGER)) throw new RangeError(`u64 at ${at} is past 2^53`);
  return Number(v);
}

export function putU64(buf: Buffer, at: number, v: number | bigint): void {
  buf.writeBigUInt64LE(BigInt.asUintN(64, BigInt(v)), at);
}

function u32le(v: number): Buffer {
  const b = Buffer.alloc(4);
  b.writeUInt32LE(v >>> 0, 0);
  return b;
}

/** A 64-byte command with the opcode set; fields are filled by the caller. */
export function command(opcode: number): Buffer {
  const c = Buffer.alloc(64);
  c[0] = opcode;
  return c;
}

export interface DevCmdResult {
  readonly status: number;
  /** The 16-byte completion at BAR0 0x848. */
  readonly comp: Buffer;
  /** The 1912-byte data window after the command, when asked for. */
  readonly data: Buffer | null;
}

export interface AdminCompletion {
  readonly status: number;
  readonly comp: Buffer;
  /** Ring slot of the command. */
  readonly slot: number;
  /** CQ slot the completion was read from, and the color it carried. */
  readonly cqIndex: number;
  readonly color: number;
}

export interface TxCompletion {
  readonly status: number;
  readonly slot: number;
}

export interface RxFrame {
  readonly queue: number;
  /** Descriptor index (= comp_index). */
  readonly index: number;
  readonly status: number;
  readonly len: number;
  readonly numSg: number;
  readonly rssHash: number;
  readonly pktType: number;
  readonly data: Buffer;
}

export interface GuestOptions {
  /** Guest RAM size (default 64 MiB). */
  readonly ramSize?: number;
  /** Guest-physical (IOVA) address of the RAM (default 4 GiB, so every address needs more than 32 bits). */
  readonly iova?: number;
  /** Per-wait timeout in ms (default 3000). */
  readonly timeoutMs?: number;
  /** Share RAM as an unsealed memfd (default sealed, as QEMU's memfd backend does). */
  readonly unsealedRam?: boolean;
}

export interface OpenOptions {
  /** log2 of the TX and RX ring sizes (default 6: 64 descriptors). */
  readonly ringLog2?: number;
  readonly txRingLog2?: number;
  readonly rxRingLog2?: number;
  /** MTU for RX buffer sizing (default 1500); above PAGE - 18 the buffers use SG elements. */
  readonly mtu?: number;
  /** Refill RX buffers from NAPI (default true). */
  readonly autoRefill?: boolean;
  /** How many RX buffers to post at start (default size - 1, the most the driver ever posts). */
  readonly initialFill?: number;
  /** TX queue version to ask for in Q_INIT (default the q_identity version). */
  readonly txVersion?: number;
  /** Skip Q_CONTROL ENABLE (queues stay created but disabled). */
  readonly noEnable?: boolean;
}

export interface SendOptions {
  readonly queue?: number;
  /** Split the frame into pieces of these lengths: the first goes in the descriptor, the rest in SG elements. */
  readonly pieces?: readonly number[];
  /** Ring the doorbell (default true); false batches like xmit_more. */
  readonly ring?: boolean;
}

type VectorMode = 'napi' | 'manual';

interface AdminQ {
  ring: number; cq: number; head: number; tail: number; cqTail: number; doneColor: number;
  hwType: number; hwIndex: number;
  waiters: Map<number, { resolve(c: AdminCompletion): void }>;
}

interface NotifyQ { base: number; events: number; lastEid: bigint; tail: number; hwType: number; hwIndex: number }

interface TxQ {
  index: number; intr: number; size: number; ring: number; cq: number; sg: number; bufs: number; sgDescSize: number; version: number;
  head: number; tail: number; cqTail: number; doneColor: number; hwType: number; hwIndex: number;
  waiters: Map<number, (c: TxCompletion) => void>;
  completed: number;
}

interface RxBuf { iova: number; len: number }
interface RxQ {
  index: number; intr: number; size: number; ring: number; cq: number; sg: number;
  head: number; tail: number; cqTail: number; doneColor: number; hwType: number; hwIndex: number;
  /** Per slot: the first buffer and the SG buffers posted with it. */
  bufs: RxBuf[][];
  frameLen: number;
  autoRefill: boolean;
}

const TX_SLOT_BYTES = 16384;
/** Gap between TX SG pieces in a slot, so a device that reads past a piece gets the wrong bytes. */
const TX_PIECE_GAP = 64;
const RX_FILL_THRESHOLD = 16;
/** Statuses the driver maps to -EINVAL (a Q_IDENTIFY with one of them skips that type). */
const EINVAL_LIKE: ReadonlySet<number> = new Set([St.EINVAL, St.EVERSION, St.EQTYPE, St.EQID]);

export class IonicGuest {
  readonly client: VfioUserClient;
  readonly ram: GuestRam;
  readonly base: number;
  readonly timeoutMs: number;
  /** Problems the real driver would choke on; tests expect none. */
  readonly violations: string[] = [];
  /** Every command issued, in order: `dev:<opcode>` or `admin:<opcode>`. */
  readonly trace: string[] = [];
  /** Admin completions consumed, in order. */
  readonly adminLog: AdminCompletion[] = [];

  // discovered at connect
  msixCap = 0;
  nvec = 0;
  bars: { index: number; size: number }[] = [];

  // identity
  devInfo: Buffer = Buffer.alloc(0);
  devIdentity: Buffer = Buffer.alloc(0);
  lifIdentity: Buffer = Buffer.alloc(0);
  portIdentity: Buffer = Buffer.alloc(0);
  readonly qIdentity: (Buffer | null)[] = [null, null, null, null];
  /** Completions kept from probe, by step name. */
  readonly probeComps = new Map<string, Buffer>();
  mac: Buffer = Buffer.alloc(6);
  features = 0;
  lifHwIndex = -1;
  dbPage = -1;
  carrier = false;
  macFilterId = -1;

  lifInfoPa = 0;
  portInfoPa = 0;
  adminq: AdminQ | null = null;
  notifyq: NotifyQ | null = null;
  readonly notifyEvents: Buffer[] = [];
  readonly txqs: TxQ[] = [];
  readonly rxqs: RxQ[] = [];
  /** Frames received and not yet taken, in arrival order. */
  readonly rxFrames: RxFrame[] = [];

  readonly #irqFds: number[] = [];
  readonly #watchers: native.Watcher[] = [];
  /** Interrupts seen per vector (sum of eventfd counter values). */
  readonly #irqs: number[] = [];
  readonly #mode: VectorMode[] = [];
  readonly #wakers = new Set<() => void>();
  #next: number;
  readonly #end: number;
  #closed = false;

  private constructor(client: VfioUserClient, ram: GuestRam, base: number, timeoutMs: number) {
    this.client = client;
    this.ram = ram;
    this.base = base;
    this.timeoutMs = timeoutMs;
    this.#next = base;
    this.#end = base + ram.size;
  }

  /** Connect, share RAM with DMA_MAP, find MSI-X, wire one eventfd per vector and enable MSI-X. */
  static async connect(socketPath: string, opts: GuestOptions = {}): Promise<IonicGuest> {
    const client = await VfioUserClient.connect(socketPath);
    const ram = new GuestRam(opts.ramSize ?? 64 << 20, 'ionic-guest', !opts.unsealedRam);
    const g = new IonicGuest(client, ram, opts.iova ?? 2 ** 32, opts.timeoutMs ?? 3000);
    try {
      await client.dmaMap(g.base, ram.size, ram.fd, 0);
      await g.#discover();
      await g.#wireMsix();
    } catch (e) {
      g.dispose();
      throw e;
    }
    return g;
  }

  // ---- memory ------------------------------------------------------------------------------

  /** Allocate zeroed guest memory (page aligned by default). */
  alloc(size: number, align = PAGE): number {
    const at = Math.ceil(this.#next / align) * align;
    if (at + size > this.#end) throw new Error(`guest RAM exhausted (${size} bytes wanted)`);
    this.#next = at + size;
    this.mem(at, size).fill(0);
    return at;
  }

  /** A view of guest RAM at an IOVA. */
  mem(iova: number, len: number): Buffer {
    const off = iova - this.base;
    if (off < 0 || off + len > this.ram.size) throw new RangeError(`0x${iova.toString(16)}+${len} is outside guest RAM`);
    return this.ram.buffer.subarray(off, off + len);
  }

  // ---- MMIO --------------------------------------------------------------------------------

  bar0Read(offset: number, len: number): Promise<Buffer> {
    return this.client.regionRead(Region.BAR0, offset, len);
  }

  async bar0Read32(offset: number): Promise<number> {
    return (await this.bar0Read(offset, 4)).readUInt32LE(0);
  }

  /** A posted BAR0 write (NO_REPLY), sent at once. */
  bar0Write(offset: number, data: Buffer): void {
    this.client.postRegionWrite(Region.BAR0, offset, data);
    this.client.flush();
  }

  bar0Write32(offset: number, v: number): void {
    this.bar0Write(offset, u32le(v));
  }

  /** A round trip: every posted write before it has been handled when it resolves. */
  async sync(): Promise<void> {
    await this.bar0Read(Bar0.FW_STATUS, 1);
  }

  async configRead(offset: number, len: number): Promise<Buffer> {
    return this.client.regionRead(Region.CONFIG, offset, len);
  }

  async configWrite16(offset: number, v: number): Promise<void> {
    const b = Buffer.alloc(2);
    b.writeUInt16LE(v, 0);
    await this.client.regionWrite(Region.CONFIG, offset, b);
  }

  /** value = qid << 24 | ring << 16 | p_index, one 8-byte posted write at dbpage + 8 * hw_type. */
  ringDoorbell(hwType: number, qid: number, pIndex: number, ring = 0): void {
    const v = Buffer.alloc(8);
    v.writeUInt16LE(pIndex & 0xffff, 0);
    v[2] = ring & 0x7;
    v[3] = qid & 0xff;
    v.writeUInt16LE((qid >>> 8) & 0xffff, 4);
    this.client.postRegionWrite(Region.BAR2, this.dbPage + 8 * hwType, v);
    this.client.flush();
  }

  /** A raw doorbell-BAR write (bad-input tests). */
  doorbellRaw(offset: number, data: Buffer): void {
    this.client.postRegionWrite(Region.BAR2, offset, data);
    this.client.flush();
  }

  // ---- discovery -----------------------------------------------------------------------------

  async #discover(): Promise<void> {
    // BARs as the driver packs them: memory BARs only, upper halves of 64-bit ones skipped.
    const bars: { index: number; size: number }[] = [];
    const raw = await this.configRead(Cfg.BAR0, 24);
    for (let i = 0; i < 6; i++) {
      const v = raw.readUInt32LE(i * 4);
      const info = await this.client.getRegionInfo(i);
      if (info.size === 0) continue;
      if ((v & 1) === 0) bars.push({ index: i, size: info.size });
      if ((v & 1) === 0 && ((v >>> 1) & 3) === 2) i++; // 64-bit: the next BAR is the upper half
    }
    this.bars = bars;
    // Walk the capability list from 0x34 to the MSI-X capability.
    const status = (await this.configRead(Cfg.STATUS, 2)).readUInt16LE(0);
    if (!(status & Cfg.STATUS_CAP_LIST)) throw new Error('no capability list');
    let at = (await this.configRead(Cfg.CAP_PTR, 1))[0]! & 0xfc;
    for (let hops = 0; at !== 0 && hops < 48; hops++) {
      const hdr = await this.configRead(at, 2);
      if (hdr[0] === Cfg.CAP_ID_MSIX) { this.msixCap = at; break; }
      at = hdr[1]! & 0xfc;
    }
    if (this.msixCap === 0) throw new Error('no MSI-X capability');
    const flags = (await this.configRead(this.msixCap + Cfg.MSIX_FLAGS, 2)).readUInt16LE(0);
    this.nvec = (flags & Cfg.MSIX_QSIZE) + 1;
  }

  async #wireMsix(): Promise<void> {
    const maxFds = this.client.serverLimits?.maxMsgFds ?? 16;
    for (let v = 0; v < this.nvec; v++) {
      this.#irqFds.push(native.eventfd(0, true));
      this.#irqs.push(0);
      this.#mode.push('napi');
    }
    for (let start = 0; start < this.nvec; start += maxFds) {
      await this.client.setIrqEventfds(IRQ_INDEX_MSIX, start, this.#irqFds.slice(start, start + maxFds));
    }
    for (let v = 0; v < this.nvec; v++) {
      const self = this;
      this.#watchers.push(native.watch(this.#irqFds[v]!, native.READABLE, function onVector() { self.#onIrq(v); }));
    }
    // pci_enable_device_mem, then MSI-X on (QEMU forwards the config write to us).
    const cmd = (await this.configRead(Cfg.COMMAND, 2)).readUInt16LE(0);
    await this.configWrite16(Cfg.COMMAND, cmd | Cfg.CMD_MEMORY);
    const flags = (await this.configRead(this.msixCap + Cfg.MSIX_FLAGS, 2)).readUInt16LE(0);
    await this.configWrite16(this.msixCap + Cfg.MSIX_FLAGS, (flags | Cfg.MSIX_ENABLE) & ~Cfg.MSIX_MASKALL);
  }

  // ---- interrupts ----------------------------------------------------------------------------

  #drain(v: number): number {
    const b = Buffer.alloc(8);
    try {
      if (fs.readSync(this.#irqFds[v]!, b, 0, 8, null) !== 8) return 0;
    } catch {
      return 0; // EAGAIN: nothing signalled
    }
    const n = Number(b.readBigUInt64LE(0));
    this.#irqs[v]! += n;
    return n;
  }

  #onIrq(v: number): void {
    if (this.#closed) return;
    if (this.#drain(v) === 0) return;
    if (this.#mode[v] === 'napi') this.napi(v);
    this.#wake();
  }

  /** 'napi' (default): run the vector's poll on every interrupt. 'manual': only count. */
  setVectorMode(v: number, mode: VectorMode): void {
    this.#mode[v] = mode;
  }

  /** Interrupts seen on `v` so far, after a round trip (so every signal the device sent is counted). */
  async irqCount(v: number): Promise<number> {
    await this.sync();
    this.#drain(v);
    return this.#irqs[v]!;
  }

  intrReg(v: number, reg: number): number {
    return Bar0.INTR + Bar0.INTR_LEN * v + reg;
  }

  setMask(v: number, mask: number): void {
    this.bar0Write32(this.intrReg(v, Bar0.MASK), mask);
  }

  setMaskAssert(v: number, on: number): void {
    this.bar0Write32(this.intrReg(v, Bar0.MASK_ASSERT), on);
  }

  setCoalInit(v: number, value: number): void {
    this.bar0Write32(this.intrReg(v, Bar0.COAL_INIT), value);
  }

  /** Write the credits register: return `n`, optionally unmask and restart coalescing. */
  returnCredits(v: number, n: number, unmask: boolean, resetCoalesce = true): void {
    this.bar0Write32(this.intrReg(v, Bar0.CREDITS), (n & 0xffff) | (unmask ? CRED_UNMASK : 0) | (resetCoalesce ? CRED_RESET_COALESCE : 0));
  }

  /** Outstanding credits: the signed 16-bit count in bits 0..15. */
  async readCredits(v: number): Promise<number> {
    const raw = await this.bar0Read32(this.intrReg(v, Bar0.CREDITS));
    return (raw << 16) >> 16;
  }

  async readMask(v: number): Promise<number> {
    return this.bar0Read32(this.intrReg(v, Bar0.MASK));
  }

  /** "intr clean": read the credits, return them all and restart coalescing. */
  async intrClean(v: number): Promise<void> {
    const credits = await this.bar0Read32(this.intrReg(v, Bar0.CREDITS));
    this.bar0Write32(this.intrReg(v, Bar0.CREDITS), (credits & 0xffff) | CRED_RESET_COALESCE);
  }

  /** The poll for a vector: NotifyQ and AdminQ on the admin vector, TX then RX on a data vector. */
  napi(v: number, opts: { unmask?: boolean } = {}): number {
    let work = 0;
    if (this.adminq && v === 0) {
      work += this.#serviceNotify();
      work += this.#serviceAdmin();
    }
    for (const q of this.txqs) if (q && q.intr === v) work += this.#serviceTx(q);
    for (const q of this.rxqs) {
      if (!q || q.intr !== v) continue;
      work += this.#serviceRx(q);
      if (q.autoRefill) this.#refill(q, false);
    }
    this.returnCredits(v, work, opts.unmask ?? true);
    this.#wake();
    return work;
  }

  #wake(): void {
    for (const w of [...this.#wakers]) w();
  }

  /** Resolve when `check` returns a value other than undefined; re-checked after every interrupt pass. */
  waitFor<T>(what: string, check: () => T | undefined, timeoutMs = this.timeoutMs): Promise<T> {
    const now = check();
    if (now !== undefined) return Promise.resolve(now);
    return new Promise<T>((resolve, reject) => {
      const waker = (): void => {
        const v = check();
        if (v === undefined) return;
        this.#wakers.delete(waker);
        clearTimeout(timer);
        resolve(v);
      };
      const timer = setTimeout(() => {
        this.#wakers.delete(waker);
        reject(new Error(`ionic guest: timed out after ${timeoutMs} ms waiting for ${what}`));
      }, timeoutMs);
      timer.unref();
      this.#wakers.add(waker);
    });
  }

  // ---- device commands ---------------------------------------------------------------------

  /**
   * One device command as ionic_dev_cmd_go + ionic_dev_cmd_wait do it. On
   * success the registers are cleaned (doorbell 0, command zeroed) unless
   * `clean` is false.
   */
  async devCmd(cmd: Buffer, opts: { data?: Buffer; readData?: boolean; clean?: boolean } = {}): Promise<DevCmdResult> {
    this.trace.push(`dev:${cmd[0]}`);
    if (opts.data) this.bar0Write(Bar0.DATA, opts.data);
    // memcpy_toio of the command: 8-byte pieces, as a 64-bit guest would send them.
    for (let i = 0; i < Bar0.CMD_LEN; i += 8) this.client.postRegionWrite(Region.BAR0, Bar0.CMD + i, cmd.subarray(i, i + 8));
    this.bar0Write32(Bar0.DONE, 0);
    this.bar0Write32(Bar0.DB, 1);
    const deadline = Date.now() + 5000; // DEVCMD_TIMEOUT
    for (;;) {
      const done = await this.bar0Read32(Bar0.DONE);
      if (done & 1) break;
      const fw = (await this.bar0Read(Bar0.FW_STATUS, 1))[0]!;
      if (fw === 0xff || !(fw & FW_RUNNING)) throw new Error(`devcmd ${cmd[0]}: firmware not running (ENXIO)`);
      if (Date.now() > deadline) throw new Error(`devcmd ${cmd[0]}: timed out`);
      await new Promise((r) => setTimeout(r, 1));
    }
    const comp = await this.bar0Read(Bar0.COMP, Bar0.COMP_LEN);
    const status = comp[0]!;
    if (status === St.SUCCESS && opts.clean !== false) {
      this.bar0Write32(Bar0.DB, 0);
      this.bar0Write(Bar0.CMD, Buffer.alloc(Bar0.CMD_LEN));
    }
    const data = opts.readData ? await this.bar0Read(Bar0.DATA, Bar0.DATA_LEN) : null;
    return { status, comp, data };
  }

  async #devCmdOk(step: string, cmd: Buffer, opts: { data?: Buffer; readData?: boolean } = {}): Promise<DevCmdResult> {
    const r = await this.devCmd(cmd, opts);
    if (r.status !== St.SUCCESS) throw new Error(`probe: ${step} failed with status ${r.status}`);
    this.probeComps.set(step, r.comp);
    return r;
  }

  // ---- admin queue ---------------------------------------------------------------------------

  /** Post one admin command and resolve with its completion (interrupt driven). */
  adminCmd(cmd: Buffer, timeoutMs = 5000): Promise<AdminCompletion> {
    const q = this.adminq;
    if (!q) return Promise.reject(new Error('admin queue not initialised'));
    if ((q.head + 1) % ADMINQ_LENGTH === q.tail) return Promise.reject(new Error('admin queue full'));
    const slot = q.head;
    this.trace.push(`admin:${cmd[0]}`);
    cmd.copy(this.mem(q.ring + slot * 64, 64));
    q.head = (q.head + 1) % ADMINQ_LENGTH;
    const p = new Promise<AdminCompletion>((resolve, reject) => {
      const timer = setTimeout(() => {
        q.waiters.delete(slot);
        reject(new Error(`admin command ${cmd[0]} (slot ${slot}) timed out`));
      }, timeoutMs);
      timer.unref();
      q.waiters.set(slot, { resolve: (c) => { clearTimeout(timer); resolve(c); } });
    });
    p.catch(() => { /* a caller that never awaits must not see an unhandled rejection */ });
    this.ringDoorbell(q.hwType, q.hwIndex, q.head);
    return p;
  }

  /** Post several admin commands and ring the doorbell once (up to 15 outstanding, as the driver may have). */
  adminCmds(cmds: readonly Buffer[], timeoutMs = 5000): Promise<AdminCompletion[]> {
    const q = this.adminq;
    if (!q) return Promise.reject(new Error('admin queue not initialised'));
    const outstanding = (q.head - q.tail + ADMINQ_LENGTH) % ADMINQ_LENGTH;
    if (outstanding + cmds.length > ADMINQ_LENGTH - 1) return Promise.reject(new Error('admin queue full'));
    const all: Promise<AdminCompletion>[] = [];
    for (const cmd of cmds) {
      const slot = q.head;
      this.trace.push(`admin:${cmd[0]}`);
      cmd.copy(this.mem(q.ring + slot * 64, 64));
      q.head = (q.head + 1) % ADMINQ_LENGTH;
      all.push(new Promise<AdminCompletion>((resolve, reject) => {
        const timer = setTimeout(() => {
          q.waiters.delete(slot);
          reject(new Error(`admin command ${cmd[0]} (slot ${slot}) timed out`));
        }, timeoutMs);
        timer.unref();
        q.waiters.set(slot, { resolve: (c) => { clearTimeout(timer); resolve(c); } });
      }));
    }
    this.ringDoorbell(q.hwType, q.hwIndex, q.head);
    return Promise.all(all);
  }

  async #adminOk(step: string, cmd: Buffer): Promise<AdminCompletion> {
    const c = await this.adminCmd(cmd);
    if (c.status !== St.SUCCESS) throw new Error(`${step}: admin status ${c.status}`);
    this.probeComps.set(step, c.comp);
    return c;
  }

  #serviceAdmin(): number {
    const q = this.adminq!;
    let work = 0;
    for (;;) {
      const e = Buffer.from(this.mem(q.cq + q.cqTail * 16, 16));
      const color = e[15]! & COLOR ? 1 : 0;
      if (color !== q.doneColor) break;
      const ci = e.readUInt16LE(2);
      if (ci >= ADMINQ_LENGTH) {
        this.violations.push(`admin CQ ${q.cqTail}: comp_index ${ci} is not a ring index`);
        break;
      }
      if (q.tail === q.head || (ci - q.tail + ADMINQ_LENGTH) % ADMINQ_LENGTH >= (q.head - q.tail + ADMINQ_LENGTH) % ADMINQ_LENGTH) {
        this.violations.push(`admin CQ ${q.cqTail}: comp_index ${ci} is not outstanding (tail ${q.tail}, head ${q.head})`);
        break;
      }
      // Complete every descriptor from the tail through comp_index.
      for (;;) {
        const slot = q.tail;
        q.tail = (q.tail + 1) % ADMINQ_LENGTH;
        const c: AdminCompletion = { status: e[0]!, comp: e, slot, cqIndex: q.cqTail, color };
        this.adminLog.push(c);
        const w = q.waiters.get(slot);
        q.waiters.delete(slot);
        w?.resolve(c);
        if (slot === ci) break;
      }
      q.cqTail = (q.cqTail + 1) % ADMINQ_LENGTH;
      if (q.cqTail === 0) q.doneColor ^= 1;
      work++;
    }
    return work;
  }

  #serviceNotify(): number {
    const n = this.notifyq;
    if (!n) return 0;
    let work = 0;
    for (;;) {
      const e = this.mem(n.events + n.tail * 64, 64);
      const eid = e.readBigUInt64LE(0);
      if (BigInt.asIntN(64, eid - n.lastEid) <= 0n) break;
      n.lastEid = eid;
      this.notifyEvents.push(Buffer.from(e));
      n.tail = (n.tail + 1) % NOTIFYQ_LENGTH;
      work++;
    }
    return work;
  }

  // ---- probe ---------------------------------------------------------------------------------

  /** ionic_probe through a netdev with carrier, in the order of contract 2.3. */
  async probe(opts: { rxMode?: number } = {}): Promise<void> {
    // 1. ionic_dev_setup
    const regs = this.bars[0];
    if (!regs || regs.size < Bar0.MIN_SIZE) throw new Error('probe: Resource bar size too small');
    if (!this.bars[1]) throw new Error('probe: Doorbell bar missing');
    this.devInfo = await this.bar0Read(0, Bar0.SERIAL + Bar0.STRING_LEN);
    if (this.devInfo.readUInt32LE(Bar0.SIGNATURE) !== SIGNATURE_DEVI) throw new Error('probe: Incompatible firmware signature');
    const fw = this.devInfo[Bar0.FW_STATUS]!;
    if (fw === 0xff || !(fw & FW_RUNNING)) throw new Error('probe: firmware not running');

    // 2. RESET, then bus mastering.
    await this.#devCmdOk('reset', command(Op.RESET));
    const pcicmd = (await this.configRead(Cfg.COMMAND, 2)).readUInt16LE(0);
    await this.configWrite16(Cfg.COMMAND, pcicmd | Cfg.CMD_MASTER);

    // 3. IDENTIFY with drv_identity in the window.
    const drv = Buffer.alloc(Bar0.DATA_LEN);
    drv.writeUInt32LE(1, 0); // os_type LINUX
    drv.writeUInt32LE(0, 4);
    drv.write('Debian GNU/Linux 13', 8, 'latin1');
    drv.writeUInt32LE(0x060c00, 136);
    drv.write('6.12.0-ernic-test', 140, 'latin1');
    drv.write('6.12.0-ernic-test', 172, 'latin1');
    const ident = command(Op.IDENTIFY);
    ident[1] = 2; // ver
    this.devIdentity = (await this.#devCmdOk('identify', ident, { data: drv, readData: true })).data!;

    // 4. LIF_IDENTIFY, type CLASSIC, ver 1.
    this.lifIdentity = await this.#lifIdentify('lif_identify');

    // 6. INIT
    await this.#devCmdOk('init', command(Op.INIT));

    // 7. PORT_IDENTIFY
    this.portIdentity = await this.#portIdentify('port_identify');

    // 8. PORT_INIT with the identity's config in the window.
    this.portInfoPa = this.alloc(Math.ceil(PortInfo.SIZE / PAGE) * PAGE);
    const pinit = command(Op.PORT_INIT);
    pinit[1] = 0;
    putU64(pinit, 8, this.portInfoPa);
    await this.#devCmdOk('port_init', pinit, { data: this.portIdentity.subarray(PortId.config, PortId.config + PortCfg.SIZE) });

    // 9. PORT_SETATTR STATE = UP; its error is ignored.
    const pset = command(Op.PORT_SETATTR);
    pset[1] = 0;
    pset[2] = 0; // attr STATE
    pset[4] = 2; // UP
    this.probeComps.set('port_setattr', (await this.devCmd(pset)).comp);

    // 11. LIF allocation: LIF_IDENTIFY again, then Q_IDENTIFY for the four types.
    this.lifIdentity = await this.#lifIdentify('lif_identify2');
    const qver = [0, 0, 2, 3];
    for (let type = 0; type < 4; type++) {
      const c = command(Op.Q_IDENTIFY);
      c.writeUInt16LE(0, 2); // lif_type
      c[4] = type;
      c[5] = qver[type]!;
      const r = await this.devCmd(c, { readData: true });
      this.probeComps.set(`q_identify${type}`, r.comp);
      if (r.status === St.SUCCESS) { this.qIdentity[type] = r.data!; continue; }
      if (EINVAL_LIKE.has(r.status)) continue; // -EINVAL: skip the type
      break; // anything else: abandon the rest
    }
    const rssSize = this.lifIdentity.readUInt16LE(LifId.rss_ind_tbl_sz);
    if (rssSize === 0) throw new Error('probe: rss_ind_tbl_sz is 0 (RSS table allocation fails)');
    const aq: AdminQ = {
      ring: this.alloc(ADMINQ_LENGTH * 64), cq: this.alloc(ADMINQ_LENGTH * 16), head: 0, tail: 0, cqTail: 0, doneColor: 1,
      hwType: -1, hwIndex: -1, waiters: new Map(),
    };
    const nqBase = this.alloc(2 * PAGE);
    await this.intrClean(0);
    this.setMaskAssert(0, 1);
    this.alloc(rssSize);

    // 12. LIF_INIT, doorbell page, AdminQ through devcmd.
    this.lifInfoPa = this.alloc(PAGE);
    const linit = command(Op.LIF_INIT);
    linit[1] = 0;
    linit.writeUInt16LE(0, 2);
    putU64(linit, 8, this.lifInfoPa);
    const lr = await this.#devCmdOk('lif_init', linit);
    this.lifHwIndex = lr.comp.readUInt16LE(2);
    const ndbpgs = this.devIdentity.readUInt32LE(DevId.ndbpgs_per_lif);
    if (ndbpgs === 0) throw new Error('probe: No doorbell pages');
    this.dbPage = (this.lifHwIndex * ndbpgs + 0) * PAGE;
    if (this.dbPage + PAGE > this.bars[1]!.size) throw new Error('probe: doorbell page outside the doorbell BAR');

    const aqInit = this.#qInitCmd(QT.ADMINQ, this.qIdentity[QT.ADMINQ]?.[QId.version] ?? 0, 0, 0, QF.IRQ | QF.ENA, 4, aq.ring, aq.cq, 0);
    const ar = await this.#devCmdOk('q_init_adminq', aqInit);
    aq.hwIndex = ar.comp.readUInt32LE(4);
    aq.hwType = ar.comp[8]!;
    this.adminq = aq;
    this.setMask(0, 0);

    // From here on, the AdminQ.
    const nqInit = this.#qInitCmd(QT.NOTIFYQ, this.qIdentity[QT.NOTIFYQ]?.[QId.version] ?? 0, 0, 0, QF.IRQ | QF.ENA, 6, nqBase, 0, 0);
    const nr = await this.#adminOk('q_init_notifyq', nqInit);
    this.notifyq = { base: nqBase, events: nqBase + PAGE, lastEid: 0n, tail: 0, hwIndex: nr.comp.readUInt32LE(4), hwType: nr.comp[8]! };

    const fset = command(Op.LIF_SETATTR);
    fset[1] = Attr.FEATURES;
    putU64(fset, 4, DRIVER_FEATURES);
    const fr = await this.#adminOk('lif_setattr_features', fset);
    this.features = Number(BigInt(DRIVER_FEATURES) & fr.comp.readBigUInt64LE(4));
    if (this.features & Feature.RX_HASH) {
      const rss = command(Op.LIF_SETATTR);
      rss[1] = Attr.RSS;
      await this.#adminOk('lif_setattr_rss', rss);
    }

    this.mac = await this.getMac();
    if (this.mac.every((b) => b === 0)) {
      const mac = Buffer.from([0x02, 0x11, 0x22, 0x33, 0x44, 0x55]);
      const mset = command(Op.LIF_SETATTR);
      mset[1] = Attr.MAC;
      mac.copy(mset, 4);
      await this.#adminOk('lif_setattr_mac', mset);
      this.mac = await this.getMac();
    }
    this.macFilterId = await this.addMacFilter(this.mac);

    // 13. Register the netdev: link check from lif_info, then PORT_IDENTIFY and the name.
    const status = this.lifInfo();
    if (status.readUInt16LE(LifInfo.link_status) === 1) {
      await this.#portIdentify('port_identify_link');
      this.carrier = true;
    }
    const nset = command(Op.LIF_SETATTR);
    nset[1] = Attr.NAME;
    nset.write('eth0', 4, 'latin1');
    await this.#adminOk('lif_setattr_name', nset);

    await this.setRxMode(opts.rxMode ?? (RxMode.UNICAST | RxMode.MULTICAST | RxMode.BROADCAST));
  }

  async #lifIdentify(step: string): Promise<Buffer> {
    const c = command(Op.LIF_IDENTIFY);
    c[1] = 0; // CLASSIC
    c[2] = 1; // ver
    return (await this.#devCmdOk(step, c, { readData: true })).data!;
  }

  async #portIdentify(step: string): Promise<Buffer> {
    const c = command(Op.PORT_IDENTIFY);
    c[1] = 0;
    c[2] = 0;
    return (await this.#devCmdOk(step, c, { readData: true })).data!;
  }

  #qInitCmd(type: number, ver: number, index: number, intr: number, flags: number, ringLog2: number, ring: number, cq: number, sg: number): Buffer {
    const c = command(Op.Q_INIT);
    c.writeUInt16LE(0, 2); // lif_index
    c[4] = type;
    c[5] = ver;
    c.writeUInt32LE(index, 8);
    c.writeUInt16LE(0, 12); // pid
    c.writeUInt16LE(intr, 14);
    c.writeUInt16LE(flags, 16);
    c[18] = 0; // cos
    c[19] = ringLog2;
    putU64(c, 20, ring);
    putU64(c, 28, cq);
    putU64(c, 36, sg);
    return c;
  }

  /** Q_INIT through the admin queue with every field given (refusal tests). */
  qInit(f: { type: number; ver?: number; index: number; intr?: number; flags?: number; ringLog2: number; ring: number; cq?: number; sg?: number }): Promise<AdminCompletion> {
    return this.adminCmd(this.#qInitCmd(f.type, f.ver ?? 0, f.index, f.intr ?? 0, f.flags ?? QF.IRQ, f.ringLog2, f.ring, f.cq ?? 0, f.sg ?? 0));
  }

  async getMac(): Promise<Buffer> {
    const c = command(Op.LIF_GETATTR);
    c[1] = Attr.MAC;
    const r = await this.#adminOk('lif_getattr_mac', c);
    return Buffer.from(r.comp.subarray(4, 10));
  }

  async setRxMode(mode: number): Promise<void> {
    const c = command(Op.RX_MODE_SET);
    c.writeUInt16LE(mode, 4);
    await this.#adminOk('rx_mode_set', c);
  }

  /** RX_FILTER_ADD match MAC; returns the filter id. */
  async addMacFilter(mac: Buffer): Promise<number> {
    const c = command(Op.RX_FILTER_ADD);
    c[1] = QT.RXQ;
    c.writeUInt32LE(0, 4);
    c.writeUInt16LE(Match.MAC, 8);
    mac.copy(c, 10, 0, 6);
    const r = await this.#adminOk('rx_filter_add', c);
    return r.comp.readUInt32LE(4);
  }

  async delFilter(id: number): Promise<number> {
    const c = command(Op.RX_FILTER_DEL);
    c.writeUInt32LE(id, 4);
    return (await this.adminCmd(c)).status;
  }

  async qControl(type: number, index: number, oper: number): Promise<number> {
    const c = command(Op.Q_CONTROL);
    c[1] = type;
    c.writeUInt32LE(index, 4);
    c[8] = oper;
    return (await this.adminCmd(c)).status;
  }

  /** The lif_info block as the device last wrote it. */
  lifInfo(): Buffer {
    return this.mem(this.lifInfoPa, LifInfo.SIZE);
  }

  portInfo(): Buffer {
    return this.mem(this.portInfoPa, PortInfo.SIZE);
  }

  lifStat(name: LifStatName): number {
    return u64(this.lifInfo(), LifInfo.stats + LifStats[name]);
  }

  portStat(offset: number): number {
    return u64(this.portInfo(), offset);
  }

  // ---- open / data path ----------------------------------------------------------------------

  /** ionic_open with `n` queue pairs: Q_INIT TX and RX, fill RX, enable RX then TX, unmask. */
  async open(n: number, opts: OpenOptions = {}): Promise<void> {
    if (!this.adminq) throw new Error('open before probe');
    if (1 + n > this.nvec) throw new Error(`open: ${n} queue pairs need ${1 + n} vectors, the device has ${this.nvec}`);
    const txLog2 = opts.txRingLog2 ?? opts.ringLog2 ?? 6;
    const rxLog2 = opts.rxRingLog2 ?? opts.ringLog2 ?? 6;
    const devId = this.devIdentity;
    const mult = devId.readUInt32LE(DevId.intr_coal_mult);
    const div = devId.readUInt32LE(DevId.intr_coal_div);
    for (let i = 0; i < n; i++) {
      const v = 1 + i;
      await this.intrClean(v);
      this.setMaskAssert(v, 1);
      this.setCoalInit(v, div ? Math.round((64 * mult) / div) : 0);
    }
    const txId = this.qIdentity[QT.TXQ];
    const txVer = opts.txVersion ?? (txId ? txId[QId.version]! : 0);
    const sgDescSize = txVer >= 1 && txId && txId.readUInt16LE(QId.sg_desc_sz) === 256 ? 256 : 128;
    const mtu = opts.mtu ?? 1500;
    for (let i = 0; i < n; i++) {
      const v = 1 + i;
      const tsize = 1 << txLog2;
      const tx: TxQ = {
        index: i, intr: v, size: tsize, ring: this.alloc(tsize * 16), cq: this.alloc(tsize * 16), sg: this.alloc(tsize * sgDescSize),
        bufs: this.alloc(tsize * TX_SLOT_BYTES), sgDescSize, version: txVer,
        head: 0, tail: 0, cqTail: 0, doneColor: 1, hwType: -1, hwIndex: -1, waiters: new Map(), completed: 0,
      };
      const tr = await this.#adminOk(`q_init_tx${i}`, this.#qInitCmd(QT.TXQ, txVer, i, v, QF.IRQ | QF.SG, txLog2, tx.ring, tx.cq, tx.sg));
      tx.hwIndex = tr.comp.readUInt32LE(4);
      tx.hwType = tr.comp[8]!;
      this.txqs[i] = tx;

      const rsize = 1 << rxLog2;
      const rx: RxQ = {
        index: i, intr: v, size: rsize, ring: this.alloc(rsize * 16), cq: this.alloc(rsize * 16), sg: this.alloc(rsize * 128),
        head: 0, tail: 0, cqTail: 0, doneColor: 1, hwType: -1, hwIndex: -1, bufs: [], frameLen: mtu + 18,
        autoRefill: opts.autoRefill ?? true,
      };
      for (let s = 0; s < rsize; s++) rx.bufs.push(this.#rxBuffers(rx.frameLen));
      const rxVer = this.qIdentity[QT.RXQ]?.[QId.version] ?? 0;
      const rr = await this.#adminOk(`q_init_rx${i}`, this.#qInitCmd(QT.RXQ, rxVer, i, v, QF.IRQ | QF.SG, rxLog2, rx.ring, rx.cq, rx.sg));
      rx.hwIndex = rr.comp.readUInt32LE(4);
      rx.hwType = rr.comp[8]!;
      this.rxqs[i] = rx;
    }
    if (!this.carrier || opts.noEnable) return;
    for (let i = 0; i < n; i++) {
      const rx = this.rxqs[i]!;
      this.fillRx(i, opts.initialFill ?? rx.size - 1);
      await this.intrClean(1 + i);
      if (await this.qControl(QT.RXQ, i, QCtl.ENABLE) !== St.SUCCESS) throw new Error(`open: enable RX ${i} failed`);
      this.setMask(1 + i, 0);
      if (await this.qControl(QT.TXQ, i, QCtl.ENABLE) !== St.SUCCESS) throw new Error(`open: enable TX ${i} failed`);
    }
  }

  /** Buffers for one RX descriptor: the first up to a page, then page-sized SG pieces, none adjacent. */
  #rxBuffers(frameLen: number): RxBuf[] {
    const first = Math.min(frameLen, PAGE);
    const out: RxBuf[] = [{ iova: this.alloc(first, 64), len: first }];
    for (let left = frameLen - first; left > 0; left -= PAGE) {
      this.alloc(64, 64); // a gap: a device that writes past a piece hits the wrong bytes
      out.push({ iova: this.alloc(Math.min(left, PAGE), 64), len: Math.min(left, PAGE) });
    }
    return out;
  }

  /** Post `count` RX buffers (never more than size - 1 outstanding) and ring once. */
  fillRx(queue: number, count: number): number {
    const q = this.rxqs[queue]!;
    let posted = 0;
    while (posted < count && (q.head + 1) % q.size !== q.tail) {
      const slot = q.head;
      const bufs = q.bufs[slot]!;
      const d = this.mem(q.ring + slot * 16, 16);
      d.fill(0);
      d[0] = bufs.length > 1 ? 1 : 0; // SG : SIMPLE
      d.writeUInt16LE(bufs[0]!.len, 6);
      putU64(d, 8, bufs[0]!.iova);
      const sg = this.mem(q.sg + slot * 128, 128);
      sg.fill(0);
      for (let e = 1; e < bufs.length && e <= 8; e++) {
        putU64(sg, (e - 1) * 16, bufs[e]!.iova);
        sg.writeUInt16LE(bufs[e]!.len, (e - 1) * 16 + 8);
      }
      for (const b of bufs) this.mem(b.iova, b.len).fill(0xee);
      q.head = (q.head + 1) % q.size;
      posted++;
    }
    if (posted > 0) this.ringDoorbell(q.hwType, q.hwIndex, q.head);
    return posted;
  }

  #refill(q: RxQ, force: boolean): void {
    const free = (q.tail - q.head - 1 + q.size) % q.size;
    if (force || free >= Math.min(RX_FILL_THRESHOLD, q.size / 8)) this.fillRx(q.index, free);
  }

  /** Buffers the device may still fill on an RX queue. */
  rxPosted(queue: number): number {
    const q = this.rxqs[queue]!;
    return (q.head - q.tail + q.size) % q.size;
  }

  #serviceRx(q: RxQ): number {
    let work = 0;
    for (;;) {
      const e = this.mem(q.cq + q.cqTail * 16, 16);
      const color = e[15]! & COLOR ? 1 : 0;
      if (color !== q.doneColor) break;
      const ci = e.readUInt16LE(2);
      if (q.tail === q.head) {
        this.violations.push(`RX ${q.index}: completion at CQ ${q.cqTail} for an empty queue`);
        break;
      }
      if (ci !== q.tail) {
        this.violations.push(`RX ${q.index}: comp_index ${ci} but the queue tail is ${q.tail}`);
        break;
      }
      const status = e[0]!;
      const numSg = e[1]!;
      const len = e.readUInt16LE(12);
      const bufs = q.bufs[q.tail]!;
      const room = bufs.reduce((s, b) => s + b.len, 0);
      let data: Buffer = Buffer.alloc(0);
      if (status === 0) {
        if (len > room) this.violations.push(`RX ${q.index}: length ${len} is past the ${room} bytes posted`);
        if (numSg > bufs.length - 1) this.violations.push(`RX ${q.index}: num_sg_elems ${numSg} but ${bufs.length - 1} posted`);
        const parts: Buffer[] = [];
        let left = Math.min(len, room);
        for (const b of bufs) {
          if (left <= 0) break;
          const n = Math.min(left, b.len);
          parts.push(Buffer.from(this.mem(b.iova, n)));
          left -= n;
        }
        data = Buffer.concat(parts);
      }
      this.rxFrames.push({
        queue: q.index, index: ci, status, len, numSg, rssHash: e.readUInt32LE(4), pktType: e[15]! & 0x7f, data,
      });
      q.tail = (q.tail + 1) % q.size;
      q.cqTail = (q.cqTail + 1) % q.size;
      if (q.cqTail === 0) q.doneColor ^= 1;
      work++;
    }
    return work;
  }

  #serviceTx(q: TxQ): number {
    let work = 0;
    for (;;) {
      const e = this.mem(q.cq + q.cqTail * 16, 16);
      const color = e[15]! & COLOR ? 1 : 0;
      if (color !== q.doneColor) break;
      const ci = e.readUInt16LE(2);
      const outstanding = (q.head - q.tail + q.size) % q.size;
      if (ci >= q.size || (ci - q.tail + q.size) % q.size >= outstanding) {
        this.violations.push(`TX ${q.index}: comp_index ${ci} is not outstanding (tail ${q.tail}, head ${q.head})`);
        break;
      }
      for (;;) {
        const slot = q.tail;
        q.tail = (q.tail + 1) % q.size;
        q.completed++;
        const w = q.waiters.get(slot);
        q.waiters.delete(slot);
        w?.({ status: e[0]!, slot });
        if (slot === ci) break;
      }
      q.cqTail = (q.cqTail + 1) % q.size;
      if (q.cqTail === 0) q.doneColor ^= 1;
      work++;
    }
    return work;
  }

  /**
   * Post a frame on a TX queue; resolves with its completion. Pieces other
   * than the first go in SG elements, laid out backwards in the slot's buffer
   * with gaps, so a device that ignores the SG addresses sends wrong bytes.
   */
  postFrame(frame: Buffer, opts: SendOptions = {}): { slot: number; done: Promise<TxCompletion> } {
    const q = this.txqs[opts.queue ?? 0];
    if (!q) throw new Error(`no TX queue ${opts.queue ?? 0}`);
    if ((q.head + 1) % q.size === q.tail) throw new Error(`TX ${q.index} ring full`);
    const pieces = opts.pieces ?? [frame.length];
    if (pieces.reduce((a, b) => a + b, 0) !== frame.length) throw new Error('pieces do not add up to the frame');
    const slot = q.head;
    const slotBase = q.bufs + slot * TX_SLOT_BYTES;
    const addrs: number[] = [];
    let end = TX_SLOT_BYTES;
    let off = 0;
    for (const len of pieces) {
      end -= len + TX_PIECE_GAP;
      if (end < 0) throw new Error('frame too large for a TX slot');
      addrs.push(slotBase + end);
      frame.copy(this.mem(slotBase + end, len), 0, off, off + len);
      off += len;
    }
    const sg = Buffer.alloc(q.sgDescSize);
    for (let i = 1; i < pieces.length; i++) {
      putU64(sg, (i - 1) * 16, addrs[i]!);
      sg.writeUInt16LE(pieces[i]!, (i - 1) * 16 + 8);
    }
    this.#writeTxDesc(q, slot, txCmd(TxOp.CSUM_NONE, 0, pieces.length - 1, addrs[0]!), pieces[0]!, sg);
    return { slot, done: this.#queueTx(q, slot, opts.ring ?? true) };
  }

  sendFrame(frame: Buffer, opts: SendOptions = {}): Promise<TxCompletion> {
    return this.postFrame(frame, opts).done;
  }

  /** Post a hand-made TX descriptor (and SG list) for bad-input tests. */
  postTxRaw(queue: number, desc: Buffer, sg?: Buffer): { slot: number; done: Promise<TxCompletion> } {
    const q = this.txqs[queue]!;
    const slot = q.head;
    desc.copy(this.mem(q.ring + slot * 16, 16));
    if (sg) sg.copy(this.mem(q.sg + slot * q.sgDescSize, Math.min(sg.length, q.sgDescSize)));
    return { slot, done: this.#queueTx(q, slot, true) };
  }

  /** Where the TX buffer of a slot lives (for hand-made descriptors). */
  txSlotBuffer(queue: number, slot: number): number {
    return this.txqs[queue]!.bufs + slot * TX_SLOT_BYTES;
  }

  #writeTxDesc(q: TxQ, slot: number, cmd: bigint, len: number, sg: Buffer): void {
    const d = this.mem(q.ring + slot * 16, 16);
    d.fill(0);
    d.writeBigUInt64LE(cmd, 0);
    d.writeUInt16LE(len, 8);
    sg.copy(this.mem(q.sg + slot * q.sgDescSize, q.sgDescSize));
  }

  #queueTx(q: TxQ, slot: number, ring: boolean): Promise<TxCompletion> {
    q.head = (q.head + 1) % q.size;
    const p = new Promise<TxCompletion>((resolve, reject) => {
      const timer = setTimeout(() => {
        q.waiters.delete(slot);
        reject(new Error(`TX ${q.index} slot ${slot}: no completion`));
      }, this.timeoutMs);
      timer.unref();
      q.waiters.set(slot, (c) => { clearTimeout(timer); resolve(c); });
    });
    p.catch(() => { /* a caller that never awaits must not see an unhandled rejection */ });
    if (ring) this.ringDoorbell(q.hwType, q.hwIndex, q.head);
    return p;
  }

  /** Ring a TX queue's doorbell with its current head (after batched posts). */
  kickTx(queue = 0): void {
    const q = this.txqs[queue]!;
    this.ringDoorbell(q.hwType, q.hwIndex, q.head);
  }

  /** TX descriptors completed so far on a queue. */
  txCompleted(queue = 0): number {
    return this.txqs[queue]!.completed;
  }

  /** Resolve with the next received frame that matches (taking it from `rxFrames`). */
  waitRxFrame(opts: { queue?: number; match?: (f: RxFrame) => boolean; timeoutMs?: number } = {}): Promise<RxFrame> {
    const pick = (): RxFrame | undefined => {
      const i = this.rxFrames.findIndex((f) => (opts.queue === undefined || f.queue === opts.queue) && (!opts.match || opts.match(f)));
      return i < 0 ? undefined : this.rxFrames.splice(i, 1)[0];
    };
    return this.waitFor('an RX frame', pick, opts.timeoutMs);
  }

  /** Take every frame received so far. */
  takeRx(): RxFrame[] {
    return this.rxFrames.splice(0, this.rxFrames.length);
  }

  // ---- teardown ------------------------------------------------------------------------------

  /** ionic_stop + ionic_remove: disable TX then RX (masking RX vectors), quiesce, LIF_RESET, PORT_RESET, RESET. */
  async remove(): Promise<void> {
    for (const q of this.txqs) if (q) await this.qControl(QT.TXQ, q.index, QCtl.DISABLE);
    for (const q of this.rxqs) {
      if (!q) continue;
      this.setMask(q.intr, 1);
      await this.qControl(QT.RXQ, q.index, QCtl.DISABLE);
    }
    const st = command(Op.LIF_SETATTR);
    st[1] = Attr.STATE;
    st[4] = 0; // QUIESCE
    await this.adminCmd(st);
    const lr = command(Op.LIF_RESET);
    lr.writeUInt16LE(0, 2);
    await this.devCmd(lr);
    this.adminq = null;
    this.notifyq = null;
    this.txqs.length = 0;
    this.rxqs.length = 0;
    await this.devCmd(command(Op.PORT_RESET));
    await this.devCmd(command(Op.RESET));
  }

  /** The driver's remove, then disconnect. */
  async close(): Promise<void> {
    if (this.adminq) await this.remove();
    this.dispose();
  }

  /** Close the connection and free every fd and mapping (no driver teardown: like a VM that went away). */
  dispose(): void {
    if (this.#closed) return;
    this.#closed = true;
    for (const w of this.#watchers) w.close();
    this.#watchers.length = 0;
    this.client.close();
    for (const fd of this.#irqFds) { try { fs.closeSync(fd); } catch { /* closed */ } }
    this.#irqFds.length = 0;
    this.ram.close();
    for (const w of [...this.#wakers]) this.#wakers.delete(w);
  }
}

/** cmd = flags (bits 0..3) | opcode (4..7) | nsge (8..11) | address (12..63). */
export function txCmd(opcode: number, flags: number, nsge: number, addr: number): bigint {
  return BigInt(flags & 0xf) | (BigInt(opcode & 0xf) << 4n) | (BigInt(nsge & 0xf) << 8n) | ((BigInt(addr) & ((1n << 52n) - 1n)) << 12n);
}

/** A raw 16-byte TX descriptor. */
export function txDesc(opcode: number, nsge: number, addr: number, len: number): Buffer {
  const d = Buffer.alloc(16);
  d.writeBigUInt64LE(txCmd(opcode, 0, nsge, addr), 0);
  d.writeUInt16LE(len & 0xffff, 8);
  return d;
}
