// Paths for the RoCE specs: two hosts on IPv4, IPv6 and a VLAN.
import { gidFromIpv4, RocePath } from '../../lib/roce/frame';

export function ipv4Path(from: number, to: number): RocePath {
  const p = new RocePath();
  p.srcMac.set([0x02, 0, 0, 0, 0, from]);
  p.dstMac.set([0x02, 0, 0, 0, 0, to]);
  gidFromIpv4(p.srcGid, 10, 0, 0, from);
  gidFromIpv4(p.dstGid, 10, 0, 0, to);
  p.trafficClass = 26 << 2;
  p.hopLimit = 64;
  p.udpSrcPort = 0xc000 + from;
  return p;
}

export function ipv6Path(from: number, to: number): RocePath {
  const p = ipv4Path(from, to);
  p.ipVersion = 6;
  p.srcGid.set([0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, from]);
  p.dstGid.set([0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, to]);
  p.flowLabel = 0x12345;
  p.hopLimit = 1;
  return p;
}

export function vlanPath(from: number, to: number): RocePath {
  const p = ipv4Path(from, to);
  p.vlanTci = (3 << 13) | 100;
  return p;
}
