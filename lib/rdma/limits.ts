// Limits of the RDMA resources, in one place. The counts are what LIF_IDENTIFY
// advertises (lib/ionic/rdma/identity.ts writes them), so the driver's own
// allocators never hand out an id the device refuses; the rest bound what a
// guest can make the server allocate. Every limit is finite and has a
// negative test.

/** QP ids are 0..RDMA_QP_COUNT-1 (sq_qtype.qid_count). A power of two (ionic RDMA R4.9). */
export const RDMA_QP_COUNT = 4096;
/** CQ ids are 0..RDMA_CQ_COUNT-1 (cq_qtype.qid_count, base 0); every kernel/user CQ is two device CQs. */
export const RDMA_CQ_COUNT = 8192;
/** MR/MW key indices are 1..RDMA_MR_COUNT-1 (nmrs_per_lif; index 0 is the reserved DMA key). */
export const RDMA_MR_COUNT = 16384;
/** AH ids are 0..RDMA_AH_COUNT-1 (nahs_per_lif), shared with the AH ids of RC QPs. */
export const RDMA_AH_COUNT = 16384;
/** SRQs the device hands out (CREATE_SRQ, out-of-tree drivers only). */
export const RDMA_SRQ_COUNT = 1024;
/** SRQ ids are RDMA_SRQ_BASE + index: above the QP id range, so an RQ doorbell names either. */
export const RDMA_SRQ_BASE = RDMA_QP_COUNT;
/** RDMA admin queues (aq_qtype.qid_count, base 0); the driver uses at most 4. */
export const RDMA_AQ_COUNT = 2;
/** log2 queues per queue group (udma_shift): 1 <= g < log2(count / 2) for both counts (ionic RDMA R4.9). */
export const RDMA_UDMA_SHIFT = 6;

/**
 * The udma group ("pipeline") a QP or CQ id belongs to: the bit at udma_shift
 * (ionic RDMA R4.9). The driver puts every QP in one udma and gives it the CQ
 * ids of that udma's halves of its CQs; ids of both halves are ordinary ids
 * below the count to the device, which accepts either.
 */
export function udmaOf(id: number, shift = RDMA_UDMA_SHIFT): number {
  return Math.floor(id / 2 ** shift) & 1;
}

/**
 * Page-table entries per LIF (npts_per_lif): the driver derives max_mr_size =
 * npts * 4096 / 2 = 4 TiB from it, and max_fast_reg_page_list_len = npts / 2.
 */
export const RDMA_NPTS_PER_LIF = 2 ** 31;
/** Most pages one MR may list (the driver's own FRMR bound, npts / 2). */
export const RDMA_MAX_MR_PAGES = RDMA_NPTS_PER_LIF / 2;
/**
 * Most runs (merged page-table entries) kept for all live MRs and rings
 * together: 16 bytes each, so at most 256 MiB of server memory however the
 * guest fragments its pages. A registration past it is refused.
 */
export const RDMA_MAX_PT_RUNS = 1 << 24;
/** Page-table entries read from guest memory per chunk while building a table. */
export const RDMA_PT_READ_CHUNK = 8192;
/**
 * Page-table entries one event-loop turn reads (about a millisecond): a longer
 * list (an MR of up to RDMA_MAX_MR_PAGES pages) is read over several turns,
 * so no registration holds the loop, and with it every vCPU's MMIO, for long.
 */
export const RDMA_PT_ENTRIES_PER_TURN = 1 << 14;

/** Ring geometry bounds (ionic RDMA R4.1): depth up to 2^16 slots, strides 2^2..2^11 bytes. */
export const RDMA_MAX_DEPTH_LOG2 = 16;
export const RDMA_MIN_DEPTH_LOG2 = 1;
/** max_stride in LIF_IDENTIFY: log2 of the largest SQ/RQ WQE (2 KiB). */
export const RDMA_MAX_STRIDE_LOG2 = 11;
/** Smallest SQ/RQ WQE: 64 bytes (sizeof ionic_v1_wqe). */
export const RDMA_MIN_WQE_STRIDE_LOG2 = 6;
/** CQE, EQE and admin WQE sizes are fixed. */
export const RDMA_CQE_STRIDE_LOG2 = 5;
export const RDMA_EQE_STRIDE_LOG2 = 2;
export const RDMA_AQ_STRIDE_LOG2 = 6;

/** MR page sizes a table may use (4 KiB, 2 MiB, 1 GiB: IONIC_PAGE_SIZE_SUPPORTED). */
export const RDMA_MR_PAGE_SHIFTS: readonly number[] = [12, 21, 30];

/** Header templates: the shortest (Ethernet + IPv4 + UDP) and a bound past the longest (VLAN + IPv6 + UDP = 66). */
export const RDMA_MIN_TEMPLATE_LEN = 42;
export const RDMA_MAX_TEMPLATE_LEN = 128;

/** Doorbell pages per LIF (dev_identity ndbpgs_per_lif): page 0 is the kernel's, 1.. one per open ibv_context. */
export const RDMA_NDBPGS_PER_LIF = 256;

/** The GSI QP's reserved id; QP 0 (SMI) is never used. */
export const GSI_QPN = 1;
/** The host's "scrubbed CQE" qid (ionic_v1_cqe_clean): never a real QP id. */
export const SCRUBBED_QPN = 0xffffff;

/**
 * Largest RDMA message: both host stacks refuse a work request whose SGE
 * lengths add up to more than 2^31 (IB's maximum message size), so a WQE or a
 * remote range claiming more is garbage and fails with a length error
 * instead of being truncated.
 */
export const RDMA_MAX_MSG_BYTES = 0x80000000;

/** QP numbers are 24 bits (a UD WQE's dest_qpn word carries more; the rest is ignored). */
export const RDMA_QPN_MASK = 0xffffff;
/** Message sequence numbers (the SEND_MSN CQE's msn) are 24 bits. */
export const RDMA_MSN_MASK = 0xffffff;
