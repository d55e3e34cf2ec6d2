// Frames per second through the ionic device, driven by the guest model
// (spec/support/ionic/guest/) the way ionic.ko drives it: TX descriptors,
// doorbells as posted BAR2 writes, completions by MSI-X eventfd.
//
// The server is the real rocm-ernic binary in its own process, on a host TAP.
//   TX: the guest sends batches of frames; they leave through the TAP.
//       Baseline: this process writing the same frames straight to a TAP fd
//       (the host's own cost of putting a frame on that wire).
//   TX TSO: the guest sends 64,000-byte TCP payloads as TSO runs (one
//       descriptor per segment); each leaves as one GSO buffer (the server's
//       TAP has IFF_VNET_HDR). Baseline: this process writing the same GSO
//       buffer to a TAP with offloads.
//   RX: the host sends UDP datagrams to the guest's address (static neighbour
//       entry), the kernel puts them on the TAP, the device delivers them.
//       Baseline: the same send loop's rate (what the host offers).
//   Idle: the server's CPU time over 10 s with the guest attached and idle.
// Needs root (TAP): without it, says so and exits 2 (nothing measured).
// Prints figures and ratios; asserts nothing.

import { ChildProcess, execFileSync, spawn } from 'child_process';
import * as dgram from 'dgram';
import * as fs from 'fs';
import * as path from 'path';
import * as native from '../lib/native';
import { IonicGuest } from '../spec/support/ionic/guest';
import { tsoRate, txRate } from './support/guest-tx';
import { pattern, tcpFrame } from '../spec/support/ionic/tcp-frames';
import { FrameOffload, TUN_F_CSUM, TUN_F_TSO4, VirtioGso, virtio_net_hdr } from '../lib/net/vnet';
import { cpuMs } from './support/cpu';

const ROOT = path.join(__dirname, '..', '..');
const N = Number(process.env.BENCH_FRAMES ?? 40000);
const sh = (cmd: string, args: string[]): void => {
  execFileSync(cmd, args, { stdio: 'ignore' });
};

function frame(len: number): Buffer {
  const f = Buffer.alloc(len, 0x5a);
  Buffer.from('02aabbccddee', 'hex').copy(f, 0); // to a host that does not exist: the kernel drops it
  Buffer.from('026572696e63', 'hex').copy(f, 6);
  f.writeUInt16BE(0x88b5, 12); // local experimental EtherType
  return f;
}

function directTapRate(tap: string, len: number): number {
  const t = native.openTap(tap);
  const f = frame(len);
  const t0 = process.hrtime.bigint();
  let ok = 0;
  for (let i = 0; i < N; i++) {
    try {
      fs.writeSync(t.fd, f);
      ok++;
    } catch {
      /* queue full */
    }
  }
  const secs = Number(process.hrtime.bigint() - t0) / 1e9;
  fs.closeSync(t.fd);
  return ok / secs;
}

/** TSO runs: a 64,000-byte TCP payload at MSS 1448 (45 segments), as one GSO buffer or 45 frames. */
const TSO_PAYLOAD = 64000;
const TSO_MSS = 1448;
const gbits = (framesPerSec: number, bytes: number): string =>
  `${((framesPerSec * bytes * 8) / 1e9).toFixed(2)} Gbit/s`;

/** The host's own cost of putting one such GSO buffer on a TAP: writes with a virtio_net_hdr to a TAP with offloads. */
function directTapGsoRate(tap: string, frame: Buffer, l4: number, hdrLen: number): number {
  const t = native.openTap(tap, TUN_F_CSUM | TUN_F_TSO4);
  const o = new FrameOffload();
  o.needsCsum = true;
  o.csumStart = l4;
  o.csumOffset = 16;
  o.gsoType = VirtioGso.TCPV4;
  o.gsoSize = TSO_MSS;
  o.hdrLen = hdrLen;
  const hdr = Buffer.alloc(virtio_net_hdr.SIZE);
  o.encode(hdr, 0);
  const n = Math.ceil(N / 45);
  const t0 = process.hrtime.bigint();
  let ok = 0;
  for (let i = 0; i < n; i++) {
    try {
      fs.writevSync(t.fd, [hdr, frame]);
      ok++;
    } catch {
      /* queue full */
    }
  }
  const secs = Number(process.hrtime.bigint() - t0) / 1e9;
  fs.closeSync(t.fd);
  return ok / secs;
}

/**
 * RX in bursts of half the ring: the host sends a burst, the guest takes it
 * (NAPI, refill), then the next burst. Without this window the host offers
 * far more than any ring holds and the figure would measure drops.
 */
async function rxRate(
  g: IonicGuest,
  guestIp: string,
  len: number,
): Promise<{ offered: number; delivered: number; lost: number }> {
  const sock = dgram.createSocket('udp4');
  const payload = Buffer.alloc(len - 42, 1);
  const burst = 256;
  let received = 0;
  let sendNs = 0;
  const t0 = process.hrtime.bigint();
  for (let sent = 0; sent < N;) {
    const s0 = process.hrtime.bigint();
    const n = Math.min(burst, N - sent);
    for (let i = 0; i < n; i++) await new Promise<void>((r) => sock.send(payload, 9, guestIp, () => r()));
    sendNs += Number(process.hrtime.bigint() - s0);
    sent += n;
    for (let got = 0; got < n; got++) {
      try {
        await g.waitRxFrame({ timeoutMs: 200 });
        received++;
      } catch {
        break;
      }
    }
  }
  const secs = Number(process.hrtime.bigint() - t0) / 1e9;
  sock.close();
  return { offered: N / (sendNs / 1e9), delivered: received / secs, lost: N - received };
}

async function main(): Promise<void> {
  if (process.getuid?.() !== 0) {
    console.error('frames benchmark: not measured: needs root (it makes a TAP)');
    process.exitCode = 2;
    return;
  }
  const tag = `${process.pid % 100000}`;
  const tap = `ernb${tag}`,
    tap2 = `ernc${tag}`;
  const sock = `/tmp/ernic-bench-${tag}.sock`;
  let server: ChildProcess | null = null;
  try {
    sh('ip', ['tuntap', 'add', 'dev', tap, 'mode', 'tap']);
    sh('ip', ['tuntap', 'add', 'dev', tap2, 'mode', 'tap']);
    sh('ip', ['addr', 'add', '10.79.0.1/24', 'dev', tap]);
    sh('ip', ['link', 'set', tap, 'up']);
    sh('ip', ['link', 'set', tap2, 'up']);
    sh('ip', ['neigh', 'replace', '10.79.0.2', 'lladdr', '72:6f:63:6d:2d:6e', 'dev', tap]);
    server = spawn(
      process.execPath,
      [path.join(ROOT, 'dist', 'bin', 'rocm-ernic.js'), '-s', sock, '--tap', tap, '-L', 'error'],
      { stdio: 'inherit' },
    );
    for (let i = 0; i < 100 && !fs.existsSync(sock); i++) await new Promise((r) => setTimeout(r, 50));
    const g = await IonicGuest.connect(sock, { ramSize: 256 << 20 });
    await g.probe();
    await g.open(1, { ringLog2: 10 });

    console.log(
      `frames benchmark (${N} frames per figure; server: rocm-ernic in its own process on TAP ${tap}; guest: the ionic.ko model)`,
    );
    for (const len of [64, 1500]) {
      const dev = await txRate(g, frame(len), N);
      const base = directTapRate(tap2, len);
      console.log(
        `  TX ${String(len).padStart(4)} B: ${dev.toFixed(0).padStart(8)} frames/s (${gbits(dev, len)}) through the device   baseline (host writes to a TAP) ${base.toFixed(0).padStart(8)}/s (${gbits(base, len)})   ratio ${(dev / base).toFixed(2)}`,
      );
    }
    {
      // TSO: the guest's 45-descriptor runs leave as one GSO buffer on the TAP (the server opens it with offloads).
      const { frame, hdrLen } = tcpFrame({ payload: pattern(TSO_PAYLOAD), tsoSeed: true });
      Buffer.from('02aabbccddee', 'hex').copy(frame, 0); // to a host that does not exist: the kernel drops it
      const runs = await tsoRate(g, frame, hdrLen, TSO_MSS, Math.ceil(N / 45));
      const gso = tcpFrame({ payload: pattern(TSO_PAYLOAD) });
      Buffer.from('02aabbccddee', 'hex').copy(gso.frame, 0);
      const base = directTapGsoRate(tap2, gso.frame, gso.l4, gso.hdrLen);
      const segs = Math.ceil(TSO_PAYLOAD / TSO_MSS);
      console.log(
        `  TX TSO ${TSO_PAYLOAD} B payload (${segs} segments of ${TSO_MSS}): ${runs.toFixed(0).padStart(6)} runs/s = ${(runs * segs).toFixed(0)} segments/s (${gbits(runs, frame.length)}) through the device   baseline (host writes the GSO buffer to a TAP) ${base.toFixed(0)}/s (${gbits(base, frame.length)})   ratio ${(runs / base).toFixed(2)}`,
      );
    }
    for (const len of [64, 1500]) {
      const r = await rxRate(g, '10.79.0.2', len);
      console.log(
        `  RX ${String(len).padStart(4)} B: ${r.delivered.toFixed(0).padStart(8)} frames/s delivered to the guest   baseline (host send loop) ${r.offered.toFixed(0).padStart(8)}/s   ratio ${(r.delivered / r.offered).toFixed(2)}   lost ${r.lost}`,
      );
    }
    const pid = server.pid!;
    await new Promise((r) => setTimeout(r, 2000));
    const a = cpuMs(pid);
    await new Promise((r) => setTimeout(r, 10000));
    const b = cpuMs(pid);
    console.log(
      `  idle: the server used ${(b - a).toFixed(0)} ms of CPU in 10 s with the guest attached and idle (clock tick 10 ms)`,
    );
    await g.close();
  } finally {
    server?.kill();
    try {
      sh('ip', ['link', 'del', tap]);
    } catch {
      /* gone */
    }
    try {
      sh('ip', ['link', 'del', tap2]);
    } catch {
      /* gone */
    }
  }
}

main().catch((e: unknown) => {
  console.error(e);
  process.exit(1);
});
