// Small helpers shared by the protocol specs. Nothing here builds expected bytes:
// that is spec/support/bytes.ts's job (or hex literals from docs/vfio-user-protocol.md).
import { decodeMessage } from '../../protocol';
import type { Message, ProtocolError } from '../../protocol';

/** Command numbers as written in docs/vfio-user-protocol.md section 2 (not taken from the code under test). */
export const CMD = {
  VERSION: 1,
  DMA_MAP: 2,
  DMA_UNMAP: 3,
  DEVICE_GET_INFO: 4,
  DEVICE_GET_REGION_INFO: 5,
  DEVICE_GET_REGION_IO_FDS: 6,
  DEVICE_GET_IRQ_INFO: 7,
  DEVICE_SET_IRQS: 8,
  REGION_READ: 9,
  REGION_WRITE: 10,
  DMA_READ: 11,
  DMA_WRITE: 12,
  DEVICE_RESET: 13,
  DIRTY_PAGES: 14,
  REGION_WRITE_MULTI: 15,
  DEVICE_FEATURE: 16,
  MIG_DATA_READ: 17,
  MIG_DATA_WRITE: 18,
} as const;

/** Header flag values from docs/vfio-user-protocol.md 1.2. */
export const FLAG_COMMAND = 0x0;
export const FLAG_REPLY = 0x1;
export const FLAG_NO_REPLY = 0x10;
export const FLAG_ERROR_REPLY = 0x21;

export const EINVAL = 22;

/** 2^53 - 1 and 2^53, the edges of what a JS number holds exactly. */
export const SAFE_MAX = Number.MAX_SAFE_INTEGER;
export const SAFE_MAX_PLUS_1 = 2n ** 53n;
export const U64_MAX = 0xffffffffffffffffn;

/** Decode and insist it worked (the failure message names the rule). */
export function decodeOk(bytes: Buffer): Message {
  const d = decodeMessage(bytes);
  if (!d.ok) throw new Error(`expected a successful decode, got ${d.error.code}: ${d.error.detail}`);
  return d.value;
}

/** Decode and insist it failed. */
export function decodeErr(bytes: Buffer): ProtocolError {
  const d = decodeMessage(bytes);
  if (d.ok) throw new Error(`expected a decode error, got a ${d.value.body.kind} body`);
  return d.error;
}
