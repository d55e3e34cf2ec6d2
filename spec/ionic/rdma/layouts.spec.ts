// Pins lib/ionic/rdma/layouts.ts to docs/driver-contract.md (part R): each
// table's offsets, sizes and byte orders, written out here from the contract.
// (The CQE is pinned in spec/rdma/datapath/wqe-layout.spec.ts, the field codec in
// spec/protocol/field.spec.ts.)

import { expect } from 'chai';
import {
  ionic_admin_create_ah,
  ionic_admin_create_cq,
  ionic_admin_create_mr,
  ionic_admin_create_qp,
  ionic_admin_destroy,
  ionic_admin_mod_qp,
  ionic_admin_query_qp,
  ionic_admin_stats_hdr,
  ionic_lif_logical_qtype,
  ionic_lif_rdma_identity,
  ionic_rdma_queue_cmd,
  ionic_rdma_reset_cmd,
  ionic_v1_admin_query_qp_rq,
  ionic_v1_admin_query_qp_sq,
  ionic_v1_eqe,
  ionic_v1_stat,
  ionic_v1_stat_value,
} from '../../../lib/ionic/rdma/layouts';
import type { Field } from '../../../protocol/field';

type Spec = Record<string, [number, number, 'le' | 'be' | 'raw']>;

function pin(table: Record<string, unknown>, size: number, spec: Spec): void {
  expect(table.SIZE, 'SIZE').to.equal(size);
  for (const [name, [off, sz, order]] of Object.entries(spec)) {
    const f = table[name] as Field | undefined;
    expect(f, name).to.not.equal(undefined);
    expect([f!.off, f!.size, f!.order], name).to.deep.equal([off, sz, order]);
  }
  const fields = Object.entries(table).filter(([, v]) => typeof v === 'object');
  expect(fields.length, 'every field pinned').to.equal(Object.keys(spec).length);
}

describe('ionic rdma: layouts match the contract', () => {
  it('bootstrap commands (R1.1, R1.2)', () => {
    pin(ionic_rdma_reset_cmd, 64, { opcode: [0, 1, 'le'], lif_index: [2, 2, 'le'] });
    pin(ionic_rdma_queue_cmd, 64, {
      opcode: [0, 1, 'le'],
      lif_index: [2, 2, 'le'],
      qid_ver: [4, 4, 'le'],
      cid: [8, 4, 'le'],
      dbid: [12, 2, 'le'],
      depth_log2: [14, 1, 'le'],
      stride_log2: [15, 1, 'le'],
      dma_addr: [16, 8, 'le'],
    });
  });

  it('lif_identity RDMA section (R1.4; absolute offset = 392 + relative)', () => {
    pin(ionic_lif_rdma_identity as unknown as Record<string, unknown>, 256, {
      version: [0, 1, 'le'],
      qp_opcodes: [1, 1, 'le'],
      admin_opcodes: [2, 1, 'le'],
      minor_version: [3, 1, 'le'],
      npts_per_lif: [4, 4, 'le'],
      nmrs_per_lif: [8, 4, 'le'],
      nahs_per_lif: [12, 4, 'le'],
      max_stride: [16, 1, 'le'],
      cl_stride: [17, 1, 'le'],
      pte_stride: [18, 1, 'le'],
      rrq_stride: [19, 1, 'le'],
      rsq_stride: [20, 1, 'le'],
      dcqcn_profiles: [21, 1, 'le'],
      udma_shift: [22, 1, 'le'],
      page_size_cap: [24, 8, 'le'],
      stats_type: [92, 2, 'le'],
    });
    expect(
      [
        ionic_lif_rdma_identity.AQ_QTYPE,
        ionic_lif_rdma_identity.SQ_QTYPE,
        ionic_lif_rdma_identity.RQ_QTYPE,
        ionic_lif_rdma_identity.CQ_QTYPE,
        ionic_lif_rdma_identity.EQ_QTYPE,
      ].map((o) => 392 + o),
    ).to.deep.equal([424, 436, 448, 460, 472]);
    pin(ionic_lif_logical_qtype, 12, { qtype: [0, 1, 'le'], qid_count: [4, 4, 'le'], qid_base: [8, 4, 'le'] });
  });

  it('admin command bodies (R2.4)', () => {
    pin(ionic_admin_create_cq, 34, {
      eq_id: [0, 4, 'le'],
      depth_log2: [4, 1, 'le'],
      stride_log2: [5, 1, 'le'],
      dir_size_log2_rsvd: [6, 1, 'le'],
      page_size_log2: [7, 1, 'le'],
      cq_flags: [8, 4, 'le'],
      id_ver: [12, 4, 'le'],
      tbl_index: [16, 4, 'le'],
      map_count: [20, 4, 'le'],
      dma_addr: [24, 8, 'le'],
      dbid_flags: [32, 2, 'le'],
    });
    pin(ionic_admin_create_qp, 64, {
      pd_id: [0, 4, 'le'],
      priv_flags: [4, 4, 'be'],
      sq_cq_id: [8, 4, 'le'],
      sq_depth_log2: [12, 1, 'le'],
      sq_stride_log2: [13, 1, 'le'],
      sq_dir_size_log2_rsvd: [14, 1, 'le'],
      sq_page_size_log2: [15, 1, 'le'],
      sq_tbl_index_xrcd_id: [16, 4, 'le'],
      sq_map_count: [20, 4, 'le'],
      sq_dma_addr: [24, 8, 'le'],
      rq_cq_id: [32, 4, 'le'],
      rq_depth_log2: [36, 1, 'le'],
      rq_stride_log2: [37, 1, 'le'],
      rq_dir_size_log2_rsvd: [38, 1, 'le'],
      rq_page_size_log2: [39, 1, 'le'],
      rq_tbl_index_srq_id: [40, 4, 'le'],
      rq_map_count: [44, 4, 'le'],
      rq_dma_addr: [48, 8, 'le'],
      id_ver: [56, 4, 'le'],
      dbid_flags: [60, 2, 'le'],
      type_state: [62, 1, 'le'],
    });
    pin(ionic_admin_create_mr, 45, {
      va: [0, 8, 'le'],
      length: [8, 8, 'le'],
      pd_id: [16, 4, 'le'],
      id_ver: [20, 4, 'le'],
      tbl_index: [24, 4, 'le'],
      map_count: [28, 4, 'le'],
      dma_addr: [32, 8, 'le'],
      dbid_flags: [40, 2, 'le'],
      pt_type: [42, 1, 'le'],
      dir_size_log2: [43, 1, 'le'],
      page_size_log2: [44, 1, 'le'],
    });
    pin(ionic_admin_destroy, 4, { id: [0, 4, 'le'] });
    pin(ionic_admin_mod_qp, 60, {
      attr_mask: [0, 4, 'be'],
      dcqcn_profile: [4, 1, 'le'],
      tfp_csum_profile: [5, 1, 'le'],
      access_flags: [6, 2, 'be'],
      rq_psn: [8, 4, 'le'],
      sq_psn: [12, 4, 'le'],
      qkey_dest_qpn: [16, 4, 'le'],
      rate_limit_kbps: [20, 4, 'le'],
      pmtu: [24, 1, 'le'],
      retry: [25, 1, 'le'],
      rnr_timer: [26, 1, 'le'],
      retry_timeout: [27, 1, 'le'],
      rsq_depth: [28, 1, 'le'],
      rrq_depth: [29, 1, 'le'],
      pkey_id: [30, 2, 'le'],
      ah_id_len: [32, 4, 'le'],
      en_pcp: [36, 1, 'le'],
      ip_dscp: [37, 1, 'le'],
      rsvd2: [38, 1, 'le'],
      type_state: [39, 1, 'le'],
      rrq_index: [40, 4, 'le'],
      rsq_index: [44, 4, 'le'],
      dma_addr: [48, 8, 'le'],
      id_ver: [56, 4, 'le'],
    });
    pin(ionic_admin_query_qp, 34, {
      hdr_dma_addr: [0, 8, 'le'],
      sq_dma_addr: [8, 8, 'le'],
      rq_dma_addr: [16, 8, 'le'],
      ah_id: [24, 4, 'le'],
      id_ver: [28, 4, 'le'],
      dbid_flags: [32, 2, 'le'],
    });
    pin(ionic_v1_admin_query_qp_sq, 20, {
      rnr_timer: [0, 1, 'le'],
      retry_timeout: [1, 1, 'le'],
      access_perms_flags: [2, 2, 'be'],
      rsvd: [4, 2, 'be'],
      pkey_id: [6, 2, 'be'],
      qkey_dest_qpn: [8, 4, 'be'],
      rate_limit_kbps: [12, 4, 'be'],
      rq_psn: [16, 4, 'be'],
    });
    pin(ionic_v1_admin_query_qp_rq, 12, {
      state_pmtu: [0, 1, 'le'],
      retry_rnrtry: [1, 1, 'le'],
      rrq_depth: [2, 1, 'le'],
      rsq_depth: [3, 1, 'le'],
      sq_psn: [4, 4, 'be'],
      access_perms_flags: [8, 2, 'be'],
      rsvd: [10, 2, 'be'],
    });
    pin(ionic_admin_create_ah, 24, {
      dma_addr: [0, 8, 'le'],
      length: [8, 4, 'le'],
      pd_id: [12, 4, 'le'],
      id_ver: [16, 4, 'le'],
      dbid_flags: [20, 2, 'le'],
      csum_profile: [22, 1, 'le'],
      crypto: [23, 1, 'le'],
    });
    pin(ionic_admin_stats_hdr, 17, {
      dma_addr: [0, 8, 'le'],
      length: [8, 4, 'le'],
      id_ver: [12, 4, 'le'],
      type_state: [16, 1, 'le'],
    });
  });

  it('EQE and stat records (R4.8, R7)', () => {
    pin(ionic_v1_eqe, 4, { evt: [0, 4, 'be'] });
    pin(ionic_v1_stat, 32, { type_off: [0, 4, 'be'], name: [4, 28, 'raw'] });
    pin(ionic_v1_stat_value, 8, { value: [0, 8, 'le'] });
  });
});
