// Interrupts as ionic.ko takes them: an eventfd per MSI-X vector, watched
// with native.watch; the callback drains it and runs that vector's poll
// ("NAPI"), then wakes waiting callers. Masks, credits and coalescing go
// through the per-vector interrupt control registers.

import * as fs from 'fs';
import * as native from '../../../../lib/native';
import { GuestBus } from './bus';
import type { VectorMode } from './types';
import { Bar0, Cfg, CRED_RESET_COALESCE, CRED_UNMASK, IRQ_INDEX_MSIX } from '../regs';

/** One eventfd per MSI-X vector, the interrupt control registers, and waiting on what the vectors' polls find. */
export abstract class GuestInterrupts extends GuestBus {
  readonly #irqFds: number[] = [];
  readonly #watchers: native.Watcher[] = [];
  /** Interrupts seen per vector (sum of eventfd counter values). */
  readonly #irqs: number[] = [];
  readonly #mode: VectorMode[] = [];
  readonly #wakers = new Set<() => void>();
  #closed = false;

  protected async wireMsix(): Promise<void> {
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
      this.#watchers.push(
        native.watch(this.#irqFds[v]!, native.READABLE, function onVector() {
          self.#onIrq(v);
        }),
      );
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
    this.wake();
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
    this.bar0Write32(
      this.intrReg(v, Bar0.CREDITS),
      (n & 0xffff) | (unmask ? CRED_UNMASK : 0) | (resetCoalesce ? CRED_RESET_COALESCE : 0),
    );
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
  /** The poll for a vector (the queues it serves are the driver's: see IonicGuest.napi). */
  abstract napi(v: number, opts?: { unmask?: boolean }): number;

  protected wake(): void {
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

  /** Close the connection and free every fd and mapping (no driver teardown: like a VM that went away). */
  dispose(): void {
    if (this.#closed) return;
    this.#closed = true;
    for (const w of this.#watchers) w.close();
    this.#watchers.length = 0;
    this.client.close();
    for (const fd of this.#irqFds) {
      try {
        fs.closeSync(fd);
      } catch {
        /* closed */
      }
    }
    this.#irqFds.length = 0;
    this.ram.close();
    for (const w of [...this.#wakers]) this.#wakers.delete(w);
  }
}
