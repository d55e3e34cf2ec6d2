// Interrupt eventfds the client wired with SET_IRQS, per vfio irq index.
// Signalling a vector is an 8-byte write of the value 1 to its eventfd.

import * as fs from 'fs';

/** The 8-byte little-endian 1 written to an eventfd to signal it. Never modified. */
const ONE = Buffer.from([1, 0, 0, 0, 0, 0, 0, 0]);

export class IrqTable {
  /** fds[index][subindex] = eventfd or -1. */
  readonly #fds: Int32Array[];
  /** Signals that failed (an fd the client closed on its side cannot fail, but a bad one can). */
  failures = 0;

  constructor(counts: readonly number[]) {
    this.#fds = counts.map((n) => new Int32Array(n).fill(-1));
  }

  count(index: number): number {
    return this.#fds[index]?.length ?? 0;
  }

  fd(index: number, sub: number): number {
    const a = this.#fds[index];
    return a && sub >= 0 && sub < a.length ? a[sub]! : -1;
  }

  /** Install fds for [start, start + fds.length); replaced fds are closed. The caller validated the range. */
  assign(index: number, start: number, fds: readonly number[]): void {
    const a = this.#fds[index]!;
    for (let i = 0; i < fds.length; i++) {
      const old = a[start + i]!;
      if (old >= 0 && old !== fds[i]) closeQuietly(old);
      a[start + i] = fds[i]!;
    }
  }

  /** Remove (and close) the fds of [start, start + count). */
  unassign(index: number, start: number, count: number): void {
    const a = this.#fds[index]!;
    for (let i = start; i < start + count; i++) {
      if (a[i]! >= 0) closeQuietly(a[i]!);
      a[i] = -1;
    }
  }

  /** Close every fd (disconnect). */
  clear(): void {
    for (let index = 0; index < this.#fds.length; index++) this.unassign(index, 0, this.#fds[index]!.length);
  }

  /** Signal one interrupt. False when nothing is wired to it or the write failed. */
  signal(index: number, sub: number): boolean {
    const fd = this.fd(index, sub);
    if (fd < 0) return false;
    try {
      fs.writeSync(fd, ONE, 0, 8);
      return true;
    } catch {
      this.failures++;
      return false;
    }
  }

  /** Number of wired fds (for tests and stats). */
  wiredCount(): number {
    let n = 0;
    for (const a of this.#fds) for (const fd of a) if (fd >= 0) n++;
    return n;
  }
}

/**
 * Whether `fd` is an eventfd. Signalling writes 8 bytes on the event loop: an
 * eventfd never blocks that write (short of 2^64 - 1 unread signals), while a
 * pipe, FIFO or socket a client passes instead could block it for ever.
 */
export function isEventfd(fd: number): boolean {
  try {
    return fs.readlinkSync(`/proc/self/fd/${fd}`) === 'anon_inode:[eventfd]';
  } catch {
    return false;
  }
}

export function closeQuietly(fd: number): void {
  try {
    fs.closeSync(fd);
  } catch {
    /* already closed or never valid: nothing to release */
  }
}
