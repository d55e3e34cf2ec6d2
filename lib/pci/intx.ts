// Legacy INTx: a level-triggered line carried over an eventfd.
//
// QEMU treats the eventfd as "line went high" and lowers the line itself at the
// guest's EOI, then sends SET_IRQS UNMASK (the resample path;
// docs/vfio-user-protocol.md 3.6). So we signal once per rising edge, and again on each
// unmask while our level is still high. The line is gated off by COMMAND.
// INTX_DISABLE and while MSI-X is enabled (a function using MSI-X must not
// use INTx); STATUS.INTERRUPT shows the level whether gated or not.

import { IrqIndex } from '../vfio-user/device';
import type { DeviceContext } from '../vfio-user/device';

/** Told when the level changes, to mirror it in STATUS.INTERRUPT. */
type IntxLevelListener = (asserted: boolean) => void;

export class Intx {
  /** False when the function declared no INTx: every call is then a no-op. */
  readonly present: boolean;
  readonly #onLevel: IntxLevelListener;
  #asserted = false;
  #gated = false;
  #ctx: DeviceContext | undefined;

  constructor(present: boolean, onLevel: IntxLevelListener) {
    this.present = present;
    this.#onLevel = onLevel;
  }

  get asserted(): boolean {
    return this.#asserted;
  }

  /** True when the line may reach the client (not disabled, MSI-X off). */
  get open(): boolean {
    return this.present && !this.#gated;
  }

  attach(ctx: DeviceContext): void {
    this.#ctx = ctx;
  }

  detach(): void {
    this.#ctx = undefined;
  }

  /** Raise the level. Returns true when an interrupt was signalled now. */
  assert(): boolean {
    if (!this.present || this.#asserted) return false;
    this.#asserted = true;
    this.#onLevel(true);
    return this.#signalIfOpen();
  }

  /** Lower the level (the device's cause was cleared). */
  deassert(): void {
    if (!this.#asserted) return;
    this.#asserted = false;
    this.#onLevel(false);
  }

  /** COMMAND.INTX_DISABLE or MSI-X enable changed; opening the gate on a high level is an edge. */
  setGated(gated: boolean): void {
    const wasOpen = !this.#gated;
    this.#gated = gated;
    if (!wasOpen && !gated && this.#asserted) this.#signalIfOpen();
  }

  /** The client unmasked the line (EOI) or wired an eventfd: signal again if still high. */
  resample(): boolean {
    return this.#asserted ? this.#signalIfOpen() : false;
  }

  /** Device reset: the level drops with the device's state. */
  reset(): void {
    this.deassert();
  }

  #signalIfOpen(): boolean {
    if (!this.open) return false;
    return this.#ctx?.signalIrq(IrqIndex.INTX, 0) ?? false;
  }
}
