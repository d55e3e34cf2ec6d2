// The completer of an RC QP (IBTA Vol 1 9.7.5-9.7.6, rxe_comp.c for the
// facts): reads what comes back from the responder. An ACK retires every
// SEND and WRITE up to its PSN; a READ response or atomic ACK also implies
// the ones before it. READ responses are placed into the WQE's SGL as they
// arrive, in PSN order; an atomic ACK's original value goes to its SGL. A
// PSN sequence NAK sends again from the PSN it names, an RNR NAK waits and
// then does, and the other NAKs fail the WQE and the QP. Anything outside
// the PSNs in flight is dropped and counted.

import {
  DROP_NONE,
  DROP_UNEXPECTED_RESPONSE,
  NAK_KIND_INVALID_REQUEST,
  NAK_KIND_REMOTE_ACCESS,
  NAK_KIND_REMOTE_OPERATIONAL,
  NAK_KIND_RNR,
  NAK_KIND_SEQUENCE,
  type RoceCounters,
} from '../counters';
import {
  NAK_INVALID_REQUEST,
  NAK_PSN_SEQUENCE_ERROR,
  NAK_REMOTE_ACCESS_ERROR,
  NAK_REMOTE_OPERATIONAL_ERROR,
  SYNDROME_ACK,
  SYNDROME_KIND_MASK,
  SYNDROME_NAK,
  SYNDROME_RNR_NAK,
  SYNDROME_VALUE_MASK,
} from '../headers';
import { F_ACK, F_ATOMICACKETH, F_END, F_READ_RESPONSE, F_START, OPCODE_FLAGS } from '../opcodes';
import type { TransportHeaders } from '../packet';
import { psnAdd, psnDiff } from '../psn';
import { KIND_ATOMIC, KIND_READ, type PendingWqe, type Requester } from './requester';
import { scatter } from './sgl';
import {
  type RoceQpConfig,
  type RoceQpDeps,
  WC_BAD_RESP_ERR,
  WC_LOC_PROT_ERR,
  WC_REM_ACCESS_ERR,
  WC_REM_INV_REQ_ERR,
  WC_REM_OP_ERR,
  WC_SUCCESS,
} from './types';

export class Completer {
  /** The highest PSN a later READ's answer acknowledged while an earlier READ's answer was incomplete. */
  #impliedAck = -1;
  /** The original remote data of an atomic, big-endian, on its way to the WQE's SGL. */
  readonly #atomicResult = Buffer.alloc(8);

  constructor(
    private readonly cfg: RoceQpConfig,
    private readonly deps: RoceQpDeps,
    private readonly counters: RoceCounters,
    private readonly req: Requester,
  ) {}

  /** A response packet (READ response, ACK, atomic ACK) for this QP; returns DROP_NONE or why it was dropped. */
  onResponse(buf: Buffer, h: TransportHeaders): number {
    const req = this.req;
    const flags = OPCODE_FLAGS[h.opcode]!;
    const psn = h.psn;
    if (psnDiff(psn, req.maxSentPsn) > 0) return DROP_UNEXPECTED_RESPONSE;
    if (psnDiff(psn, req.ackedPsn) <= 0) {
      // An answer to something already acknowledged or placed: a retransmission crossed it.
      this.counters.duplicates++;
      return DROP_NONE;
    }
    if (req.pending.length === 0) return DROP_UNEXPECTED_RESPONSE;
    if (flags & F_READ_RESPONSE) return this.#readResponse(buf, h);
    if (!(flags & F_ACK)) return DROP_UNEXPECTED_RESPONSE;
    const kind = h.syndrome & SYNDROME_KIND_MASK;
    const value = h.syndrome & SYNDROME_VALUE_MASK;
    if (flags & F_ATOMICACKETH) return this.#atomicAck(h);
    if (kind === SYNDROME_ACK) {
      this.counters.acksRx++;
      this.#ackThrough(psn);
      req.pump();
      return DROP_NONE;
    }
    // A NAK acknowledges everything before the PSN it carries.
    this.#ackThrough(psnAdd(psn, -1));
    if (kind === SYNDROME_RNR_NAK) {
      this.counters.naksRx[NAK_KIND_RNR]!++;
      req.rnr(psn, value);
      return DROP_NONE;
    }
    if (kind !== SYNDROME_NAK) return DROP_UNEXPECTED_RESPONSE;
    switch (value) {
      case NAK_PSN_SEQUENCE_ERROR:
        this.counters.naksRx[NAK_KIND_SEQUENCE]!++;
        // From the NAK's PSN, or from an earlier READ or atomic whose answer is still missing.
        req.retry(req.resumePsn());
        return DROP_NONE;
      case NAK_INVALID_REQUEST:
        this.counters.naksRx[NAK_KIND_INVALID_REQUEST]!++;
        this.#failAtPsn(psn, WC_REM_INV_REQ_ERR);
        return DROP_NONE;
      case NAK_REMOTE_ACCESS_ERROR:
        this.counters.naksRx[NAK_KIND_REMOTE_ACCESS]!++;
        this.#failAtPsn(psn, WC_REM_ACCESS_ERR);
        return DROP_NONE;
      case NAK_REMOTE_OPERATIONAL_ERROR:
        this.counters.naksRx[NAK_KIND_REMOTE_OPERATIONAL]!++;
        this.#failAtPsn(psn, WC_REM_OP_ERR);
        return DROP_NONE;
      default:
        // Reserved NAK codes (and invalid RD request, which RC never sees) are treated as invalid request.
        this.counters.naksRx[NAK_KIND_INVALID_REQUEST]!++;
        this.#failAtPsn(psn, WC_REM_INV_REQ_ERR);
        return DROP_NONE;
    }
  }

  /**
   * Retire what an acknowledgement of every PSN up to psn completes: SENDs
   * and WRITEs whose last PSN it covers. A READ or atomic it passes lost its
   * response: send it again (an implied NAK).
   */
  #ackThrough(psn: number): void {
    const req = this.req;
    let progressed = false;
    for (let n = req.pending.length; n > 0; n--) {
      const p = req.pending[0]!;
      if ((p.kind === KIND_READ && p.responses >= p.npkts) || (p.kind === KIND_ATOMIC && p.responses > 0)) {
        // Answered whole while an earlier READ or atomic waited for its missing answer: complete it in turn.
        const last = psnAdd(p.firstPsn, p.npkts - 1);
        if (psnDiff(last, req.ackedPsn) > 0) req.ackedPsn = last;
        req.completeHead(WC_SUCCESS);
        progressed = true;
        continue;
      }
      if (p.kind === KIND_READ || p.kind === KIND_ATOMIC) {
        const missing = psnAdd(p.firstPsn, p.responses);
        if (psnDiff(psn, missing) >= 0) {
          if (psnDiff(missing, req.ackedPsn) > 1) {
            req.ackedPsn = psnAdd(missing, -1);
            progressed = true;
          }
          if (progressed) req.progress();
          // Its answer is missing (an implied NAK): it alone is asked for again.
          req.resendAlone(p);
          return;
        }
        break;
      }
      const last = psnAdd(p.firstPsn, p.npkts - 1);
      if (psnDiff(last, psn) > 0 || p.sent === 0) break;
      req.completeHead(WC_SUCCESS);
      progressed = true;
    }
    if (psnDiff(psn, req.ackedPsn) > 0) {
      // Never past the PSNs actually sent: an ACK cannot cover what was not.
      req.ackedPsn = psnDiff(psn, req.maxSentPsn) > 0 ? req.maxSentPsn : psn;
      progressed = true;
    }
    if (progressed) req.progress();
  }

  /** A NAK other than sequence or RNR: the WQE holding psn completes with status and the QP fails. */
  #failAtPsn(psn: number, status: number): void {
    const req = this.req;
    for (let i = 0; i < req.pending.length; i++) {
      const p = req.pending[i]!;
      const k = psnDiff(psn, p.firstPsn);
      if (k >= 0 && k < p.npkts) {
        req.failAt(i, status);
        return;
      }
    }
    req.failHead(status);
  }

  #readResponse(buf: Buffer, h: TransportHeaders): number {
    const req = this.req;
    const p = this.#holding(h.psn);
    if (!p || p.kind !== KIND_READ) return DROP_UNEXPECTED_RESPONSE;
    const expected = psnAdd(p.firstPsn, p.responses);
    const ahead = psnDiff(h.psn, expected);
    if (ahead < 0) {
      this.counters.duplicates++;
      return DROP_NONE;
    }
    // A READ response acknowledges everything sent before the READ (and shows an earlier READ's missing answer lost).
    if (p !== req.pending[0]) this.#impliedBy(p);
    // What that acknowledged may have ended the QP (a failed WQE before this READ): nothing left to place.
    if (!p.wqe) return DROP_NONE;
    // Responses arrive in order; a gap means one was lost: ask again, for this READ alone, from it.
    if (ahead > 0) {
      if (p === req.pending[0]) this.#ackThrough(psnAdd(expected, -1));
      req.resendAlone(p);
      return DROP_NONE;
    }
    const head = p === req.pending[0];
    const flags = OPCODE_FLAGS[h.opcode]!;
    const k = p.responses;
    const wqe = p.wqe!;
    const pmtu = this.cfg.pmtu;
    const isLast = k === p.npkts - 1;
    const wantLen = isLast ? wqe.length - k * pmtu : pmtu;
    // A restarted READ answers from a FIRST at the PSN asked for; the old answer may still be arriving
    // there (a timer resent while it was on its way): its MIDDLE or LAST at the same PSN carries the same bytes.
    // Only the very first response must start a message.
    const startOk = (flags & F_START) !== 0 || k > 0;
    const endOk = ((flags & F_END) !== 0) === isLast;
    if (!startOk || !endOk || h.payloadLen !== wantLen) {
      req.failAt(req.pending.indexOf(p), WC_BAD_RESP_ERR);
      return DROP_NONE;
    }
    if (wantLen > 0 && !scatter(this.deps.memory, wqe.sgl, k * pmtu, wantLen, buf, h.payloadOff)) {
      req.failAt(req.pending.indexOf(p), WC_LOC_PROT_ERR);
      return DROP_NONE;
    }
    p.responses++;
    // A later READ's answer, taken while an earlier one waits for its missing part: it completes in turn.
    if (!head) return DROP_NONE;
    req.ackedPsn = h.psn;
    req.progress();
    if (isLast) {
      req.completeHead(WC_SUCCESS);
      this.#afterHead();
    }
    req.pump();
    return DROP_NONE;
  }

  /** An answer for p, which is not the oldest: everything before p is acknowledged (and kept in mind for later). */
  #impliedBy(p: PendingWqe): void {
    const before = psnAdd(p.firstPsn, -1);
    this.#ackThrough(before);
    if (this.#impliedAck < 0 || psnDiff(before, this.#impliedAck) > 0) this.#impliedAck = before;
  }

  /**
   * The head WQE (a READ or atomic) completed: what later READs' answers
   * acknowledged meanwhile goes too: READs answered whole, and the SENDs and
   * WRITEs before them.
   */
  #afterHead(): void {
    const req = this.req;
    const implied = this.#impliedAck;
    const ahead = implied >= 0 && psnDiff(implied, req.ackedPsn) > 0 && psnDiff(implied, req.maxSentPsn) <= 0;
    this.#ackThrough(ahead ? implied : req.ackedPsn);
    if (implied >= 0 && psnDiff(implied, req.ackedPsn) <= 0) this.#impliedAck = -1;
  }

  #atomicAck(h: TransportHeaders): number {
    const req = this.req;
    const p = this.#holding(h.psn);
    if (!p || p.kind !== KIND_ATOMIC || h.psn !== p.firstPsn) return DROP_UNEXPECTED_RESPONSE;
    if (p.responses > 0) {
      this.counters.duplicates++;
      return DROP_NONE;
    }
    // As a READ response: it acknowledges what came before, and is kept while an earlier answer is missing.
    if (p !== req.pending[0]) this.#impliedBy(p);
    if (!p.wqe) return DROP_NONE;
    const head = p === req.pending[0];
    const out = this.#atomicResult;
    out.writeUInt32BE(h.origHi >>> 0, 0);
    out.writeUInt32BE(h.origLo >>> 0, 4);
    // The original value lands in host (little-endian) order, as the WQE's buffer holds a u64.
    out.reverse();
    p.responses = 1;
    if (!scatter(this.deps.memory, p.wqe!.sgl, 0, 8, out, 0)) {
      req.failAt(req.pending.indexOf(p), WC_LOC_PROT_ERR);
      return DROP_NONE;
    }
    this.counters.acksRx++;
    if (!head) return DROP_NONE;
    req.ackedPsn = h.psn;
    req.progress();
    req.completeHead(WC_SUCCESS);
    this.#afterHead();
    req.pump();
    return DROP_NONE;
  }

  /** The pending WQE whose PSNs include psn. */
  #holding(psn: number): PendingWqe | null {
    const pending = this.req.pending;
    for (let i = 0; i < pending.length; i++) {
      const p = pending[i]!;
      const k = psnDiff(psn, p.firstPsn);
      if (k >= 0 && k < p.npkts) return p;
    }
    return null;
  }
}
