// The NVMe-oF target's CM replies into the guest's QP1 (./data-path.ts): each MAD goes into QP1's next receive
// behind a GRH from the target's GID to the guest's, as from a peer's QP1; a reply whose receive is not posted yet, or
// whose CQ is full, waits in order (bounded) for the guest's RQ or CQ doorbell.

import type { AddressVector } from '../../../rdma/address';
import { RecvOp } from '../../../rdma/datapath/cqe';
import { datagramAccepted, GRH_SIZE, writeGrh } from '../../../rdma/datapath/datagram';
import type { DataPathEngine } from '../../../rdma/executor/executor';
import { GSI_QPN } from '../../../rdma/limits';
import { QpState } from '../../../rdma/types';
import type { GuestMemory } from '../../../vfio-user/guest-memory';
import { IB_QP1_QKEY } from './cm-layouts';
import type { CmPeer } from './cm';
import { cqRoom } from '../../../rdma/datapath/cq-ring';
import type { Verbs } from '../../../rdma/executor/verbs';

/** CM replies held for a QP1 receive at most; past it the oldest is dropped (the guest's CM retries). */
const MAX_HELD_MADS = 64;
/** Hop limit of the GRH our MADs arrive with. */
const GRH_HOP_LIMIT = 64;
const ROCE_V2_PORT = 4791;

export interface HeldMad {
  readonly mad: Buffer;
  readonly peer: CmPeer;
}

/** States in which a QP's receive side works. */
export function receives(state: QpState): boolean {
  return state === QpState.RTR || state === QpState.RTS || state === QpState.SQD || state === QpState.SQE;
}

/** CM replies on their way into the guest's QP1 receives, held (bounded, oldest dropped first) until there is room. */
export class Qp1Replies {
  readonly #engine: DataPathEngine;
  readonly #verbs: Verbs;
  readonly #gid: Buffer;
  readonly #mac: Buffer;
  readonly #counts: { madsOut: number; madsDropped: number };
  readonly #held: HeldMad[] = [];
  readonly #grh = Buffer.alloc(GRH_SIZE);

  /** `gid` and `mac` are the target's (the replies' source); `counts` is the data path's, told what went out or was dropped. */
  constructor(
    engine: DataPathEngine,
    verbs: Verbs,
    gid: Buffer,
    mac: Buffer,
    counts: { madsOut: number; madsDropped: number },
  ) {
    this.#engine = engine;
    this.#verbs = verbs;
    this.#gid = gid;
    this.#mac = mac;
    this.#counts = counts;
  }

  /** How many replies wait for a receive. */
  get held(): number {
    return this.#held.length;
  }

  /** Drop every held reply (a reset, or QP1 gone). */
  clear(): void {
    this.#held.length = 0;
  }

  /** A CM reply for the guest's QP1: delivered now if it can be, else held (bounded). */
  queue(mad: Buffer, peer: CmPeer): void {
    if (this.#held.length >= MAX_HELD_MADS) {
      this.#held.shift();
      this.#counts.madsDropped++;
    }
    this.#held.push({ mad, peer });
    this.flush();
  }

  /** Deliver what is held, in order, until a receive or CQ room is missing. */
  flush(): void {
    const mem = this.#engine.memory();
    while (this.#held.length > 0) {
      const r = mem ? this.#deliverMad(mem, this.#held[0]!) : 'wait';
      if (r === 'wait') return;
      if (r === 'drop') this.#counts.madsDropped++;
      else this.#counts.madsOut++;
      this.#held.shift();
    }
  }

  /** One MAD into QP1's next receive: the GRH first (from the target's GID to the guest's), then the 256 bytes. */
  #deliverMad(mem: GuestMemory, m: HeldMad): 'done' | 'wait' | 'drop' {
    const dev = this.#engine;
    const qp1 = dev.rm.qps.get(GSI_QPN);
    if (!qp1 || !receives(qp1.state) || !datagramAccepted(true, qp1.attrs.qkey, IB_QP1_QKEY)) return 'wait';
    if (cqRoom(dev.rm, qp1.rqCqId) === 0) return 'wait';
    const v = this.#verbs;
    v.clear();
    const ring = v.takeRecv(mem, qp1);
    if (ring === 'empty') return 'wait';
    if (ring === 'bad') return 'drop';
    const av = this.#replyAv(m.peer);
    writeGrh(av, m.mad.length, this.#grh);
    v.src.push(m.mad);
    v.deliver(mem, GSI_QPN, qp1, ring, m.mad.length, this.#grh, RecvOp.SEND, 0, false, av);
    v.clear();
    return 'done';
  }

  /** The address facts of a datagram from the target to `peer` (what its GRH and the receive CQE say). */
  #replyAv(peer: CmPeer): AddressVector {
    return {
      ipVersion: 4,
      dmac: peer.mac,
      smac: this.#mac,
      vlanTci: peer.vlanTci,
      sgid: this.#gid,
      dgid: peer.gid,
      hopLimit: GRH_HOP_LIMIT,
      trafficClass: 0,
      flowLabel: 0,
      udpSrcPort: ROCE_V2_PORT,
      udpDstPort: ROCE_V2_PORT,
      template: Buffer.alloc(0),
    };
  }
}
