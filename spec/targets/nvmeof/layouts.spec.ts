// The NVMe / NVMe-oF tables pinned to the specifications' offsets (as
// include/linux/nvme.h lays them out), written out here by hand, plus the
// status values and the codes the Linux host sends.

import { expect } from 'chai';
import { Field, RawField } from '../../../protocol/field';
import {
  AdminOpcode,
  Cns,
  FeatureId,
  IoOpcode,
  LogPageId,
  nvme_cqe,
  nvme_error_slot,
  nvme_get_log_page,
  nvme_id_ctrl,
  nvme_id_ns,
  nvme_identify,
  nvme_keyed_sgl_desc,
  nvme_rw,
  nvme_sgl_desc,
  nvme_smart_log,
  nvme_sqe,
  NvmeStatus,
  nvmf_connect_command,
  nvmf_connect_data,
  nvmf_disc_rsp_page_entry,
  nvmf_disc_rsp_page_hdr,
  nvmf_property_command,
} from '../../../lib/targets/nvmeof/layouts';

type Table = Readonly<Record<string, Field | RawField | number>>;

/** [name, offset, size] for every field listed; 'raw' marks opaque bytes. */
function pin(table: Table, rows: Array<[string, number, number, ('raw' | 'le')?]>): void {
  for (const [name, off, size, order] of rows) {
    const f = table[name] as Field | RawField | undefined;
    expect(f, name).to.not.equal(undefined);
    expect([f!.off, f!.size, f!.order], name).to.deep.equal([off, size, order ?? 'le']);
  }
}

describe('nvmeof: layouts', () => {
  it('SQE (64 bytes) and CQE (16 bytes)', () => {
    pin(nvme_sqe, [
      ['opcode', 0, 1],
      ['flags', 1, 1],
      ['command_id', 2, 2],
      ['nsid', 4, 4],
      ['metadata', 16, 8],
      ['dptr', 24, 16, 'raw'],
      ['cdw10', 40, 4],
      ['cdw11', 44, 4],
      ['cdw12', 48, 4],
      ['cdw13', 52, 4],
      ['cdw14', 56, 4],
      ['cdw15', 60, 4],
    ]);
    expect(nvme_sqe.SIZE).to.equal(64);
    pin(nvme_cqe, [
      ['result', 0, 4],
      ['result_hi', 4, 4],
      ['sq_head', 8, 2],
      ['sq_id', 10, 2],
      ['command_id', 12, 2],
      ['status', 14, 2],
    ]);
    expect(nvme_cqe.SIZE).to.equal(16);
  });

  it('keyed SGL data block: addr u64, length u24, key u32, type; unkeyed: length u32', () => {
    pin(nvme_keyed_sgl_desc, [
      ['addr', 0, 8],
      ['length_lo', 8, 2],
      ['length_hi', 10, 1],
      ['key', 11, 4],
      ['type', 15, 1],
    ]);
    pin(nvme_sgl_desc, [
      ['addr', 0, 8],
      ['length', 8, 4],
      ['type', 15, 1],
    ]);
  });

  it('Fabrics Connect, its data, and Property Get/Set', () => {
    pin(nvmf_connect_command, [
      ['fctype', 4, 1],
      ['recfmt', 40, 2],
      ['qid', 42, 2],
      ['sqsize', 44, 2],
      ['cattr', 46, 1],
      ['kato', 48, 4],
    ]);
    pin(nvmf_connect_data, [
      ['hostid', 0, 16, 'raw'],
      ['cntlid', 16, 2],
      ['subsysnqn', 256, 256, 'raw'],
      ['hostnqn', 512, 256, 'raw'],
    ]);
    expect(nvmf_connect_data.SIZE).to.equal(1024);
    pin(nvmf_property_command, [
      ['attrib', 40, 1],
      ['offset', 44, 4],
      ['value', 48, 8],
    ]);
  });

  it('admin and I/O command dwords', () => {
    pin(nvme_identify, [
      ['cns', 40, 1],
      ['cntid', 42, 2],
      ['cnssid', 44, 2],
      ['csi', 47, 1],
    ]);
    pin(nvme_get_log_page, [
      ['lid', 40, 1],
      ['lsp', 41, 1],
      ['numdl', 42, 2],
      ['numdu', 44, 2],
      ['lsi', 46, 2],
      ['lpo', 48, 8],
      ['csi', 55, 1],
    ]);
    pin(nvme_rw, [
      ['slba', 40, 8],
      ['length', 48, 2],
      ['control', 50, 2],
      ['dsmgmt', 52, 4],
    ]);
  });

  it('Identify Controller: the fields the Linux host reads', () => {
    pin(nvme_id_ctrl, [
      ['vid', 0, 2],
      ['sn', 4, 20, 'raw'],
      ['mn', 24, 40, 'raw'],
      ['fr', 64, 8, 'raw'],
      ['cmic', 76, 1],
      ['mdts', 77, 1],
      ['cntlid', 78, 2],
      ['ver', 80, 4],
      ['oaes', 92, 4],
      ['ctratt', 96, 4],
      ['cntrltype', 111, 1],
      ['oacs', 256, 2],
      ['acl', 258, 1],
      ['aerl', 259, 1],
      ['lpa', 261, 1],
      ['elpe', 262, 1],
      ['kas', 320, 2],
      ['sqes', 512, 1],
      ['cqes', 513, 1],
      ['maxcmd', 514, 2],
      ['nn', 516, 4],
      ['oncs', 520, 2],
      ['vwc', 525, 1],
      ['sgls', 536, 4],
      ['subnqn', 768, 256, 'raw'],
      ['ioccsz', 1792, 4],
      ['iorcsz', 1796, 4],
      ['icdoff', 1800, 2],
      ['fcatt', 1802, 1],
      ['msdbd', 1803, 1],
      ['dctype', 1806, 1],
    ]);
    expect(nvme_id_ctrl.SIZE).to.equal(4096);
  });

  it('Identify Namespace', () => {
    pin(nvme_id_ns, [
      ['nsze', 0, 8],
      ['ncap', 8, 8],
      ['nuse', 16, 8],
      ['nsfeat', 24, 1],
      ['nlbaf', 25, 1],
      ['flbas', 26, 1],
      ['nmic', 30, 1],
      ['dlfeat', 33, 1],
      ['nvmcap_lo', 48, 8],
      ['anagrpid', 92, 4],
      ['nguid', 104, 16, 'raw'],
      ['eui64', 120, 8, 'raw'],
    ]);
    expect(nvme_id_ns.LBAF).to.equal(128);
  });

  it('log pages: error entry, SMART, discovery header and entry with the RDMA subtype', () => {
    pin(nvme_error_slot, [
      ['error_count', 0, 8],
      ['sqid', 8, 2],
      ['cmdid', 10, 2],
      ['status_field', 12, 2],
      ['param_error_location', 14, 2],
      ['lba', 16, 8],
      ['nsid', 24, 4],
    ]);
    pin(nvme_smart_log, [
      ['critical_warning', 0, 1],
      ['temperature', 1, 2],
      ['avail_spare', 3, 1],
      ['data_units_read', 32, 8],
      ['data_units_written', 48, 8],
      ['host_reads', 64, 8],
      ['host_writes', 80, 8],
      ['num_err_log_entries', 176, 8],
    ]);
    pin(nvmf_disc_rsp_page_hdr, [
      ['genctr', 0, 8],
      ['numrec', 8, 8],
      ['recfmt', 16, 2],
    ]);
    pin(nvmf_disc_rsp_page_entry, [
      ['trtype', 0, 1],
      ['adrfam', 1, 1],
      ['subtype', 2, 1],
      ['treq', 3, 1],
      ['portid', 4, 2],
      ['cntlid', 6, 2],
      ['asqsz', 8, 2],
      ['trsvcid', 32, 32, 'raw'],
      ['subnqn', 256, 256, 'raw'],
      ['traddr', 512, 256, 'raw'],
      ['rdma_qptype', 768, 1],
      ['rdma_prtype', 769, 1],
      ['rdma_cms', 770, 1],
      ['rdma_pkey', 776, 2],
    ]);
  });

  it('codes', () => {
    expect(AdminOpcode).to.include({
      GET_LOG_PAGE: 0x02,
      IDENTIFY: 0x06,
      ABORT: 0x08,
      SET_FEATURES: 0x09,
      GET_FEATURES: 0x0a,
      ASYNC_EVENT: 0x0c,
      KEEP_ALIVE: 0x18,
      FABRICS: 0x7f,
    });
    expect(IoOpcode).to.include({ FLUSH: 0, WRITE: 1, READ: 2, WRITE_ZEROES: 8, DSM: 9 });
    expect(Cns).to.include({ NS: 0, CTRL: 1, NS_ACTIVE_LIST: 2, NS_DESC_LIST: 3 });
    expect(FeatureId).to.include({ NUM_QUEUES: 7, ASYNC_EVENT: 0x0b, KATO: 0x0f, HOST_ID: 0x81 });
    expect(LogPageId).to.include({ ERROR: 1, SMART: 2, CHANGED_NS: 4, DISCOVERY: 0x70 });
    expect(NvmeStatus).to.include({
      INVALID_FIELD: 0x2,
      INVALID_NS: 0xb,
      SGL_INVALID_DATA: 0xf,
      SGL_INVALID_TYPE: 0x11,
      LBA_RANGE: 0x80,
      INVALID_LOG_PAGE: 0x109,
      CONNECT_FORMAT: 0x180,
      CONNECT_CTRL_BUSY: 0x181,
      CONNECT_INVALID_PARAM: 0x182,
      CONNECT_INVALID_HOST: 0x184,
      DNR: 0x4000,
    });
  });
});
