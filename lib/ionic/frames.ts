// Where Ethernet frames go outside the device: a host TAP, in-process
// endpoints (the S3 store, the P4 engine), or nowhere.
//
// TX: the device offers each transmitted frame to the endpoints in order; the
// first that claims it keeps it; otherwise it goes to the TAP, or is counted
// and discarded without one. RX: a frame from the TAP is offered to the
// endpoints too, then steered to a guest RX queue. Endpoints can also queue
// frames for the guest; unlike TAP frames, those wait for a buffer, in order.

/** An in-process party on the device's Ethernet segment. */
export interface FrameEndpoint {
  /** A frame the guest sent. Return true to claim it (it goes no further). `frame` is valid during the call only. */
  claimTx?(frame: Buffer): boolean;
  /** A frame from the host TAP on its way to the guest. Return true to claim it. */
  claimRx?(frame: Buffer): boolean;
}

/** The host side of the wire: something frames can be written to and read from. */
export interface HostLink {
  readonly name: string;
  /** Send one frame to the host. Returns false when it could not be sent (counted as a TX error). */
  send(frame: Buffer): boolean;
  /** Start delivering received frames (event driven). `frame` is valid during the call only. */
  start(onFrame: (frame: Buffer) => void): void;
  close(): void;
}

/** Hash of the flow a frame belongs to (addresses and ports when present), stable for the life of the process. */
export function flowHash(frame: Buffer): number {
  // FNV-1a over the fields that name the flow. Non-IP frames hash their MAC addresses.
  let h = 0x811c9dc5;
  const mix = (from: number, to: number): void => {
    for (let i = from; i < to && i < frame.length; i++) {
      h ^= frame[i]!;
      h = Math.imul(h, 0x01000193) >>> 0;
    }
  };
  if (frame.length < 14) return h;
  let l3 = 14;
  let type = frame.readUInt16BE(12);
  if (type === 0x8100 && frame.length >= 18) { type = frame.readUInt16BE(16); l3 = 18; }
  if (type === 0x0800 && frame.length >= l3 + 20) {
    const ihl = (frame[l3]! & 0xf) * 4;
    const proto = frame[l3 + 9]!;
    mix(l3 + 12, l3 + 20);
    mix(l3 + 9, l3 + 10);
    if ((proto === 6 || proto === 17) && frame.length >= l3 + ihl + 4) mix(l3 + ihl, l3 + ihl + 4);
    return h;
  }
  if (type === 0x86dd && frame.length >= l3 + 40) {
    const next = frame[l3 + 6]!;
    mix(l3 + 8, l3 + 40);
    mix(l3 + 6, l3 + 7);
    if ((next === 6 || next === 17) && frame.length >= l3 + 44) mix(l3 + 40, l3 + 44);
    return h;
  }
  mix(0, 12);
  return h;
}

/** Kind of destination address: for RX filtering and the ucast/mcast/bcast counters. */
export const enum AddrKind {
  UNICAST,
  MULTICAST,
  BROADCAST,
}

export function destinationKind(frame: Buffer): AddrKind {
  if (frame.length < 6) return AddrKind.UNICAST;
  if (frame.readUInt32BE(0) === 0xffffffff && frame.readUInt16BE(4) === 0xffff) return AddrKind.BROADCAST;
  return frame[0]! & 1 ? AddrKind.MULTICAST : AddrKind.UNICAST;
}
