// The RDMA admin queue's commands (ionic RDMA R2.4): each handler decodes its
// body once, validates every field against the limits and guest memory, then
// applies the command to the resource manager (validate, then apply: a
// refused command changes nothing). The result is an AdminStatus for the
// CQE; on success `length` goes in status_length (the SRQ series reads the
// response length there). Nothing here throws on guest input.

import { warnLimited } from '../../log';
import { DeviceCounter, DEVICE_COUNTER_NAMES, QP_COUNTER_NAMES, CounterSet } from '../../rdma/counters';
import {
  RDMA_MAX_STRIDE_LOG2,
  RDMA_MIN_WQE_STRIDE_LOG2,
  RDMA_CQE_STRIDE_LOG2,
  RDMA_AH_COUNT,
  RDMA_PT_ENTRIES_PER_TURN,
} from '../../rdma/limits';
import type { DataPathHooks } from '../../rdma/hooks';
import type { ResourceManager } from '../../rdma/resources';
import { mrKindOf } from '../../rdma/resources';
import { PageListLoader, PageTable } from '../../rdma/page-table';
import { MR_ACCESS_SUPPORTED, MrKind } from '../../rdma/types';
import type { GuestMemory } from '../../vfio-user/guest-memory';
import { MemStatus } from '../../vfio-user/guest-memory';
import { AdminOp, AdminStatus, CSUM_PROFILE_MAX } from './constants';
import {
  ionic_admin_create_ah,
  ionic_admin_create_cq,
  ionic_admin_create_mr,
  ionic_admin_create_qp,
  ionic_admin_create_srq,
  ionic_admin_create_srq_resp,
  ionic_admin_destroy,
  ionic_admin_mod_qp,
  ionic_admin_modify_srq,
  ionic_admin_query_qp,
  ionic_admin_query_srq,
  ionic_admin_stats_hdr,
} from './layouts';
import { AdminEnv, AdminOutcome, AdminResult, dbidOk, OK, refuse, rmStatus } from './admin-outcome';
import { createQp, modifyQp, queryQp, readTemplate } from './admin-qp';
import { getField, setField, U64_UNSAFE } from '../../../protocol/field';
import { loadRing, mrTableSource } from './rings';
import { buildStatHeaders, buildStatValues, headersNeeded, valuesSize } from './stats';

/** Body bytes each opcode needs at least (its struct size). */
const MIN_LEN: ReadonlyMap<number, number> = new Map([
  [AdminOp.CREATE_CQ, ionic_admin_create_cq.SIZE],
  [AdminOp.CREATE_QP, ionic_admin_create_qp.SIZE],
  [AdminOp.CREATE_MR, ionic_admin_create_mr.SIZE],
  [AdminOp.STATS_HDRS, ionic_admin_stats_hdr.SIZE],
  [AdminOp.STATS_VALS, ionic_admin_stats_hdr.SIZE],
  [AdminOp.QP_STATS_HDRS, ionic_admin_stats_hdr.SIZE],
  [AdminOp.QP_STATS_VALS, ionic_admin_stats_hdr.SIZE],
  [AdminOp.DESTROY_MR, ionic_admin_destroy.SIZE],
  [AdminOp.DESTROY_CQ, ionic_admin_destroy.SIZE],
  [AdminOp.DESTROY_QP, ionic_admin_destroy.SIZE],
  [AdminOp.DESTROY_AH, ionic_admin_destroy.SIZE],
  [AdminOp.MODIFY_QP, ionic_admin_mod_qp.SIZE],
  [AdminOp.QUERY_QP, ionic_admin_query_qp.SIZE],
  [AdminOp.CREATE_AH, ionic_admin_create_ah.SIZE],
  [AdminOp.CREATE_SRQ, ionic_admin_create_srq.SIZE],
  [AdminOp.MODIFY_SRQ, ionic_admin_modify_srq.SIZE],
  [AdminOp.QUERY_SRQ, ionic_admin_query_srq.SIZE],
  [AdminOp.DESTROY_SRQ, ionic_admin_destroy.SIZE],
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

// ---- CQ ------------------------------------------------------------------------------------

function createCq(env: AdminEnv, mem: GuestMemory, b: Buffer): AdminResult {
  const spec = {
    id: getField(b, 0, ionic_admin_create_cq.id_ver),
    eqId: getField(b, 0, ionic_admin_create_cq.eq_id),
    depthLog2: getField(b, 0, ionic_admin_create_cq.depth_log2),
    strideLog2: getField(b, 0, ionic_admin_create_cq.stride_log2),
    dbid: getField(b, 0, ionic_admin_create_cq.dbid_flags),
    admin: false,
  };
  if (!env.eqs.has(spec.eqId)) return refuse(AdminStatus.BAD_INDEX);
  if (
    getField(b, 0, ionic_admin_create_cq.dir_size_log2_rsvd) !== 0 ||
    getField(b, 0, ionic_admin_create_cq.cq_flags) !== 0 ||
    !dbidOk(spec.dbid)
  )
    return refuse(AdminStatus.BAD_ATTR);
  const err = env.rm.checkCq(spec);
  if (err) return refuse(rmStatus(err));
  const t = loadRing(
    mem,
    {
      depthLog2: spec.depthLog2,
      strideLog2: spec.strideLog2,
      pageSizeLog2: getField(b, 0, ionic_admin_create_cq.page_size_log2),
      mapCount: getField(b, 0, ionic_admin_create_cq.map_count),
      dmaAddr: getField(b, 0, ionic_admin_create_cq.dma_addr),
    },
    [RDMA_CQE_STRIDE_LOG2, RDMA_CQE_STRIDE_LOG2],
    true,
    env.rm.budget,
  );
  if (typeof t === 'number') return refuse(t);
  const r = env.rm.createCq(spec, t);
  return r.ok ? OK : refuse(rmStatus(r.error));
}

// ---- MR ------------------------------------------------------------------------------------

function createMr(env: AdminEnv, b: Buffer): AdminOutcome {
  const flags = getField(b, 0, ionic_admin_create_mr.dbid_flags);
  const spec = {
    key: getField(b, 0, ionic_admin_create_mr.id_ver),
    pdId: getField(b, 0, ionic_admin_create_mr.pd_id),
    flags,
    iova: getField(b, 0, ionic_admin_create_mr.va),
    length: getField(b, 0, ionic_admin_create_mr.length),
  };
  const access = flags & 0xfff;
  if ((access & ~MR_ACCESS_SUPPORTED) !== 0) return refuse(AdminStatus.BAD_ATTR);
  if (getField(b, 0, ionic_admin_create_mr.pt_type) !== 0 || getField(b, 0, ionic_admin_create_mr.dir_size_log2) !== 0)
    return refuse(AdminStatus.BAD_ATTR);
  if (spec.iova === U64_UNSAFE || spec.length === U64_UNSAFE) return refuse(AdminStatus.BAD_ATTR);
  const kind = mrKindOf(flags);
  if (kind === null) return refuse(AdminStatus.BAD_TYPE);
  const err = env.rm.checkMr(spec);
  if (err) return refuse(rmStatus(err));
  const mapCount = getField(b, 0, ionic_admin_create_mr.map_count);
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
      pageSizeLog2: getField(b, 0, ionic_admin_create_mr.page_size_log2),
      mapCount,
      dmaAddr: getField(b, 0, ionic_admin_create_mr.dma_addr),
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
  const id = getField(b, 0, ionic_admin_create_ah.id_ver);
  const csum = getField(b, 0, ionic_admin_create_ah.csum_profile);
  if (id >= RDMA_AH_COUNT) return refuse(AdminStatus.BAD_INDEX);
  if (env.rm.ahs.has(id)) return refuse(AdminStatus.BAD_STATE);
  if (
    csum > CSUM_PROFILE_MAX ||
    getField(b, 0, ionic_admin_create_ah.crypto) !== 0 ||
    !dbidOk(getField(b, 0, ionic_admin_create_ah.dbid_flags))
  )
    return refuse(AdminStatus.BAD_ATTR);
  const av = readTemplate(
    mem,
    getField(b, 0, ionic_admin_create_ah.dma_addr),
    getField(b, 0, ionic_admin_create_ah.length),
  );
  if (typeof av === 'number') return refuse(av);
  const r = env.rm.createAh(id, getField(b, 0, ionic_admin_create_ah.pd_id), av, csum);
  return r.ok ? OK : refuse(rmStatus(r.error));
}

// ---- destroy -------------------------------------------------------------------------------

function destroy(env: AdminEnv, b: Buffer, what: 'cq' | 'qp' | 'mr' | 'ah' | 'srq'): AdminResult {
  const id = getField(b, 0, ionic_admin_destroy.id);
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
  const addr = getField(b, 0, ionic_admin_stats_hdr.dma_addr);
  const length = getField(b, 0, ionic_admin_stats_hdr.length);
  const id = getField(b, 0, ionic_admin_stats_hdr.id_ver);
  if (addr <= 0 || getField(b, 0, ionic_admin_stats_hdr.type_state) !== 0) return refuse(AdminStatus.BAD_ATTR);
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
  const udmaMask = getField(b, 0, ionic_admin_create_srq.udma_mask);
  const respAt = getField(b, 0, ionic_admin_create_srq.resp_dma_addr);
  const respLen = getField(b, 0, ionic_admin_create_srq.resp_buf_len);
  const dbid = getField(b, 0, ionic_admin_create_srq.dbid);
  const limit = getField(b, 0, ionic_admin_create_srq.low_wqes_limit);
  if ((udmaMask & UDMA_MASK_ALL) === 0 || (udmaMask & ~UDMA_MASK_ALL) !== 0) return refuse(AdminStatus.BAD_ATTR);
  if (
    getField(b, 0, ionic_admin_create_srq.flags) !== 0 ||
    !dbidOk(dbid) ||
    respAt <= 0 ||
    respLen < ionic_admin_create_srq_resp.SIZE
  )
    return refuse(AdminStatus.BAD_ATTR);
  if (env.rm.nextSrqId() < 0) return refuse(AdminStatus.BAD_INDEX);
  const ring = {
    depthLog2: getField(b, 0, ionic_admin_create_srq.depth_log2),
    strideLog2: getField(b, 0, ionic_admin_create_srq.stride_log2),
  };
  const t = loadRing(
    mem,
    {
      ...ring,
      pageSizeLog2: getField(b, 0, ionic_admin_create_srq.page_size_log2),
      mapCount: getField(b, 0, ionic_admin_create_srq.map_count),
      dmaAddr: getField(b, 0, ionic_admin_create_srq.dma_addr),
    },
    [RDMA_MIN_WQE_STRIDE_LOG2, RDMA_MAX_STRIDE_LOG2],
    false,
    env.rm.budget,
  );
  if (typeof t === 'number') return refuse(t);
  const resp = Buffer.alloc(ionic_admin_create_srq_resp.SIZE);
  const probe: Buffer[] = [];
  if (mem.slices(respAt, resp.length, true, probe) !== MemStatus.OK) {
    env.rm.releaseTable(t);
    return refuse(AdminStatus.BAD_ATTR);
  }
  const udma = udmaMask & 1 ? 0 : 1;
  const r = env.rm.createSrq(getField(b, 0, ionic_admin_create_srq.pd_id), udma, ring, t, limit, dbid);
  if (!r.ok) return refuse(rmStatus(r.error));
  setField(resp, 0, ionic_admin_create_srq_resp.id, r.value.id);
  setField(resp, 0, ionic_admin_create_srq_resp.udma_idx, udma);
  mem.write(respAt, resp);
  return { status: AdminStatus.OK, length: ionic_admin_create_srq_resp.SIZE };
}

function modifySrq(env: AdminEnv, b: Buffer): AdminResult {
  const r = env.rm.modifySrq(
    getField(b, 0, ionic_admin_modify_srq.qid),
    getField(b, 0, ionic_admin_modify_srq.low_wqes_limit),
  );
  return r.ok ? OK : refuse(rmStatus(r.error));
}

function querySrq(env: AdminEnv, b: Buffer): AdminResult {
  const srq = env.rm.srqs.get(getField(b, 0, ionic_admin_query_srq.qid));
  return srq ? { status: AdminStatus.OK, length: srq.limit } : refuse(AdminStatus.BAD_INDEX);
}
