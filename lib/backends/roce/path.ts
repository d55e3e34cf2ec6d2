// A QP's or an address handle's RocePath from the address vector the control
// path parsed out of the driver's header template (MACs, VLAN tag, IP
// version, GIDs, traffic class, hop limit, flow label, UDP source port). A
// template without a source port gets the one Linux derives from the flow
// label or, without one, from the two QPNs.

import type { AddressVector } from '../../rdma/address';
import type { RocePath } from '../../roce/frame';
import { udpSourcePort } from '../../roce/flow';

const ROCE_V2_PORT = 4791;

/** Fill `out` from `av`; `localQpn`/`remoteQpn` give the UDP source port when the template has none. */
export function pathFromAv(av: AddressVector, localQpn: number, remoteQpn: number, out: RocePath): void {
  av.smac.copy(out.srcMac, 0, 0, 6);
  av.dmac.copy(out.dstMac, 0, 0, 6);
  out.vlanTci = av.vlanTci >= 0 ? av.vlanTci & 0xffff : -1;
  out.ipVersion = av.ipVersion === 6 ? 6 : 4;
  av.sgid.copy(out.srcGid, 0, 0, 16);
  av.dgid.copy(out.dstGid, 0, 0, 16);
  out.trafficClass = av.trafficClass & 0xff;
  out.hopLimit = av.hopLimit > 0 ? av.hopLimit & 0xff : 64;
  out.flowLabel = av.ipVersion === 6 ? av.flowLabel & 0xfffff : 0;
  // A template's source port of 4791 or 0 carries no flow entropy (some drivers leave the destination port there).
  const sport = av.udpSrcPort & 0xffff;
  out.udpSrcPort = sport !== 0 && sport !== ROCE_V2_PORT ? sport : udpSourcePort(out.flowLabel, localQpn, remoteQpn);
}
