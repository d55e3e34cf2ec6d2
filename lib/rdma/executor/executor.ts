// The WQE executor: plugs into the RDMA engine's hooks (lib/rdma/hooks.ts)
// and executes send-queue WQEs between QPs of the same device; every
// backend runs its WQEs through it (the loopback backend alone, the mesh and
// the targets with a RemotePath for QPs that are not on this device). This module
// runs one QP's WQEs and keeps its state machine; the rest is split by job:
//   scheduler.ts    the ready queue, its single drain loop, the waiter sets
//   verbs.ts        what each WQE does (SEND, WRITE, READ, atomics, UD, keys)
//   reg-mr.ts       REG_MR, page lists read over turns
//   rnr.ts          RNR NAKs and retries
//   completions.ts  the CQEs, flush hints, error counters
//   guest-views.ts  keys and ring slots as guest-memory views
//
// A WQE whose completion (or its receive's) would find its CQ full is not
// started: the QP waits for the host's ring-0 CQ doorbell, so no completion
// is lost. An error on an RC WQE completes it with the error bit and moves
// the QP to ERR (the host flushes the rest).

import { QpEventCode, SEND_FILTER_DROP, SEND_FILTER_PASS } from '../hooks';
import type { DataPathDevice, DataPathHooks, SendFilter } from '../hooks';
import { DeviceCounter, QpCounter } from '../counters';
import type { GuestMemory } from '../../vfio-user/guest-memory';
import { GSI_QPN, RDMA_QPN_MASK } from '../limits';
import type { QpRecord, SrqRecord } from '../resources';
import { QpState, QpType } from '../types';
import { getRawWord } from '../../../protocol/field';
import { IonicStatus, isResponderError } from '../datapath/cqe';
import { decodeSendWqe, newSendWqe, SendWqe } from '../datapath/wqe-decode';
import { ionic_v1_base_hdr, SendVerb } from '../datapath/wqe-layout';
import { Completions } from './completions';
import { GuestViews, slotViews } from './guest-views';
import { InflightWqe, QpDp, qpState, qpStateIfAny, StepResult, WaitKind } from './qp-state';
import { FastRegistration } from './reg-mr';
import { RnrWaits } from './rnr';
import { SendFiltering, slotSignature } from './send-filter';
import { QpRunner, Scheduler, TURN_BUDGET } from './scheduler';
import type { RemotePath } from './remote-path';
import { QpFailures, Verbs } from './verbs';
import { cqRoom } from '../datapath/cq-ring';

/** The identity's RDMA version (v1 opcodes). */
const RDMA_VERSION = 1;

/** What the loopback path plugs into: the device, whose hooks it sets. */
export interface DataPathEngine extends DataPathDevice {
  hooks: DataPathHooks;
}

/** Responder-side outcomes a UC requester never learns of (there is no ACK/NAK). */
function ucSilent(status: number): boolean {
  return (
    status === IonicStatus.REMOTE_ACC ||
    status === IonicStatus.REMOTE_INV_REQ ||
    status === IonicStatus.REMOTE_OPER ||
    status === IonicStatus.RETRY_EXCEEDED
  );
}

export class WqeExecutor implements QpRunner, QpFailures {
  readonly #dev: DataPathEngine;
  readonly #sched: Scheduler;
  readonly #views: GuestViews;
  readonly #cqes: Completions;
  readonly #verbs: Verbs;
  readonly #regMr: FastRegistration;
  readonly #rnr: RnrWaits;
  readonly #filtering: SendFiltering;
  readonly #wqe: SendWqe = newSendWqe();
  /** Send-queue ring slots are read into these. */
  readonly #sqSlot = slotViews();
  /** Scratch for #wakeSrqUsers. */
  readonly #ids: number[] = [];
  /** The path to other nodes (the mesh), when there is one. */
  #remote: RemotePath | null = null;
  /** QPs whose finished completions wait for CQ room (remote answers arrived while the CQ was full). */
  readonly #blocked = new Set<QpRecord>();

  constructor(dev: DataPathEngine) {
    this.#dev = dev;
    this.#sched = new Scheduler(dev, this);
    this.#views = new GuestViews(dev.rm);
    this.#cqes = new Completions(dev);
    this.#verbs = new Verbs(dev, this.#views, this.#cqes, this);
    this.#regMr = new FastRegistration(dev, this.#sched);
    this.#rnr = new RnrWaits(dev, this.#sched);
    this.#filtering = new SendFiltering(this.#views, this.#verbs);
  }

  /** Install the hooks on the engine (keeps a modifyAllowed veto already there). */
  install(): void {
    const prev = this.#dev.hooks;
    const sched = this.#sched;
    this.#dev.hooks = {
      ...prev,
      modifyAllowed: (qp, changes) =>
        (prev.modifyAllowed?.(qp, changes) ?? true) && (this.#remote?.modifyAllowed(qp, changes) ?? true),
      sqDoorbell: (qp) => sched.schedule(qp),
      rqDoorbell: (qp) => {
        sched.wake(WaitKind.RNR, qp.id);
        this.#remote?.receivesPosted(qp.id);
      },
      srqDoorbell: (srq) => {
        this.#wakeSrqUsers(srq);
        this.#remote?.receivesPosted(-1);
      },
      cqConsumed: (cq) => {
        this.#unblock();
        sched.wake(WaitKind.CQ, cq.id);
      },
      cqDestroyed: (cq) => sched.wake(WaitKind.CQ, cq.id),
      qpModified: (qp, from, changes) => {
        if (this.#remote && changes.av !== undefined) qpState(qp).node = this.#remote.nodeOf(qp);
        this.#modified(qp, from);
      },
      // A QP waiting on this one (RNR) must learn it is gone: it then completes with RETRY_EXCEEDED.
      qpDestroyed: (qp) => {
        this.#remote?.destroyed(qp);
        this.#blocked.delete(qp);
        this.#unwait(qp);
        const s = qpStateIfAny(qp);
        if (s) s.scheduled = false;
        qp.dp = undefined;
        sched.wake(WaitKind.RNR, qp.id);
      },
      reset: () => {
        for (const qp of sched.waiting()) this.#unwait(qp);
        sched.reset();
        this.#remote?.reset();
        this.#blocked.clear();
      },
    };
  }

  /** Plug in the path to other nodes. */
  attachRemote(remote: RemotePath): void {
    this.#remote = remote;
  }

  /** The pieces a remote path shares with this one: the scheduler (waits), the verbs (responder side), guest views. */
  get scheduler(): Scheduler {
    return this.#sched;
  }

  get verbs(): Verbs {
    return this.#verbs;
  }

  get views(): GuestViews {
    return this.#views;
  }

  /**
   * A remote answer set the status of one of `qp`'s inflight WQEs: post the
   * completions that are now at the head, in order, while the CQ has room.
   * An error completion fails the QP (ERR, flush), which also forgets the rest.
   */
  release(qp: QpRecord, s: QpDp): void {
    const q = s.inflight;
    while (q.length > 0 && q[0]!.status !== 'pending') {
      if (this.#dev.rm.qps.get(qp.id) !== qp || qp.dp !== s) {
        q.length = 0;
        return;
      }
      if (cqRoom(this.#dev.rm, qp.sqCqId) === 0) {
        this.#blocked.add(qp);
        return;
      }
      const e = q.shift()!;
      const status = e.status as number;
      this.#cqes.count(qp, status);
      this.#cqes.send(qp, s, e.remote, e.wqeIdLo, e.wqeIdHi, status);
      if (status !== IonicStatus.OK) {
        q.length = 0;
        this.#deviceError(qp, true);
        return;
      }
    }
    this.#blocked.delete(qp);
  }

  /** CQ room appeared: completions held for it go out. */
  #unblock(): void {
    if (this.#blocked.size === 0) return;
    for (const qp of [...this.#blocked]) {
      const s = qpStateIfAny(qp);
      if (s) this.release(qp, s);
      else this.#blocked.delete(qp);
    }
  }

  /** A visit threw (our bug): the QP gets the error hardware would give, ERR, and its work is flushed. */
  contained(qp: QpRecord, s: QpDp): void {
    s.scheduled = false;
    this.#regMr.drop(s);
    if (this.#dev.rm.qps.get(qp.id) === qp) this.#deviceError(qp, true);
  }

  /** An SRQ got receives: wake the senders waiting on any QP that draws from it. */
  #wakeSrqUsers(srq: SrqRecord): void {
    const ids = this.#ids;
    this.#sched.rnrDestinations(ids);
    let n = 0;
    for (const destId of ids) {
      const dest = this.#dev.rm.qps.get(destId);
      if (!dest || this.#verbs.recvRing(dest) === srq.ring) ids[n++] = destId;
    }
    ids.length = n;
    for (const destId of ids) this.#sched.wake(WaitKind.RNR, destId);
  }

  /** Forget a QP's wait, its RNR state, any REG_MR in progress and its filter mark (destroyed, reset, flushed). */
  #unwait(qp: QpRecord): void {
    const s = qpStateIfAny(qp);
    if (!s) return;
    this.#sched.leaveWaiters(qp, s);
    this.#rnr.clear(s);
    this.#regMr.drop(s);
    // The ring starts over (RESET) or is flushed: the next WQE at that index is a new one.
    s.filtered = -1;
  }

  /** Run up to `budget` WQEs of one QP; returns how many ran. Leaves s.scheduled set when more remain. */
  run(qp: QpRecord, s: QpDp, budget: number): number {
    let used = 0;
    for (;;) {
      if (this.#dev.rm.qps.get(qp.id) !== qp || qp.dp !== s) {
        s.scheduled = false;
        return used;
      }
      if (qp.state !== QpState.RTS && qp.state !== QpState.SQD) {
        s.scheduled = false;
        return used;
      }
      const ring = qp.sq;
      const mask = (1 << ring.depthLog2) - 1;
      if (ring.ci === ring.pi) {
        s.scheduled = false;
        return used;
      }
      if (used >= budget) return used;
      used++;
      this.#sched.clearWaitFor();
      const r = this.#step(qp, s);
      if (r === 'yield') return TURN_BUDGET; // a page-list share is this turn's work: yield after it
      if (r === 'wait') {
        this.#sched.park(qp, s);
        s.scheduled = false;
        return used;
      }
      // The head WQE is finished: its RNR state and its filter mark go with it.
      this.#rnr.clear(s);
      s.filtered = -1;
      if (r === 'stop') {
        s.scheduled = false;
        return used;
      }
      ring.ci = (ring.ci + 1) & mask;
    }
  }

  /** Whether the CQEs this WQE will post (on `dest` too) have room; counts a wait when not. */
  #cqRoom(qp: QpRecord, w: SendWqe, datagram: boolean, dest: QpRecord | undefined): boolean {
    const dev = this.#dev;
    let sqNeed = 1;
    const consumesRecv =
      w.verb === SendVerb.SEND ||
      w.verb === SendVerb.SEND_IMM ||
      (!datagram && (w.verb === SendVerb.SEND_INV || w.verb === SendVerb.RDMA_WRITE_IMM));
    if (consumesRecv) {
      if (dest) {
        if (dest.rqCqId === qp.sqCqId) sqNeed = 2;
        else {
          const room = cqRoom(dev.rm, dest.rqCqId);
          if (room === 0) {
            dev.counters.inc(DeviceCounter.cq_full_waits);
            this.#sched.waitFor(WaitKind.CQ, dest.rqCqId);
            return false;
          }
        }
      }
    }
    const room = cqRoom(dev.rm, qp.sqCqId);
    if (room >= 0 && room < sqNeed) {
      dev.counters.inc(DeviceCounter.cq_full_waits);
      this.#sched.waitFor(WaitKind.CQ, qp.sqCqId);
      return false;
    }
    return true;
  }

  /** The WQE at the head of `qp`'s send queue. */
  #step(qp: QpRecord, s: QpDp): StepResult {
    const dev = this.#dev;
    const mem = dev.memory();
    if (!mem) return 'stop';
    const pending = s.regMr;
    if (pending) {
      const r = this.#regMr.resume(mem, qp, s, pending);
      if (r === 'yield' || r === 'wait') return r;
      return this.#finish(qp, s, false, pending.wqeIdLo, pending.wqeIdHi, r);
    }
    const buf = this.#views.slot(mem, qp.sq, qp.sq.ci, this.#sqSlot);
    const datagram = qp.type === QpType.UD || qp.id === GSI_QPN;
    if (!buf) {
      this.#deviceError(qp);
      return 'stop';
    }
    const dec = decodeSendWqe(buf, { version: RDMA_VERSION, datagram }, this.#wqe);
    if (!dec.ok) {
      if (cqRoom(dev.rm, qp.sqCqId) === 0) {
        dev.counters.inc(DeviceCounter.cq_full_waits);
        return 'wait';
      }
      const id = ionic_v1_base_hdr.wqe_id;
      return this.#finish(qp, s, false, getRawWord(buf, 0, id, 0), getRawWord(buf, 0, id, 1), dec.status);
    }
    const w = dec;
    const local = w.verb === SendVerb.LOCAL_INV || w.verb === SendVerb.REG_MR || w.verb === SendVerb.BIND_MW;
    const filter = dev.hooks.sendFilter;
    if (filter && !local) {
      const sig = slotSignature(buf);
      if (s.filtered !== qp.sq.ci || s.filteredSig !== sig) {
        const r = this.#filterStep(filter, mem, qp, s, w, buf, datagram);
        if (r !== null) return r;
        s.filteredSig = sig;
      }
    }
    if (!local && this.#remote) {
      const node = datagram ? this.#remote.datagramNode(w.ud.ahId) : s.node;
      if (node >= 0) return this.#stepRemote(mem, qp, s, w, buf, node, datagram);
    }
    // The destination QP, looked up once: a connected QP's peer, or the QP a datagram names.
    const dest = local ? undefined : dev.rm.qps.get(datagram ? w.ud.destQpn & RDMA_QPN_MASK : qp.attrs.destQpn);
    if (!this.#cqRoom(qp, w, datagram, dest)) return 'wait';
    const remote = !datagram && !local;
    this.#verbs.clear();
    dev.counters.inc(DeviceCounter.tx_wqes);
    qp.stats.inc(QpCounter.wqes_processed);
    qp.opcodes[w.verb] += 1;
    let status: number;
    if (w.verb === SendVerb.REG_MR) {
      dev.counters.inc(DeviceCounter.reg_mr_wqes);
      const r = this.#regMr.start(mem, w, s);
      if (r === 'yield') return 'yield';
      status = r;
    } else if (local) status = this.#verbs.localOp(w);
    else if (datagram) status = this.#verbs.udSend(mem, qp, w, buf, dest);
    else {
      let r = this.#verbs.rcOp(mem, qp, dest, w, buf);
      // UC has no ACKs: a message the responder drops (no receive, bad rkey,
      // responder not ready) still completes the requester successfully.
      if (qp.type === QpType.UC && (r === 'wait' || ucSilent(r))) r = IonicStatus.OK;
      if (r === 'wait') {
        if (this.#rnr.nak(qp, s, dest!) === 'wait') {
          // Counted above; a waiting WQE counts once, when it finally runs.
          dev.counters.inc(DeviceCounter.tx_wqes, -1);
          qp.stats.inc(QpCounter.wqes_processed, -1);
          qp.opcodes[w.verb] -= 1;
          return 'wait';
        }
        status = IonicStatus.RNR_RETRY_EXCEEDED;
      } else {
        status = r;
        // An RC responder that NAKs with its own error goes to ERR, as over the mesh
        // (a SEND's delivery may already have moved it).
        if (qp.type === QpType.RC && isResponderError(r) && dest && dest.state !== QpState.ERR) {
          this.responderError(dest, r);
        }
      }
    }
    this.#verbs.clear();
    return this.#finish(qp, s, remote, w.wqeIdLo, w.wqeIdHi, status);
  }

  /**
   * The send filter (the P4 engine) on the head WQE: null when it passes
   * (the WQE then runs as posted, and is not filtered again if it waits),
   * else the WQE is finished here: dropped (RC: RETRY_EXCEEDED, as a request
   * the wire lost; UC and datagrams complete OK) or executed by the filter.
   */
  #filterStep(
    filter: SendFilter,
    mem: GuestMemory,
    qp: QpRecord,
    s: QpDp,
    w: SendWqe,
    buf: Buffer,
    datagram: boolean,
  ): StepResult | null {
    const dev = this.#dev;
    // Whatever it decides may complete the WQE now: room for that completion first.
    if (s.inflight.length === 0 && cqRoom(dev.rm, qp.sqCqId) === 0) {
      dev.counters.inc(DeviceCounter.cq_full_waits);
      this.#sched.waitFor(WaitKind.CQ, qp.sqCqId);
      return 'wait';
    }
    const remote = this.#remote;
    const remoteNode = remote !== null && (datagram ? remote.datagramNode(w.ud.ahId) : s.node) >= 0;
    const dest = remoteNode ? undefined : dev.rm.qps.get(datagram ? w.ud.destQpn & RDMA_QPN_MASK : qp.attrs.destQpn);
    this.#verbs.clear();
    const v = this.#filtering.run(filter, mem, qp, w, buf, datagram, dest, remoteNode);
    this.#verbs.clear();
    if (v === SEND_FILTER_PASS) {
      s.filtered = qp.sq.ci;
      return null;
    }
    dev.counters.inc(DeviceCounter.tx_wqes);
    qp.stats.inc(QpCounter.wqes_processed);
    qp.opcodes[w.verb] += 1;
    const status = v === SEND_FILTER_DROP ? (qp.type === QpType.RC ? IonicStatus.RETRY_EXCEEDED : IonicStatus.OK) : v;
    return this.#finish(qp, s, !datagram, w.wqeIdLo, w.wqeIdHi, status);
  }

  /** A WQE whose destination is on another node: sent by the remote path, completed now or when the peer answers. */
  #stepRemote(
    mem: GuestMemory,
    qp: QpRecord,
    s: QpDp,
    w: SendWqe,
    buf: Buffer,
    node: number,
    datagram: boolean,
  ): StepResult {
    const dev = this.#dev;
    // Only the send CQE is ours (the receive is the peer's); a completion queued behind others needs no room yet.
    if (s.inflight.length === 0 && cqRoom(dev.rm, qp.sqCqId) === 0) {
      dev.counters.inc(DeviceCounter.cq_full_waits);
      return 'wait';
    }
    this.#verbs.clear();
    const r = this.#remote!.execute(mem, qp, s, w, buf, node, datagram);
    this.#verbs.clear();
    if (r === 'wait') return 'wait';
    dev.counters.inc(DeviceCounter.tx_wqes);
    qp.stats.inc(QpCounter.wqes_processed);
    qp.opcodes[w.verb] += 1;
    if (r === 'pending') return 'done';
    return this.#finish(qp, s, !datagram, w.wqeIdLo, w.wqeIdHi, r);
  }

  /** Complete the head WQE with `status`; an error stops the QP (ERR, or SQE for a datagram QP). */
  #finish(qp: QpRecord, s: QpDp, remote: boolean, idLo: number, idHi: number, status: number): StepResult {
    if (s.inflight.length > 0) {
      // Earlier WQEs still wait for their peer: this completion goes out after theirs.
      const e: InflightWqe = { status, remote, wqeIdLo: idLo, wqeIdHi: idHi };
      s.inflight.push(e);
      return status === IonicStatus.OK ? 'done' : 'stop';
    }
    this.#cqes.count(qp, status);
    this.#cqes.send(qp, s, remote, idLo, idHi, status);
    if (status !== IonicStatus.OK) {
      this.#deviceError(qp, true);
      return 'stop';
    }
    return 'done';
  }

  /** A responder error (verbs.ts): the responder goes to ERR. */
  deviceError(qp: QpRecord): void {
    this.#deviceError(qp);
  }

  /**
   * A request from another node failed at this responder (the mesh's RC
   * rules): the QP goes to ERR, its receives flushed, and the guest hears it
   * as the QP's asynchronous event, as a real HCA raises it: ERR_ACCESS for
   * an access error, ERR_REQUEST for an invalid request (length,
   * operation), QP_ERR for anything else. Called once per failed request
   * that reached a working QP (a SEND's delivery may already have moved it).
   */
  responderError(qp: QpRecord, status: number): void {
    this.#deviceError(qp);
    const code =
      status === IonicStatus.REMOTE_ACC
        ? QpEventCode.ERR_ACCESS
        : status === IonicStatus.REMOTE_INV_REQ
          ? QpEventCode.ERR_REQUEST
          : QpEventCode.QP_ERR;
    this.#dev.qpEvent(qp.id, code);
  }

  /**
   * The device moves a QP to an error state on its own. A datagram QP's send
   * error stops only its SQ (SQE; the MAD layer moves QP1 back to RTS and
   * reposts); any other error is ERR, with flush hints for the queues no
   * error CQE covered.
   */
  #deviceError(qp: QpRecord, sqReported = false): void {
    if (qp.state === QpState.ERR) return;
    const from = qp.state;
    if (sqReported && (qp.type === QpType.UD || qp.id === GSI_QPN)) {
      if (qp.state === QpState.SQE) return;
      qp.state = QpState.SQE;
      qp.sq.ci = qp.sq.pi;
      this.#unwait(qp);
      return;
    }
    qp.state = QpState.ERR;
    if (sqReported) qp.sq.ci = qp.sq.pi;
    this.#modified(qp, from);
  }

  /** ERR or RESET: requests still queued for peers are taken back, answers still due are forgotten. */
  #forgetRemote(qp: QpRecord, s: QpDp): void {
    if (s.inflight.length === 0) return;
    this.#remote?.flushed(qp, s);
    s.inflight.length = 0;
    this.#blocked.delete(qp);
  }

  #modified(qp: QpRecord, from: QpState): void {
    this.#modifiedSelf(qp, from);
    // A sender waiting for this QP's receives sees the new state (a responder gone to ERR fails it).
    if (qp.state !== from) this.#sched.wake(WaitKind.RNR, qp.id);
  }

  #modifiedSelf(qp: QpRecord, from: QpState): void {
    const s = qpState(qp);
    if (qp.state === QpState.RESET) {
      s.msn = 0;
      this.#forgetRemote(qp, s);
      this.#unwait(qp);
      return;
    }
    if (qp.state === QpState.ERR && from !== QpState.ERR) {
      this.#forgetRemote(qp, s);
      this.#unwait(qp);
      this.#cqes.flush(qp);
      return;
    }
    if (qp.state === QpState.RTS && qp.sq.ci !== qp.sq.pi) this.#sched.schedule(qp);
  }
}

/** Plug the loopback data path into an engine. */
export function installWqeExecutor(dev: DataPathEngine): WqeExecutor {
  const dp = new WqeExecutor(dev);
  dp.install();
  return dp;
}
