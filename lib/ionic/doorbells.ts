// BAR2 of the ionic device: doorbell pages. Every 4 KiB page decodes alike
// (the kernel's page and each RDMA context's); the byte offset in a page
// selects the hardware queue type (one struct ionic_doorbell per type), and the
// 64-bit value carries qid, ring and producer index (ionic_regs.h):
//
//   value = qid << IONIC_DBELL_QID_SHIFT | ring << IONIC_DBELL_RING_SHIFT | p_index
//
// which in memory is the struct ionic_doorbell table below (lib/ionic/layouts.ts).
// A doorbell is one 64-bit write, or two 32-bit writes to the same doorbell,
// low half first (a 32-bit guest). Reads return 0. The queue is drained inside
// the write (lib/ionic/lif.ts, lib/ionic/rdma).

import type { Logger } from '../log';
import { RateLimiter, warnLimited } from '../log';
import type { BarHandler } from '../pci/bars';
import { GUEST_PAGE_SIZE, QType } from './constants';
import { ionic_doorbell } from './layouts';
import { getField } from '../../protocol/field';
import type { Lif } from './lif';
import type { RdmaEngine } from './rdma/engine';

/** BAR index of the doorbell pages, and their total size. */
export const BAR2_INDEX = 2;
export const BAR2_SIZE = 4 << 20;

/** Valid bits of the ring field (ionic_regs.h IONIC_DBELL_RING_MASK). */
const IONIC_DBELL_RING_MASK = 0x7;
/** Bytes written by each half of a split doorbell write. */
const DB_HALF = ionic_doorbell.SIZE / 2;
/** Doorbells whose low half waits for its high half, at most (a guest writing only low halves cannot grow the table). */
const MAX_PENDING_HALVES = 1024;

/** A decoded doorbell. */
interface Doorbell {
  qid: number;
  ring: number;
  pIndex: number;
}

/** Decode the struct ionic_doorbell at the start of `value` into `out`. */
function decodeDoorbell(value: Buffer, out: Doorbell): Doorbell {
  out.pIndex = getField(value, 0, ionic_doorbell.p_index);
  out.ring = getField(value, 0, ionic_doorbell.ring) & IONIC_DBELL_RING_MASK;
  // qid is 24 bits: qid_lo holds its low byte, qid_hi the 16 bits above.
  out.qid =
    getField(value, 0, ionic_doorbell.qid_lo) |
    (getField(value, 0, ionic_doorbell.qid_hi) << (8 * ionic_doorbell.qid_lo.size));
  return out;
}

/** The doorbell counter the device keeps. */
export interface DoorbellCounters {
  doorbells: number;
}

interface DoorbellOptions {
  readonly lif: Lif;
  readonly rdma: RdmaEngine | null;
  readonly counters: DoorbellCounters;
  readonly log: Logger;
}

/** The doorbell BAR as a BAR handler: decodes each doorbell and routes it to its queue. */
export class DoorbellBar implements BarHandler {
  readonly #lif: Lif;
  readonly #rdma: RdmaEngine | null;
  readonly #counters: DoorbellCounters;
  readonly #log: Logger;
  readonly #limiter = new RateLimiter();
  /** Low halves of doorbells written as two 32-bit writes, by doorbell address. */
  readonly #lowHalves = new Map<number, Buffer>();
  /** Scratch for a doorbell put together from two halves. */
  readonly #joined = Buffer.alloc(ionic_doorbell.SIZE);
  readonly #decoded: Doorbell = { qid: 0, ring: 0, pIndex: 0 };

  constructor(opts: DoorbellOptions) {
    this.#lif = opts.lif;
    this.#rdma = opts.rdma;
    this.#counters = opts.counters;
    this.#log = opts.log;
  }

  /** Forget half-written doorbells (device reset). */
  reset(): void {
    this.#lowHalves.clear();
  }

  read(_offset: number, dst: Buffer): number {
    dst.fill(0);
    return 0;
  }

  write(offset: number, src: Buffer): number {
    const inPage = offset % GUEST_PAGE_SIZE;
    const hwType = Math.floor(inPage / ionic_doorbell.SIZE);
    const inDoorbell = inPage % ionic_doorbell.SIZE;
    // Split writes are paired per doorbell address (page and slot), low half first.
    const key = offset - inDoorbell;
    if (src.length === ionic_doorbell.SIZE && inDoorbell === 0) {
      this.#ring(hwType, src);
    } else if (src.length === DB_HALF && inDoorbell === 0) {
      if (this.#lowHalves.size >= MAX_PENDING_HALVES) this.#lowHalves.clear();
      this.#lowHalves.set(key, Buffer.from(src));
    } else if (src.length === DB_HALF && inDoorbell === DB_HALF) {
      const low = this.#lowHalves.get(key);
      if (low !== undefined) {
        this.#lowHalves.delete(key);
        low.copy(this.#joined, 0);
        src.copy(this.#joined, DB_HALF);
        this.#ring(hwType, this.#joined);
      }
    } else {
      warnLimited(
        this.#log,
        this.#limiter,
        'db-width',
        `ionic: doorbell write of ${src.length} bytes at 0x${offset.toString(16)} ignored`,
      );
    }
    return 0;
  }

  /** Route one doorbell written at slot `hwType` of a page. */
  #ring(hwType: number, value: Buffer): void {
    this.#counters.doorbells++;
    const { qid, ring, pIndex } = decodeDoorbell(value, this.#decoded);
    switch (hwType) {
      case QType.ADMINQ:
        if (qid === 0) this.#lif.adminDoorbell(pIndex);
        return;
      case QType.TXQ:
        this.#lif.txDoorbell(qid, pIndex);
        return;
      case QType.RXQ:
        this.#lif.rxDoorbell(qid, pIndex);
        return;
      default:
        // NotifyQ is never rung; the RDMA types (RdmaQType, 5..9) go to the RDMA engine.
        if (hwType > QType.EQ) this.#rdma?.doorbell(hwType, qid, ring, pIndex);
        return;
    }
  }
}
