// A test-only TCP client on the guest side of the wire: it speaks to the
// store's endpoint with frames from s3-frames.ts (never the code under test),
// acknowledges what arrives in order (each segment, or once per batch of
// frames as a Linux receiver with GRO does), respects the advertised window,
// and collects the byte stream until the endpoint's FIN.

import { ACK, decodeFrame, FIN, PSH, SYN, tcp, TcpView, viewTcp } from './s3-frames';

const MSS = 1460;

interface GuestTcpOptions {
  /** Window-scale shift offered in the SYN (a Linux guest offers 7), or undefined: no scaling. */
  readonly wscale?: number;
  /** MSS offered in the SYN and used to send (default 1460: MTU 1500; 8960 for a 9000-byte MTU). */
  readonly mss?: number;
  /**
   * Acknowledge data on ackBatch() (the caller calls it after each batch of
   * frames) and whenever 64 KiB arrived since the last ACK, as a Linux
   * receiver acknowledges each GRO packet (at most 64 KiB), not per segment.
   */
  readonly batchAcks?: boolean;
  /**
   * Copy the stream into this buffer (from its start; `receivedBytes` says
   * how far) instead of a new Buffer per segment in `received`: a reader
   * with its own buffer, as a guest application reads into one.
   */
  readonly receiveInto?: Buffer;
}

/** Bytes a Linux receiver's GRO merges into one packet at most, and so acknowledges at once. */
const GRO_BYTES = 65536;
export class GuestTcp {
  readonly received: Buffer[] = [];
  /** Stream bytes taken so far (into `received` or `receiveInto`). */
  receivedBytes = 0;
  finReceived = false;
  #seq: number;
  #rcvNxt = 0;
  #peerWnd = 0;
  #sndUna: number;
  #waiters: (() => void)[] = [];
  readonly #claim: (f: Buffer) => boolean;
  readonly #sport: number;
  readonly #dport: number;
  readonly #wscale: number | undefined;
  readonly #mss: number;
  readonly #batchAcks: boolean;
  readonly #into: Buffer | null;
  #ackOwed = false;
  readonly #view = new TcpView();
  /** Bytes taken since the last ACK (batchAcks). */
  #unacked = 0;

  constructor(claim: (f: Buffer) => boolean, sport: number, dport: number, isn = 7000, opts: GuestTcpOptions = {}) {
    this.#claim = claim;
    this.#wscale = opts.wscale;
    this.#mss = opts.mss ?? MSS;
    this.#batchAcks = opts.batchAcks ?? false;
    this.#into = opts.receiveInto ?? null;
    this.#sport = sport;
    this.#dport = dport;
    this.#seq = isn;
    this.#sndUna = isn;
  }

  /**
   * Feed every frame the endpoint sends through here; `completeSum`: the RX
   * completion's sum after the Ethernet header (CHECKSUM_COMPLETE), which
   * checks the TCP checksum without summing the frame again, as Linux does.
   */
  onFrame(f: Buffer, completeSum = -1): void {
    const t = this.#view;
    if (completeSum >= 0) {
      if (!viewTcp(f, completeSum, t)) return;
    } else {
      const o = decodeFrame(f, true);
      if (o.proto !== 6) return;
      t.ok = o.ipOk! && o.tcpOk!;
      t.dport = o.dport!;
      t.seq = o.seq!;
      t.ack = o.ack!;
      t.flags = o.flags!;
      t.window = o.window!;
      t.dataAt = o.data!.byteOffset - f.byteOffset;
      t.dataLen = o.data!.length;
    }
    if (t.dport !== this.#sport) return;
    if (!t.ok) throw new Error('bad checksum from the endpoint');
    this.#peerWnd = t.window;
    if (t.flags & ACK && ((t.ack - this.#sndUna) | 0) > 0) this.#sndUna = t.ack;
    if ((t.flags & (SYN | ACK)) === (SYN | ACK)) {
      this.#rcvNxt = (t.seq + 1) >>> 0;
      this.#send(ACK);
    } else if (t.seq === this.#rcvNxt && (t.dataLen > 0 || t.flags & FIN)) {
      // a copy: `f` may be a view of an RX buffer the driver posts again
      if (t.dataLen) this.#take(f, t.dataAt, t.dataLen);
      this.#rcvNxt = (this.#rcvNxt + t.dataLen) >>> 0;
      if (t.flags & FIN) {
        this.#rcvNxt = (this.#rcvNxt + 1) >>> 0;
        this.finReceived = true;
      }
      this.#unacked += t.dataLen;
      if (this.#batchAcks && !(t.flags & FIN) && this.#unacked < GRO_BYTES) this.#ackOwed = true;
      else this.#send(ACK);
    }
    if (this.#waiters.length) for (const w of this.#waiters.splice(0)) w();
  }

  #take(f: Buffer, at: number, len: number): void {
    if (this.#into) {
      if (this.receivedBytes + len > this.#into.length)
        throw new Error(`GuestTcp: the stream outgrew its ${this.#into.length}-byte buffer`);
      f.copy(this.#into, this.receivedBytes, at, at + len);
    } else this.received.push(Buffer.from(f.subarray(at, at + len)));
    this.receivedBytes += len;
  }

  /** The end of a batch of frames: one ACK for the data it brought (batchAcks). */
  ackBatch(): void {
    if (this.#ackOwed) this.#send(ACK);
  }

  #send(flags: number, data?: Buffer): void {
    this.#ackOwed = false;
    this.#unacked = 0;
    this.#claim(
      tcp({ sport: this.#sport, dport: this.#dport, seq: this.#seq, ack: this.#rcvNxt, flags, window: 65535, data }),
    );
  }

  connect(): void {
    this.#claim(
      tcp({
        sport: this.#sport,
        dport: this.#dport,
        seq: this.#seq,
        ack: 0,
        flags: SYN,
        window: 65535,
        mss: this.#mss,
        wscale: this.#wscale,
      }),
    );
    this.#seq = (this.#seq + 1) >>> 0;
    this.#sndUna = this.#seq;
  }

  /** Resolves on the next frame from the endpoint, or within 5 ms (one timer for every waiter, not one per wait). */
  #progress(): Promise<void> {
    return new Promise((r) => {
      this.#waiters.push(r);
      if (this.#tick) return;
      this.#tick = setTimeout(() => {
        this.#tick = null;
        for (const w of this.#waiters.splice(0)) w();
      }, 5);
      this.#tick.unref();
    });
  }

  #tick: NodeJS.Timeout | null = null;

  /** Send all of `data` within the endpoint's window, MSS by MSS. */
  async write(data: Buffer): Promise<void> {
    let at = 0;
    while (at < data.length) {
      const inFlight = (this.#seq - this.#sndUna) | 0;
      const room = this.#peerWnd - inFlight;
      if (room <= 0) {
        await this.#progress();
        continue;
      }
      const n = Math.min(this.#mss, room, data.length - at);
      this.#send(ACK | PSH, data.subarray(at, at + n));
      this.#seq = (this.#seq + n) >>> 0;
      at += n;
    }
  }

  close(): void {
    this.#send(ACK | FIN);
    this.#seq = (this.#seq + 1) >>> 0;
  }

  /** Wait until `done()` holds, up to `ms`. */
  async until(done: () => boolean, ms = 10000): Promise<void> {
    const end = Date.now() + ms;
    while (!done()) {
      if (Date.now() > end) throw new Error('timed out waiting on the endpoint');
      await this.#progress();
    }
  }

  text(): string {
    return Buffer.concat(this.received).toString('latin1');
  }
}
