// The per-vector interrupt controller in BAR0 (struct ionic_intr at 0x2000 +
// 32 * vector): mask, credits, mask-on-assert, coalescing registers.
//
// A queue "asserts" its vector each time it posts completions. The vector
// fires (MSI-X through the PCI function) when unmasked, then masks itself if
// mask_assert is set (the driver sets it on every vector, so its NAPI poll
// runs without a second interrupt). An assertion on a masked vector is
// latched and fires when the driver unmasks, by writing mask = 0 or by
// returning credits with the UNMASK bit. Credits count completions posted and
// not yet returned; the driver reads them back in "intr clean". Coalescing
// values are stored for read-back; we deliver at the end of the device's
// pass (hold/release around a doorbell's run), never on a timer.

import { IONIC_INTR_CRED_COUNT_MASK, IONIC_INTR_CRED_UNMASK } from './constants';
import { ionic_intr } from './layouts';

interface InterruptSink {
  /** Deliver MSI-X vector `v` (the PCI layer latches it if MSI-X itself is masked). */
  fire(vector: number): void;
}

export class InterruptController {
  readonly vectors: number;
  readonly #coalInit: Uint32Array;
  readonly #mask: Uint8Array;
  readonly #maskAssert: Uint8Array;
  readonly #credits: Int32Array;
  readonly #pending: Uint8Array;
  readonly #sink: InterruptSink;
  /** Interrupts delivered, for stats. */
  fired = 0;
  /** hold() depth: while above 0, vectors that fire are only noted (#due), and go out on the last release(). */
  #holds = 0;
  readonly #due: number[] = [];

  constructor(vectors: number, sink: InterruptSink) {
    this.vectors = vectors;
    this.#sink = sink;
    this.#coalInit = new Uint32Array(vectors);
    this.#mask = new Uint8Array(vectors);
    this.#maskAssert = new Uint8Array(vectors);
    this.#credits = new Int32Array(vectors);
    this.#pending = new Uint8Array(vectors);
    this.reset();
  }

  /** Power-on state: every vector masked, no credits, nothing latched. */
  reset(): void {
    this.#coalInit.fill(0);
    this.#mask.fill(1);
    this.#maskAssert.fill(0);
    this.#credits.fill(0);
    this.#pending.fill(0);
    this.#due.length = 0;
  }

  /**
   * Hold interrupts through one pass of the device (a doorbell's run): every
   * vector that fires meanwhile is delivered once, at the last release(),
   * with all the pass's completions in place; as a NIC's coalescing timer
   * would, without a timer. Calls nest.
   */
  hold(): void {
    this.#holds++;
  }

  release(): void {
    if (this.#holds === 0 || --this.#holds > 0) return;
    // A vector is noted once per hold (it masks itself or stays unmasked until this delivers it).
    for (let i = 0; i < this.#due.length; i++) this.#sink.fire(this.#due[i]!);
    this.#due.length = 0;
  }

  /** A queue on `vector` posted `n` completions (events). */
  assert(vector: number, n = 1): void {
    if (vector < 0 || vector >= this.vectors) return;
    this.#credits[vector] = Math.min(this.#credits[vector]! + n, IONIC_INTR_CRED_COUNT_MASK);
    if (this.#mask[vector]) {
      this.#pending[vector] = 1;
      return;
    }
    this.#fire(vector);
  }

  isMasked(vector: number): boolean {
    return this.#mask[vector] === 1;
  }

  isPending(vector: number): boolean {
    return this.#pending[vector] === 1;
  }

  credits(vector: number): number {
    return this.#credits[vector] ?? 0;
  }

  /** Read a 32-bit register of the block at `offset` (relative to 0x2000). */
  read32(offset: number): number {
    const v = Math.floor(offset / ionic_intr.SIZE);
    if (v >= this.vectors) return 0;
    switch (offset % ionic_intr.SIZE) {
      case ionic_intr.coal_init.off:
        return this.#coalInit[v]!;
      case ionic_intr.mask.off:
        return this.#mask[v]!;
      // Bits 0..15 hold the signed outstanding count.
      case ionic_intr.credits.off:
        return this.#credits[v]! & 0xffff;
      case ionic_intr.mask_assert.off:
        return this.#maskAssert[v]!;
      default:
        return 0;
    }
  }

  /** Write a 32-bit register. Unknown offsets are read-only or reserved: dropped. */
  write32(offset: number, value: number): void {
    const v = Math.floor(offset / ionic_intr.SIZE);
    if (v >= this.vectors) return;
    switch (offset % ionic_intr.SIZE) {
      case ionic_intr.coal_init.off:
        this.#coalInit[v] = value >>> 0;
        return;
      case ionic_intr.mask.off:
        this.#mask[v] = value & 1;
        if (!this.#mask[v]) this.#replay(v);
        return;
      case ionic_intr.credits.off: {
        const returned = value & IONIC_INTR_CRED_COUNT_MASK;
        this.#credits[v] = Math.max(0, this.#credits[v]! - returned);
        if (value & IONIC_INTR_CRED_UNMASK) {
          this.#mask[v] = 0;
          this.#replay(v);
        }
        return;
      }
      case ionic_intr.mask_assert.off:
        this.#maskAssert[v] = value & 1;
        return;
      default:
        return;
    }
  }

  /**
   * On unmask: fire what was latched while masked, but only if completions are
   * still unreturned; when the driver returned every credit it has seen them
   * all, and a replay would only be a spurious interrupt.
   */
  #replay(v: number): void {
    if (!this.#pending[v]) return;
    if (this.#credits[v]! > 0) this.#fire(v);
    else this.#pending[v] = 0;
  }

  #fire(v: number): void {
    this.#pending[v] = 0;
    this.#mask[v] = this.#maskAssert[v]!;
    this.fired++;
    if (this.#holds === 0) this.#sink.fire(v);
    else if (!this.#due.includes(v)) this.#due.push(v);
  }
}
