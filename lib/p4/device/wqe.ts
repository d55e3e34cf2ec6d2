// The P4 engine on RDMA send WQEs (issue 15; docs/p4.md "On RDMA send
// WQEs"): the data path's send filter (lib/rdma/hooks.ts SendFilter).
//
// A program is written for WQEs when it declares a header instance named
// `ernic_wqe` of exactly the layout below (a header of that name with another
// layout refuses the program at load). For every send WQE that is not a local
// operation, after the WQE's own memory checks, the data path hands the WQE
// here; it is described in the 44-byte `ernic_wqe` header (network order)
// and run through the program entering on port P4_RDMA_PORT (3; guest frames
// enter on 1, host-link frames on 2, so a program for both paths selects on
// standard_metadata.ingress_port in its parser). Then:
//
//   the program dropped it (drop, mark_to_drop, egress_spec 511, parser budget)
//       the operation is lost as on a wire: an RC WQE completes with
//       RETRY_EXCEEDED (the QP goes to ERR), a UC or datagram WQE completes OK
//   ernic_wqe.op = 0 (as it came in), or the header is gone from the output
//       the WQE runs as posted
//   ernic_wqe.op = 1 (ADD) or 2 (CONVERT), on an RDMA WRITE
//       the extern runs instead of the copy, over the WQE's local source
//       (its SGL or inline bytes: n = length / size(src_fmt) elements) and
//       the destination range at the WQE's remote address by its rkey,
//       resolved on this device with an RDMA WRITE's responder checks:
//         ADD      dst[i] = dst[i] + src[i], both fp8 (E4M3 or E5M2, may
//                  differ), the sum rounded once into dst_fmt
//         CONVERT  dst[i] = src[i] converted from src_fmt to dst_fmt (any
//                  two of E4M3, E5M2, FP16, BF16, FP32), n * size(dst_fmt) bytes
//       op_flags bit 0: saturate (OFP8 saturation mode; ./fp8.ts)
//
// Refusals (the WQE completes with the status, an RC QP goes to ERR):
//   LOCAL_QP_OPER  an extern on a verb other than RDMA WRITE, an unknown op,
//                  an unknown format, ADD with a format that is not fp8
//   LOCAL_LEN      length not a multiple of the source element size, or
//                  above P4_EXTERN_MAX_BYTES (P4_EXTERN_MAX_FP32_BYTES from
//                  FP32; the extern runs on the event loop: bounded per WQE)
//   LOCAL_PROT     an SGE with key 0 (the driver's DMA key: any guest process
//                  could name any guest memory with it)
//   REMOTE_ACC     rkey 0, a destination on another node (the mesh: an rkey
//                  belonging to another node), or the responder's MR checks
//   RETRY_EXCEEDED no ready destination QP (as an RDMA WRITE)
// Every region is named by the WQE; the program only picks the operation.

import { SEND_FILTER_DROP, SEND_FILTER_PASS } from '../../rdma/hooks';
import type { SendFilter, SendFilterInput } from '../../rdma/hooks';
import { IonicStatus } from '../../rdma/datapath/cqe';
import { copySlices } from '../../rdma/datapath/copy';
import { SendVerb } from '../../rdma/datapath/wqe-layout';
import { OutputMode } from '../engine/engine';
import type { P4Engine } from '../engine/engine';
import { addTable, convertTable, formatBytes, isFp8, NumFormat, readElement, writeElement } from './fp8';

/** The ingress port WQEs enter the program on. */
const P4_RDMA_PORT = 3;

/** The header instance a WQE program declares. */
const ERNIC_WQE_HEADER = 'ernic_wqe';

/** Field names and widths of `ernic_wqe_t`, in order (44 bytes). */
const ERNIC_WQE_FIELDS: readonly (readonly [string, number])[] = [
  ['verb', 8],
  ['qp_type', 8],
  ['flags', 8],
  ['sge_count', 8],
  ['qpn', 32],
  ['dest_qpn', 32],
  ['pd', 32],
  ['length', 32],
  ['lkey', 32],
  ['rkey', 32],
  ['remote_va', 64],
  ['imm', 32],
  ['op', 8],
  ['src_fmt', 8],
  ['dst_fmt', 8],
  ['op_flags', 8],
];

/** Byte offsets of the `ernic_wqe` header (big-endian fields). */
const ernic_wqe = {
  verb: 0,
  qp_type: 1,
  flags: 2,
  sge_count: 3,
  qpn: 4,
  dest_qpn: 8,
  pd: 12,
  length: 16,
  lkey: 20,
  rkey: 24,
  remote_va: 28,
  imm: 36,
  op: 40,
  src_fmt: 41,
  dst_fmt: 42,
  op_flags: 43,
  SIZE: 44,
} as const;

/** ernic_wqe.flags bits. */
const enum WqeFlag {
  SIGNALED = 1,
  SOLICITED = 2,
  FENCE = 4,
  INLINE = 8,
}

/** ernic_wqe.op values the program writes. */
const enum WqeOp {
  RUN = 0,
  ADD = 1,
  CONVERT = 2,
}

/** ernic_wqe.op_flags bits. */
const WQE_OP_SATURATE = 1;

/**
 * Most source bytes one extern takes (it runs on the event loop): 256 KiB
 * from 8- and 16-bit formats (table lookups, about 1 ms), 64 KiB from FP32
 * (each element rounded by encodeValue, a few ms).
 */
export const P4_EXTERN_MAX_BYTES = 256 * 1024;
export const P4_EXTERN_MAX_FP32_BYTES = 64 * 1024;

/** Elements per chunk of an extern (copied through two scratch buffers of 4 bytes an element). */
const CHUNK = 1024;

/**
 * Whether the program is written for WQEs: true with a well-formed
 * `ernic_wqe` header, false without one, an error line for a header of that
 * name with another layout.
 */
export function wqeProgram(engine: P4Engine): boolean | string {
  const h = engine.layout.headerByName.get(ERNIC_WQE_HEADER);
  if (!h) return false;
  if (h.metadata) return `header ${ERNIC_WQE_HEADER} must not be metadata`;
  const got = h.fields.map((f) => `${f.name}:${f.width}`).join(' ');
  const want = ERNIC_WQE_FIELDS.map(([n, w]) => `${n}:${w}`).join(' ');
  if (got !== want) return `header ${ERNIC_WQE_HEADER} must have the fields ${want} (has ${got})`;
  return true;
}

interface P4WqeStats {
  /** WQEs run through the program. */
  wqes: number;
  passed: number;
  dropped: number;
  adds: number;
  converts: number;
  /** Externs refused (the WQE completed with an error). */
  refused: number;
  /** Elements written by externs. */
  elements: number;
}

const RDMA_VERBS = new Set<number>([
  SendVerb.RDMA_READ,
  SendVerb.RDMA_WRITE,
  SendVerb.RDMA_WRITE_IMM,
  SendVerb.ATOMIC_CS,
  SendVerb.ATOMIC_FA,
]);
const IMM_VERBS = new Set<number>([SendVerb.SEND_IMM, SendVerb.SEND_INV, SendVerb.RDMA_WRITE_IMM]);
const TWO_32 = 0x100000000;

/** The P4 engine as the data path's send filter; `engine()` is read per WQE (the program may be replaced). */
export class P4WqeFilter implements SendFilter {
  readonly stats: P4WqeStats = { wqes: 0, passed: 0, dropped: 0, adds: 0, converts: 0, refused: 0, elements: 0 };
  readonly #desc = Buffer.alloc(ernic_wqe.SIZE);
  readonly #a = Buffer.alloc(CHUNK * 4);
  readonly #b = Buffer.alloc(CHUNK * 4);
  readonly #aList: Buffer[] = [this.#a];
  readonly #bList: Buffer[] = [this.#b];

  constructor(private readonly engine: () => P4Engine | null) {}

  filter(x: SendFilterInput): number {
    const engine = this.engine();
    if (!engine) return SEND_FILTER_PASS;
    this.stats.wqes++;
    const d = this.#describe(x);
    // The descriptor is this filter's own buffer, rewritten whole per WQE: the program's output may be
    // written into it (IN_PLACE), and the result is read before anything else reaches the engine.
    const r = engine.processReused(d, P4_RDMA_PORT, OutputMode.IN_PLACE);
    if (r.dropped) {
      this.stats.dropped++;
      return SEND_FILTER_DROP;
    }
    const out = r.frame;
    const op = out && out.length >= ernic_wqe.SIZE ? out[ernic_wqe.op]! : WqeOp.RUN;
    if (op === WqeOp.RUN) {
      this.stats.passed++;
      return SEND_FILTER_PASS;
    }
    const st = this.#extern(
      x,
      op,
      out![ernic_wqe.src_fmt]!,
      out![ernic_wqe.dst_fmt]!,
      (out![ernic_wqe.op_flags]! & WQE_OP_SATURATE) !== 0,
    );
    if (st !== IonicStatus.OK) this.stats.refused++;
    return st;
  }

  /** The WQE as the `ernic_wqe` header (the reused descriptor buffer). */
  #describe(x: SendFilterInput): Buffer {
    const d = this.#desc;
    const w = x.wqe;
    d[ernic_wqe.verb] = w.verb;
    d[ernic_wqe.qp_type] = x.qp.type & 0xff;
    d[ernic_wqe.flags] =
      (w.signaled ? WqeFlag.SIGNALED : 0) |
      (w.solicited ? WqeFlag.SOLICITED : 0) |
      (w.fence ? WqeFlag.FENCE : 0) |
      (w.inline ? WqeFlag.INLINE : 0);
    d[ernic_wqe.sge_count] = w.inline ? 0 : w.sgeCount & 0xff;
    d.writeUInt32BE(x.qp.id >>> 0, ernic_wqe.qpn);
    d.writeUInt32BE((x.datagram ? w.ud.destQpn : x.qp.attrs.destQpn) >>> 0, ernic_wqe.dest_qpn);
    d.writeUInt32BE(x.qp.pdId >>> 0, ernic_wqe.pd);
    d.writeUInt32BE(messageLength(w) >>> 0, ernic_wqe.length);
    d.writeUInt32BE(!w.inline && w.sgeCount > 0 ? w.sges[0]!.lkey >>> 0 : 0, ernic_wqe.lkey);
    const rdma = RDMA_VERBS.has(w.verb);
    d.writeUInt32BE(rdma ? w.rdma.rkey >>> 0 : 0, ernic_wqe.rkey);
    const va = rdma && w.rdma.remoteVa >= 0 ? w.rdma.remoteVa : rdma ? Number.MAX_SAFE_INTEGER : 0;
    const hi = Math.floor(va / TWO_32);
    d.writeUInt32BE(hi >>> 0, ernic_wqe.remote_va);
    d.writeUInt32BE((va - hi * TWO_32) >>> 0, ernic_wqe.remote_va + 4);
    d.writeUInt32BE(IMM_VERBS.has(w.verb) ? w.immDataKey >>> 0 : 0, ernic_wqe.imm);
    d.writeUInt32BE(0, ernic_wqe.op); // op, src_fmt, dst_fmt, op_flags
    return d;
  }

  /** An extern in place of an RDMA WRITE's copy; the WQE's status. */
  #extern(x: SendFilterInput, op: number, srcFmt: number, dstFmt: number, saturate: boolean): number {
    const w = x.wqe;
    if (w.verb !== SendVerb.RDMA_WRITE || x.datagram) return IonicStatus.LOCAL_QP_OPER;
    const sb = formatBytes(srcFmt);
    const db = formatBytes(dstFmt);
    if (sb === 0 || db === 0) return IonicStatus.LOCAL_QP_OPER;
    if (op === WqeOp.ADD) {
      if (!isFp8(srcFmt) || !isFp8(dstFmt)) return IonicStatus.LOCAL_QP_OPER;
    } else if (op !== WqeOp.CONVERT) return IonicStatus.LOCAL_QP_OPER;
    const len = messageLength(w);
    if (len % sb !== 0 || len > (sb === 4 ? P4_EXTERN_MAX_FP32_BYTES : P4_EXTERN_MAX_BYTES))
      return IonicStatus.LOCAL_LEN;
    if (!w.inline) {
      for (let i = 0; i < w.sgeCount; i++) {
        const g = w.sges[i]!;
        if (g.len > 0 && g.lkey >>> 0 === 0) return IonicStatus.LOCAL_PROT;
      }
    }
    const n = len / sb;
    const st = x.resolveRemoteWrite(n * db);
    if (st !== IonicStatus.OK) return st;
    this.#apply(op === WqeOp.ADD, srcFmt as NumFormat, dstFmt as NumFormat, saturate, x.src, x.dst, n, sb, db);
    x.written(n * db);
    if (op === WqeOp.ADD) this.stats.adds++;
    else this.stats.converts++;
    this.stats.elements += n;
    return IonicStatus.OK;
  }

  /**
   * dst = (add ? dst + src : src) element by element, through the scratch
   * buffers, CHUNK elements at a time: by lookup table (./fp8.ts) from 8- and
   * 16-bit sources, by encodeValue from FP32.
   */
  #apply(
    add: boolean,
    sf: NumFormat,
    df: NumFormat,
    sat: boolean,
    src: readonly Buffer[],
    dst: readonly Buffer[],
    n: number,
    sb: number,
    db: number,
  ): void {
    const a = this.#a;
    const b = this.#b;
    const sum = add ? addTable(sf, df, sat) : null;
    const conv = !add && sb <= 2 ? convertTable(sf, df, sat) : null;
    for (let k = 0; k < n; k += CHUNK) {
      const e = Math.min(CHUNK, n - k);
      copySlices(this.#aList, 0, src, k * sb, e * sb);
      if (sum) {
        copySlices(this.#bList, 0, dst, k * db, e * db);
        for (let i = 0; i < e; i++) b[i] = sum[(b[i]! << 8) | a[i]!]!;
      } else if (conv) {
        for (let i = 0; i < e; i++) {
          const code = conv[sb === 1 ? a[i]! : a[2 * i]! | (a[2 * i + 1]! << 8)]!;
          if (db === 1) b[i] = code;
          else if (db === 2) b.writeUInt16LE(code, 2 * i);
          else b.writeUInt32LE(code, 4 * i);
        }
      } else {
        for (let i = 0; i < e; i++) writeElement(df, b, i * db, readElement(sf, a, i * sb), sat);
      }
      copySlices(dst, k * db, this.#bList, 0, e * db);
    }
  }
}

function messageLength(w: SendFilterInput['wqe']): number {
  return w.inline ? w.inlineLength : w.sgeTotal;
}
