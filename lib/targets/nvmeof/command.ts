// A command capsule decoded once into a plain record, the completion record
// the controller returns, and data movement through the keyed SGL.
//
// The controller never touches host memory: it calls a TargetDma the
// transport supplies (in the server, the data path resolving the host's rkey
// in the guest's MR table; in tests, a Buffer). Key 0 names no MR: it would
// reach all of guest memory, so the controller refuses it itself (with
// SGL_INVALID_DATA) before the callback ever sees it, whatever the callback
// would do. A null descriptor (length 0) moves nothing and may carry key 0.

import { getField, RawField, setField, U64_UNSAFE } from '../../../protocol/field';
import { nvme_cqe, nvme_keyed_sgl_desc, nvme_sgl_desc, nvme_sqe, NvmeStatus, SGL } from './layouts';

/** What a DMA callback returns: OK, or any other value for a failure (the transport's own code). */
export const DmaStatus = {
  OK: 0,
  /** The key names no usable region (key 0, unknown, invalidated). */
  BAD_KEY: 1,
  /** The range is outside the region, or the access is not allowed. */
  BOUNDS: 2,
  /** Anything else the transport could not do. */
  FAILED: 3,
} as const;

/**
 * Host memory, by remote key. Each call moves the whole range or fails; the
 * controller turns a failure into a Data Transfer Error completion.
 */
export interface TargetDma {
  /** Copy `len` bytes at (`key`, `addr`) of host memory into `out[0..len)`. */
  fromHost(key: number, addr: number, len: number, out: Buffer): Promise<number> | number;
  /** Copy `src` to (`key`, `addr`) of host memory. */
  toHost(key: number, addr: number, src: Buffer): Promise<number> | number;
}

/** The data descriptor of a command, decoded. */
type Sgl =
  | {
      readonly kind: 'keyed';
      readonly addr: number;
      readonly length: number;
      readonly key: number;
      readonly invalidate: boolean;
    }
  | { readonly kind: 'in-capsule'; readonly offset: number; readonly length: number }
  | { readonly kind: 'bad'; readonly status: number };

/** A submission queue entry, decoded once. Command specific dwords are read from `sqe` with the tables. */
export interface NvmeCommand {
  readonly opcode: number;
  readonly flags: number;
  readonly cid: number;
  readonly nsid: number;
  readonly sgl: Sgl;
  /** The 64-byte SQE (a view into the capsule). */
  readonly sqe: Buffer;
  /** In-capsule data following the SQE (empty when none). */
  readonly inCapsule: Buffer;
}

/** What a handler returns: status (with flags), command specific dwords, and the SQE offset of a bad field. */
export interface CmdResult {
  readonly status: number;
  readonly dw0: number;
  readonly dw1: number;
  /** Byte offset in the SQE of the field at fault (error log), or -1. */
  readonly loc: number;
}

export const SUCCESS: CmdResult = { status: NvmeStatus.SUCCESS, dw0: 0, dw1: 0, loc: -1 };

export function done(dw0 = 0, dw1 = 0): CmdResult {
  return dw0 === 0 && dw1 === 0 ? SUCCESS : { status: NvmeStatus.SUCCESS, dw0, dw1, loc: -1 };
}

/** A failure with DNR set; `at` is the field at fault (its offset goes to the error log). */
export function fail(status: number, at?: { readonly off: number }, dw0 = 0): CmdResult {
  return { status: status | NvmeStatus.DNR, dw0, dw1: 0, loc: at ? at.off : -1 };
}

/** A failure the host may retry (no DNR). */
export function failRetry(status: number): CmdResult {
  return { status, dw0: 0, dw1: 0, loc: -1 };
}

/** The completion of one command, as the transport sends it (encodeCqe writes the 16 bytes). */
export interface Cqe {
  readonly status: number;
  readonly sqhd: number;
  readonly sqid: number;
  readonly cid: number;
  readonly dw0: number;
  readonly dw1: number;
  /** Keyed SGL with the invalidate subtype: the key to invalidate with the response (send with invalidate), else null. */
  readonly invalidateKey: number | null;
}

/** Write a CQE at `out[at..at+16)`. */
export function encodeCqe(c: Cqe, out: Buffer, at = 0): void {
  setField(out, at, nvme_cqe.result, c.dw0 >>> 0);
  setField(out, at, nvme_cqe.result_hi, c.dw1 >>> 0);
  setField(out, at, nvme_cqe.sq_head, c.sqhd);
  setField(out, at, nvme_cqe.sq_id, c.sqid);
  setField(out, at, nvme_cqe.command_id, c.cid);
  setField(out, at, nvme_cqe.status, (c.status << 1) & 0xffff);
}

/** Read a CQE (tests and traces). */
export function decodeCqe(buf: Buffer, at = 0): Cqe {
  return {
    dw0: getField(buf, at, nvme_cqe.result),
    dw1: getField(buf, at, nvme_cqe.result_hi),
    sqhd: getField(buf, at, nvme_cqe.sq_head),
    sqid: getField(buf, at, nvme_cqe.sq_id),
    cid: getField(buf, at, nvme_cqe.command_id),
    status: getField(buf, at, nvme_cqe.status) >>> 1,
    invalidateKey: null,
  };
}

const DPTR = nvme_sqe.dptr.off;
/** Where the key sits in the SQE (for the error log's parameter location). */
const SGL_KEY_FIELD = { off: DPTR + nvme_keyed_sgl_desc.key.off } as const;
const SGL_ADDR_FIELD = { off: DPTR } as const;
export const SGL_TYPE_FIELD = { off: DPTR + nvme_keyed_sgl_desc.type.off } as const;

function decodeSgl(sqe: Buffer): Sgl {
  const type = getField(sqe, DPTR, nvme_keyed_sgl_desc.type);
  const kind = type >>> SGL.TYPE_SHIFT;
  const sub = type & SGL.SUBTYPE_MASK;
  if (kind === SGL.TYPE_KEYED_DATA_BLOCK) {
    if (sub !== SGL.SUBTYPE_ADDRESS && sub !== SGL.SUBTYPE_INVALIDATE)
      return { kind: 'bad', status: NvmeStatus.INVALID_FIELD };
    const length =
      getField(sqe, DPTR, nvme_keyed_sgl_desc.length_lo) + getField(sqe, DPTR, nvme_keyed_sgl_desc.length_hi) * 0x10000;
    const addr = getField(sqe, DPTR, nvme_keyed_sgl_desc.addr);
    const key = getField(sqe, DPTR, nvme_keyed_sgl_desc.key);
    return { kind: 'keyed', addr, length, key, invalidate: sub === SGL.SUBTYPE_INVALIDATE };
  }
  if (kind === SGL.TYPE_DATA_BLOCK) {
    if (sub !== SGL.SUBTYPE_OFFSET) return { kind: 'bad', status: NvmeStatus.INVALID_FIELD };
    const offset = getField(sqe, DPTR, nvme_sgl_desc.addr);
    return { kind: 'in-capsule', offset, length: getField(sqe, DPTR, nvme_sgl_desc.length) };
  }
  return { kind: 'bad', status: NvmeStatus.SGL_INVALID_TYPE };
}

/** Decode a capsule (64-byte SQE, then any in-capsule data); null when it is shorter than an SQE. */
export function decodeCommand(capsule: Buffer): NvmeCommand | null {
  if (capsule.length < nvme_sqe.SIZE) return null;
  const sqe = capsule.subarray(0, nvme_sqe.SIZE);
  return {
    opcode: getField(sqe, 0, nvme_sqe.opcode),
    flags: getField(sqe, 0, nvme_sqe.flags),
    cid: getField(sqe, 0, nvme_sqe.command_id),
    nsid: getField(sqe, 0, nvme_sqe.nsid),
    sgl: decodeSgl(sqe),
    sqe,
    inCapsule: capsule.subarray(nvme_sqe.SIZE),
  };
}

/** The command id of a capsule too short to decode (0 when even that is missing). */
export function capsuleCid(capsule: Buffer): number {
  return capsule.length >= nvme_sqe.command_id.off + nvme_sqe.command_id.size
    ? getField(capsule, 0, nvme_sqe.command_id)
    : 0;
}

/** Read a field of the SQE through a table. */
export function sqeField(cmd: NvmeCommand, f: Parameters<typeof getField>[2]): number {
  return getField(cmd.sqe, 0, f);
}

/** A view of a raw field of a buffer. */
function rawView(buf: Buffer, base: number, f: RawField): Buffer {
  return buf.subarray(base + f.off, base + f.off + f.size);
}

/**
 * Check the descriptor before any work: well formed, and naming exactly
 * `expected` bytes (as the Linux target does), or with `atLeast` at least that
 * many (of which the command uses the first `expected`). Returns null when usable.
 */
export function checkSgl(
  cmd: NvmeCommand,
  expected: number,
  hostToController: boolean,
  atLeast = false,
): CmdResult | null {
  const sgl = cmd.sgl;
  if (sgl.kind === 'bad') return fail(sgl.status, SGL_TYPE_FIELD);
  if (atLeast ? sgl.length < expected : sgl.length !== expected)
    return fail(NvmeStatus.SGL_INVALID_DATA, SGL_ADDR_FIELD);
  if (expected === 0) return null;
  if (sgl.kind === 'in-capsule') {
    if (!hostToController) return fail(NvmeStatus.INVALID_FIELD, SGL_TYPE_FIELD);
    if (sgl.offset === U64_UNSAFE || sgl.offset + sgl.length > cmd.inCapsule.length)
      return fail(NvmeStatus.SGL_INVALID_OFFSET, SGL_ADDR_FIELD);
    return null;
  }
  if (sgl.key === 0) return fail(NvmeStatus.SGL_INVALID_DATA, SGL_KEY_FIELD);
  if (sgl.addr === U64_UNSAFE || sgl.addr + sgl.length > Number.MAX_SAFE_INTEGER)
    return fail(NvmeStatus.SGL_INVALID_DATA, SGL_ADDR_FIELD);
  return null;
}

/** Fetch the command's data from the host into `out` (checkSgl passed with out.length). */
export async function dataFromHost(cmd: NvmeCommand, dma: TargetDma, out: Buffer): Promise<CmdResult | null> {
  const sgl = cmd.sgl;
  if (out.length === 0) return null;
  if (sgl.kind === 'in-capsule') {
    cmd.inCapsule.copy(out, 0, sgl.offset, sgl.offset + out.length);
    return null;
  }
  if (sgl.kind !== 'keyed' || sgl.key === 0) return fail(NvmeStatus.SGL_INVALID_DATA, SGL_KEY_FIELD);
  let st: number;
  try {
    st = await dma.fromHost(sgl.key, sgl.addr, out.length, out);
  } catch {
    st = DmaStatus.FAILED;
  }
  return st === DmaStatus.OK ? null : fail(NvmeStatus.DATA_XFER_ERROR, SGL_KEY_FIELD);
}

/** Send `src` to the host through the command's descriptor (checkSgl passed with src.length). */
export async function dataToHost(cmd: NvmeCommand, dma: TargetDma, src: Buffer): Promise<CmdResult | null> {
  const sgl = cmd.sgl;
  if (src.length === 0) return null;
  if (sgl.kind !== 'keyed' || sgl.key === 0) return fail(NvmeStatus.SGL_INVALID_DATA, SGL_KEY_FIELD);
  let st: number;
  try {
    st = await dma.toHost(sgl.key, sgl.addr, src);
  } catch {
    st = DmaStatus.FAILED;
  }
  return st === DmaStatus.OK ? null : fail(NvmeStatus.DATA_XFER_ERROR, SGL_KEY_FIELD);
}

/** Copy an ASCII string into a raw field, padded with `pad` (space for identify strings, NUL for NQNs). */
export function setText(buf: Buffer, base: number, f: RawField, text: string, pad: 0x20 | 0x00): void {
  const at = base + f.off;
  buf.fill(pad, at, at + f.size);
  buf.write(text, at, f.size, 'latin1');
}

/** A NUL-terminated ASCII string from a raw field; null when it has no NUL inside the field. */
export function getText(buf: Buffer, base: number, f: RawField): string | null {
  const view = rawView(buf, base, f);
  const end = view.indexOf(0);
  if (end < 0) return null;
  return view.toString('latin1', 0, end);
}
