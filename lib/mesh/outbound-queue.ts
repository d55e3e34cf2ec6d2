// One connection's send queue, as data (no sockets): what waits to be
// written, in order, with the room rules of docs/mesh.md ("Flow control and
// every bound"):
//
// - requests: at most `requestBytes` queued and in flight;
// - replies share `connectionBytes` with the requests (twice the request
//   room), and the caller drops a reply that does not fit;
// - control frames (registration, topology, GID batches) have their own
//   small room; a peer that lets it fill is not reading and gets closed;
// - a heartbeat and a heartbeat answer go ahead of everything, at most one
//   of each waiting.
//
// A frame counts from the moment it is queued until the socket's write
// callback says the kernel has it ("in flight" in between), plus a fixed
// per-frame overhead so a flood of tiny frames is bounded too. An empty
// queue takes any one frame, so a bound lowered below the largest frame
// (tests do) cannot wedge a connection.

type FrameClass = 'control' | 'request' | 'reply';

export interface OutFrame {
  /** Header, then body parts, written back to back (never copied). */
  readonly parts: readonly Buffer[];
  /** Sum of the parts' lengths. */
  readonly bytes: number;
  readonly cls: FrameClass | 'heartbeat';
  /** The caller's tag (a QP's creation handle, say): takeBack(tag) removes its queued frames. */
  readonly tag?: number;
  /** Called once when the kernel has the frame, or it was taken back or dropped: its buffers are free. */
  readonly onDone?: () => void;
}

export type OfferResult = 'queued' | 'queue-full' | 'overflow';

/**
 * Accounting per frame beyond its bytes: what a queued frame costs the
 * process besides its data (the record, its parts array, the Buffer objects
 * of its header and body, the FIFO slot). Measured: a flood of 92-byte
 * relayed frames cost ~530 bytes of RSS each, so the byte bounds hold in
 * real memory only with this much charged per frame.
 */
export const FRAME_OVERHEAD = 512;

export interface OutboundLimits {
  readonly requestBytes: number;
  readonly connectionBytes: number;
  readonly controlBytes: number;
}

export class OutboundQueue {
  #heartbeat: OutFrame | undefined;
  #heartbeatAnswer: OutFrame | undefined;
  /** FIFO with a head index; removed frames leave `undefined` until compaction. */
  #fifo: (OutFrame | undefined)[] = [];
  #head = 0;
  #queued = 0;
  #requestBytes = 0;
  #dataBytes = 0;
  #controlBytes = 0;

  constructor(private readonly limits: OutboundLimits) {}

  /** Data bytes (requests and replies) queued or in flight, overhead included. */
  get dataBytes(): number {
    return this.#dataBytes;
  }

  get requestBytes(): number {
    return this.#requestBytes;
  }

  get controlBytes(): number {
    return this.#controlBytes;
  }

  /** Frames waiting to be written (in-flight ones excluded). */
  get length(): number {
    return this.#queued + (this.#heartbeat ? 1 : 0) + (this.#heartbeatAnswer ? 1 : 0);
  }

  /** True when a heartbeat is waiting (so a tick does not queue a second). */
  get heartbeatQueued(): boolean {
    return this.#heartbeat !== undefined;
  }

  /** Queue a request, reply or control frame under its class's room. */
  offer(frame: OutFrame): OfferResult {
    const charge = frame.bytes + FRAME_OVERHEAD;
    switch (frame.cls) {
      case 'control':
        if (this.#controlBytes > 0 && this.#controlBytes + charge > this.limits.controlBytes) return 'overflow';
        this.#controlBytes += charge;
        break;
      case 'request':
        if (
          this.#dataBytes > 0 &&
          (this.#requestBytes + charge > this.limits.requestBytes ||
            this.#dataBytes + charge > this.limits.connectionBytes)
        ) {
          return 'queue-full';
        }
        this.#requestBytes += charge;
        this.#dataBytes += charge;
        break;
      case 'reply':
        if (this.#dataBytes > 0 && this.#dataBytes + charge > this.limits.connectionBytes) return 'queue-full';
        this.#dataBytes += charge;
        break;
      case 'heartbeat':
        throw new Error('heartbeats go through offerHeartbeat');
    }
    this.#fifo.push(frame);
    this.#queued++;
    return 'queued';
  }

  /** Queue a heartbeat (answer = false) or a heartbeat answer ahead of the data; false when one is already waiting. */
  offerHeartbeat(frame: OutFrame, answer: boolean): boolean {
    if (answer) {
      if (this.#heartbeatAnswer) return false;
      this.#heartbeatAnswer = frame;
    } else {
      if (this.#heartbeat) return false;
      this.#heartbeat = frame;
    }
    return true;
  }

  /** The next frame to write; it stays charged until done(). */
  next(): OutFrame | undefined {
    if (this.#heartbeatAnswer) {
      const f = this.#heartbeatAnswer;
      this.#heartbeatAnswer = undefined;
      return f;
    }
    if (this.#heartbeat) {
      const f = this.#heartbeat;
      this.#heartbeat = undefined;
      return f;
    }
    while (this.#head < this.#fifo.length) {
      const f = this.#fifo[this.#head];
      this.#fifo[this.#head] = undefined;
      this.#head++;
      if (f) {
        this.#queued--;
        this.#compact();
        return f;
      }
    }
    this.#compact();
    return undefined;
  }

  /** The kernel has the frame (or it was dropped): release its charge. */
  done(frame: OutFrame): void {
    frame.onDone?.();
    const charge = frame.bytes + FRAME_OVERHEAD;
    switch (frame.cls) {
      case 'control':
        this.#controlBytes -= charge;
        break;
      case 'request':
        this.#requestBytes -= charge;
        this.#dataBytes -= charge;
        break;
      case 'reply':
        this.#dataBytes -= charge;
        break;
      case 'heartbeat':
        break;
    }
  }

  /** Remove the queued (not yet written) data frames carrying `tag`; returns how many. */
  takeBack(tag: number): number {
    let n = 0;
    for (let i = this.#head; i < this.#fifo.length; i++) {
      const f = this.#fifo[i];
      if (f && f.tag === tag && f.cls !== 'control') {
        this.#fifo[i] = undefined;
        this.#queued--;
        this.done(f);
        n++;
      }
    }
    return n;
  }

  /** Drop everything queued (the connection is gone). In-flight frames are released by their owner. */
  clear(): void {
    for (let i = this.#head; i < this.#fifo.length; i++) {
      const f = this.#fifo[i];
      if (f) this.done(f);
    }
    this.#fifo = [];
    this.#head = 0;
    this.#queued = 0;
    this.#heartbeat = undefined;
    this.#heartbeatAnswer = undefined;
  }

  #compact(): void {
    if (this.#queued === 0) {
      this.#fifo.length = 0;
      this.#head = 0;
    } else if (this.#head >= 1024 && this.#head * 2 >= this.#fifo.length) {
      this.#fifo = this.#fifo.slice(this.#head);
      this.#head = 0;
    }
  }
}
