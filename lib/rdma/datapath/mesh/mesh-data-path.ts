// The mesh data path (`--backend tcp:...`): the loopback path runs every QP,
// and WQEs whose destination lives on another node go over the TCP mesh
// (lib/mesh) as the ionic wire protocol: requester.ts sends and completes
// them, responder.ts applies what peers send. Where a destination lives is
// decided by GID: a connected QP's AV names its destination GID when it
// reaches RTR, an AH names a datagram's; the mesh's GID table says which
// node owns it. The guest's own GIDs come from ERNIC_TCP_GUEST_GIDS, from the
// source GID of every AV, and from its transmitted frames (gid-learning.ts).
//
// Rules from the design: MODIFY_QP of a connected QP to a GID nobody owns
// fails (never a default node: that would write into another VM); an AH to
// such a GID is created and treated as local.

import { contain } from '../../../guard';
import type { Logger } from '../../../log';
import type { Mesh, MeshMessage, Placement } from '../../../mesh';
import { IonicWireOp, MsgType } from '../../../mesh';
import type { GuestMemory } from '../../../vfio-user/guest-memory';
import type { QpChanges, QpRecord } from '../../resources';
import { QpType } from '../../types';
import type { SendWqe } from '../wqe-decode';
import { DataPathEngine, installWqeExecutor, WqeExecutor } from '../../executor/executor';
import { QpDp, WaitKind } from '../../executor/qp-state';
import type { RemotePath, RemoteResult } from '../../executor/remote-path';
import { gidsFromFrame } from './gid-learning';
import { MeshRequester } from './requester';
import { MeshResponder } from './responder';
import { wireVersionOk } from './wire';
import { newWireHeader, readWireHeader } from '../../../mesh/ionic-header';

/** What the mesh data path uses of the Mesh (a test can stand in for it). */
export type MeshPort = Pick<
  Mesh,
  | 'send'
  | 'takeBack'
  | 'lookupGid'
  | 'addLocalGid'
  | 'localGids'
  | 'on'
  | 'off'
  | 'nodeId'
  | 'setConsumerPresent'
  | 'setPlacer'
>;

export interface MeshDataPathOptions {
  /** Lost-peer deadline (default 30 s). */
  readonly lostPeerMs?: number;
  /** How long a SEND waits for a receive (default 5 s). */
  readonly rnrMs?: number;
}

export class MeshDataPath implements RemotePath {
  readonly #engine: DataPathEngine;
  readonly #mesh: MeshPort;
  readonly #dp: WqeExecutor;
  readonly #requester: MeshRequester;
  readonly #responder: MeshResponder;
  readonly #log: Logger;
  readonly #hdr = newWireHeader();
  readonly #learned: Buffer[] = [];
  readonly #onMessage = (m: MeshMessage): void => {
    if (m.type !== MsgType.IONIC) return;
    contain(this.#log, 'mesh data path (inbound message)', () => this.#message(m));
  };
  readonly #onWritable = (node: number): void => {
    contain(this.#log, 'mesh data path (writable)', () => this.#dp.scheduler.wake(WaitKind.PEER, node));
  };
  readonly #onPressure = (): void => {
    contain(this.#log, 'mesh data path (pressure)', () => this.#responder.pressure());
  };

  constructor(engine: DataPathEngine, mesh: MeshPort, opts: MeshDataPathOptions = {}) {
    this.#engine = engine;
    this.#mesh = mesh;
    this.#log = engine.log;
    this.#dp = installWqeExecutor(engine);
    this.#requester = new MeshRequester(
      engine,
      mesh,
      this.#dp.views,
      this.#dp.scheduler,
      (qp, s) => this.#dp.release(qp, s),
      opts.lostPeerMs,
    );
    this.#responder = new MeshResponder(engine, mesh, this.#dp.verbs, this.#dp, opts.rnrMs);
    this.#dp.attachRemote(this);
    mesh.on('message', this.#onMessage);
    mesh.on('writable', this.#onWritable);
    // A route came or went: WQEs parked on that peer look again (a relay may carry them, or they fail at once).
    mesh.on('peer-up', this.#onWritable);
    mesh.on('peer-down', this.#onWritable);
    mesh.on('pressure', this.#onPressure);
    // A large WRITE's payload goes straight into the MR as it arrives (no copy of ours).
    mesh.setPlacer((from, head, rest) => {
      let p: Placement | null = null;
      contain(this.#log, 'mesh data path (placement)', () => {
        p = this.#responder.place(this.#engine.memory(), from, head, rest);
      });
      return p;
    });
  }

  /** Stop listening to the mesh (the mesh itself is closed by its owner). */
  close(): void {
    this.#mesh.off('message', this.#onMessage);
    this.#mesh.off('writable', this.#onWritable);
    this.#mesh.off('peer-up', this.#onWritable);
    this.#mesh.off('peer-down', this.#onWritable);
    this.#mesh.off('pressure', this.#onPressure);
    this.#mesh.setPlacer(null);
    this.reset();
  }

  get stats(): {
    pending: number;
    held: number;
    repliesDropped: number;
    placedWrites: number;
    refused: number;
    answersRefused: number;
  } {
    return {
      pending: this.#requester.pendingCount,
      held: this.#responder.heldCount,
      repliesDropped: this.#responder.repliesDropped,
      placedWrites: this.#responder.placedWrites,
      refused: this.#responder.refused,
      answersRefused: this.#answersRefused,
    };
  }

  /** Answers of another wire version, ignored (their requests then expire). */
  #answersRefused = 0;

  /** A frame the guest transmitted: learn the GIDs it shows (never claims it). */
  observeTx(frame: Buffer): void {
    const out = this.#learned;
    out.length = 0;
    gidsFromFrame(frame, out);
    for (const g of out) this.#learn(g);
    out.length = 0;
  }

  #learn(gid: Buffer): void {
    for (const g of this.#mesh.localGids()) if (g.equals(gid)) return;
    this.#mesh.addLocalGid(gid);
  }

  #message(m: MeshMessage): void {
    const h = this.#hdr;
    readWireHeader(m.header, h);
    if (h.op === IonicWireOp.ACK || h.op === IonicWireOp.READ_RESP || h.op === IonicWireOp.ATOMIC_RESP) {
      if (!wireVersionOk(h.flags)) {
        this.#answersRefused++;
        return;
      }
      this.#requester.answer(this.#engine.memory(), m.from, h.op, h.reqId, h.status, h.srcQp, m.payload);
      return;
    }
    this.#responder.request(m);
  }

  /** Where `gid` lives: a node id (ours included), or undefined when nobody owns it. */
  #owner(gid: Buffer): number | undefined {
    return this.#mesh.lookupGid(gid);
  }

  modifyAllowed(qp: QpRecord, changes: QpChanges): boolean {
    const av = changes.av;
    if (!av) return true;
    // The AV's source GID is one of our guest's: learn it.
    this.#learn(av.sgid);
    if (qp.type !== QpType.RC && qp.type !== QpType.UC) return true;
    return this.#owner(av.dgid) !== undefined;
  }

  nodeOf(qp: QpRecord): number {
    const av = qp.attrs.av;
    if (!av) return -1;
    const node = this.#owner(av.dgid);
    return node === undefined || node === this.#mesh.nodeId ? -1 : node;
  }

  datagramNode(ahId: number): number {
    const ah = this.#engine.rm.ahs.get(ahId);
    if (!ah) return -1;
    const node = this.#owner(ah.av.dgid);
    return node === undefined || node === this.#mesh.nodeId ? -1 : node;
  }

  execute(
    mem: GuestMemory,
    qp: QpRecord,
    s: QpDp,
    w: SendWqe,
    buf: Buffer,
    node: number,
    datagram: boolean,
  ): RemoteResult {
    return this.#requester.execute(mem, qp, s, w, buf, node, datagram);
  }

  flushed(qp: QpRecord, s: QpDp): void {
    this.#requester.flushed(qp, s);
  }

  destroyed(qp: QpRecord): void {
    this.#requester.destroyed(qp);
    this.#responder.destroyed(qp);
  }

  receivesPosted(qpId: number): void {
    this.#responder.receivesPosted(qpId);
  }

  reset(): void {
    this.#requester.reset();
    this.#responder.reset();
  }
}

/** Plug the mesh data path into an engine. */
export function installMeshDataPath(
  engine: DataPathEngine,
  mesh: MeshPort,
  opts: MeshDataPathOptions = {},
): MeshDataPath {
  return new MeshDataPath(engine, mesh, opts);
}
