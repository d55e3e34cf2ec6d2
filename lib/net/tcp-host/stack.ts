// A TCP/IP host on the guest's Ethernet segment (the S3 store is one): one
// IPv4 address, MAC 02:53:<address bytes>, answering ARP for that address and
// ICMP echo to it (lib/net/arp-echo.ts), and accepting TCP connections on its
// listening ports. Each established connection is handed out as a
// stream.Duplex (connection.ts); frames out go through the `send` callback
// (the device's frame hooks queue them for the guest). A segment for no
// connection and no listener gets an RST; malformed or foreign frames are not
// claimed.
//
// Offloads: a frame the guest left to the NIC (a partial checksum, a TSO
// super-frame up to 64 KiB) is taken whole, its unfinished checksums not
// checked. Within one pass of the device over the guest's TX ring, data
// segments are acknowledged once, at the end (txPass). Frames out are
// written into one reused arena while a run holds them, not allocated one by
// one, and each carries its sum for the device's RX checksum.

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
  tcphdr,
} from '../headers';
import type { FrameOffload } from '../vnet';
import { ConnectionHost, ConnectionLimits, TcpConnection } from './connection';
import {
  buildTcpFrame,
  endpointMac,
  parseIpv4,
  parseTcp,
  sealTcpFrame,
  TcpHeaderTemplate,
  tcpHeaderLength,
  TcpSegment,
  writeTcpHeaders,
} from './wire';

interface TcpStackOptions {
  /** Our IPv4 address, dotted. */
  readonly ip: string;
  /** Ports that accept connections. */
  readonly ports: readonly number[];
  /**
   * A frame for the guest, valid during the call only (copy it to keep it),
   * with the ones'-complement sum of everything after its Ethernet header
   * when known (-1 or absent otherwise).
   */
  readonly send: (frame: Buffer, l3Sum?: number) => void;
  /** A new established connection. */
  readonly onConnection: (c: TcpConnection) => void;
  /** Concurrent connections (any state) before a SYN is refused with RST. */
  readonly maxConnections?: number;
  readonly limits?: Partial<ConnectionLimits>;
  /** Initial sequence numbers (tests pin it); random by default. */
  readonly iss?: () => number;
}

const TCP_DEFAULT_LIMITS: ConnectionLimits = {
  // A jumbo (9000-byte MTU) guest's MSS: the peer's own MSS option bounds what we send, so an MTU 1500 guest
  // still gets 1460-byte segments; one that takes jumbo frames gets six times fewer frames per byte.
  mss: 8960,
  // With window scaling (RFC 7323) a guest may have this much in flight to us; 64 KiB without it.
  rxLimit: 1024 * 1024,
  txLimit: 256 * 1024,
  rto: 200,
  rtoMax: 3200,
  retries: 8,
};
const DEFAULT_MAX_CONNECTIONS = 8;
/** Largest receive buffer: 2^30 is RFC 7323's window limit; far less keeps a connection's memory bounded. */
const MAX_RX_LIMIT = 16 * 1024 * 1024;
/** Bytes of the output arena beyond txLimit: the headers of a window's segments, ACKs, a SYN-ACK. */
const ARENA_HEADROOM = 64 * 1024;
const ETH_IPV4_HEADERS = 14 + 20;

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
  readonly #send: (frame: Buffer, l3Sum?: number) => void;
  readonly #onConnection: (c: TcpConnection) => void;
  readonly #max: number;
  readonly #limits: ConnectionLimits;
  readonly #iss: () => number;
  readonly #conns = new Map<string, TcpConnection>();
  #ipId = 0;
  /** Each connection's headers for segments without options, made on its first such segment. */
  readonly #templates = new WeakMap<TcpConnection, TcpHeaderTemplate>();
  /** Frames waiting to leave: nothing is sent while a frame is being processed, so a `send` that answers at once never re-enters it. */
  readonly #pending: Buffer[] = [];
  /** Each pending frame's sum after the Ethernet header (-1: not known). */
  readonly #pendingSums: number[] = [];
  #busy = false;
  /** Where pending frames are written (views of it wait in #pending); reset when they have all left. */
  readonly #arena: Buffer;
  #arenaUsed = 0;
  /** The segment being written (one record, reused). */
  readonly #spec: {
    dmac: Buffer;
    smac: Buffer;
    saddr: Buffer;
    daddr: Buffer;
    sport: number;
    dport: number;
    seq: number;
    ack: number;
    flags: number;
    window: number;
    mss: number | undefined;
    wscale: number | undefined;
    ipId: number;
  };
  /** Inside a device pass over the TX ring: data ACKs wait for its end. */
  #inPass = false;
  /** Connections owing an ACK at the end of the pass. */
  readonly #owing = new Set<TcpConnection>();
  /** Takes a TSO super-frame or a partial checksum whole (FrameEndpoint.takesOffloads). */
  readonly takesOffloads = true;

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
    if (this.#limits.rxLimit > MAX_RX_LIMIT || this.#limits.rxLimit < this.#limits.mss)
      throw new RangeError(`TcpStack: rxLimit must be in [mss, ${MAX_RX_LIMIT}]`);
    this.#iss = opts.iss ?? (() => randomInt(0, 0x100000000 - 1));
    this.#arena = Buffer.allocUnsafe(this.#limits.txLimit + ARENA_HEADROOM);
    this.#spec = {
      dmac: this.mac,
      smac: this.mac,
      saddr: this.ip,
      daddr: this.ip,
      sport: 0,
      dport: 0,
      seq: 0,
      ack: 0,
      flags: 0,
      window: 0,
      mss: undefined,
      wscale: undefined,
      ipId: 0,
    };
  }

  get connectionCount(): number {
    return this.#conns.size;
  }

  /**
   * A frame the guest sent: true when it was ours (claimed). Never throws on
   * guest input. `offload`: what the guest left to the NIC (its checksums are
   * then not checked; a TSO super-frame is one segment to us).
   */
  claimTx(frame: Buffer, offload?: FrameOffload): boolean {
    // Every frame the guest sends passes here first: the others leave without an allocation.
    if (!this.#mayBeOurs(frame)) return false;
    return this.run(() => this.#claim(frame, offload));
  }

  /** The device starts or ends a pass over the guest's TX ring: data segments claimed in it are acknowledged once, at its end. */
  txPass(begin: boolean): void {
    this.#inPass = begin;
    // A new pass while ACKs are owed (its end was missed): they go now all the same.
    if (this.#owing.size === 0) return;
    this.run(() => {
      for (const c of this.#owing) c.ackOwed();
      this.#owing.clear();
    });
  }

  /** A connection has data to acknowledge: now, or at the end of the device's pass. True when deferred. */
  ackLater(c: TcpConnection): boolean {
    if (!this.#inPass) return false;
    this.#owing.add(c);
    return true;
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

  #out(frame: Buffer, l3Sum = -1): void {
    this.#pending.push(frame);
    this.#pendingSums.push(l3Sum);
    if (!this.#busy) this.#flush();
  }

  #flush(): void {
    if (this.#busy) return;
    this.#busy = true;
    try {
      // A send that answers at once adds frames behind these: the loop takes them too.
      for (let i = 0; i < this.#pending.length; i++) this.#send(this.#pending[i]!, this.#pendingSums[i]!);
    } finally {
      this.#pending.length = 0;
      this.#pendingSums.length = 0;
      this.#arenaUsed = 0;
      this.#busy = false;
    }
  }

  /** Room for a frame of `len` bytes: in the arena while it has room, else a buffer of its own. */
  #frameBuffer(len: number): Buffer {
    const at = this.#arenaUsed;
    if (at + len > this.#arena.length) return Buffer.allocUnsafe(len);
    // Even offsets keep the checksum's 16-bit view aligned.
    this.#arenaUsed = at + len + (len & 1);
    return this.#arena.subarray(at, at + len);
  }

  #claim(frame: Buffer, offload: FrameOffload | undefined): boolean {
    if (frame.length < ethhdr.SIZE) return false;
    const type = getField(frame, 0, ethhdr.h_proto);
    if (type === ETH_P_ARP) return this.#arp(frame);
    if (type !== ETH_P_IP) return false;
    const dest = viewRaw(frame, 0, ethhdr.h_dest);
    if (!dest.equals(this.mac)) return false;
    // A TSO super-frame's IPv4 header checksum is the NIC's to fill; a partial checksum leaves the header whole.
    const ip = parseIpv4(frame, !offload?.tcpGso);
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
      const seg = parseTcp(frame, ip, !(offload && (offload.needsCsum || offload.tcpGso)));
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
    dataAt: number,
    dataLen: number,
    mss?: number,
    wscale?: number,
  ): void {
    const ipId = this.#ipId++ & 0xffff;
    if (mss === undefined && wscale === undefined) {
      // Data and ACKs (all but the SYN-ACK): from the connection's header template.
      let t = this.#templates.get(c);
      if (!t) {
        t = new TcpHeaderTemplate(c.peerMac, this.mac, this.ip, c.peerIp, c.localPort, c.remotePort);
        this.#templates.set(c, t);
      }
      const len = ETH_IPV4_HEADERS + tcphdr.SIZE + dataLen;
      const out = this.#frameBuffer(len);
      const at = t.write(out, seq, c.rcvNxt, flags, c.windowField, ipId, dataLen);
      if (dataLen > 0) c.copyOut(dataAt, dataLen, out, at);
      this.#out(out, t.seal(out, len));
      return;
    }
    const s = this.#spec;
    s.dmac = c.peerMac;
    s.daddr = c.peerIp;
    s.sport = c.localPort;
    s.dport = c.remotePort;
    s.seq = seq;
    s.ack = c.rcvNxt;
    s.flags = flags;
    s.window = c.windowField;
    s.mss = mss;
    s.wscale = wscale;
    s.ipId = ipId;
    const len = ETH_IPV4_HEADERS + tcpHeaderLength(s) + dataLen;
    const out = this.#frameBuffer(len);
    const at = writeTcpHeaders(out, s, dataLen);
    if (dataLen > 0) c.copyOut(dataAt, dataLen, out, at);
    this.#out(out, sealTcpFrame(out, len, this.ip, c.peerIp));
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
