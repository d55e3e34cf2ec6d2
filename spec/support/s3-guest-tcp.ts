// A test-only TCP client on the guest side of the wire: it speaks to the
// store's endpoint with frames from s3-frames.ts (never the code under test),
// acknowledges what arrives in order (each segment, or once per batch of
// frames as a Linux receiver with GRO does), respects the advertised window,
// and collects the byte stream until the endpoint's FIN.

import { ACK, decodeFrame, FIN, Out, PSH, SYN, tcp, tcpOkByCompleteSum } from './s3-frames';

const MSS = 1460;

interface GuestTcpOptions {
  /** Window-scale shift offered in the SYN (a Linux guest offers 7), or undefined: no scaling. */
  readonly wscale?: number;
  /** MSS offered in the SYN and used to send (default 1460: MTU 1500; 8960 for a 9000-byte MTU). */
  readonly mss?: number;
  /** Acknowledge data only on ackBatch() (the caller calls it after each batch of frames), not per segment. */
  readonly batchAcks?: boolean;
}
export class GuestTcp {
  readonly received: Buffer[] = [];
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
  #ackOwed = false;

  constructor(claim: (f: Buffer) => boolean, sport: number, dport: number, isn = 7000, opts: GuestTcpOptions = {}) {
    this.#claim = claim;
    this.#wscale = opts.wscale;
    this.#mss = opts.mss ?? MSS;
    this.#batchAcks = opts.batchAcks ?? false;
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
    const o: Out = decodeFrame(f, completeSum < 0);
    if (o.proto !== 6 || o.dport !== this.#sport) return;
    const tcpOk = completeSum < 0 ? o.tcpOk : tcpOkByCompleteSum(f, completeSum);
    if (!tcpOk || !o.ipOk) throw new Error('bad checksum from the endpoint');
    this.#peerWnd = o.window!;
    if (o.flags! & ACK && ((o.ack! - this.#sndUna) | 0) > 0) this.#sndUna = o.ack!;
    if ((o.flags! & (SYN | ACK)) === (SYN | ACK)) {
      this.#rcvNxt = (o.seq! + 1) >>> 0;
      this.#send(ACK);
    } else if (o.seq === this.#rcvNxt && (o.data!.length > 0 || o.flags! & FIN)) {
      if (o.data!.length) this.received.push(Buffer.from(o.data!));
      this.#rcvNxt = (this.#rcvNxt + o.data!.length) >>> 0;
      if (o.flags! & FIN) {
        this.#rcvNxt = (this.#rcvNxt + 1) >>> 0;
        this.finReceived = true;
      }
      if (this.#batchAcks && !(o.flags! & FIN)) this.#ackOwed = true;
      else this.#send(ACK);
    }
    for (const w of this.#waiters.splice(0)) w();
  }

  /** The end of a batch of frames: one ACK for the data it brought (batchAcks). */
  ackBatch(): void {
    if (this.#ackOwed) this.#send(ACK);
  }

  #send(flags: number, data?: Buffer): void {
    this.#ackOwed = false;
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

  /** Resolves on the next frame from the endpoint (or after a turn of the event loop). */
  #progress(): Promise<void> {
    return new Promise((r) => {
      this.#waiters.push(r);
      setTimeout(r, 5).unref();
    });
  }

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
