// A rocm-ernic server in its own process for a benchmark: started from
// dist/bin with the given options, ready once its socket exists and its log
// matches every `ready` pattern (within `timeoutMs`), stopped with a signal
// and SIGKILL if it has not gone 10 s later.

import { ChildProcess, spawn } from 'child_process';
import * as fs from 'fs';
import * as path from 'path';

const BIN = path.join(__dirname, '..', '..', 'bin', 'rocm-ernic.js');

export interface ServerProcess {
  readonly proc: ChildProcess;
  /** Everything it printed so far (stdout and stderr). */
  log(): string;
}

interface ServerStart {
  readonly sock: string;
  /** rocm-ernic options after `-s SOCK`. */
  readonly args: readonly string[];
  /** Another build's bin/rocm-ernic.js (default: this one's). */
  readonly bin?: string;
  /** node flags before the script (profiling and the like). */
  readonly nodeFlags?: readonly string[];
  readonly env?: NodeJS.ProcessEnv;
  /** Log patterns that must all have appeared (default: the "serving" line). */
  readonly ready?: readonly RegExp[];
  readonly timeoutMs?: number;
  /** Prefix of the error messages. */
  readonly name?: string;
}

export function startServerProcess(o: ServerStart): Promise<ServerProcess> {
  const proc = spawn(process.execPath, [...(o.nodeFlags ?? []), o.bin ?? BIN, '-s', o.sock, ...o.args], {
    stdio: ['ignore', 'pipe', 'pipe'],
    ...(o.env ? { env: o.env } : {}),
  });
  let text = '';
  proc.stdout!.on('data', (d: Buffer) => {
    text += d.toString();
  });
  proc.stderr!.on('data', (d: Buffer) => {
    text += d.toString();
  });
  const ready = o.ready ?? [/serving/];
  const timeoutMs = o.timeoutMs ?? 10000;
  const who = o.name ? `${o.name}: ` : '';
  return new Promise((resolve, reject) => {
    const t0 = Date.now();
    const check = (): void => {
      if (proc.exitCode !== null || proc.signalCode !== null) {
        reject(new Error(`${who}server exited (${proc.exitCode ?? proc.signalCode}): ${text.trim()}`));
        return;
      }
      if (fs.existsSync(o.sock) && ready.every((re) => re.test(text))) {
        resolve({ proc, log: () => text });
        return;
      }
      if (Date.now() - t0 > timeoutMs) {
        reject(new Error(`${who}server not ready after ${timeoutMs / 1000} s: ${text.trim()}`));
        return;
      }
      setTimeout(check, 20);
    };
    check();
  });
}

/** Signal `proc` and wait for it to exit (SIGKILL after 10 s). */
export function stopProcess(proc: ChildProcess, signal: NodeJS.Signals = 'SIGTERM'): Promise<void> {
  if (proc.exitCode !== null || proc.signalCode !== null) return Promise.resolve();
  return new Promise((resolve) => {
    const t = setTimeout(() => {
      proc.kill('SIGKILL');
    }, 10000);
    proc.once('exit', () => {
      clearTimeout(t);
      resolve();
    });
    proc.kill(signal);
  });
}
