// The Ethernet offloads the LIF offers (lif_config.features, the answer to
// LIF_SETATTR FEATURES): IONIC_ETH_HW_* bits of ionic_if.h, and which of them
// a NIC profile withholds. The driver keeps (what it asked) AND (our answer)
// and sends the whole set again whenever ethtool -K changes it.

import type { NicOffloads } from '../profile';

export const enum EthHw {
  VLAN_TX_TAG = 1 << 0,
  VLAN_RX_STRIP = 1 << 1,
  VLAN_RX_FILTER = 1 << 2,
  RX_HASH = 1 << 3,
  RX_CSUM = 1 << 4,
  TX_SG = 1 << 5,
  RX_SG = 1 << 6,
  TX_CSUM = 1 << 7,
  TSO = 1 << 8,
  TSO_IPV6 = 1 << 9,
  TSO_ECN = 1 << 10,
}

/** The offload bits a profile offers (VLAN_RX_FILTER, RX_SG and the tunnel TSOs are never offered). */
export function offeredFeatures(o: NicOffloads): number {
  let f = 0;
  if (o.txSg) f |= EthHw.TX_SG;
  if (o.txCsum) f |= EthHw.TX_CSUM;
  // Linux turns TSO off without SG and checksumming, so offer it only with both.
  if (o.tso && o.txSg && o.txCsum) f |= EthHw.TSO | EthHw.TSO_IPV6 | EthHw.TSO_ECN;
  if (o.rxCsum) f |= EthHw.RX_CSUM;
  if (o.rxHash) f |= EthHw.RX_HASH;
  if (o.vlan) f |= EthHw.VLAN_TX_TAG | EthHw.VLAN_RX_STRIP;
  return f;
}
