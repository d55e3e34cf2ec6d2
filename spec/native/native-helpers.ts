// Helpers shared by the native addon specs (spec/native/native-*.spec.ts):
// fd and mapping counts, native error checks, watcher events, and the
// per-suite scratch directory and fd leak check.

import { expect } from 'chai';
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import * as native from '../../lib/native';
import { isNativeError } from '../../lib/native';

export const PAGE = 4096;

function fdCount(): number {
  return fs.readdirSync('/proc/self/fd').length;
}

export function mapsCount(): number {
  return fs.readFileSync('/proc/self/maps', 'utf8').split('\n').length;
}

export function closeAll(...fds: number[]): void {
  for (const fd of fds) fs.closeSync(fd);
}

/** Runs fn and returns what it threw (fails if it did not throw). */
export function thrown(fn: () => unknown): unknown {
  try {
    fn();
  } catch (e) {
    return e;
  }
  throw new Error('expected an exception');
}

export function expectNative(fn: () => unknown, code: string, syscall?: string): void {
  const e = thrown(fn);
  expect(isNativeError(e), String(e)).to.equal(true);
  if (!isNativeError(e)) return;
  expect(e.code).to.equal(code);
  expect(e.errno).to.be.a('number').greaterThan(0);
  if (syscall !== undefined) expect(e.syscall).to.equal(syscall);
  expect(e.message.startsWith(`${e.syscall}: `), e.message).to.equal(true);
}

export function fsCode(fn: () => unknown): string | undefined {
  const e = thrown(fn) as NodeJS.ErrnoException;
  return e.code;
}

export function delay(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

interface PollEvent {
  status: number;
  events: number;
}

/** Resolves with the first callback of a fresh watcher (closed afterwards). */
export function nextEvent(fd: number, events: number, timeoutMs = 2000): Promise<PollEvent> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      w.close();
      reject(new Error('watch callback not called'));
    }, timeoutMs);
    const w = native.watch(fd, events, function (status, ev) {
      clearTimeout(timer);
      this.close();
      resolve({ status, events: ev });
    });
  });
}

/**
 * The hooks every native suite runs under: a scratch directory (`dir`, removed
 * afterwards) and a leak check: a passing test closes every fd it opened.
 */
export function useNativeSuite(): { readonly dir: string } {
  const scratch = { dir: '' };
  let startFds: number;
  before(() => {
    scratch.dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ernic-native-'));
  });
  after(() => {
    fs.rmSync(scratch.dir, { recursive: true, force: true });
  });
  beforeEach(() => {
    startFds = fdCount();
  });
  afterEach(function () {
    // Every test closes what it opens: nothing may leak.
    if (this.currentTest?.state === 'passed') expect(fdCount()).to.equal(startFds);
  });
  return scratch;
}
