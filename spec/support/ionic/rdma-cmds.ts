// Admin command bodies as ionic_rdma.ko builds them (docs/driver-contract.md, ionic RDMA R2.4), header
// templates as its ib_ud_header packer lays them out (ionic RDMA R5.5), and
// rings/page lists as the driver describes them (ionic RDMA R3.1). Written from
// the contract with our own offsets.

import type { IonicGuest } from './guest';
import { putU64 } from './guest';
import { PAGE } from './regs';
import { ALen } from './rdma-regs';

interface CqBody {
  id: number;
  eqId: number;
  depthLog2: number;
  strideLog2?: number;
  pageSizeLog2?: number;
  mapCount?: number;
  dma: number;
  dbid?: number;
  flags?: number;
  dirSize?: number;
}

export function createCqBody(o: CqBody): Buffer {
  const b = Buffer.alloc(ALen.CREATE_CQ);
  b.writeUInt32LE(o.eqId >>> 0, 0);
  b[4] = o.depthLog2;
  b[5] = o.strideLog2 ?? 5;
  b[6] = o.dirSize ?? 0;
  b[7] = o.pageSizeLog2 ?? 0;
  b.writeUInt32LE(o.flags ?? 0, 8);
  b.writeUInt32LE(o.id >>> 0, 12);
  b.writeUInt32LE(0xffffffff, 16);
  b.writeUInt32LE(o.mapCount ?? 1, 20);
  putU64(b, 24, o.dma);
  b.writeUInt16LE(o.dbid ?? 0, 32);
  return b;
}

interface RingBody {
  cqId: number;
  depthLog2: number;
  strideLog2: number;
  pageSizeLog2?: number;
  mapCount?: number;
  dma: number;
}

export interface QpBody {
  id: number;
  type: number;
  pdId?: number;
  flags?: number;
  sq: RingBody;
  rq?: RingBody;
  srqId?: number;
  dbid?: number;
  state?: number;
}

export function createQpBody(o: QpBody): Buffer {
  const b = Buffer.alloc(ALen.CREATE_QP);
  b.writeUInt32LE(o.pdId ?? 1, 0);
  b.writeUInt32BE((o.flags ?? 0) >>> 0, 4);
  b.writeUInt32LE(o.sq.cqId >>> 0, 8);
  b[12] = o.sq.depthLog2;
  b[13] = o.sq.strideLog2;
  b[15] = o.sq.pageSizeLog2 ?? 0;
  b.writeUInt32LE(0xffffffff, 16);
  b.writeUInt32LE(o.sq.mapCount ?? 1, 20);
  putU64(b, 24, o.sq.dma);
  const rq = o.rq;
  b.writeUInt32LE((rq?.cqId ?? o.sq.cqId) >>> 0, 32);
  if (rq) {
    b[36] = rq.depthLog2;
    b[37] = rq.strideLog2;
    b[39] = rq.pageSizeLog2 ?? 0;
    b.writeUInt32LE(rq.mapCount ?? 1, 44);
    putU64(b, 48, rq.dma);
  }
  b.writeUInt32LE(o.srqId === undefined ? 0xffffffff : o.srqId >>> 0, 40);
  b.writeUInt32LE(o.id >>> 0, 56);
  b.writeUInt16LE(o.dbid ?? 0, 60);
  b[62] = (o.type & 0xf) | ((o.state ?? 0) << 4);
  return b;
}

interface MrBody {
  key: number;
  va: number | bigint;
  length: number | bigint;
  pdId?: number;
  flags: number;
  mapCount: number;
  dma: number;
  pageSizeLog2: number;
  ptType?: number;
  dirSize?: number;
}

export function createMrBody(o: MrBody): Buffer {
  const b = Buffer.alloc(ALen.CREATE_MR);
  putU64(b, 0, o.va);
  putU64(b, 8, o.length);
  b.writeUInt32LE(o.pdId ?? 1, 16);
  b.writeUInt32LE(o.key >>> 0, 20);
  b.writeUInt32LE(0xffffffff, 24);
  b.writeUInt32LE(o.mapCount >>> 0, 28);
  putU64(b, 32, o.dma);
  b.writeUInt16LE(o.flags & 0xffff, 40);
  b[42] = o.ptType ?? 0;
  b[43] = o.dirSize ?? 0;
  b[44] = o.pageSizeLog2;
  return b;
}

export interface ModifyBody {
  id: number;
  mask: number;
  state?: number;
  curState?: number;
  access?: number;
  rqPsn?: number;
  sqPsn?: number;
  qkeyDest?: number;
  rateLimit?: number;
  pmtu?: number;
  retry?: number;
  rnrTimer?: number;
  timeout?: number;
  rsqDepth?: number;
  rrqDepth?: number;
  ahId?: number;
  hdrLen?: number;
  hdrDma?: number;
  pcp?: number;
  dscp?: number;
  csum?: number;
  /** The two nibbles of `retry` (byte 25), when `retry` itself is not given: retry_cnt low, rnr_retry high. */
  retryCnt?: number;
  rnrRetry?: number;
}

export function modifyQpBody(o: ModifyBody): Buffer {
  const b = Buffer.alloc(ALen.MODIFY_QP);
  b.writeUInt32BE(o.mask >>> 0, 0);
  b[5] = o.csum ?? 0;
  b.writeUInt16BE(o.access ?? 0, 6);
  b.writeUInt32LE((o.rqPsn ?? 0) >>> 0, 8);
  b.writeUInt32LE((o.sqPsn ?? 0) >>> 0, 12);
  b.writeUInt32LE((o.qkeyDest ?? 0) >>> 0, 16);
  b.writeUInt32LE((o.rateLimit ?? 0) >>> 0, 20);
  b[24] = o.pmtu ?? 0;
  b[25] = o.retry ?? ((o.retryCnt ?? 0) & 0xf) | (((o.rnrRetry ?? 0) & 0xf) << 4);
  b[26] = o.rnrTimer ?? 0;
  b[27] = o.timeout ?? 0;
  b[28] = o.rsqDepth ?? 0;
  b[29] = o.rrqDepth ?? 0;
  b.writeUInt32LE((((o.hdrLen ?? 0) << 24) | ((o.ahId ?? 0) & 0xffffff)) >>> 0, 32);
  b[36] = o.pcp ?? 0;
  b[37] = o.dscp ?? 0;
  b[39] = ((o.state ?? 0) & 0xf) | ((o.curState ?? 0) << 4);
  b.writeUInt32LE(o.rrqDepth ? 0xffffffff : 0, 40);
  b.writeUInt32LE(o.rsqDepth ? 0xffffffff : 0, 44);
  putU64(b, 48, o.hdrDma ?? 0);
  b.writeUInt32LE(o.id >>> 0, 56);
  return b;
}

export function queryQpBody(id: number, sqDma: number, rqDma: number, hdrDma = 0, ahId = 0): Buffer {
  const b = Buffer.alloc(ALen.QUERY_QP);
  putU64(b, 0, hdrDma);
  putU64(b, 8, sqDma);
  putU64(b, 16, rqDma);
  b.writeUInt32LE(ahId >>> 0, 24);
  b.writeUInt32LE(id >>> 0, 28);
  return b;
}

export function createAhBody(o: {
  id: number;
  dma: number;
  length: number;
  pdId?: number;
  csum?: number;
  crypto?: number;
  dbid?: number;
}): Buffer {
  const b = Buffer.alloc(ALen.CREATE_AH);
  putU64(b, 0, o.dma);
  b.writeUInt32LE(o.length >>> 0, 8);
  b.writeUInt32LE(o.pdId ?? 1, 12);
  b.writeUInt32LE(o.id >>> 0, 16);
  b.writeUInt16LE(o.dbid ?? 0, 20);
  b[22] = o.csum ?? 0;
  b[23] = o.crypto ?? 0;
  return b;
}

export function idBody(id: number): Buffer {
  const b = Buffer.alloc(ALen.DESTROY);
  b.writeUInt32LE(id >>> 0, 0);
  return b;
}

export function statsBody(dma: number, length: number, id = 0, typeState = 0): Buffer {
  const b = Buffer.alloc(ALen.STATS);
  putU64(b, 0, dma);
  b.writeUInt32LE(length >>> 0, 8);
  b.writeUInt32LE(id >>> 0, 12);
  b[16] = typeState;
  return b;
}

// ---- header templates (ib_ud_header_pack without BTH/DETH) ---------------------------------

export interface TemplateOpts {
  ipv6?: boolean;
  vlan?: number;
  dmac?: Buffer;
  smac?: Buffer;
  sip: Buffer;
  dip: Buffer;
  ttl?: number;
  tos?: number;
  flow?: number;
  sport?: number;
}

export function headerTemplate(o: TemplateOpts): Buffer {
  const parts: Buffer[] = [];
  const eth = Buffer.alloc(14);
  (o.dmac ?? Buffer.from('02aabbccddee', 'hex')).copy(eth, 0);
  (o.smac ?? Buffer.from('021122334455', 'hex')).copy(eth, 6);
  const type = o.ipv6 ? 0x86dd : 0x0800;
  if (o.vlan !== undefined) {
    eth.writeUInt16BE(0x8100, 12);
    parts.push(eth);
    const tag = Buffer.alloc(4);
    tag.writeUInt16BE(o.vlan, 0);
    tag.writeUInt16BE(type, 2);
    parts.push(tag);
  } else {
    eth.writeUInt16BE(type, 12);
    parts.push(eth);
  }
  if (o.ipv6) {
    const ip = Buffer.alloc(40);
    ip.writeUInt32BE(((6 << 28) | ((o.tos ?? 0) << 20) | (o.flow ?? 0)) >>> 0, 0);
    ip[6] = 17;
    ip[7] = o.ttl ?? 64;
    o.sip.copy(ip, 8);
    o.dip.copy(ip, 24);
    parts.push(ip);
  } else {
    const ip = Buffer.alloc(20);
    ip[0] = 0x45;
    ip[1] = o.tos ?? 0;
    ip.writeUInt16BE(0xffff, 2);
    ip.writeUInt16BE(0x4000, 6);
    ip[8] = o.ttl ?? 64;
    ip[9] = 17;
    o.sip.copy(ip, 12);
    o.dip.copy(ip, 16);
    parts.push(ip);
  }
  const udp = Buffer.alloc(8);
  udp.writeUInt16BE(o.sport ?? 28272, 0);
  udp.writeUInt16BE(4791, 2);
  parts.push(udp);
  return Buffer.concat(parts);
}

/** Put a template in guest memory (a page of its own, like the driver's kmalloc). */
export function placeTemplate(g: IonicGuest, tpl: Buffer): number {
  const at = g.alloc(PAGE);
  tpl.copy(g.mem(at, tpl.length));
  return at;
}

// ---- rings and page lists ---------------------------------------------------------------------

interface RingPlace {
  /** dma_addr, map_count, page_size_log2 as the command carries them. */
  dma: number;
  mapCount: number;
  pageSizeLog2: number;
  /** The pages, in ring order. */
  pages: number[];
}

/** A kernel ring: one contiguous block, map_count 1, page_size_log2 0. */
export function contiguousRing(g: IonicGuest, bytes: number): RingPlace {
  const at = g.alloc(Math.max(PAGE, bytes));
  return { dma: at, mapCount: 1, pageSizeLog2: 0, pages: [at] };
}

/**
 * A user ring of `bytes` on 4 KiB pages that are not adjacent (a gap page
 * between each), described by a page list (or one page when it fits).
 */
export function pagedRing(g: IonicGuest, bytes: number, opts: { adjacent?: boolean } = {}): RingPlace {
  const n = Math.ceil(bytes / PAGE);
  const pages: number[] = [];
  for (let i = 0; i < n; i++) {
    pages.push(g.alloc(PAGE));
    if (!opts.adjacent) g.alloc(PAGE);
  }
  if (n === 1) return { dma: pages[0]!, mapCount: 1, pageSizeLog2: 12, pages };
  return { dma: pageList(g, pages), mapCount: n, pageSizeLog2: 12, pages };
}

/** Write a page-address list into guest memory; returns its address. */
export function pageList(g: IonicGuest, pages: readonly (number | bigint)[]): number {
  const at = g.alloc(Math.max(8, pages.length * 8), 8);
  const v = g.mem(at, pages.length * 8);
  pages.forEach((p, i) => putU64(v, i * 8, p));
  return at;
}
