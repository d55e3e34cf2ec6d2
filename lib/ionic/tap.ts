// A host TAP interface as the device's wire (--tap IFNAME). The TAP must
// exist (ip tuntap add dev X mode tap); we attach with TUNSETIFF. Frames are
// read when the fd is readable (a libuv poll watch), never on a timer.

import * as fs from 'fs';
import * as native from '../native';
import type { HostLink } from '../net/frame-endpoint';

/** Reads per readiness event before letting other work run. */
const READS_PER_EVENT = 64;

export class TapLink implements HostLink {
  readonly name: string;
  readonly #fd: number;
  #watcher: native.Watcher | null = null;
  readonly #buf = Buffer.alloc(65536);
  /** Frames the kernel refused (queue full, interface down). */
  sendErrors = 0;
  #closed = false;

  constructor(ifname: string) {
    const tap = native.openTap(ifname);
    this.#fd = tap.fd;
    this.name = tap.name;
  }

  send(frame: Buffer): boolean {
    if (this.#closed) return false; // fix: never write to an fd number we no longer own
    try {
      return fs.writeSync(this.#fd, frame) === frame.length;
    } catch {
      // EAGAIN (kernel queue full) or EIO (interface down): a real NIC drops the frame too.
      this.sendErrors++;
      return false;
    }
  }

  start(onFrame: (frame: Buffer) => void): void {
    if (this.#watcher) return;
    const fd = this.#fd;
    const buf = this.#buf;
    this.#watcher = native.watch(fd, native.READABLE, function onTapReadable() {
      for (let i = 0; i < READS_PER_EVENT; i++) {
        let n: number;
        try {
          n = fs.readSync(fd, buf, 0, buf.length, null);
        } catch {
          return; // EAGAIN: drained
        }
        if (n <= 0) return;
        onFrame(buf.subarray(0, n));
      }
    });
  }

  close(): void {
    this.#watcher?.close();
    this.#watcher = null;
    // Fix: close the fd only once. A second close() (IonicDevice.close() and the
    // owner both closing the link) would close whatever unrelated fd had reused
    // the number in between.
    if (this.#closed) return;
    this.#closed = true;
    try { fs.closeSync(this.#fd); } catch { /* closed */ }
  }
}
