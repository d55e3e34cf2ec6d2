// The processes of the mesh benchmark (bench/mesh.ts): the two rocm-ernic
// servers and the raw TCP/TLS peer (mesh-raw.ts), tracked so that none
// outlives the benchmark and no socket file stays behind.

import { ChildProcess, spawn } from 'child_process';
import * as fs from 'fs';
import * as path from 'path';
import { startServerProcess, stopProcess } from './support/server-process';

const children = new Set<ChildProcess>();
const sockets = new Set<string>();

/** A child to kill and a file to remove on any exit (cleanupSync). */
export function trackChild(c: ChildProcess): void {
  children.add(c);
}

export function untrackChild(c: ChildProcess): void {
  children.delete(c);
}

export function trackFile(file: string): void {
  sockets.add(file);
}

/** Last resort on any exit: no server or peer outlives the benchmark, no socket file stays. */
export function cleanupSync(): void {
  for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
  for (const s of sockets) {
    try {
      fs.unlinkSync(s);
    } catch {
      /* gone */
    }
  }
}

export interface Server {
  readonly name: string;
  readonly proc: ChildProcess;
  readonly sock: string;
  log(): string;
}

export async function startServer(
  name: string,
  sock: string,
  backend: string,
  gid: string,
  ready: RegExp[],
  extra: readonly string[] = [],
): Promise<Server> {
  const nodeFlags = (process.env.BENCH_MESH_NODE_FLAGS ?? '').split(/\s+/).filter(Boolean);
  try {
    fs.unlinkSync(sock);
  } catch {
    /* none */
  }
  sockets.add(sock);
  const p = startServerProcess({
    sock,
    name,
    args: ['-b', backend, '-L', 'info', ...extra],
    nodeFlags,
    env: { ...process.env, ERNIC_TCP_GUEST_GIDS: gid },
    ready,
    timeoutMs: 15000,
  });
  const s = await p;
  children.add(s.proc);
  return { name, proc: s.proc, sock, log: s.log };
}

export async function stopChild(proc: ChildProcess): Promise<void> {
  await stopProcess(proc);
  children.delete(proc);
}

export function startRawPeer(tlsKey?: string): Promise<{ proc: ChildProcess; port: number }> {
  const proc = spawn(
    process.execPath,
    [path.join(__dirname, 'mesh-raw.js'), '--raw-peer', ...(tlsKey ? ['--tls', tlsKey] : [])],
    { stdio: ['pipe', 'pipe', 'inherit'] },
  );
  children.add(proc);
  return new Promise((resolve, reject) => {
    let text = '';
    proc.once('exit', (code) => reject(new Error(`raw TCP peer exited (${code}) before it was ready`)));
    proc.stdout!.on('data', (d: Buffer) => {
      text += d.toString();
      const m = /^(\d+)\n/.exec(text);
      if (m) resolve({ proc, port: Number(m[1]) });
    });
  });
}
