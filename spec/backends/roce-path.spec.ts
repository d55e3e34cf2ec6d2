// The RocePath a QP or address handle gets from the address vector the
// control path parsed out of the driver's header template, and the CQE
// status of each transport completion status.

import { expect } from 'chai';
import type { AddressVector } from '../../lib/rdma/address';
import { ipv4Gid } from '../../lib/rdma/address';
import { IonicStatus } from '../../lib/rdma/datapath/cqe';
import { pathFromAv } from '../../lib/backends/roce/path';
import { ionicStatusOf } from '../../lib/backends/roce/qp-link';
import { RocePath } from '../../lib/roce/frame';
import { udpSourcePort } from '../../lib/roce/flow';
import * as T from '../../lib/roce/transport/types';

function av(over: Partial<AddressVector>): AddressVector {
  return {
    ipVersion: 4,
    dmac: Buffer.from('02aabbccddee', 'hex'),
    smac: Buffer.from('021122334455', 'hex'),
    vlanTci: -1,
    sgid: ipv4Gid(Buffer.from([10, 0, 0, 1])),
    dgid: ipv4Gid(Buffer.from([10, 0, 0, 2])),
    hopLimit: 64,
    trafficClass: 0,
    flowLabel: 0,
    udpSrcPort: 0xc123,
    udpDstPort: 4791,
    template: Buffer.alloc(0),
    ...over,
  };
}

describe('backends/roce: paths from address vectors', () => {
  it('IPv4: MACs, GIDs, TOS, TTL and the template source port carry over; no VLAN', () => {
    const p = new RocePath();
    pathFromAv(av({ trafficClass: 0x68, hopLimit: 17 }), 20, 30, p);
    expect(p.srcMac.toString('hex')).to.equal('021122334455');
    expect(p.dstMac.toString('hex')).to.equal('02aabbccddee');
    expect(p.vlanTci).to.equal(-1);
    expect(p.ipVersion).to.equal(4);
    expect(p.srcGid.toString('hex')).to.equal('00000000000000000000ffff0a000001');
    expect(p.dstGid.toString('hex')).to.equal('00000000000000000000ffff0a000002');
    expect([p.trafficClass, p.hopLimit, p.flowLabel, p.udpSrcPort]).to.deep.equal([0x68, 17, 0, 0xc123]);
  });

  it('IPv6 with a VLAN tag and a flow label; a template without a source port gets the flow label one', () => {
    const sgid = Buffer.from('fe800000000000000011223344556677', 'hex');
    const dgid = Buffer.from('20010db8000000000000000000000002', 'hex');
    const p = new RocePath();
    pathFromAv(av({ ipVersion: 6, sgid, dgid, vlanTci: (3 << 13) | 100, flowLabel: 0x12345, udpSrcPort: 0 }), 5, 6, p);
    expect(p.ipVersion).to.equal(6);
    expect(p.vlanTci).to.equal((3 << 13) | 100);
    expect(p.srcGid.equals(sgid)).to.equal(true);
    expect(p.dstGid.equals(dgid)).to.equal(true);
    expect(p.flowLabel).to.equal(0x12345);
    expect(p.udpSrcPort).to.equal(udpSourcePort(0x12345, 5, 6));
  });

  it('a source port of 4791 (no entropy) is replaced by the QPN hash', () => {
    const p = new RocePath();
    pathFromAv(av({ udpSrcPort: 4791 }), 7, 9, p);
    expect(p.udpSrcPort).to.equal(udpSourcePort(0, 7, 9));
    expect(p.udpSrcPort).to.be.within(0xc000, 0xffff);
  });

  it('every transport completion status has its CQE status', () => {
    expect(
      [
        T.WC_SUCCESS,
        T.WC_LOC_LEN_ERR,
        T.WC_LOC_QP_OP_ERR,
        T.WC_LOC_PROT_ERR,
        T.WC_WR_FLUSH_ERR,
        T.WC_BAD_RESP_ERR,
        T.WC_REM_INV_REQ_ERR,
        T.WC_REM_ACCESS_ERR,
        T.WC_REM_OP_ERR,
        T.WC_RETRY_EXC_ERR,
        T.WC_RNR_RETRY_EXC_ERR,
        99,
      ].map(ionicStatusOf),
    ).to.deep.equal([
      IonicStatus.OK,
      IonicStatus.LOCAL_LEN,
      IonicStatus.LOCAL_QP_OPER,
      IonicStatus.LOCAL_PROT,
      IonicStatus.WQE_FLUSHED,
      IonicStatus.BAD_RESP,
      IonicStatus.REMOTE_INV_REQ,
      IonicStatus.REMOTE_ACC,
      IonicStatus.REMOTE_OPER,
      IonicStatus.RETRY_EXCEEDED,
      IonicStatus.RNR_RETRY_EXCEEDED,
      IonicStatus.LOCAL_QP_OPER,
    ]);
  });
});
