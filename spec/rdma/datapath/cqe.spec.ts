// RDMA CQEs (docs/driver-contract.md (ionic RDMA R4.2)-4.6): encoded against hand-built golden bytes with the color
// byte written last, and decoded back.

import { expect } from 'chai';
import { CqeType, decodeCqe, encodeCqe, IonicStatus, newCqeRecord, RecvOp } from '../../../lib/rdma/datapath/cqe';
import { decodeRecvWqe, decodeSendWqe, RecvWqe, SendWqe, WqeError } from '../../../lib/rdma/datapath/wqe-decode';
import { hex, Poke } from './helpers';

const RC = { version: 1, datagram: false } as const;

function ok<T extends SendWqe | RecvWqe>(r: T | WqeError): T {
  if (!r.ok) throw new Error(`decode failed: ${r.code}`);
  return r;
}

describe('rdma datapath: layouts', () => {
  describe('CQE encode (golden bytes) and decode', () => {
    it('RECV: wqe_id verbatim, src QPN/op/IPv4/VLAN, MAC, TCI, immediate, byte count', () => {
      const rec = newCqeRecord();
      Object.assign(rec, {
        type: CqeType.RECV,
        qid: 7,
        color: true,
        statusLength: 296,
        wqeIdLo: 3,
        wqeIdHi: 0,
        srcQpn: 1,
        recvOp: RecvOp.SEND_IMM,
        ipv4: true,
        vlan: true,
        srcMac: Buffer.from([2, 0, 0, 0, 0, 0x42]),
        vlanTag: 0x6005,
        immDataRkey: 0xdeadbeef,
      });
      const out = Buffer.alloc(32, 0xee);
      expect(encodeCqe(rec, out)).to.equal(true);
      expect(out.toString('hex')).to.equal(
        hex('03000000 00000000 c2000001 020000000042 6005 deadbeef 00000128 00000721').toString('hex'),
      );
      const back = newCqeRecord();
      expect(decodeCqe(out, 0, back)).to.equal(true);
      expect([
        back.type,
        back.qid,
        back.color,
        back.error,
        back.srcQpn,
        back.recvOp,
        back.ipv4,
        back.vlan,
        back.vlanTag,
        back.immDataRkey,
      ]).to.deep.equal([CqeType.RECV, 7, true, false, 1, RecvOp.SEND_IMM, true, true, 0x6005, 0xdeadbeef]);
    });

    it('SEND_MSN: msn at 4, rsvd zero', () => {
      const rec = Object.assign(newCqeRecord(), { type: CqeType.SEND_MSN, qid: 9, msn: 5 });
      const out = Buffer.alloc(32, 0xee);
      encodeCqe(rec, out);
      expect(out).to.deep.equal(new Poke(32).be32(4, 5).be32(28, (9 << 8) | (2 << 5)).buf);
    });

    it('SEND_NPG error: npg_wqe_id verbatim at 16, status in status_length, error bit', () => {
      const rec = Object.assign(newCqeRecord(), {
        type: CqeType.SEND_NPG,
        qid: 0x123456,
        color: true,
        error: true,
        statusLength: IonicStatus.REMOTE_ACC,
        wqeIdLo: 12,
        wqeIdHi: 0xa0b0c0d0,
      });
      const out = Buffer.alloc(32);
      encodeCqe(rec, out);
      expect(out).to.deep.equal(new Poke(32).le32(16, 12).le32(20, 0xa0b0c0d0).be32(24, 9).be32(28, 0x12345663).buf);
    });

    it('ADMIN: cmd_idx BE16, cmd_op', () => {
      const rec = Object.assign(newCqeRecord(), { type: CqeType.ADMIN, qid: 2, color: true, cmdIdx: 0x0102, cmdOp: 3 });
      const out = Buffer.alloc(32);
      encodeCqe(rec, out);
      expect(out).to.deep.equal(new Poke(32).be16(0, 0x0102).u8(2, 3).be32(28, 0x201).buf);
    });

    it('wqe_id bytes round-trip verbatim from WQE to CQE (any 8 bytes)', () => {
      const id = [0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88];
      const wqe = new Poke(64).bytes(0, id).u8(8, 9).buf;
      const w = ok(decodeSendWqe(wqe, RC));
      const rec = Object.assign(newCqeRecord(), { type: CqeType.SEND_NPG, wqeIdLo: w.wqeIdLo, wqeIdHi: w.wqeIdHi });
      const out = Buffer.alloc(32);
      encodeCqe(rec, out);
      expect([...out.subarray(16, 24)]).to.deep.equal(id);
      const rq = ok(decodeRecvWqe(new Poke(64).bytes(0, id).buf));
      encodeCqe(Object.assign(newCqeRecord(), { type: CqeType.RECV, wqeIdLo: rq.wqeIdLo, wqeIdHi: rq.wqeIdHi }), out);
      expect([...out.subarray(0, 8)]).to.deep.equal(id);
    });

    it('the color comes from the record (the CQ sets it): bit 0 of byte 31 only', () => {
      const rec = Object.assign(newCqeRecord(), { type: CqeType.SEND_MSN, qid: 1, color: true, msn: 1 });
      const out = Buffer.alloc(32, 0xee);
      encodeCqe(rec, out);
      const lit = Buffer.from(out);
      rec.color = false;
      encodeCqe(rec, out);
      expect(lit[31]).to.equal(0x41);
      expect(out[31]).to.equal(0x40);
      expect(lit.subarray(0, 31)).to.deep.equal(out.subarray(0, 31));
    });

    it('never throws on garbage records or short buffers', () => {
      const rec = Object.assign(newCqeRecord(), {
        type: 99 as CqeType,
        qid: -1,
        statusLength: Number.NaN,
        wqeIdLo: Infinity,
        wqeIdHi: -5,
        srcQpn: 2 ** 40,
        recvOp: 77 as RecvOp,
        vlanTag: -1,
        immDataRkey: 1.5,
        msn: -0,
        srcMac: Buffer.alloc(20, 1),
        cmdIdx: 1e30,
      });
      for (const t of [0, 1, 2, 3, 4, 7, 99]) {
        rec.type = t as CqeType;
        expect(encodeCqe(rec, Buffer.alloc(32))).to.equal(true);
      }
      expect(encodeCqe(rec, Buffer.alloc(31))).to.equal(false);
      expect(encodeCqe(rec, Buffer.alloc(64), 40)).to.equal(false);
      expect(encodeCqe(rec, Buffer.alloc(64), -1)).to.equal(false);
      expect(decodeCqe(Buffer.alloc(16), 0, newCqeRecord())).to.equal(false);
    });
  });
});
