// The requester of an RC, UC or UD QP (IBTA Vol 1 9.7, rxe_req.c for the
// facts): takes send WQEs, cuts each message into path-MTU packets
// (first/middle/last/only), numbers them with PSNs, and keeps the unacknowledged
// ones until the completer retires them. Go-back-N retransmission starts from
// the oldest unacknowledged PSN on the local ACK timeout (retry_cnt bounds
// it), on a PSN sequence NAK, and after an RNR NAK's wait (rnr_retry bounds
// it). READs and atomics wait while max_rd_atomic of them are outstanding.
// Timers are setTimeout: the only timers a real HCA has here.

import type { RoceCounters } from '../counters';
import { encodeFrame, frameHeaderBytes } from '../frame';
import { GSI_QKEY, MASK_24 } from '../headers';
import {
  OP_COMPARE_SWAP,
  OP_FETCH_ADD,
  OP_READ_REQUEST,
  OP_SEND_FIRST,
  OP_SEND_LAST,
  OP_SEND_LAST_IMM,
  OP_SEND_LAST_INV,
  OP_SEND_MIDDLE,
  OP_SEND_ONLY,
  OP_SEND_ONLY_IMM,
  OP_SEND_ONLY_INV,
  OP_WRITE_FIRST,
  OP_WRITE_LAST,
  OP_WRITE_LAST_IMM,
  OP_WRITE_MIDDLE,
  OP_WRITE_ONLY,
  OP_WRITE_ONLY_IMM,
  TRANSPORT_RC,
  TRANSPORT_UC,
  TRANSPORT_UD,
} from '../opcodes';
import { TransportHeaders } from '../packet';
import { psnAdd, psnDiff } from '../psn';
import { ackTimeoutMs, RNR_RETRY_INFINITE, rnrTimerMs, timerDelayMs } from '../timers';
import { gather } from './sgl';
import {
  Completion,
  type QpControl,
  QPS_RTS,
  QPS_SQD,
  QPT_GSI,
  QPT_RC,
  QPT_UC,
  QPT_UD,
  type RoceQpConfig,
  type RoceQpDeps,
  type SendWqe,
  WC_COMP_SWAP,
  WC_FETCH_ADD,
  WC_LOC_LEN_ERR,
  WC_LOC_PROT_ERR,
  WC_LOC_QP_OP_ERR,
  WC_RDMA_READ,
  WC_RDMA_WRITE,
  WC_RETRY_EXC_ERR,
  WC_RNR_RETRY_EXC_ERR,
  WC_SEND,
  WC_SUCCESS,
  WC_WR_FLUSH_ERR,
  WR_ATOMIC_CMP_AND_SWP,
  WR_ATOMIC_FETCH_AND_ADD,
  WR_RDMA_READ,
  WR_RDMA_WRITE,
  WR_RDMA_WRITE_WITH_IMM,
  WR_SEND,
  WR_SEND_WITH_IMM,
  WR_SEND_WITH_INV,
} from './types';

const KIND_SEND = 0;
const KIND_WRITE = 1;
export const KIND_READ = 2;
export const KIND_ATOMIC = 3;

/** PSNs that may be sent ahead of the oldest unacknowledged one. */
const SEND_WINDOW_PSNS = 512;
/** Send WQEs the requester holds at once (sent, not yet completed). */
const MAX_PENDING_WQES = 1024;
/** Ask for an ACK at least this often within a long message (always on its last packet). */
const ACK_REQ_EVERY = 64;
/** WQEs pulled and flushed at most per flush (an SQ is never deeper). */
const MAX_FLUSH = 65536;
/** The longest message (2^31 bytes, IBTA). */
const MAX_MESSAGE = 0x80000000;

/** A send WQE on its way: where its PSNs start, how many it takes, how far sending and responses have got. */
export class PendingWqe {
  wqe: SendWqe | null = null;
  kind = KIND_SEND;
  firstPsn = 0;
  npkts = 1;
  /** PSNs of it sent (in the current pass: a rewind lowers it). */
  sent = 0;
  /** READ: response packets placed; atomic: 1 once its ACK came. */
  responses = 0;
  /** READ: the packet index the current response stream started at (a resent READ starts a new FIRST). */
  responseStart = 0;
  /** Counted in the outstanding READ/atomic total. */
  rdCounted = false;
  /** READ: the response index it was last asked for again alone (a gap in its answer), or -1. */
  resentAt = -1;
}

export class Requester {
  readonly pending: PendingWqe[] = [];
  /** Index in `pending` of the first WQE not wholly sent in this pass. */
  cursor = 0;
  /** The first PSN of the next new WQE. */
  nextPsn = 0;
  /** Every PSN up to and including this is acknowledged. */
  ackedPsn = MASK_24;
  /** The highest PSN ever sent (retransmits are the ones not above it). */
  maxSentPsn = MASK_24;
  rdOutstanding = 0;
  retryLeft = 0;
  rnrRetryLeft = 0;
  rnrWaiting = false;
  readonly headers = new TransportHeaders();
  readonly completion = new Completion();
  #timer: NodeJS.Timeout | null = null;
  #rnrTimer: NodeJS.Timeout | null = null;
  #pumping = false;
  /** The PSN the last resend started from, until something new is acknowledged (-1: none). */
  #resentFrom = -1;
  readonly #free: PendingWqe[] = [];

  constructor(
    private readonly cfg: RoceQpConfig,
    private readonly deps: RoceQpDeps,
    private readonly counters: RoceCounters,
    private readonly tx: Buffer,
    private readonly qp: QpControl,
  ) {}

  /** Entering RTS: PSNs start at the configured sq_psn. */
  start(): void {
    this.nextPsn = this.cfg.sqPsn & MASK_24;
    this.ackedPsn = psnAdd(this.nextPsn, -1);
    this.maxSentPsn = this.ackedPsn;
    this.retryLeft = this.cfg.retryCnt;
    this.rnrRetryLeft = this.cfg.rnrRetry;
  }

  /** Send what the window, the READ/atomic limit and the SQ allow. Safe to call at any time (a doorbell, an ACK). */
  pump(): void {
    if (this.#pumping) return;
    this.#pumping = true;
    try {
      this.#pumpLoop();
    } finally {
      this.#pumping = false;
    }
  }

  #pumpLoop(): void {
    for (let budget = SEND_WINDOW_PSNS; budget > 0; budget--) {
      if (this.qp.state !== QPS_RTS || this.rnrWaiting) return;
      if (this.cursor === this.pending.length && !this.#takeNext()) return;
      const p = this.pending[this.cursor]!;
      const psn = psnAdd(p.firstPsn, p.sent);
      if (this.cfg.type === QPT_RC && psnDiff(psn, this.ackedPsn) > SEND_WINDOW_PSNS) return;
      if ((p.kind === KIND_READ || p.kind === KIND_ATOMIC) && !p.rdCounted) {
        if (this.rdOutstanding >= Math.max(1, this.cfg.maxRdAtomic)) return;
        p.rdCounted = true;
        this.rdOutstanding++;
      }
      if (!this.#emit(p, psn)) return;
      if (p.sent < p.npkts) continue;
      this.cursor++;
      // UC and UD have no acknowledgements: a message is done once sent.
      if (this.cfg.type !== QPT_RC) this.completeHead(WC_SUCCESS);
    }
  }

  /** Pull the next send WQE into `pending`; false when there is none or no room. */
  #takeNext(): boolean {
    if (this.pending.length >= MAX_PENDING_WQES) return false;
    const wqe = this.deps.queues.nextSend();
    if (!wqe) return false;
    const p = this.#free.pop() ?? new PendingWqe();
    p.wqe = wqe;
    p.kind = kindOf(wqe.opcode);
    p.sent = 0;
    p.responses = 0;
    p.responseStart = 0;
    p.rdCounted = false;
    p.resentAt = -1;
    p.firstPsn = this.nextPsn;
    const bad = this.#invalid(wqe, p.kind);
    p.npkts = bad ? 1 : p.kind === KIND_ATOMIC ? 1 : Math.max(1, Math.ceil(wqe.length / this.cfg.pmtu));
    this.pending.push(p);
    if (bad) {
      this.failAt(this.pending.length - 1, bad);
      return false;
    }
    this.nextPsn = psnAdd(this.nextPsn, p.npkts);
    return true;
  }

  /** The completion status that refuses this WQE before it is sent, or 0. */
  #invalid(wqe: SendWqe, kind: number): number {
    const t = this.cfg.type;
    if (kind < 0) return WC_LOC_QP_OP_ERR;
    if (!(wqe.length >= 0 && wqe.length < MAX_MESSAGE)) return WC_LOC_LEN_ERR;
    if (t === QPT_UD || t === QPT_GSI) {
      if (kind !== KIND_SEND || wqe.opcode === WR_SEND_WITH_INV || !wqe.ud) return WC_LOC_QP_OP_ERR;
      if (wqe.length > this.cfg.pmtu) return WC_LOC_LEN_ERR;
    } else if (t === QPT_UC) {
      if (kind === KIND_READ || kind === KIND_ATOMIC || wqe.opcode === WR_SEND_WITH_INV) return WC_LOC_QP_OP_ERR;
    }
    if (kind === KIND_ATOMIC && wqe.length < 8) return WC_LOC_LEN_ERR;
    // Remote addresses travel as numbers: one past 2^53 (or unreadable) cannot be sent exactly.
    if (kind !== KIND_SEND && !(wqe.remoteAddr >= 0 && wqe.remoteAddr + wqe.length <= Number.MAX_SAFE_INTEGER))
      return WC_LOC_QP_OP_ERR;
    return 0;
  }

  /** Build and send the packet of p at psn; false (the WQE failed) when its data cannot be read. */
  #emit(p: PendingWqe, psn: number): boolean {
    const wqe = p.wqe!;
    const h = this.headers;
    const cfg = this.cfg;
    const k = p.sent;
    const last = k === p.npkts - 1;
    h.solicited = false;
    h.ackReq = false;
    h.pkey = cfg.pkey;
    h.destQp = cfg.destQpn;
    h.psn = psn;
    h.fecn = false;
    h.becn = false;
    h.migReq = false;
    let path = cfg.path;
    let payloadLen = 0;
    let payloadAt = 0;
    if (p.kind === KIND_READ) {
      // Answered whole already (out of order, behind an earlier READ's gap): nothing to ask for.
      if (p.responses >= p.npkts) {
        p.sent = p.npkts;
        return true;
      }
      // A READ is one request for all its response PSNs; a resent one asks for what is still missing.
      const done = p.responses * cfg.pmtu;
      h.opcode = TRANSPORT_RC | OP_READ_REQUEST;
      h.psn = psnAdd(p.firstPsn, p.responses);
      h.va = wqe.remoteAddr + done;
      h.rkey = wqe.rkey;
      h.dmaLen = wqe.length - done;
      h.ackReq = true;
      p.responseStart = p.responses;
      p.sent = p.npkts;
    } else if (p.kind === KIND_ATOMIC) {
      h.opcode = TRANSPORT_RC | (wqe.opcode === WR_ATOMIC_CMP_AND_SWP ? OP_COMPARE_SWAP : OP_FETCH_ADD);
      h.va = wqe.remoteAddr;
      h.rkey = wqe.rkey;
      h.swapHi = wqe.swapHi;
      h.swapLo = wqe.swapLo;
      h.cmpHi = wqe.cmpHi;
      h.cmpLo = wqe.cmpLo;
      h.ackReq = true;
      p.sent = 1;
    } else {
      const datagram = cfg.type === QPT_UD || cfg.type === QPT_GSI;
      const transport = cfg.type === QPT_RC ? TRANSPORT_RC : cfg.type === QPT_UC ? TRANSPORT_UC : TRANSPORT_UD;
      h.opcode = transport | packetOp(wqe.opcode, k, p.npkts);
      payloadAt = k * cfg.pmtu;
      payloadLen = Math.min(cfg.pmtu, wqe.length - payloadAt);
      if (k === 0) {
        h.va = wqe.remoteAddr;
        h.rkey = wqe.rkey;
        h.dmaLen = wqe.length;
      }
      h.imm = wqe.imm;
      h.invRkey = wqe.imm;
      h.solicited = last && wqe.solicited;
      h.ackReq = cfg.type === QPT_RC && (last || (k + 1) % ACK_REQ_EVERY === 0);
      if (datagram) {
        const ud = wqe.ud!;
        path = ud.path;
        h.destQp = ud.destQpn & MASK_24;
        // QP1 always uses the GSI Q_Key; elsewhere the high bit of a WQE's Q_Key says: use the QP's own (IBTA 10.2.5).
        h.qkey = cfg.type === QPT_GSI ? GSI_QKEY : ud.qkey >= 0x80000000 || ud.qkey < 0 ? cfg.qkey : ud.qkey;
        h.srcQp = cfg.qpn;
      }
      p.sent++;
    }
    const at = frameHeaderBytes(path, h.opcode);
    if (payloadLen > 0 && !gather(this.deps.memory, wqe.sgl, wqe.inline, payloadAt, payloadLen, this.tx, at)) {
      this.failAt(this.pending.indexOf(p), WC_LOC_PROT_ERR);
      return false;
    }
    const len = encodeFrame(this.tx, path, h, payloadLen);
    if (cfg.type === QPT_RC || cfg.type === QPT_UC) {
      if (psnDiff(h.psn, this.maxSentPsn) <= 0) this.counters.retransmits++;
      else this.maxSentPsn = psnAdd(h.psn, p.kind === KIND_READ ? p.npkts - 1 - p.responses : 0);
    } else {
      this.maxSentPsn = h.psn;
    }
    this.counters.txPackets++;
    this.counters.txBytes += len;
    this.deps.wire.send(this.tx, len);
    if (cfg.type === QPT_RC) this.#armTimer();
    return true;
  }

  /** Retire the oldest pending WQE with `status` (success, or the error the completer found). */
  completeHead(status: number): void {
    const p = this.pending.shift();
    if (!p) return;
    if (this.cursor > 0) this.cursor--;
    if (p.rdCounted) this.rdOutstanding--;
    const wqe = p.wqe!;
    const c = this.completion;
    c.wrId = wqe.wrId;
    c.status = status;
    c.opcode = wcOpcode(wqe.opcode);
    c.byteLen =
      status === WC_SUCCESS && (p.kind === KIND_READ || p.kind === KIND_ATOMIC)
        ? p.kind === KIND_READ
          ? wqe.length
          : 8
        : wqe.length;
    c.signaled = wqe.signaled || status !== WC_SUCCESS;
    c.hasImm = false;
    c.hasInv = false;
    c.srcQp = 0;
    c.hasGrh = false;
    p.wqe = null;
    this.#free.push(p);
    this.deps.completions.sendCompleted(c);
  }

  /** The oldest WQE failed: complete it with `status` and take the QP to ERROR (which flushes the rest). */
  failHead(status: number): void {
    this.failAt(0, status);
  }

  /**
   * pending[index] failed: the ones before it (sent, never acknowledged) are
   * flushed, it completes with `status`, and the QP goes to ERROR, which
   * flushes the ones after it. Completions stay in WQE order.
   */
  failAt(index: number, status: number): void {
    for (let i = 0; i < index && this.pending.length > 0; i++) this.completeHead(WC_WR_FLUSH_ERR);
    this.completeHead(status);
    this.qp.toError(0);
  }

  /** Flush every pending and queued send WQE (the QP is in ERROR). */
  flush(): void {
    this.#stopTimers();
    for (let i = 0; i < MAX_FLUSH && this.pending.length > 0; i++) this.completeHead(WC_WR_FLUSH_ERR);
    this.cursor = 0;
    for (let i = 0; i < MAX_FLUSH; i++) {
      const wqe = this.deps.queues.nextSend();
      if (!wqe) break;
      const p = this.#free.pop() ?? new PendingWqe();
      p.wqe = wqe;
      p.kind = kindOf(wqe.opcode);
      p.rdCounted = false;
      this.pending.push(p);
      this.completeHead(WC_WR_FLUSH_ERR);
    }
  }

  /** Go back to psn: the pending WQE holding it sends again from there, every later one from its start. */
  rewind(psn: number): void {
    let found = false;
    for (let i = 0; i < this.pending.length; i++) {
      const p = this.pending[i]!;
      p.resentAt = -1;
      if (found) {
        p.sent = 0;
        continue;
      }
      const k = psnDiff(psn, p.firstPsn);
      if (k < 0 || k >= p.npkts) continue;
      found = true;
      this.cursor = i;
      p.sent = p.kind === KIND_SEND || p.kind === KIND_WRITE ? k : 0;
    }
  }

  /**
   * Send again from psn after a sequence NAK, an implied NAK or a timeout, if
   * retries are left. Answers to packets sent before this resend keep coming
   * and imply gaps it already covers: until something new is acknowledged,
   * only the timer resends from the same PSN or a later one again.
   */
  retry(psn: number, fromTimer = false): void {
    if (!fromTimer && this.#resentFrom >= 0 && psnDiff(psn, this.#resentFrom) >= 0) return;
    if (this.retryLeft <= 0) {
      this.failHead(WC_RETRY_EXC_ERR);
      return;
    }
    this.retryLeft--;
    this.#resentFrom = psn;
    this.rewind(psn);
    this.pump();
  }

  /**
   * READ or atomic p's answer is missing (a gap in a READ's answer, or a
   * later answer came first): ask again for its rest alone, not for every
   * request after it (go-back-N would have the responder answer each of them
   * again, though their answers are arriving). Once per gap, until p's answer
   * moves on; the local ACK timer (which counts retries) still resends
   * everything if this is lost.
   */
  resendAlone(p: PendingWqe): void {
    // Bounded without the retry count: a second resend needs the answer to have moved on first.
    if (p.resentAt === p.responses || this.qp.state !== QPS_RTS) return;
    p.resentAt = p.responses;
    this.#emit(p, psnAdd(p.firstPsn, p.responses));
  }

  /** An RNR NAK for psn: wait the time it names, then send again from psn; without RNR retries left, fail. */
  rnr(psn: number, timerCode: number): void {
    if (this.cfg.rnrRetry !== RNR_RETRY_INFINITE) {
      if (this.rnrRetryLeft <= 0) {
        this.failHead(WC_RNR_RETRY_EXC_ERR);
        return;
      }
      this.rnrRetryLeft--;
    }
    this.#clearAckTimer();
    this.rewind(psn);
    this.rnrWaiting = true;
    if (this.#rnrTimer) clearTimeout(this.#rnrTimer);
    this.#rnrTimer = setTimeout(
      () => {
        this.#rnrTimer = null;
        this.rnrWaiting = false;
        this.pump();
      },
      timerDelayMs(rnrTimerMs(timerCode)),
    );
  }

  /** The responder acknowledged something new: retries start over and the timer restarts. */
  progress(): void {
    this.#resentFrom = -1;
    this.retryLeft = this.cfg.retryCnt;
    this.rnrRetryLeft = this.cfg.rnrRetry;
    this.#clearAckTimer();
    this.#armTimer();
  }

  /** The send side's state in one line, for the log when a QP fails. */
  describe(): string {
    const p = this.pending[0];
    const head = p ? ` head kind ${p.kind} psn ${p.firstPsn}+${p.npkts} sent ${p.sent} responses ${p.responses}` : '';
    return (
      `next ${this.nextPsn} acked ${this.ackedPsn} maxSent ${this.maxSentPsn} pending ${this.pending.length}` +
      `${head} rdOut ${this.rdOutstanding} retryLeft ${this.retryLeft} rnrLeft ${this.rnrRetryLeft} resentFrom ${this.#resentFrom}`
    );
  }

  /** Whether sent PSNs await an acknowledgement. */
  hasUnacked(): boolean {
    return psnDiff(this.maxSentPsn, this.ackedPsn) > 0 && this.pending.length > 0;
  }

  /** The next PSN whose acknowledgement or response is missing. */
  resumePsn(): number {
    const p = this.pending[0];
    if (p && p.kind === KIND_READ) return psnAdd(p.firstPsn, p.responses);
    return psnAdd(this.ackedPsn, 1);
  }

  #armTimer(): void {
    if (this.#timer || this.rnrWaiting || !this.hasUnacked()) return;
    const ms = ackTimeoutMs(this.cfg.timeout);
    if (ms === Infinity) return;
    this.#timer = setTimeout(() => this.#onTimeout(), timerDelayMs(ms));
  }

  #onTimeout(): void {
    this.#timer = null;
    const s = this.qp.state;
    if ((s !== QPS_RTS && s !== QPS_SQD) || !this.hasUnacked()) return;
    this.counters.timeouts++;
    this.retry(this.resumePsn(), true);
  }

  #clearAckTimer(): void {
    if (this.#timer) clearTimeout(this.#timer);
    this.#timer = null;
  }

  #stopTimers(): void {
    this.#clearAckTimer();
    if (this.#rnrTimer) clearTimeout(this.#rnrTimer);
    this.#rnrTimer = null;
    this.rnrWaiting = false;
  }

  /** Stop every timer (the QP is destroyed or reset). */
  stop(): void {
    this.#stopTimers();
  }
}

/** KIND_* of a work request opcode, or -1 for one this transport does not send. */
function kindOf(op: number): number {
  switch (op) {
    case WR_SEND:
    case WR_SEND_WITH_IMM:
    case WR_SEND_WITH_INV:
      return KIND_SEND;
    case WR_RDMA_WRITE:
    case WR_RDMA_WRITE_WITH_IMM:
      return KIND_WRITE;
    case WR_RDMA_READ:
      return KIND_READ;
    case WR_ATOMIC_CMP_AND_SWP:
    case WR_ATOMIC_FETCH_AND_ADD:
      return KIND_ATOMIC;
    default:
      return -1;
  }
}

function wcOpcode(op: number): number {
  switch (op) {
    case WR_RDMA_WRITE:
    case WR_RDMA_WRITE_WITH_IMM:
      return WC_RDMA_WRITE;
    case WR_RDMA_READ:
      return WC_RDMA_READ;
    case WR_ATOMIC_CMP_AND_SWP:
      return WC_COMP_SWAP;
    case WR_ATOMIC_FETCH_AND_ADD:
      return WC_FETCH_ADD;
    default:
      return WC_SEND;
  }
}

/** The five-bit operation of packet k of n of a SEND or WRITE. */
function packetOp(wr: number, k: number, n: number): number {
  const only = n === 1;
  const first = k === 0;
  const last = k === n - 1;
  if (wr === WR_RDMA_WRITE || wr === WR_RDMA_WRITE_WITH_IMM) {
    const imm = wr === WR_RDMA_WRITE_WITH_IMM;
    if (only) return imm ? OP_WRITE_ONLY_IMM : OP_WRITE_ONLY;
    if (first) return OP_WRITE_FIRST;
    if (last) return imm ? OP_WRITE_LAST_IMM : OP_WRITE_LAST;
    return OP_WRITE_MIDDLE;
  }
  const imm = wr === WR_SEND_WITH_IMM;
  const inv = wr === WR_SEND_WITH_INV;
  if (only) return imm ? OP_SEND_ONLY_IMM : inv ? OP_SEND_ONLY_INV : OP_SEND_ONLY;
  if (first) return OP_SEND_FIRST;
  if (last) return imm ? OP_SEND_LAST_IMM : inv ? OP_SEND_LAST_INV : OP_SEND_LAST;
  return OP_SEND_MIDDLE;
}
