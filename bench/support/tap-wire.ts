// What a Linux bridge between two TAPs carries on this machine, for
// bench:roce to print beside its RoCE figure. This process writes RoCE-sized
// packets to one TAP as fast as it can, a child process reads the other TAP
// the way the server does (an fd watch, then reads until EAGAIN), and the
// child's count of packets received over the run is the wire's rate.
//
//   'frame': one write per path-MTU packet (what --backend roce does today).
//   'uso':   UDP segmentation offload (IFF_VNET_HDR, TUN_F_USO4/6, Linux
//            6.2+): one write carries 15 path-MTU UDP datagrams of one flow
//            as a GSO buffer; the bridge forwards it whole to a TAP that
//            takes USO too, so the reader also gets 15 packets per read.
//
// Run as a script (`node tap-wire.js TAP [uso]`) it is that reader.

import { ChildProcess, spawn } from 'child_process';
import * as fs from 'fs';
import * as native from '../../lib/native';
import { inetChecksum } from '../../lib/net/checksum';
import { TUN_F_CSUM, virtio_net_hdr, VirtioGso } from '../../lib/net/vnet';

type WireMode = 'frame' | 'uso';

const TUN_F_USO4 = 0x20;
const TUN_F_USO6 = 0x40;
/** The kernel takes USO only for both families at once. */
const USO_OFFLOADS = TUN_F_CSUM | TUN_F_USO4 | TUN_F_USO6;
/** Ethernet + IPv4 + UDP before each datagram's payload (BTH, data, ICRC). */
const HEADERS = 14 + 20 + 8;
/** Datagrams per GSO buffer: 15 path-MTU RoCE payloads stay under IPv4's 65,535-byte packet. */
const USO_SEGMENTS = 15;

/**
 * Packets per second that crossed the bridge from `txTap` to `rxTap`, each a
 * `frameLen`-byte frame on the wire (Ethernet to ICRC), written for `secs`.
 */
export async function tapWireRate(
  txTap: string,
  rxTap: string,
  frameLen: number,
  secs: number,
  mode: WireMode = 'frame',
): Promise<number> {
  const reader: ChildProcess = spawn(process.execPath, [__filename, rxTap, mode], {
    stdio: ['pipe', 'pipe', 'inherit'],
  });
  let out = '';
  reader.stdout!.on('data', (d: Buffer) => (out += d.toString()));
  await new Promise<void>((resolve, reject) => {
    reader.once('error', reject);
    reader.stdout!.once('data', () => resolve()); // "ready"
  });
  const t = native.openTap(txTap, mode === 'uso' ? USO_OFFLOADS : undefined);
  // A new bridge port forwards after a moment; frames written before are lost to both modes alike.
  await new Promise((r) => setTimeout(r, 200));
  const iov = mode === 'uso' ? usoWrite(frameLen) : [udpFrame(frameLen - HEADERS)];
  const t0 = process.hrtime.bigint();
  const deadline = t0 + BigInt(Math.round(secs * 1e9));
  let i = 0;
  while ((++i & 255) !== 0 || process.hrtime.bigint() < deadline) {
    try {
      fs.writevSync(t.fd, iov);
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
  const got = Number(/packets (\d+)/.exec(out)?.[1] ?? NaN);
  if (!Number.isFinite(got)) throw new Error(`tap-wire: the reader said '${out.trim()}'`);
  return got / el;
}

/** An Ethernet/IPv4/UDP frame to port 4791 with `payload` bytes of UDP payload; UDP checksum zero, as RoCE sends it. */
function udpFrame(payload: number): Buffer {
  const f = Buffer.alloc(HEADERS + payload, 0x5a);
  f.fill(0, 0, HEADERS);
  Buffer.from('02ffffff0002', 'hex').copy(f, 0);
  Buffer.from('02ffffff0001', 'hex').copy(f, 6);
  f.writeUInt16BE(0x0800, 12);
  f[14] = 0x45;
  f.writeUInt16BE(20 + 8 + payload, 16);
  f.writeUInt16BE(0x4000, 20); // DF
  f[22] = 64;
  f[23] = 17;
  Buffer.from([10, 26, 99, 1]).copy(f, 26);
  Buffer.from([10, 26, 99, 2]).copy(f, 30);
  f.writeUInt16BE(inetChecksum(f, 14, 20), 24);
  f.writeUInt16BE(49152, 34);
  f.writeUInt16BE(4791, 36);
  f.writeUInt16BE(8 + payload, 38);
  return f;
}

/** The virtio_net_hdr and frame of one GSO buffer of USO_SEGMENTS datagrams of `frameLen` bytes each on the wire. */
function usoWrite(frameLen: number): Buffer[] {
  const seg = frameLen - HEADERS;
  const f = udpFrame(seg * USO_SEGMENTS);
  // The UDP checksum field holds the pseudo-header sum: the kernel finishes each segment's.
  let p = 0x0a1a + 0x6301 + 0x0a1a + 0x6302 + 17 + 8 + seg * USO_SEGMENTS;
  while (p > 0xffff) p = (p & 0xffff) + (p >>> 16);
  f.writeUInt16BE(p, 40);
  const h = Buffer.alloc(virtio_net_hdr.SIZE);
  h[virtio_net_hdr.flags.off] = 1; // NEEDS_CSUM
  h[virtio_net_hdr.gso_type.off] = VirtioGso.UDP_L4;
  h.writeUInt16LE(HEADERS, virtio_net_hdr.hdr_len.off);
  h.writeUInt16LE(seg, virtio_net_hdr.gso_size.off);
  h.writeUInt16LE(34, virtio_net_hdr.csum_start.off);
  h.writeUInt16LE(6, virtio_net_hdr.csum_offset.off);
  return [h, f];
}

/** The reader: count packets on `tap` (a GSO buffer counts as its segments) until stdin closes, then print the count. */
function readerMain(tap: string, mode: WireMode): void {
  const t = native.openTap(tap, mode === 'uso' ? USO_OFFLOADS : undefined);
  const buf = Buffer.allocUnsafe(70000);
  let packets = 0;
  const watcher = native.watch(t.fd, native.READABLE, () => {
    for (let k = 0; k < 64; k++) {
      let n: number;
      try {
        n = fs.readSync(t.fd, buf, 0, buf.length, null);
      } catch {
        return; // EAGAIN: drained
      }
      if (n <= 0) return;
      if (mode !== 'uso') packets++;
      else if (buf[virtio_net_hdr.gso_type.off] !== VirtioGso.UDP_L4) packets++;
      else packets += Math.ceil((n - virtio_net_hdr.SIZE - HEADERS) / buf.readUInt16LE(virtio_net_hdr.gso_size.off));
    }
  });
  process.stdin.resume();
  process.stdin.on('end', () => {
    watcher.close();
    fs.closeSync(t.fd);
    process.stdout.write(`packets ${packets}\n`);
  });
  process.stdout.write('ready\n');
}

if (require.main === module) readerMain(process.argv[2]!, process.argv[3] === 'uso' ? 'uso' : 'frame');
