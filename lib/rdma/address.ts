// Where a connected QP or an address handle sends: the addresses a header
// template names (ionic RDMA R5.5). The device never gets a destination GID as
// a field; the control path parses it out of the Ethernet/IP/UDP template the
// driver prebuilt, and keeps the template itself too (the data path may want
// to put real frames on a wire one day).

import { be, getField, raw, setField, setRawBytes, viewRaw } from '../../protocol/field';
import type { IpVersion } from './types';

/** A RoCEv2 GID holding an IPv4 address: ::ffff:a.b.c.d. */
export const ipv4_mapped_gid = { zero: raw(0, 10), ffff: be(10, 2), addr: raw(12, 4), SIZE: 16 } as const;
const IPV4_MAPPED_MARK = 0xffff;

export interface AddressVector {
  readonly ipVersion: IpVersion;
  /** Destination and source MAC. */
  readonly dmac: Buffer;
  readonly smac: Buffer;
  /** The 802.1Q TCI (PCP << 13 | VID), or -1 when untagged. */
  readonly vlanTci: number;
  /** RoCEv2 GIDs: the IPv6 addresses, or ::ffff:a.b.c.d for IPv4. 16 bytes each. */
  readonly sgid: Buffer;
  readonly dgid: Buffer;
  /** IPv4 TTL or IPv6 hop limit. */
  readonly hopLimit: number;
  /** IPv4 TOS or IPv6 traffic class (DSCP << 2 | ECN). */
  readonly trafficClass: number;
  /** IPv6 flow label (0 for IPv4). */
  readonly flowLabel: number;
  readonly udpSrcPort: number;
  readonly udpDstPort: number;
  /** The template as the driver built it (a copy). */
  readonly template: Buffer;
}

/** Whether a GID is an IPv4-mapped one (::ffff:a.b.c.d). */
function isIpv4Gid(gid: Buffer): boolean {
  return (
    gid.length === ipv4_mapped_gid.SIZE &&
    viewRaw(gid, 0, ipv4_mapped_gid.zero).every((b) => b === 0) &&
    getField(gid, 0, ipv4_mapped_gid.ffff) === IPV4_MAPPED_MARK
  );
}

/** A GID as text: IPv4-mapped ones as ::ffff:a.b.c.d, others as eight hex groups. */
export function gidToString(gid: Buffer): string {
  if (gid.length !== ipv4_mapped_gid.SIZE) return `<${gid.length}-byte gid>`;
  if (isIpv4Gid(gid)) return `::ffff:${[...viewRaw(gid, 0, ipv4_mapped_gid.addr)].join('.')}`;
  const groups: string[] = [];
  for (let i = 0; i < gid.length; i += 2) groups.push(gid.readUInt16BE(i).toString(16));
  return groups.join(':');
}

/** The IPv4-mapped GID of a 4-byte address. */
export function ipv4Gid(addr: Buffer): Buffer {
  const g = Buffer.alloc(ipv4_mapped_gid.SIZE);
  setField(g, 0, ipv4_mapped_gid.ffff, IPV4_MAPPED_MARK);
  setRawBytes(g, 0, ipv4_mapped_gid.addr, addr);
  return g;
}
