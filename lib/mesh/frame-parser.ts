// The mesh's streaming frame parser: bytes in, checked frames out. It knows
// nothing about sockets. A frame is an explicit state machine (header, body)
// run by one loop over the current chunk with a cursor; each step takes what
// it needs or stops to wait for the next chunk.
//
// Copies: a frame that lies inside one chunk is handed out as a view of that
// chunk. Only a frame that spans chunks is assembled, once, into a buffer of
// exactly its size, allocated after its header passed the length rules (so a
// peer cannot make us buffer more than the largest legal frame); a large one
// comes from the buffer pool and goes back when its message is released
// (frame-router.ts). Until then bytes handed out are never written again. A
// socket that can choose its read buffer reads the rest of a large body
// straight into it (inPlaceTarget/filledInPlace): no copy of ours at all.
//
// Backpressure: the sink may refuse a frame (return false). The parser then
// holds it, stops, and offers the same frame again on resume(); the owner
// pauses its socket meanwhile. Chunks that still arrive while held are kept,
// up to a bound, then the parser fails.
//
// Memory: every body the parser buffers (assembled across chunks, or copied
// out of a reused read buffer) is charged to the process-wide partial-frame
// budget (inbound-budget.ts partialFrames) until the sink takes the frame. A
// body that spans chunks is charged from its header, before any of it is
// buffered; when the budget has no room the parser holds exactly as for a
// refused frame (nothing of the body read), and resume() asks again. A gate
// (setGate) names the connection to wake and may refuse a frame outright
// (data on a link that is not established) before anything is buffered.
//
// Bad input never throws: the first error goes to sink.onError and the parser
// stops for good.

import { decodeFrameHeader } from './codec';
import { MeshError, meshError } from './errors';
import { tcp_msg_header } from './layouts';
import { MAX_HELD_CHUNK_BYTES } from './limits';
import { meshBufferPool } from './buffer-pool';
import { partialFrames, Waiter } from './inbound-budget';
import { FrameHeader } from './messages';

interface FrameSink {
  /**
   * A whole frame whose header passed the checks, with exactly
   * `header.length` body bytes. Return false to hold it: nothing more is
   * parsed until resume(), which offers this frame again.
   */
  onFrame(header: FrameHeader, body: Buffer, placed: number): boolean;
  /** The stream broke a rule; the parser has stopped. */
  onError(error: MeshError): void;
  /**
   * A large frame's first PLACE_HEAD body bytes have arrived: where may the
   * rest go? Views of exactly `header.length - head.length` bytes (the rest
   * is then written there, not buffered, and the frame is delivered with
   * `head` as its body and `placed` the bytes written), or null. `done` is
   * called once the frame is delivered or the parser gave it up.
   */
  place?(header: FrameHeader, head: Buffer): Placement | null;
}

/** Who the parser belongs to, for its buffered bodies (setGate). */
export interface FrameGate {
  /** Woken (unhold(), which calls resume()) when room for a waiting body may be there. */
  readonly waiter: Waiter;
  /** Whether this frame's body may be buffered at all; false stops the parser (PROTOCOL). */
  allows(header: FrameHeader): boolean;
}

/** Where the rest of a frame's body goes (FrameSink.place). */
export interface Placement {
  readonly views: readonly Buffer[];
  done(): void;
}

/** Body bytes the sink sees before it places the rest: the longest data header (IONIC's 60 bytes). */
export const PLACE_HEAD = 60;

const enum State {
  Header,
  Body,
  Held,
  Stopped,
}

const EMPTY = Buffer.alloc(0);
/** A body of this size or more is read in place (inPlaceTarget); a smaller one is not worth reads of its own. */
export const IN_PLACE_MIN = 64 * 1024;

export class FrameParser {
  #state = State.Header;
  /** Header bytes gathered across chunks (only when a header spans chunks). */
  readonly #hdr = Buffer.alloc(tcp_msg_header.SIZE);
  #hdrFill = 0;
  #header: FrameHeader | undefined;
  #body: Buffer | undefined;
  #bodyFill = 0;
  /** The current large frame's placement, or null; #body is then its head only. */
  #placement: Placement | null = null;
  #placeView = 0;
  #placeOff = 0;
  /** The current frame was offered to sink.place (once). */
  #placeAsked = false;
  /** The chunk being walked and the cursor into it. */
  #chunk: Buffer = EMPTY;
  #pos = 0;
  /** Chunks that arrived while a frame was held. */
  readonly #backlog: Buffer[] = [];
  #backlogBytes = 0;
  #frames = 0;
  /** The last frame ended with a read in place (headReadLimit). */
  #afterInPlace = false;
  #gate: FrameGate | null = null;
  /** Bytes of the current body charged to partialFrames (0: none). */
  #charged = 0;
  /** Held because the body's charge waits for room (not a refused frame). */
  #admitting = false;
  /** Date.now() when the current spanning body was charged (0: none being assembled). */
  #partialSince = 0;

  /**
   * `transient`: the chunks pushed are reused by the caller once push()
   * returns (a socket reading into one buffer, `onread`): whatever the parser
   * keeps past push() (a body, a held chunk's tail, the backlog) is copied.
   */
  constructor(
    private readonly sink: FrameSink,
    private readonly maxBacklogBytes: number = MAX_HELD_CHUNK_BYTES,
    private readonly transient = false,
  ) {}

  /** True while a refused frame waits for resume(). */
  get held(): boolean {
    return this.#state === State.Held;
  }

  /** True once an error (or destroy) stopped the parser. */
  get stopped(): boolean {
    return this.#state === State.Stopped;
  }

  /** Frames delivered so far. */
  get frames(): number {
    return this.#frames;
  }

  /** Bytes of the current body charged to the process-wide budget. */
  get charged(): number {
    return this.#charged;
  }

  /** When the body being assembled was charged (0 when none is): a peer that stops half-way holds room. */
  get partialSince(): number {
    return this.#partialSince;
  }

  /** True while held for room in the partial-frame budget (not a refused frame). */
  get waitingForRoom(): boolean {
    return this.#admitting && this.#state === State.Held;
  }

  /** Name the connection to wake and the rule for what it may buffer (before the first byte arrives). */
  setGate(gate: FrameGate): void {
    this.#gate = gate;
  }

  /** Bytes the parser is holding: a partial header or body, the held chunk's tail, the backlog. */
  get bufferedBytes(): number {
    return (
      this.#hdrFill +
      (this.#body && this.#state === State.Body ? this.#bodyFill : 0) +
      (this.#chunk.length - this.#pos) +
      this.#backlogBytes
    );
  }

  push(chunk: Buffer): void {
    if (this.#state === State.Stopped || chunk.length === 0) return;
    if (this.#state === State.Held || this.#backlog.length > 0) {
      this.#backlogBytes += chunk.length;
      if (this.#backlogBytes > this.maxBacklogBytes) {
        this.#fail(meshError('OVERFLOW', `${this.#backlogBytes} bytes arrived while reading was paused`));
        return;
      }
      this.#backlog.push(this.transient ? Buffer.from(chunk) : chunk);
      return;
    }
    this.#chunk = chunk;
    this.#pos = 0;
    this.#walk();
    // Held part way through a reused chunk: keep a copy of what is left of it.
    if (this.transient && this.held && this.#pos < this.#chunk.length) {
      this.#chunk = Buffer.from(this.#chunk.subarray(this.#pos));
      this.#pos = 0;
    }
  }

  /**
   * Where the next read may land directly: the unfilled rest of a large body
   * being assembled (a body of IN_PLACE_MIN bytes or more; its tail too,
   * however short, so that the frame ends on a read in place and the next
   * read can be limited to the next head: headReadLimit), or null. Only
   * between chunks, with nothing held or backlogged; the bytes read there
   * are then reported with filledInPlace() instead of push().
   */
  inPlaceTarget(): Buffer | null {
    if (this.#state !== State.Body || !this.#body || this.#backlog.length > 0 || this.#pos < this.#chunk.length)
      return null;
    if (this.#header!.length < IN_PLACE_MIN) return null;
    const p = this.#placement;
    if (p) {
      const v = p.views[this.#placeView]!;
      return v.subarray(this.#placeOff);
    }
    // Still gathering a head to offer for placement: through the reused buffer.
    if (this.#body.length < this.#header!.length) return null;
    return this.#body.subarray(this.#bodyFill);
  }

  /**
   * The most the next read into the reused buffer should take (0: no limit).
   * Right after a frame whose body was read in place, with nothing left over,
   * the next frame is likely large as well: a read of just its header and
   * the head placement needs lets the rest of it go in place too, instead of
   * up to a whole read buffer of it arriving there to be copied out. Small
   * frames in between lift the limit.
   */
  headReadLimit(): number {
    if (
      !this.#afterInPlace ||
      this.#state !== State.Header ||
      this.#hdrFill !== 0 ||
      this.#backlog.length > 0 ||
      this.#pos < this.#chunk.length
    )
      return 0;
    return tcp_msg_header.SIZE + PLACE_HEAD;
  }

  /** `n` bytes were read into what inPlaceTarget() gave (never past the body's end, nor past a placed view). */
  filledInPlace(n: number): void {
    if (this.#state !== State.Body || !this.#body) return;
    const rest = this.#header!.length - this.#bodyFill;
    const p = this.#placement;
    const room = p ? p.views[this.#placeView]!.length - this.#placeOff : rest;
    if (n <= 0 || n > rest || n > room) {
      this.#fail(meshError('OVERFLOW', `${n} bytes read in place with ${Math.min(rest, room)} left there`));
      return;
    }
    this.#bodyFill += n;
    if (p) this.#advancePlace(n);
    if (this.#bodyFill === this.#header!.length && this.#deliver()) this.#afterInPlace = true;
  }

  #advancePlace(n: number): void {
    const views = this.#placement!.views;
    this.#placeOff += n;
    while (this.#placeView < views.length && this.#placeOff >= views[this.#placeView]!.length) {
      this.#placeOff -= views[this.#placeView]!.length;
      this.#placeView++;
    }
  }

  /** Copy `n` chunk bytes at #pos to the placement's views. */
  #copyPlaced(chunk: Buffer, n: number): void {
    const views = this.#placement!.views;
    let left = n;
    let at = this.#pos;
    while (left > 0 && this.#placeView < views.length) {
      const v = views[this.#placeView]!;
      const k = Math.min(left, v.length - this.#placeOff);
      chunk.copy(v, this.#placeOff, at, at + k);
      at += k;
      left -= k;
      this.#advancePlace(k);
    }
  }

  #endPlacement(): void {
    const p = this.#placement;
    this.#placement = null;
    this.#placeView = 0;
    this.#placeOff = 0;
    this.#placeAsked = false;
    p?.done();
  }

  /** Offer the held frame again (or ask again for its body's room); if taken, carry on with what was left and the backlog. */
  resume(): void {
    if (this.#state !== State.Held) return;
    if (this.#admitting) {
      this.#admitting = false;
      this.#state = State.Body;
      if (!this.#admit()) return;
      this.#grow();
    } else if (!this.#deliver()) return;
    this.#walk();
    while (this.#backlog.length > 0 && this.#running()) {
      const next = this.#backlog.shift()!;
      this.#backlogBytes -= next.length;
      this.#chunk = next;
      this.#pos = 0;
      this.#walk();
    }
  }

  /** Stop and let go of every buffer (the connection is gone). */
  destroy(): void {
    this.#state = State.Stopped;
    this.#release();
  }

  /** Between frames or inside one (not held, not stopped). A method, so the compiler does not narrow the state across calls. */
  #running(): boolean {
    return this.#state === State.Header || this.#state === State.Body;
  }

  #release(): void {
    if (this.#charged > 0) partialFrames.give(this.#charged);
    this.#charged = 0;
    this.#partialSince = 0;
    if (this.#admitting && this.#gate) partialFrames.forget(this.#gate.waiter);
    this.#admitting = false;
    this.#endPlacement();
    this.#chunk = EMPTY;
    this.#pos = 0;
    this.#header = undefined;
    this.#body = undefined;
    this.#backlog.length = 0;
    this.#backlogBytes = 0;
  }

  #fail(error: MeshError): void {
    this.#state = State.Stopped;
    this.#release();
    this.sink.onError(error);
  }

  /** Walk the current chunk until it is used up, a frame is held, or the parser stops. */
  #walk(): void {
    const chunk = this.#chunk;
    for (;;) {
      if (this.#state === State.Header) {
        const avail = chunk.length - this.#pos;
        let decoded;
        if (this.#hdrFill === 0 && avail >= tcp_msg_header.SIZE) {
          decoded = decodeFrameHeader(chunk, this.#pos);
          this.#pos += tcp_msg_header.SIZE;
        } else {
          if (avail === 0) break;
          const n = Math.min(tcp_msg_header.SIZE - this.#hdrFill, avail);
          chunk.copy(this.#hdr, this.#hdrFill, this.#pos, this.#pos + n);
          this.#hdrFill += n;
          this.#pos += n;
          if (this.#hdrFill < tcp_msg_header.SIZE) break;
          this.#hdrFill = 0;
          decoded = decodeFrameHeader(this.#hdr, 0);
        }
        if (!decoded.ok) {
          this.#fail(decoded.error);
          return;
        }
        this.#header = decoded.value;
        this.#bodyFill = 0;
        if (decoded.value.length === 0) {
          this.#body = EMPTY;
          if (!this.#deliver()) return;
          continue;
        }
        this.#body = undefined;
        this.#state = State.Body;
      }
      if (this.#state !== State.Body) return;
      const length = this.#header!.length;
      const avail = chunk.length - this.#pos;
      if (this.#bodyFill === 0 && avail >= length) {
        if (this.transient) {
          // Here already (at most a read buffer): charged whatever the room, given back when taken.
          partialFrames.take(length, null);
          this.#charged = length;
          this.#body = meshBufferPool.take(length);
          chunk.copy(this.#body, 0, this.#pos, this.#pos + length);
        } else this.#body = chunk.subarray(this.#pos, this.#pos + length);
        this.#pos += length;
        if (!this.#deliver()) return;
        continue;
      }
      if (avail === 0) break;
      if (!this.#body) {
        // A large frame spanning chunks may have its rest placed by the sink: gather its head first.
        const placeable = !this.#placeAsked && this.sink.place !== undefined && length >= IN_PLACE_MIN + PLACE_HEAD;
        if (placeable) this.#body = Buffer.allocUnsafe(PLACE_HEAD);
        else {
          if (!this.#admit()) return;
          this.#grow();
        }
      }
      if (this.#placement) {
        const n = Math.min(length - this.#bodyFill, avail);
        this.#copyPlaced(chunk, n);
        this.#bodyFill += n;
        this.#pos += n;
      } else {
        const body = this.#body!;
        const cap = body.length < length ? body.length : length;
        const n = Math.min(cap - this.#bodyFill, avail);
        chunk.copy(body, this.#bodyFill, this.#pos, this.#pos + n);
        this.#bodyFill += n;
        this.#pos += n;
        if (cap < length && this.#bodyFill === cap && !this.#askPlace()) return;
      }
      if (this.#bodyFill < length) continue;
      if (!this.#deliver()) return;
    }
    // The chunk is used up: do not pin it.
    this.#chunk = EMPTY;
    this.#pos = 0;
  }

  /**
   * Charge the current frame's body before buffering it: false when the
   * gate refuses it (the parser failed) or the budget has no room (held:
   * resume() asks again once the gate's waiter is woken).
   */
  #admit(): boolean {
    const h = this.#header!;
    const gate = this.#gate;
    if (gate && !gate.allows(h)) {
      this.#fail(meshError('PROTOCOL', `a type ${h.type} frame of ${h.length} bytes before the link is established`));
      return false;
    }
    if (!partialFrames.take(h.length, gate ? gate.waiter : null)) {
      this.#state = State.Held;
      this.#admitting = true;
      return false;
    }
    this.#charged = h.length;
    this.#partialSince = Date.now();
    return true;
  }

  /** The charged body's buffer, with what was gathered of it so far (a placement head) copied in. */
  #grow(): void {
    const body = meshBufferPool.take(this.#header!.length);
    if (this.#body && this.#bodyFill > 0) this.#body.copy(body, 0, 0, this.#bodyFill);
    this.#body = body;
  }

  /** The head of a large frame is here: ask the sink where the rest goes; if nowhere, buffer it whole (false: held or stopped). */
  #askPlace(): boolean {
    this.#placeAsked = true;
    const header = this.#header!;
    const head = this.#body!;
    const p = this.sink.place!(header, head);
    let total = 0;
    if (p) for (const v of p.views) total += v.length;
    if (p && total === header.length - head.length && p.views.every((v) => v.length > 0)) {
      this.#placement = p;
      this.#placeView = 0;
      this.#placeOff = 0;
      return true;
    }
    p?.done();
    if (!this.#admit()) return false;
    this.#grow();
    return true;
  }

  /** Offer the current frame; true when taken and the parser may go on. */
  #deliver(): boolean {
    const header = this.#header!;
    const body = this.#body!;
    const placed = this.#placement ? header.length - body.length : 0;
    this.#state = State.Held;
    this.#partialSince = 0;
    const taken = this.sink.onFrame(header, body, placed);
    // The sink may have destroyed us (it closed the connection).
    if (this.stopped) return false;
    if (!taken) return false;
    // The sink has the body now (a message's room in the inbound queue counts it from here).
    if (this.#charged > 0) {
      partialFrames.give(this.#charged);
      this.#charged = 0;
    }
    this.#frames++;
    this.#afterInPlace = false;
    this.#state = State.Header;
    this.#header = undefined;
    this.#body = undefined;
    this.#bodyFill = 0;
    this.#endPlacement();
    return true;
  }
}
