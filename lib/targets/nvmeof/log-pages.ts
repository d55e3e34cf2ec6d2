// Log pages, built whole from the controller's and subsystem's state: error
// information, SMART / health, firmware slot, changed namespace list, and
// the discovery log (one entry per listed subsystem, RDMA transport fields).
// Get Log Page then hands out the slice the host asked for.

import { setField } from '../../../protocol/field';
import { setText } from './command';
import {
  Discovery,
  NSID_ALL,
  nvme_changed_ns_log,
  nvme_error_slot,
  nvme_fw_slot_info_log,
  nvme_smart_log,
  nvmf_disc_rsp_page_entry,
  nvmf_disc_rsp_page_hdr,
} from './layouts';
import { ADMIN_QUEUE_MIN_ENTRIES, ERROR_LOG_ENTRIES } from './limits';
import { SmartCounters, NvmeofSubsystem } from './subsystem';

/** One error information entry, as the controller records it. */
export interface ErrorEntry {
  readonly errorCount: number;
  readonly sqid: number;
  readonly cid: number;
  /** Status with flags (the log holds it shifted, like the CQE). */
  readonly status: number;
  /** SQE byte offset of the field at fault, or -1 (0xffff in the log). */
  readonly loc: number;
  readonly nsid: number;
}

/** The error log: newest first, ERROR_LOG_ENTRIES slots. */
export function errorLog(entries: readonly ErrorEntry[]): Buffer {
  const b = Buffer.alloc(ERROR_LOG_ENTRIES * nvme_error_slot.SIZE);
  entries
    .slice(-ERROR_LOG_ENTRIES)
    .reverse()
    .forEach((e, i) => {
      const at = i * nvme_error_slot.SIZE;
      setField(b, at, nvme_error_slot.error_count, e.errorCount);
      setField(b, at, nvme_error_slot.sqid, e.sqid);
      setField(b, at, nvme_error_slot.cmdid, e.cid);
      setField(b, at, nvme_error_slot.status_field, (e.status << 1) & 0xffff);
      setField(b, at, nvme_error_slot.param_error_location, e.loc < 0 ? 0xffff : e.loc);
      setField(b, at, nvme_error_slot.nsid, e.nsid);
      setField(b, at, nvme_error_slot.trtype, Discovery.TRTYPE_RDMA);
    });
  return b;
}

/** Composite temperature reported (kelvin): a steady 35 C. */
const TEMPERATURE_K = 308;
const SPARE_PERCENT = 100;
const SPARE_THRESHOLD = 10;
const MS_PER_HOUR = 3_600_000;

/** SMART / health information for the whole subsystem. */
export function smartLog(stats: SmartCounters, errors: number, now: number): Buffer {
  const b = Buffer.alloc(nvme_smart_log.SIZE);
  setField(b, 0, nvme_smart_log.temperature, TEMPERATURE_K);
  setField(b, 0, nvme_smart_log.avail_spare, SPARE_PERCENT);
  setField(b, 0, nvme_smart_log.spare_thresh, SPARE_THRESHOLD);
  setField(b, 0, nvme_smart_log.data_units_read, SmartCounters.dataUnits(stats.bytesRead));
  setField(b, 0, nvme_smart_log.data_units_written, SmartCounters.dataUnits(stats.bytesWritten));
  setField(b, 0, nvme_smart_log.host_reads, stats.readCommands);
  setField(b, 0, nvme_smart_log.host_writes, stats.writeCommands);
  setField(b, 0, nvme_smart_log.power_cycles, 1);
  setField(b, 0, nvme_smart_log.power_on_hours, Math.floor(Math.max(0, now - stats.startedAt) / MS_PER_HOUR));
  setField(b, 0, nvme_smart_log.num_err_log_entries, errors);
  return b;
}

/** Firmware slot information: slot 1 active, holding the subsystem's firmware revision. */
export function firmwareSlotLog(firmware: string): Buffer {
  const b = Buffer.alloc(nvme_fw_slot_info_log.SIZE);
  setField(b, 0, nvme_fw_slot_info_log.afi, 1);
  setText(b, 0, nvme_fw_slot_info_log.frs1, firmware, 0x20);
  return b;
}

/** Changed namespace list; `overflow`: more changed than fit (first entry 0xffffffff). */
export function changedNamespaceLog(nsids: readonly number[], overflow: boolean): Buffer {
  const b = Buffer.alloc(nvme_changed_ns_log.SIZE);
  if (overflow) {
    setField(b, 0, nvme_changed_ns_log.nsid, NSID_ALL);
    return b;
  }
  nsids
    .slice(0, nvme_changed_ns_log.MAX)
    .forEach((nsid, i) => setField(b, i * nvme_changed_ns_log.ENTRY, nvme_changed_ns_log.nsid, nsid));
  return b;
}

/** The discovery log page: header, then one 1024-byte entry per listed subsystem. */
export function discoveryLog(disc: NvmeofSubsystem): Buffer {
  const listed = disc.listed;
  const b = Buffer.alloc(nvmf_disc_rsp_page_hdr.SIZE + listed.length * nvmf_disc_rsp_page_entry.SIZE);
  setField(b, 0, nvmf_disc_rsp_page_hdr.genctr, disc.genctr);
  setField(b, 0, nvmf_disc_rsp_page_hdr.numrec, listed.length);
  setField(b, 0, nvmf_disc_rsp_page_hdr.recfmt, 0);
  listed.forEach(({ subsystem, port }, i) => {
    const at = nvmf_disc_rsp_page_hdr.SIZE + i * nvmf_disc_rsp_page_entry.SIZE;
    setField(b, at, nvmf_disc_rsp_page_entry.trtype, Discovery.TRTYPE_RDMA);
    setField(b, at, nvmf_disc_rsp_page_entry.adrfam, Discovery.ADRFAM_IPV4);
    setField(
      b,
      at,
      nvmf_disc_rsp_page_entry.subtype,
      subsystem.kind === 'discovery' ? Discovery.SUBTYPE_DISCOVERY_REFERRAL : Discovery.SUBTYPE_NVME,
    );
    setField(b, at, nvmf_disc_rsp_page_entry.treq, Discovery.TREQ_NOT_SPECIFIED);
    setField(b, at, nvmf_disc_rsp_page_entry.portid, port.portid);
    setField(b, at, nvmf_disc_rsp_page_entry.cntlid, Discovery.CNTLID_DYNAMIC);
    setField(b, at, nvmf_disc_rsp_page_entry.asqsz, ADMIN_QUEUE_MIN_ENTRIES);
    setText(b, at, nvmf_disc_rsp_page_entry.trsvcid, port.trsvcid, 0x00);
    setText(b, at, nvmf_disc_rsp_page_entry.subnqn, subsystem.nqn, 0x00);
    setText(b, at, nvmf_disc_rsp_page_entry.traddr, port.traddr, 0x00);
    setField(b, at, nvmf_disc_rsp_page_entry.rdma_qptype, Discovery.RDMA_QPTYPE_CONNECTED);
    setField(b, at, nvmf_disc_rsp_page_entry.rdma_prtype, Discovery.RDMA_PRTYPE_NOT_SPECIFIED);
    setField(b, at, nvmf_disc_rsp_page_entry.rdma_cms, Discovery.RDMA_CMS_RDMA_CM);
  });
  return b;
}
