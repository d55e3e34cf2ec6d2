// The NVMe-oF target's RDMA transport (`--backend nvmeof`): the other end of
// the guest's nvme-rdma connections, inside the server. The WQE executor
// (lib/rdma/executor) still runs every QP; what the guest sends to
// the target's address comes here through the remote-path seam
// (executor/remote-path.ts), as the mesh's WQEs do:
//
//   a datagram through an AH whose destination GID is the target's
//   (::ffff:ip) to QP1     a CM MAD for the CM responder (cm.ts); its answers
//                          go into the guest's QP1 receive queue with a GRH,
//                          as from a peer's QP1 (source GID the target's)
//   a SEND on a connected QP whose destination is a controller QPN
//                          an NVMe command capsule: the SEND completes at once
//                          (ACK semantics) and the capsule goes to its
//                          NvmeofQueue; the response capsule (the 16-byte
//                          CQE) is a SEND from the controller QPN into the
//                          guest QP's next receive, with invalidate when the
//                          command's keyed SGL asked for it
//
// Data moves through TargetDma: the keyed SGL's (rkey, addr, len) resolved in
// the guest's MR table under the guest QP's PD and remote-access flags, with
// the same checks a responder applies (verbs.remote) - the equivalent of the
// target's RDMA READ and WRITE. Key 0 is refused: it names no MR.
//
// Nothing is lost for want of room: a response (or a MAD) whose receive is not
// posted yet, or whose CQ is full, waits in order for the guest's RQ doorbell
// or CQ doorbell. A guest QP that goes to ERR or RESET, or is destroyed, ends
// its connection (the NvmeofQueue closes; an admin queue ends its controller),
// and a controller that goes away (keep-alive expiry, its admin queue closed)
// sends the guest a DREQ for each of its queues.

import { contain, guardedImmediate } from '../../../guard';
import type { Logger } from '../../../log';
import { ArpEchoHost } from '../../../net/arp-echo';
import { ipv4Gid } from '../../../rdma/address';
import { DeviceCounter, QpCounter } from '../../../rdma/counters';
import { copySlices } from '../../../rdma/datapath/copy';
import { IonicStatus, RecvOp } from '../../../rdma/datapath/cqe';
import { effectiveQkey } from '../../../rdma/datapath/datagram';
import { DataPathEngine, installWqeExecutor, WqeExecutor } from '../../../rdma/executor/executor';
import type { QpDp } from '../../../rdma/executor/qp-state';
import type { RemotePath, RemoteResult } from '../../../rdma/executor/remote-path';
import type { SendWqe } from '../../../rdma/datapath/wqe-decode';
import { SendVerb } from '../../../rdma/datapath/wqe-layout';
import { GSI_QPN, RDMA_QPN_MASK } from '../../../rdma/limits';
import { KeyStatus } from '../../../rdma/resources';
import type { QpChanges, QpRecord } from '../../../rdma/resources';
import { MrFlag, QpFlag, QpState, QpType } from '../../../rdma/types';
import type { GuestMemory } from '../../../vfio-user/guest-memory';
import { DmaStatus, encodeCqe } from '../command';
import type { Cqe, TargetDma } from '../command';
import { nvme_cqe, nvme_sqe } from '../layouts';
import { QUEUE_ENTRIES } from '../limits';
import type { NvmeofQueue, NvmeofTarget } from '../queue';
import { IB_QP1_QKEY, MAD_SIZE } from './cm-layouts';
import { CmConnection, CmHost, CmResponder, guidFromMac } from './cm';
import { cqRoom } from '../../../rdma/datapath/cq-ring';
import { HeldMad, Qp1Replies, receives } from './qp1-replies';

/** The "node" the loopback path hands target-bound WQEs with (any value >= 0: there is one target). */
const TARGET_NODE = 0;
/** MADs from the guest waiting for the next turn at most; past it they are dropped, as a busy peer's QP1 would. */
const MAX_INBOUND_MADS = 1024;
/**
 * Responses one connection may hold for want of receives. A host keeps at
 * most its queue size in commands, so more means it stopped posting receives
 * for good: the connection is ended (DREQ) rather than hold without bound.
 */
const MAX_HELD_RESPONSES = 4 * QUEUE_ENTRIES;
export interface NvmeofDataPathOptions {
  /** The target's MAC on the guest's segment (ARP replies, source MAC of its datagrams); default 02:00 then the IPv4 address. */
  readonly mac?: Buffer;
}

/** A response capsule waiting for the guest's next receive. */
interface Response {
  readonly data: Buffer;
  readonly invalidateKey: number | null;
}

/** A connection as the data path binds it: the CM's record, the guest QP it names, the controller queue. */
interface QueueLink {
  readonly conn: CmConnection;
  /** The guest QP's creation handle (a QP destroyed and made again under the same id is another QP). */
  readonly guestHandle: number;
  readonly queue: NvmeofQueue;
  /** Responses in completion order, waiting for receives. */
  readonly out: Response[];
  closed: boolean;
}

/** The default target MAC: locally administered, then the IPv4 address. */
function targetMac(ip: string): Buffer {
  return Buffer.from([0x02, 0x00, ...ip.split('.').map(Number)]);
}

export class NvmeofDataPath implements RemotePath {
  readonly #engine: DataPathEngine;
  readonly #dp: WqeExecutor;
  readonly #target: NvmeofTarget;
  readonly #log: Logger;
  readonly #cm: CmResponder;
  readonly #gid: Buffer;
  readonly #ip: Buffer;
  readonly #mac: Buffer;
  readonly #links = new Map<number, QueueLink>();
  /** Links with responses waiting (for a receive or CQ room). */
  readonly #blocked = new Set<QueueLink>();
  /** MADs from the guest, handled on the next turn (after the send that carried them completes). */
  readonly #inbound: HeldMad[] = [];
  /** CM replies waiting for a QP1 receive. */
  readonly #replies: Qp1Replies;
  #pumpArmed = false;
  readonly #gather: Buffer[] = [];
  readonly #one: Buffer[] = [Buffer.alloc(0)];
  /** What moved, for tests and stats. */
  readonly counts = { madsIn: 0, madsOut: 0, madsDropped: 0, capsules: 0, responses: 0, dmaErrors: 0 };

  constructor(engine: DataPathEngine, target: NvmeofTarget, opts: NvmeofDataPathOptions = {}) {
    this.#engine = engine;
    this.#target = target;
    this.#log = engine.log;
    const ip = target.port.traddr;
    this.#ip = Buffer.from(ip.split('.').map(Number));
    this.#gid = ipv4Gid(this.#ip);
    this.#mac = Buffer.from(opts.mac ?? targetMac(ip));
    const host: CmHost = {
      sendMad: (mad, peer) => this.#replies.queue(mad, peer),
      open: (c) => this.#open(c),
      closed: (c) => this.#closed(c),
    };
    this.#cm = new CmResponder({
      ip,
      port: Number(target.port.trsvcid),
      maxIoQueues: target.subsystem.maxIoQueues,
      caGuid: guidFromMac(this.#mac),
      host,
      cntlidLive: (id) => target.subsystem.controller(id)?.alive === true,
      log: this.#log,
    });
    this.#dp = installWqeExecutor(engine);
    this.#dp.attachRemote(this);
    this.#replies = new Qp1Replies(engine, this.#dp.verbs, this.#gid, this.#mac, this.counts);
    // Two more events matter here: CQ room (held responses) and a guest QP leaving RTS for ERR or RESET (its connection ends).
    const prev = engine.hooks;
    engine.hooks = {
      ...prev,
      cqConsumed: (cq) => {
        prev.cqConsumed?.(cq);
        contain(this.#log, 'nvmeof data path (CQ room)', () => this.#retry(-1));
      },
      qpModified: (qp, from, changes) => {
        prev.qpModified?.(qp, from, changes);
        if (qp.state !== from && (qp.state === QpState.ERR || qp.state === QpState.RESET)) {
          contain(this.#log, 'nvmeof data path (QP state)', () =>
            this.#guestQpGone(qp, `guest QP ${qp.id} went to ${qp.state === QpState.ERR ? 'ERR' : 'RESET'}`),
          );
        }
      },
    };
  }

  /** The target's GID (::ffff:ip) and MAC. */
  get gid(): Buffer {
    return this.#gid;
  }

  get mac(): Buffer {
    return this.#mac;
  }

  get cm(): CmResponder {
    return this.#cm;
  }

  get stats(): { connections: number; heldResponses: number; heldMads: number } {
    let held = 0;
    for (const l of this.#links.values()) held += l.out.length;
    return { connections: this.#links.size, heldResponses: held, heldMads: this.#replies.held };
  }

  /** The target on the Ethernet segment (ARP, ICMP echo); `send` queues a frame for the guest. */
  segment(send: (frame: Buffer) => void): ArpEchoHost {
    return new ArpEchoHost(this.#ip, this.#mac, send);
  }

  // ---- RemotePath --------------------------------------------------------------------------------

  modifyAllowed(_qp: QpRecord, _changes: QpChanges): boolean {
    return true;
  }

  nodeOf(qp: QpRecord): number {
    const av = qp.attrs.av;
    return av && av.dgid.equals(this.#gid) ? TARGET_NODE : -1;
  }

  datagramNode(ahId: number): number {
    const ah = this.#engine.rm.ahs.get(ahId);
    return ah && ah.av.dgid.equals(this.#gid) ? TARGET_NODE : -1;
  }

  execute(
    mem: GuestMemory,
    qp: QpRecord,
    _s: QpDp,
    w: SendWqe,
    buf: Buffer,
    _node: number,
    datagram: boolean,
  ): RemoteResult {
    return datagram ? this.#datagram(mem, qp, w, buf) : this.#connected(mem, qp, w, buf);
  }

  flushed(_qp: QpRecord, _s: QpDp): void {
    // Nothing of ours waits in a QP's inflight list: every WQE completes when it runs.
  }

  destroyed(qp: QpRecord): void {
    this.#guestQpGone(qp, `guest QP ${qp.id} destroyed`);
  }

  receivesPosted(qpId: number): void {
    this.#retry(qpId);
  }

  reset(): void {
    this.#cm.reset();
    // After the CM: closing admin queues ends controllers, whose other queues would say DREQ to nobody.
    this.#inbound.length = 0;
    this.#replies.clear();
    this.#blocked.clear();
  }

  /** Close every connection (the server stops); the target itself is closed by its owner. */
  close(): void {
    this.reset();
  }

  // ---- what the guest sends ------------------------------------------------------------------------

  /** A datagram to the target: a MAD for QP1 is kept for the CM; anything else is dropped, as by a peer with no such QP. */
  #datagram(mem: GuestMemory, qp: QpRecord, w: SendWqe, buf: Buffer): RemoteResult {
    if (w.verb !== SendVerb.SEND && w.verb !== SendVerb.SEND_IMM) return IonicStatus.LOCAL_QP_OPER;
    const ah = this.#engine.rm.ahs.get(w.ud.ahId);
    if (!ah) return IonicStatus.LOCAL_QP_OPER;
    const payload = this.#copyPayload(mem, qp, w, buf);
    if (!payload) return IonicStatus.LOCAL_PROT;
    const c = this.#engine.counters;
    c.inc(DeviceCounter.send_msgs);
    c.inc(DeviceCounter.tx_bytes, payload.length);
    qp.stats.inc(QpCounter.bytes_sent, payload.length);
    const toQp1 =
      (w.ud.destQpn & RDMA_QPN_MASK) === GSI_QPN && effectiveQkey(w.ud.destQkey, qp.attrs.qkey) === IB_QP1_QKEY;
    if (!toQp1 || payload.length < MAD_SIZE) {
      this.counts.madsDropped++;
      return IonicStatus.OK;
    }
    if (this.#inbound.length >= MAX_INBOUND_MADS) {
      this.counts.madsDropped++;
      return IonicStatus.OK;
    }
    this.counts.madsIn++;
    const av = ah.av;
    this.#inbound.push({
      mad: payload.subarray(0, MAD_SIZE),
      peer: { gid: Buffer.from(av.sgid), mac: Buffer.from(av.smac), vlanTci: av.vlanTci },
    });
    this.#arm();
    return IonicStatus.OK;
  }

  /** A WQE of a connected QP whose destination is the target: a capsule SEND, or something the target's QPs refuse. */
  #connected(mem: GuestMemory, qp: QpRecord, w: SendWqe, buf: Buffer): RemoteResult {
    const link = this.#links.get(qp.attrs.destQpn & RDMA_QPN_MASK);
    // No controller QP there (or not this guest QP's): nobody acknowledges.
    if (
      !link ||
      link.closed ||
      link.conn.guestQpn !== qp.id ||
      link.guestHandle !== qp.handle ||
      qp.type !== QpType.RC
    ) {
      return IonicStatus.RETRY_EXCEEDED;
    }
    if (w.verb !== SendVerb.SEND && w.verb !== SendVerb.SEND_IMM && w.verb !== SendVerb.SEND_INV) {
      // The controller's QPs grant no remote access (nvmet's neither): RDMA WRITE, READ and atomics are refused.
      return this.#broken(link, IonicStatus.REMOTE_ACC);
    }
    const len = w.inline ? w.inlineLength : w.sgeTotal;
    // The controller posts receives of one capsule (SQE + in-capsule data): a longer SEND does not fit.
    if (len > nvme_sqe.SIZE + this.#target.subsystem.inCapsuleBytes)
      return this.#broken(link, IonicStatus.REMOTE_INV_REQ);
    const capsule = this.#copyPayload(mem, qp, w, buf);
    if (!capsule) return this.#broken(link, IonicStatus.LOCAL_PROT);
    const c = this.#engine.counters;
    c.inc(DeviceCounter.send_msgs);
    c.inc(DeviceCounter.tx_bytes, len);
    qp.stats.inc(QpCounter.bytes_sent, len);
    this.#cm.established(link.conn);
    this.counts.capsules++;
    // Submitted after this turn of the data path: the controller's DMA callbacks use the verbs' views.
    queueMicrotask(() => this.#submit(link, capsule));
    return IonicStatus.OK;
  }

  /**
   * The WQE fails with `status` and the data path moves the guest QP to ERR on
   * its own (no MODIFY_QP the hooks would see): the connection ends with it,
   * after this step.
   */
  #broken(link: QueueLink, status: number): number {
    queueMicrotask(() =>
      contain(this.#log, 'nvmeof data path (QP error)', () =>
        this.#cm.drop(link.conn, `guest QP ${link.conn.guestQpn} failed a WQE (status ${status})`),
      ),
    );
    return status;
  }

  /** The payload of a SEND WQE, copied out of guest memory (or the WQE's inline bytes); null for a bad lkey. */
  #copyPayload(mem: GuestMemory, qp: QpRecord, w: SendWqe, buf: Buffer): Buffer | null {
    if (w.inline) return Buffer.from(buf.subarray(w.inlineOffset, w.inlineOffset + w.inlineLength));
    const views = this.#gather;
    views.length = 0;
    const st = this.#dp.views.sgl(mem, qp, w.sges, w.sgeCount, w.sgeTotal, false, views);
    if (st !== KeyStatus.OK) {
      views.length = 0;
      return null;
    }
    const out = Buffer.allocUnsafe(w.sgeTotal);
    this.#one[0] = out;
    copySlices(this.#one, 0, views, 0, w.sgeTotal);
    views.length = 0;
    return out;
  }

  #submit(link: QueueLink, capsule: Buffer): void {
    if (link.closed) return;
    link.queue.submit(capsule).then(
      (cqe) => {
        contain(this.#log, 'nvmeof data path (response)', () => this.#respond(link, cqe));
      },
      (e: unknown) => {
        this.#log.error('nvmeof: a command failed outside the controller', { error: String(e) });
      },
    );
  }

  // ---- what goes back -------------------------------------------------------------------------------

  #respond(link: QueueLink, cqe: Cqe): void {
    if (link.closed) return;
    if (link.out.length >= MAX_HELD_RESPONSES) {
      this.#cm.disconnect(link.conn, `${link.out.length} responses wait for receives the guest does not post`);
      return;
    }
    const data = Buffer.alloc(nvme_cqe.SIZE);
    encodeCqe(cqe, data);
    link.out.push({ data, invalidateKey: cqe.invalidateKey });
    this.#flushLink(link);
  }

  /** Deliver a link's responses in order while the guest has receives and CQ room. */
  #flushLink(link: QueueLink): void {
    const mem = this.#engine.memory();
    while (link.out.length > 0 && !link.closed) {
      const r = mem ? this.#deliverResponse(mem, link, link.out[0]!) : 'wait';
      if (r === 'wait') {
        this.#blocked.add(link);
        return;
      }
      if (r === 'dead') {
        const c = link.conn;
        this.#cm.drop(c, 'the guest QP cannot take responses');
        return;
      }
      link.out.shift();
    }
    this.#blocked.delete(link);
  }

  #deliverResponse(mem: GuestMemory, link: QueueLink, r: Response): 'done' | 'wait' | 'dead' {
    const qp = this.#guestQp(link);
    if (!qp || !receives(qp.state)) return 'dead';
    const dev = this.#engine;
    if (cqRoom(dev.rm, qp.rqCqId) === 0) {
      dev.counters.inc(DeviceCounter.cq_full_waits);
      return 'wait';
    }
    const v = this.#dp.verbs;
    v.clear();
    const ring = v.takeRecv(mem, qp);
    if (ring === 'empty') {
      dev.counters.inc(DeviceCounter.rnr_naks);
      return 'wait';
    }
    if (ring === 'bad') return 'dead';
    v.src.push(r.data);
    const inv = r.invalidateKey;
    const st = v.deliver(
      mem,
      link.conn.targetQpn,
      qp,
      ring,
      r.data.length,
      null,
      inv === null ? RecvOp.SEND : RecvOp.SEND_INV,
      inv ?? 0,
      false,
      null,
    );
    v.clear();
    if (st !== IonicStatus.OK) return 'dead';
    if (inv !== null && dev.rm.invalidate(inv) === KeyStatus.OK) dev.counters.inc(DeviceCounter.remote_invalidates);
    this.counts.responses++;
    return 'done';
  }

  /** Receives or CQ room appeared (qpId -1: on an SRQ or a CQ, any QP): what was held goes out. */
  #retry(qpId: number): void {
    if (this.#replies.held > 0 && (qpId === -1 || qpId === GSI_QPN)) this.#replies.flush();
    if (this.#blocked.size === 0) return;
    for (const link of [...this.#blocked]) if (qpId === -1 || link.conn.guestQpn === qpId) this.#flushLink(link);
  }

  /** Handle the MADs that came in (one pump per turn). */
  #arm(): void {
    if (this.#pumpArmed) return;
    this.#pumpArmed = true;
    guardedImmediate(
      this.#log,
      'nvmeof data path (CM)',
      () => {
        this.#pumpArmed = false;
        const batch = this.#inbound.splice(0, this.#inbound.length);
        for (const m of batch) this.#cm.receive(m.mad, m.peer);
      },
      () => {
        this.#pumpArmed = false;
      },
    );
  }

  // ---- connections -------------------------------------------------------------------------------

  /** The CM accepted a REQ: bind its guest QP to a new controller queue. */
  #open(c: CmConnection): boolean {
    const qp = this.#engine.rm.qps.get(c.guestQpn);
    if (!qp || qp.type !== QpType.RC) return false;
    const holder: { link: QueueLink | null } = { link: null };
    const dma: TargetDma = {
      fromHost: (key, addr, len, out) =>
        holder.link ? this.#dma(holder.link, key, addr, len, out, false) : DmaStatus.FAILED,
      toHost: (key, addr, src) =>
        holder.link ? this.#dma(holder.link, key, addr, src.length, src, true) : DmaStatus.FAILED,
    };
    const queue = this.#target.openQueue(dma, { onTeardown: (reason) => this.#teardown(c, reason) });
    const link: QueueLink = { conn: c, guestHandle: qp.handle, queue, out: [], closed: false };
    holder.link = link;
    this.#links.set(c.targetQpn, link);
    return true;
  }

  /** The CM ended connection `c`: its queue closes (an admin queue ends its controller). */
  #closed(c: CmConnection): void {
    const link = this.#links.get(c.targetQpn);
    if (!link || link.conn !== c) return;
    this.#links.delete(c.targetQpn);
    this.#blocked.delete(link);
    link.closed = true;
    link.out.length = 0;
    link.queue.close();
  }

  /** The controller behind `c` went away: the guest hears a DREQ. */
  #teardown(c: CmConnection, reason: string): void {
    this.#cm.disconnect(c, `controller gone: ${reason}`);
  }

  /** A guest QP left the connected states or is gone: the connections it carried end without a word. */
  #guestQpGone(qp: QpRecord, why: string): void {
    if (qp.id === GSI_QPN) {
      if (qp.state === QpState.RESET || this.#engine.rm.qps.get(GSI_QPN) !== qp) this.#replies.clear();
      return;
    }
    for (const link of [...this.#links.values()]) {
      if (link.conn.guestQpn === qp.id && link.guestHandle === qp.handle) this.#cm.drop(link.conn, why);
    }
  }

  #guestQp(link: QueueLink): QpRecord | null {
    const qp = this.#engine.rm.qps.get(link.conn.guestQpn);
    return qp && qp.handle === link.guestHandle && qp.attrs.destQpn === link.conn.targetQpn ? qp : null;
  }

  /**
   * The controller's RDMA READ (fromHost) or WRITE (toHost) of guest memory:
   * (key, addr, len) through the guest QP's MR table, PD and access flags.
   */
  #dma(link: QueueLink, key: number, addr: number, len: number, buf: Buffer, toHost: boolean): number {
    if (len === 0) return DmaStatus.OK;
    if (key === 0) {
      this.counts.dmaErrors++;
      return DmaStatus.BAD_KEY;
    }
    const mem = this.#engine.memory();
    const qp = this.#guestQp(link);
    if (!mem || !qp || link.closed) {
      this.counts.dmaErrors++;
      return DmaStatus.FAILED;
    }
    if (!Number.isSafeInteger(addr) || addr < 0) {
      this.counts.dmaErrors++;
      return DmaStatus.BOUNDS;
    }
    const v = this.#dp.verbs;
    v.clear();
    const st = toHost
      ? v.remote(mem, qp, key, addr, len, MrFlag.REMOTE_WRITE, QpFlag.REMOTE_WRITE, true)
      : v.remote(mem, qp, key, addr, len, MrFlag.REMOTE_READ, QpFlag.REMOTE_READ, false);
    if (st !== IonicStatus.OK) {
      v.clear();
      this.counts.dmaErrors++;
      return st === IonicStatus.REMOTE_ACC ? DmaStatus.BOUNDS : DmaStatus.FAILED;
    }
    this.#one[0] = buf;
    if (toHost) {
      copySlices(v.dst, 0, this.#one, 0, len);
      v.written(null, len);
    } else {
      copySlices(this.#one, 0, v.dst, 0, len);
      this.#engine.counters.inc(DeviceCounter.rdma_read_bytes, len);
    }
    v.clear();
    return DmaStatus.OK;
  }
}

/** Plug the NVMe-oF target's data path into an engine (the loopback path comes with it). */
export function installNvmeofDataPath(
  engine: DataPathEngine,
  target: NvmeofTarget,
  opts: NvmeofDataPathOptions = {},
): NvmeofDataPath {
  return new NvmeofDataPath(engine, target, opts);
}
