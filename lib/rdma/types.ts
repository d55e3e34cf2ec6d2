// The RDMA object model shared by the control path (the ionic RDMA admin
// queue) and the data path: QP types and states, access and flag bits, the
// IB attribute mask. The numeric values are the ionic device interface's
// (docs/driver-contract.md (ionic RDMA) sections 3.3, 5.1-5.4), which are also
// what the resource manager stores, so nothing is translated twice.

/** QP transport types as CREATE_QP type_state carries them (ionic RDMA R5.1). */
export const enum QpType {
  RC = 0,
  UC = 1,
  RD = 2,
  UD = 3,
  SRQ = 4,
  XRC_INI = 5,
  XRC_TGT = 6,
  XRC_SRQ = 7,
}

/** QP states (ionic RDMA R5.2): the nibble values of MODIFY_QP type_state and QUERY_QP state_pmtu. */
export const enum QpState {
  RESET = 0,
  INIT = 1,
  RTR = 2,
  RTS = 3,
  SQD = 4,
  SQE = 5,
  ERR = 6,
}

export const QP_STATE_NAMES: readonly string[] = ['RESET', 'INIT', 'RTR', 'RTS', 'SQD', 'SQE', 'ERR'];

/**
 * May a QP go from `from` to `to`? The IB state table (IB spec 10.3.1, the
 * kernel's qp_state_table) without the attribute rules: any state may go to
 * RESET or ERR; RESET->INIT, INIT->INIT|RTR, RTR->RTS, RTS->RTS|SQD,
 * SQD->SQD|RTS, SQE->RTS. The host checks the same table before it sends
 * MODIFY_QP, so a refusal here means the host and device disagree (for
 * instance the device moved the QP to ERR on its own).
 */
export function qpTransitionAllowed(from: QpState, to: QpState): boolean {
  if (to === QpState.RESET || to === QpState.ERR) return true;
  switch (from) {
    case QpState.RESET:
      return to === QpState.INIT;
    case QpState.INIT:
      return to === QpState.INIT || to === QpState.RTR;
    case QpState.RTR:
      return to === QpState.RTS;
    case QpState.RTS:
      return to === QpState.RTS || to === QpState.SQD;
    case QpState.SQD:
      return to === QpState.SQD || to === QpState.RTS;
    case QpState.SQE:
      return to === QpState.RTS;
    default:
      return false;
  }
}

/** IB attribute mask bits (enum ib_qp_attr_mask), as MODIFY_QP attr_mask carries them (ionic RDMA R5.3). */
export const enum QpAttrMask {
  STATE = 1 << 0,
  CUR_STATE = 1 << 1,
  EN_SQD_ASYNC_NOTIFY = 1 << 2,
  ACCESS_FLAGS = 1 << 3,
  PKEY_INDEX = 1 << 4,
  PORT = 1 << 5,
  QKEY = 1 << 6,
  AV = 1 << 7,
  PATH_MTU = 1 << 8,
  TIMEOUT = 1 << 9,
  RETRY_CNT = 1 << 10,
  RNR_RETRY = 1 << 11,
  RQ_PSN = 1 << 12,
  MAX_QP_RD_ATOMIC = 1 << 13,
  ALT_PATH = 1 << 14,
  MIN_RNR_TIMER = 1 << 15,
  SQ_PSN = 1 << 16,
  MAX_DEST_RD_ATOMIC = 1 << 17,
  PATH_MIG_STATE = 1 << 18,
  CAP = 1 << 19,
  DEST_QPN = 1 << 20,
  RATE_LIMIT = 1 << 25,
}

/** Every mask bit a MODIFY_QP may carry (IB_QP_ATTR_STANDARD_BITS plus RATE_LIMIT); CAP is refused separately. */
export const QP_ATTR_MASK_KNOWN = ((1 << 21) - 1) | QpAttrMask.RATE_LIMIT;

/** QP flags (CREATE_QP priv_flags, MODIFY_QP access_flags; ionic RDMA R5.4). */
export const enum QpFlag {
  REMOTE_WRITE = 1 << 0,
  REMOTE_READ = 1 << 1,
  REMOTE_ATOMIC = 1 << 2,
  SQ_PB = 1 << 6,
  RQ_PB = 1 << 7,
  SQ_SPEC = 1 << 8,
  RQ_SPEC = 1 << 9,
  REMOTE_PRIVILEGED = 1 << 10,
  SQ_DRAINING = 1 << 11,
  SQD_NOTIFY = 1 << 12,
  SQ_CMB = 1 << 13,
  RQ_CMB = 1 << 14,
  PRIVILEGED = 1 << 15,
}

/** The remote-access bits of QpFlag. */
export const QP_ACCESS_MASK = QpFlag.REMOTE_WRITE | QpFlag.REMOTE_READ | QpFlag.REMOTE_ATOMIC;

/** MR/MW flags (CREATE_MR dbid_flags, REG_MR/BIND_MW WQE flags; ionic RDMA R3.3). */
export const enum MrFlag {
  LOCAL_WRITE = 1 << 0,
  REMOTE_WRITE = 1 << 1,
  REMOTE_READ = 1 << 2,
  REMOTE_ATOMIC = 1 << 3,
  MW_BIND = 1 << 4,
  ZERO_BASED = 1 << 5,
  ON_DEMAND = 1 << 6,
  PB = 1 << 7,
  UKEY_EN = 1 << 13,
  IS_MW = 1 << 14,
  INV_EN = 1 << 15,
}

/** Bits 0..11 of MrFlag are access bits. */
export const MR_ACCESS_MASK = (1 << 12) - 1;
/** The access bits this device honours (ON_DEMAND is refused: no ODP). */
export const MR_ACCESS_SUPPORTED =
  MrFlag.LOCAL_WRITE |
  MrFlag.REMOTE_WRITE |
  MrFlag.REMOTE_READ |
  MrFlag.REMOTE_ATOMIC |
  MrFlag.MW_BIND |
  MrFlag.ZERO_BASED |
  MrFlag.PB;

/** What a key names. */
export const enum MrKind {
  /** A user MR (reg_user_mr): mapped at creation. */
  USER = 'user',
  /** A fast-registration MR (alloc_mr, flags PHYS): mapped later by a REG_MR WQE. */
  FRMR = 'frmr',
  /** Memory window type 1 (bound by BIND_MW, never invalidated). */
  MW1 = 'mw1',
  /** Memory window type 2 (bound by BIND_MW, invalidated by LOCAL_INV/SEND_INV). */
  MW2 = 'mw2',
}

/** Address families of a header template. */
export type IpVersion = 4 | 6;
