// Identify data structures, built from the subsystem: the controller (an I/O
// controller, or the discovery controller), a namespace, the active
// namespace list and the namespace identification descriptors. Each builder
// returns the 4096 bytes the host receives.

import { setField, setRawBytes } from '../../../protocol/field';
import { setText } from './command';
import {
  CSI_NVM,
  ID_CTRL,
  IDENTIFY_DATA_SIZE,
  NMIC_SHARED,
  NsIdType,
  NVM_CQES_LOG2,
  NVM_SQES_LOG2,
  NVME_VS_1_3,
  nvme_id_ctrl,
  nvme_id_ns,
  nvme_lbaf,
  nvme_ns_id_desc,
  nvme_ns_list,
  nvme_sqe,
} from './layouts';
import { ABORT_LIMIT, ASYNC_EVENT_LIMIT, ERROR_LOG_ENTRIES, KAS_100MS, MDTS_LOG2, QUEUE_ENTRIES } from './limits';
import { NvmeofSubsystem } from './subsystem';

/** Recommended arbitration burst (log2). */
const RAB = 6;
/** Firmware slot 1, read only. */
const FRMW_SLOT1_RO = 0x03;
/** SQES / CQES: required and maximum entry size, both the NVM ones. */
const SQES = (NVM_SQES_LOG2 << 4) | NVM_SQES_LOG2;
const CQES = (NVM_CQES_LOG2 << 4) | NVM_CQES_LOG2;
/** Response capsule: the CQE alone (16 bytes, in 16-byte units). */
const IORCSZ = 1;
const CAPSULE_UNIT = 16;

/** Identify Controller for a controller of `sub` numbered `cntlid`. */
export function identifyController(sub: NvmeofSubsystem, cntlid: number): Buffer {
  const b = Buffer.alloc(IDENTIFY_DATA_SIZE);
  const discovery = sub.kind === 'discovery';
  setText(b, 0, nvme_id_ctrl.sn, sub.serial, 0x20);
  setText(b, 0, nvme_id_ctrl.mn, sub.model, 0x20);
  setText(b, 0, nvme_id_ctrl.fr, sub.firmware, 0x20);
  setField(b, 0, nvme_id_ctrl.rab, RAB);
  setField(b, 0, nvme_id_ctrl.mdts, MDTS_LOG2);
  setField(b, 0, nvme_id_ctrl.cntlid, cntlid);
  setField(b, 0, nvme_id_ctrl.ver, NVME_VS_1_3);
  setField(b, 0, nvme_id_ctrl.cntrltype, discovery ? ID_CTRL.CNTRLTYPE_DISCOVERY : ID_CTRL.CNTRLTYPE_IO);
  setField(b, 0, nvme_id_ctrl.oaes, discovery ? ID_CTRL.OAES_DISC_CHANGE : ID_CTRL.OAES_NS_ATTR);
  setField(b, 0, nvme_id_ctrl.aerl, ASYNC_EVENT_LIMIT - 1);
  setField(b, 0, nvme_id_ctrl.lpa, ID_CTRL.LPA_EXTENDED);
  setField(b, 0, nvme_id_ctrl.elpe, ERROR_LOG_ENTRIES - 1);
  setField(b, 0, nvme_id_ctrl.kas, KAS_100MS);
  setField(b, 0, nvme_id_ctrl.maxcmd, QUEUE_ENTRIES);
  const inCapsule = sub.inCapsuleBytes;
  setField(
    b,
    0,
    nvme_id_ctrl.sgls,
    ID_CTRL.SGLS_SUPPORTED | ID_CTRL.SGLS_KEYED | (inCapsule > 0 ? ID_CTRL.SGLS_OFFSET : 0),
  );
  setText(b, 0, nvme_id_ctrl.subnqn, sub.nqn, 0x00);
  if (discovery) return b; // no I/O queues: no capsule sizes, no namespaces
  setField(b, 0, nvme_id_ctrl.ioccsz, (nvme_sqe.SIZE + inCapsule) / CAPSULE_UNIT);
  setField(b, 0, nvme_id_ctrl.iorcsz, IORCSZ);
  setField(b, 0, nvme_id_ctrl.msdbd, 1);
  setField(b, 0, nvme_id_ctrl.cmic, ID_CTRL.CMIC_MULTI_CTRL);
  setField(b, 0, nvme_id_ctrl.acl, ABORT_LIMIT - 1);
  setField(b, 0, nvme_id_ctrl.frmw, FRMW_SLOT1_RO);
  setField(b, 0, nvme_id_ctrl.sqes, SQES);
  setField(b, 0, nvme_id_ctrl.cqes, CQES);
  setField(b, 0, nvme_id_ctrl.nn, sub.nn);
  setField(b, 0, nvme_id_ctrl.oncs, ID_CTRL.ONCS_DSM | ID_CTRL.ONCS_WRITE_ZEROES);
  setField(b, 0, nvme_id_ctrl.vwc, ID_CTRL.VWC_PRESENT);
  return b;
}

/** Identify Namespace (all zeroes for an inactive nsid, which the caller has checked is in range). */
export function identifyNamespace(sub: NvmeofSubsystem, nsid: number): Buffer {
  const b = Buffer.alloc(IDENTIFY_DATA_SIZE);
  const ns = sub.namespaces.get(nsid);
  const ids = sub.ids(nsid);
  if (!ns || !ids) return b;
  setField(b, 0, nvme_id_ns.nsze, ns.blocks);
  setField(b, 0, nvme_id_ns.ncap, ns.blocks);
  setField(b, 0, nvme_id_ns.nuse, ns.blocks);
  setField(b, 0, nvme_id_ns.nlbaf, 0);
  setField(b, 0, nvme_id_ns.flbas, 0);
  setField(b, 0, nvme_id_ns.nmic, NMIC_SHARED);
  setField(b, 0, nvme_id_ns.dlfeat, ns.dlfeat);
  setField(b, 0, nvme_id_ns.nvmcap_lo, ns.blocks * ns.blockSize);
  setRawBytes(b, 0, nvme_id_ns.nguid, ids.nguid);
  setRawBytes(b, 0, nvme_id_ns.eui64, ids.eui64);
  setField(b, nvme_id_ns.LBAF, nvme_lbaf.ds, Math.log2(ns.blockSize));
  return b;
}

/** Active namespace list: the active nsids above `after`, ascending, at most 1024. */
export function activeNamespaceList(sub: NvmeofSubsystem, after: number): Buffer {
  const b = Buffer.alloc(IDENTIFY_DATA_SIZE);
  const nsids = [...sub.namespaces.keys()]
    .filter((n) => n > after)
    .sort((x, y) => x - y)
    .slice(0, nvme_ns_list.MAX);
  nsids.forEach((nsid, i) => setField(b, i * nvme_ns_list.ENTRY, nvme_ns_list.nsid, nsid));
  return b;
}

/** Namespace identification descriptors: EUI-64, NGUID, UUID, and the command set (NVM). */
export function namespaceDescriptors(sub: NvmeofSubsystem, nsid: number): Buffer {
  const b = Buffer.alloc(IDENTIFY_DATA_SIZE);
  const ids = sub.ids(nsid);
  if (!ids) return b;
  let at = 0;
  const put = (t: { readonly nidt: number; readonly nidl: number }, id: Buffer): void => {
    setField(b, at, nvme_ns_id_desc.nidt, t.nidt);
    setField(b, at, nvme_ns_id_desc.nidl, t.nidl);
    id.copy(b, at + nvme_ns_id_desc.NID, 0, t.nidl);
    at += nvme_ns_id_desc.NID + t.nidl;
  };
  put(NsIdType.EUI64, ids.eui64);
  put(NsIdType.NGUID, ids.nguid);
  put(NsIdType.UUID, ids.uuid);
  put(NsIdType.CSI, Buffer.from([CSI_NVM]));
  return b;
}

/** I/O command set specific Identify Controller for the NVM set: all zeroes (no limits beyond MDTS). */
export function identifyNvmController(): Buffer {
  return Buffer.alloc(IDENTIFY_DATA_SIZE);
}
