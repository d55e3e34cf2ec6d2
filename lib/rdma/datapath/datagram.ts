// Datagrams (contract 5.6; architecture "Datagrams (UD and GSI)"): the Q_Key
// rules and the 40-byte network header a UD receive starts with. Shared by the
// loopback path and, later, the mesh, which attaches the header before sending.

import type { AddressVector } from '../address';

/** Bytes of network header (GRH) that start every UD receive; counted in the byte count. */
export const GRH_SIZE = 40;

/** A Q_Key with this bit set in a UD WQE is "controlled": use the sending QP's own Q_Key. */
export const CONTROLLED_QKEY_BIT = 0x80000000;

/** UDP + BTH + DETH + ICRC: what a RoCEv2 UD packet carries besides the IP header and payload. */
const UD_OVERHEAD = 8 + 12 + 8 + 4;

/**
 * The Q_Key a UD send carries: the WQE's dest_qkey, or (high bit set) the
 * sending QP's own Q_Key; -1 when the WQE asks for the QP's and it has none
 * (the datagram is refused).
 */
export function effectiveQkey(wqeQkey: number, senderQkey: number | null): number {
  if ((wqeQkey >>> 0) >= CONTROLLED_QKEY_BIT) return senderQkey === null ? -1 : senderQkey >>> 0;
  return wqeQkey >>> 0;
}

/** Whether a destination takes a datagram: it must be UD/GSI and, if it has a Q_Key, match. */
export function datagramAccepted(destIsDatagram: boolean, destQkey: number | null, qkey: number): boolean {
  if (!destIsDatagram || qkey < 0) return false;
  return destQkey === null || (destQkey >>> 0) === qkey;
}

/**
 * Write the network header of a `payloadLen`-byte datagram sent with `av` into
 * out[0..40): for IPv4, 20 zero bytes then the IPv4 header (checksummed); for
 * IPv6, the IPv6 header. This is what the receiving host's stack parses.
 */
export function writeGrh(av: AddressVector, payloadLen: number, out: Buffer): void {
  out.fill(0, 0, GRH_SIZE);
  if (av.ipVersion === 4) {
    const h = out.subarray(20, GRH_SIZE);
    h[0] = 0x45;
    h[1] = av.trafficClass & 0xff;
    h.writeUInt16BE((20 + UD_OVERHEAD + payloadLen) & 0xffff, 2);
    h[6] = 0x40; // don't fragment
    h[8] = av.hopLimit & 0xff;
    h[9] = 17; // UDP
    av.sgid.copy(h, 12, 12, 16);
    av.dgid.copy(h, 16, 12, 16);
    let sum = 0;
    for (let i = 0; i < 20; i += 2) sum += h.readUInt16BE(i);
    while (sum > 0xffff) sum = (sum & 0xffff) + (sum >>> 16);
    h.writeUInt16BE(~sum & 0xffff, 10);
    return;
  }
  out.writeUInt32BE(((6 << 28) | ((av.trafficClass & 0xff) << 20) | (av.flowLabel & 0xfffff)) >>> 0, 0);
  out.writeUInt16BE((UD_OVERHEAD + payloadLen) & 0xffff, 4);
  out[6] = 17;
  out[7] = av.hopLimit & 0xff;
  av.sgid.copy(out, 8);
  av.dgid.copy(out, 24);
}
