// RDMA data-path layouts (docs/driver-contract.md (ionic RDMA R4.2)-4.6): each table pinned to the contract's
// offsets and byte orders (WQE parts and the CQE), and the send opcodes, v1 and v2.

import { expect } from 'chai';
import { Field, getField, RawField } from '../../../protocol/field';
import { ionic_v1_cqe } from '../../../lib/rdma/datapath/cqe';
import {
  ionic_sge,
  ionic_v1_atomic_bdy,
  ionic_v1_base_hdr,
  ionic_v1_bind_mw_bdy,
  ionic_v1_common_bdy,
  ionic_v1_recv_bdy,
  ionic_v1_reg_mr_bdy,
  ionic_v2_atomic_bdy,
  opcodeOf,
  SendVerb,
  V2_OPCODES,
  verbOf,
} from '../../../lib/rdma/datapath/wqe-layout';

function pin(f: Field | RawField, off: number, size: number, order: 'le' | 'be' | 'raw'): void {
  expect([f.off, f.size, f.order]).to.deep.equal([off, size, order]);
}

describe('rdma datapath: layouts', () => {
  describe('tables match the contract offsets', () => {
    it('ionic_sge and the base header', () => {
      pin(ionic_sge.va, 0, 8, 'be');
      pin(ionic_sge.len, 8, 4, 'be');
      pin(ionic_sge.lkey, 12, 4, 'be');
      expect(ionic_sge.SIZE).to.equal(16);
      pin(ionic_v1_base_hdr.wqe_id, 0, 8, 'raw');
      pin(ionic_v1_base_hdr.op, 8, 1, 'be');
      pin(ionic_v1_base_hdr.num_sge_key, 9, 1, 'be');
      pin(ionic_v1_base_hdr.flags, 10, 2, 'be');
      pin(ionic_v1_base_hdr.imm_data_key, 12, 4, 'be');
    });

    it('common (send/UD/RDMA) body and payload start', () => {
      pin(ionic_v1_common_bdy.ah_id, 16, 4, 'be');
      pin(ionic_v1_common_bdy.dest_qpn, 20, 4, 'be');
      pin(ionic_v1_common_bdy.dest_qkey, 24, 4, 'be');
      pin(ionic_v1_common_bdy.remote_va_high, 16, 4, 'be');
      pin(ionic_v1_common_bdy.remote_va_low, 20, 4, 'be');
      pin(ionic_v1_common_bdy.remote_rkey, 24, 4, 'be');
      pin(ionic_v1_common_bdy.length, 28, 4, 'be');
      expect(ionic_v1_common_bdy.PLD).to.equal(32);
      expect(ionic_v1_recv_bdy.PLD).to.equal(32);
      pin(ionic_v1_recv_bdy.rsvd, 16, 16, 'raw');
    });

    it('atomic bodies v1 and v2', () => {
      for (const b of [ionic_v1_atomic_bdy, ionic_v2_atomic_bdy]) {
        pin(b.remote_va_high, 16, 4, 'be');
        pin(b.remote_va_low, 20, 4, 'be');
        pin(b.remote_rkey, 24, 4, 'be');
        pin(b.swap_add_high, 28, 4, 'be');
        pin(b.swap_add_low, 32, 4, 'be');
        pin(b.compare_high, 36, 4, 'be');
        pin(b.compare_low, 40, 4, 'be');
      }
      expect(ionic_v1_atomic_bdy.SGE).to.equal(48);
      pin(ionic_v2_atomic_bdy.lkey, 44, 4, 'be');
      pin(ionic_v2_atomic_bdy.local_va, 48, 8, 'be');
    });

    it('REG_MR and BIND_MW bodies (dma_addr big-endian)', () => {
      pin(ionic_v1_reg_mr_bdy.va, 16, 8, 'be');
      pin(ionic_v1_reg_mr_bdy.length, 24, 8, 'be');
      pin(ionic_v1_reg_mr_bdy.offset, 32, 8, 'be');
      pin(ionic_v1_reg_mr_bdy.dma_addr, 40, 8, 'be');
      pin(ionic_v1_reg_mr_bdy.map_count, 48, 4, 'be');
      pin(ionic_v1_reg_mr_bdy.flags, 52, 2, 'be');
      pin(ionic_v1_reg_mr_bdy.dir_size_log2, 54, 1, 'be');
      pin(ionic_v1_reg_mr_bdy.page_size_log2, 55, 1, 'be');
      pin(ionic_v1_bind_mw_bdy.va, 16, 8, 'be');
      pin(ionic_v1_bind_mw_bdy.length, 24, 8, 'be');
      pin(ionic_v1_bind_mw_bdy.lkey, 32, 4, 'be');
      pin(ionic_v1_bind_mw_bdy.flags, 36, 2, 'be');
    });

    it('CQE heads and tail', () => {
      pin(ionic_v1_cqe.recv_wqe_id, 0, 8, 'raw');
      pin(ionic_v1_cqe.recv_src_qpn_op, 8, 4, 'be');
      pin(ionic_v1_cqe.recv_src_mac, 12, 6, 'raw');
      pin(ionic_v1_cqe.recv_vlan_tag, 18, 2, 'be');
      pin(ionic_v1_cqe.recv_imm_data_rkey, 20, 4, 'be');
      pin(ionic_v1_cqe.send_msg_msn, 4, 4, 'be');
      pin(ionic_v1_cqe.send_npg_wqe_id, 16, 8, 'raw');
      pin(ionic_v1_cqe.admin_cmd_idx, 0, 2, 'be');
      pin(ionic_v1_cqe.admin_cmd_op, 2, 1, 'be');
      pin(ionic_v1_cqe.admin_old_sq_cindex, 20, 2, 'le');
      pin(ionic_v1_cqe.admin_old_rq_cq_cindex, 22, 2, 'le');
      pin(ionic_v1_cqe.status_length, 24, 4, 'be');
      pin(ionic_v1_cqe.qid_type_flags, 28, 4, 'be');
      expect(ionic_v1_cqe.SIZE).to.equal(32);
    });

    it('the field codec reads these tables in their byte order', () => {
      const b = Buffer.from('0001122334455667', 'hex');
      expect(getField(b, 0, ionic_sge.va)).to.equal(0x1122334455667);
      const c = Buffer.alloc(32);
      c.writeUInt16LE(0xabcd, 20);
      expect(getField(c, 0, ionic_v1_cqe.admin_old_sq_cindex)).to.equal(0xabcd);
    });
  });

  describe('opcodes', () => {
    it('v1 numbering is the verb; v2 uses the OUT/IMM/INV bits', () => {
      const v2: Record<number, number> = {
        0: 0x20,
        1: 0xa0,
        2: 0x60,
        3: 0x02,
        4: 0x21,
        5: 0x61,
        6: 0x04,
        7: 0x05,
        8: 0x06,
        9: 0x07,
        10: 0x08,
      };
      for (let verb = 0; verb <= 10; verb++) {
        expect(opcodeOf(verb as SendVerb, 1)).to.equal(verb);
        expect(opcodeOf(verb as SendVerb, 2)).to.equal(v2[verb]);
        expect(V2_OPCODES[verb]).to.equal(v2[verb]);
        expect(verbOf(verb, 1)).to.equal(verb);
        expect(verbOf(v2[verb]!, 2)).to.equal(verb);
      }
      for (const bad of [11, 0x20, 0xff]) expect(verbOf(bad, 1)).to.equal(-1);
      for (const bad of [0x00, 0x01, 0x03, 0x09, 0x22, 0xe0, 0xff, 256, -1, 1.5]) expect(verbOf(bad, 2)).to.equal(-1);
    });
  });
});
