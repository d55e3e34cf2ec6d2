// PacketState.reset written out for one layout (./packet-state.ts calls it;
// this file knows the state only by the fields it clears, so that the two
// do not import each other).

import { checkInt } from './integer-source';

/** What a layout's reset writes (PacketState's fields). */
interface ResetTarget {
  readonly num: Float64Array;
  readonly big: bigint[];
  readonly valid: Uint8Array;
  readonly hdrOffset: Int32Array;
  readonly stackNext: Uint16Array;
  frame: Buffer;
  offset: number;
  dropped: boolean;
  exited: boolean;
  parserError: number;
  checksumError: boolean;
  digests: unknown;
}

/** Above this many slots a layout's reset loops instead of writing each slot out. */
const MAX_UNROLLED_SLOTS = 512;

/**
 * PacketState.reset for one layout, every slot written out (measured here:
 * about a third of the time of the loops for simple_router's 24 number
 * slots). The source holds only integers (slot counts, initial validity bits).
 */
export function resetFunction(
  numSlots: number,
  bigSlots: number,
  initialValid: Uint8Array,
  stacks: number,
  noDigests: unknown,
): ((st: ResetTarget, frame: Buffer) => void) | undefined {
  checkInt(numSlots, 'numSlots');
  checkInt(bigSlots, 'bigSlots');
  checkInt(stacks, 'stacks');
  if (numSlots + bigSlots + 2 * initialValid.length + stacks > MAX_UNROLLED_SLOTS) return undefined;
  let src =
    'return function reset(st, frame) {\nconst num = st.num; const big = st.big; const valid = st.valid; const ho = st.hdrOffset; const sn = st.stackNext;\n';
  for (let i = 0; i < numSlots; i++) src += `num[${i}] = 0;\n`;
  for (let i = 0; i < bigSlots; i++) src += `big[${i}] = 0n;\n`;
  for (let i = 0; i < initialValid.length; i++)
    src += `valid[${i}] = ${initialValid[i]! === 1 ? 1 : 0}; ho[${i}] = -1;\n`;
  for (let i = 0; i < stacks; i++) src += `sn[${i}] = 0;\n`;
  src +=
    'st.frame = frame; st.offset = 0; st.dropped = false; st.exited = false; st.parserError = 0; st.checksumError = false; st.digests = NO_DIGESTS;\n};';
  return new Function('NO_DIGESTS', src)(noDigests) as (st: ResetTarget, frame: Buffer) => void;
}
