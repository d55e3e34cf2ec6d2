// The frames this node writes: the running sequence number, each frame's
// 32-byte header, and the parts and class a connection's send queue takes.
// Data and relayed frames get their header carved from a slab that is never
// written again once handed out (a queued frame keeps pointing at it until the
// socket has taken it); control and heartbeat frames get a buffer each.

import { encodeFrameHeader, isReplyFrame, writeFrameHeader } from './codec';
import type { MeshConnection } from './connection';
import { tcp_msg_header } from './layouts';
import { FrameHeader, MsgType } from './messages';
import type { OfferResult, OutFrame } from './outbound-queue';

const HEADER_SLAB = 16 * 1024;

/** A data message of ours, checked by Mesh.send(). */
interface DataFrame {
  readonly type: number;
  readonly src: number;
  readonly dst: number;
  readonly srcQpn: number;
  readonly dstQpn: number;
  /** The type's fixed header. */
  readonly header: Buffer;
  readonly parts: readonly Buffer[];
  /** header.length plus the parts' lengths: the frame's msg_len. */
  readonly length: number;
  readonly reply: boolean;
  readonly tag?: number;
  readonly onDone?: () => void;
}

export class FrameWriter {
  #seq = 0;
  #slab = Buffer.allocUnsafe(HEADER_SLAB);
  #slabUsed = 0;

  /** `self` gives our node id (0 until a worker has one) for the src of control and heartbeat frames. */
  constructor(private readonly self: () => number | undefined) {}

  /** Queue a data message on `conn`. */
  data(conn: MeshConnection, f: DataFrame): OfferResult | 'closed' {
    const hdr = this.#headerBuffer();
    writeFrameHeader(hdr, 0, {
      type: f.type,
      length: f.length,
      seq: this.#nextSeq(),
      src: f.src,
      dst: f.dst,
      srcQpn: f.srcQpn,
      dstQpn: f.dstQpn,
    });
    const out: Buffer[] = [hdr];
    if (f.header.length > 0) out.push(f.header);
    for (const p of f.parts) if (p.length > 0) out.push(p);
    const cls = f.reply ? 'reply' : 'request';
    const bytes = tcp_msg_header.SIZE + f.length;
    const frame: OutFrame = {
      parts: out,
      bytes,
      cls,
      ...(f.tag === undefined ? {} : { tag: f.tag }),
      ...(f.onDone ? { onDone: f.onDone } : {}),
    };
    const r = conn.send(frame);
    // Our answers to one peer stay within its reply room unless it stopped reading (or asks more than any requester
    // may): over its bound it is closed, as a peer whose control room overflows is.
    if (r === 'queue-full' && f.reply) {
      conn.close(`reply queue over its bound (${conn.outbound.dataBytes} bytes queued): the peer is not reading`);
      return 'closed';
    }
    return r;
  }

  /** Manager: pass a worker's frame on to `dest` with its header as received. */
  forward(dest: MeshConnection, h: FrameHeader, body: Buffer): OfferResult | 'closed' {
    const hdr = this.#headerBuffer();
    writeFrameHeader(hdr, 0, h);
    return dest.send({
      parts: body.length > 0 ? [hdr, body] : [hdr],
      bytes: hdr.length + body.length,
      cls: isReplyFrame(h.type, body) ? 'reply' : 'request',
    });
  }

  /** Frame and queue a control message; a peer whose control room overflows is closed. False when not queued. */
  control(conn: MeshConnection, type: number, body: Buffer): boolean {
    const hdr = encodeFrameHeader({
      type,
      length: body.length,
      seq: this.#nextSeq(),
      src: this.self() ?? 0,
      dst: conn.peerId ?? 0,
    });
    const r = conn.send({
      parts: body.length > 0 ? [hdr, body] : [hdr],
      bytes: hdr.length + body.length,
      cls: 'control',
    });
    if (r === 'overflow') {
      conn.close('control queue overflow: the peer is not reading');
      return false;
    }
    return r === 'queued';
  }

  /** A HEARTBEAT, or the HEARTBEAT_RESP answering one. */
  heartbeat(conn: MeshConnection, answer: boolean): void {
    const hdr = encodeFrameHeader({
      type: answer ? MsgType.HEARTBEAT_RESP : MsgType.HEARTBEAT,
      length: 0,
      seq: this.#nextSeq(),
      src: this.self() ?? 0,
      dst: conn.peerId ?? 0,
    });
    conn.sendHeartbeat({ parts: [hdr], bytes: hdr.length, cls: 'heartbeat' }, answer);
  }

  #nextSeq(): number {
    this.#seq = (this.#seq + 1) >>> 0;
    return this.#seq;
  }

  /** 32 bytes for a frame header, from the slab. */
  #headerBuffer(): Buffer {
    if (this.#slabUsed + tcp_msg_header.SIZE > this.#slab.length) {
      this.#slab = Buffer.allocUnsafe(HEADER_SLAB);
      this.#slabUsed = 0;
    }
    const b = this.#slab.subarray(this.#slabUsed, this.#slabUsed + tcp_msg_header.SIZE);
    this.#slabUsed += tcp_msg_header.SIZE;
    return b;
  }
}
