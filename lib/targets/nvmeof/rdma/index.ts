// The NVMe-oF target's RDMA transport: IB CM on the guest's QP1, capsules on
// connected QPs, ARP and ICMP echo on the Ethernet segment (data-path.ts).
export { installNvmeofDataPath, NvmeofDataPath } from './data-path';
export type { NvmeofDataPathOptions } from './data-path';
export { CmResponder, guidFromMac, MAX_CM_CONNECTIONS, TARGET_QPN_BASE } from './cm';
export type { CmConnection, CmPeer } from './cm';
