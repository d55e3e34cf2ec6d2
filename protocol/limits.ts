// Every size limit of the protocol layer, in one place, each finite.
// The framer checks them as soon as a header arrives, before buffering a body.

/** The vfio-user header is 16 bytes on every message. */
export const HEADER_SIZE = 16;

/** Largest data count we accept in one REGION_READ/WRITE, DMA_READ/WRITE or MIG_DATA message (and advertise). */
export const MAX_DATA_XFER_SIZE = 1 << 20;

/** Smallest max_data_xfer_size QEMU can live with: its config-space read at realize is 4096 bytes. */
export const MIN_DATA_XFER_SIZE = 4096;

/** Largest whole message: header + the 16-byte region-access struct + the data (libvfio-user's bound). */
export const MAX_MSG_SIZE = MAX_DATA_XFER_SIZE + 32;

/** fds we accept with one message (and advertise as max_msg_fds; QEMU accepts at most 16). */
export const MAX_FDS_PER_MSG = 16;

/** DMA regions one client may map at once (advertised as max_dma_maps). */
export const MAX_DMA_REGIONS = 4096;

/** Largest single DMA region (libvfio-user's 8 TiB bound; ENOSPC above it). */
export const MAX_DMA_REGION_SIZE = 2 ** 43;

/** The only DMA page size we support (advertised as pgsizes). */
export const DMA_PAGE_SIZE = 4096;

/** VERSION JSON longer than this is refused (QEMU's is about 200 bytes). */
export const MAX_VERSION_JSON = 4096;

/** Entries per REGION_WRITE_MULTI (QEMU batches at most 200). */
export const MAX_WRITE_MULTI_ENTRIES = 1024;

/** Data bytes per REGION_WRITE_MULTI entry. */
export const WRITE_MULTI_DATA_SIZE = 8;

/** Largest fd count any message can bring (Linux SCM_MAX_FD): the receive buffer holds this many. */
export const SCM_MAX_FD = 253;
