// A TCP/IP host on the guest's Ethernet segment (the S3 store is one): one
// IPv4 address, MAC 02:53:<address bytes>, answering ARP for that address and
// ICMP echo to it (lib/net/arp-echo.ts), and accepting TCP connections on its
// listening ports. Each established connection is handed out as a
// stream.Duplex (connection.ts); frames out go through the `send` callback
// (the device's frame hooks queue them for the guest). A segment for no
// connection and no listener gets an RST; malformed or foreign frames are not
// claimed.

import { randomInt } from 'crypto';
import { getField, viewRaw } from '../../../protocol/field';
import { arpAnswer, echoAnswer } from '../arp-echo';
import {
  ETH_P_ARP,
  ETH_P_IP,
  ethhdr,
  IPPROTO_ICMP,
  IPPROTO_TCP,
  TCP_FLAG_ACK,
  TCP_FLAG_FIN,
  TCP_FLAG_RST,
  TCP_FLAG_SYN,
} from '../headers';
import { ConnectionHost, ConnectionLimits, TcpConnection } from './connection';
import { buildTcpFrame, endpointMac, parseIpv4, parseTcp, TcpSegment } from './wire';

interface TcpStackOptions {
  /** Our IPv4 address, dotted. */
  readonly ip: string;
  /** Ports that accept connections. */
  readonly ports: readonly number[];
  /** Frames for the guest. The buffer is the callee's. */
  readonly send: (frame: Buffer) => void;
  /** A new established connection. */
  readonly onConnection: (c: TcpConnection) => void;
  /** Concurrent connections (any state) before a SYN is refused with RST. */
  readonly maxConnections?: number;
  readonly limits?: Partial<ConnectionLimits>;
  /** Initial sequence numbers (tests pin it); random by default. */
  readonly iss?: () => number;
}

const TCP_DEFAULT_LIMITS: ConnectionLimits = {
  mss: 1460,
  rxLimit: 65535,
  txLimit: 256 * 1024,
  rto: 200,
  rtoMax: 3200,
  retries: 8,
};
const DEFAULT_MAX_CONNECTIONS = 8;
const MAX_RX_WINDOW = 0xffff;

interface StackCounts {
  arpReplies: number;
  echoReplies: number;
  resetsSent: number;
  refused: number;
  badFrames: number;
}

function parseIpv4Address(text: string): Buffer | null {
  const m = /^(\d{1,3})\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})$/.exec(text);
  if (!m) return null;
  const b = m.slice(1).map(Number);
  return b.every((x) => x <= 255) ? Buffer.from(b) : null;
}

function connKey(ip: Buffer, port: number, lport: number): string {
  return `${ip.readUInt32BE(0)}:${port}:${lport}`;
}

export class TcpStack implements ConnectionHost {
  readonly ip: Buffer;
  readonly mac: Buffer;
  readonly counts: StackCounts = { arpReplies: 0, echoReplies: 0, resetsSent: 0, refused: 0, badFrames: 0 };
  readonly #ports: Set<number>;
  readonly #send: (frame: Buffer) => void;
  readonly #onConnection: (c: TcpConnection) => void;
  readonly #max: number;
  readonly #limits: ConnectionLimits;
  readonly #iss: () => number;
  readonly #conns = new Map<string, TcpConnection>();
  #ipId = 0;
  /** Frames waiting to leave: nothing is sent while a frame is being processed, so a `send` that answers at once never re-enters it. */
  readonly #pending: Buffer[] = [];
  #busy = false;

  constructor(opts: TcpStackOptions) {
    const ip = parseIpv4Address(opts.ip);
    if (!ip) throw new RangeError(`TcpStack: bad IPv4 address '${opts.ip}'`);
    this.ip = ip;
    this.mac = endpointMac(ip);
    this.#ports = new Set(opts.ports);
    this.#send = opts.send;
    this.#onConnection = opts.onConnection;
    this.#max = opts.maxConnections ?? DEFAULT_MAX_CONNECTIONS;
    this.#limits = { ...TCP_DEFAULT_LIMITS, ...opts.limits };
    if (this.#limits.rxLimit > MAX_RX_WINDOW || this.#limits.rxLimit < this.#limits.mss)
      throw new RangeError('TcpStack: rxLimit must be in [mss, 65535]');
    this.#iss = opts.iss ?? (() => randomInt(0, 0x100000000 - 1));
  }

  get connectionCount(): number {
    return this.#conns.size;
  }

  /** A frame the guest sent: true when it was ours (claimed). Never throws on guest input. */
  claimTx(frame: Buffer): boolean {
    // Every frame the guest sends passes here first: the others leave without an allocation.
    if (!this.#mayBeOurs(frame)) return false;
    return this.run(() => this.#claim(frame));
  }

  /** ARP, or IPv4 to our MAC (no views, no closures: compared in place). */
  #mayBeOurs(frame: Buffer): boolean {
    if (frame.length < ethhdr.SIZE) return false;
    const type = getField(frame, 0, ethhdr.h_proto);
    if (type === ETH_P_ARP) return true;
    const d = ethhdr.h_dest;
    return type === ETH_P_IP && this.mac.compare(frame, d.off, d.off + d.size) === 0;
  }

  /**
   * Run `fn` with output held: frames it produces leave when it is done, so a
   * `send` that answers at once (and calls claimTx) never re-enters a
   * connection in the middle of an update.
   */
  run<T>(fn: () => T): T {
    if (this.#busy) return fn();
    this.#busy = true;
    try {
      return fn();
    } finally {
      this.#busy = false;
      this.#flush();
    }
  }

  #out(frame: Buffer): void {
    this.#pending.push(frame);
    if (!this.#busy) this.#flush();
  }

  #flush(): void {
    if (this.#busy) return;
    this.#busy = true;
    try {
      for (let f = this.#pending.shift(); f !== undefined; f = this.#pending.shift()) this.#send(f);
    } finally {
      this.#busy = false;
    }
  }

  #claim(frame: Buffer): boolean {
    if (frame.length < ethhdr.SIZE) return false;
    const type = getField(frame, 0, ethhdr.h_proto);
    if (type === ETH_P_ARP) return this.#arp(frame);
    if (type !== ETH_P_IP) return false;
    const dest = viewRaw(frame, 0, ethhdr.h_dest);
    if (!dest.equals(this.mac)) return false;
    const ip = parseIpv4(frame);
    if (!ip) {
      this.counts.badFrames++;
      return true; // addressed to us, but unusable: dropped, as a host would
    }
    if (!ip.daddr.equals(this.ip)) return false;
    const peerMac = viewRaw(frame, 0, ethhdr.h_source);
    if (ip.protocol === IPPROTO_ICMP) {
      const reply = echoAnswer(frame, ip.l3, ip.ihl, ip.total, this.ip, this.mac);
      if (reply) {
        this.counts.echoReplies++;
        this.#out(reply);
      }
    } else if (ip.protocol === IPPROTO_TCP) {
      const seg = parseTcp(frame, ip);
      if (!seg) this.counts.badFrames++;
      else this.#tcp(seg, peerMac, ip.saddr);
    }
    return true;
  }

  #arp(frame: Buffer): boolean {
    const reply = arpAnswer(frame, ethhdr.SIZE, this.ip, this.mac);
    if (reply === null) return false;
    // A reply or announcement for our address is ours too, with nothing to answer.
    if (reply instanceof Buffer) {
      this.counts.arpReplies++;
      this.#out(reply);
    }
    return true;
  }

  #tcp(seg: TcpSegment, peerMac: Buffer, peerIp: Buffer): void {
    const key = connKey(peerIp, seg.sport, seg.dport);
    const c = this.#conns.get(key);
    if (c) {
      c.input(seg.flags, seg.seq, seg.ack, seg.window, seg.payload);
      return;
    }
    if (seg.flags & TCP_FLAG_RST) return;
    const syn = (seg.flags & (TCP_FLAG_SYN | TCP_FLAG_ACK | TCP_FLAG_FIN)) === TCP_FLAG_SYN;
    if (syn && this.#ports.has(seg.dport)) {
      if (this.#conns.size >= this.#max) {
        this.counts.refused++;
      } else {
        const conn = new TcpConnection(
          this,
          this.#limits,
          peerMac,
          peerIp,
          seg.sport,
          this.ip,
          seg.dport,
          this.#iss(),
          seg.seq,
          seg.mss,
          seg.window,
          seg.wscale,
        );
        this.#conns.set(key, conn);
        conn.once('tcp-established', () => this.#onConnection(conn));
        return;
      }
    }
    this.#resetFor(seg, peerMac, peerIp);
  }

  /** RST for a segment nobody owns (RFC 793 "reset generation"). */
  #resetFor(seg: TcpSegment, peerMac: Buffer, peerIp: Buffer): void {
    let seq = 0;
    let ack = 0;
    let flags = TCP_FLAG_RST;
    if (seg.flags & TCP_FLAG_ACK) seq = seg.ack;
    else {
      ack =
        (seg.seq + seg.payload.length + (seg.flags & TCP_FLAG_SYN ? 1 : 0) + (seg.flags & TCP_FLAG_FIN ? 1 : 0)) >>> 0;
      flags |= TCP_FLAG_ACK;
    }
    this.counts.resetsSent++;
    this.#out(
      buildTcpFrame({
        dmac: peerMac,
        smac: this.mac,
        saddr: this.ip,
        daddr: peerIp,
        sport: seg.dport,
        dport: seg.sport,
        seq,
        ack,
        flags,
        window: 0,
        ipId: this.#ipId++,
      }),
    );
  }

  emitSegment(
    c: TcpConnection,
    seq: number,
    flags: number,
    payload: Buffer | undefined,
    mss?: number,
    wscale?: number,
  ): void {
    this.#out(
      buildTcpFrame({
        dmac: c.peerMac,
        smac: this.mac,
        saddr: this.ip,
        daddr: c.peerIp,
        sport: c.localPort,
        dport: c.remotePort,
        seq,
        ack: c.rcvNxt,
        flags,
        window: c.advertisedWindow,
        mss,
        wscale,
        payload,
        ipId: this.#ipId++,
      }),
    );
  }

  forget(c: TcpConnection): void {
    const key = connKey(c.peerIp, c.remotePort, c.localPort);
    if (this.#conns.get(key) === c) this.#conns.delete(key);
  }

  /** Reset every connection (device reset, shutdown). */
  close(): void {
    for (const c of [...this.#conns.values()]) c.destroy();
    this.#conns.clear();
  }
}
