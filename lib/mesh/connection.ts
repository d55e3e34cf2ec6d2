// One TCP connection of the mesh: a socket, the frame parser reading it, and
// the send queue writing it. This replaces the C rocm-ernic's receive and send
// threads of a connection with event handlers:
//
// - receive: every 'data' chunk goes through the parser; each frame goes to
//   the owner, which may refuse it for want of room (inbound queue, relay
//   destination): then the socket is paused until the owner calls unhold(),
//   so TCP pushes back on the sender and nothing is buffered without bound.
// - send: queued frames are handed to the socket corked, up to
//   WRITE_BATCH_BYTES at a time (one writev), then again on 'drain'. A send
//   timer runs while anything is outstanding and is pushed back on each write
//   completion: when nothing has gone out for the send timeout, the
//   connection is shut down as if the peer had hung up.
//
// Every close, whatever its cause, goes through close(reason) once and tells
// the owner once.

import { READ_SINK, SocketWithSink } from './dial';
import { MAX_HELD_CHUNK_BYTES, WRITE_BATCH_BYTES } from './limits';
import * as net from 'node:net';
import { MeshError } from './errors';
import { FrameParser, Placement } from './frame-parser';
import { FrameHeader } from './messages';
import { OfferResult, OutboundLimits, OutboundQueue, OutFrame } from './outbound-queue';

export interface ConnectionOwner {
  /** A checked frame. Return false to hold it (the socket pauses until unhold()). */
  onFrame(conn: MeshConnection, header: FrameHeader, body: Buffer, placed: number): boolean;
  /** A large frame's head: where the rest of its body may be written (FrameSink.place), or null. */
  place(conn: MeshConnection, header: FrameHeader, head: Buffer): Placement | null;
  /** The parser refused the stream; the connection is about to close with this reason. */
  onProtocolError(conn: MeshConnection, error: MeshError): void;
  /** Closed, once, for `reason`. */
  onClose(conn: MeshConnection, reason: string): void;
  /** Send room appeared after a refused offer. */
  onWritable(conn: MeshConnection): void;
}

/** What a connection is to us. */
export type LinkKind =
  /** Accepted, nothing known yet. */
  | 'pending'
  /** On the manager: a worker's registration link. */
  | 'worker'
  /** On a worker: its link to the manager. */
  | 'manager'
  /** A direct link between two workers. */
  | 'peer';

interface ConnectionOptions {
  readonly sendTimeoutMs: number;
  readonly limits: OutboundLimits;
  readonly kind: LinkKind;
  /** True when we dialled (lower id to higher, or worker to manager). */
  readonly outgoing: boolean;
  /**
   * A TLS socket whose handshake is still running: nothing is read or
   * written until open() (frames sent before wait in the queue).
   */
  readonly gated?: boolean;
}

let nextSerial = 1;

export class MeshConnection {
  /** Local serial for logs. */
  readonly serial = nextSerial++;
  readonly outbound: OutboundQueue;
  readonly parser: FrameParser;
  readonly outgoing: boolean;
  /** "addr:port" of the far end, for logs. */
  readonly remote: string;
  readonly remoteAddress: string;
  kind: LinkKind;
  /** The far end's node id once it registered or handshook. */
  peerId: number | undefined;
  /** The far end's instance nonce once known. */
  peerInstance: string | undefined;
  /** Registered (worker link), registration accepted (manager link), or handshake done (peer link). */
  established = false;
  /** Date.now() when the connection opened (a link that never establishes is closed). */
  readonly openedAt = Date.now();
  /** Date.now() when the last byte arrived (a link silent for three intervals is dead). */
  lastHeardAt = this.openedAt;
  /** Connections held (paused) until this one has room: relay sources waiting on a destination. */
  readonly roomWaiters = new Set<MeshConnection>();

  #closed = false;
  #closeReason = '';
  readonly #inflight: OutFrame[] = [];
  #sendTimer: NodeJS.Timeout | undefined;
  #wantWritable = false;
  #writableScheduled = false;
  #endAfterFlush = false;
  #bytesIn = 0;
  #bytesOut = 0;
  #gated: boolean;

  constructor(
    readonly socket: net.Socket,
    private readonly owner: ConnectionOwner,
    private readonly opts: ConnectionOptions,
  ) {
    this.kind = opts.kind;
    this.outgoing = opts.outgoing;
    this.outbound = new OutboundQueue(opts.limits);
    this.remoteAddress = socket.remoteAddress ?? '?';
    this.remote = `${this.remoteAddress.includes(':') ? `[${this.remoteAddress}]` : this.remoteAddress}:${socket.remotePort ?? '?'}`;
    this.#gated = opts.gated === true;
    const sink = (socket as SocketWithSink)[READ_SINK];
    this.parser = new FrameParser(
      {
        onFrame: (h, b, placed) => this.#onFrame(h, b, placed),
        onError: (e) => this.#onParseError(e),
        place: (h, head) => (this.#closed ? null : this.owner.place(this, h, head)),
      },
      MAX_HELD_CHUNK_BYTES,
      sink !== undefined,
    );
    socket.setNoDelay(true);
    if (!this.#gated) this.#attachReads();
    socket.on('drain', () => this.pump());
    socket.on('error', (err: NodeJS.ErrnoException) => this.close(`socket error: ${err.code ?? err.message}`));
    socket.on('end', () => this.close('peer hung up'));
    socket.on('close', () => this.close('connection closed'));
  }

  /** The parser starts here: at once, or (gated) once the TLS handshake is done and the peer checked. */
  #attachReads(): void {
    const sink = (this.socket as SocketWithSink)[READ_SINK];
    if (sink) {
      sink.fn = (chunk) => this.#onData(chunk);
      sink.target = () => (this.#closed ? null : this.parser.inPlaceTarget());
      sink.inPlace = (n) => this.#onDataInPlace(n);
      sink.limit = () => (this.#closed ? 0 : this.parser.headReadLimit());
      const early = sink.early.chunks.splice(0);
      sink.early.bytes = 0;
      for (const chunk of early) this.#onData(chunk);
    } else this.socket.on('data', (chunk: Buffer) => this.#onData(chunk));
  }

  /** The peer is authenticated: read and write from now on. */
  open(): void {
    if (!this.#gated || this.#closed) return;
    this.#gated = false;
    this.#attachReads();
    this.pump();
  }

  /** True until open() on a connection made gated. */
  get gated(): boolean {
    return this.#gated;
  }

  get closed(): boolean {
    return this.#closed;
  }

  get closeReason(): string {
    return this.#closeReason;
  }

  /** True while reading is paused because a frame waits for room. */
  get held(): boolean {
    return this.parser.held;
  }

  get bytesIn(): number {
    return this.#bytesIn;
  }

  get bytesOut(): number {
    return this.#bytesOut;
  }

  /** Frames handed to the socket whose write has not completed. */
  get inflight(): number {
    return this.#inflight.length;
  }

  /** A short name for logs: "node 3 (peer, 127.0.0.1:4000)". */
  describe(): string {
    const who = this.peerId === undefined ? 'unregistered' : `node ${this.peerId}`;
    return `${who} (${this.kind}, ${this.remote})`;
  }

  // -------------------------------------------------------------------------
  // Sending

  /** Queue a frame and start writing. 'closed' when the connection is gone. */
  send(frame: OutFrame): OfferResult | 'closed' {
    if (this.#closed || this.#endAfterFlush) return 'closed';
    const r = this.outbound.offer(frame);
    if (r === 'queued') this.#pumpSoon();
    else if (r === 'queue-full') this.#wantWritable = true;
    return r;
  }

  /** Queue a heartbeat or an answer ahead of the data; false when one is already waiting. */
  sendHeartbeat(frame: OutFrame, answer: boolean): boolean {
    if (this.#closed) return false;
    const queued = this.outbound.offerHeartbeat(frame, answer);
    if (queued) this.#pumpSoon();
    return queued;
  }

  /**
   * Pump once the current callback is done (a microtask): the frames a
   * doorbell's WQEs queue one by one then go out in one writev.
   */
  #pumpSoon(): void {
    if (this.#pumpQueued) return;
    this.#pumpQueued = true;
    queueMicrotask(this.#pumpTask);
  }

  #pumpQueued = false;
  readonly #pumpTask = (): void => {
    this.#pumpQueued = false;
    this.pump();
  };

  /**
   * Write what the socket will take now: queued frames, corked, until
   * WRITE_BATCH_BYTES wait in it (one writev for all of them). A socket that
   * buffers past its high-water mark says so ('drain' pumps again).
   */
  pump(): void {
    if (this.#gated) return;
    const s = this.socket;
    let corked = false;
    while (!this.#closed && s.writableLength < WRITE_BATCH_BYTES) {
      const f = this.outbound.next();
      if (!f) break;
      if (!corked) {
        s.cork();
        corked = true;
      }
      this.#inflight.push(f);
      const last = f.parts.length - 1;
      for (let i = 0; i < last; i++) s.write(f.parts[i]!);
      s.write(f.parts[last]!, this.#onWritten);
    }
    if (corked) s.uncork();
    this.#armSendTimer();
  }

  /** Remove queued frames carrying `tag`. */
  takeBack(tag: number): number {
    const n = this.outbound.takeBack(tag);
    if (n > 0) this.#noteRoom();
    return n;
  }

  /** Close once what is queued has been written (a refusal reply); the send timeout still applies. */
  endAfterFlush(reason: string): void {
    if (this.#closed) return;
    this.#endAfterFlush = true;
    this.#closeReason = reason;
    this.#maybeEnd();
  }

  readonly #onWritten = (err?: Error | null): void => {
    const f = this.#inflight.shift();
    if (this.#closed) return;
    if (f) {
      this.outbound.done(f);
      this.#bytesOut += f.bytes;
    }
    if (err) {
      this.close(`write failed: ${err.message}`);
      return;
    }
    this.#sendTimer?.refresh();
    this.#noteRoom();
    this.#armSendTimer();
    this.#maybeEnd();
  };

  #maybeEnd(): void {
    if (this.#endAfterFlush && this.outbound.length === 0 && this.#inflight.length === 0 && !this.#closed) {
      this.socket.end();
    }
  }

  #noteRoom(): void {
    if ((!this.#wantWritable && this.roomWaiters.size === 0) || this.#writableScheduled) return;
    this.#writableScheduled = true;
    setImmediate(this.#announceRoom);
  }

  readonly #announceRoom = (): void => {
    this.#writableScheduled = false;
    if (this.#closed) return;
    this.#wantWritable = false;
    this.owner.onWritable(this);
  };

  #armSendTimer(): void {
    const outstanding = this.outbound.length > 0 || this.#inflight.length > 0;
    if (!outstanding) {
      if (this.#sendTimer) {
        clearTimeout(this.#sendTimer);
        this.#sendTimer = undefined;
      }
      return;
    }
    if (this.#sendTimer) return;
    this.#sendTimer = setTimeout(this.#onSendTimeout, this.opts.sendTimeoutMs);
    this.#sendTimer.unref();
  }

  readonly #onSendTimeout = (): void => {
    this.#sendTimer = undefined;
    if (this.#closed) return;
    if (this.outbound.length > 0 || this.#inflight.length > 0) {
      this.close(`send timeout: nothing written for ${this.opts.sendTimeoutMs} ms`);
    }
  };

  // -------------------------------------------------------------------------
  // Receiving

  #onData(chunk: Buffer): void {
    if (this.#closed) return;
    this.#bytesIn += chunk.length;
    this.lastHeardAt = Date.now();
    this.parser.push(chunk);
    if (this.parser.held && !this.#closed) this.socket.pause();
  }

  /** `n` bytes were read straight into the frame body the parser is assembling. */
  #onDataInPlace(n: number): void {
    if (this.#closed) return;
    this.#bytesIn += n;
    this.lastHeardAt = Date.now();
    this.parser.filledInPlace(n);
    if (this.parser.held && !this.#closed) this.socket.pause();
  }

  #onFrame(header: FrameHeader, body: Buffer, placed: number): boolean {
    if (this.#closed) return false;
    const taken = this.owner.onFrame(this, header, body, placed);
    if (!taken && !this.#closed) this.socket.pause();
    return taken;
  }

  #onParseError(error: MeshError): void {
    this.owner.onProtocolError(this, error);
    this.close(`protocol error ${error.code}: ${error.detail}`);
  }

  /** Offer the held frame again; read on if it was taken. */
  unhold(): void {
    if (this.#closed || !this.parser.held) return;
    this.parser.resume();
    if (!this.#closed && !this.parser.held) this.socket.resume();
  }

  // -------------------------------------------------------------------------
  // Closing

  /** Close now (idempotent): drop what is queued, stop reading, tell the owner. */
  close(reason: string): void {
    if (this.#closed) return;
    this.#closed = true;
    if (!this.#endAfterFlush || this.#closeReason === '') this.#closeReason = reason;
    if (this.#sendTimer) {
      clearTimeout(this.#sendTimer);
      this.#sendTimer = undefined;
    }
    this.parser.destroy();
    // The socket first: once destroyed it writes nothing more, so what its
    // writes pointed at (pooled buffers, lent guest memory) may be let go.
    this.socket.destroy();
    this.outbound.clear();
    for (const f of this.#inflight.splice(0)) this.outbound.done(f);
    this.owner.onClose(this, this.#closeReason);
  }
}
