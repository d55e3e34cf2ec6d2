// The four Ethernet queue types as the device runs them: the admin queue
// (commands in, completions out), the notify queue (events out), TX (frames
// out of guest memory) and RX (frames into posted buffers).
//
// Every ring address, index and length comes from the guest: each access goes
// through GuestMemory, which bounds-checks it, and a failed access stops that
// queue's pass and is counted (as a DMA error would be on hardware).

import type { GuestMemory } from '../vfio-user/guest-memory';
import { MemStatus } from '../vfio-user/guest-memory';
import { EventCode, GUEST_PAGE_SIZE, QType, RxOpcode, TxOpcode } from './constants';
import {
  ionic_admin_comp,
  ionic_notifyq_event,
  ionic_rxq_comp,
  ionic_rxq_desc,
  ionic_rxq_sg_elem,
  ionic_txq_comp,
  ionic_txq_desc,
  IONIC_TXQ_DESC_ADDR_SHIFT,
  IONIC_TXQ_DESC_NSGE_MASK,
  IONIC_TXQ_DESC_NSGE_SHIFT,
  IONIC_TXQ_DESC_OPCODE_MASK,
  IONIC_TXQ_DESC_OPCODE_SHIFT,
  ionic_txq_sg_elem,
  IONIC_RX_MAX_SG_ELEMS,
} from './layouts';
import { getField, setField } from '../../protocol/field';
import { CompletionRing, DescriptorRing, ionicAddr } from './ring';

/** What Q_INIT recorded. */
export interface QueueConfig {
  readonly type: QType;
  readonly index: number;
  readonly ringBase: number;
  readonly cqBase: number;
  readonly sgBase: number;
  readonly ringLog2: number;
  readonly intr: number;
  readonly irq: boolean;
  readonly sg: boolean;
  readonly version: number;
}

/** How many descriptors one doorbell pass handles before yielding to the event loop. */
export const QUEUE_BUDGET = 256;

export abstract class EthQueue {
  enabled = false;
  readonly ring: DescriptorRing;
  constructor(
    readonly cfg: QueueConfig,
    descSize: number,
  ) {
    this.ring = new DescriptorRing(ionicAddr(cfg.ringBase), 1 << cfg.ringLog2, descSize);
  }
  get size(): number {
    return this.ring.size;
  }
}

// ---- admin queue ---------------------------------------------------------------------

export class AdminQueue extends EthQueue {
  readonly cq: CompletionRing;
  readonly #desc = Buffer.alloc(64);
  readonly #comp = Buffer.alloc(16);
  constructor(cfg: QueueConfig) {
    super(cfg, 64);
    this.cq = new CompletionRing(ionicAddr(cfg.cqBase), this.size, ionic_admin_comp.SIZE);
  }

  /**
   * Run posted commands, at most `budget`: read the descriptor, execute, post
   * the completion with comp_index = the descriptor's slot. Returns the number
   * completed, or -1 when guest memory failed (the queue stops).
   */
  process(mem: GuestMemory, budget: number, execute: (cmd: Buffer, comp: Buffer) => void): number {
    let n = 0;
    while (!this.ring.empty && n < budget) {
      const slot = this.ring.ci;
      if (mem.read(this.ring.address(slot), this.#desc) !== MemStatus.OK) return -1;
      this.#comp.fill(0);
      execute(this.#desc, this.#comp);
      setField(this.#comp, 0, ionic_admin_comp.comp_index, slot);
      if (this.cq.post(mem, this.#comp) !== MemStatus.OK) return -1;
      this.ring.advance();
      n++;
    }
    return n;
  }
}

// ---- notify queue ----------------------------------------------------------------------

/** End of an event's eid: the body after it is written first, the eid last. */
const EID_END = ionic_notifyq_event.eid.off + ionic_notifyq_event.eid.size;

export class NotifyQueue extends EthQueue {
  /** eids count up from 1 after every Q_INIT (the driver resets its last_eid to 0). */
  #eid = 0;
  #slot = 0;
  readonly #event = Buffer.alloc(ionic_notifyq_event.SIZE);
  /** The event ring sits one page after ring_base, behind the driver's 4-byte "cmd" slots. */
  readonly eventBase: number;
  constructor(cfg: QueueConfig) {
    super(cfg, 4);
    const cmdBytes = this.size * 4;
    this.eventBase = ionicAddr(cfg.ringBase) + Math.ceil(cmdBytes / GUEST_PAGE_SIZE) * GUEST_PAGE_SIZE;
  }

  /** Post a LINK_CHANGE event. The eid is written last, so the driver never sees a half event. */
  linkChange(mem: GuestMemory, linkStatus: number, speedMbps: number): boolean {
    const e = this.#event;
    e.fill(0);
    setField(e, 0, ionic_notifyq_event.ecode, EventCode.LINK_CHANGE);
    setField(e, 0, ionic_notifyq_event.link_status, linkStatus);
    setField(e, 0, ionic_notifyq_event.link_speed, speedMbps);
    const at = this.eventBase + this.#slot * ionic_notifyq_event.SIZE;
    if (mem.write(at + EID_END, e.subarray(EID_END)) !== MemStatus.OK) return false;
    this.#eid++;
    setField(e, 0, ionic_notifyq_event.eid, this.#eid);
    if (mem.write(at, e.subarray(0, EID_END)) !== MemStatus.OK) return false;
    this.#slot = (this.#slot + 1) & this.ring.mask;
    return true;
  }
}

// ---- TX ------------------------------------------------------------------------------------

/** A TX descriptor's high word scaled to its place in the address (bits 32 - ADDR_SHIFT and up): computed once. */
const ADDR_HI_SCALE = 2 ** (32 - IONIC_TXQ_DESC_ADDR_SHIFT);
/** Largest frame we gather (max MTU 9194 + 14 header + 4 VLAN, rounded up). */
const MAX_FRAME = 9216 + 18;
/** Largest TSO super-frame: the driver's GSO limit (64 KiB, headers included). */
const MAX_TSO_FRAME = 65536;
/** Room kept before a gathered frame for the VLAN tag a VLAN_TX_TAG descriptor asks us to insert. */
export const TX_HEADROOM = 4;

/** ionic_txq_desc.cmd flag bits (bits 0..3). L3/L4 go with CSUM_HW, SOT/EOT with TSO. */
export const TxFlag = {
  VLAN: 0x1,
  ENCAP: 0x2,
  // The same bits mean L3/L4 under CSUM_HW and start/end of a TSO run under TSO (the driver's layout).
  CSUM_L3: 0x4,
  CSUM_L4: 0x8,
  TSO_SOT: 0x4,
  TSO_EOT: 0x8,
} as const;

export const enum TxResult {
  SENT,
  /** The descriptor is malformed (opcode, SG count, length): completed, frame dropped. */
  BAD_DESC,
  /** Guest memory failed: the queue stops. */
  DMA_ERROR,
  /** A TSO run without its end (EOT) yet: nothing consumed; the next doorbell brings the rest. */
  INCOMPLETE,
}

/** One gathered packet: its bytes at TxQueue.buf[TX_HEADROOM, +len) and what its first descriptor asked for. */
export class TxPacket {
  len = 0;
  /** Descriptors it took (more than one only for TSO). */
  descs = 0;
  opcode = 0;
  flags = 0;
  vlanTci = 0;
  /** csum_start, or hdr_len for TSO. */
  csumStart = 0;
  /** csum_offset, or mss for TSO. */
  csumOffset = 0;
}

export class TxQueue extends EthQueue {
  readonly cq: CompletionRing;
  readonly sgDescSize: number;
  readonly maxSg: number;
  readonly #desc = Buffer.alloc(ionic_txq_desc.SIZE);
  readonly #sg = Buffer.alloc(ionic_txq_sg_elem.SIZE * 16);
  readonly #comp = Buffer.alloc(ionic_txq_comp.SIZE);
  /** The packet being gathered (reused), TX_HEADROOM bytes in. */
  readonly buf = Buffer.alloc(TX_HEADROOM + MAX_TSO_FRAME);

  constructor(cfg: QueueConfig) {
    super(cfg, ionic_txq_desc.SIZE);
    this.cq = new CompletionRing(ionicAddr(cfg.cqBase), this.size, ionic_txq_comp.SIZE);
    // Version 1 with sg_desc_sz 256 (what we advertise): 16-element stride, up to 15 used.
    this.sgDescSize = cfg.version >= 1 ? 256 : 128;
    this.maxSg = cfg.version >= 1 ? 15 : 8;
  }

  /**
   * Gather the packet that starts at the ring's consumer index into `buf`:
   * one descriptor, or for TSO every descriptor from SOT through EOT. Nothing
   * is consumed here; complete() retires `pkt.descs` descriptors.
   */
  gather(mem: GuestMemory, pkt: TxPacket): TxResult {
    pkt.len = 0;
    pkt.descs = 0;
    let slot = this.ring.ci;
    // Bounded by the ring: a TSO run longer than the ring is refused below.
    for (let i = 0; i < this.size; i++) {
      if (i > 0 && slot === this.ring.pi) return TxResult.INCOMPLETE;
      if (mem.read(this.ring.address(slot), this.#desc) !== MemStatus.OK) return TxResult.DMA_ERROR;
      const lo = getField(this.#desc, 0, ionic_txq_desc.cmd_lo);
      const hi = getField(this.#desc, 0, ionic_txq_desc.cmd_hi);
      const flags = lo & 0xf;
      const opcode = (lo >>> IONIC_TXQ_DESC_OPCODE_SHIFT) & IONIC_TXQ_DESC_OPCODE_MASK;
      const tso = opcode === TxOpcode.TSO;
      if (i === 0) {
        pkt.opcode = opcode;
        pkt.flags = flags;
        pkt.vlanTci = getField(this.#desc, 0, ionic_txq_desc.vlan_tci);
        pkt.csumStart = getField(this.#desc, 0, ionic_txq_desc.csum_start);
        pkt.csumOffset = getField(this.#desc, 0, ionic_txq_desc.csum_offset);
        pkt.descs = 1;
        if (tso && !(flags & TxFlag.TSO_SOT)) return TxResult.BAD_DESC;
      } else if (!tso || flags & TxFlag.TSO_SOT) {
        // The run ended without EOT: drop what was gathered; this descriptor starts the next packet.
        return TxResult.BAD_DESC;
      } else {
        pkt.descs = i + 1;
      }
      if (opcode > TxOpcode.TSO) return TxResult.BAD_DESC;
      const r = this.#gatherOne(mem, slot, lo, hi, pkt, tso ? MAX_TSO_FRAME : MAX_FRAME);
      if (r !== TxResult.SENT) return r;
      if (!tso || flags & TxFlag.TSO_EOT) return TxResult.SENT;
      slot = (slot + 1) & this.ring.mask;
    }
    return TxResult.BAD_DESC;
  }

  /** Append one descriptor's buffer and SG elements to the packet. */
  #gatherOne(mem: GuestMemory, slot: number, lo: number, hi: number, pkt: TxPacket, cap: number): TxResult {
    const nsge = (lo >>> IONIC_TXQ_DESC_NSGE_SHIFT) & IONIC_TXQ_DESC_NSGE_MASK;
    // The address is cmd bits 12..63: 20 bits from the low word, 32 from the high.
    const addr = hi * ADDR_HI_SCALE + (lo >>> IONIC_TXQ_DESC_ADDR_SHIFT);
    const len = getField(this.#desc, 0, ionic_txq_desc.len);
    if (nsge > this.maxSg || pkt.len + len > cap) return TxResult.BAD_DESC;
    let total = pkt.len;
    const base = TX_HEADROOM;
    if (len > 0) {
      if (mem.read(addr, this.buf.subarray(base + total, base + total + len)) !== MemStatus.OK)
        return TxResult.DMA_ERROR;
      total += len;
    }
    if (nsge > 0) {
      const sgAt = ionicAddr(this.cfg.sgBase) + slot * this.sgDescSize;
      const list = this.#sg.subarray(0, nsge * ionic_txq_sg_elem.SIZE);
      if (mem.read(sgAt, list) !== MemStatus.OK) return TxResult.DMA_ERROR;
      for (let i = 0; i < nsge; i++) {
        const e = i * ionic_txq_sg_elem.SIZE;
        const a = getField(list, e, ionic_txq_sg_elem.addr);
        const l = getField(list, e, ionic_txq_sg_elem.len);
        if (ionicAddr(a) < 0 || total + l > cap) return TxResult.BAD_DESC;
        if (l > 0 && mem.read(ionicAddr(a), this.buf.subarray(base + total, base + total + l)) !== MemStatus.OK)
          return TxResult.DMA_ERROR;
        total += l;
      }
    }
    pkt.len = total;
    return TxResult.SENT;
  }

  /** Complete `descs` descriptors from the consumer index with one CQ entry (comp_index = the last), and advance. */
  complete(mem: GuestMemory, status: number, descs = 1): boolean {
    const c = this.#comp;
    c.fill(0);
    c[0] = status;
    setField(c, 0, ionic_txq_comp.comp_index, (this.ring.ci + descs - 1) & this.ring.mask);
    if (this.cq.post(mem, c) !== MemStatus.OK) return false;
    for (let i = 0; i < descs; i++) this.ring.advance();
    return true;
  }
}

// ---- RX --------------------------------------------------------------------------------------

export const enum RxResult {
  DELIVERED,
  /** No descriptor posted (or queue disabled). */
  NO_BUFFER,
  /** The buffers posted are too small: completed with an error status (counted as a drop by the driver). */
  TOO_BIG,
  DMA_ERROR,
}

const RX_SG_DESC_SIZE = IONIC_RX_MAX_SG_ELEMS * ionic_rxq_sg_elem.SIZE;

/** What an RX completion says about its frame besides the length (one reusable record per LIF). */
export class RxMeta {
  rssHash = 0;
  /** The complete ones'-complement sum (valid with RxCsumFlag.CALC). */
  csum = 0;
  csumFlags = 0;
  vlanTci = 0;
  /** RxPktType. */
  pktType = 0;
}

/** ionic_rxq_comp csum_flags bits we set. */
export const enum RxCsumFlag {
  VLAN = 0x40,
  CALC = 0x80,
}

export class RxQueue extends EthQueue {
  readonly cq: CompletionRing;
  readonly #desc = Buffer.alloc(ionic_rxq_desc.SIZE);
  readonly #sg = Buffer.alloc(RX_SG_DESC_SIZE);
  readonly #comp = Buffer.alloc(ionic_rxq_comp.SIZE);

  constructor(cfg: QueueConfig) {
    super(cfg, ionic_rxq_desc.SIZE);
    this.cq = new CompletionRing(ionicAddr(cfg.cqBase), this.size, ionic_rxq_comp.SIZE);
  }

  get hasBuffer(): boolean {
    return this.enabled && !this.ring.empty;
  }

  /** Copy `frame` into the next posted buffer(s) and post exactly one completion for that descriptor. */
  deliver(mem: GuestMemory, frame: Buffer, meta: RxMeta): RxResult {
    if (!this.hasBuffer) return RxResult.NO_BUFFER;
    const slot = this.ring.ci;
    if (mem.read(this.ring.address(slot), this.#desc) !== MemStatus.OK) return RxResult.DMA_ERROR;
    const opcode = getField(this.#desc, 0, ionic_rxq_desc.opcode);
    const len = getField(this.#desc, 0, ionic_rxq_desc.len);
    const addr = getField(this.#desc, 0, ionic_rxq_desc.addr);
    let status = 0;
    let used = 0;
    let sgUsed = 0;
    const first = Math.min(len, frame.length);
    if (ionicAddr(addr) < 0) status = 1;
    else if (first > 0 && mem.write(ionicAddr(addr), frame.subarray(0, first)) !== MemStatus.OK)
      return RxResult.DMA_ERROR;
    used = first;
    if (status === 0 && used < frame.length && opcode === RxOpcode.SG && this.cfg.sg) {
      const sgAt = ionicAddr(this.cfg.sgBase) + slot * RX_SG_DESC_SIZE;
      if (mem.read(sgAt, this.#sg) !== MemStatus.OK) return RxResult.DMA_ERROR;
      for (let i = 0; i < IONIC_RX_MAX_SG_ELEMS && used < frame.length; i++) {
        const e = i * ionic_rxq_sg_elem.SIZE;
        const a = getField(this.#sg, e, ionic_rxq_sg_elem.addr);
        const l = getField(this.#sg, e, ionic_rxq_sg_elem.len);
        if (a === 0 || l === 0) break;
        if (ionicAddr(a) < 0) {
          status = 1;
          break;
        }
        const n = Math.min(l, frame.length - used);
        if (mem.write(ionicAddr(a), frame.subarray(used, used + n)) !== MemStatus.OK) return RxResult.DMA_ERROR;
        used += n;
        sgUsed++;
      }
    }
    const fits = status === 0 && used === frame.length;
    // Every byte of the entry written here, field by field (once per frame: no fill, no generic setField).
    const c = this.#comp;
    c[ionic_rxq_comp.status.off] = fits ? 0 : 1;
    c[ionic_rxq_comp.num_sg_elems.off] = fits ? sgUsed : 0;
    c.writeUInt16LE(slot, ionic_rxq_comp.comp_index.off);
    c.writeUInt32LE(meta.rssHash >>> 0, ionic_rxq_comp.rss_hash.off);
    // Big-endian, as the sum sits in a packet: the driver reads it little-endian as csum_partial's value (ionic_rxq_comp.csum).
    c.writeUInt16BE(fits ? meta.csum : 0, ionic_rxq_comp.csum.off);
    c.writeUInt16LE(fits ? meta.vlanTci : 0, ionic_rxq_comp.vlan_tci.off);
    c.writeUInt16LE(fits ? frame.length : 0, ionic_rxq_comp.len.off);
    c[ionic_rxq_comp.csum_flags.off] = fits ? meta.csumFlags : 0;
    c[ionic_rxq_comp.pkt_type_color.off] = fits ? meta.pktType : 0;
    if (this.cq.post(mem, c) !== MemStatus.OK) return RxResult.DMA_ERROR;
    this.ring.advance();
    return fits ? RxResult.DELIVERED : RxResult.TOO_BIG;
  }
}
