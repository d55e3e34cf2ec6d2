// The two kinds of party on the guest's Ethernet segment besides the guest:
// in-process endpoints (the S3 store, the NVMe-oF target, the P4 engine) and
// the host side of the wire (a TAP). The device offers each frame the guest
// sends to its endpoints in order, then to the host link; frames from the
// host link are offered to the endpoints too before they reach the guest.

import type { FrameOffload } from './vnet';

/** An in-process party on the device's Ethernet segment. */
export interface FrameEndpoint {
  /**
   * Takes what the guest left unfinished whole: a TCP super-frame (TSO) in
   * one piece, a partial checksum as it is, with claimTx's `offload` saying
   * so. Without it the device finishes and segments such frames first.
   */
  readonly takesOffloads?: boolean;
  /**
   * A frame the guest sent. Return true to claim it (it goes no further).
   * `frame` (and `offload`: what the guest left to the NIC, or absent when
   * nothing) are valid during the call only; `offload` comes only to an
   * endpoint that takesOffloads.
   */
  claimTx?(frame: Buffer, offload?: FrameOffload): boolean;
  /**
   * The device starts (true) and ends (false) one pass over a TX ring: what
   * the frames claimed in between call for may be answered once at the end
   * (one ACK for a burst of segments, as GRO gives a host).
   */
  txPass?(begin: boolean): void;
  /** A frame from the host TAP on its way to the guest. Return true to claim it. */
  claimRx?(frame: Buffer): boolean;
  /**
   * Frames from the host must reach claimRx even while the guest has no RX
   * buffer (RoCE: RDMA traffic never waits for the Ethernet ring). The device
   * then keeps reading the host link and drops the guest's frames it cannot
   * take, as a NIC out of buffers does, instead of pausing the link.
   */
  readonly needsHostFrames?: boolean;
}

/** The host side of the wire: something frames can be written to and read from. */
export interface HostLink {
  readonly name: string;
  /** send() takes an `offload`: the host finishes partial checksums and segments TCP super-frames (a TAP with IFF_VNET_HDR). */
  readonly offloads?: boolean;
  /** send() also takes UDP GSO buffers (offload.gsoType UDP_L4): the host cuts them into datagrams. */
  readonly uso?: boolean;
  /** Send one frame to the host. Returns false when it could not be sent (counted as a TX error). */
  send(frame: Buffer, offload?: FrameOffload): boolean;
  /**
   * Start delivering received frames (event driven). `frame` (and `offload`,
   * what the host left unfinished, or null) are valid during the call only.
   */
  start(onFrame: (frame: Buffer, offload?: FrameOffload | null) => void): void;
  /**
   * Stop delivering frames until resume(): the guest has no RX buffer, and
   * the host's own queue should hold the frames (backpressure, as QEMU gives
   * its virtio-net) rather than us dropping them. Optional.
   */
  pause?(): void;
  resume?(): void;
  close(): void;
}
