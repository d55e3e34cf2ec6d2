// One vfio-user stream socket: framing of messages with their fds, batched
// writes, backpressure. Shared by the server's connection and the client.
//
// Reading: recvmsg fills a receive buffer directly (no intermediate copy); the
// framer walks whole messages with a two-state machine (HEADER: need 16 bytes;
// BODY: need msg_size). Limits are checked as soon as a header is complete,
// before its body is buffered. A read shorter than the room offered means the
// socket was drained: we stop there (epoll is level triggered and reports the
// next bytes) instead of paying one more recvmsg for EAGAIN before replying.
//
// No allocation per message on the hot path (a vCPU waits on every MMIO read,
// and garbage means scavenges, each a pause of up to a millisecond): the
// header is a reused object; a small payload (every region access) is copied
// to a staging buffer and handed out as a view made once per length; the
// receive buffer rewinds to its start whenever it is drained; replies are sent
// straight from the writer's buffer.
//
// fds: Linux stops a stream read right after the skb that carried fds, and a
// sender attaches fds to the sendmsg() that carries the message. So the fds
// of one recvmsg belong to the message that contains the last byte of that
// read. We remember (stream position of that byte, fds) and hand the fds to
// the message whose range covers it. fds that arrive mid-body of a message
// therefore also stay with that message, never with a neighbour.
//
// Writing: replies are appended to `writer` and sent in one sendmsg at the
// end of a read pass (or at once by flush()). A short write queues a copy of
// the rest and waits for POLLOUT; while too much is queued we stop reading,
// so a peer that never reads cannot make us buffer without bound.

import * as fs from 'fs';
import { HEADER_SIZE, SCM_MAX_FD } from '../../protocol/limits';
import { MessageWriter } from '../../protocol/serializer';
import { vfio_user_header, getField } from '../../protocol/layouts';
import { ProtocolError, protocolError } from '../../protocol/errors';
import * as native from '../native';

/** The header fields of a received message (a reused object: copy what you keep). */
export interface RawHeader {
  id: number;
  command: number;
  size: number;
  flags: number;
  error: number;
}

export interface TransportHandler {
  /**
   * A whole message arrived. `payload` is a view into the receive buffer, valid
   * only during the call; `fds` are now owned by the handler, which must close
   * those it does not keep.
   */
  message(header: RawHeader, payload: Buffer, fds: number[]): void;
  /** The header broke a limit; the stream cannot be trusted past it and will be closed after this call. */
  badHeader(header: RawHeader, error: ProtocolError): void;
  /** The transport closed (EOF, error, or close()). Called once. */
  closed(reason: string): void;
}

interface TransportOptions {
  /** Largest message accepted (header included). */
  readonly maxMessageSize: number;
  /** Most fds accepted on one message; more close the connection's trust in the stream (see below). */
  readonly maxFdsPerMessage: number;
  /** Bytes queued for sending above which reading pauses. */
  readonly maxQueuedBytes?: number;
  /** Initial receive buffer size. */
  readonly receiveBufferSize?: number;
}

const enum FrameState {
  HEADER,
  BODY,
}

/** Reads per readiness event before yielding to other sockets (fairness). */
const READS_PER_EVENT = 32;
const DEFAULT_MAX_QUEUED = 16 << 20;
/** Payloads up to this size go through the staging buffer (region accesses of up to 32 data bytes). */
const STAGED_PAYLOAD = 64;

interface PendingFds {
  /** Stream position just past the byte the fds arrived with. */
  readonly end: number;
  readonly fds: number[];
}

export class Transport {
  readonly fd: number;
  /** Replies/commands are batched here and sent by flush(). */
  readonly writer = new MessageWriter(64 * 1024);
  readonly #handler: TransportHandler;
  readonly #opts: Required<TransportOptions>;
  #watcher: native.Watcher | null = null;
  #closed = false;

  // receive state
  #buf: Buffer;
  #start = 0;
  #end = 0;
  /** Stream position of #buf[0]. */
  #base = 0;
  #state = FrameState.HEADER;
  readonly #header: RawHeader = { id: 0, command: 0, size: 0, flags: 0, error: 0 };
  readonly #fdsOut = new Int32Array(SCM_MAX_FD + 1);
  /** Small payloads are copied here; #stagedViews[n] is its first n bytes. */
  readonly #staged = Buffer.alloc(STAGED_PAYLOAD);
  readonly #stagedViews: Buffer[] = [];
  #pending: PendingFds[] = [];
  #pendingCount = 0;

  // send state
  #queue: { data: Buffer; fds: number[] | null }[] = [];
  #queued = 0;
  #inDispatch = false;

  /** Counters for tests and stats. */
  readonly stats = { messagesIn: 0, bytesIn: 0, bytesOut: 0, reads: 0, sends: 0, fdsIn: 0 };

  constructor(fd: number, handler: TransportHandler, opts: TransportOptions) {
    this.fd = fd;
    this.#handler = handler;
    this.#opts = {
      maxMessageSize: opts.maxMessageSize,
      maxFdsPerMessage: opts.maxFdsPerMessage,
      maxQueuedBytes: opts.maxQueuedBytes ?? DEFAULT_MAX_QUEUED,
      receiveBufferSize: opts.receiveBufferSize ?? 256 * 1024,
    };
    this.#buf = Buffer.allocUnsafe(this.#opts.receiveBufferSize);
    // All made here: a path taken only on a connection's first messages would
    // cost that connection a deoptimization of the framing code.
    for (let n = 0; n <= STAGED_PAYLOAD; n++) this.#stagedViews.push(this.#staged.subarray(0, n));
  }

  get closed(): boolean {
    return this.#closed;
  }

  /** Start reading. */
  start(): void {
    if (this.#closed || this.#watcher) return;
    const self = this;
    this.#watcher = native.watch(this.fd, native.READABLE, function onReady(status: number, events: number) {
      self.#onReady(status, events);
    });
  }

  /** Send whatever is batched in `writer`. */
  flush(): void {
    const w = this.writer;
    if (this.#closed || w.length === 0) return;
    // Straight from the writer's buffer: a short write copies the rest into the queue.
    this.#send(w.buffer, w.length, null);
    w.clear();
  }

  /** Send one buffer with fds attached to its first byte (flushes the batch first, to keep order). */
  sendWithFds(data: Buffer, fds: readonly number[]): void {
    this.flush();
    if (this.#closed) return;
    this.#send(data, data.length, fds.length ? [...fds] : null);
  }

  /** Close the socket and every fd still held. The handler's closed() runs once. */
  close(reason = 'closed'): void {
    if (this.#closed) return;
    this.#closed = true;
    this.#watcher?.close();
    this.#watcher = null;
    for (const p of this.#pending) for (const fd of p.fds) closeQuietly(fd);
    this.#pending = [];
    this.#queue = [];
    this.#queued = 0;
    closeQuietly(this.fd);
    this.#handler.closed(reason);
  }

  // ---- receive ---------------------------------------------------------------

  #onReady(status: number, events: number): void {
    if (this.#closed) return;
    if (status < 0) {
      this.close(`poll error ${status}`);
      return;
    }
    if (events & native.WRITABLE) this.#drain();
    if (this.#closed) return;
    if (events & (native.READABLE | native.DISCONNECT)) this.#readSome();
  }

  #readSome(): void {
    this.#inDispatch = true;
    try {
      for (let i = 0; i < READS_PER_EVENT && !this.#closed && !this.#paused(); i++) {
        this.#reserveSpace();
        const room = this.#buf.length - this.#end;
        let n: number;
        try {
          n = native.recvmsg(this.fd, this.#buf, this.#end, room, this.#fdsOut);
        } catch (e) {
          this.close(`recvmsg: ${(e as Error).message}`);
          return;
        }
        if (n < 0) break;
        if (n === 0) {
          // Send the replies to what this pass framed first: a peer that only
          // half-closed (shutdown(SHUT_WR)) still reads them. close() would drop them.
          this.flush();
          this.close('peer closed the connection');
          return;
        }
        this.stats.reads++;
        this.stats.bytesIn += n;
        this.#end += n;
        const nfds = this.#fdsOut[0]!;
        if (nfds > 0) {
          const fds: number[] = [];
          for (let k = 1; k <= nfds; k++) fds.push(this.#fdsOut[k]!);
          this.stats.fdsIn += nfds;
          this.#pending.push({ end: this.#base + this.#end, fds });
          this.#pendingCount += nfds;
          // fds waiting for an incomplete message are bounded too.
          if (this.#pendingCount > 2 * this.#opts.maxFdsPerMessage + SCM_MAX_FD) {
            this.close('too many fds queued for incomplete messages');
            return;
          }
        }
        this.#frame();
        // Short read: drained (or stopped at an fd boundary: epoll reports the rest).
        if (n < room) break;
      }
    } finally {
      this.#inDispatch = false;
    }
    this.flush();
  }

  /** Make room to read: compact the unread tail to the front, or grow for a large message. */
  #reserveSpace(): void {
    const unread = this.#end - this.#start;
    const need = this.#state === FrameState.BODY ? this.#header.size : HEADER_SIZE;
    // Grow only for a message that does not fit (its size was checked against the limit).
    if (need > this.#buf.length) {
      const next = Buffer.allocUnsafe(Math.max(need, this.#buf.length * 2));
      this.#buf.copy(next, 0, this.#start, this.#end);
      this.#base += this.#start;
      this.#buf = next;
      this.#start = 0;
      this.#end = unread;
      return;
    }
    const free = this.#buf.length - this.#end;
    if (free >= 4096 && this.#start + need <= this.#buf.length) return;
    if (this.#start > 0) {
      this.#buf.copy(this.#buf, 0, this.#start, this.#end);
      this.#base += this.#start;
      this.#start = 0;
      this.#end = unread;
    }
    if (this.#buf.length - this.#end === 0) {
      const next = Buffer.allocUnsafe(this.#buf.length * 2);
      this.#buf.copy(next, 0, 0, this.#end);
      this.#buf = next;
    }
  }

  /** Walk every complete message in the buffer. */
  #frame(): void {
    const h = this.#header;
    while (!this.#closed) {
      const avail = this.#end - this.#start;
      if (avail === 0 && this.#start > 0) {
        // Drained: rewind, so the next read lands at the start (no compaction copy later).
        this.#base += this.#start;
        this.#start = 0;
        this.#end = 0;
      }
      if (this.#state === FrameState.HEADER) {
        if (avail < HEADER_SIZE) return;
        const b = this.#buf;
        const s = this.#start;
        h.id = getField(b, s, vfio_user_header.msg_id);
        h.command = getField(b, s, vfio_user_header.command);
        h.size = getField(b, s, vfio_user_header.msg_size);
        h.flags = getField(b, s, vfio_user_header.flags);
        h.error = getField(b, s, vfio_user_header.error);
        if (h.size < HEADER_SIZE || h.size > this.#opts.maxMessageSize) {
          const err =
            h.size < HEADER_SIZE
              ? protocolError('HEADER_TOO_SMALL', `msg_size ${h.size} is below the 16-byte header`)
              : protocolError('MESSAGE_TOO_LARGE', `msg_size ${h.size} exceeds ${this.#opts.maxMessageSize}`);
          this.#handler.badHeader(h, err);
          this.flush();
          this.close(`bad header: ${err.detail}`);
          return;
        }
        this.#state = FrameState.BODY;
      }
      if (avail < h.size) return;
      const msgStart = this.#base + this.#start;
      const msgEnd = msgStart + h.size;
      const fds = this.#takeFds(msgEnd);
      const payload = this.#payload(this.#start + HEADER_SIZE, h.size - HEADER_SIZE);
      this.#start += h.size;
      this.#state = FrameState.HEADER;
      this.stats.messagesIn++;
      this.#handler.message(h, payload, fds);
    }
  }

  /** The payload at #buf[from, from + size): staged when small, else a view. */
  #payload(from: number, size: number): Buffer {
    if (size > STAGED_PAYLOAD) return this.#buf.subarray(from, from + size);
    const src = this.#buf;
    const dst = this.#staged;
    for (let i = 0; i < size; i++) dst[i] = src[from + i]!;
    return this.#stagedViews[size]!;
  }

  /** fds that arrived with any byte up to `msgEnd` belong to the message ending there. */
  #takeFds(msgEnd: number): number[] {
    if (this.#pending.length === 0) return NO_FDS;
    let fds: number[] | null = null;
    while (this.#pending.length > 0 && this.#pending[0]!.end <= msgEnd) {
      const p = this.#pending.shift()!;
      this.#pendingCount -= p.fds.length;
      fds = fds ? fds.concat(p.fds) : p.fds;
    }
    return fds ?? NO_FDS;
  }

  // ---- send ------------------------------------------------------------------

  /** Send data[0, length); what the socket does not take is copied to the queue. */
  #send(data: Buffer, length: number, fds: number[] | null): void {
    if (this.#queue.length > 0) {
      this.#enqueue(data, 0, length, fds);
      return;
    }
    let n: number;
    try {
      n = native.sendmsg(this.fd, data, 0, length, fds);
    } catch (e) {
      this.close(`sendmsg: ${(e as Error).message}`);
      return;
    }
    this.stats.sends++;
    if (n === length) {
      this.stats.bytesOut += n;
      return;
    }
    // Nothing sent: the fds still need to go with the first byte. Some sent: they went.
    if (n < 0) this.#enqueue(data, 0, length, fds);
    else {
      this.stats.bytesOut += n;
      this.#enqueue(data, n, length, null);
    }
  }

  #enqueue(data: Buffer, from: number, to: number, fds: number[] | null): void {
    const copy = Buffer.from(data.subarray(from, to));
    this.#queue.push({ data: copy, fds });
    this.#queued += copy.length;
    this.#updateWatch();
  }

  #drain(): void {
    while (this.#queue.length > 0) {
      const head = this.#queue[0]!;
      let n: number;
      try {
        n = native.sendmsg(this.fd, head.data, 0, head.data.length, head.fds);
      } catch (e) {
        this.close(`sendmsg: ${(e as Error).message}`);
        return;
      }
      if (n < 0) break;
      this.stats.bytesOut += n;
      this.#queued -= n;
      if (n === head.data.length) this.#queue.shift();
      else {
        this.#queue[0] = { data: head.data.subarray(n), fds: null };
        break;
      }
    }
    this.#updateWatch();
    // Reading may have paused for the queue: pick up what arrived meanwhile.
    if (!this.#inDispatch && !this.#paused() && this.#end - this.#start >= HEADER_SIZE) {
      this.#inDispatch = true;
      try {
        this.#frame();
      } finally {
        this.#inDispatch = false;
      }
      this.flush();
    }
  }

  #paused(): boolean {
    return this.#queued > this.#opts.maxQueuedBytes;
  }

  #updateWatch(): void {
    if (this.#closed || !this.#watcher) return;
    const events = (this.#paused() ? 0 : native.READABLE) | (this.#queue.length > 0 ? native.WRITABLE : 0);
    this.#watcher.update(events);
  }
}

const NO_FDS: number[] = [];
Object.freeze(NO_FDS);

export function closeQuietly(fd: number): void {
  try {
    fs.closeSync(fd);
  } catch {
    /* already closed: nothing to release */
  }
}
