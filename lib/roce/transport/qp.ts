// A RoCE QP: its state (ib_qp_state), the checks every arriving packet must
// pass before the transport looks at it (state, transport type, P_Key, the
// connected peer's GID), COMM_EST on the first packet taken in RTR, and the
// move to ERROR that flushes both queues. The work itself is the requester,
// the completer and the responder.

import { DROP_BAD_PKEY, DROP_QP_STATE, DROP_WRONG_PEER, DROP_WRONG_TRANSPORT, type RoceCounters } from '../counters';
import { gidEquals, type RoceFrame } from '../frame';
import { PKEY_FULL_MEMBER } from '../headers';
import { F_REQUEST, OPCODE_FLAGS, TRANSPORT_MASK, TRANSPORT_RC, TRANSPORT_UC, TRANSPORT_UD } from '../opcodes';
import { Completer } from './completer';
import { Requester } from './requester';
import { Responder } from './responder';
import {
  Completion,
  EVENT_COMM_EST,
  type QpControl,
  QPS_ERR,
  QPS_RESET,
  QPS_RTR,
  QPS_RTS,
  QPS_SQD,
  QPT_GSI,
  QPT_RC,
  QPT_UC,
  type RoceQpConfig,
  type RoceQpDeps,
  WC_RECV,
  WC_WR_FLUSH_ERR,
} from './types';

/** A frame buffer big enough for any packet: 4096 bytes of payload plus every header and the ICRC. */
const TX_BUFFER_BYTES = 4096 + 256;
/** Receive WQEs flushed at most at once (an RQ is never deeper). */
const MAX_FLUSH = 65536;
const PKEY_BASE_MASK = 0x7fff;

export class RoceQp implements QpControl {
  state = QPS_RESET;
  readonly requester: Requester;
  readonly completer: Completer;
  readonly responder: Responder;
  #established = false;
  readonly #flushCompletion = new Completion();

  constructor(
    readonly cfg: RoceQpConfig,
    private readonly deps: RoceQpDeps,
    counters: RoceCounters,
  ) {
    checkPmtu(cfg.pmtu);
    // One frame buffer each for the two directions' senders: a READ response can be built while a request is.
    this.requester = new Requester(cfg, deps, counters, Buffer.alloc(TX_BUFFER_BYTES), this);
    this.completer = new Completer(cfg, deps, counters, this.requester);
    this.responder = new Responder(cfg, deps, counters, Buffer.alloc(TX_BUFFER_BYTES), this);
  }

  /** Move to a new state (modify QP); entering RTR and RTS starts the responder's and requester's PSNs. */
  modify(state: number): void {
    if (state === QPS_ERR) {
      this.toError(0);
      return;
    }
    const from = this.state;
    this.state = state;
    if (state === QPS_RESET) {
      this.requester.stop();
      this.responder.stop();
      this.#established = false;
    } else if (state === QPS_RTR && from !== QPS_RTR) {
      checkPmtu(this.cfg.pmtu);
      this.responder.start();
    } else if (state === QPS_RTS && from === QPS_RTR) {
      this.requester.start();
      this.requester.pump();
    } else if (state === QPS_RTS) {
      this.requester.pump();
    }
  }

  toError(event: number): void {
    if (this.state === QPS_ERR) return;
    this.state = QPS_ERR;
    this.responder.stop();
    this.requester.flush();
    this.#flushRecvs();
    if (event) this.deps.events.qpEvent(this.cfg.qpn, event);
  }

  #flushRecvs(): void {
    const c = this.#flushCompletion;
    c.status = WC_WR_FLUSH_ERR;
    c.opcode = WC_RECV;
    c.byteLen = 0;
    c.signaled = true;
    c.hasImm = false;
    c.hasInv = false;
    c.hasGrh = false;
    c.srcQp = 0;
    let wqe = this.responder.takeRecvInProgress() ?? this.deps.queues.nextRecv();
    for (let i = 0; i < MAX_FLUSH && wqe; i++) {
      c.wrId = wqe.wrId;
      this.deps.completions.recvCompleted(c);
      wqe = this.deps.queues.nextRecv();
    }
  }

  /** The SQ doorbell: send what may be sent. */
  kick(): void {
    this.requester.pump();
  }

  /** A decoded packet addressed to this QP; returns DROP_NONE or why it was dropped. */
  receive(buf: Buffer, f: RoceFrame): number {
    const s = this.state;
    if (s !== QPS_RTR && s !== QPS_RTS && s !== QPS_SQD) return DROP_QP_STATE;
    const h = f.headers;
    const t = this.cfg.type;
    const transport = h.opcode & TRANSPORT_MASK;
    const want = t === QPT_RC ? TRANSPORT_RC : t === QPT_UC ? TRANSPORT_UC : TRANSPORT_UD;
    if (transport !== want) return DROP_WRONG_TRANSPORT;
    if (!pkeyMatches(h.pkey, t === QPT_GSI ? h.pkey : this.cfg.pkey)) return DROP_BAD_PKEY;
    const request = (OPCODE_FLAGS[h.opcode]! & F_REQUEST) !== 0;
    if (t === QPT_RC || t === QPT_UC) {
      if (!gidEquals(f.srcGid, this.cfg.path.dstGid)) return DROP_WRONG_PEER;
      // Responses come only to a QP that sends: RTS or draining.
      if (!request && s === QPS_RTR) return DROP_QP_STATE;
    }
    if (!this.#established && s === QPS_RTR) {
      this.#established = true;
      this.deps.events.qpEvent(this.cfg.qpn, EVENT_COMM_EST);
    }
    if (request) return this.responder.onRequest(buf, f);
    return this.completer.onResponse(buf, h);
  }

  /** The QP's transport state in one line (requester, then responder), for the log when it fails. */
  describe(): string {
    return `state ${this.state}; send: ${this.requester.describe()}; receive: ${this.responder.describe()}`;
  }

  /** Stop every timer (destroy QP). */
  destroy(): void {
    this.requester.stop();
    this.responder.stop();
    this.state = QPS_RESET;
  }
}

/** P_Keys match on their low 15 bits, and at least one side must be a full member. */
function pkeyMatches(a: number, b: number): boolean {
  return (a & PKEY_BASE_MASK) === (b & PKEY_BASE_MASK) && ((a | b) & PKEY_FULL_MEMBER) !== 0;
}

/** The path MTUs of the IBTA (256..4096); the frame buffers are sized for the largest. A bad one is the caller's bug. */
function checkPmtu(pmtu: number): void {
  if (pmtu !== 256 && pmtu !== 512 && pmtu !== 1024 && pmtu !== 2048 && pmtu !== 4096) {
    throw new RangeError(`path MTU ${pmtu} is not 256, 512, 1024, 2048 or 4096`);
  }
}
