// Where each checked frame a connection reads goes (the C rocm-ernic's receive
// thread, after parsing):
//
// - before a link is established: registration and handshake frames to the
//   role; heartbeats ignored; data is a protocol violation;
// - on an established link: HEARTBEAT answered, HEARTBEAT_RESP absorbed,
//   other control frames to the role, data checked then delivered or relayed.
//
// Data checks: an ionic message carries the ionic magic; a peer or worker
// speaks only for itself; nothing relayed claims to come from us; a message
// for another node is only accepted by the manager, from a worker, to relay.
// Delivery charges the frame to the node-wide inbound queue and hands a
// MeshMessage to the 'message' listeners; relaying holds the source while the
// destination has no room. Returning false holds the frame (the connection
// pauses until unhold()).

import { meshBufferPool } from './buffer-pool';
import type { Logger } from '../log';
import { RateLimiter, warnLimited } from '../log';
import { dataHeaderSize, hasIonicMagic, isDataType } from './codec';
import type { MeshConnection } from './connection';
import type { Placement } from './frame-parser';
import type { FrameWriter } from './frame-writer';
import type { Placer } from './mesh-types';
import type { InboundBudget } from './inbound-budget';
import { tcp_msg_header } from './layouts';
import { MeshMessage } from './mesh-message';
import { FrameHeader, MsgType } from './messages';
import type { Role } from './role';

interface FrameRouterHost {
  readonly log: Logger;
  readonly limiter: RateLimiter;
  readonly role: Role;
  readonly writer: FrameWriter;
  readonly budget: InboundBudget;
  /** Our node id (undefined for a worker not registered yet). */
  nodeId(): number | undefined;
  /** A peer broke a protocol rule: count, warn (rate limited), close the connection. */
  violation(conn: MeshConnection, reason: string): void;
  /** Hand a message to the 'message' listeners. */
  emitMessage(msg: MeshMessage): void;
  debug(message: string): void;
}

export class FrameRouter {
  /** Relayed messages dropped: no link to their destination, or it closed. */
  relayDropped = 0;

  constructor(private readonly host: FrameRouterHost) {}

  /**
   * A large frame's head from `conn`: if it is an IONIC message for us on a
   * link allowed to carry it, ask `placer` where the rest goes. Anything
   * else is buffered as usual and judged whole by onFrame().
   */
  place(conn: MeshConnection, h: FrameHeader, head: Buffer, placer: Placer | null): Placement | null {
    if (!placer || !conn.established || h.type !== MsgType.IONIC || !hasIonicMagic(head)) return null;
    const me = this.host.nodeId();
    if (me === undefined || h.dst !== me) return null;
    if ((conn.kind === 'peer' || conn.kind === 'worker') && h.src !== conn.peerId) return null;
    if (conn.kind !== 'peer' && conn.kind !== 'worker' && h.src === me) return null;
    return placer(h.src, head, h.length - head.length);
  }

  /** A checked frame from `conn` (`placed`: body bytes already written where place() said, past `body`). False holds it. */
  onFrame(conn: MeshConnection, h: FrameHeader, body: Buffer, placed = 0): boolean {
    const host = this.host;
    if (!conn.established) {
      if (isDataType(h.type)) {
        host.violation(conn, `protocol: data before ${conn.outgoing ? 'the reply' : 'registration or handshake'}`);
        return true;
      }
      if (h.type === MsgType.HEARTBEAT || h.type === MsgType.HEARTBEAT_RESP) return true;
      host.role.onSetupFrame(conn, h, body);
      return true;
    }
    switch (h.type) {
      case MsgType.HEARTBEAT:
        host.writer.heartbeat(conn, true);
        return true;
      case MsgType.HEARTBEAT_RESP:
        return true;
      default:
        if (isDataType(h.type)) return this.#onData(conn, h, body, placed);
        host.role.onControl(conn, h, body);
        return true;
    }
  }

  #onData(conn: MeshConnection, h: FrameHeader, body: Buffer, placed: number): boolean {
    const host = this.host;
    const me = host.nodeId();
    if (h.type === MsgType.IONIC && !hasIonicMagic(body)) {
      host.violation(conn, 'protocol: ionic message without the ionic magic');
      return true;
    }
    // Who may send what on which link: a peer speaks for itself; a worker's
    // manager link also carries what the manager relays from others.
    if (conn.kind === 'peer' || conn.kind === 'worker') {
      if (h.src !== conn.peerId) {
        host.violation(conn, `protocol: message claims to be from node ${h.src}`);
        return true;
      }
    } else if (h.src === me) {
      host.violation(conn, `protocol: relayed message claims to be from us`);
      return true;
    }
    if (h.dst !== me) {
      if (placed > 0) {
        host.violation(conn, 'protocol: a placed message not for us');
        return true;
      }
      if (host.role.kind === 'manager' && conn.kind === 'worker') return this.#relay(conn, h, body);
      host.violation(conn, `protocol: message for node ${h.dst} on a direct link to node ${me}`);
      return true;
    }
    return this.#deliver(conn, h, body, placed);
  }

  #deliver(conn: MeshConnection, h: FrameHeader, body: Buffer, placed: number): boolean {
    const budget = this.host.budget;
    const charge = tcp_msg_header.SIZE + body.length;
    const r = budget.charge(charge, conn);
    if (r === 'wait') return false;
    if (r === 'drop') {
      this.host.debug(`mesh: inbound queue full with no client; dropped a message from node ${h.src}`);
      return true;
    }
    const hs = dataHeaderSize(h.type) ?? 0;
    const msg = new MeshMessage(
      h.src,
      h.type,
      h.seq,
      h.srcQpn,
      h.dstQpn,
      body.subarray(0, hs),
      body.subarray(hs),
      () => {
        budget.release(charge);
        meshBufferPool.give(body);
      },
      placed,
    );
    this.host.emitMessage(msg);
    msg.settle();
    return true;
  }

  /** Manager: pass a worker's message on to its destination, holding the source while the destination has no room. */
  #relay(conn: MeshConnection, h: FrameHeader, body: Buffer): boolean {
    const dest = this.host.role.route(h.dst);
    if (!dest || dest === conn) {
      this.relayDropped++;
      warnLimited(
        this.host.log,
        this.host.limiter,
        `relay:${h.dst}`,
        `mesh: no link to node ${h.dst}; dropped a message from node ${h.src}`,
      );
      return true;
    }
    const r = this.host.writer.forward(dest, h, body);
    if (r === 'queued') return true;
    if (r === 'queue-full') {
      dest.roomWaiters.add(conn);
      return false;
    }
    this.relayDropped++;
    return true;
  }
}
