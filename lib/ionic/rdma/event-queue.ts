// An RDMA event queue (RDMA_CREATE_EQ): a physically contiguous ring of
// 4-byte EQEs the device writes, with an MSI-X vector. The host never tells
// the device how far it has read (EQs are never rung), so the device just
// writes round the ring with the color bit telling old entries from new:
// color 1 on the first pass over the zero-filled ring, flipped at each wrap.
//
// Each EQE is followed by an interrupt assertion on the EQ's vector; the
// interrupt controller fires it, or latches it while the driver has the
// vector masked (mask-on-assert is set by ionic_rdma for every EQ).

import type { GuestMemory } from '../../vfio-user/guest-memory';
import { MemStatus } from '../../vfio-user/guest-memory';
import type { InterruptController } from '../interrupts';
import { EqeType } from './constants';
import { ionic_v1_eqe } from './layouts';
import { setField } from '../../../protocol/field';

export class EventQueue {
  /** Next slot the device writes. */
  prod = 0;
  /** Color of the current pass. */
  color = 1;
  /** EQEs written, for stats and tests. */
  posted = 0;
  /** A write into the ring failed: the EQ is dead (hardware would raise a fatal error). */
  failed = false;
  readonly size: number;
  readonly #eqe = Buffer.alloc(ionic_v1_eqe.SIZE);

  constructor(
    readonly id: number,
    readonly vector: number,
    readonly base: number,
    readonly depthLog2: number,
  ) {
    this.size = 2 ** depthLog2;
  }

  /** Write an EQE {type, code, qid} and assert the vector. False when guest memory refused the write. */
  post(mem: GuestMemory, interrupts: InterruptController, type: EqeType, code: number, qid: number): boolean {
    if (this.failed) return false;
    const evt = (((qid & 0xffffff) << 8) | ((code & 0xf) << 4) | ((type & 0x7) << 1) | this.color) >>> 0;
    setField(this.#eqe, 0, ionic_v1_eqe.evt, evt);
    if (mem.write(this.base + this.prod * ionic_v1_eqe.SIZE, this.#eqe) !== MemStatus.OK) {
      this.failed = true;
      return false;
    }
    this.prod++;
    if (this.prod === this.size) {
      this.prod = 0;
      this.color ^= 1;
    }
    this.posted++;
    interrupts.assert(this.vector);
    return true;
  }
}
