// Test credentials for the mesh's TLS specs, made at test time: pre-shared
// key files, and with openssl (Node 20 cannot issue X.509 certificates) two
// CAs, "mesh" and "other", with node certificates signed by each. Also a
// rocm-ernic server in a process of its own, with its output kept.

import { ChildProcess, execFileSync, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import * as fs from 'node:fs';
import * as net from 'node:net';
import * as os from 'node:os';
import * as path from 'node:path';
import { loadMeshCredentials, MeshCredentials } from '../../lib/mesh/tls';

export const BIN = path.join(__dirname, '..', '..', 'bin', 'rocm-ernic.js');

export interface TestPki {
  readonly dir: string;
  /** Two different keys, mode 0600. */
  readonly psk1: string;
  readonly psk2: string;
  /** The mesh's CA and two nodes it signed. */
  readonly ca: string;
  readonly nodeA: { cert: string; key: string };
  readonly nodeB: { cert: string; key: string };
  /** Another CA and a node it signed. */
  readonly otherCa: string;
  readonly stranger: { cert: string; key: string };
  remove(): void;
}

function openssl(args: string[], cwd: string): void {
  execFileSync('openssl', args, { cwd, stdio: ['ignore', 'ignore', 'pipe'] });
}

function makeCa(dir: string, name: string): { cert: string; key: string } {
  const key = path.join(dir, `${name}-ca.key`);
  const cert = path.join(dir, `${name}-ca.pem`);
  openssl(
    [
      'req',
      '-x509',
      '-newkey',
      'ec',
      '-pkeyopt',
      'ec_paramgen_curve:P-256',
      '-nodes',
      '-keyout',
      key,
      '-out',
      cert,
      '-days',
      '2',
      '-subj',
      `/CN=${name} mesh CA`,
    ],
    dir,
  );
  return { cert, key };
}

function makeNode(dir: string, name: string, ca: { cert: string; key: string }): { cert: string; key: string } {
  const key = path.join(dir, `${name}.key`);
  const csr = path.join(dir, `${name}.csr`);
  const cert = path.join(dir, `${name}.pem`);
  openssl(
    [
      'req',
      '-newkey',
      'ec',
      '-pkeyopt',
      'ec_paramgen_curve:P-256',
      '-nodes',
      '-keyout',
      key,
      '-out',
      csr,
      '-subj',
      `/CN=${name}`,
    ],
    dir,
  );
  openssl(
    ['x509', '-req', '-in', csr, '-CA', ca.cert, '-CAkey', ca.key, '-CAcreateserial', '-out', cert, '-days', '2'],
    dir,
  );
  fs.chmodSync(key, 0o600);
  return { cert, key };
}

export function writeKeyFile(file: string, bytes: Buffer, mode = 0o600): string {
  fs.writeFileSync(file, bytes, { mode });
  fs.chmodSync(file, mode);
  return file;
}

/** Keys and certificates in a fresh directory (remove() deletes it). */
export function makeTestPki(): TestPki {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ernic-mesh-tls-'));
  const mesh = makeCa(dir, 'mesh');
  const other = makeCa(dir, 'other');
  return {
    dir,
    psk1: writeKeyFile(path.join(dir, 'one.psk'), randomBytes(32)),
    psk2: writeKeyFile(path.join(dir, 'two.psk'), randomBytes(32)),
    ca: mesh.cert,
    nodeA: makeNode(dir, 'node-a', mesh),
    nodeB: makeNode(dir, 'node-b', mesh),
    otherCa: other.cert,
    stranger: makeNode(dir, 'stranger', other),
    remove: () => fs.rmSync(dir, { recursive: true, force: true }),
  };
}

/** Credentials as the CLI would load them; throws on a refusal. */
export function creds(files: { psk?: string; cert?: string; key?: string; ca?: string }): MeshCredentials {
  const r = loadMeshCredentials(files, {});
  if (!r.ok) throw new Error(r.error);
  if (!r.value) throw new Error('no credentials');
  return r.value;
}

/** A TCP port free on loopback right now. */
export function freePort(host = '127.0.0.1'): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.once('error', reject);
    s.listen(0, host, () => {
      const port = (s.address() as net.AddressInfo).port;
      s.close(() => resolve(port));
    });
  });
}

/** A rocm-ernic server in its own process (optionally inside a network namespace), its output kept. */
export class ServerProcess {
  readonly proc: ChildProcess;
  #out = '';
  readonly #waiters: (() => void)[] = [];

  constructor(args: readonly string[], opts: { netns?: string; env?: NodeJS.ProcessEnv } = {}) {
    const argv = [BIN, ...args];
    this.proc = opts.netns
      ? spawn('ip', ['netns', 'exec', opts.netns, process.execPath, ...argv], {
          stdio: ['ignore', 'pipe', 'pipe'],
          env: opts.env ?? process.env,
        })
      : spawn(process.execPath, argv, { stdio: ['ignore', 'pipe', 'pipe'], env: opts.env ?? process.env });
    const take = (d: Buffer): void => {
      this.#out += d.toString();
      for (const w of this.#waiters.splice(0)) w();
    };
    this.proc.stdout!.on('data', take);
    this.proc.stderr!.on('data', take);
    this.proc.on('exit', () => {
      for (const w of this.#waiters.splice(0)) w();
    });
  }

  get output(): string {
    return this.#out;
  }

  get exited(): boolean {
    return this.proc.exitCode !== null || this.proc.signalCode !== null;
  }

  /** Resolves once the output matches `re` (rejects if the process ends first, or after `ms` as a hang guard). */
  async waitFor(re: RegExp, ms = 20_000): Promise<RegExpExecArray> {
    const deadline = Date.now() + ms;
    for (;;) {
      const m = re.exec(this.#out);
      if (m) return m;
      if (this.exited)
        throw new Error(
          `server exited (${this.proc.exitCode ?? this.proc.signalCode}) before ${re}: ${this.#out.trim()}`,
        );
      const left = deadline - Date.now();
      if (left <= 0) throw new Error(`timed out waiting for ${re} in: ${this.#out.trim()}`);
      await new Promise<void>((resolve) => {
        const t = setTimeout(resolve, left);
        this.#waiters.push(() => {
          clearTimeout(t);
          resolve();
        });
      });
    }
  }

  /** SIGTERM, then SIGKILL if it has not gone in 5 s. */
  stop(): Promise<void> {
    if (this.exited) return Promise.resolve();
    return new Promise((resolve) => {
      const t = setTimeout(() => this.proc.kill('SIGKILL'), 5000);
      this.proc.once('exit', () => {
        clearTimeout(t);
        resolve();
      });
      this.proc.kill('SIGTERM');
    });
  }

  /** Exit status (waits for the exit). */
  exitCode(): Promise<number | null> {
    if (this.exited) return Promise.resolve(this.proc.exitCode);
    return new Promise((resolve) => this.proc.once('exit', (code) => resolve(code)));
  }
}
