// The RoCE data path (`--backend roce`): the WQE executor runs every QP, and
// WQEs whose peer is not in this VM go to the RoCEv2 transport (lib/roce),
// whose frames go out on the host link the Ethernet function uses (the TAP).
// Frames from the TAP that are RoCEv2 (UDP 4791) and addressed to one of our
// GIDs go to the transport instead of the guest's netdev; everything else
// goes on to the guest untouched.
//
// Where a peer lives is decided by GID: the guest's own GIDs are the source
// GIDs of the templates the driver gives (every AV names one) and the
// addresses its netdev shows on the wire (what it transmits). A connected
// QP whose destination GID is not one of them, and an address handle's
// datagrams likewise, are on the wire; the rest stay in the VM (loopback).

import { UdpGsoBatch } from './udp-gso-batch';
import type { GuestSegment } from '../../rdma/backend';
import type { DataPathEngine } from '../../rdma/executor';
import { installWqeExecutor, type WqeExecutor } from '../../rdma/executor/executor';
import { GuestViews } from '../../rdma/executor/guest-views';
import { Completions } from '../../rdma/executor/completions';
import type { QpDp } from '../../rdma/executor/qp-state';
import { qpStateIfAny } from '../../rdma/executor/qp-state';
import type { RemotePath, RemoteResult } from '../../rdma/executor/remote-path';
import type { QpChanges, QpRecord } from '../../rdma/resources';
import { QpState, QpType } from '../../rdma/types';
import { GSI_QPN } from '../../rdma/limits';
import type { SendWqe } from '../../rdma/datapath/wqe-decode';
import { gidsFromFrame } from '../../rdma/datapath/mesh';
import { IonicStatus } from '../../rdma/datapath/cqe';
import { DeviceCounter } from '../../rdma/counters';
import type { GuestMemory } from '../../vfio-user/guest-memory';
import { getField, viewRaw } from '../../../protocol/field';
import { ETH_P_8021Q, ETH_P_IP, ethhdr, iphdr, ipv6hdr, vlan_ethhdr } from '../../net/headers';
import { contain } from '../../guard';
import { gidEquals, RocePath, isRoceV2, writeV4Gid } from '../../roce/frame';
import { RocePort } from '../../roce/transport/port';
import { DROP_NONE, DROP_REASON_NAMES, type RoceCounters } from '../../roce/counters';
import type { PacketSink } from '../../roce/transport/types';
import { pathFromAv } from './path';
import { type LinkHost, RoceQpLink } from './qp-link';

/** The node number the executor is given for "on the wire" (any number >= 0 means "not this device"). */
const WIRE = 0;
/** GIDs the guest may own at most (the ionic GID table size). */
const MAX_GIDS = 256;
/** Address handles whose paths are cached at most. */
const MAX_AH_PATHS = 4096;

export class RoceDataPath implements RemotePath, LinkHost {
  readonly port = new RocePort();
  readonly dev: DataPathEngine;
  readonly executor: WqeExecutor;
  readonly views: GuestViews;
  readonly cqes: Completions;
  readonly wire: PacketSink;
  readonly rxAddress = { ipVersion: 4, smac: Buffer.alloc(6), vlanTci: -1 };
  readonly #links = new Map<number, RoceQpLink>();
  readonly #ahPaths = new Map<number, { handle: number; path: RocePath }>();
  readonly #learned: Buffer[] = [];
  readonly #dstGid = Buffer.alloc(16);
  /** Frames the host link refused (no TAP, or a write error). */
  txErrors = 0;
  /** RoCE packets gathered into UDP GSO buffers for the TAP. */
  readonly gso: UdpGsoBatch;

  constructor(engine: DataPathEngine, segment: GuestSegment) {
    this.dev = engine;
    this.views = new GuestViews(engine.rm);
    this.cqes = new Completions(engine);
    const sent = (ok: boolean): void => {
      // Said once: without a host link (--tap) every RoCE frame is lost.
      if (!ok && this.txErrors++ === 0)
        engine.log.warn('rocm-ernic: roce: a RoCE frame could not go out (no --tap, or the TAP refused it)');
    };
    // Up to 15 packets of a flow per TAP write where the TAP takes UDP GSO buffers.
    this.gso = new UdpGsoBatch((frame, len, offload) => segment.sendToHost?.(frame, len, offload) ?? false);
    const gso = this.gso;
    this.wire = {
      send: (frame, len) => {
        if (segment.hostTakesUdpGso?.()) gso.add(frame, len);
        else sent(segment.sendToHost?.(frame, len) ?? false);
      },
    };
    gso.onFailure = () => sent(false);
    this.executor = installWqeExecutor(engine);
    this.executor.attachRemote(this);
    // After the executor's own: it has placed the QP (node) and run its state machine; the transport QP follows.
    const prev = engine.hooks;
    engine.hooks = {
      ...prev,
      qpModified: (qp, from, changes) => {
        prev.qpModified?.(qp, from, changes);
        this.#modified(qp);
      },
      refreshCounters: () => {
        prev.refreshCounters?.();
        this.#refreshDeviceCounters();
      },
    };
    segment.addEndpoint({
      claimTx: (frame) => {
        this.#learnFrom(frame);
        return false;
      },
      claimRx: (frame) => this.#receive(frame),
      needsHostFrames: true,
    });
  }

  get counters(): RoceCounters {
    return this.port.counters;
  }

  /** The transport's counters into the device's (what the driver's hw_counters show). */
  #refreshDeviceCounters(): void {
    const r = this.port.counters;
    const d = this.dev.counters;
    let naksTx = 0;
    let naksRx = 0;
    for (let k = 0; k < r.naksTx.length; k++) naksTx += r.naksTx[k]!;
    for (let k = 0; k < r.naksRx.length; k++) naksRx += r.naksRx[k]!;
    let drops = 0;
    for (let k = 1; k < r.drops.length; k++) drops += r.drops[k]!;
    d.set(DeviceCounter.roce_tx_packets, r.txPackets);
    d.set(DeviceCounter.roce_rx_packets, r.rxPackets);
    d.set(DeviceCounter.roce_retransmits, r.retransmits);
    d.set(DeviceCounter.roce_timeouts, r.timeouts);
    d.set(DeviceCounter.roce_duplicates, r.duplicates);
    d.set(DeviceCounter.roce_naks_tx, naksTx);
    d.set(DeviceCounter.roce_naks_rx, naksRx);
    d.set(DeviceCounter.roce_icrc_errors, r.icrcErrors);
    d.set(DeviceCounter.roce_rx_drops, drops);
  }

  /** The GIDs taken as the guest's. */
  get localGids(): readonly Buffer[] {
    return this.#learned;
  }

  /** Take `gid` as one of the guest's (it then answers to RoCE frames for it, and peers there are loopback). */
  addLocalGid(gid: Buffer): void {
    if (gid.length !== 16 || this.#learned.length >= MAX_GIDS || this.#isLocal(gid)) return;
    const g = Buffer.from(gid);
    this.#learned.push(g);
    this.port.addGid(g);
  }

  #isLocal(gid: Buffer): boolean {
    for (const g of this.#learned) if (gidEquals(g, gid)) return true;
    return false;
  }

  readonly #scratch: Buffer[] = [];

  #learnFrom(frame: Buffer): void {
    const out = this.#scratch;
    out.length = 0;
    gidsFromFrame(frame, out);
    for (const g of out) this.addLocalGid(g);
    out.length = 0;
  }

  /** A frame from the host link: RoCEv2 for one of our GIDs goes to the port (claimed), anything else to the guest. */
  #receive(frame: Buffer): boolean {
    const len = frame.length;
    if (!isRoceV2(frame, len) || !this.#dstGidOf(frame) || !this.port.hasGid(this.#dstGid)) return false;
    contain(this.dev.log, 'roce receive', () => {
      const reason = this.port.receive(frame, len);
      if (reason !== DROP_NONE && this.dev.log.debugEnabled) this.#logDrop(reason);
    });
    return true;
  }

  #dropLogSecond = 0;
  #dropLogs = 0;

  /** At debug, up to 20 dropped frames a second: why, and what the frame was for. */
  #logDrop(reason: number): void {
    const second = Math.floor(Date.now() / 1000);
    if (second !== this.#dropLogSecond) {
      this.#dropLogSecond = second;
      this.#dropLogs = 0;
    }
    if (this.#dropLogs++ >= 20) return;
    const f = this.port.lastFrame;
    const qp = this.port.qp(f.headers.destQp);
    this.dev.log.debug(
      `rocm-ernic: roce: dropped a frame (${DROP_REASON_NAMES[reason] ?? reason}): opcode ${f.headers.opcode} ` +
        `QPN ${f.headers.destQp} PSN ${f.headers.psn}${qp ? `; QP ${qp.describe()}` : ''}`,
    );
  }

  /** The destination GID of a frame isRoceV2 accepted, into #dstGid; also the address a UD receive reports. */
  #dstGidOf(frame: Buffer): boolean {
    const a = this.rxAddress;
    let l3: number = ethhdr.SIZE;
    let type = getField(frame, 0, ethhdr.h_proto);
    a.vlanTci = -1;
    if (type === ETH_P_8021Q) {
      if (frame.length < vlan_ethhdr.SIZE) return false;
      a.vlanTci = getField(frame, 0, vlan_ethhdr.h_vlan_TCI);
      type = getField(frame, 0, vlan_ethhdr.h_vlan_encapsulated_proto);
      l3 = vlan_ethhdr.SIZE;
    }
    frame.copy(a.smac, 0, ethhdr.h_source.off, ethhdr.h_source.off + 6);
    if (type === ETH_P_IP) {
      if (frame.length < l3 + iphdr.SIZE) return false;
      a.ipVersion = 4;
      writeV4Gid(this.#dstGid, frame.readInt32LE(l3 + iphdr.daddr.off));
      return true;
    }
    if (frame.length < l3 + ipv6hdr.SIZE) return false;
    a.ipVersion = 6;
    viewRaw(frame, l3, ipv6hdr.daddr).copy(this.#dstGid);
    return true;
  }

  /** The path of an address handle (cached by handle; rebuilt when the id is reused). */
  ahPath(ahId: number, localQpn: number, remoteQpn: number): RocePath | null {
    const ah = this.dev.rm.ahs.get(ahId);
    if (!ah) return null;
    let e = this.#ahPaths.get(ahId);
    if (!e || e.handle !== ah.handle) {
      if (!e && this.#ahPaths.size >= MAX_AH_PATHS) this.#ahPaths.clear();
      e = { handle: ah.handle, path: new RocePath() };
      this.#ahPaths.set(ahId, e);
    }
    // The UDP source port may depend on the QPNs: refilled per datagram (a few field copies).
    pathFromAv(ah.av, localQpn, remoteQpn, e.path);
    return e.path;
  }

  // ---- the transport QPs -------------------------------------------------------------------

  /** Whether a QP talks to the wire: a connected QP whose peer is elsewhere; any UD or GSI QP (datagrams come from anywhere). */
  #onWire(qp: QpRecord): boolean {
    if (qp.type === QpType.UD || qp.id === GSI_QPN) return true;
    if (qp.type !== QpType.RC && qp.type !== QpType.UC) return false;
    const s = qpStateIfAny(qp);
    return s !== undefined && s.node >= 0;
  }

  #linkOf(qp: QpRecord): RoceQpLink | null {
    const have = this.#links.get(qp.id);
    if (have && have.qp === qp) return have;
    if (have) this.#drop(qp.id, 'a new QP took its number');
    if (!this.#onWire(qp)) return null;
    const link = new RoceQpLink(qp, this);
    link.roce = this.port.createQp(link.cfg, link.deps);
    this.#links.set(qp.id, link);
    if (this.dev.log.debugEnabled)
      this.dev.log.debug(`rocm-ernic: roce: QP ${qp.id} on the wire (state ${qp.state}, peer QPN ${link.cfg.destQpn})`);
    link.follow();
    return link;
  }

  #drop(qpId: number, why: string): void {
    if (this.dev.log.debugEnabled) this.dev.log.debug(`rocm-ernic: roce: QP ${qpId} off the wire (${why})`);
    this.port.destroyQp(qpId);
    this.#links.delete(qpId);
  }

  #modified(qp: QpRecord): void {
    if (this.dev.rm.qps.get(qp.id) !== qp) return;
    const have = this.#links.get(qp.id);
    if (!this.#onWire(qp)) {
      // Its AV now points into the VM (or it never left): no transport QP.
      if (have) this.#drop(qp.id, 'its peer is in this VM now');
      return;
    }
    if (qp.state === QpState.RESET && !have) return;
    const link = this.#linkOf(qp);
    if (!link) return;
    link.sync();
    link.follow();
  }

  // ---- RemotePath --------------------------------------------------------------------------

  modifyAllowed(_qp: QpRecord, changes: QpChanges): boolean {
    // The AV's source GID is one of our guest's.
    if (changes.av) this.addLocalGid(changes.av.sgid);
    return true;
  }

  nodeOf(qp: QpRecord): number {
    const av = qp.attrs.av;
    return av && !this.#isLocal(av.dgid) ? WIRE : -1;
  }

  datagramNode(ahId: number): number {
    const ah = this.dev.rm.ahs.get(ahId);
    if (!ah) return -1;
    this.addLocalGid(ah.av.sgid);
    return this.#isLocal(ah.av.dgid) ? -1 : WIRE;
  }

  execute(
    _mem: GuestMemory,
    qp: QpRecord,
    s: QpDp,
    w: SendWqe,
    buf: Buffer,
    _node: number,
    datagram: boolean,
  ): RemoteResult {
    const link = this.#linkOf(qp);
    if (!link) return IonicStatus.LOCAL_QP_OPER;
    return link.post(w, buf, s, datagram);
  }

  flushed(qp: QpRecord): void {
    const link = this.#links.get(qp.id);
    if (link && link.qp === qp) link.flushed();
  }

  destroyed(qp: QpRecord): void {
    const link = this.#links.get(qp.id);
    if (link && link.qp === qp) this.#drop(qp.id, 'destroyed');
  }

  receivesPosted(): void {
    // The peer's RNR timer brings the request back; nothing is held here.
  }

  reset(): void {
    for (const id of [...this.#links.keys()]) this.#drop(id, 'reset');
    this.#ahPaths.clear();
  }

  /** Stop every transport timer (the server is closing). */
  close(): void {
    this.reset();
  }
}
