// The network headers RoCEv2 puts in front of a packet, and the few values
// their fields take here. The tables themselves (ethhdr, vlan_ethhdr, iphdr,
// ipv6hdr, udphdr) live in lib/net/headers.ts, shared with the Ethernet
// function and the capture writer; this module re-exports them for the RDMA
// side and adds the RoCE GID. The control path parses them out of the header
// templates the driver builds (lib/ionic/rdma/header-template.ts); the data
// path writes them as the GRH a UD receive starts with (datapath/datagram.ts).

import { be, raw } from '../../protocol/field';

export {
  ETH_P_8021Q, ETH_P_IP, ETH_P_IPV6, ethhdr, IP_DF, iphdr, IPPROTO_UDP, IPV4_IHL_MASK, IPV4_IHL_UNIT, IPV4_VERSION_SHIFT,
  IPV6_FLOW_MASK, IPV6_TC_MASK, IPV6_TC_SHIFT, IPV6_VERSION_SHIFT, ipv6hdr, udphdr, vlan_ethhdr,
} from '../net/headers';

/** A RoCEv2 GID holding an IPv4 address: ::ffff:a.b.c.d. */
export const ipv4_mapped_gid = { zero: raw(0, 10), ffff: be(10, 2), addr: raw(12, 4), SIZE: 16 } as const;
export const IPV4_MAPPED_MARK = 0xffff;
