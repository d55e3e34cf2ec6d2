// CQ mechanics (ionic RDMA R2.2, 4.6, 4.8), for admin CQs and data CQs alike:
// the device writes 32-byte CQEs round the ring with a color bit, and raises
// an event on the CQ's EQ when the host armed the CQ.
//
// - Encoding: producers (the admin queue, the data path) hand a CqeRecord;
//   only this module writes CQEs into the guest's ring (encodeCqe, ./cqe.ts).
//   It sits beside the CQE format so the data path posts its completions
//   itself (postDataCqe); only an armed CQ's event goes back to the engine.
// - Color: bit 0 of the last byte (qid_type_flags is BE32 at 28). 1 on the
//   first pass over the zero-filled ring, flipped each time the write index
//   wraps to 0. The word holding it is written after the rest of the entry,
//   so the host never sees a new color on a half-written CQE.
// - Free space: the host reports its read position with a ring-0 doorbell
//   (lazily for data CQs); free = (size - 1) - (prod - cons). A CQE with no
//   room is not written (the CQ overflowed: CQ_ERR event).
// - Arming: ring 1 = next CQE of any kind, ring 2 = next solicited or error
//   CQE; one shot. If CQEs were already written past the last ring-0 index
//   when the arm arrives, the event fires at once (the kernel's
//   REPORT_MISSED_EVENTS and the provider's deferred arm rely on it).

import { CounterSet, DeviceCounter } from '../counters';
import type { CqRecord, ResourceManager } from '../resources';
import type { GuestMemory } from '../../vfio-user/guest-memory';
import { MemStatus } from '../../vfio-user/guest-memory';
import { CqeRecord, encodeCqe, ionic_v1_cqe } from './cqe';

/** Doorbell "ring" field (bits 16..18): 0 index update, 1 arm CQ (any), 2 arm CQ (solicited). */
export const enum DbRing {
  INDEX = 0,
  ARM = 1,
  ARM_SOLICITED = 2,
}

export const enum CqPost {
  OK = 0,
  /** No room: the host has not consumed (or reported consuming) enough. */
  FULL = 1,
  /** The ring is not in guest memory where the table says. */
  DMA_ERROR = 2,
}

/** What a CQ needs from its device: raise an event on the CQ's EQ. */
export interface CqEvents {
  /** The CQ was armed and got a CQE (or was armed with CQEs waiting): EQE CQ_NOTIFY + interrupt. */
  notify(cq: CqRecord): void;
  /** A CQE found no room: EQE CQ_ERR (once per overflow). */
  overflow(cq: CqRecord): void;
}

function cqSize(cq: CqRecord): number {
  return 1 << cq.depthLog2; // depthLog2 <= RDMA_MAX_DEPTH_LOG2 (16)
}

/** Slots the device may still write before passing the host's last reported read position. */
export function cqFree(cq: CqRecord): number {
  const mask = cqSize(cq) - 1;
  return mask - ((cq.prod - cq.cons) & mask);
}

const seg: number[] = [];
/** A CQE is encoded here when its slot is not one run of guest memory. */
const scratch = Buffer.alloc(ionic_v1_cqe.SIZE);
const TAIL = ionic_v1_cqe.qid_type_flags.off;

/**
 * Write one CQE and raise the event if armed. The CQ sets the record's color
 * (its current lap) and encodes it. `solicited` marks a CQE that satisfies a
 * solicited-only arm (a receive with SE set, or any error CQE).
 */
export function postCqe(mem: GuestMemory, cq: CqRecord, cqe: CqeRecord, solicited: boolean, events: CqEvents): CqPost {
  if (cqFree(cq) === 0) {
    if (!cq.overflowed) {
      cq.overflowed = true;
      events.overflow(cq);
    }
    return CqPost.FULL;
  }
  cqe.color = cq.color !== 0;
  seg.length = 0;
  const stride = 1 << cq.strideLog2;
  if (cq.table.translate(cq.prod * stride, ionic_v1_cqe.SIZE, seg) !== 0) return CqPost.DMA_ERROR;
  // The usual case: the CQE is one run of guest memory, encoded in place (the color word last).
  const view = seg.length === 2 ? mem.view(seg[0]!, ionic_v1_cqe.SIZE, true) : null;
  if (view) encodeCqe(cqe, view, 0);
  else {
    encodeCqe(cqe, scratch, 0);
    if (!writeSplit(mem, scratch)) return CqPost.DMA_ERROR;
  }
  cq.prod = (cq.prod + 1) & (cqSize(cq) - 1);
  if (cq.prod === 0) cq.color ^= 1;
  if (cq.armed === 1 || (cq.armed === 2 && solicited)) {
    cq.armed = 0;
    events.notify(cq);
  }
  return CqPost.OK;
}

/** A CQE across runs (or guest memory windows): everything before the tail word, then the tail word. */
function writeSplit(mem: GuestMemory, cqe: Buffer): boolean {
  for (let i = 0, at = 0; i < seg.length; i += 2) {
    const addr = seg[i]!;
    const end = at + seg[i + 1]!;
    const head = Math.min(end, TAIL);
    if (head > at && mem.write(addr, cqe.subarray(at, head)) !== MemStatus.OK) return false;
    at = end;
  }
  for (let i = 0, at = 0; i < seg.length; i += 2) {
    const addr = seg[i]!;
    const end = at + seg[i + 1]!;
    const from = Math.max(at, TAIL);
    if (end > from && mem.write(addr + (from - at), cqe.subarray(from, end)) !== MemStatus.OK) return false;
    at = end;
  }
  return true;
}

/**
 * A CQ doorbell: ring 0 reports the host's read position (an index past the
 * ring is ignored: false); ring 1 / 2 arm. Returns true when the doorbell was
 * meaningful.
 */
export function cqDoorbell(cq: CqRecord, ring: number, index: number, events: CqEvents): boolean {
  switch (ring) {
    case DbRing.INDEX:
      if (index >= cqSize(cq)) return false;
      cq.cons = index;
      cq.overflowed = false;
      return true;
    case DbRing.ARM:
    case DbRing.ARM_SOLICITED:
      // The low 16 bits are the host's arm counter, not an index.
      cq.armed = ring === DbRing.ARM || cq.armed === 1 ? 1 : 2;
      if (cq.prod !== cq.cons) {
        cq.armed = 0;
        events.notify(cq);
      }
      return true;
    default:
      return false;
  }
}

// ---- the data path's side: completions posted by CQ id ---------------------------------------

/** Result of postDataCqe. */
type CqePostResult = 'ok' | 'no-cq' | 'full' | 'dma-error';

/** What a data CQ needs of its device: the CQs, the counters, guest memory, and where its events go (the engine's EQs). */
export interface CqDevice {
  readonly rm: ResourceManager;
  readonly counters: CounterSet;
  /** Guest memory, or undefined while no client is attached. */
  memory(): GuestMemory | undefined;
  readonly cqEvents: CqEvents;
}

/**
 * Post a CQE to data CQ `cqId`: the CQ sets the record's color and encodes it
 * into its ring (the record is the caller's and may be reused at once), then
 * raises its event if armed. `solicited`: the CQE satisfies a solicited-only
 * arm (SE receive or error).
 */
export function postDataCqe(dev: CqDevice, cqId: number, cqe: CqeRecord, solicited: boolean): CqePostResult {
  const cq = dev.rm.cqs.get(cqId);
  if (!cq || cq.admin) return 'no-cq';
  const mem = dev.memory();
  if (!mem) return 'dma-error';
  const r = postCqe(mem, cq, cqe, solicited, dev.cqEvents);
  if (r === CqPost.OK) {
    dev.counters.inc(DeviceCounter.cqes);
    return 'ok';
  }
  return r === CqPost.FULL ? 'full' : 'dma-error';
}

/**
 * CQEs data CQ `cqId` can still take before passing the host's last reported
 * read position (-1: no such CQ). The data path holds work whose completion
 * has no room rather than lose the completion; the host's ring-0 CQ doorbell
 * (DataPathHooks.cqConsumed) is the signal to look again.
 */
export function cqRoom(rm: ResourceManager, cqId: number): number {
  const cq = rm.cqs.get(cqId);
  return !cq || cq.admin ? -1 : cqFree(cq);
}
