// The RDMA admin queue's commands (ionic RDMA R2.4): each handler decodes its
// body once, validates every field against the limits and guest memory, then
// applies the command to the resource manager (validate, then apply: a
// refused command changes nothing). The result is an AdminStatus for the
// CQE; on success `length` goes in status_length (the SRQ series reads the
// response length there). Nothing here throws on guest input.

import type { Logger, RateLimiter } from '../../log';
import { warnLimited } from '../../log';
import { DeviceCounter, DEVICE_COUNTER_NAMES, QP_COUNTER_NAMES, CounterSet } from '../../rdma/counters';
import type { AddressVector } from '../../rdma/address';
import type { DataPathHooks } from '../../rdma/hooks';
import {
  RDMA_MAX_STRIDE_LOG2,
  RDMA_MAX_TEMPLATE_LEN,
  RDMA_MIN_TEMPLATE_LEN,
  RDMA_MIN_WQE_STRIDE_LOG2,
  RDMA_NDBPGS_PER_LIF,
  RDMA_CQE_STRIDE_LOG2,
  RDMA_AH_COUNT,
  RDMA_PT_ENTRIES_PER_TURN,
} from '../../rdma/limits';
import type { QpChanges, ResourceManager, RmError } from '../../rdma/resources';
import { mrKindOf } from '../../rdma/resources';
import { PageListLoader, PageTable } from '../../rdma/page-table';
import {
  MR_ACCESS_SUPPORTED,
  MrKind,
  QP_ACCESS_MASK,
  QP_ATTR_MASK_KNOWN,
  QpAttrMask,
  QpFlag,
  QpState,
  QpType,
} from '../../rdma/types';
import type { GuestMemory } from '../../vfio-user/guest-memory';
import { MemStatus } from '../../vfio-user/guest-memory';
import type { FaultInjector } from '../fault-injection';
import { AdminOp, AdminStatus, CSUM_PROFILE_MAX } from './constants';
import type { EventQueue } from './event-queue';
import { parseHeaderTemplate } from './header-template';
import {
  ionic_admin_create_ah as AH,
  ionic_admin_create_cq as CCQ,
  ionic_admin_create_mr as CMR,
  ionic_admin_create_qp as CQP,
  ionic_admin_create_srq as CSRQ,
  ionic_admin_create_srq_resp as SRQR,
  ionic_admin_destroy as DESTROY,
  ionic_admin_mod_qp as MQP,
  ionic_admin_modify_srq as MSRQ,
  ionic_admin_query_qp as QQP,
  ionic_admin_query_srq as QSRQ,
  ionic_admin_stats_hdr as STATS,
  ionic_v1_admin_query_qp_rq as QRQ,
  ionic_v1_admin_query_qp_sq as QSQ,
} from './layouts';
import { getField, setField, U64_UNSAFE } from '../../../protocol/field';
import { loadRing, mrTableSource } from './rings';
import { buildStatHeaders, buildStatValues, headersNeeded, valuesSize } from './stats';

/** What the commands work on. */
export interface AdminEnv {
  readonly rm: ResourceManager;
  readonly eqs: ReadonlyMap<number, EventQueue>;
  readonly counters: CounterSet;
  readonly faults: FaultInjector;
  readonly hooks: DataPathHooks;
  readonly log: Logger;
  readonly limiter: RateLimiter;
}

export interface AdminResult {
  readonly status: AdminStatus;
  /** status_length on success. */
  readonly length: number;
}

/**
 * A command that takes more than one turn (CREATE_MR over a long page list):
 * the admin queue calls `step` once per turn until it answers, and `abort`
 * if the queue goes away first.
 */
export interface AdminWork {
  step(mem: GuestMemory): AdminResult | null;
  abort(): void;
}

export type AdminOutcome = AdminResult | AdminWork;

export function isAdminWork(o: AdminOutcome): o is AdminWork {
  return 'step' in o;
}

const OK: AdminResult = { status: AdminStatus.OK, length: 0 };

function refuse(status: AdminStatus): AdminResult {
  return { status, length: 0 };
}

/** How a resource-manager refusal reads in the CQE. */
function rmStatus(e: RmError): AdminStatus {
  switch (e) {
    case 'bad-id':
      return AdminStatus.BAD_INDEX;
    case 'unknown':
      return AdminStatus.BAD_INDEX;
    case 'exists':
      return AdminStatus.BAD_STATE;
    case 'busy':
      return AdminStatus.BAD_STATE;
    case 'bad-state':
      return AdminStatus.BAD_STATE;
    case 'bad-type':
      return AdminStatus.BAD_TYPE;
    case 'bad-attr':
      return AdminStatus.BAD_ATTR;
    case 'no-space':
      return AdminStatus.BAD_INDEX;
  }
}

/** Body bytes each opcode needs at least (its struct size). */
const MIN_LEN: ReadonlyMap<number, number> = new Map([
  [AdminOp.CREATE_CQ, CCQ.SIZE],
  [AdminOp.CREATE_QP, CQP.SIZE],
  [AdminOp.CREATE_MR, CMR.SIZE],
  [AdminOp.STATS_HDRS, STATS.SIZE],
  [AdminOp.STATS_VALS, STATS.SIZE],
  [AdminOp.QP_STATS_HDRS, STATS.SIZE],
  [AdminOp.QP_STATS_VALS, STATS.SIZE],
  [AdminOp.DESTROY_MR, DESTROY.SIZE],
  [AdminOp.DESTROY_CQ, DESTROY.SIZE],
  [AdminOp.DESTROY_QP, DESTROY.SIZE],
  [AdminOp.DESTROY_AH, DESTROY.SIZE],
  [AdminOp.MODIFY_QP, MQP.SIZE],
  [AdminOp.QUERY_QP, QQP.SIZE],
  [AdminOp.CREATE_AH, AH.SIZE],
  [AdminOp.CREATE_SRQ, CSRQ.SIZE],
  [AdminOp.MODIFY_SRQ, MSRQ.SIZE],
  [AdminOp.QUERY_SRQ, QSRQ.SIZE],
  [AdminOp.DESTROY_SRQ, DESTROY.SIZE],
]);

/** Run one admin command. `body` holds exactly the WQE's `len` bytes. */
export function executeAdmin(env: AdminEnv, mem: GuestMemory, op: number, body: Buffer): AdminOutcome {
  const min = MIN_LEN.get(op);
  if (min !== undefined && body.length < min) return refuse(AdminStatus.BAD_CMD);
  switch (op) {
    case AdminOp.NOOP:
    case AdminOp.DEBUG:
    case AdminOp.QUERY_AH:
    case AdminOp.MODIFY_DCQCN:
      return OK;
    case AdminOp.CREATE_CQ:
      return createCq(env, mem, body);
    case AdminOp.DESTROY_CQ:
      return destroy(env, body, 'cq');
    case AdminOp.CREATE_QP:
      return createQp(env, mem, body);
    case AdminOp.MODIFY_QP:
      return modifyQp(env, mem, body);
    case AdminOp.QUERY_QP:
      return queryQp(env, mem, body);
    case AdminOp.DESTROY_QP:
      return destroy(env, body, 'qp');
    case AdminOp.CREATE_MR:
      return createMr(env, body);
    case AdminOp.DESTROY_MR:
      return destroy(env, body, 'mr');
    case AdminOp.CREATE_AH:
      return createAh(env, mem, body);
    case AdminOp.DESTROY_AH:
      return destroy(env, body, 'ah');
    case AdminOp.STATS_HDRS:
    case AdminOp.STATS_VALS:
    case AdminOp.QP_STATS_HDRS:
    case AdminOp.QP_STATS_VALS:
      return stats(env, mem, op, body);
    case AdminOp.CREATE_SRQ:
      return createSrq(env, mem, body);
    case AdminOp.MODIFY_SRQ:
      return modifySrq(env, body);
    case AdminOp.QUERY_SRQ:
      return querySrq(env, body);
    case AdminOp.DESTROY_SRQ:
      return destroy(env, body, 'srq');
    default:
      return refuse(AdminStatus.BAD_CMD);
  }
}

function dbidOk(dbid: number): boolean {
  return dbid < RDMA_NDBPGS_PER_LIF;
}

// ---- CQ ------------------------------------------------------------------------------------

function createCq(env: AdminEnv, mem: GuestMemory, b: Buffer): AdminResult {
  const spec = {
    id: getField(b, 0, CCQ.id_ver),
    eqId: getField(b, 0, CCQ.eq_id),
    depthLog2: getField(b, 0, CCQ.depth_log2),
    strideLog2: getField(b, 0, CCQ.stride_log2),
    dbid: getField(b, 0, CCQ.dbid_flags),
    admin: false,
  };
  if (!env.eqs.has(spec.eqId)) return refuse(AdminStatus.BAD_INDEX);
  if (getField(b, 0, CCQ.dir_size_log2_rsvd) !== 0 || getField(b, 0, CCQ.cq_flags) !== 0 || !dbidOk(spec.dbid))
    return refuse(AdminStatus.BAD_ATTR);
  const err = env.rm.checkCq(spec);
  if (err) return refuse(rmStatus(err));
  const t = loadRing(
    mem,
    {
      depthLog2: spec.depthLog2,
      strideLog2: spec.strideLog2,
      pageSizeLog2: getField(b, 0, CCQ.page_size_log2),
      mapCount: getField(b, 0, CCQ.map_count),
      dmaAddr: getField(b, 0, CCQ.dma_addr),
    },
    [RDMA_CQE_STRIDE_LOG2, RDMA_CQE_STRIDE_LOG2],
    true,
    env.rm.budget,
  );
  if (typeof t === 'number') return refuse(t);
  const r = env.rm.createCq(spec, t);
  return r.ok ? OK : refuse(rmStatus(r.error));
}

// ---- QP ------------------------------------------------------------------------------------

/** priv_flags a CREATE_QP may carry (no CMB, no query-only SQ_DRAINING). */
const CREATE_QP_FLAGS =
  QP_ACCESS_MASK |
  QpFlag.SQ_PB |
  QpFlag.RQ_PB |
  QpFlag.SQ_SPEC |
  QpFlag.RQ_SPEC |
  QpFlag.REMOTE_PRIVILEGED |
  QpFlag.SQD_NOTIFY |
  QpFlag.PRIVILEGED;
const NO_SRQ = 0xffffffff;

function createQp(env: AdminEnv, mem: GuestMemory, b: Buffer): AdminResult {
  const ts = getField(b, 0, CQP.type_state);
  const flags = getField(b, 0, CQP.priv_flags);
  const srqField = getField(b, 0, CQP.rq_tbl_index_srq_id);
  const srqId = srqField === NO_SRQ ? null : srqField;
  const spec = {
    id: getField(b, 0, CQP.id_ver),
    type: (ts & 0xf) as QpType,
    pdId: getField(b, 0, CQP.pd_id),
    flags,
    sqCqId: getField(b, 0, CQP.sq_cq_id),
    rqCqId: getField(b, 0, CQP.rq_cq_id),
    sq: { depthLog2: getField(b, 0, CQP.sq_depth_log2), strideLog2: getField(b, 0, CQP.sq_stride_log2) },
    rq:
      srqId === null
        ? { depthLog2: getField(b, 0, CQP.rq_depth_log2), strideLog2: getField(b, 0, CQP.rq_stride_log2) }
        : null,
    srqId,
    dbid: getField(b, 0, CQP.dbid_flags),
  };
  if (ts >> 4 !== QpState.RESET) return refuse(AdminStatus.BAD_STATE);
  if ((flags & ~CREATE_QP_FLAGS) !== 0 || !dbidOk(spec.dbid)) return refuse(AdminStatus.BAD_ATTR);
  if (getField(b, 0, CQP.sq_dir_size_log2_rsvd) !== 0 || getField(b, 0, CQP.rq_dir_size_log2_rsvd) !== 0)
    return refuse(AdminStatus.BAD_ATTR);
  const err = env.rm.checkQp(spec);
  if (err) return refuse(rmStatus(err));
  const strides = [RDMA_MIN_WQE_STRIDE_LOG2, RDMA_MAX_STRIDE_LOG2] as const;
  const sq = loadRing(
    mem,
    {
      depthLog2: spec.sq.depthLog2,
      strideLog2: spec.sq.strideLog2,
      pageSizeLog2: getField(b, 0, CQP.sq_page_size_log2),
      mapCount: getField(b, 0, CQP.sq_map_count),
      dmaAddr: getField(b, 0, CQP.sq_dma_addr),
    },
    strides,
    false,
    env.rm.budget,
  );
  if (typeof sq === 'number') return refuse(sq);
  let rq = null;
  if (spec.rq) {
    const r = loadRing(
      mem,
      {
        depthLog2: spec.rq.depthLog2,
        strideLog2: spec.rq.strideLog2,
        pageSizeLog2: getField(b, 0, CQP.rq_page_size_log2),
        mapCount: getField(b, 0, CQP.rq_map_count),
        dmaAddr: getField(b, 0, CQP.rq_dma_addr),
      },
      strides,
      false,
      env.rm.budget,
    );
    if (typeof r === 'number') {
      env.rm.releaseTable(sq);
      return refuse(r);
    }
    rq = r;
  } else if (getField(b, 0, CQP.rq_map_count) !== 0) {
    env.rm.releaseTable(sq);
    return refuse(AdminStatus.BAD_ATTR);
  }
  const r = env.rm.createQp(spec, sq, rq);
  return r.ok ? OK : refuse(rmStatus(r.error));
}

/** Decode MODIFY_QP into changes, applying a field only when its mask bit says so (ionic RDMA R2.4). */
function modifyQp(env: AdminEnv, mem: GuestMemory, b: Buffer): AdminResult {
  const qp = env.rm.qps.get(getField(b, 0, MQP.id_ver));
  if (!qp) return refuse(AdminStatus.BAD_INDEX);
  const mask = getField(b, 0, MQP.attr_mask);
  if ((mask & ~QP_ATTR_MASK_KNOWN) !== 0 || (mask & QpAttrMask.CAP) !== 0) return refuse(AdminStatus.BAD_ATTR);
  const c: QpChanges = {};
  const ts = getField(b, 0, MQP.type_state);
  if (mask & QpAttrMask.STATE) {
    const next = ts & 0xf;
    if (next > QpState.ERR) return refuse(AdminStatus.BAD_ATTR);
    c.state = next as QpState;
  }
  if (mask & QpAttrMask.CUR_STATE && ts >> 4 > QpState.ERR) return refuse(AdminStatus.BAD_ATTR);
  const connected = qp.type === QpType.RC || qp.type === QpType.UC;
  const qkeyDest = getField(b, 0, MQP.qkey_dest_qpn);
  if (mask & QpAttrMask.DEST_QPN && connected) {
    if (qkeyDest > 0xffffff) return refuse(AdminStatus.BAD_ATTR);
    c.destQpn = qkeyDest;
  }
  if (mask & QpAttrMask.QKEY && !connected) c.qkey = qkeyDest;
  if (mask & QpAttrMask.ACCESS_FLAGS) c.access = getField(b, 0, MQP.access_flags) & QP_ACCESS_MASK;
  if (mask & QpAttrMask.EN_SQD_ASYNC_NOTIFY) c.sqdNotify = (getField(b, 0, MQP.access_flags) & QpFlag.SQD_NOTIFY) !== 0;
  if (mask & QpAttrMask.PATH_MTU) {
    const pmtu = getField(b, 0, MQP.pmtu);
    if (pmtu < 8 || pmtu > 12) return refuse(AdminStatus.BAD_ATTR);
    c.pmtu = pmtu;
  }
  const retry = getField(b, 0, MQP.retry);
  if (mask & QpAttrMask.RETRY_CNT) {
    if ((retry & 0xf) > 7) return refuse(AdminStatus.BAD_ATTR);
    c.retryCnt = retry & 0xf;
  }
  if (mask & QpAttrMask.RNR_RETRY) {
    if (retry >> 4 > 7) return refuse(AdminStatus.BAD_ATTR);
    c.rnrRetry = retry >> 4;
  }
  if (mask & QpAttrMask.MIN_RNR_TIMER) {
    const v = getField(b, 0, MQP.rnr_timer);
    if (v > 31) return refuse(AdminStatus.BAD_ATTR);
    c.rnrTimer = v;
  }
  if (mask & QpAttrMask.TIMEOUT) {
    const v = getField(b, 0, MQP.retry_timeout);
    if (v > 31) return refuse(AdminStatus.BAD_ATTR);
    c.timeout = v;
  }
  if (mask & QpAttrMask.RQ_PSN) c.rqPsn = getField(b, 0, MQP.rq_psn) & 0xffffff;
  if (mask & QpAttrMask.SQ_PSN) c.sqPsn = getField(b, 0, MQP.sq_psn) & 0xffffff;
  // Depths are sent only with their mask bit and a non-zero value (0 = "not given").
  const rrq = getField(b, 0, MQP.rrq_depth);
  const rsq = getField(b, 0, MQP.rsq_depth);
  if (mask & QpAttrMask.MAX_QP_RD_ATOMIC && rrq > 0) {
    if (rrq > 8) return refuse(AdminStatus.BAD_ATTR);
    c.rrqDepth = rrq;
  }
  if (mask & QpAttrMask.MAX_DEST_RD_ATOMIC && rsq > 0) {
    if (rsq > 8) return refuse(AdminStatus.BAD_ATTR);
    c.rsqDepth = rsq;
  }
  if (mask & QpAttrMask.RATE_LIMIT) c.rateLimitKbps = getField(b, 0, MQP.rate_limit_kbps);
  if (mask & QpAttrMask.AV) {
    if (!connected) return refuse(AdminStatus.BAD_ATTR);
    const ahIdLen = getField(b, 0, MQP.ah_id_len);
    const len = ahIdLen >>> 24;
    const ahId = ahIdLen & 0xffffff;
    const csum = getField(b, 0, MQP.tfp_csum_profile);
    if (ahId >= RDMA_AH_COUNT || csum > CSUM_PROFILE_MAX) return refuse(AdminStatus.BAD_ATTR);
    const av = readTemplate(mem, getField(b, 0, MQP.dma_addr), len);
    if (typeof av === 'number') return refuse(av);
    c.av = av;
    c.ahId = ahId;
    c.pcp = getField(b, 0, MQP.en_pcp) & 7;
    c.dscp = getField(b, 0, MQP.ip_dscp) & 0x3f;
    c.csumProfile = csum;
  }
  if (env.hooks.modifyAllowed && !env.hooks.modifyAllowed(qp, c)) return refuse(AdminStatus.BAD_ATTR);
  const r = env.rm.modifyQp(qp.id, c);
  if (!r.ok) return refuse(rmStatus(r.error));
  env.hooks.qpModified?.(qp, r.value, c);
  return OK;
}

/** Read and parse a header template. */
function readTemplate(mem: GuestMemory, addr: number, len: number): AddressVector | AdminStatus {
  if (len < RDMA_MIN_TEMPLATE_LEN || len > RDMA_MAX_TEMPLATE_LEN || addr === U64_UNSAFE || addr <= 0)
    return AdminStatus.BAD_ATTR;
  const tpl = Buffer.alloc(len);
  if (mem.read(addr, tpl) !== MemStatus.OK) return AdminStatus.BAD_ATTR;
  const av = parseHeaderTemplate(tpl);
  return typeof av === 'string' ? AdminStatus.BAD_ATTR : av;
}

/** QUERY_QP: write the "sq" and "rq" records where the driver asked (ionic RDMA R2.4). */
function queryQp(env: AdminEnv, mem: GuestMemory, b: Buffer): AdminResult {
  const qp = env.rm.qps.get(getField(b, 0, QQP.id_ver));
  if (!qp) return refuse(AdminStatus.BAD_INDEX);
  const sqAt = getField(b, 0, QQP.sq_dma_addr);
  const rqAt = getField(b, 0, QQP.rq_dma_addr);
  if (sqAt <= 0 || rqAt <= 0) return refuse(AdminStatus.BAD_ATTR);
  const a = qp.attrs;
  const connected = qp.type === QpType.RC || qp.type === QpType.UC;
  const flags = a.access | (a.sqdNotify ? QpFlag.SQD_NOTIFY : 0) | (qp.state === QpState.SQD ? QpFlag.SQ_DRAINING : 0);
  const sq = Buffer.alloc(QSQ.SIZE);
  setField(sq, 0, QSQ.rnr_timer, a.rnrTimer);
  setField(sq, 0, QSQ.retry_timeout, a.timeout);
  setField(sq, 0, QSQ.access_perms_flags, flags);
  setField(sq, 0, QSQ.pkey_id, 0);
  setField(sq, 0, QSQ.qkey_dest_qpn, connected ? a.destQpn : (a.qkey ?? 0));
  setField(sq, 0, QSQ.rate_limit_kbps, a.rateLimitKbps);
  setField(sq, 0, QSQ.rq_psn, a.rqPsn);
  const rq = Buffer.alloc(QRQ.SIZE);
  setField(rq, 0, QRQ.state_pmtu, (qp.state << 4) | (a.pmtu & 0xf));
  setField(rq, 0, QRQ.retry_rnrtry, (a.retryCnt & 0xf) | (a.rnrRetry << 4));
  setField(rq, 0, QRQ.rrq_depth, a.rrqDepth);
  setField(rq, 0, QRQ.rsq_depth, a.rsqDepth);
  setField(rq, 0, QRQ.sq_psn, a.sqPsn);
  setField(rq, 0, QRQ.access_perms_flags, flags);
  // Both buffers must be writable before either is written.
  const probe: Buffer[] = [];
  if (
    mem.slices(sqAt, sq.length, true, probe) !== MemStatus.OK ||
    mem.slices(rqAt, rq.length, true, probe) !== MemStatus.OK
  ) {
    return refuse(AdminStatus.BAD_ATTR);
  }
  mem.write(sqAt, sq);
  mem.write(rqAt, rq);
  return OK;
}

// ---- MR ------------------------------------------------------------------------------------

function createMr(env: AdminEnv, b: Buffer): AdminOutcome {
  const flags = getField(b, 0, CMR.dbid_flags);
  const spec = {
    key: getField(b, 0, CMR.id_ver),
    pdId: getField(b, 0, CMR.pd_id),
    flags,
    iova: getField(b, 0, CMR.va),
    length: getField(b, 0, CMR.length),
  };
  const access = flags & 0xfff;
  if ((access & ~MR_ACCESS_SUPPORTED) !== 0) return refuse(AdminStatus.BAD_ATTR);
  if (getField(b, 0, CMR.pt_type) !== 0 || getField(b, 0, CMR.dir_size_log2) !== 0) return refuse(AdminStatus.BAD_ATTR);
  if (spec.iova === U64_UNSAFE || spec.length === U64_UNSAFE) return refuse(AdminStatus.BAD_ATTR);
  const kind = mrKindOf(flags);
  if (kind === null) return refuse(AdminStatus.BAD_TYPE);
  const err = env.rm.checkMr(spec);
  if (err) return refuse(rmStatus(err));
  const mapCount = getField(b, 0, CMR.map_count);
  if (kind !== MrKind.USER) {
    // FRMRs get their pages from a REG_MR WQE, windows from BIND_MW: nothing mapped yet.
    if (mapCount !== 0 || spec.length !== 0) return refuse(AdminStatus.BAD_ATTR);
    const r = env.rm.createMr(spec, null);
    return r.ok ? OK : refuse(rmStatus(r.error));
  }
  const src = mrTableSource(
    {
      iova: spec.iova,
      length: spec.length,
      pageSizeLog2: getField(b, 0, CMR.page_size_log2),
      mapCount,
      dmaAddr: getField(b, 0, CMR.dma_addr),
    },
    env.rm.budget,
  );
  if (typeof src === 'number') return refuse(src);
  const register = (t: PageTable): AdminResult => {
    const r = env.rm.createMr(spec, t);
    return r.ok ? OK : refuse(rmStatus(r.error));
  };
  if (src instanceof PageTable) return register(src);
  // The page list (up to 2^30 entries) is read a share per turn: the command completes when it is all in.
  const loader = new PageListLoader(src, env.rm.budget);
  return {
    step(mem: GuestMemory): AdminResult | null {
      const t = loader.step(mem, RDMA_PT_ENTRIES_PER_TURN);
      if (t === null) return null;
      return typeof t === 'string' ? refuse(AdminStatus.BAD_ATTR) : register(t);
    },
    abort(): void {
      loader.abort();
    },
  };
}

// ---- AH ------------------------------------------------------------------------------------

function createAh(env: AdminEnv, mem: GuestMemory, b: Buffer): AdminResult {
  const id = getField(b, 0, AH.id_ver);
  const csum = getField(b, 0, AH.csum_profile);
  if (id >= RDMA_AH_COUNT) return refuse(AdminStatus.BAD_INDEX);
  if (env.rm.ahs.has(id)) return refuse(AdminStatus.BAD_STATE);
  if (csum > CSUM_PROFILE_MAX || getField(b, 0, AH.crypto) !== 0 || !dbidOk(getField(b, 0, AH.dbid_flags)))
    return refuse(AdminStatus.BAD_ATTR);
  const av = readTemplate(mem, getField(b, 0, AH.dma_addr), getField(b, 0, AH.length));
  if (typeof av === 'number') return refuse(av);
  const r = env.rm.createAh(id, getField(b, 0, AH.pd_id), av, csum);
  return r.ok ? OK : refuse(rmStatus(r.error));
}

// ---- destroy -------------------------------------------------------------------------------

function destroy(env: AdminEnv, b: Buffer, what: 'cq' | 'qp' | 'mr' | 'ah' | 'srq'): AdminResult {
  const id = getField(b, 0, DESTROY.id);
  const rm = env.rm;
  const h = env.hooks;
  switch (what) {
    case 'cq': {
      const r = rm.destroyCq(id);
      if (!r.ok) return refuse(rmStatus(r.error));
      h.cqDestroyed?.(r.value);
      return OK;
    }
    case 'qp': {
      const r = rm.destroyQp(id);
      if (!r.ok) return refuse(rmStatus(r.error));
      h.qpDestroyed?.(r.value);
      return OK;
    }
    case 'mr': {
      const r = rm.destroyMr(id);
      if (!r.ok) return refuse(rmStatus(r.error));
      h.mrDestroyed?.(r.value);
      return OK;
    }
    case 'ah': {
      const r = rm.destroyAh(id);
      return r.ok ? OK : refuse(rmStatus(r.error));
    }
    case 'srq': {
      const r = rm.destroySrq(id);
      if (!r.ok) return refuse(rmStatus(r.error));
      h.srqDestroyed?.(r.value);
      return OK;
    }
  }
}

// ---- stats ---------------------------------------------------------------------------------

/** Refresh the gauges (objects alive) before the values are read. */
function refreshGauges(env: { rm: ResourceManager; counters: CounterSet; hooks: DataPathHooks }): void {
  env.hooks.refreshCounters?.();
  const n = env.rm.counts();
  env.counters.set(DeviceCounter.qps_active, n.qps);
  env.counters.set(DeviceCounter.cqs_active, n.cqs);
  env.counters.set(DeviceCounter.mrs_active, n.mrs);
  env.counters.set(DeviceCounter.ahs_active, n.ahs);
  env.counters.set(DeviceCounter.srqs_active, n.srqs);
}

function stats(env: AdminEnv, mem: GuestMemory, op: number, b: Buffer): AdminResult {
  const addr = getField(b, 0, STATS.dma_addr);
  const length = getField(b, 0, STATS.length);
  const id = getField(b, 0, STATS.id_ver);
  if (addr <= 0 || getField(b, 0, STATS.type_state) !== 0) return refuse(AdminStatus.BAD_ATTR);
  const qpStats = op === AdminOp.QP_STATS_HDRS || op === AdminOp.QP_STATS_VALS;
  const names = qpStats ? QP_COUNTER_NAMES : DEVICE_COUNTER_NAMES;
  const headers = op === AdminOp.STATS_HDRS || op === AdminOp.QP_STATS_HDRS;
  if (length < (headers ? headersNeeded(names.length) : valuesSize(names.length)))
    return refuse(AdminStatus.MSG_TOO_BIG);
  let image: Buffer;
  if (headers) {
    if (id !== 0) return refuse(AdminStatus.BAD_INDEX);
    image = buildStatHeaders(names, length);
  } else if (qpStats) {
    const qp = env.rm.qps.get(id);
    if (!qp) return refuse(AdminStatus.BAD_INDEX);
    image = buildStatValues(qp.stats.values, length);
  } else {
    if (id !== 0) return refuse(AdminStatus.BAD_INDEX);
    if (env.faults.fail('stats-vals-error')) return refuse(AdminStatus.BAD_STATE);
    refreshGauges(env);
    image = buildStatValues(env.counters.values, length);
  }
  if (mem.write(addr, image) !== MemStatus.OK) {
    warnLimited(
      env.log,
      env.limiter,
      'rdma-stats-dma',
      `ionic rdma: stats buffer 0x${addr.toString(16)}+${image.length} is not guest memory`,
    );
    return refuse(AdminStatus.BAD_ATTR);
  }
  return OK;
}

// ---- SRQ (out-of-tree series) --------------------------------------------------------------

/** udma groups a CREATE_SRQ may name (the host always has two). */
const UDMA_MASK_ALL = 0x3;

function createSrq(env: AdminEnv, mem: GuestMemory, b: Buffer): AdminResult {
  const udmaMask = getField(b, 0, CSRQ.udma_mask);
  const respAt = getField(b, 0, CSRQ.resp_dma_addr);
  const respLen = getField(b, 0, CSRQ.resp_buf_len);
  const dbid = getField(b, 0, CSRQ.dbid);
  const limit = getField(b, 0, CSRQ.low_wqes_limit);
  if ((udmaMask & UDMA_MASK_ALL) === 0 || (udmaMask & ~UDMA_MASK_ALL) !== 0) return refuse(AdminStatus.BAD_ATTR);
  if (getField(b, 0, CSRQ.flags) !== 0 || !dbidOk(dbid) || respAt <= 0 || respLen < SRQR.SIZE)
    return refuse(AdminStatus.BAD_ATTR);
  if (env.rm.nextSrqId() < 0) return refuse(AdminStatus.BAD_INDEX);
  const ring = { depthLog2: getField(b, 0, CSRQ.depth_log2), strideLog2: getField(b, 0, CSRQ.stride_log2) };
  const t = loadRing(
    mem,
    {
      ...ring,
      pageSizeLog2: getField(b, 0, CSRQ.page_size_log2),
      mapCount: getField(b, 0, CSRQ.map_count),
      dmaAddr: getField(b, 0, CSRQ.dma_addr),
    },
    [RDMA_MIN_WQE_STRIDE_LOG2, RDMA_MAX_STRIDE_LOG2],
    false,
    env.rm.budget,
  );
  if (typeof t === 'number') return refuse(t);
  const resp = Buffer.alloc(SRQR.SIZE);
  const probe: Buffer[] = [];
  if (mem.slices(respAt, resp.length, true, probe) !== MemStatus.OK) {
    env.rm.releaseTable(t);
    return refuse(AdminStatus.BAD_ATTR);
  }
  const udma = udmaMask & 1 ? 0 : 1;
  const r = env.rm.createSrq(getField(b, 0, CSRQ.pd_id), udma, ring, t, limit, dbid);
  if (!r.ok) return refuse(rmStatus(r.error));
  setField(resp, 0, SRQR.id, r.value.id);
  setField(resp, 0, SRQR.udma_idx, udma);
  mem.write(respAt, resp);
  return { status: AdminStatus.OK, length: SRQR.SIZE };
}

function modifySrq(env: AdminEnv, b: Buffer): AdminResult {
  const r = env.rm.modifySrq(getField(b, 0, MSRQ.qid), getField(b, 0, MSRQ.low_wqes_limit));
  return r.ok ? OK : refuse(rmStatus(r.error));
}

function querySrq(env: AdminEnv, b: Buffer): AdminResult {
  const srq = env.rm.srqs.get(getField(b, 0, QSRQ.qid));
  return srq ? { status: AdminStatus.OK, length: srq.limit } : refuse(AdminStatus.BAD_INDEX);
}
