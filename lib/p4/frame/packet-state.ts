// One frame's state while it goes through a compiled program: field values
// in the slots the program's layout (../program/layout.ts) gives them,
// header validity and offsets, the parser's and the program's outcome.

import type { FieldInfo, Layout } from '../program/layout';
import { resetFunction } from './reset';

export interface Digest {
  list: number;
  values: bigint[];
}

/** The digests of a frame that made none (no allocation per frame). */
export const NO_DIGESTS: Digest[] = Object.freeze([] as Digest[]) as Digest[];

/** One frame's state while it goes through the program (reused across frames). */
export class PacketState {
  readonly num: Float64Array;
  readonly big: bigint[];
  readonly valid: Uint8Array;
  readonly stackNext: Uint16Array;
  /** Where each header was extracted from in this frame (-1: not extracted). */
  readonly hdrOffset: Int32Array;
  frame: Buffer = Buffer.alloc(0);
  /** First byte not yet consumed by the parser (the payload starts here after parsing). */
  offset = 0;
  dropped = false;
  exited = false;
  parserError = 0; // 0 none, see ParserError
  checksumError = false;
  /** generate_digest calls of this frame; NO_DIGESTS (shared, frozen) until the first one. */
  digests: Digest[] = NO_DIGESTS;
  readonly #initialValid: Uint8Array;

  constructor(readonly layout: Layout) {
    this.num = new Float64Array(layout.numSlots);
    this.big = new Array<bigint>(layout.bigSlots).fill(0n);
    this.valid = new Uint8Array(layout.headers.length);
    this.stackNext = new Uint16Array(layout.stacks.length);
    this.hdrOffset = new Int32Array(layout.headers.length).fill(-1);
    this.#initialValid = layout.initialValid;
    this.#unrolled = resetFunction(
      layout.numSlots,
      layout.bigSlots,
      layout.initialValid,
      layout.stacks.length,
      NO_DIGESTS,
    );
  }

  /** reset() written out for this layout (./reset.ts), when it is not too large. */
  readonly #unrolled: ((st: PacketState, frame: Buffer) => void) | undefined;

  /** Clears everything for a new frame; metadata headers are valid, others not. */
  reset(frame: Buffer): void {
    const u = this.#unrolled;
    if (u !== undefined) {
      u(this, frame);
      return;
    }
    // Loops, not fill(): a few dozen slots, per frame.
    const num = this.num;
    for (let i = 0; i < num.length; i++) num[i] = 0;
    const big = this.big;
    for (let i = 0; i < big.length; i++) big[i] = 0n;
    const valid = this.valid;
    const iv = this.#initialValid;
    const ho = this.hdrOffset;
    for (let i = 0; i < valid.length; i++) {
      valid[i] = iv[i]!;
      ho[i] = -1;
    }
    const sn = this.stackNext;
    for (let i = 0; i < sn.length; i++) sn[i] = 0;
    this.frame = frame;
    this.offset = 0;
    this.dropped = false;
    this.exited = false;
    this.parserError = 0;
    this.checksumError = false;
    this.digests = NO_DIGESTS;
  }

  /** Records a digest (allocates this frame's list on the first). */
  addDigest(d: Digest): void {
    if (this.digests === NO_DIGESTS) this.digests = [];
    this.digests.push(d);
  }

  get(f: FieldInfo): bigint {
    return f.wide ? this.big[f.slot]! : BigInt(this.num[f.slot]!);
  }

  set(f: FieldInfo, v: bigint): void {
    if (f.wide) this.big[f.slot] = v & f.mask;
    else this.num[f.slot] = Number(v & f.mask);
  }
}

/** Parser error codes (bmv2's core errors that we can raise). */
export const enum ParserError {
  None = 0,
  PacketTooShort = 1,
  NoMatch = 2,
  StackOutOfBounds = 3,
  VerifyFailed = 4,
}
