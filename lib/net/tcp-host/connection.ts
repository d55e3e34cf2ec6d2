// One TCP connection of the S3 store's endpoint, passive side only, as a
// stream.Duplex (so Node's http.Server can take it through
// `server.emit('connection', duplex)`). The link is a lossless emulated
// wire, so this is deliberately small: in-order data only (a segment that
// is not the next expected one is dropped and answered with an ACK),
// cumulative ACKs, go-back-N from the oldest unacknowledged byte on one
// retransmit timer, FIN both ways, no congestion control, SACK or
// reassembly. Buffers are bounded both ways: the receive window is what is
// left of `rxLimit` after what the reader has not taken yet (scaled, RFC
// 7323, when the peer offers scaling), and a write's callback waits while
// more than `txLimit` bytes are unacknowledged; at most `txLimit` bytes are
// in flight, however large the peer's window. Data is acknowledged when the
// stack says (at once, or once at the end of the device's pass over the
// guest's TX ring); segments are built straight from the queued writes.

import { Duplex } from 'stream';
import { TCP_FLAG_ACK, TCP_FLAG_FIN, TCP_FLAG_PSH, TCP_FLAG_RST, TCP_FLAG_SYN } from '../headers';

const enum TcpState {
  SYN_RCVD,
  ESTABLISHED,
  CLOSE_WAIT,
  LAST_ACK,
  FIN_WAIT_1,
  FIN_WAIT_2,
  CLOSING,
  CLOSED,
}

/** What a connection needs from its stack: emit a segment, and forget the connection. */
export interface ConnectionHost {
  /** Emit a segment whose payload is the connection's queued bytes [dataAt, dataAt + dataLen) counted from sndUna (copyOut). */
  emitSegment(
    c: TcpConnection,
    seq: number,
    flags: number,
    dataAt: number,
    dataLen: number,
    mss?: number,
    wscale?: number,
  ): void;
  /** Data arrived: true when its ACK is left for later (the stack then calls ackOwed), false to send it now. */
  ackLater(c: TcpConnection): boolean;
  forget(c: TcpConnection): void;
  /** Run `fn` with output held until it returns (no re-entry through an answering peer). */
  run<T>(fn: () => T): T;
}

export interface ConnectionLimits {
  /** Our MSS (bytes of payload per segment we accept and send at most). */
  readonly mss: number;
  /** Receive buffer (and largest window advertised), bytes; above 65535 only a peer that scales windows sees it all. */
  readonly rxLimit: number;
  /** Unacknowledged plus unsent bytes before a write waits. */
  readonly txLimit: number;
  /** First retransmit timeout, ms; doubled per retry up to rtoMax. */
  readonly rto: number;
  readonly rtoMax: number;
  /** Retransmits of the same data before the connection is reset. */
  readonly retries: number;
}

/** Smallest MSS honoured from a peer (RFC 1122). */
const MIN_PEER_MSS = 536;
/** Largest window-scale shift (RFC 7323 2.3). */
const MAX_WSCALE = 14;

/** The smallest shift that puts `limit` bytes of window in the 16-bit field. */
function windowShiftFor(limit: number): number {
  let shift = 0;
  while (shift < MAX_WSCALE && limit / 2 ** shift > 0xffff) shift++;
  return shift;
}

/** a - b in sequence space, as a signed 32-bit number. */
function seqDiff(a: number, b: number): number {
  return (a - b) | 0;
}

function seqAdd(a: number, n: number): number {
  return (a + n) >>> 0;
}

export class TcpConnection extends Duplex {
  state = TcpState.SYN_RCVD;
  readonly remoteAddress: string;
  readonly remotePort: number;
  readonly localAddress: string;
  readonly localPort: number;
  readonly remoteFamily = 'IPv4';
  /** The peer's MAC and IPv4 address (frame builders need them). */
  readonly peerMac: Buffer;
  readonly peerIp: Buffer;

  readonly #host: ConnectionHost;
  readonly #limits: ConnectionLimits;
  readonly #sendMss: number;
  /** Our initial sequence number; sndUna..sndNxt is in flight. */
  #sndUna: number;
  #sndNxt: number;
  #sndWnd: number;
  /** The peer's window-scale shift (RFC 7323), 0 when it did not offer scaling. */
  readonly #sndShift: number;
  /** Ours: what rxLimit needs, 0 when the peer did not offer scaling. */
  readonly #rcvShift: number;
  readonly #scaling: boolean;
  /** Data arrived whose ACK the stack holds until the end of the device's pass. */
  #ackOwed = false;
  #rcvNxt: number;
  /** Bytes from sndUna on: acknowledged ones are dropped from the front. */
  #txQueue: Buffer[] = [];
  #txBytes = 0;
  /** The callback of a write that waits for room below txLimit. */
  #pendingWrite: (() => void) | null = null;
  #finQueued = false;
  #finSent = false;
  #finAcked = false;
  #finalCallback: ((err?: Error | null) => void) | null = null;
  #timer: NodeJS.Timeout | null = null;
  #rtoNow: number;
  #retries = 0;
  #lastAdvertised = 0;
  #windowCheck = false;
  #idleMs = 0;
  #idleTimer: NodeJS.Timeout | null = null;
  /** Counters for tests and stats. */
  readonly counts = { segmentsIn: 0, segmentsOut: 0, retransmits: 0, dropped: 0 };

  constructor(
    host: ConnectionHost,
    limits: ConnectionLimits,
    peerMac: Buffer,
    peerIp: Buffer,
    peerPort: number,
    localIp: Buffer,
    localPort: number,
    iss: number,
    peerSeq: number,
    peerMss: number,
    peerWindow: number,
    peerWscale = -1,
  ) {
    super({ allowHalfOpen: true, readableHighWaterMark: limits.rxLimit, writableHighWaterMark: limits.txLimit });
    this.#host = host;
    this.#limits = limits;
    this.peerMac = Buffer.from(peerMac);
    this.peerIp = Buffer.from(peerIp);
    this.remoteAddress = [...peerIp].join('.');
    this.remotePort = peerPort;
    this.localAddress = [...localIp].join('.');
    this.localPort = localPort;
    this.#sendMss = Math.min(limits.mss, Math.max(MIN_PEER_MSS, peerMss || MIN_PEER_MSS));
    this.#sndUna = iss >>> 0;
    this.#sndNxt = seqAdd(iss, 1); // the SYN
    this.#sndWnd = peerWindow; // a SYN's window is never scaled
    this.#scaling = peerWscale >= 0;
    this.#sndShift = this.#scaling ? peerWscale : 0;
    this.#rcvShift = this.#scaling ? windowShiftFor(limits.rxLimit) : 0;
    this.#rcvNxt = seqAdd(peerSeq, 1);
    this.#rtoNow = limits.rto;
    this.#sendSynAck();
  }

  get sendMss(): number {
    return this.#sendMss;
  }

  // net.Socket look-alikes that http.Server calls.
  setNoDelay(): this {
    return this;
  }
  setKeepAlive(): this {
    return this;
  }
  /** net.Socket's idle timeout: 'timeout' after `ms` without a segment in or data written (0 turns it off). http.Server's keep-alive and request timeouts use it. */
  setTimeout(ms: number, cb?: () => void): this {
    this.#idleMs = ms > 0 ? ms : 0;
    if (cb) this.once('timeout', cb);
    this.#touch();
    return this;
  }

  #touch(): void {
    if (this.#idleTimer) clearTimeout(this.#idleTimer);
    this.#idleTimer = null;
    if (this.#idleMs === 0 || this.state === TcpState.CLOSED) return;
    this.#idleTimer = setTimeout(() => {
      this.#idleTimer = null;
      this.emit('timeout');
    }, this.#idleMs);
    this.#idleTimer.unref();
  }
  ref(): this {
    return this;
  }
  unref(): this {
    return this;
  }

  /** Bytes the peer may send: what is left of rxLimit (at most 64 KiB without scaling). */
  #window(): number {
    const room = Math.max(0, this.#limits.rxLimit - this.readableLength);
    return this.#scaling ? room : Math.min(0xffff, room);
  }

  #emit(seq: number, flags: number, dataAt = 0, dataLen = 0, mss?: number, wscale?: number): void {
    // A SYN's window is never scaled (RFC 7323 2.2); the others carry the window >> our shift.
    // 1 << shift, not 2 ** shift: the shift is at most 14, and a power with a variable exponent is a Math.pow call per segment.
    const scale = flags & TCP_FLAG_SYN ? 1 : 1 << this.#rcvShift;
    this.#windowField = Math.min(0xffff, Math.floor(this.#window() / scale));
    this.#lastAdvertised = this.#windowField * scale;
    this.#ackOwed = false; // every segment carries the latest acknowledgment
    this.counts.segmentsOut++;
    this.#host.emitSegment(this, seq, flags, dataAt, dataLen, mss, wscale);
  }

  #windowField = 0;

  /** The acknowledgment number we send. */
  get rcvNxt(): number {
    return this.#rcvNxt;
  }
  /** The window field of the segment being emitted (scaled down by our shift). */
  get windowField(): number {
    return this.#windowField;
  }
  /** The window last advertised, bytes. */
  get advertisedWindow(): number {
    return this.#lastAdvertised;
  }

  /** Copy the queued bytes [from, from + n) counted from sndUna to out[at, ...) (the stack builds a segment). */
  copyOut(from: number, n: number, out: Buffer, at: number): void {
    let skip = from;
    let put = at;
    let left = n;
    for (const b of this.#txQueue) {
      if (skip >= b.length) {
        skip -= b.length;
        continue;
      }
      const take = Math.min(b.length - skip, left);
      b.copy(out, put, skip, skip + take);
      put += take;
      left -= take;
      skip = 0;
      if (left === 0) return;
    }
  }

  #sendSynAck(): void {
    // Scaling is on only when both SYNs carry the option.
    this.#emit(
      this.#sndUna,
      TCP_FLAG_SYN | TCP_FLAG_ACK,
      0,
      0,
      this.#limits.mss,
      this.#scaling ? this.#rcvShift : undefined,
    );
    this.#armTimer();
  }

  /** The stack held this connection's data ACK until the end of the device's pass: send it, unless a segment since carried it. */
  ackOwed(): void {
    if (this.#ackOwed && this.state !== TcpState.CLOSED) this.#sendAck();
  }

  #sendAck(): void {
    this.#emit(this.#sndNxt, TCP_FLAG_ACK);
  }

  /** One received segment for this connection (already matched by addresses and ports). */
  input(flags: number, seq: number, ack: number, window: number, payload: Buffer): void {
    this.counts.segmentsIn++;
    if (this.#idleTimer) this.#touch();
    if (flags & TCP_FLAG_RST) {
      // Accept a reset only inside the window (RFC 5961's simple form: exactly at rcvNxt or within the window).
      const off = seqDiff(seq, this.#rcvNxt);
      if (off >= 0 && off <= Math.max(1, this.#window()))
        this.#teardown(Object.assign(new Error('connection reset by peer'), { code: 'ECONNRESET' }));
      return;
    }
    if (flags & TCP_FLAG_SYN) {
      // A repeated SYN of the handshake: answer it again; anything else is out of place.
      if (this.state === TcpState.SYN_RCVD && seqAdd(seq, 1) === this.#rcvNxt) this.#sendSynAck();
      else this.#sendAck();
      return;
    }
    if (!(flags & TCP_FLAG_ACK)) return;
    if (!this.#onAck(ack, window)) return;
    this.#onData(flags, seq, payload);
  }

  /** Process an acknowledgment; false when the segment must go no further. */
  #onAck(ack: number, window: number): boolean {
    const acked = seqDiff(ack, this.#sndUna);
    const ahead = seqDiff(ack, this.#sndNxt);
    if (ahead > 0) {
      // acknowledges something never sent
      this.#sendAck();
      return false;
    }
    this.#sndWnd = window * (1 << this.#sndShift); // what is in flight stays bounded by txLimit (the writable side)
    if (this.state === TcpState.SYN_RCVD) {
      if (acked !== 1) {
        // not our SYN-ACK's acknowledgment: a reset at the sequence it names (RFC 793, SYN-RECEIVED)
        this.#host.emitSegment(this, ack, TCP_FLAG_RST, 0, 0);
        return false;
      }
      this.#sndUna = ack;
      this.state = TcpState.ESTABLISHED;
      this.#clearTimer();
      this.emit('tcp-established');
      this.#pump();
      return true;
    }
    if (acked > 0) {
      const finAcked = this.#finSent && ack === this.#sndNxt;
      this.#dropAcked(finAcked ? acked - 1 : acked); // the FIN takes a sequence number, not a byte
      this.#sndUna = ack;
      this.#retries = 0;
      this.#rtoNow = this.#limits.rto;
      // New data acknowledged: restart the timer for what is still out (RFC 6298 5.3).
      if (this.#sndUna === this.#sndNxt) this.#clearTimer();
      else this.#armTimer();
      if (finAcked) {
        this.#finAcked = true;
        this.#onFinAcked();
      }
    }
    if (this.state !== TcpState.CLOSED) this.#pump();
    // Last, on consistent state: a writer freed here writes (and pumps) at once, inside this call. Freed inside
    // #dropAcked, before sndUna moved, it sent bytes from the wrong offset of the queue at sndNxt.
    this.#releaseWriter();
    return this.state !== TcpState.CLOSED;
  }

  #dropAcked(n: number): void {
    this.#txBytes -= n;
    while (n > 0 && this.#txQueue.length > 0) {
      const head = this.#txQueue[0]!;
      if (head.length <= n) {
        n -= head.length;
        this.#txQueue.shift();
      } else {
        this.#txQueue[0] = head.subarray(n);
        n = 0;
      }
    }
  }

  #onFinAcked(): void {
    switch (this.state) {
      case TcpState.FIN_WAIT_1:
        this.state = TcpState.FIN_WAIT_2;
        break;
      case TcpState.CLOSING:
      case TcpState.LAST_ACK:
        this.#teardown(null);
        break;
      default:
        break;
    }
    const cb = this.#finalCallback;
    this.#finalCallback = null;
    cb?.();
  }

  #onData(flags: number, seq: number, payload: Buffer): void {
    const receiving =
      this.state === TcpState.ESTABLISHED || this.state === TcpState.FIN_WAIT_1 || this.state === TcpState.FIN_WAIT_2;
    const fin = (flags & TCP_FLAG_FIN) !== 0;
    if (payload.length === 0 && !fin) return;
    if (!receiving) {
      // data or FIN after the peer's FIN: a retransmission; acknowledge again
      this.#sendAck();
      return;
    }
    let data = payload;
    let off = seqDiff(this.#rcvNxt, seq);
    if (off < 0) {
      // a gap: in-order only
      this.counts.dropped++;
      this.#sendAck();
      return;
    }
    if (off > data.length || (off === data.length && !fin)) {
      // entirely old
      this.#sendAck();
      return;
    }
    data = data.subarray(off);
    off = 0;
    const room = this.#window();
    let finInWindow = fin;
    if (data.length > room) {
      this.counts.dropped++;
      data = data.subarray(0, room);
      finInWindow = false;
    }
    if (data.length > 0) {
      this.#rcvNxt = seqAdd(this.#rcvNxt, data.length);
      this.push(Buffer.from(data));
    }
    if (finInWindow) {
      this.#rcvNxt = seqAdd(this.#rcvNxt, 1);
      this.push(null);
      if (this.state === TcpState.ESTABLISHED) this.state = TcpState.CLOSE_WAIT;
      else if (this.state === TcpState.FIN_WAIT_1) this.state = TcpState.CLOSING;
      else if (this.state === TcpState.FIN_WAIT_2) {
        this.#sendAck();
        this.#teardown(null);
        return;
      }
    }
    // In-order data: acknowledged now, or once for the whole burst when the stack holds it (a FIN at once).
    if (finInWindow || !this.#host.ackLater(this)) this.#sendAck();
    else this.#ackOwed = true;
  }

  /** Send what the peer's window and our MSS allow, then the FIN when everything before it is out. */
  #pump(): void {
    if (this.state === TcpState.SYN_RCVD || this.state === TcpState.CLOSED) return;
    if (this.#finAcked) return;
    let inFlight = seqDiff(this.#sndNxt, this.#sndUna) - (this.#finSent ? 1 : 0);
    // At most txLimit in flight, whatever window the peer offers: a guest's window scale makes that up to
    // 1 GiB, and every segment of it would be built in this one call.
    const wnd = Math.min(this.#sndWnd, this.#limits.txLimit);
    while (inFlight < this.#txBytes) {
      const room = wnd - inFlight;
      if (room <= 0) break;
      const n = Math.min(this.#sendMss, room, this.#txBytes - inFlight);
      const last = inFlight + n === this.#txBytes;
      this.#emit(this.#sndNxt, TCP_FLAG_ACK | (last ? TCP_FLAG_PSH : 0), inFlight, n);
      this.#sndNxt = seqAdd(this.#sndNxt, n);
      inFlight += n;
      this.#armTimer(true);
    }
    if (this.#finQueued && !this.#finSent && inFlight === this.#txBytes) {
      this.#emit(this.#sndNxt, TCP_FLAG_FIN | TCP_FLAG_ACK);
      this.#sndNxt = seqAdd(this.#sndNxt, 1);
      this.#finSent = true;
      this.state = this.state === TcpState.CLOSE_WAIT ? TcpState.LAST_ACK : TcpState.FIN_WAIT_1;
      this.#armTimer(true);
    }
  }

  #armTimer(keep = false): void {
    if (keep && this.#timer) return;
    this.#clearTimer();
    this.#timer = setTimeout(() => this.#host.run(() => this.#onTimeout()), this.#rtoNow);
    this.#timer.unref();
  }

  #clearTimer(): void {
    if (this.#timer) clearTimeout(this.#timer);
    this.#timer = null;
  }

  #onTimeout(): void {
    this.#timer = null;
    if (this.state === TcpState.CLOSED) return;
    if (++this.#retries > this.#limits.retries) {
      this.#reset(Object.assign(new Error('retransmit limit reached'), { code: 'ETIMEDOUT' }));
      return;
    }
    this.counts.retransmits++;
    this.#rtoNow = Math.min(this.#rtoNow * 2, this.#limits.rtoMax);
    if (this.state === TcpState.SYN_RCVD) {
      this.#sendSynAck();
      return;
    }
    // Go back to the oldest unacknowledged byte and send again from there.
    this.#sndNxt = this.#sndUna;
    this.#finSent = false;
    if (this.state === TcpState.FIN_WAIT_1) this.state = TcpState.ESTABLISHED;
    else if (this.state === TcpState.LAST_ACK || this.state === TcpState.CLOSING) this.state = TcpState.CLOSE_WAIT;
    const before = this.#sndWnd;
    if (this.#sndWnd === 0) this.#sndWnd = 1; // a zero window probe
    this.#pump();
    this.#sndWnd = before;
    if (!this.#timer && this.#sndUna !== this.#sndNxt) this.#armTimer();
  }

  #releaseWriter(): void {
    if (this.#pendingWrite && this.#txBytes <= this.#limits.txLimit) {
      const cb = this.#pendingWrite;
      this.#pendingWrite = null;
      cb();
    }
  }

  override _write(chunk: Buffer, _enc: BufferEncoding, cb: (err?: Error | null) => void): void {
    if (this.state === TcpState.CLOSED || this.#finQueued) {
      cb(Object.assign(new Error('connection closed'), { code: 'EPIPE' }));
      return;
    }
    this.#txQueue.push(chunk);
    this.#txBytes += chunk.length;
    if (this.#idleTimer) this.#touch();
    if (this.#txBytes <= this.#limits.txLimit) cb();
    else this.#pendingWrite = () => cb();
    this.#host.run(() => this.#pump());
  }

  override _final(cb: (err?: Error | null) => void): void {
    if (this.state === TcpState.CLOSED) {
      cb();
      return;
    }
    this.#finQueued = true;
    this.#finalCallback = cb;
    this.#host.run(() => this.#pump());
  }

  override _read(): void {
    // The reader wants more. Readable calls this before it takes the data out
    // of the buffer, so look at the window once that has happened.
    if (this.#windowCheck) return;
    this.#windowCheck = true;
    queueMicrotask(() => {
      this.#windowCheck = false;
      this.#host.run(() => this.#windowUpdate());
    });
  }

  /** Tell the peer the window opened, once it grew by an MSS or half the buffer (receiver-side SWS avoidance, RFC 1122 4.2.3.3). */
  #windowUpdate(): void {
    if (this.state === TcpState.CLOSED || this.state === TcpState.SYN_RCVD) return;
    const now = this.#window();
    if (now - this.#lastAdvertised >= Math.min(this.#sendMss, this.#limits.rxLimit / 2)) this.#sendAck();
  }

  override _destroy(err: Error | null, cb: (err?: Error | null) => void): void {
    if (this.state !== TcpState.CLOSED) this.#host.run(() => this.#reset(null));
    cb(err);
  }

  /** Abort: send RST and forget the connection. */
  #reset(err: Error | null): void {
    if (this.state !== TcpState.CLOSED) this.#emit(this.#sndNxt, TCP_FLAG_RST | TCP_FLAG_ACK);
    this.#teardown(err);
  }

  #teardown(err: Error | null): void {
    if (this.state === TcpState.CLOSED) return;
    this.state = TcpState.CLOSED;
    this.#clearTimer();
    this.#idleMs = 0;
    this.#touch();
    this.#host.forget(this);
    const pending = this.#pendingWrite;
    this.#pendingWrite = null;
    const fin = this.#finalCallback;
    this.#finalCallback = null;
    if (err) {
      // A peer that stops answering is not our bug: with nobody listening for 'error' the stream just closes
      // (an unhandled 'error' would end the process). That goes for the end() callback too: Writable
      // emits what it is given.
      const shown = this.listenerCount('error') > 0 ? err : undefined;
      pending?.();
      fin?.(shown);
      if (!this.destroyed) this.destroy(shown);
    } else {
      pending?.();
      fin?.();
      // Both directions are done; autoDestroy frees the stream once the reader has taken the rest.
    }
  }
}
