// The records of the RDMA resource manager (resources.ts): what the device
// keeps of each object the guest's driver creates, the specs it is created
// from, and the result type of the manager's operations. The MR/MW records
// and key translation are in memory-keys.ts.

import type { AddressVector } from './address';
import type { CounterSet } from './counters';
import type { PageTable } from './page-table';
import type { QpState, QpType } from './types';

/** Why an operation was refused. */
export type RmError =
  /** The id is outside its range, or reserved. */
  | 'bad-id'
  /** An object with this id exists already. */
  | 'exists'
  /** No object with this id (or key). */
  | 'unknown'
  /** The object is in use (a CQ with QPs, an SRQ with QPs, an admin CQ). */
  | 'busy'
  /** A type the device does not support, or that does not fit the id. */
  | 'bad-type'
  /** The state machine does not allow it. */
  | 'bad-state'
  /** An attribute out of range. */
  | 'bad-attr'
  /** No id or table space left. */
  | 'no-space';

export type RmResult<T> = { readonly ok: true; readonly value: T } | { readonly ok: false; readonly error: RmError };

/** A success. */
export function rmOk<T>(value: T): RmResult<T> {
  return { ok: true, value };
}

/** A refusal. */
export function rmFail<T>(error: RmError): RmResult<T> {
  return { ok: false, error };
}

/** Handles: serial numbers unique for the life of the server, shared by every kind of object. */
export class HandleSerial {
  #next = 1;

  take(): number {
    return this.#next++;
  }
}

// ---- records -------------------------------------------------------------------------------

/** The one protection domain the device keeps. */
export interface PdRecord {
  readonly handle: number;
}

/** A CQ, CQ mechanics state included (the device writes CQEs; lib/rdma/datapath/cq-ring.ts). */
export interface CqRecord {
  readonly id: number;
  readonly handle: number;
  readonly eqId: number;
  readonly depthLog2: number;
  readonly strideLog2: number;
  readonly table: PageTable;
  readonly dbid: number;
  /** Created by RDMA_CREATE_CQ for an admin queue (not by the admin queue's CREATE_CQ). */
  readonly admin: boolean;
  /** QPs and SRQs using it. */
  refs: number;
  /** Next slot the device writes. */
  prod: number;
  /** Color of the current pass: 1 on the first (the ring is zero-filled), flipped at every wrap. */
  color: number;
  /** The host's read position from its last ring-0 doorbell: the free-space bound. */
  cons: number;
  /** 0 not armed, 1 armed for any CQE, 2 armed for solicited (or error) CQEs. */
  armed: 0 | 1 | 2;
  /** Set when a CQE was dropped for lack of room (the CQ overflowed). */
  overflowed: boolean;
}

/** A work ring (SQ, RQ, SRQ): geometry, table, and the indices the doorbells and the data path move. */
export interface QueueRing {
  readonly depthLog2: number;
  readonly strideLog2: number;
  readonly table: PageTable;
  /** Producer index from the last doorbell (16-bit, below the depth). */
  pi: number;
  /** Device consumer index (the data path advances it). */
  ci: number;
}

interface QpAttrs {
  /** 24-bit PSNs. */
  sqPsn: number;
  rqPsn: number;
  /** log2 of the path MTU in bytes (8..12). */
  pmtu: number;
  /** UD/GSI Q_Key; null until a MODIFY_QP sets one (unset is not 0: a controlled Q_Key then has nothing to use). */
  qkey: number | null;
  /** RC/UC destination QP number. */
  destQpn: number;
  /** QpFlag remote-access bits. */
  access: number;
  sqdNotify: boolean;
  retryCnt: number;
  rnrRetry: number;
  rnrTimer: number;
  timeout: number;
  /** log2 depths as MODIFY_QP sent them: max_rd_atomic = 2^rrq - 1, max_dest_rd_atomic = 2^rsq - 1. */
  rrqDepth: number;
  rsqDepth: number;
  rateLimitKbps: number;
  /** RC/UC destination, from the AV header template. */
  av: AddressVector | null;
  /** The AH id the driver gave this QP's AV (-1 before one). */
  ahId: number;
  /** 802.1p priority (SL) and DSCP the AV asked for; the checksum profile of its template. */
  pcp: number;
  dscp: number;
  csumProfile: number;
}

/** The attributes of a new QP. */
export function defaultQpAttrs(): QpAttrs {
  return {
    sqPsn: 0,
    rqPsn: 0,
    pmtu: 10,
    qkey: null,
    destQpn: 0,
    access: 0,
    sqdNotify: false,
    retryCnt: 0,
    rnrRetry: 0,
    rnrTimer: 0,
    timeout: 0,
    rrqDepth: 0,
    rsqDepth: 0,
    rateLimitKbps: 0,
    av: null,
    ahId: -1,
    pcp: 0,
    dscp: 0,
    csumProfile: 0,
  };
}

export interface QpRecord {
  readonly id: number;
  readonly handle: number;
  readonly type: QpType;
  readonly pdId: number;
  /** QpFlag bits fixed at creation (PRIVILEGED, REMOTE_PRIVILEGED, SPEC, PB). */
  readonly flags: number;
  /** Kernel QP: lkey 0 means bus addresses (ionic RDMA R3.2). */
  readonly privileged: boolean;
  /** May honour rkey 0 (PD created with IB_PD_UNSAFE_GLOBAL_RKEY). */
  readonly remotePrivileged: boolean;
  state: QpState;
  readonly sqCqId: number;
  readonly rqCqId: number;
  readonly sq: QueueRing;
  /** Null when the QP draws receives from an SRQ. */
  readonly rq: QueueRing | null;
  readonly srqId: number | null;
  readonly dbid: number;
  readonly attrs: QpAttrs;
  readonly stats: CounterSet;
  /** WQEs run, by opcode (index = SendVerb; counters.ts opcodeCounts). */
  readonly opcodes: Float64Array;
  /** The data path's private per-QP state; the resource manager never looks inside. */
  dp: unknown;
}

export interface AhRecord {
  readonly id: number;
  readonly handle: number;
  readonly pdId: number;
  readonly av: AddressVector;
  readonly csumProfile: number;
}

export interface SrqRecord {
  readonly id: number;
  readonly handle: number;
  readonly pdId: number;
  readonly udma: number;
  readonly ring: QueueRing;
  /** Low-watermark limit (0 = not armed). */
  limit: number;
  readonly dbid: number;
  /** QPs bound to it. */
  refs: number;
  dp: unknown;
}

// ---- specs ---------------------------------------------------------------------------------

export interface CqSpec {
  readonly id: number;
  readonly eqId: number;
  readonly depthLog2: number;
  readonly strideLog2: number;
  readonly dbid: number;
  readonly admin: boolean;
}

export interface RingSpec {
  readonly depthLog2: number;
  readonly strideLog2: number;
}

export interface QpSpec {
  readonly id: number;
  readonly type: QpType;
  readonly pdId: number;
  readonly flags: number;
  readonly sqCqId: number;
  readonly rqCqId: number;
  readonly sq: RingSpec;
  /** Null when the QP uses `srqId`. */
  readonly rq: RingSpec | null;
  readonly srqId: number | null;
  readonly dbid: number;
}

/** What a MODIFY_QP changes: only the fields present are applied. */
export type QpChanges = Partial<QpAttrs> & { state?: QpState };
