// Who gets a mesh connection: the listener, the admission slots, and TLS on
// both sides of a link. An accepted socket takes a slot first (admission.ts:
// bounded in number, per source and in time) or is closed unread; with
// credentials it must then complete a TLS 1.3 handshake (tls.ts) whose peer
// is checked before a frame is read; without, only loopback is served. A
// dialled socket with credentials runs the client side the same way. The
// mesh (mesh.ts) hands the gate the sockets and gets back connections; every
// refusal is counted and logged once per peer and reason.

import * as net from 'node:net';
import type * as tls from 'node:tls';
import { Logger, RateLimiter, warnLimited } from '../log';
import { formatHostPort, isLoopbackAddress } from './address';
import { Admission, AdmissionLimits, admissionLimits, AdmissionSlot } from './admission';
import type { MeshConnection } from './connection';
import { OnRead, openPlain, rewrapAccepted, unmapAddress } from './dial';
import { MESH_MAGIC } from './limits';
import { CREDENTIALS_HINT, looksLikeTls, MeshCredentials, MeshTls } from './tls';

/** What the gate needs from the mesh. */
interface GateHost {
  readonly log: Logger;
  readonly limiter: RateLimiter;
  closing(): boolean;
  /** A connection for an inbound socket that passed the gate (not yet registered). */
  adoptInbound(socket: net.Socket): MeshConnection;
  debug(message: string): void;
}

interface Handshake {
  readonly raw: net.Socket;
  readonly slot: AdmissionSlot;
  readonly who: string;
}

export class MeshGate {
  /** Accepts paused (nothing read before the gate decides). */
  readonly server: net.Server;
  /** Null without credentials: plaintext, loopback only. */
  readonly tls: MeshTls | null;
  readonly admission: Admission;
  readonly #host: GateHost;
  readonly #tlsServer: tls.Server | null;
  /** Inbound handshakes in progress, by the raw socket's address and port. */
  readonly #handshakes = new Map<string, Handshake>();
  /** Each inbound connection's admission slot, until it closes. */
  readonly #slots = new Map<MeshConnection, AdmissionSlot>();
  /** Dialled TLS sockets and their connections (set once the connection exists, before any event can fire). */
  readonly #dialled = new WeakMap<tls.TLSSocket, MeshConnection>();
  #tlsRefusals = 0;
  #admissionRefusals = 0;

  constructor(
    host: GateHost,
    credentials: MeshCredentials | null | undefined,
    maxNodes: number,
    admission?: Partial<AdmissionLimits>,
  ) {
    this.#host = host;
    this.tls = credentials ? new MeshTls(credentials) : null;
    this.admission = new Admission(admissionLimits(maxNodes, admission));
    // Paused: an accepted socket is re-wrapped (rewrapAccepted) before anything is read from it.
    this.server = net.createServer({ pauseOnConnect: true }, (socket) => this.#onAccept(socket));
    this.server.on('error', (err) => host.log.error(`mesh: listener error: ${err.message}`));
    // Node's own cap (sockets past it are closed unread): a backstop for the admission count.
    this.server.maxConnections = this.admission.limits.maxInbound;
    this.server.on('drop', (d) =>
      this.#refuseAdmission(
        d?.remoteAddress,
        `${this.admission.limits.maxInbound} inbound connections already (the most)`,
      ),
    );
    this.#tlsServer = this.tls ? this.tls.createServer(this.admission.limits.timeoutMs) : null;
    this.#tlsServer?.on('secureConnection', (socket: tls.TLSSocket) => this.#onSecureInbound(socket));
    this.#tlsServer?.on('tlsClientError', (err: Error, socket: tls.TLSSocket) => this.#onTlsClientError(err, socket));
  }

  /** Inbound and outbound handshakes refused (wrong key, unknown certificate, not TLS), since start. */
  get tlsRefusals(): number {
    return this.#tlsRefusals;
  }

  /** Inbound connections closed for want of an admission slot or past its deadline, since start. */
  get admissionRefusals(): number {
    return this.#admissionRefusals;
  }

  /** The connection registered (or handshaken): no longer pending, its admission deadline is off. */
  established(conn: MeshConnection): void {
    this.#slots.get(conn)?.establish();
  }

  /** The connection closed: its slot is free again. */
  closed(conn: MeshConnection): void {
    const slot = this.#slots.get(conn);
    if (!slot) return;
    this.#slots.delete(conn);
    slot.release();
  }

  /** Without credentials only loopback is dialled (the resolver's admit hook, see dial.ts). */
  admitDial(address: string, port: number): string | null {
    if (this.tls || isLoopbackAddress(address)) return null;
    warnLimited(
      this.#host.log,
      this.#host.limiter,
      `dial-far:${address}`,
      `mesh: not dialling ${formatHostPort(address, port)}: no mesh credentials, so the mesh stays on loopback; ${CREDENTIALS_HINT}`,
    );
    return 'not loopback, and this server has no mesh credentials';
  }

  /** Open a dialled socket: the client side of a TLS handshake when the mesh has credentials, else plain TCP. */
  open(address: string, port: number, onread: OnRead): net.Socket {
    return this.tls ? this.tls.connect(address, port, onread) : openPlain(address, port, onread);
  }

  /**
   * Watch the client side of a handshake on a dialled socket (credentials
   * given). Its listeners go on before the connection's own, so a failure
   * closes the link with the reason in words; success opens it once the peer
   * is checked. `track` must be called with the connection made on it.
   */
  secureDialled(socket: tls.TLSSocket): tls.TLSSocket {
    const address = unmapAddress(socket.remoteAddress ?? '?');
    const who = formatHostPort(address, socket.remotePort ?? 0);
    const ms = this.admission.limits.timeoutMs;
    const timer = setTimeout(() => {
      const conn = this.#dialled.get(socket);
      if (!conn || conn.closed || !conn.gated) return;
      this.#tlsRefused(who, address, `no TLS handshake within ${ms} ms`, 'client');
      conn.close(`TLS: no handshake within ${ms} ms`);
    }, ms);
    timer.unref();
    socket.on('error', (err: Error) => {
      const conn = this.#dialled.get(socket);
      clearTimeout(timer);
      if (!conn || conn.closed || !conn.gated) return;
      const reason = this.tls!.failure(err, socket, 'client');
      this.#tlsRefused(who, address, reason, 'client');
      conn.close(`TLS: ${reason}`);
    });
    socket.once('secureConnect', () => {
      clearTimeout(timer);
      const conn = this.#dialled.get(socket);
      if (!conn || conn.closed) return;
      const bad = this.tls!.verify(socket);
      if (bad !== null) {
        this.#tlsRefused(who, address, bad, 'client');
        conn.close(`TLS: ${bad}`);
        return;
      }
      conn.open();
    });
    socket.once('close', () => clearTimeout(timer));
    return socket;
  }

  /** The connection made on a socket from secureDialled. */
  track(socket: tls.TLSSocket, conn: MeshConnection): void {
    this.#dialled.set(socket, conn);
  }

  /** Drop the handshakes in progress (the mesh is closing). */
  close(): void {
    for (const h of [...this.#handshakes.values()]) h.raw.destroy();
    this.#handshakes.clear();
  }

  /**
   * A socket accepted paused (nothing read): a slot first, or it is closed
   * unread; then either its TLS handshake (tls.ts: the first byte must open
   * one) or, without credentials, straight to a mesh connection.
   */
  #onAccept(accepted: net.Socket): void {
    if (this.#host.closing()) {
      accepted.destroy();
      return;
    }
    const address = accepted.remoteAddress;
    if (!this.tls && (address === undefined || !isLoopbackAddress(address))) {
      // The listener is bound to loopback; this holds even where the kernel routes outside packets to it.
      this.#refuseAdmission(address, 'not from loopback, and this server has no mesh credentials');
      accepted.destroy();
      return;
    }
    const slot = this.admission.admit(address);
    if (typeof slot === 'string') {
      this.#refuseAdmission(address, slot);
      accepted.destroy();
      return;
    }
    const who = formatHostPort(unmapAddress(address ?? '?'), accepted.remotePort ?? 0);
    if (this.tls) {
      this.#startTls(accepted, slot, who);
      return;
    }
    const socket = rewrapAccepted(accepted) ?? accepted.resume();
    const conn = this.#host.adoptInbound(socket);
    this.#adoptSlot(conn, slot, who);
    this.#host.debug(`mesh: accepted ${conn.remote}`);
  }

  #refuseAdmission(address: string | undefined, why: string): void {
    this.#admissionRefusals++;
    const from = unmapAddress(address ?? '?');
    warnLimited(this.#host.log, this.#host.limiter, `admit:${from}`, `mesh: refused a connection from ${from}: ${why}`);
  }

  /** The admission slot goes with the connection; past its deadline an unestablished link is closed. */
  #adoptSlot(conn: MeshConnection, slot: AdmissionSlot, who: string): void {
    this.#slots.set(conn, slot);
    slot.onTimeout = () => {
      this.#admissionRefusals++;
      const why = `not registered within ${this.admission.limits.timeoutMs} ms of connecting`;
      warnLimited(this.#host.log, this.#host.limiter, `admit-late:${slot.source}`, `mesh: closing ${who}: ${why}`);
      conn.close(why);
    };
  }

  /**
   * The server side of an inbound handshake. The first byte is read here (a
   * socket accepted paused): one that cannot open a TLS handshake (a
   * plaintext mesh frame, say) closes the socket without a byte in reply;
   * otherwise the byte goes back and the socket to the TLS server.
   */
  #startTls(raw: net.Socket, slot: AdmissionSlot, who: string): void {
    const key = `${raw.remoteAddress}|${raw.remotePort}`;
    const entry = { raw, slot, who };
    this.#handshakes.set(key, entry);
    // Until adopted, the slot goes with the raw socket (which closes with its TLS socket, on any outcome).
    raw.once('close', () => {
      if (this.#handshakes.get(key) === entry) {
        // Gone mid-handshake with nothing said yet: the TLS error, if any, came after the socket lost its address.
        this.#handshakes.delete(key);
        if (!this.#host.closing())
          this.#tlsRefused(
            who,
            slot.source,
            'the peer hung up during the TLS handshake (it does not accept our credentials)',
            'server',
          );
      }
      if (!slot.established) slot.release();
    });
    raw.on('error', () => undefined);
    slot.onTimeout = () => {
      if (this.#handshakes.get(key) === entry) this.#handshakes.delete(key);
      this.#admissionRefusals++;
      warnLimited(
        this.#host.log,
        this.#host.limiter,
        `admit-late:${slot.source}`,
        `mesh: closing ${who}: no TLS handshake within ${this.admission.limits.timeoutMs} ms of connecting`,
      );
      raw.destroy();
    };
    raw.once('data', (first: Buffer) => {
      raw.pause();
      if (this.#host.closing()) {
        raw.destroy();
        return;
      }
      if (!looksLikeTls(first[0]!)) {
        this.#handshakes.delete(key);
        const what =
          first.length >= 4 && first.readUInt32BE(0) === MESH_MAGIC
            ? 'it sent a plaintext mesh frame (a server without credentials?)'
            : `it does not speak TLS (first byte 0x${first[0]!.toString(16).padStart(2, '0')})`;
        this.#tlsRefused(who, slot.source, what, 'server');
        raw.destroy();
        return;
      }
      raw.unshift(first);
      this.#tlsServer!.emit('connection', raw);
    });
    raw.resume();
  }

  /** An inbound handshake completed: the peer is checked before its link exists. */
  #onSecureInbound(socket: tls.TLSSocket): void {
    const key = `${socket.remoteAddress}|${socket.remotePort}`;
    const h = this.#handshakes.get(key);
    this.#handshakes.delete(key);
    if (!h || this.#host.closing()) {
      socket.destroy();
      return;
    }
    const bad = this.tls!.verify(socket);
    if (bad !== null) {
      this.#tlsRefused(h.who, h.slot.source, bad, 'server');
      socket.destroy();
      return;
    }
    const conn = this.#host.adoptInbound(socket);
    this.#adoptSlot(conn, h.slot, h.who);
    this.#host.debug(`mesh: accepted ${conn.remote} (TLS)`);
  }

  #onTlsClientError(err: Error, socket: tls.TLSSocket): void {
    // A socket already closed has no address left: its raw socket's close says so (#startTls).
    const key = `${socket.remoteAddress}|${socket.remotePort}`;
    const h = this.#handshakes.get(key);
    socket.destroy();
    if (!h) return;
    this.#handshakes.delete(key);
    this.#tlsRefused(h.who, h.slot.source, this.tls!.failure(err, socket, 'server'), 'server');
  }

  /** One line per refused handshake, on each side, naming the peer and the reason (rate limited per peer and reason). */
  #tlsRefused(who: string, address: string, reason: string, side: 'client' | 'server'): void {
    this.#tlsRefusals++;
    const line = side === 'server' ? `mesh: refused ${who}: ${reason}` : `mesh: TLS with ${who} failed: ${reason}`;
    warnLimited(this.#host.log, this.#host.limiter, `tls:${address}:${reason.slice(0, 40)}`, line);
  }
}
