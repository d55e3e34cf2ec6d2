// Helpers to prove fds are never leaked: count this process's open fds.
import * as fs from 'fs';

export function openFdCount(): number {
  return fs.readdirSync('/proc/self/fd').length;
}

/** Resolve after the event loop has had `turns` chances to run I/O callbacks. */
export async function settle(turns = 5): Promise<void> {
  for (let i = 0; i < turns; i++) await new Promise((r) => setImmediate(r));
  await new Promise((r) => setTimeout(r, 5));
}

/** Poll `cond` every millisecond until it holds; throws after `timeoutMs`. */
export async function until(cond: () => boolean, what: string, timeoutMs = 3000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!cond()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 1));
  }
}

export function tempSocketPath(tag: string): string {
  return `/tmp/ernic-test-${process.pid}-${tag}-${Math.random().toString(36).slice(2, 8)}.sock`;
}
