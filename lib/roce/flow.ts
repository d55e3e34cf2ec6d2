// The UDP source port of a RoCEv2 flow: the only entropy ECMP routers see.
// As Linux computes it (include/rdma/ib_verbs.h, the same in rxe, mlx5, hns
// and irdma): the GRH flow label when the address has one, else a hash of the
// two QPNs; then the 20-bit label folded to 14 bits in the port range
// 0xC000-0xFFFF. Computed at create/modify QP, not per packet.

/** The lowest UDP source port of a RoCEv2 flow (IB_ROCE_UDP_ENCAP_VALID_PORT_MIN). */
const ROCE_UDP_SPORT_MIN = 0xc000;
const FLOW_LABEL_MASK = 0xfffff;

/** The flow label Linux derives from a connection's two QPNs when the GRH carries none. */
export function flowLabelOfQpns(localQpn: number, remoteQpn: number): number {
  let v = BigInt(localQpn >>> 0) * BigInt(remoteQpn >>> 0);
  v ^= v >> 20n;
  v ^= v >> 40n;
  return Number(v & BigInt(FLOW_LABEL_MASK));
}

/** A 20-bit flow label folded into the RoCEv2 source port range. */
export function udpSourcePortOfFlowLabel(flowLabel: number): number {
  const fl = flowLabel & FLOW_LABEL_MASK;
  const low = (fl & 0x3fff) ^ ((fl & 0xfc000) >>> 14);
  return low | ROCE_UDP_SPORT_MIN;
}

/** The source port for a QP: from its flow label, or (0) from its QPNs. */
export function udpSourcePort(flowLabel: number, localQpn: number, remoteQpn: number): number {
  const fl = flowLabel & FLOW_LABEL_MASK;
  return udpSourcePortOfFlowLabel(fl !== 0 ? fl : flowLabelOfQpns(localQpn, remoteQpn));
}
