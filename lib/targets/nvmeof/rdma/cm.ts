// The NVMe-oF target's IB CM responder: the passive side of rdma_cm's
// connection setup, as the guest's QP1 sees it from a peer at the target's
// address (docs/nvmeof.md: the C rocm-ernic's
// nvmeof_cm.c). It takes the guest's CM MADs and answers:
//
//   REQ   checked (service id, RC, cma_hdr, nvme_rdma_cm_req), then REP with a
//         controller QPN from 0x00c00000, a starting PSN, responder resources
//         and nvme_rdma_cm_rep (crqsize); or REJ: INVALID_SERVICE_ID for a
//         port or address nobody listens on, CONSUMER_DEFINED with
//         nvme_rdma_cm_rej for a request NVMe/RDMA refuses
//   RTU   the connection is established (a capsule before it does the same)
//   DREQ  DREP, and the connection ends (a DREQ for a connection we do not
//         know still gets its DREP, as Linux's CM answers)
//   REJ   (of our REP) the connection ends
//   MRA   ignored (the guest asks for time; we never wait for it)
//
// The responder only speaks CM. What a connection carries is the host's
// business (CmHost.open / closed: the data path binds an NvmeofQueue), and
// MADs go out through CmHost.sendMad. It never throws on what the guest sends.

import { getField, setField, setRawBytes, viewRaw } from '../../../../protocol/field';
import type { Logger } from '../../../log';
import { nullLogger } from '../../../log';
import { QUEUE_ENTRIES } from '../limits';
import {
  cm_dreq_msg,
  cm_drep_msg,
  cm_rej_msg,
  cm_rep_msg,
  cm_req_msg,
  cm_rtu_msg,
  cma_hdr,
  CMA_IP4_OFFSET,
  CMA_IP_VERSION_SHIFT,
  CMA_VERSION,
  CM_TRANSPORT_RC,
  CmAttr,
  CmMsgResponse,
  CmRejReason,
  getBits,
  IB_CM_CLASS_VERSION,
  IB_MGMT_BASE_VERSION,
  IB_MGMT_CLASS_CM,
  IB_MGMT_METHOD_SEND,
  ib_mad_hdr,
  MAD_SIZE,
  NVME_RDMA_CM_FMT_1_0,
  nvme_rdma_cm_rej,
  nvme_rdma_cm_rep,
  nvme_rdma_cm_req,
  NvmeRdmaCmStatus,
  RDMA_PS_TCP,
  setBits,
} from './cm-layouts';

/** Controller QPNs: from here upward, a range no guest QP can have (guest QP ids are below 4096). */
export const TARGET_QPN_BASE = 0x00c00000;
const TARGET_QPN_SPAN = 0x00400000;
/** The admin queue's depth (NVME_AQ_DEPTH): its hsqsize + 1 may not exceed it. */
const ADMIN_QUEUE_DEPTH = 32;
/** RDMA READs / atomics we take or issue at once per connection (what REP offers at most). */
const MAX_RD_ATOMIC = 16;
/** Connections live at once; a REQ past it is refused with NO_RSC. */
export const MAX_CM_CONNECTIONS = 256;
/** REP: target ack delay (log2 of 4.096 us units, as a NIC reports it), RNR retry "forever", flow control on. */
const REP_TARGET_ACK_DELAY = 15;
const REP_RNR_RETRY = 7;

/** Where a guest's CM MAD came from: its GID (the source of its AH), MAC and VLAN. Replies go back there. */
export interface CmPeer {
  readonly gid: Buffer;
  readonly mac: Buffer;
  /** 802.1Q TCI, or -1 when untagged. */
  readonly vlanTci: number;
}

type CmState = 'rep-sent' | 'established';

/** One accepted connection: a guest QP and the controller QPN it talks to. */
export interface CmConnection {
  readonly targetQpn: number;
  /** Our communication id (the guest names us by it). */
  readonly localCommId: number;
  /** The guest's communication id. */
  readonly remoteCommId: number;
  readonly guestQpn: number;
  readonly peer: CmPeer;
  /** NVMe queue id, host queue sizes from nvme_rdma_cm_req (hsqsize 0's based). */
  readonly qid: number;
  readonly hsqsize: number;
  readonly hrqsize: number;
  readonly startingPsn: number;
  state: CmState;
  /** The REP as sent (sent again for a repeated REQ). */
  readonly rep: Buffer;
}

/** What the responder needs of the transport. */
export interface CmHost {
  /** Send a MAD to the guest's QP1 (the responder keeps no reference to `mad`). */
  sendMad(mad: Buffer, peer: CmPeer): void;
  /** Bind connection `c` before its REP goes out; false refuses it (REJ, no resources). */
  open(c: CmConnection): boolean;
  /** Connection `c` ended (DREQ, REJ, a disconnect or drop of ours): unbind it. Called once per connection. */
  closed(c: CmConnection, why: string): void;
}

interface CmResponderOptions {
  /** The target's IPv4 address (a.b.c.d) and rdma_cm port. */
  readonly ip: string;
  readonly port: number;
  /** I/O queues a controller may have: a higher qid is refused. */
  readonly maxIoQueues: number;
  /** Our CA GUID (8 bytes) for REP. */
  readonly caGuid: Buffer;
  readonly host: CmHost;
  /** Whether `cntlid` names a live controller an I/O queue may join (newer hosts name it in the REQ). */
  readonly cntlidLive?: (cntlid: number) => boolean;
  readonly log?: Logger;
  /** Source of randomness in [0, 1) for PSNs and communication ids (tests make it fixed). */
  readonly random?: () => number;
}

/** What a refused REQ gets. */
interface Refusal {
  readonly reason: number;
  /** An nvme_rdma_cm_status for CONSUMER_DEFINED, else 0 (no private data). */
  readonly nvmeStatus: number;
  readonly why: string;
}

/** A validated REQ, before it becomes a connection. */
interface Request {
  readonly remoteCommId: number;
  readonly guestQpn: number;
  readonly qid: number;
  readonly hsqsize: number;
  readonly hrqsize: number;
  readonly responderResources: number;
  readonly initiatorDepth: number;
}

export class CmResponder {
  readonly #o: CmResponderOptions;
  readonly #log: Logger;
  readonly #random: () => number;
  readonly #ip: Buffer;
  readonly #serviceId: number;
  readonly #byQpn = new Map<number, CmConnection>();
  readonly #byCommId = new Map<number, CmConnection>();
  /** By the guest's GID and communication id: a repeated REQ finds its connection. */
  readonly #byRemote = new Map<string, CmConnection>();
  #nextQpn = 0;
  #nextCommId: number;
  #tid = 0;
  /** MADs taken and refused, for stats and tests. */
  readonly counts = { received: 0, dropped: 0, accepted: 0, rejected: 0, disconnects: 0 };

  constructor(o: CmResponderOptions) {
    this.#o = o;
    this.#log = o.log ?? nullLogger;
    this.#random = o.random ?? Math.random;
    this.#ip = Buffer.from(o.ip.split('.').map(Number));
    this.#serviceId = RDMA_PS_TCP * 0x10000 + o.port;
    this.#nextCommId = Math.floor(this.#random() * 0xffffffff) >>> 0 || 1;
  }

  get size(): number {
    return this.#byQpn.size;
  }

  connections(): CmConnection[] {
    return [...this.#byQpn.values()];
  }

  /** The connection behind controller QPN `qpn`, if any. */
  byTargetQpn(qpn: number): CmConnection | undefined {
    return this.#byQpn.get(qpn);
  }

  /** A MAD the guest's QP1 sent to ours (`mad`: the 256 bytes after the GRH). */
  receive(mad: Buffer, peer: CmPeer): void {
    this.counts.received++;
    if (
      mad.length < MAD_SIZE ||
      getField(mad, 0, ib_mad_hdr.base_version) !== IB_MGMT_BASE_VERSION ||
      getField(mad, 0, ib_mad_hdr.mgmt_class) !== IB_MGMT_CLASS_CM ||
      getField(mad, 0, ib_mad_hdr.class_version) !== IB_CM_CLASS_VERSION ||
      getField(mad, 0, ib_mad_hdr.method) !== IB_MGMT_METHOD_SEND
    ) {
      this.counts.dropped++;
      return;
    }
    switch (getField(mad, 0, ib_mad_hdr.attr_id)) {
      case CmAttr.REQ:
        this.#req(mad, peer);
        return;
      case CmAttr.RTU:
        this.#rtu(mad);
        return;
      case CmAttr.DREQ:
        this.#dreq(mad, peer);
        return;
      case CmAttr.DREP:
        return; // the answer to a DREQ of ours: the connection is already gone
      case CmAttr.REJ:
        this.#rej(mad);
        return;
      case CmAttr.MRA:
        return;
      default:
        this.counts.dropped++;
    }
  }

  /** A capsule arrived before the RTU: the connection is established all the same (IB's communication established). */
  established(c: CmConnection): void {
    if (c.state === 'rep-sent') c.state = 'established';
  }

  /** Target side ends connection `c` (its controller went away): DREQ to the guest, and the connection is forgotten. */
  disconnect(c: CmConnection, why: string): void {
    if (this.#byQpn.get(c.targetQpn) !== c) return;
    const m = this.#mad(CmAttr.DREQ, this.#ownTid());
    setField(m, 0, cm_dreq_msg.local_comm_id, c.localCommId);
    setField(m, 0, cm_dreq_msg.remote_comm_id, c.remoteCommId);
    setBits(m, 0, cm_dreq_msg.remote_qpn_eecn, c.guestQpn);
    this.#o.host.sendMad(m, c.peer);
    this.counts.disconnects++;
    this.#forget(c, why);
  }

  /** Forget connection `c` without a word to the guest (its QP is gone or in error). */
  drop(c: CmConnection, why: string): void {
    if (this.#byQpn.get(c.targetQpn) !== c) return;
    this.#forget(c, why);
  }

  /** Device reset: every connection is gone, nothing is sent. */
  reset(): void {
    for (const c of [...this.#byQpn.values()]) this.#forget(c, 'device reset');
  }

  // ---- messages ------------------------------------------------------------------------------

  #req(mad: Buffer, peer: CmPeer): void {
    const remoteCommId = getField(mad, 0, cm_req_msg.local_comm_id);
    const key = `${peer.gid.toString('hex')}/${remoteCommId}`;
    const known = this.#byRemote.get(key);
    if (known) {
      // The guest sent its REQ again (our REP was late or lost): the same REP again.
      if (known.state === 'rep-sent') this.#o.host.sendMad(Buffer.from(known.rep), peer);
      return;
    }
    const checked = this.#check(mad);
    if ('reason' in checked) {
      this.#reject(mad, peer, checked);
      return;
    }
    if (this.#byQpn.size >= MAX_CM_CONNECTIONS) {
      this.#reject(mad, peer, {
        reason: CmRejReason.CONSUMER_DEFINED,
        nvmeStatus: NvmeRdmaCmStatus.NO_RSC,
        why: 'too many connections',
      });
      return;
    }
    const rep = this.#mad(CmAttr.REP, viewRaw(mad, 0, ib_mad_hdr.tid));
    const c: CmConnection = {
      targetQpn: this.#allocQpn(),
      localCommId: this.#allocCommId(),
      remoteCommId,
      guestQpn: checked.guestQpn,
      peer: { gid: Buffer.from(peer.gid), mac: Buffer.from(peer.mac), vlanTci: peer.vlanTci },
      qid: checked.qid,
      hsqsize: checked.hsqsize,
      hrqsize: checked.hrqsize,
      startingPsn: Math.floor(this.#random() * 0x1000000) & 0xffffff,
      state: 'rep-sent',
      rep,
    };
    setField(rep, 0, cm_rep_msg.local_comm_id, c.localCommId);
    setField(rep, 0, cm_rep_msg.remote_comm_id, remoteCommId);
    setBits(rep, 0, cm_rep_msg.local_qpn, c.targetQpn);
    setBits(rep, 0, cm_rep_msg.starting_psn, c.startingPsn);
    // What the guest offers to take (its responder resources) is what we may issue: our RDMA READs of its memory.
    setField(rep, 0, cm_rep_msg.responder_resources, Math.min(checked.initiatorDepth, MAX_RD_ATOMIC));
    setField(rep, 0, cm_rep_msg.initiator_depth, Math.min(checked.responderResources, MAX_RD_ATOMIC));
    setBits(rep, 0, cm_rep_msg.target_ack_delay, REP_TARGET_ACK_DELAY);
    setBits(rep, 0, cm_rep_msg.end_to_end_flow_control, 1);
    setBits(rep, 0, cm_rep_msg.rnr_retry_count, REP_RNR_RETRY);
    setRawBytes(rep, 0, cm_rep_msg.local_ca_guid, this.#o.caGuid);
    const pd = cm_rep_msg.private_data.off;
    setField(rep, pd, nvme_rdma_cm_rep.recfmt, NVME_RDMA_CM_FMT_1_0);
    setField(rep, pd, nvme_rdma_cm_rep.crqsize, checked.hsqsize + 1);
    if (!this.#o.host.open(c)) {
      this.#reject(mad, peer, {
        reason: CmRejReason.CONSUMER_DEFINED,
        nvmeStatus: NvmeRdmaCmStatus.NO_RSC,
        why: 'the guest QP is not there',
      });
      return;
    }
    this.#byQpn.set(c.targetQpn, c);
    this.#byCommId.set(c.localCommId, c);
    this.#byRemote.set(key, c);
    this.counts.accepted++;
    this.#log.info('nvmeof: CM REQ accepted', {
      guestQpn: c.guestQpn,
      targetQpn: hex(c.targetQpn),
      qid: c.qid,
      hsqsize: c.hsqsize,
      hrqsize: c.hrqsize,
    });
    this.#o.host.sendMad(Buffer.from(rep), c.peer);
  }

  /** The REQ's fields, in the order nvmet checks them; a refusal names the REJ to send. */
  #check(mad: Buffer): Request | Refusal {
    if (getField(mad, 0, cm_req_msg.service_id) !== this.#serviceId) {
      return {
        reason: CmRejReason.INVALID_SERVICE_ID,
        nvmeStatus: 0,
        why: `service id ${getField(mad, 0, cm_req_msg.service_id)} is not rdma_cm TCP port ${this.#o.port}`,
      };
    }
    if (
      getBits(mad, 0, cm_req_msg.transport_service_type) !== CM_TRANSPORT_RC ||
      getBits(mad, 0, cm_req_msg.extended_transport_type) !== 0
    ) {
      return { reason: CmRejReason.INVALID_TRANSPORT_TYPE, nvmeStatus: 0, why: 'not an RC connection' };
    }
    const pd = cm_req_msg.private_data.off;
    const dst = mad.subarray(
      pd + cma_hdr.dst_addr.off + CMA_IP4_OFFSET,
      pd + cma_hdr.dst_addr.off + cma_hdr.dst_addr.size,
    );
    if (
      getField(mad, pd, cma_hdr.cma_version) !== CMA_VERSION ||
      getField(mad, pd, cma_hdr.ip_version) >>> CMA_IP_VERSION_SHIFT !== 4 ||
      !dst.equals(this.#ip)
    ) {
      return { reason: CmRejReason.INVALID_SERVICE_ID, nvmeStatus: 0, why: 'cma_hdr does not name our IPv4 address' };
    }
    const at = pd + cma_hdr.SIZE;
    const refuse = (nvmeStatus: number, why: string): Refusal => ({
      reason: CmRejReason.CONSUMER_DEFINED,
      nvmeStatus,
      why,
    });
    if (getField(mad, at, nvme_rdma_cm_req.recfmt) !== NVME_RDMA_CM_FMT_1_0)
      return refuse(NvmeRdmaCmStatus.INVALID_RECFMT, `recfmt ${getField(mad, at, nvme_rdma_cm_req.recfmt)}`);
    const qid = getField(mad, at, nvme_rdma_cm_req.qid);
    const hsqsize = getField(mad, at, nvme_rdma_cm_req.hsqsize);
    const hrqsize = getField(mad, at, nvme_rdma_cm_req.hrqsize);
    const cntlid = getField(mad, at, nvme_rdma_cm_req.cntlid);
    if (qid > this.#o.maxIoQueues)
      return refuse(NvmeRdmaCmStatus.INVALID_QID, `qid ${qid} above ${this.#o.maxIoQueues}`);
    if (qid === 0 ? hsqsize + 1 > ADMIN_QUEUE_DEPTH : hsqsize === 0 || hsqsize + 1 > QUEUE_ENTRIES) {
      return refuse(NvmeRdmaCmStatus.INVALID_HSQSIZE, `hsqsize ${hsqsize} for qid ${qid}`);
    }
    if (hrqsize === 0 || hrqsize > QUEUE_ENTRIES) return refuse(NvmeRdmaCmStatus.INVALID_HRQSIZE, `hrqsize ${hrqsize}`);
    if (qid > 0 && cntlid !== 0 && this.#o.cntlidLive && !this.#o.cntlidLive(cntlid)) {
      return refuse(NvmeRdmaCmStatus.INVALID_CNTLID, `cntlid ${cntlid} names no live controller`);
    }
    return {
      remoteCommId: getField(mad, 0, cm_req_msg.local_comm_id),
      guestQpn: getBits(mad, 0, cm_req_msg.local_qpn),
      qid,
      hsqsize,
      hrqsize,
      responderResources: getField(mad, 0, cm_req_msg.responder_resources),
      initiatorDepth: getField(mad, 0, cm_req_msg.initiator_depth),
    };
  }

  #reject(req: Buffer, peer: CmPeer, r: Refusal): void {
    const m = this.#mad(CmAttr.REJ, viewRaw(req, 0, ib_mad_hdr.tid));
    setField(m, 0, cm_rej_msg.local_comm_id, this.#allocCommId());
    setField(m, 0, cm_rej_msg.remote_comm_id, getField(req, 0, cm_req_msg.local_comm_id));
    setBits(m, 0, cm_rej_msg.message_rejected, CmMsgResponse.REQ);
    setField(m, 0, cm_rej_msg.reason, r.reason);
    if (r.reason === CmRejReason.CONSUMER_DEFINED) {
      setField(m, cm_rej_msg.private_data.off, nvme_rdma_cm_rej.recfmt, NVME_RDMA_CM_FMT_1_0);
      setField(m, cm_rej_msg.private_data.off, nvme_rdma_cm_rej.sts, r.nvmeStatus);
    }
    this.counts.rejected++;
    this.#log.warn(`nvmeof: CM REQ rejected: ${r.why}`, { reason: r.reason, nvmeStatus: r.nvmeStatus });
    this.#o.host.sendMad(m, peer);
  }

  #rtu(mad: Buffer): void {
    const c = this.#byCommId.get(getField(mad, 0, cm_rtu_msg.remote_comm_id));
    if (!c || c.remoteCommId !== getField(mad, 0, cm_rtu_msg.local_comm_id)) return;
    this.established(c);
  }

  #dreq(mad: Buffer, peer: CmPeer): void {
    const ours = getField(mad, 0, cm_dreq_msg.remote_comm_id);
    const theirs = getField(mad, 0, cm_dreq_msg.local_comm_id);
    const c = this.#byCommId.get(ours);
    const m = this.#mad(CmAttr.DREP, viewRaw(mad, 0, ib_mad_hdr.tid));
    setField(m, 0, cm_drep_msg.local_comm_id, ours);
    setField(m, 0, cm_drep_msg.remote_comm_id, theirs);
    if (c && c.remoteCommId === theirs && getBits(mad, 0, cm_dreq_msg.remote_qpn_eecn) === c.targetQpn) {
      this.#o.host.sendMad(m, c.peer);
      this.#forget(c, 'DREQ from the guest');
      return;
    }
    // Not (or no longer) ours: the DREP anyway, so the guest's CM can leave its DREQ_SENT state.
    this.#o.host.sendMad(m, peer);
  }

  #rej(mad: Buffer): void {
    const c = this.#byCommId.get(getField(mad, 0, cm_rej_msg.remote_comm_id));
    if (!c || c.remoteCommId !== getField(mad, 0, cm_rej_msg.local_comm_id)) return;
    this.#forget(c, `REJ from the guest (reason ${getField(mad, 0, cm_rej_msg.reason)})`);
  }

  // ---- helpers -------------------------------------------------------------------------------

  #forget(c: CmConnection, why: string): void {
    this.#byQpn.delete(c.targetQpn);
    this.#byCommId.delete(c.localCommId);
    this.#byRemote.delete(`${c.peer.gid.toString('hex')}/${c.remoteCommId}`);
    this.#log.info('nvmeof: CM connection ended', { targetQpn: hex(c.targetQpn), qid: c.qid, why });
    this.#o.host.closed(c, why);
  }

  /** A fresh 256-byte CM MAD with its header filled in. */
  #mad(attr: number, tid: Buffer): Buffer {
    const m = Buffer.alloc(MAD_SIZE);
    setField(m, 0, ib_mad_hdr.base_version, IB_MGMT_BASE_VERSION);
    setField(m, 0, ib_mad_hdr.mgmt_class, IB_MGMT_CLASS_CM);
    setField(m, 0, ib_mad_hdr.class_version, IB_CM_CLASS_VERSION);
    setField(m, 0, ib_mad_hdr.method, IB_MGMT_METHOD_SEND);
    setField(m, 0, ib_mad_hdr.attr_id, attr);
    setRawBytes(m, 0, ib_mad_hdr.tid, tid);
    return m;
  }

  /** A transaction id for a message we start (DREQ): "NVMF" then a counter. */
  #ownTid(): Buffer {
    const t = Buffer.alloc(8);
    t.write('NVMF', 0, 'latin1');
    this.#tid = (this.#tid + 1) >>> 0;
    t.writeUInt32BE(this.#tid, 4);
    return t;
  }

  /** The next controller QPN not in use (they only come back after 4M connections). */
  #allocQpn(): number {
    for (;;) {
      const qpn = TARGET_QPN_BASE + this.#nextQpn;
      this.#nextQpn = (this.#nextQpn + 1) % TARGET_QPN_SPAN;
      if (!this.#byQpn.has(qpn)) return qpn;
    }
  }

  #allocCommId(): number {
    for (;;) {
      const id = this.#nextCommId;
      this.#nextCommId = (this.#nextCommId + 1) >>> 0 || 1;
      if (!this.#byCommId.has(id)) return id;
    }
  }
}

function hex(n: number): string {
  return `0x${n.toString(16).padStart(6, '0')}`;
}

/** The EUI-64 CA GUID of a MAC address (ff:fe in the middle, the U/L bit flipped). */
export function guidFromMac(mac: Buffer): Buffer {
  return Buffer.from([mac[0]! ^ 0x02, mac[1]!, mac[2]!, 0xff, 0xfe, mac[3]!, mac[4]!, mac[5]!]);
}
