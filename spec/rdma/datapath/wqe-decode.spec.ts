// RDMA WQE decode (docs/driver-contract.md (ionic RDMA R4.2)-4.6): every send opcode decoded from bytes written by
// hand (v1 and v2 opcodes, UD, inline, spec formats), every decode error with the status its completion carries,
// and receive WQEs.

import { expect } from 'chai';
import { U64_UNSAFE } from '../../../protocol/field';
import { RDMA_MAX_MSG_BYTES as MAX_MSG_BYTES } from '../../../lib/rdma/limits';
import { IonicStatus, ionicStatusName } from '../../../lib/rdma/datapath/cqe';
import {
  decodeRecvWqe,
  decodeSendWqe,
  newRecvWqe,
  newSendWqe,
  RecvWqe,
  SendWqe,
  WqeError,
  WqeErrorCode,
} from '../../../lib/rdma/datapath/wqe-decode';
import { SendVerb, SpecFormat } from '../../../lib/rdma/datapath/wqe-layout';
import { hex, Poke } from './helpers';

const RC = { version: 1, datagram: false } as const;
const RC2 = { version: 2, datagram: false } as const;
const UD = { version: 1, datagram: true } as const;

function ok<T extends SendWqe | RecvWqe>(r: T | WqeError): T {
  if (!r.ok) throw new Error(`decode failed: ${r.code}`);
  return r;
}

function err(r: SendWqe | RecvWqe | WqeError): WqeError {
  if (r.ok) throw new Error('decode unexpectedly succeeded');
  return r;
}

describe('rdma datapath: layouts', () => {
  describe('send WQE decode, every opcode', () => {
    it('SEND with two SGEs (provider golden bytes)', () => {
      const buf = hex(`07000000 00000000 00 02 000a 00000000
                       00000000 00000000 00000000 00000080
                       0000000000001000 00000064 00000101
                       0000000000002000 0000001c 00000201`);
      const w = ok(decodeSendWqe(buf, RC));
      expect(w.verb).to.equal(SendVerb.SEND);
      expect([w.wqeIdLo, w.wqeIdHi]).to.deep.equal([7, 0]);
      expect(w.signaled && w.solicited).to.equal(true);
      expect(w.fence || w.inline).to.equal(false);
      expect(w.specFormat).to.equal(SpecFormat.NONE);
      expect(w.length).to.equal(128);
      expect(w.sgeTotal).to.equal(128);
      expect(w.sges.slice(0, w.sgeCount)).to.deep.equal([
        { va: 0x1000, len: 100, lkey: 0x101 },
        { va: 0x2000, len: 28, lkey: 0x201 },
      ]);
    });

    it('SEND_IMM (v2 0x60) keeps the immediate in wire order', () => {
      const p = new Poke(64)
        .u8(8, 0x60)
        .u8(9, 1)
        .bytes(12, [0xde, 0xad, 0xbe, 0xef])
        .be32(28, 4)
        .sge(32, 0x5000, 4, 0x301);
      const w = ok(decodeSendWqe(p.buf, RC2));
      expect(w.verb).to.equal(SendVerb.SEND_IMM);
      expect(w.immDataKey).to.equal(0xdeadbeef);
    });

    it('SEND_INV (v1 1 / v2 0xa0) carries the rkey to invalidate', () => {
      const p = new Poke(64).u8(8, 1).u8(9, 1).be32(12, 0x1234).be32(28, 8).sge(32, 0x5000, 8, 0x301);
      expect(ok(decodeSendWqe(p.buf, RC)).verb).to.equal(SendVerb.SEND_INV);
      expect(ok(decodeSendWqe(p.buf, RC)).immDataKey).to.equal(0x1234);
      p.u8(8, 0xa0);
      expect(ok(decodeSendWqe(p.buf, RC2)).verb).to.equal(SendVerb.SEND_INV);
    });

    it('RDMA_WRITE: remote va from BE32 halves, rkey', () => {
      const p = new Poke(64)
        .u8(8, 4)
        .u8(9, 1)
        .be32(16, 0x1)
        .be32(20, 0x23456780)
        .be32(24, 0x305)
        .be32(28, 16)
        .sge(32, 0x3000, 16, 0x101);
      const w = ok(decodeSendWqe(p.buf, RC));
      expect(w.verb).to.equal(SendVerb.RDMA_WRITE);
      expect(w.rdma).to.deep.equal({ remoteVa: 0x123456780, rkey: 0x305 });
      p.u8(8, 0x21);
      expect(ok(decodeSendWqe(p.buf, RC2)).verb).to.equal(SendVerb.RDMA_WRITE);
    });

    it('RDMA_WRITE_IMM inline (v2 0x61): payload in the WQE', () => {
      const p = new Poke(64)
        .u8(8, 0x61)
        .u8(9, 0)
        .be16(10, 0x4 | 0x8)
        .be32(12, 0x01020304)
        .be32(28, 5)
        .bytes(32, Buffer.from('hello'));
      const w = ok(decodeSendWqe(p.buf, RC2));
      expect(w.verb).to.equal(SendVerb.RDMA_WRITE_IMM);
      expect(w.inline).to.equal(true);
      expect(w.sgeCount).to.equal(0);
      expect(p.buf.subarray(w.inlineOffset, w.inlineOffset + w.inlineLength).toString()).to.equal('hello');
      // inline may fill the stride exactly: 64 - 32 bytes
      p.be32(28, 32);
      expect(ok(decodeSendWqe(p.buf, RC2)).inlineLength).to.equal(32);
    });

    it('RDMA_READ (v1 3 / v2 0x02)', () => {
      const p = new Poke(64)
        .u8(8, 3)
        .u8(9, 1)
        .be32(16, 0)
        .be32(20, 0x8000)
        .be32(24, 0x405)
        .be32(28, 64)
        .sge(32, 0x9000, 64, 0x101);
      const w = ok(decodeSendWqe(p.buf, RC));
      expect(w.verb).to.equal(SendVerb.RDMA_READ);
      expect(w.rdma.remoteVa).to.equal(0x8000);
      expect(w.sgeTotal).to.equal(64);
      p.u8(8, 0x02);
      expect(ok(decodeSendWqe(p.buf, RC2)).verb).to.equal(SendVerb.RDMA_READ);
    });

    it('ATOMIC_CS v1: operands as BE32 halves, local SGE at 48', () => {
      const p = new Poke(64)
        .u8(8, 6)
        .u8(9, 1)
        .be32(16, 0)
        .be32(20, 0x7000)
        .be32(24, 0x505)
        .be32(28, 0xaaaaaaaa)
        .be32(32, 0xbbbbbbbb)
        .be32(36, 0xcccccccc)
        .be32(40, 0xdddddddd)
        .sge(48, 0x4000, 8, 0x101);
      const w = ok(decodeSendWqe(p.buf, RC));
      expect(w.verb).to.equal(SendVerb.ATOMIC_CS);
      expect(w.atomic).to.deep.equal({
        swapAddHi: 0xaaaaaaaa,
        swapAddLo: 0xbbbbbbbb,
        compareHi: 0xcccccccc,
        compareLo: 0xdddddddd,
        localVa: 0x4000,
        localLkey: 0x101,
        localLen: 8,
      });
      expect(w.rdma).to.deep.equal({ remoteVa: 0x7000, rkey: 0x505 });
    });

    it('ATOMIC_FA v2 (0x05): lkey at 44, local va BE64 at 48, no length', () => {
      const p = new Poke(64)
        .u8(8, 0x05)
        .u8(9, 1)
        .be32(16, 0x2)
        .be32(20, 0x10)
        .be32(24, 0x505)
        .be32(28, 0)
        .be32(32, 1)
        .be32(44, 0x101)
        .be64(48, 0x4008);
      const w = ok(decodeSendWqe(p.buf, RC2));
      expect(w.verb).to.equal(SendVerb.ATOMIC_FA);
      expect(w.rdma.remoteVa).to.equal(0x200000010);
      expect([
        w.atomic.swapAddHi,
        w.atomic.swapAddLo,
        w.atomic.localLkey,
        w.atomic.localVa,
        w.atomic.localLen,
      ]).to.deep.equal([0, 1, 0x101, 0x4008, 8]);
      p.u8(8, 0x04);
      expect(ok(decodeSendWqe(p.buf, RC2)).verb).to.equal(SendVerb.ATOMIC_CS);
      const v1 = new Poke(64).u8(8, 7).u8(9, 1).be32(20, 0x10).be32(32, 3).sge(48, 0x4000, 8, 0x101);
      const f = ok(decodeSendWqe(v1.buf, RC));
      expect([f.verb, f.atomic.swapAddLo, f.atomic.localVa]).to.deep.equal([SendVerb.ATOMIC_FA, 3, 0x4000]);
    });

    it('REG_MR: every field big-endian, new tag in num_sge_key', () => {
      const p = new Poke(64)
        .u8(8, 8)
        .u8(9, 0x42)
        .be32(12, 0x501)
        .be64(16, 0x7f0000001000n)
        .be64(24, 0x3000)
        .be64(32, 0x10)
        .be64(40, 0x12345000)
        .be32(48, 3)
        .be16(52, 0xa007)
        .u8(54, 0)
        .u8(55, 12);
      const w = ok(decodeSendWqe(p.buf, RC));
      expect(w.verb).to.equal(SendVerb.REG_MR);
      expect(w.numSgeKey).to.equal(0x42);
      expect(w.immDataKey).to.equal(0x501);
      expect(w.regMr).to.deep.equal({
        va: 0x7f0000001000,
        length: 0x3000,
        offset: 0x10,
        dmaAddr: 0x12345000,
        mapCount: 3,
        flags: 0xa007,
        dirSizeLog2: 0,
        pageSizeLog2: 12,
      });
      p.u8(8, 0x06);
      expect(ok(decodeSendWqe(p.buf, RC2)).verb).to.equal(SendVerb.REG_MR);
    });

    it('LOCAL_INV (v1 9 / v2 0x07): only the rkey matters', () => {
      const p = new Poke(64).u8(8, 9).be32(12, 0x501);
      const w = ok(decodeSendWqe(p.buf, RC));
      expect(w.verb).to.equal(SendVerb.LOCAL_INV);
      expect(w.immDataKey).to.equal(0x501);
      p.u8(8, 0x07);
      expect(ok(decodeSendWqe(p.buf, RC2)).verb).to.equal(SendVerb.LOCAL_INV);
    });

    it('BIND_MW (v1 10 / v2 0x08)', () => {
      const p = new Poke(64)
        .u8(8, 10)
        .u8(9, 0x11)
        .be32(12, 0x610)
        .be64(16, 0x9000)
        .be64(24, 0x100)
        .be32(32, 0x101)
        .be16(36, 0xc002);
      const w = ok(decodeSendWqe(p.buf, RC));
      expect(w.verb).to.equal(SendVerb.BIND_MW);
      expect(w.numSgeKey).to.equal(0x11);
      expect(w.immDataKey).to.equal(0x610);
      expect(w.bindMw).to.deep.equal({ va: 0x9000, length: 0x100, lkey: 0x101, flags: 0xc002 });
      p.u8(8, 0x08);
      expect(ok(decodeSendWqe(p.buf, RC2)).verb).to.equal(SendVerb.BIND_MW);
    });

    it('UD SEND: AH id, dest QPN, Q_Key (a GSI MAD with two lkey-0 SGEs)', () => {
      const p = new Poke(64)
        .u8(8, 0)
        .u8(9, 2)
        .be16(10, 0x8)
        .be32(16, 5)
        .be32(20, 1)
        .be32(24, 0x80000000)
        .be32(28, 24 + 232)
        .sge(32, 0x1_0000_0000n, 24, 0)
        .sge(48, 0x1_0000_1000n, 232, 0);
      const w = ok(decodeSendWqe(p.buf, UD));
      expect(w.verb).to.equal(SendVerb.SEND);
      expect(w.ud).to.deep.equal({ ahId: 5, destQpn: 1, destQkey: 0x80000000 });
      expect(w.sgeTotal).to.equal(256);
      p.u8(8, 2);
      expect(ok(decodeSendWqe(p.buf, UD)).verb).to.equal(SendVerb.SEND_IMM);
    });

    it('SPEC32: eight BE32 lengths at 32, SGEs from 64', () => {
      const p = new Poke(256).u8(8, 0).u8(9, 5).be16(10, 0x1000).be32(28, 15);
      for (let i = 0; i < 5; i++) p.be32(32 + 4 * i, i + 1).sge(64 + 16 * i, 0x1000 * (i + 1), i + 1, 0x101);
      const w = ok(decodeSendWqe(p.buf, RC));
      expect(w.specFormat).to.equal(SpecFormat.SPEC32);
      expect(w.sgeCount).to.equal(5);
      expect(w.sges.slice(0, 5).map((s) => s.va)).to.deep.equal([0x1000, 0x2000, 0x3000, 0x4000, 0x5000]);
      expect(w.sgeTotal).to.equal(15);
    });

    it('SPEC16: sixteen BE16 lengths at 32, SGEs from 64', () => {
      const p = new Poke(256).u8(8, 0).u8(9, 10).be16(10, 0x2000).be32(28, 100);
      for (let i = 0; i < 10; i++) p.be16(32 + 2 * i, 10).sge(64 + 16 * i, 0x100 * i, 10, 0x101);
      const w = ok(decodeSendWqe(p.buf, RC));
      expect(w.specFormat).to.equal(SpecFormat.SPEC16);
      expect(w.sgeCount).to.equal(10);
      expect(w.sges[9]!.va).to.equal(0x900);
    });

    it('provider zero-length SGEs decode as 0 bytes; kernel 2^31 is the maximum message', () => {
      const p = new Poke(64).u8(8, 0).u8(9, 1).be32(28, 0).sge(32, 0x1000, 0, 0x101);
      expect(ok(decodeSendWqe(p.buf, RC)).sgeTotal).to.equal(0);
      p.be32(28, MAX_MSG_BYTES).sge(32, 0x1000, MAX_MSG_BYTES, 0);
      expect(ok(decodeSendWqe(p.buf, RC)).sgeTotal).to.equal(MAX_MSG_BYTES);
    });

    it('64-bit addresses above 2^53 decode as U64_UNSAFE, never as a wrong number', () => {
      const p = new Poke(64)
        .u8(8, 4)
        .u8(9, 1)
        .be32(16, 0xffffffff)
        .be32(20, 0)
        .be32(28, 1)
        .sge(32, 0xffff800000000000n, 1, 0x101);
      const w = ok(decodeSendWqe(p.buf, RC));
      expect(w.rdma.remoteVa).to.equal(U64_UNSAFE);
      expect(w.sges[0]!.va).to.equal(U64_UNSAFE);
    });

    it('reuses the record passed in', () => {
      const rec = newSendWqe();
      const p = new Poke(64).u8(8, 9).be32(12, 7);
      expect(decodeSendWqe(p.buf, RC, rec)).to.equal(rec);
    });
  });

  describe('send WQE decode errors (status the completion carries)', () => {
    const cases: [string, Buffer, { version: number; datagram: boolean }, WqeErrorCode, IonicStatus][] = [
      ['shorter than a WQE', Buffer.alloc(63), RC, WqeErrorCode.TRUNCATED, IonicStatus.LOCAL_QP_OPER],
      ['empty', Buffer.alloc(0), RC, WqeErrorCode.TRUNCATED, IonicStatus.LOCAL_QP_OPER],
      ['v1 opcode 11', new Poke(64).u8(8, 11).buf, RC, WqeErrorCode.BAD_OPCODE, IonicStatus.LOCAL_QP_OPER],
      [
        'v2 opcode 0x00 (v1 SEND) on a v2 device',
        new Poke(64).u8(8, 0).buf,
        RC2,
        WqeErrorCode.BAD_OPCODE,
        IonicStatus.LOCAL_QP_OPER,
      ],
      ['RDMA WRITE on a UD QP', new Poke(64).u8(8, 4).buf, UD, WqeErrorCode.BAD_OPCODE, IonicStatus.LOCAL_QP_OPER],
      [
        'spec format 3',
        new Poke(64).u8(9, 1).be16(10, 0x3000).buf,
        RC,
        WqeErrorCode.BAD_SPEC,
        IonicStatus.LOCAL_QP_OPER,
      ],
      [
        '3 SGEs in a 64-byte stride',
        new Poke(64).u8(9, 3).buf,
        RC,
        WqeErrorCode.TOO_MANY_SGES,
        IonicStatus.LOCAL_QP_OPER,
      ],
      [
        'spec SGL past the stride',
        new Poke(64).u8(9, 1).be16(10, 0x1000).buf,
        RC,
        WqeErrorCode.TOO_MANY_SGES,
        IonicStatus.LOCAL_QP_OPER,
      ],
      [
        'inline longer than the payload area',
        new Poke(64).be16(10, 4).be32(28, 33).buf,
        RC,
        WqeErrorCode.INLINE_TOO_LONG,
        IonicStatus.LOCAL_LEN,
      ],
      ['inline READ', new Poke(64).u8(8, 3).be16(10, 4).buf, RC, WqeErrorCode.BAD_INLINE, IonicStatus.LOCAL_QP_OPER],
      ['inline atomic', new Poke(64).u8(8, 6).be16(10, 4).buf, RC, WqeErrorCode.BAD_INLINE, IonicStatus.LOCAL_QP_OPER],
      [
        'inline LOCAL_INV',
        new Poke(64).u8(8, 9).be16(10, 4).buf,
        RC,
        WqeErrorCode.BAD_INLINE,
        IonicStatus.LOCAL_QP_OPER,
      ],
      ['inline REG_MR', new Poke(64).u8(8, 8).be16(10, 4).buf, RC, WqeErrorCode.BAD_INLINE, IonicStatus.LOCAL_QP_OPER],
      [
        'inline BIND_MW',
        new Poke(64).u8(8, 10).be16(10, 4).buf,
        RC,
        WqeErrorCode.BAD_INLINE,
        IonicStatus.LOCAL_QP_OPER,
      ],
      [
        'SGEs adding up past 2^31',
        new Poke(64).u8(9, 2).be32(28, 0).sge(32, 0, 0x80000000, 0).sge(48, 0, 1, 0).buf,
        RC,
        WqeErrorCode.MSG_TOO_LONG,
        IonicStatus.LOCAL_LEN,
      ],
      [
        'SGEs adding up past 4 GiB',
        new Poke(64).u8(9, 2).sge(32, 0, 0xffffffff, 0).sge(48, 0, 0xffffffff, 0).buf,
        RC,
        WqeErrorCode.MSG_TOO_LONG,
        IonicStatus.LOCAL_LEN,
      ],
      [
        'length field disagreeing with the SGEs',
        new Poke(64).u8(9, 1).be32(28, 9).sge(32, 0, 8, 0).buf,
        RC,
        WqeErrorCode.LENGTH_MISMATCH,
        IonicStatus.LOCAL_LEN,
      ],
      [
        'v1 atomic with a 16-byte local SGE',
        new Poke(64).u8(8, 6).u8(9, 1).sge(48, 0, 16, 0).buf,
        RC,
        WqeErrorCode.ATOMIC_LENGTH,
        IonicStatus.LOCAL_LEN,
      ],
    ];
    for (const [what, buf, opts, code, status] of cases) {
      it(what, () => {
        const e = err(decodeSendWqe(buf, opts));
        expect(e.code).to.equal(code);
        expect(ionicStatusName(e.status)).to.equal(ionicStatusName(status));
      });
    }
  });

  describe('receive WQE decode', () => {
    it('kernel GSI receive: one lkey-0 SGE of 40 + 256 bytes', () => {
      const p = new Poke(64).le64(0, 3).u8(8, 0).u8(9, 1).be32(12, 296).sge(32, 0xabc0000, 296, 0);
      const r = ok(decodeRecvWqe(p.buf));
      expect([r.wqeIdLo, r.wqeIdHi, r.op, r.postedLength, r.sgeCount, r.sgeTotal]).to.deep.equal([
        3, 0, 0, 296, 1, 296,
      ]);
      expect(r.sges[0]).to.deep.equal({ va: 0xabc0000, len: 296, lkey: 0 });
    });

    it('SPEC32 receive with 3 SGEs, and zero SGEs', () => {
      const p = new Poke(128).u8(9, 3).be16(10, 0x1000).be32(12, 30);
      for (let i = 0; i < 3; i++) p.be32(32 + 4 * i, 10).sge(64 + 16 * i, 0x100 * i, 10, 0x101);
      const r = ok(decodeRecvWqe(p.buf));
      expect([r.specFormat, r.sgeCount, r.sgeTotal]).to.deep.equal([SpecFormat.SPEC32, 3, 30]);
      const z = ok(decodeRecvWqe(new Poke(64).buf, newRecvWqe()));
      expect([z.sgeCount, z.sgeTotal]).to.deep.equal([0, 0]);
    });

    it('errors: truncated, bad spec, too many SGEs, too long', () => {
      expect(err(decodeRecvWqe(Buffer.alloc(32))).code).to.equal(WqeErrorCode.TRUNCATED);
      expect(err(decodeRecvWqe(new Poke(64).be16(10, 0xf000).buf)).code).to.equal(WqeErrorCode.BAD_SPEC);
      expect(err(decodeRecvWqe(new Poke(64).u8(9, 255).buf)).code).to.equal(WqeErrorCode.TOO_MANY_SGES);
      expect(err(decodeRecvWqe(new Poke(64).u8(9, 2).sge(32, 0, 0xffffffff, 0).sge(48, 0, 2, 0).buf)).status).to.equal(
        IonicStatus.LOCAL_LEN,
      );
    });
  });
});
