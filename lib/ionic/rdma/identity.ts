// The RDMA section of lif_identity (ionic RDMA R1.4): what ionic_rdma.ko and
// libionic size themselves by. Counts come from lib/rdma/limits.ts (the
// device refuses ids past them), the event queue count from the NIC profile.

import {
  RDMA_AH_COUNT,
  RDMA_AQ_COUNT,
  RDMA_CQ_COUNT,
  RDMA_MAX_STRIDE_LOG2,
  RDMA_MR_COUNT,
  RDMA_NPTS_PER_LIF,
  RDMA_QP_COUNT,
  RDMA_UDMA_SHIFT,
} from '../../rdma/limits';
import type { NicProfile } from '../profile';
import { RDMA_ADMIN_OPCODES, RDMA_STAT_GLOBAL, RDMA_STAT_QP, RdmaQType } from './constants';
import { ionic_lif_logical_qtype, ionic_lif_rdma_identity } from './layouts';
import { setField } from '../../../protocol/field';

/** rdma.version: 1 = v1 WQE opcodes (the provider accepts 1..2). */
const RDMA_VERSION = 1;
const RDMA_MINOR_VERSION = 0;
/** rdma.qp_opcodes: v1 send opcodes 0..10 (the provider refuses v1 with fewer than 11). */
const RDMA_QP_OPCODES = 11;
/** Strides of the real firmware (not used by the host). */
const RDMA_CL_STRIDE = 6;
const RDMA_PTE_STRIDE = 3;
const RDMA_RRQ_STRIDE = 6;
const RDMA_RSQ_STRIDE = 5;

/** A profile with RDMA event queues offers RDMA (rdma_eqs = 0 means an Ethernet-only NIC). */
export function rdmaEnabled(p: NicProfile): boolean {
  return p.rdmaEqs > 0;
}

/** Event queue ids the device accepts: the profile's count (the driver uses min(count, CPUs, 32)). */
export function rdmaEqCount(p: NicProfile): number {
  return p.rdmaEqs;
}

function qtype(w: Buffer, at: number, type: number, count: number, base: number): void {
  setField(w, at, ionic_lif_logical_qtype.qtype, type);
  setField(w, at, ionic_lif_logical_qtype.qid_count, count);
  setField(w, at, ionic_lif_logical_qtype.qid_base, base);
}

/** Write lif_identity.rdma at `at` (lif_identity + 392). */
export function writeRdmaIdentity(w: Buffer, at: number, p: NicProfile): void {
  w.fill(0, at, at + ionic_lif_rdma_identity.SIZE);
  setField(w, at, ionic_lif_rdma_identity.version, RDMA_VERSION);
  setField(w, at, ionic_lif_rdma_identity.qp_opcodes, RDMA_QP_OPCODES);
  setField(w, at, ionic_lif_rdma_identity.admin_opcodes, RDMA_ADMIN_OPCODES);
  setField(w, at, ionic_lif_rdma_identity.minor_version, RDMA_MINOR_VERSION);
  setField(w, at, ionic_lif_rdma_identity.npts_per_lif, RDMA_NPTS_PER_LIF);
  setField(w, at, ionic_lif_rdma_identity.nmrs_per_lif, RDMA_MR_COUNT);
  setField(w, at, ionic_lif_rdma_identity.nahs_per_lif, RDMA_AH_COUNT);
  setField(w, at, ionic_lif_rdma_identity.max_stride, RDMA_MAX_STRIDE_LOG2);
  setField(w, at, ionic_lif_rdma_identity.cl_stride, RDMA_CL_STRIDE);
  setField(w, at, ionic_lif_rdma_identity.pte_stride, RDMA_PTE_STRIDE);
  setField(w, at, ionic_lif_rdma_identity.rrq_stride, RDMA_RRQ_STRIDE);
  setField(w, at, ionic_lif_rdma_identity.rsq_stride, RDMA_RSQ_STRIDE);
  setField(w, at, ionic_lif_rdma_identity.dcqcn_profiles, 0);
  setField(w, at, ionic_lif_rdma_identity.udma_shift, RDMA_UDMA_SHIFT);
  // page_size_cap is read only from version 2.1 on; v1 hosts assume 4 KiB / 2 MiB / 1 GiB.
  setField(w, at, ionic_lif_rdma_identity.page_size_cap, 0);
  // A private AQ type, so AQ ids start at 0 and never meet the Ethernet admin queue's.
  qtype(w, at + ionic_lif_rdma_identity.AQ_QTYPE, RdmaQType.AQ, RDMA_AQ_COUNT, 0);
  qtype(w, at + ionic_lif_rdma_identity.SQ_QTYPE, RdmaQType.SQ, RDMA_QP_COUNT, 0);
  qtype(w, at + ionic_lif_rdma_identity.RQ_QTYPE, RdmaQType.RQ, RDMA_QP_COUNT, 0);
  qtype(w, at + ionic_lif_rdma_identity.CQ_QTYPE, RdmaQType.CQ, RDMA_CQ_COUNT, 0);
  // eq_base must be 0: the driver's CQ->EQ formula does not add it (ionic RDMA R1.3).
  qtype(w, at + ionic_lif_rdma_identity.EQ_QTYPE, RdmaQType.EQ, rdmaEqCount(p), 0);
  setField(w, at, ionic_lif_rdma_identity.stats_type, RDMA_STAT_GLOBAL | RDMA_STAT_QP);
}
