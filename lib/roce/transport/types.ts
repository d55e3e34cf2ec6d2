// What the RoCE transport needs from the device around it, as interfaces, and
// the values that cross them. The transport knows nothing of rings, doorbells
// or the driver's formats: a backend adapts the device's queues, memory keys,
// CQs and EQ to these, and hands it frames from the wire.
//
// Every call into these interfaces is synchronous. Buffers passed out (a
// frame to send, a completion) are reused on return: copy what you keep.

import type { RocePath } from '../frame';

/** ib_qp_type values for the QPs this transport runs. */
export const QPT_GSI = 1;
export const QPT_RC = 2;
export const QPT_UC = 3;
export const QPT_UD = 4;

/** QP states (ib_qp_state). */
export const QPS_RESET = 0;
export const QPS_INIT = 1;
export const QPS_RTR = 2;
export const QPS_RTS = 3;
export const QPS_SQD = 4;
// 5 is SQE (send queue error): no QP here enters it.
export const QPS_ERR = 6;

/** Work request opcodes (ib_wr_opcode). */
export const WR_RDMA_WRITE = 0;
export const WR_RDMA_WRITE_WITH_IMM = 1;
export const WR_SEND = 2;
export const WR_SEND_WITH_IMM = 3;
export const WR_RDMA_READ = 4;
export const WR_ATOMIC_CMP_AND_SWP = 5;
export const WR_ATOMIC_FETCH_AND_ADD = 6;
export const WR_SEND_WITH_INV = 9;

/** Completion statuses (ib_wc_status). */
export const WC_SUCCESS = 0;
export const WC_LOC_LEN_ERR = 1;
export const WC_LOC_QP_OP_ERR = 2;
export const WC_LOC_PROT_ERR = 4;
export const WC_WR_FLUSH_ERR = 5;
export const WC_BAD_RESP_ERR = 7;
export const WC_REM_INV_REQ_ERR = 9;
export const WC_REM_ACCESS_ERR = 10;
export const WC_REM_OP_ERR = 11;
export const WC_RETRY_EXC_ERR = 12;
export const WC_RNR_RETRY_EXC_ERR = 13;

/** Completion opcodes (ib_wc_opcode). */
export const WC_SEND = 0;
export const WC_RDMA_WRITE = 1;
export const WC_RDMA_READ = 2;
export const WC_COMP_SWAP = 3;
export const WC_FETCH_ADD = 4;
export const WC_RECV = 128;
export const WC_RECV_RDMA_WITH_IMM = 129;

/** Memory access rights (ib_access_flags). */
export const ACCESS_LOCAL_WRITE = 1;
export const ACCESS_REMOTE_WRITE = 2;
export const ACCESS_REMOTE_READ = 4;
export const ACCESS_REMOTE_ATOMIC = 8;

/** Asynchronous QP events; the numbers are the ionic EQE codes the driver decodes. */
export const EVENT_COMM_EST = 2;
export const EVENT_QP_ERR = 8;
export const EVENT_ERR_REQUEST = 9;
export const EVENT_ERR_ACCESS = 10;

/** One scatter/gather element of a work request. */
export interface Sge {
  addr: number;
  length: number;
  lkey: number;
}

/** A send queue work request, as the backend read it from the SQ. */
export interface SendWqe {
  /** The backend's handle for the WQE (its ring index or wr_id); returned in the completion. */
  wrId: number;
  /** WR_*. */
  opcode: number;
  sgl: readonly Sge[];
  /** Inline data instead of the SGL (null when the WQE has none). */
  inline: Buffer | null;
  /** Total bytes: of the SGL or the inline data. */
  length: number;
  signaled: boolean;
  solicited: boolean;
  /** RDMA WRITE/READ and atomics. */
  remoteAddr: number;
  rkey: number;
  /** Immediate data (big-endian word) for the _WITH_IMM opcodes; R_Key to invalidate for SEND_WITH_INV. */
  imm: number;
  /** Atomics: swap (or add) and compare operands, high and low words. */
  swapHi: number;
  swapLo: number;
  cmpHi: number;
  cmpLo: number;
  /** UD: where the datagram goes. */
  ud: { path: RocePath; destQpn: number; qkey: number } | null;
}

/** A receive queue work request. */
export interface RecvWqe {
  wrId: number;
  sgl: readonly Sge[];
  /** Total bytes of the SGL. */
  length: number;
}

/** A completion, filled in place and handed to the sink; copy what you keep. */
export class Completion {
  wrId = 0;
  status = WC_SUCCESS;
  opcode = WC_SEND;
  byteLen = 0;
  /** Whether the WQE asked for a completion (an unsignaled send still retires its WQE). */
  signaled = true;
  hasImm = false;
  imm = 0;
  hasInv = false;
  invRkey = 0;
  /** A receive whose message's last packet asked for a solicited event (BTH SE). */
  solicited = false;
  /** UD receives: the sender's QPN, and a GRH at the start of the buffer. */
  srcQp = 0;
  hasGrh = false;
}

/** Guest memory, reached through memory keys; each call checks the key, its bounds and its rights. */
export interface RoceMemory {
  /**
   * Copy `len` bytes at `addr` of the region `key` names into dst[dstOff..].
   * `remote`: key is an R_Key and the region must allow `access`; else an
   * L_Key. False (nothing copied) when the key, range or rights are wrong.
   */
  read(key: number, addr: number, len: number, remote: boolean, access: number, dst: Buffer, dstOff: number): boolean;
  /** Copy src[srcOff, srcOff + len) to `addr` of the region `key` names; false as for read. */
  write(key: number, addr: number, len: number, remote: boolean, access: number, src: Buffer, srcOff: number): boolean;
  /** Whether the whole range may be accessed so, without touching it. */
  check(key: number, addr: number, len: number, remote: boolean, access: number): boolean;
}

/** Where the transport takes work requests from (the SQ and RQ rings); null when a queue is empty. */
interface WqeSource {
  nextSend(): SendWqe | null;
  nextRecv(): RecvWqe | null;
}

/** Where completions go (the CQs). */
export interface CompletionSink {
  sendCompleted(c: Completion): void;
  recvCompleted(c: Completion): void;
}

/** Where the QP's asynchronous events go (the EQ). */
export interface EventSink {
  qpEvent(qpn: number, event: number): void;
}

/** Where frames go (the TAP). The buffer is reused after the call returns. */
export interface PacketSink {
  send(frame: Buffer, len: number): void;
}

/** Everything a QP of this transport talks to. */
export interface RoceQpDeps {
  memory: RoceMemory;
  queues: WqeSource;
  completions: CompletionSink;
  events: EventSink;
  wire: PacketSink;
}

/** A QP's attributes, as create and modify QP set them. */
export class RoceQpConfig {
  type = QPT_RC;
  qpn = 0;
  /** RC/UC: the connected peer's QPN; its address is `path`. */
  destQpn = 0;
  readonly path: RocePath;
  /** Path MTU in bytes: 256, 512, 1024, 2048 or 4096. */
  pmtu = 1024;
  /** First PSN the requester sends, and the PSN the responder expects first. */
  sqPsn = 0;
  rqPsn = 0;
  /** Local ACK timeout exponent (4.096 us * 2^t; 0: none), retry count and RNR retry count (7: no limit). */
  timeout = 14;
  retryCnt = 7;
  rnrRetry = 7;
  /** The RNR timer code this QP's RNR NAKs carry. */
  minRnrTimer = 12;
  /** READs and atomics this QP may have outstanding as requester, and accepts as responder. */
  maxRdAtomic = 1;
  maxDestRdAtomic = 1;
  /** UD/GSI: the Q_Key the QP accepts. */
  qkey = 0;
  pkey = 0xffff;
  /** ACCESS_REMOTE_* rights the QP grants to incoming requests. */
  accessFlags = ACCESS_REMOTE_WRITE | ACCESS_REMOTE_READ | ACCESS_REMOTE_ATOMIC;

  constructor(path: RocePath) {
    this.path = path;
  }
}

/** What the requester, completer and responder may ask of the QP they belong to. */
export interface QpControl {
  readonly state: number;
  /** Move the QP to ERROR (flushing its work requests); `event` (EVENT_*) is raised on the EQ when not 0. */
  toError(event: number): void;
}
