// The ionic wire header (lib/mesh/ionic-header.ts, docs/mesh.md) as the mesh
// data path uses it. Our uses of the C rocm-ernic's fields:
//   rsvd       flags: bit 0 = a datagram (UD/GSI) SEND, delivered without an ACK;
//              bit 1 = solicited; bits 8..15 = the wire version (IONIC_WIRE_VERSION,
//              layouts.ts): every header we write carries it, and a receiver
//              refuses one without it (0 is the C rocm-ernic's format)
//   rkey       a datagram's effective Q_Key (checked by the responder)
//   remote_va  a datagram's source MAC (48 bits), for the receive CQE
//   swap_add   a datagram's IP version (bits 16..23) and VLAN (bit 24 set, TCI in 0..15)
//   status     the responder's answer: an IonicStatus code (0 = done)

import type { WireHeader } from '../../../mesh/ionic-header';
import { IONIC_WIRE_VERSION, IONIC_WIRE_VERSION_MASK, IONIC_WIRE_VERSION_SHIFT } from '../../../mesh/layouts';

/** rsvd bit 0: a datagram SEND. */
export const WIRE_FLAG_DATAGRAM = 1;
/** rsvd bit 1: the WQE asked for a solicited event. */
export const WIRE_FLAG_SOLICITED = 2;
/** rsvd bits 8..15 as every header of ours has them. */
export const WIRE_VERSION_FLAGS = IONIC_WIRE_VERSION << IONIC_WIRE_VERSION_SHIFT;

/** Whether a received header's flags (rsvd) say it is of our wire version. */
export function wireVersionOk(flags: number): boolean {
  return (flags & IONIC_WIRE_VERSION_MASK) === WIRE_VERSION_FLAGS;
}

const VLAN_PRESENT = 1 << 24;

/** A datagram's receive-side address facts, packed into remote_va / swap_add. */
export function packDatagramAv(h: WireHeader, smac: Buffer, ipVersion: number, vlanTci: number): void {
  h.remoteVa = smac.readUIntBE(0, 6);
  h.swapAddLo = ((ipVersion & 0xff) << 16) | (vlanTci >= 0 ? VLAN_PRESENT | (vlanTci & 0xffff) : 0);
  h.swapAddHi = 0;
}

/** The inverse of packDatagramAv: writes the MAC into `smac`, returns [ipVersion, vlanTci or -1]. */
export function unpackDatagramAv(h: WireHeader, smac: Buffer): [number, number] {
  smac.writeUIntBE(h.remoteVa >= 0 ? h.remoteVa % 2 ** 48 : 0, 0, 6);
  const ipVersion = (h.swapAddLo >>> 16) & 0xff;
  const vlan = h.swapAddLo & VLAN_PRESENT ? h.swapAddLo & 0xffff : -1;
  return [ipVersion, vlan];
}
