// What executes the RDMA work the guest posts, as the ionic device sees it:
// one small interface. The device hands a backend its RDMA engine (the data
// path's hooks) and its Ethernet segment once, when it is built, and tells it
// when a VM comes and goes. The backends themselves (loopback, mesh, NVMe-oF,
// S3, ...) are composed at the top, in lib/backends/, one file each: nothing
// below them names one.

import type { FrameEndpoint } from '../net/frame-endpoint';
import type { FrameOffload } from '../net/vnet';
import type { DataPathEngine } from './executor';

/** The guest's Ethernet segment as a backend reaches it. */
export interface GuestSegment {
  /**
   * Queue a frame for the guest (it waits for a receive buffer, copied:
   * `frame` is the caller's again on return). `l3Sum`: the ones'-complement
   * sum after the Ethernet header, when the sender knows it.
   */
  send(frame: Buffer, l3Sum?: number): void;
  /** Put an in-process host on the segment: it sees the guest's frames after those added before it. */
  addEndpoint(e: FrameEndpoint): void;
  /**
   * Put frame[0, len) on the host side of the wire (the TAP), as the port
   * transmits; false when there is none or it failed. `offload`: a UDP GSO
   * buffer, only where hostTakesUdpGso() said yes.
   */
  sendToHost?(frame: Buffer, len: number, offload?: FrameOffload | null): boolean;
  /** The host side takes UDP GSO buffers (a TAP with TUN_F_USO4/6). */
  hostTakesUdpGso?(): boolean;
}

export interface RdmaBackend {
  /** The name the CLI and the stats give it. */
  readonly name: string;
  /** Plug in: the data path on `engine` (null: a profile without RDMA) and any hosts on `segment`. Called once. */
  attach(engine: DataPathEngine | null, segment: GuestSegment): void;
  /** A VM attached (true) or went away (false). */
  consumerPresent?(present: boolean): void;
}
