// A host TAP interface as the device's wire (--tap IFNAME). The TAP must
// exist (ip tuntap add dev X mode tap); we attach with TUNSETIFF. Frames are
// read when the fd is readable (a libuv poll watch), never on a timer.
//
// With offloads (the default), the TAP is opened with IFF_VNET_HDR and
// TUNSETOFFLOAD(CSUM, TSO4, TSO6, TSO_ECN): every frame either way carries a
// virtio_net_hdr, so a TCP super-frame from the guest goes to the kernel as
// one GSO buffer with its checksum left partial, and the kernel hands us its
// own super-frames whole (the LIF cuts them for the guest). With --tap-uso,
// where the kernel has it (6.2+), UDP segmentation too (TUN_F_USO4/6).

import * as fs from 'fs';
import * as native from '../native';
import type { HostLink } from '../net/frame-endpoint';
import {
  FrameOffload,
  TUN_F_CSUM,
  TUN_F_TSO4,
  TUN_F_TSO6,
  TUN_F_TSO_ECN,
  TUN_F_USO4,
  TUN_F_USO6,
  virtio_net_hdr,
} from '../net/vnet';

/** Reads per readiness event before letting other work run. */
const READS_PER_EVENT = 64;
/** What we let the kernel hand us: partial checksums and TCP super-frames. */
const TAP_OFFLOADS = TUN_F_CSUM | TUN_F_TSO4 | TUN_F_TSO6 | TUN_F_TSO_ECN;
/** And UDP GSO buffers (Linux 6.2+): RoCE sends 15 packets per write this way, and the LIF cuts those it gets. */
const TAP_OFFLOADS_USO = TAP_OFFLOADS | TUN_F_USO4 | TUN_F_USO6;
/** A read buffer for the largest GSO frame (64 KiB of IP packet) with its link header and virtio_net_hdr. */
const READ_BUFFER = 65536 + 1024;

interface TapOptions {
  /** IFF_VNET_HDR and TUNSETOFFLOAD (default true). */
  readonly offloads?: boolean;
  /** With offloads: UDP segmentation too, where the kernel has it (default false). */
  readonly uso?: boolean;
}

export class TapLink implements HostLink {
  readonly name: string;
  readonly offloads: boolean;
  /** send() takes UDP GSO buffers (TUN_F_USO4/6 took). */
  readonly uso: boolean;
  readonly #fd: number;
  #watcher: native.Watcher | null = null;
  readonly #buf = Buffer.alloc(READ_BUFFER);
  /** The virtio_net_hdr written before each frame, and the two-piece write it makes with the frame. */
  readonly #hdr = Buffer.alloc(virtio_net_hdr.SIZE);
  readonly #iov: Buffer[] = [this.#hdr, this.#hdr];
  readonly #plain = new FrameOffload();
  readonly #rx = new FrameOffload();
  /** Frames the kernel refused (queue full, interface down). */
  sendErrors = 0;
  #closed = false;
  #paused = false;

  constructor(ifname: string, opts: TapOptions = {}) {
    this.offloads = opts.offloads ?? true;
    let tap: native.TapDevice;
    let uso = this.offloads && opts.uso === true;
    try {
      tap = native.openTap(ifname, uso ? TAP_OFFLOADS_USO : this.offloads ? TAP_OFFLOADS : undefined);
    } catch (e) {
      // A kernel before 6.2 refuses the USO bits (EINVAL): the TAP without them.
      if (!uso || (e as NodeJS.ErrnoException).code !== 'EINVAL') throw e;
      tap = native.openTap(ifname, TAP_OFFLOADS);
      uso = false;
    }
    this.uso = uso;
    this.#fd = tap.fd;
    this.name = tap.name;
  }

  send(frame: Buffer, offload?: FrameOffload): boolean {
    if (this.#closed) return false; // never write to an fd number we no longer own
    try {
      if (!this.offloads) return fs.writeSync(this.#fd, frame) === frame.length;
      (offload ?? this.#plain).encode(this.#hdr, 0);
      this.#iov[1] = frame;
      return fs.writevSync(this.#fd, this.#iov) === this.#hdr.length + frame.length;
    } catch {
      // EAGAIN (kernel queue full) or EIO (interface down): a real NIC drops the frame too.
      this.sendErrors++;
      return false;
    }
  }

  start(onFrame: (frame: Buffer, offload: FrameOffload | null) => void): void {
    if (this.#watcher) return;
    const fd = this.#fd;
    const buf = this.#buf;
    const offloads = this.offloads;
    const rx = this.#rx;
    const paused = (): boolean => this.#paused;
    this.#watcher = native.watch(fd, native.READABLE, function onTapReadable() {
      for (let i = 0; i < READS_PER_EVENT && !paused(); i++) {
        let n: number;
        try {
          n = fs.readSync(fd, buf, 0, buf.length, null);
        } catch {
          return; // EAGAIN: drained
        }
        if (n <= 0) return;
        if (!offloads) {
          onFrame(buf.subarray(0, n), null);
          continue;
        }
        if (n <= virtio_net_hdr.SIZE) continue;
        onFrame(buf.subarray(virtio_net_hdr.SIZE, n), rx.decode(buf, 0));
      }
    });
  }

  /** Stop reading: the kernel queues what comes meanwhile (and drops past txqueuelen, as on a full NIC). */
  pause(): void {
    if (this.#paused || this.#closed) return;
    this.#paused = true;
    this.#watcher?.update(0);
  }

  resume(): void {
    if (!this.#paused || this.#closed) return;
    this.#paused = false;
    this.#watcher?.update(native.READABLE);
  }

  close(): void {
    this.#watcher?.close();
    this.#watcher = null;
    // Close the fd only once. A second close() (IonicDevice.close() and the
    // owner both closing the link) would close whatever unrelated fd had reused
    // the number in between.
    if (this.#closed) return;
    this.#closed = true;
    try {
      fs.closeSync(this.#fd);
    } catch {
      /* closed */
    }
  }
}
