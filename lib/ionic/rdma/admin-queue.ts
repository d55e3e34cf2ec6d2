// An RDMA admin queue (ionic RDMA R2): a contiguous ring of 64-byte strides the
// driver fills with commands and rings with (aqid << 24) | prod, paired with
// its own CQ (RDMA_CREATE_ADMINQ's cid).
//
// A command starts with {op, rsvd, len LE16} and its body; a body longer than
// 60 bytes continues into the next strides (ring wrap applies), so a command
// takes ceil((len + 4) / 64) strides. Commands run strictly in order. Each
// gets one 32-byte admin CQE on the AQ's CQ: cmd_idx = the ring index of its
// first stride, the op echoed, status_length = the status with the error bit,
// or the output length on success; qid_type_flags = aqid << 8 | type ADMIN |
// error | color. Posting the CQE raises the CQ's event if the driver armed it
// (it does whenever it finds its CQ empty), which writes the EQE and
// interrupts: the driver drains admin CQs from its EQ handler.
//
// A command runs only when its CQE has room: with the CQ full, the queue
// waits for the driver's ring-0 doorbell on the CQ. A doorbell runs up to
// ADMIN_BUDGET commands at once and reschedules the rest (setImmediate), so
// one queue cannot starve the socket. A command that needs more than one turn
// (CREATE_MR over a long page list) answers with work that runs one share per
// turn; the queue completes it, in order, before it reads the next command.

import type { CqRecord } from '../../rdma/resources';
import { guardedImmediate } from '../../guard';
import type { Logger } from '../../log';
import { AdminOutcome, AdminResult, AdminWork, isAdminWork } from './admin-outcome';
import type { GuestMemory } from '../../vfio-user/guest-memory';
import { MemStatus } from '../../vfio-user/guest-memory';
import { CqPost, cqFree } from '../../rdma/datapath/cq-ring';
import { ADMIN_MAX_BODY, ADMIN_WQE_HDR_LEN, ADMIN_WQE_STRIDE, AdminStatus } from './constants';
import { ionic_v1_admin_wqe } from './layouts';
import { getField } from '../../../protocol/field';
import { CqeRecord, CqeType, newCqeRecord } from '../../rdma/datapath/cqe';

export interface AdminQueueContext {
  memory(): GuestMemory | undefined;
  /** Run a command: its status and, on success, the status_length value; or work to continue on later turns. */
  execute(aq: RdmaAdminQueue, mem: GuestMemory, op: number, body: Buffer): AdminOutcome;
  /** Post a CQE on the AQ's CQ (encoding, color and event handled there). */
  postCqe(cq: CqRecord, cqe: CqeRecord): CqPost;
  /** Is this queue still the live one (not dropped by a reset)? */
  alive(aq: RdmaAdminQueue): boolean;
  /** The queue stopped on a DMA failure (logged by the caller). */
  failed(aq: RdmaAdminQueue, why: string): void;
  /** Most commands one pass runs. */
  readonly budget: number;
  readonly log: Logger;
}

/** A command part way through: where it sat in the ring, and its remaining work. */
interface Inflight {
  readonly first: number;
  readonly op: number;
  readonly consumed: number;
  readonly work: AdminWork;
  /** Its answer, once the work is done (kept while the CQ is full). */
  result: AdminResult | null;
}

export class RdmaAdminQueue {
  /** Device consumer index (first stride of the next command). */
  ci = 0;
  /** Producer index from the last doorbell. */
  pi = 0;
  readonly size: number;
  readonly mask: number;
  /** Commands completed. */
  completed = 0;
  /** Stopped for good: a WQE or CQE could not be read or written. */
  dead = false;
  #scheduled = false;
  #inflight: Inflight | null = null;
  readonly #stride = Buffer.alloc(ADMIN_WQE_STRIDE);
  readonly #body = Buffer.alloc(ADMIN_MAX_BODY);
  readonly #cqe = newCqeRecord();

  constructor(
    readonly id: number,
    readonly base: number,
    readonly depthLog2: number,
    readonly cq: CqRecord,
  ) {
    this.size = 2 ** depthLog2;
    this.mask = this.size - 1;
  }

  /** Strides posted and not yet consumed. */
  get pending(): number {
    return (this.pi - this.ci) & this.mask;
  }

  /** A doorbell: record the producer index, then run what is posted. False for an index past the ring. */
  doorbell(index: number, ctx: AdminQueueContext): boolean {
    if (index >= this.size) return false;
    this.pi = index;
    this.run(ctx);
    return true;
  }

  /** Run posted commands, up to the budget; reschedule the rest. Also called when the CQ gets room. */
  run(ctx: AdminQueueContext): void {
    if (this.dead || !ctx.alive(this)) {
      this.abort();
      return;
    }
    const mem = ctx.memory();
    if (!mem) return;
    let done = 0;
    if (this.#inflight) {
      // One share of the long command per turn, then yield.
      const f = this.#inflight;
      const r = f.result ?? f.work.step(mem);
      if (r === null) {
        this.#later(ctx);
        return;
      }
      f.result = r;
      if (cqFree(this.cq) === 0) return; // resumes on the CQ's ring-0 doorbell
      this.#inflight = null;
      if (this.#complete(ctx, f.first, f.op, f.consumed, r.status, r.length) === 'dead') {
        this.dead = true;
        return;
      }
      done++;
    }
    while (this.pending > 0 && done < ctx.budget) {
      if (cqFree(this.cq) === 0) return; // resumes on the CQ's ring-0 doorbell
      const r = this.#one(mem, ctx);
      if (r === 'wait') return;
      if (r === 'dead') {
        this.dead = true;
        return;
      }
      if (r === 'later') {
        this.#later(ctx);
        return;
      }
      done++;
    }
    if (this.pending > 0) this.#later(ctx);
  }

  /** The queue was dropped (reset, destroy) with a command part way: give back what it holds. */
  abort(): void {
    const f = this.#inflight;
    this.#inflight = null;
    f?.work.abort();
  }

  #later(ctx: AdminQueueContext): void {
    if (this.#scheduled) return;
    this.#scheduled = true;
    guardedImmediate(
      ctx.log,
      `RDMA admin queue ${this.id}`,
      () => {
        this.#scheduled = false;
        this.run(ctx);
      },
      () => {
        this.dead = true;
        this.abort();
      },
    );
  }

  #one(mem: GuestMemory, ctx: AdminQueueContext): 'done' | 'wait' | 'dead' | 'later' {
    const first = this.ci;
    if (mem.read(this.base + first * ADMIN_WQE_STRIDE, this.#stride) !== MemStatus.OK) {
      ctx.failed(this, `WQE at index ${first} is not guest memory`);
      return 'dead';
    }
    const op = getField(this.#stride, 0, ionic_v1_admin_wqe.op);
    const len = getField(this.#stride, 0, ionic_v1_admin_wqe.len);
    const strides = Math.ceil((len + ADMIN_WQE_HDR_LEN) / ADMIN_WQE_STRIDE);
    let status: AdminStatus;
    let length = 0;
    let consumed = strides;
    if (len > ADMIN_MAX_BODY) {
      // Longer than any command: refuse it, consuming what it claims (as far as it was posted).
      status = AdminStatus.MSG_TOO_BIG;
      consumed = Math.min(strides, this.pending);
    } else {
      if (strides > this.pending) return 'wait'; // the driver posts every stride before ringing
      const body = this.#body.subarray(0, len);
      this.#stride.copy(body, 0, ionic_v1_admin_wqe.BODY, Math.min(ADMIN_WQE_STRIDE, ionic_v1_admin_wqe.BODY + len));
      for (let s = 1, at = ADMIN_WQE_STRIDE - ionic_v1_admin_wqe.BODY; at < len; s++, at += ADMIN_WQE_STRIDE) {
        const slot = (first + s) & this.mask;
        const n = Math.min(ADMIN_WQE_STRIDE, len - at);
        if (mem.read(this.base + slot * ADMIN_WQE_STRIDE, body.subarray(at, at + n)) !== MemStatus.OK) {
          ctx.failed(this, `WQE stride at index ${slot} is not guest memory`);
          return 'dead';
        }
      }
      const r: AdminOutcome = ctx.execute(this, mem, op, body);
      if (isAdminWork(r)) {
        // Its CQE comes when the work is done (the ring slots stay the driver's until then).
        this.#inflight = { first, op, consumed, work: r, result: null };
        return 'later';
      }
      status = r.status;
      length = r.length;
    }
    return this.#complete(ctx, first, op, consumed, status, length);
  }

  /** Post a command's CQE and consume its strides. */
  #complete(
    ctx: AdminQueueContext,
    first: number,
    op: number,
    consumed: number,
    status: AdminStatus,
    length: number,
  ): 'done' | 'dead' {
    const c = this.#cqe;
    c.type = CqeType.ADMIN;
    c.qid = this.id;
    c.cmdIdx = first;
    c.cmdOp = op;
    c.error = status !== AdminStatus.OK;
    c.statusLength = c.error ? status : length;
    this.ci = (first + consumed) & this.mask;
    this.completed++;
    if (ctx.postCqe(this.cq, c) === CqPost.DMA_ERROR) {
      ctx.failed(this, `its CQ ${this.cq.id} is not guest memory`);
      return 'dead';
    }
    return 'done';
  }
}
