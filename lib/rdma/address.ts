// Where a connected QP or an address handle sends: the addresses a header
// template names (contract 5.5). The device never gets a destination GID as
// a field; the control path parses it out of the Ethernet/IP/UDP template the
// driver prebuilt, and keeps the template itself too (the data path may want
// to put real frames on a wire one day).

import type { IpVersion } from './types';

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

/** A GID as text: IPv4-mapped ones as ::ffff:a.b.c.d, others as eight hex groups. */
export function gidToString(gid: Buffer): string {
  if (gid.length !== 16) return `<${gid.length}-byte gid>`;
  const mapped = gid.subarray(0, 10).every((b) => b === 0) && gid[10] === 0xff && gid[11] === 0xff;
  if (mapped) return `::ffff:${gid[12]}.${gid[13]}.${gid[14]}.${gid[15]}`;
  const groups: string[] = [];
  for (let i = 0; i < 16; i += 2) groups.push(gid.readUInt16BE(i).toString(16));
  return groups.join(':');
}

/** The IPv4-mapped GID of a 4-byte address. */
export function ipv4Gid(addr: Buffer): Buffer {
  const g = Buffer.alloc(16);
  g[10] = 0xff;
  g[11] = 0xff;
  addr.copy(g, 12, 0, 4);
  return g;
}
