// The data path's pure pieces: the view-to-view copy, the Q_Key rules and the
// 40-byte network header of UD receives (ionic RDMA R5.6). Expected bytes are
// written out by hand from RFC 791 / RFC 8200, not computed by the code under test.

import { expect } from 'chai';
import type { AddressVector } from '../../../lib/rdma/address';
import { ipv4Gid } from '../../../lib/rdma/address';
import { copySlices } from '../../../lib/rdma/datapath/copy';
import {
  CONTROLLED_QKEY_BIT,
  datagramAccepted,
  effectiveQkey,
  GRH_SIZE,
  writeGrh,
} from '../../../lib/rdma/datapath/datagram';
import { rnrDelayMs } from '../../../lib/rdma/executor/rnr';
import { hex } from './helpers';

function av(o: Partial<AddressVector>): AddressVector {
  return {
    ipVersion: 4,
    dmac: Buffer.alloc(6),
    smac: Buffer.alloc(6),
    vlanTci: -1,
    sgid: Buffer.alloc(16),
    dgid: Buffer.alloc(16),
    hopLimit: 64,
    trafficClass: 0,
    flowLabel: 0,
    udpSrcPort: 0,
    udpDstPort: 4791,
    template: Buffer.alloc(0),
    ...o,
  };
}

describe('rdma data path: copies and datagrams', () => {
  it('copySlices walks unequal splits with offsets on both sides', () => {
    const src = [Buffer.from('abc'), Buffer.from(''), Buffer.from('defgh'), Buffer.from('ij')];
    const dst = [Buffer.alloc(2), Buffer.alloc(4), Buffer.alloc(0), Buffer.alloc(6)];
    expect(copySlices(dst, 1, src, 2, 8)).to.equal(8);
    expect(Buffer.concat(dst).toString('latin1')).to.equal('\0cdefghij\0\0\0');
    expect(copySlices([Buffer.alloc(3)], 0, src, 0, 10)).to.equal(3);
    expect(copySlices(dst, 100, src, 0, 4)).to.equal(0);
    expect(copySlices(dst, 0, src, 0, 0)).to.equal(0);
  });

  it("a controlled Q_Key in the WQE means the sending QP's own", () => {
    expect(effectiveQkey(0x80000000, 0x80010000)).to.equal(0x80010000);
    expect(effectiveQkey(0xffffffff, 0x1234)).to.equal(0x1234);
    expect(effectiveQkey(0x80000000, null)).to.equal(-1);
    expect(effectiveQkey(0x01234567, 0x80010000)).to.equal(0x01234567);
    expect(CONTROLLED_QKEY_BIT).to.equal(0x80000000);
  });

  it('delivery needs a UD/GSI destination whose Q_Key (if any) matches', () => {
    expect(datagramAccepted(true, 0x80010000, 0x80010000)).to.equal(true);
    expect(datagramAccepted(true, 0x80010000, 0x80000000)).to.equal(false);
    expect(datagramAccepted(true, null, 0x1)).to.equal(true);
    expect(datagramAccepted(false, null, 0x1)).to.equal(false);
    expect(datagramAccepted(true, null, -1)).to.equal(false);
  });

  it('IPv4: 20 zero bytes, then the IPv4 header with its checksum', () => {
    const out = Buffer.alloc(GRH_SIZE, 0xaa);
    writeGrh(
      av({
        sgid: ipv4Gid(Buffer.from([192, 168, 0, 1])),
        dgid: ipv4Gid(Buffer.from([192, 168, 0, 199])),
        hopLimit: 64,
        trafficClass: 0,
      }),
      100,
      out,
    );
    expect(out.subarray(0, 20).equals(Buffer.alloc(20))).to.equal(true);
    // total length 20 + 8 (UDP) + 12 (BTH) + 8 (DETH) + 100 + 4 (ICRC) = 152 = 0x98; DF; TTL 64; UDP.
    // Checksum by hand: 4500+0098+0000+4000+4011+c0a8+0001+c0a8+00c7 = 0x247c1 -> 47c3 -> ~ = b83c.
    expect(out.subarray(20).equals(hex('4500 0098 0000 4000 4011 b83c c0a8 0001 c0a8 00c7'))).to.equal(true);
  });

  it('IPv6: version, traffic class, flow label, payload length, next header UDP, hop limit, GIDs', () => {
    const sgid = hex('fe80 0000 0000 0000 0211 22ff fe33 4455');
    const dgid = hex('fe80 0000 0000 0000 0266 77ff fe88 99aa');
    const out = Buffer.alloc(GRH_SIZE, 0xaa);
    writeGrh(av({ ipVersion: 6, sgid, dgid, hopLimit: 1, trafficClass: 0x12, flowLabel: 0x34567 }), 16, out);
    // 6 << 28 | 0x12 << 20 | 0x34567; payload 8 + 12 + 8 + 16 + 4 = 48; next header 17; hop limit 1.
    expect(out.subarray(0, 8).equals(hex('6123 4567 0030 1101'))).to.equal(true);
    expect(out.subarray(8, 24).equals(sgid)).to.equal(true);
    expect(out.subarray(24, 40).equals(dgid)).to.equal(true);
  });

  it('RNR timer codes follow IBTA table 45', () => {
    expect(rnrDelayMs(0)).to.equal(655.36);
    expect(rnrDelayMs(1)).to.equal(0.01);
    expect(rnrDelayMs(12)).to.equal(0.64);
    expect(rnrDelayMs(14)).to.equal(1.28);
    expect(rnrDelayMs(31)).to.equal(491.52);
  });
});
