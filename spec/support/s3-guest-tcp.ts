// A test-only TCP client on the guest side of the wire: it speaks to the
// store's endpoint with frames from s3-frames.ts (never the code under test),
// acknowledges what arrives in order, respects the advertised window, and
// collects the byte stream until the endpoint's FIN.

import { ACK, decode, FIN, Out, PSH, SYN, tcp } from './s3-frames';

const MSS = 1460;

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
  /** Window-scale shift offered in the SYN (a Linux guest offers 7), or undefined: no scaling. */
  readonly #wscale: number | undefined;

  constructor(claim: (f: Buffer) => boolean, sport: number, dport: number, isn = 7000, opts: { wscale?: number } = {}) {
    this.#claim = claim;
    this.#wscale = opts.wscale;
    this.#sport = sport;
    this.#dport = dport;
    this.#seq = isn;
    this.#sndUna = isn;
  }

  /** Feed every frame the endpoint sends through here. */
  onFrame(f: Buffer): void {
    const o: Out = decode(f);
    if (o.proto !== 6 || o.dport !== this.#sport) return;
    if (!o.tcpOk || !o.ipOk) throw new Error('bad checksum from the endpoint');
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
      this.#send(ACK);
    }
    for (const w of this.#waiters.splice(0)) w();
  }

  #send(flags: number, data?: Buffer): void {
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
        mss: MSS,
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
      const n = Math.min(MSS, room, data.length - at);
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
