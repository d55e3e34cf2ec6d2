// The most a design that writes each frame to a TAP can move across a Linux
// bridge on this machine: this process writes path-MTU RoCE-sized frames to
// one TAP as fast as it can, a child process reads the other TAP the way the
// server does (an fd watch, then reads until EAGAIN), and the child's count
// of frames received over the run is the wire's rate. bench:roce prints it
// beside the mesh, so its RoCE figure can be read against what the wire
// itself allows. Run as a script (`node tap-wire.js TAP`) it is that reader.

import { ChildProcess, spawn } from 'child_process';
import * as fs from 'fs';
import * as native from '../../lib/native';

/** Frames per second that crossed the bridge from `txTap` to `rxTap`, each `len` bytes, written for `secs`. */
export async function tapWireRate(txTap: string, rxTap: string, len: number, secs: number): Promise<number> {
  const reader: ChildProcess = spawn(process.execPath, [__filename, rxTap], { stdio: ['pipe', 'pipe', 'inherit'] });
  let out = '';
  reader.stdout!.on('data', (d: Buffer) => (out += d.toString()));
  await new Promise<void>((resolve, reject) => {
    reader.once('error', reject);
    reader.stdout!.once('data', () => resolve()); // "ready"
  });
  const t = native.openTap(txTap);
  const f = Buffer.alloc(len, 0x5a);
  Buffer.from('02ffffff0002', 'hex').copy(f, 0);
  Buffer.from('02ffffff0001', 'hex').copy(f, 6);
  f.writeUInt16BE(0x88b5, 12); // local experimental EtherType: no host stack takes it
  const t0 = process.hrtime.bigint();
  const deadline = t0 + BigInt(Math.round(secs * 1e9));
  let i = 0;
  while ((++i & 255) !== 0 || process.hrtime.bigint() < deadline) {
    try {
      fs.writeSync(t.fd, f);
    } catch {
      /* the reader's queue is full: the frame is lost, as on a wire */
    }
  }
  const el = Number(process.hrtime.bigint() - t0) / 1e9;
  fs.closeSync(t.fd);
  await new Promise((r) => setTimeout(r, 200)); // the last frames reach the reader
  const exited = new Promise((r) => reader.once('exit', r));
  reader.stdin!.end();
  await exited;
  const got = Number(/frames (\d+)/.exec(out)?.[1] ?? NaN);
  if (!Number.isFinite(got)) throw new Error(`tap-wire: the reader said '${out.trim()}'`);
  return got / el;
}

/** The reader: count frames on `tap` until stdin closes, then print the count. */
function readerMain(tap: string): void {
  const t = native.openTap(tap);
  const buf = Buffer.allocUnsafe(65536);
  let frames = 0;
  const watcher = native.watch(t.fd, native.READABLE, () => {
    for (let k = 0; k < 64; k++) {
      try {
        if (fs.readSync(t.fd, buf, 0, buf.length, null) <= 0) return;
      } catch {
        return; // EAGAIN: drained
      }
      frames++;
    }
  });
  process.stdin.resume();
  process.stdin.on('end', () => {
    watcher.close();
    fs.closeSync(t.fd);
    process.stdout.write(`frames ${frames}\n`);
  });
  process.stdout.write('ready\n');
}

if (require.main === module) readerMain(process.argv[2]!);
