// The responder of an RC, UC or UD QP (IBTA Vol 1 9.7.4, rxe_resp.c for the
// facts). A request is taken only in sequence: the PSN the QP expects, in an
// opcode order that continues the message in progress, with lengths the path
// MTU allows. RC answers a PSN ahead with one sequence NAK, a PSN behind as a
// duplicate (ACKed again; a READ or atomic replayed from the responder
// resource cache, an atomic never executed twice), a SEND with no receive
// WQE with an RNR NAK, and a bad R_Key or request with a NAK that also takes
// the QP to ERROR and raises its asynchronous event. ACKs are coalesced: one
// at the end of the event-loop turn covers every packet that asked.
// UD checks the Q_Key and puts the packet's IP header (as a GRH) in front
// of the payload.

import {
  DROP_BAD_QKEY,
  DROP_NO_RECV,
  DROP_NONE,
  DROP_OPCODE_SEQUENCE,
  DROP_OVERSIZED,
  DROP_PSN_OUT_OF_WINDOW,
  NAK_KIND_INVALID_REQUEST,
  NAK_KIND_REMOTE_ACCESS,
  NAK_KIND_REMOTE_OPERATIONAL,
  NAK_KIND_RNR,
  NAK_KIND_SEQUENCE,
  type RoceCounters,
} from '../counters';
import { encodeFrame, frameHeaderBytes, GRH_BYTES, grhOf, type RoceFrame } from '../frame';
import {
  CREDITS_INVALID,
  GSI_QKEY,
  GSI_QPN,
  MASK_24,
  NAK_INVALID_REQUEST,
  NAK_PSN_SEQUENCE_ERROR,
  NAK_REMOTE_ACCESS_ERROR,
  NAK_REMOTE_OPERATIONAL_ERROR,
  SYNDROME_NAK,
  SYNDROME_RNR_NAK,
} from '../headers';
import {
  F_ATOMIC,
  F_END,
  F_IETH,
  F_IMMDT,
  F_READ,
  F_RECV_COMPLETES,
  F_RECV_WQE,
  F_SEND,
  F_START,
  F_WRITE,
  OP_ACKNOWLEDGE,
  OP_ATOMIC_ACKNOWLEDGE,
  OP_COMPARE_SWAP,
  OP_READ_RESPONSE_FIRST,
  OP_READ_RESPONSE_LAST,
  OP_READ_RESPONSE_MIDDLE,
  OP_READ_RESPONSE_ONLY,
  OPCODE_FLAGS,
  TRANSPORT_RC,
} from '../opcodes';
import { TransportHeaders } from '../packet';
import { psnAdd, psnDiff } from '../psn';
import { scatter } from './sgl';
import {
  ACCESS_REMOTE_ATOMIC,
  ACCESS_REMOTE_READ,
  ACCESS_REMOTE_WRITE,
  Completion,
  EVENT_ERR_ACCESS,
  EVENT_ERR_REQUEST,
  EVENT_QP_ERR,
  type QpControl,
  QPT_GSI,
  QPT_RC,
  QPT_UD,
  type RecvWqe,
  type RoceQpConfig,
  type RoceQpDeps,
  WC_LOC_LEN_ERR,
  WC_LOC_PROT_ERR,
  WC_RECV,
  WC_RECV_RDMA_WITH_IMM,
  WC_SUCCESS,
} from './types';
import { RES_ATOMIC, RES_READ, Resource } from './responder-resource';

export { GRH_BYTES };
/** Send an ACK at once when this many packets asked for one since the last. */
const ACK_COALESCE_MAX = 32;
/** READ response packets sent per turn before yielding to the event loop. */
const RESPONSE_BURST = 256;

export class Responder {
  /** The PSN expected next. */
  epsn = 0;
  msn = 0;
  /** The receive WQE a multi-packet SEND is filling, and how far. */
  #recv: RecvWqe | null = null;
  #recvOffset = 0;
  /** The opcode class of the message in progress (F_SEND or F_WRITE), 0 between messages. */
  #inMessage = 0;
  /** A WRITE in progress: where its next packet goes. */
  #writeVa = 0;
  #writeRkey = 0;
  #writeLeft = 0;
  #writeLen = 0;
  /** A sequence NAK was sent for this ePSN; no other until it moves. */
  #nakedPsn = -1;
  #ackPending = 0;
  #ackScheduled: NodeJS.Immediate | null = null;
  #responseScheduled: NodeJS.Immediate | null = null;
  /** The responder resource cache: a ring of max_dest_rd_atomic entries. */
  readonly #resources: Resource[] = [];
  #resourceNext = 0;
  readonly #out = new TransportHeaders();
  readonly #completion = new Completion();
  readonly #atomicBuf = Buffer.alloc(8);

  constructor(
    private readonly cfg: RoceQpConfig,
    private readonly deps: RoceQpDeps,
    private readonly counters: RoceCounters,
    private readonly tx: Buffer,
    private readonly qp: QpControl,
  ) {}

  /** Entering RTR: the first PSN expected, and an empty cache. */
  /** The receive side's state in one line, for the log when a QP fails. */
  describe(): string {
    return `epsn ${this.epsn} msn ${this.msn} inMessage ${this.#inMessage} nakedPsn ${this.#nakedPsn} ackPending ${this.#ackPending}`;
  }

  start(): void {
    this.epsn = this.cfg.rqPsn & MASK_24;
    this.msn = 0;
    this.#inMessage = 0;
    this.#recv = null;
    this.#nakedPsn = -1;
    this.#resources.length = 0;
    const n = Math.max(1, this.cfg.maxDestRdAtomic);
    for (let i = 0; i < n; i++) this.#resources.push(new Resource());
    this.#resourceNext = 0;
  }

  /** A request packet for this QP (its P_Key, peer and state already checked); DROP_NONE or why it was dropped. */
  onRequest(buf: Buffer, f: RoceFrame): number {
    const h = f.headers;
    if (h.payloadLen > this.cfg.pmtu) return DROP_OVERSIZED;
    const t = this.cfg.type;
    if (t === QPT_UD || t === QPT_GSI) return this.#datagram(buf, f);
    const d = psnDiff(h.psn, this.epsn);
    if (t === QPT_RC) {
      if (d > 0) {
        // Ahead: something was lost. One NAK per expected PSN, then silence until it comes.
        if (this.#nakedPsn !== this.epsn) {
          this.#nakedPsn = this.epsn;
          this.#sendNak(SYNDROME_NAK | NAK_PSN_SEQUENCE_ERROR, this.epsn, NAK_KIND_SEQUENCE);
        }
        return DROP_PSN_OUT_OF_WINDOW;
      }
      if (d < 0) return this.#duplicate(h);
    } else if (d !== 0) {
      // UC: a gap loses the message in progress; a packet that starts a message starts afresh.
      this.#abandonMessage();
      if (!(OPCODE_FLAGS[h.opcode]! & F_START)) {
        this.epsn = psnAdd(h.psn, 1);
        return DROP_PSN_OUT_OF_WINDOW;
      }
      this.epsn = h.psn;
    }
    return this.#inSequence(buf, h);
  }

  /** A request at the expected PSN. */
  #inSequence(buf: Buffer, h: TransportHeaders): number {
    const flags = OPCODE_FLAGS[h.opcode]!;
    const rc = this.cfg.type === QPT_RC;
    const cls = flags & (F_SEND | F_WRITE);
    // The opcode must continue the message in progress, or start one when none is.
    const continues = (flags & F_START) === 0;
    if (continues !== (this.#inMessage !== 0) || (continues && cls !== this.#inMessage)) {
      if (!rc) {
        this.#abandonMessage();
        this.epsn = psnAdd(h.psn, 1);
        return DROP_OPCODE_SEQUENCE;
      }
      return this.#fatalNak(NAK_INVALID_REQUEST, h.psn, DROP_OPCODE_SEQUENCE);
    }
    // A packet that does not end its message carries exactly one MTU.
    if (!(flags & F_END) && flags & (F_SEND | F_WRITE) && h.payloadLen !== this.cfg.pmtu) {
      return rc
        ? this.#fatalNak(NAK_INVALID_REQUEST, h.psn, DROP_OPCODE_SEQUENCE)
        : this.#ucDrop(h, DROP_OPCODE_SEQUENCE);
    }
    if (flags & F_READ) return this.#read(h);
    if (flags & F_ATOMIC) return this.#atomic(h);
    if (flags & F_RECV_WQE && !this.#recv) {
      const wqe = this.deps.queues.nextRecv();
      if (!wqe) {
        if (!rc) return this.#ucDrop(h, DROP_NO_RECV);
        this.#sendNak(SYNDROME_RNR_NAK | (this.cfg.minRnrTimer & 0x1f), h.psn, NAK_KIND_RNR);
        return DROP_NO_RECV;
      }
      this.#recv = wqe;
      this.#recvOffset = 0;
    }
    if (flags & F_WRITE) {
      if (flags & F_START) {
        const ok =
          (this.cfg.accessFlags & ACCESS_REMOTE_WRITE) !== 0 &&
          h.va >= 0 &&
          this.deps.memory.check(h.rkey, h.va, h.dmaLen, true, ACCESS_REMOTE_WRITE);
        if (!ok) return rc ? this.#fatalNak(NAK_REMOTE_ACCESS_ERROR, h.psn, DROP_NONE) : this.#ucDrop(h, DROP_NONE);
        this.#writeVa = h.va;
        this.#writeRkey = h.rkey;
        this.#writeLeft = h.dmaLen;
        this.#writeLen = h.dmaLen;
      }
      if (h.payloadLen > this.#writeLeft || (flags & F_END && h.payloadLen !== this.#writeLeft)) {
        return rc ? this.#fatalNak(NAK_INVALID_REQUEST, h.psn, DROP_NONE) : this.#ucDrop(h, DROP_NONE);
      }
      if (
        h.payloadLen > 0 &&
        !this.deps.memory.write(
          this.#writeRkey,
          this.#writeVa,
          h.payloadLen,
          true,
          ACCESS_REMOTE_WRITE,
          buf,
          h.payloadOff,
        )
      ) {
        return rc ? this.#fatalNak(NAK_REMOTE_ACCESS_ERROR, h.psn, DROP_NONE) : this.#ucDrop(h, DROP_NONE);
      }
      this.#writeVa += h.payloadLen;
      this.#writeLeft -= h.payloadLen;
    } else {
      const wqe = this.#recv!;
      if (this.#recvOffset + h.payloadLen > wqe.length) return this.#recvError(h, WC_LOC_LEN_ERR);
      if (h.payloadLen > 0 && !scatter(this.deps.memory, wqe.sgl, this.#recvOffset, h.payloadLen, buf, h.payloadOff)) {
        return this.#recvError(h, WC_LOC_PROT_ERR);
      }
      this.#recvOffset += h.payloadLen;
    }
    this.#inMessage = flags & F_END ? 0 : cls;
    this.epsn = psnAdd(h.psn, 1);
    if (flags & F_END) {
      this.msn = (this.msn + 1) & MASK_24;
      if (flags & F_RECV_COMPLETES) this.#completeRecv(h, flags, WC_SUCCESS);
    }
    if (rc && h.ackReq) this.#ackLater();
    return DROP_NONE;
  }

  #completeRecv(h: TransportHeaders, flags: number, status: number, srcQp = 0, hasGrh = false): void {
    const wqe = this.#recv;
    if (!wqe) return;
    const c = this.#completion;
    c.wrId = wqe.wrId;
    c.status = status;
    c.signaled = true;
    c.opcode = flags & F_WRITE ? WC_RECV_RDMA_WITH_IMM : WC_RECV;
    c.byteLen = flags & F_WRITE ? this.#writeLen : this.#recvOffset;
    c.hasImm = (flags & F_IMMDT) !== 0;
    c.imm = c.hasImm ? h.imm : 0;
    c.hasInv = (flags & F_IETH) !== 0;
    c.invRkey = c.hasInv ? h.invRkey : 0;
    c.srcQp = srcQp;
    c.hasGrh = hasGrh;
    c.solicited = h.solicited;
    this.#recv = null;
    this.#recvOffset = 0;
    this.deps.completions.recvCompleted(c);
  }

  /** The receive WQE cannot take the SEND: it completes in error; RC also NAKs and fails the QP. */
  #recvError(h: TransportHeaders, status: number): number {
    this.#completeRecv(h, OPCODE_FLAGS[h.opcode]!, status);
    if (this.cfg.type === QPT_RC) return this.#fatalNak(NAK_INVALID_REQUEST, h.psn, DROP_NONE);
    return this.#ucDrop(h, DROP_NONE);
  }

  /** UC: the message is lost and the next one starts clean. */
  #ucDrop(h: TransportHeaders, reason: number): number {
    this.#abandonMessage();
    this.epsn = psnAdd(h.psn, 1);
    return reason;
  }

  /** UC: the message in progress is lost; a receive WQE it took stays for the next SEND, which fills it from the start. */
  #abandonMessage(): void {
    this.#inMessage = 0;
    this.#recvOffset = 0;
  }

  #read(h: TransportHeaders): number {
    const ok =
      (this.cfg.accessFlags & ACCESS_REMOTE_READ) !== 0 &&
      h.va >= 0 &&
      this.deps.memory.check(h.rkey, h.va, h.dmaLen, true, ACCESS_REMOTE_READ);
    if (!ok) return this.#fatalNak(NAK_REMOTE_ACCESS_ERROR, h.psn, DROP_NONE);
    const r = this.#takeResource();
    if (!r) return this.#fatalNak(NAK_INVALID_REQUEST, h.psn, DROP_NONE);
    // An ACK owed for earlier requests goes first, and covers only them: its PSN is before this READ's.
    this.#flushAck();
    r.kind = RES_READ;
    r.firstPsn = h.psn;
    r.npkts = Math.max(1, Math.ceil(h.dmaLen / this.cfg.pmtu));
    r.next = 0;
    r.start = 0;
    r.va = h.va;
    r.rkey = h.rkey;
    r.len = h.dmaLen;
    this.epsn = psnAdd(h.psn, r.npkts);
    this.msn = (this.msn + 1) & MASK_24;
    this.#sendResponses();
    return DROP_NONE;
  }

  /** The next resource to use: the oldest, unless a READ in it is still being answered (then none: too many outstanding). */
  #takeResource(): Resource | null {
    const r = this.#resources[this.#resourceNext]!;
    if (r.kind === RES_READ && r.next < r.npkts) return null;
    this.#resourceNext = (this.#resourceNext + 1) % this.#resources.length;
    return r;
  }

  #atomic(h: TransportHeaders): number {
    if ((this.cfg.accessFlags & ACCESS_REMOTE_ATOMIC) === 0 || h.va < 0)
      return this.#fatalNak(NAK_REMOTE_ACCESS_ERROR, h.psn, DROP_NONE);
    if (h.va % 8 !== 0) return this.#fatalNak(NAK_INVALID_REQUEST, h.psn, DROP_NONE);
    const mem = this.deps.memory;
    const b = this.#atomicBuf;
    if (!mem.read(h.rkey, h.va, 8, true, ACCESS_REMOTE_ATOMIC, b, 0))
      return this.#fatalNak(NAK_REMOTE_ACCESS_ERROR, h.psn, DROP_NONE);
    const r = this.#takeResource();
    if (!r) return this.#fatalNak(NAK_INVALID_REQUEST, h.psn, DROP_NONE);
    this.#flushAck();
    // Memory holds the u64 in host (little-endian) order.
    const lo = b.readUInt32LE(0);
    const hi = b.readUInt32LE(4);
    let newHi = hi;
    let newLo = lo;
    if (h.opcode === (TRANSPORT_RC | OP_COMPARE_SWAP)) {
      if (hi === h.cmpHi >>> 0 && lo === h.cmpLo >>> 0) {
        newHi = h.swapHi >>> 0;
        newLo = h.swapLo >>> 0;
      }
    } else {
      const sumLo = lo + (h.swapLo >>> 0);
      newLo = sumLo >>> 0;
      newHi = (hi + (h.swapHi >>> 0) + (sumLo > 0xffffffff ? 1 : 0)) >>> 0;
    }
    b.writeUInt32LE(newLo, 0);
    b.writeUInt32LE(newHi, 4);
    if (!mem.write(h.rkey, h.va, 8, true, ACCESS_REMOTE_ATOMIC, b, 0))
      return this.#fatalNak(NAK_REMOTE_ACCESS_ERROR, h.psn, DROP_NONE);
    r.kind = RES_ATOMIC;
    r.firstPsn = h.psn;
    r.npkts = 1;
    r.origHi = hi;
    r.origLo = lo;
    this.epsn = psnAdd(h.psn, 1);
    this.msn = (this.msn + 1) & MASK_24;
    this.#sendAtomicAck(r);
    return DROP_NONE;
  }

  /** A request behind the expected PSN: answer it again without doing it again. */
  #duplicate(h: TransportHeaders): number {
    this.counters.duplicates++;
    const flags = OPCODE_FLAGS[h.opcode]!;
    if (flags & (F_READ | F_ATOMIC)) {
      for (const r of this.#resources) {
        const k = psnDiff(h.psn, r.firstPsn);
        if (r.kind === RES_READ && flags & F_READ && k >= 0 && k < r.npkts) {
          // A resent READ (perhaps for its remainder): answer from the PSN it names with what it asks.
          const ok = this.deps.memory.check(h.rkey, h.va, h.dmaLen, true, ACCESS_REMOTE_READ);
          if (!ok) return DROP_PSN_OUT_OF_WINDOW;
          r.start = k;
          r.next = k;
          r.va = h.va - k * this.cfg.pmtu;
          r.rkey = h.rkey;
          this.#sendResponses();
          return DROP_NONE;
        }
        if (r.kind === RES_ATOMIC && flags & F_ATOMIC && k === 0) {
          this.#sendAtomicAck(r);
          return DROP_NONE;
        }
      }
      // Too old for the cache: nothing to answer with.
      return DROP_PSN_OUT_OF_WINDOW;
    }
    // A duplicate SEND or WRITE: acknowledge what has been received.
    this.#ackLater();
    return DROP_NONE;
  }

  /** Send READ responses of every resource that has some due, a burst at a time. */
  #sendResponses(): void {
    let budget = RESPONSE_BURST;
    for (const r of this.#resources) {
      while (r.kind === RES_READ && r.next < r.npkts && budget > 0) {
        if (!this.#sendReadResponse(r)) return;
        budget--;
      }
    }
    if (budget === 0 && !this.#responseScheduled) {
      this.#responseScheduled = setImmediate(() => {
        this.#responseScheduled = null;
        this.#sendResponses();
      });
    }
  }

  #sendReadResponse(r: Resource): boolean {
    const pmtu = this.cfg.pmtu;
    const k = r.next;
    const first = k === r.start;
    const last = k === r.npkts - 1;
    const o = this.#out;
    o.opcode =
      TRANSPORT_RC |
      (first && last
        ? OP_READ_RESPONSE_ONLY
        : first
          ? OP_READ_RESPONSE_FIRST
          : last
            ? OP_READ_RESPONSE_LAST
            : OP_READ_RESPONSE_MIDDLE);
    this.#fillResponse(psnAdd(r.firstPsn, k), CREDITS_INVALID);
    const len = last ? r.len - k * pmtu : pmtu;
    const at = frameHeaderBytes(this.cfg.path, o.opcode);
    if (len > 0 && !this.deps.memory.read(r.rkey, r.va + k * pmtu, len, true, ACCESS_REMOTE_READ, this.tx, at)) {
      // The region went away under the READ: a remote access error.
      r.next = r.npkts;
      this.#fatalNak(NAK_REMOTE_ACCESS_ERROR, psnAdd(r.firstPsn, k), DROP_NONE);
      return false;
    }
    r.next++;
    this.#emit(len);
    return true;
  }

  #sendAtomicAck(r: Resource): void {
    const o = this.#out;
    o.opcode = TRANSPORT_RC | OP_ATOMIC_ACKNOWLEDGE;
    this.#fillResponse(r.firstPsn, CREDITS_INVALID);
    o.origHi = r.origHi;
    o.origLo = r.origLo;
    this.counters.acksTx++;
    this.#emit(0);
  }

  #fillResponse(psn: number, syndrome: number): void {
    const o = this.#out;
    o.psn = psn;
    o.syndrome = syndrome;
    o.msn = this.msn;
    o.destQp = this.cfg.destQpn;
    o.pkey = this.cfg.pkey;
    o.ackReq = false;
    o.solicited = false;
    o.fecn = false;
    o.becn = false;
  }

  #emit(payloadLen: number): void {
    const len = encodeFrame(this.tx, this.cfg.path, this.#out, payloadLen);
    this.counters.txPackets++;
    this.counters.txBytes += len;
    this.deps.wire.send(this.tx, len);
  }

  /** Note that a packet asked for an ACK; send it at the end of this turn, or now if many are waiting. */
  #ackLater(): void {
    this.#ackPending++;
    if (this.#ackPending >= ACK_COALESCE_MAX) {
      this.#flushAck();
      return;
    }
    if (!this.#ackScheduled)
      this.#ackScheduled = setImmediate(() => {
        this.#ackScheduled = null;
        this.#flushAck();
      });
  }

  /** Send the coalesced ACK now, if one is owed: it covers every PSN before the expected one. */
  #flushAck(): void {
    if (this.#ackPending === 0) return;
    this.#ackPending = 0;
    if (this.#ackScheduled) {
      clearImmediate(this.#ackScheduled);
      this.#ackScheduled = null;
    }
    const o = this.#out;
    o.opcode = TRANSPORT_RC | OP_ACKNOWLEDGE;
    this.#fillResponse(psnAdd(this.epsn, -1), CREDITS_INVALID);
    this.counters.acksTx++;
    this.#emit(0);
  }

  #sendNak(syndrome: number, psn: number, kind: number): void {
    this.#flushAck();
    const o = this.#out;
    o.opcode = TRANSPORT_RC | OP_ACKNOWLEDGE;
    this.#fillResponse(psn, syndrome);
    this.counters.naksTx[kind]!++;
    this.#emit(0);
  }

  /** NAK a request the QP cannot take, then fail the QP and raise the event that says why. */
  #fatalNak(code: number, psn: number, reason: number): number {
    const kind =
      code === NAK_REMOTE_ACCESS_ERROR
        ? NAK_KIND_REMOTE_ACCESS
        : code === NAK_REMOTE_OPERATIONAL_ERROR
          ? NAK_KIND_REMOTE_OPERATIONAL
          : NAK_KIND_INVALID_REQUEST;
    this.#sendNak(SYNDROME_NAK | code, psn, kind);
    this.qp.toError(
      code === NAK_REMOTE_ACCESS_ERROR
        ? EVENT_ERR_ACCESS
        : code === NAK_INVALID_REQUEST
          ? EVENT_ERR_REQUEST
          : EVENT_QP_ERR,
    );
    return reason;
  }

  /** UD and GSI: Q_Key check, a receive WQE, the IP header as GRH, then the payload. */
  #datagram(buf: Buffer, f: RoceFrame): number {
    const h = f.headers;
    const want = this.cfg.qpn === GSI_QPN ? GSI_QKEY : this.cfg.qkey;
    if (h.qkey >>> 0 !== want >>> 0) return DROP_BAD_QKEY;
    const wqe = this.deps.queues.nextRecv();
    if (!wqe) return DROP_NO_RECV;
    this.#recv = wqe;
    this.#recvOffset = 0;
    const mem = this.deps.memory;
    const grh = grhOf(buf, f, this.#grh);
    if (GRH_BYTES + h.payloadLen > wqe.length) return this.#datagramError(h, WC_LOC_LEN_ERR);
    if (
      !scatter(mem, wqe.sgl, 0, GRH_BYTES, grh, 0) ||
      (h.payloadLen > 0 && !scatter(mem, wqe.sgl, GRH_BYTES, h.payloadLen, buf, h.payloadOff))
    ) {
      return this.#datagramError(h, WC_LOC_PROT_ERR);
    }
    this.#recvOffset = GRH_BYTES + h.payloadLen;
    this.#completeRecv(h, OPCODE_FLAGS[h.opcode]!, WC_SUCCESS, h.srcQp, true);
    return DROP_NONE;
  }

  #datagramError(h: TransportHeaders, status: number): number {
    this.#recvOffset = 0;
    this.#completeRecv(h, OPCODE_FLAGS[h.opcode]!, status, h.srcQp, true);
    return DROP_NONE;
  }

  readonly #grh = Buffer.alloc(GRH_BYTES);

  /** Cancel the deferred ACK and responses (the QP is going away or to ERROR). */
  stop(): void {
    if (this.#ackScheduled) clearImmediate(this.#ackScheduled);
    if (this.#responseScheduled) clearImmediate(this.#responseScheduled);
    this.#ackScheduled = null;
    this.#responseScheduled = null;
    this.#ackPending = 0;
  }

  /** The receive WQE a SEND was filling, if any, for the QP's flush. */
  takeRecvInProgress(): RecvWqe | null {
    const w = this.#recv;
    this.#recv = null;
    return w;
  }
}
