// Guest memory that shrinks under us. DMA_MAP hands us an fd and we map it;
// QEMU's memfd backend seals it against shrinking, but an unsealed memfd or a
// file backend can be truncated by the client at any time, and our next
// access of a page past the new end raises SIGBUS, which would end the
// process. The native helper's guard turns such a fault into zero pages and
// a count (lib/native, busGuard); this module tells the session that owns
// the faulting mapping, which then closes the client: its guest memory can no
// longer be trusted. The eventfd is watched only while some session listens,
// so an idle process keeps no handle alive.

import * as fs from 'fs';
import * as native from '../native';

type BusFaultListener = (address: number) => void;

const listeners = new Set<BusFaultListener>();
const status = new Float64Array(2);
const drain = Buffer.alloc(8);
let notifyFd = -1;
let watcher: native.Watcher | null = null;
let seen = 0;

/** Install the guard (idempotent). Mappings made before this are covered too. */
function installBusGuard(): void {
  native.busGuard(-1, status);
  seen = Math.max(seen, status[0]!);
}

/** Call `fn(address)` when a guarded access faults; returns the unsubscribe function. */
export function onBusFault(fn: BusFaultListener): () => void {
  installBusGuard();
  listeners.add(fn);
  if (!watcher) start();
  return () => {
    listeners.delete(fn);
    if (listeners.size === 0) stop();
  };
}

function start(): void {
  notifyFd = native.eventfd(0, true);
  native.busGuard(notifyFd, status);
  seen = Math.max(seen, status[0]!);
  watcher = native.watch(notifyFd, native.READABLE, onNotify);
}

function stop(): void {
  if (!watcher) return;
  native.busGuard(-1, status);
  watcher.close();
  watcher = null;
  try {
    fs.closeSync(notifyFd);
  } catch {
    /* already closed */
  }
  notifyFd = -1;
}

function onNotify(): void {
  try {
    fs.readSync(notifyFd, drain, 0, 8, null);
  } catch {
    /* EAGAIN: already drained */
  }
  native.busGuardStatus(status);
  if (status[0]! <= seen) return;
  seen = status[0]!;
  const address = status[1]!;
  // Listeners contain their own bugs (the session runs its handler through lib/guard).
  for (const fn of [...listeners]) fn(address);
}
