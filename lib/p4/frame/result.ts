// What one frame's run through a program gives, and what the engine counts
// over frames (the engine's closures and the generated function both fill them).

import type { Digest, ParserError } from './packet-state';

/** fault: the frame threw inside the program (caught at the frame boundary, counted in stats.faults). */
export type DropReason = 'program' | 'parser-budget' | 'too-long' | 'fault';

export interface P4Result {
  /** The frame to send (undefined when dropped); a fresh Buffer, never the input. */
  frame: Buffer | undefined;
  dropped: boolean;
  reason: DropReason | undefined;
  egressPort: number;
  /** Multicast group the program asked for (intrinsic_metadata.mgid or standard_metadata.mcast_grp), 0 if none. */
  multicastGroup: number;
  parserError: ParserError;
  checksumError: boolean;
  /** generate_digest calls of this frame: learn list id and the values of its fields. */
  digests: Digest[];
}

export interface EngineStats {
  frames: number;
  dropped: number;
  parserErrors: number;
  budgetDrops: number;
  /** Frames that threw inside the program: dropped at the frame boundary instead of throwing into the device. */
  faults: number;
}
