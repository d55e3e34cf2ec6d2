// The RDMA admin queue's QP commands (ionic RDMA R2.4): CREATE_QP, MODIFY_QP (with its header template) and
// QUERY_QP, validated against the limits and guest memory before the resource manager applies them, as every admin
// command is (./admin-commands.ts).

import type { AddressVector } from '../../rdma/address';
import {
  RDMA_MAX_STRIDE_LOG2,
  RDMA_MAX_TEMPLATE_LEN,
  RDMA_MIN_TEMPLATE_LEN,
  RDMA_MIN_WQE_STRIDE_LOG2,
  RDMA_AH_COUNT,
} from '../../rdma/limits';
import type { QpChanges } from '../../rdma/resources';
import { QP_ACCESS_MASK, QP_ATTR_MASK_KNOWN, QpAttrMask, QpFlag, QpState, QpType } from '../../rdma/types';
import type { GuestMemory } from '../../vfio-user/guest-memory';
import { MemStatus } from '../../vfio-user/guest-memory';
import { AdminStatus, CSUM_PROFILE_MAX } from './constants';
import { parseHeaderTemplate } from './header-template';
import {
  ionic_admin_create_qp,
  ionic_admin_mod_qp,
  ionic_admin_query_qp,
  ionic_v1_admin_query_qp_rq,
  ionic_v1_admin_query_qp_sq,
} from './layouts';
import { getField, setField, U64_UNSAFE } from '../../../protocol/field';
import { loadRing } from './rings';
import { AdminEnv, AdminResult, dbidOk, OK, refuse, rmStatus } from './admin-outcome';

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

export function createQp(env: AdminEnv, mem: GuestMemory, b: Buffer): AdminResult {
  const ts = getField(b, 0, ionic_admin_create_qp.type_state);
  const flags = getField(b, 0, ionic_admin_create_qp.priv_flags);
  const srqField = getField(b, 0, ionic_admin_create_qp.rq_tbl_index_srq_id);
  const srqId = srqField === NO_SRQ ? null : srqField;
  const spec = {
    id: getField(b, 0, ionic_admin_create_qp.id_ver),
    type: (ts & 0xf) as QpType,
    pdId: getField(b, 0, ionic_admin_create_qp.pd_id),
    flags,
    sqCqId: getField(b, 0, ionic_admin_create_qp.sq_cq_id),
    rqCqId: getField(b, 0, ionic_admin_create_qp.rq_cq_id),
    sq: {
      depthLog2: getField(b, 0, ionic_admin_create_qp.sq_depth_log2),
      strideLog2: getField(b, 0, ionic_admin_create_qp.sq_stride_log2),
    },
    rq:
      srqId === null
        ? {
            depthLog2: getField(b, 0, ionic_admin_create_qp.rq_depth_log2),
            strideLog2: getField(b, 0, ionic_admin_create_qp.rq_stride_log2),
          }
        : null,
    srqId,
    dbid: getField(b, 0, ionic_admin_create_qp.dbid_flags),
  };
  if (ts >> 4 !== QpState.RESET) return refuse(AdminStatus.BAD_STATE);
  if ((flags & ~CREATE_QP_FLAGS) !== 0 || !dbidOk(spec.dbid)) return refuse(AdminStatus.BAD_ATTR);
  if (
    getField(b, 0, ionic_admin_create_qp.sq_dir_size_log2_rsvd) !== 0 ||
    getField(b, 0, ionic_admin_create_qp.rq_dir_size_log2_rsvd) !== 0
  )
    return refuse(AdminStatus.BAD_ATTR);
  const err = env.rm.checkQp(spec);
  if (err) return refuse(rmStatus(err));
  const strides = [RDMA_MIN_WQE_STRIDE_LOG2, RDMA_MAX_STRIDE_LOG2] as const;
  const sq = loadRing(
    mem,
    {
      depthLog2: spec.sq.depthLog2,
      strideLog2: spec.sq.strideLog2,
      pageSizeLog2: getField(b, 0, ionic_admin_create_qp.sq_page_size_log2),
      mapCount: getField(b, 0, ionic_admin_create_qp.sq_map_count),
      dmaAddr: getField(b, 0, ionic_admin_create_qp.sq_dma_addr),
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
        pageSizeLog2: getField(b, 0, ionic_admin_create_qp.rq_page_size_log2),
        mapCount: getField(b, 0, ionic_admin_create_qp.rq_map_count),
        dmaAddr: getField(b, 0, ionic_admin_create_qp.rq_dma_addr),
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
  } else if (getField(b, 0, ionic_admin_create_qp.rq_map_count) !== 0) {
    env.rm.releaseTable(sq);
    return refuse(AdminStatus.BAD_ATTR);
  }
  const r = env.rm.createQp(spec, sq, rq);
  return r.ok ? OK : refuse(rmStatus(r.error));
}

/** Decode MODIFY_QP into changes, applying a field only when its mask bit says so (ionic RDMA R2.4). */
export function modifyQp(env: AdminEnv, mem: GuestMemory, b: Buffer): AdminResult {
  const qp = env.rm.qps.get(getField(b, 0, ionic_admin_mod_qp.id_ver));
  if (!qp) return refuse(AdminStatus.BAD_INDEX);
  const mask = getField(b, 0, ionic_admin_mod_qp.attr_mask);
  if ((mask & ~QP_ATTR_MASK_KNOWN) !== 0 || (mask & QpAttrMask.CAP) !== 0) return refuse(AdminStatus.BAD_ATTR);
  const c: QpChanges = {};
  const ts = getField(b, 0, ionic_admin_mod_qp.type_state);
  if (mask & QpAttrMask.STATE) {
    const next = ts & 0xf;
    if (next > QpState.ERR) return refuse(AdminStatus.BAD_ATTR);
    c.state = next as QpState;
  }
  if (mask & QpAttrMask.CUR_STATE && ts >> 4 > QpState.ERR) return refuse(AdminStatus.BAD_ATTR);
  const connected = qp.type === QpType.RC || qp.type === QpType.UC;
  const qkeyDest = getField(b, 0, ionic_admin_mod_qp.qkey_dest_qpn);
  if (mask & QpAttrMask.DEST_QPN && connected) {
    if (qkeyDest > 0xffffff) return refuse(AdminStatus.BAD_ATTR);
    c.destQpn = qkeyDest;
  }
  if (mask & QpAttrMask.QKEY && !connected) c.qkey = qkeyDest;
  if (mask & QpAttrMask.ACCESS_FLAGS) c.access = getField(b, 0, ionic_admin_mod_qp.access_flags) & QP_ACCESS_MASK;
  if (mask & QpAttrMask.EN_SQD_ASYNC_NOTIFY)
    c.sqdNotify = (getField(b, 0, ionic_admin_mod_qp.access_flags) & QpFlag.SQD_NOTIFY) !== 0;
  if (mask & QpAttrMask.PATH_MTU) {
    const pmtu = getField(b, 0, ionic_admin_mod_qp.pmtu);
    if (pmtu < 8 || pmtu > 12) return refuse(AdminStatus.BAD_ATTR);
    c.pmtu = pmtu;
  }
  const retry = getField(b, 0, ionic_admin_mod_qp.retry);
  if (mask & QpAttrMask.RETRY_CNT) {
    if ((retry & 0xf) > 7) return refuse(AdminStatus.BAD_ATTR);
    c.retryCnt = retry & 0xf;
  }
  if (mask & QpAttrMask.RNR_RETRY) {
    if (retry >> 4 > 7) return refuse(AdminStatus.BAD_ATTR);
    c.rnrRetry = retry >> 4;
  }
  if (mask & QpAttrMask.MIN_RNR_TIMER) {
    const v = getField(b, 0, ionic_admin_mod_qp.rnr_timer);
    if (v > 31) return refuse(AdminStatus.BAD_ATTR);
    c.rnrTimer = v;
  }
  if (mask & QpAttrMask.TIMEOUT) {
    const v = getField(b, 0, ionic_admin_mod_qp.retry_timeout);
    if (v > 31) return refuse(AdminStatus.BAD_ATTR);
    c.timeout = v;
  }
  if (mask & QpAttrMask.RQ_PSN) c.rqPsn = getField(b, 0, ionic_admin_mod_qp.rq_psn) & 0xffffff;
  if (mask & QpAttrMask.SQ_PSN) c.sqPsn = getField(b, 0, ionic_admin_mod_qp.sq_psn) & 0xffffff;
  // Depths are sent only with their mask bit and a non-zero value (0 = "not given").
  const rrq = getField(b, 0, ionic_admin_mod_qp.rrq_depth);
  const rsq = getField(b, 0, ionic_admin_mod_qp.rsq_depth);
  if (mask & QpAttrMask.MAX_QP_RD_ATOMIC && rrq > 0) {
    if (rrq > 8) return refuse(AdminStatus.BAD_ATTR);
    c.rrqDepth = rrq;
  }
  if (mask & QpAttrMask.MAX_DEST_RD_ATOMIC && rsq > 0) {
    if (rsq > 8) return refuse(AdminStatus.BAD_ATTR);
    c.rsqDepth = rsq;
  }
  if (mask & QpAttrMask.RATE_LIMIT) c.rateLimitKbps = getField(b, 0, ionic_admin_mod_qp.rate_limit_kbps);
  if (mask & QpAttrMask.AV) {
    if (!connected) return refuse(AdminStatus.BAD_ATTR);
    const ahIdLen = getField(b, 0, ionic_admin_mod_qp.ah_id_len);
    const len = ahIdLen >>> 24;
    const ahId = ahIdLen & 0xffffff;
    const csum = getField(b, 0, ionic_admin_mod_qp.tfp_csum_profile);
    if (ahId >= RDMA_AH_COUNT || csum > CSUM_PROFILE_MAX) return refuse(AdminStatus.BAD_ATTR);
    const av = readTemplate(mem, getField(b, 0, ionic_admin_mod_qp.dma_addr), len);
    if (typeof av === 'number') return refuse(av);
    c.av = av;
    c.ahId = ahId;
    c.pcp = getField(b, 0, ionic_admin_mod_qp.en_pcp) & 7;
    c.dscp = getField(b, 0, ionic_admin_mod_qp.ip_dscp) & 0x3f;
    c.csumProfile = csum;
  }
  if (env.hooks.modifyAllowed && !env.hooks.modifyAllowed(qp, c)) return refuse(AdminStatus.BAD_ATTR);
  const r = env.rm.modifyQp(qp.id, c);
  if (!r.ok) return refuse(rmStatus(r.error));
  env.hooks.qpModified?.(qp, r.value, c);
  return OK;
}

/** Read and parse a header template. */
export function readTemplate(mem: GuestMemory, addr: number, len: number): AddressVector | AdminStatus {
  if (len < RDMA_MIN_TEMPLATE_LEN || len > RDMA_MAX_TEMPLATE_LEN || addr === U64_UNSAFE || addr <= 0)
    return AdminStatus.BAD_ATTR;
  const tpl = Buffer.alloc(len);
  if (mem.read(addr, tpl) !== MemStatus.OK) return AdminStatus.BAD_ATTR;
  const av = parseHeaderTemplate(tpl);
  return typeof av === 'string' ? AdminStatus.BAD_ATTR : av;
}

/** QUERY_QP: write the "sq" and "rq" records where the driver asked (ionic RDMA R2.4). */
export function queryQp(env: AdminEnv, mem: GuestMemory, b: Buffer): AdminResult {
  const qp = env.rm.qps.get(getField(b, 0, ionic_admin_query_qp.id_ver));
  if (!qp) return refuse(AdminStatus.BAD_INDEX);
  const sqAt = getField(b, 0, ionic_admin_query_qp.sq_dma_addr);
  const rqAt = getField(b, 0, ionic_admin_query_qp.rq_dma_addr);
  if (sqAt <= 0 || rqAt <= 0) return refuse(AdminStatus.BAD_ATTR);
  const a = qp.attrs;
  const connected = qp.type === QpType.RC || qp.type === QpType.UC;
  const flags = a.access | (a.sqdNotify ? QpFlag.SQD_NOTIFY : 0) | (qp.state === QpState.SQD ? QpFlag.SQ_DRAINING : 0);
  const sq = Buffer.alloc(ionic_v1_admin_query_qp_sq.SIZE);
  setField(sq, 0, ionic_v1_admin_query_qp_sq.rnr_timer, a.rnrTimer);
  setField(sq, 0, ionic_v1_admin_query_qp_sq.retry_timeout, a.timeout);
  setField(sq, 0, ionic_v1_admin_query_qp_sq.access_perms_flags, flags);
  setField(sq, 0, ionic_v1_admin_query_qp_sq.pkey_id, 0);
  setField(sq, 0, ionic_v1_admin_query_qp_sq.qkey_dest_qpn, connected ? a.destQpn : (a.qkey ?? 0));
  setField(sq, 0, ionic_v1_admin_query_qp_sq.rate_limit_kbps, a.rateLimitKbps);
  setField(sq, 0, ionic_v1_admin_query_qp_sq.rq_psn, a.rqPsn);
  const rq = Buffer.alloc(ionic_v1_admin_query_qp_rq.SIZE);
  setField(rq, 0, ionic_v1_admin_query_qp_rq.state_pmtu, (qp.state << 4) | (a.pmtu & 0xf));
  setField(rq, 0, ionic_v1_admin_query_qp_rq.retry_rnrtry, (a.retryCnt & 0xf) | (a.rnrRetry << 4));
  setField(rq, 0, ionic_v1_admin_query_qp_rq.rrq_depth, a.rrqDepth);
  setField(rq, 0, ionic_v1_admin_query_qp_rq.rsq_depth, a.rsqDepth);
  setField(rq, 0, ionic_v1_admin_query_qp_rq.sq_psn, a.sqPsn);
  setField(rq, 0, ionic_v1_admin_query_qp_rq.access_perms_flags, flags);
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
