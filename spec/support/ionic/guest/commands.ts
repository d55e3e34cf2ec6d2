// Commands as the driver issues them: device commands through the BAR0
// register window (ionic_dev_cmd_go + ionic_dev_cmd_wait: write, ring, poll
// `done`), admin commands on the admin queue with interrupt-driven
// completions checked by color and comp_index, and notify queue events by eid.

import { GuestInterrupts } from './interrupts';
import type { AdminCompletion, AdminQ, DevCmdResult, NotifyQ } from './types';
import { ADMINQ_LENGTH, Bar0, COLOR, FW_RUNNING, NOTIFYQ_LENGTH, Region, St } from '../regs';

/** Device commands (BAR0 register window) and the admin and notify queues. */
export abstract class GuestCommands extends GuestInterrupts {
  /** Admin completions consumed, in order. */
  readonly adminLog: AdminCompletion[] = [];
  /** Completions kept from probe, by step name. */
  readonly probeComps = new Map<string, Buffer>();
  adminq: AdminQ | null = null;
  notifyq: NotifyQ | null = null;
  readonly notifyEvents: Buffer[] = [];

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
    for (let i = 0; i < Bar0.CMD_LEN; i += 8)
      this.client.postRegionWrite(Region.BAR0, Bar0.CMD + i, cmd.subarray(i, i + 8));
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

  protected async devCmdOk(
    step: string,
    cmd: Buffer,
    opts: { data?: Buffer; readData?: boolean } = {},
  ): Promise<DevCmdResult> {
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
      q.waiters.set(slot, {
        resolve: (c) => {
          clearTimeout(timer);
          resolve(c);
        },
      });
    });
    p.catch(() => {
      /* a caller that never awaits must not see an unhandled rejection */
    });
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
      all.push(
        new Promise<AdminCompletion>((resolve, reject) => {
          const timer = setTimeout(() => {
            q.waiters.delete(slot);
            reject(new Error(`admin command ${cmd[0]} (slot ${slot}) timed out`));
          }, timeoutMs);
          timer.unref();
          q.waiters.set(slot, {
            resolve: (c) => {
              clearTimeout(timer);
              resolve(c);
            },
          });
        }),
      );
    }
    this.ringDoorbell(q.hwType, q.hwIndex, q.head);
    return Promise.all(all);
  }

  protected async adminOk(step: string, cmd: Buffer): Promise<AdminCompletion> {
    const c = await this.adminCmd(cmd);
    if (c.status !== St.SUCCESS) throw new Error(`${step}: admin status ${c.status}`);
    this.probeComps.set(step, c.comp);
    return c;
  }

  protected serviceAdmin(): number {
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
      if (
        q.tail === q.head ||
        (ci - q.tail + ADMINQ_LENGTH) % ADMINQ_LENGTH >= (q.head - q.tail + ADMINQ_LENGTH) % ADMINQ_LENGTH
      ) {
        this.violations.push(
          `admin CQ ${q.cqTail}: comp_index ${ci} is not outstanding (tail ${q.tail}, head ${q.head})`,
        );
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

  protected serviceNotify(): number {
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
}
