// The standard capability list: Power Management, MSI-X and PCI Express.
//
// Capabilities are laid out one after another from 0x40, each DWORD aligned,
// and chained through their next pointers in that order. QEMU rebuilds the
// chain in its own emulation but reads the registers from us
// (docs/vfio-user-protocol.md 3.5), and refuses a PCIe capability that is not an endpoint
// type (3.4 step 10). Every register here is declared with its access kind;
// the side effects (FLR, power state, MSI-X control) are hooked by the function.

import type { ConfigSpace } from './config-space';
import type { MsixSpec } from './msix';
import {
  PCI_STD_HEADER_SIZEOF,
  PciCap,
  PciCapId,
  PciExp,
  PciExpDevCap,
  PciExpDevCtl,
  PciExpDevSta,
  PciExpFlags,
  PciExpLnkCap,
  PciExpLnkCap2,
  PciExpLnkCtl,
  PciExpLnkSta,
  PciExpType,
  PciExtCap,
  PciMsix,
  PciMsixFlags,
  PciPm,
  PciPmCap,
  PciPmCtrl,
  PciPowerState,
} from '../vfio-user/pci-registers';
import type { PciLinkSpeedCode, PciLinkWidth } from '../vfio-user/pci-registers';

export interface PcieLinkSpec {
  /** LNKCAP speed encoding: 1..6 = 2.5, 5, 8, 16, 32, 64 GT/s. */
  readonly maxLinkSpeed: PciLinkSpeedCode;
  readonly maxLinkWidth: PciLinkWidth;
}

interface CapabilityOptions {
  readonly powerManagement: boolean;
  readonly msix?: MsixSpec;
  readonly pcie?: PcieLinkSpec;
  /** Advertise FLR in DevCap and accept DevCtl.BCR_FLR. */
  readonly flr: boolean;
}

/** Where each capability landed; 0 for "not present". */
export interface CapabilityOffsets {
  /** Value of the capabilities pointer (0x34): the first capability, or 0. */
  readonly first: number;
  readonly pm: number;
  readonly msix: number;
  readonly pcie: number;
}

const PCIE_RO_ZERO_WORDS = [
  PciExp.SLTCTL,
  PciExp.SLTSTA,
  PciExp.RTCTL,
  PciExp.RTCAP,
  PciExp.DEVCTL2,
  PciExp.DEVSTA2,
  PciExp.LNKSTA2,
  PciExp.SLTCTL2,
  PciExp.SLTSTA2,
] as const;
const PCIE_RO_ZERO_DWORDS = [PciExp.SLTCAP, PciExp.RTSTA, PciExp.DEVCAP2, PciExp.SLTCAP2] as const;

/** Declare the capabilities in `space` and return their offsets. */
export function buildCapabilities(space: ConfigSpace, opts: CapabilityOptions): CapabilityOffsets {
  const list: Array<{ id: number; size: number; body: (at: number) => void }> = [];
  if (opts.powerManagement) list.push({ id: PciCapId.PM, size: PciPm.SIZEOF, body: (at) => definePm(space, at) });
  const msix = opts.msix;
  if (msix !== undefined)
    list.push({ id: PciCapId.MSIX, size: PciMsix.SIZEOF, body: (at) => defineMsix(space, at, msix) });
  const pcie = opts.pcie;
  if (pcie !== undefined) {
    list.push({ id: PciCapId.EXP, size: PciExp.SIZEOF_V2, body: (at) => definePcie(space, at, pcie, opts.flr) });
  }

  const offsets = { first: 0, pm: 0, msix: 0, pcie: 0 };
  let at = PCI_STD_HEADER_SIZEOF;
  for (let i = 0; i < list.length; i++) {
    const cap = list[i]!;
    const next = i + 1 < list.length ? align4(at + cap.size) : 0;
    space.define(at + PciCap.ID, 1, { reset: cap.id });
    space.define(at + PciCap.NEXT, 1, { reset: next });
    cap.body(at);
    if (i === 0) offsets.first = at;
    if (cap.id === PciCapId.PM) offsets.pm = at;
    if (cap.id === PciCapId.MSIX) offsets.msix = at;
    if (cap.id === PciCapId.EXP) offsets.pcie = at;
    at = next;
  }
  if (space.size > PciExtCap.FIRST) {
    // All-zero header: no extended capabilities (QEMU stops its walk on 0).
    space.define(PciExtCap.FIRST, PciExtCap.HEADER_SIZE, { reset: 0 });
  }
  return offsets;
}

/** PM v3 in D0: the OS may move to D3hot and back; function state survives (no soft reset). */
function definePm(space: ConfigSpace, at: number): void {
  space.define(at + PciPm.PMC, 2, { reset: PciPmCap.VER_3 });
  space.define(at + PciPm.CTRL, 2, {
    reset: PciPowerState.D0 | PciPmCtrl.NO_SOFT_RESET,
    rw: PciPmCtrl.STATE_MASK,
  });
  space.define(at + PciPm.BSE, 1, { reset: 0 });
  space.define(at + PciPm.DATA, 1, { reset: 0 });
}

/**
 * A PMCSR write that asks for D1 or D2 (not supported: PMC says so) is
 * discarded, as PCI PM 1.2 requires. Returns the state to keep.
 */
export function acceptedPowerState(oldState: number, requested: number): number {
  return requested === PciPowerState.D0 || requested === PciPowerState.D3HOT ? requested : oldState;
}

function defineMsix(space: ConfigSpace, at: number, msix: MsixSpec): void {
  space.define(at + PciMsix.FLAGS, 2, {
    reset: (msix.vectors - 1) & PciMsixFlags.QSIZE,
    rw: PciMsixFlags.ENABLE | PciMsixFlags.MASKALL,
  });
  space.define(at + PciMsix.TABLE, 4, { reset: (msix.tableOffset | msix.tableBar) >>> 0 });
  space.define(at + PciMsix.PBA, 4, { reset: (msix.pbaOffset | msix.pbaBar) >>> 0 });
}

/** PCIe v2 endpoint: FLR-capable, 256-byte payload, link trained at its maximum. */
function definePcie(space: ConfigSpace, at: number, link: PcieLinkSpec, flr: boolean): void {
  space.define(at + PciExp.FLAGS, 2, {
    reset: PciExpFlags.VERS_2 | (PciExpType.ENDPOINT << PciExpFlags.TYPE_SHIFT),
  });
  space.define(at + PciExp.DEVCAP, 4, {
    reset: (PciExpDevCap.PAYLOAD_256B | PciExpDevCap.EXT_TAG | PciExpDevCap.RBER | (flr ? PciExpDevCap.FLR : 0)) >>> 0,
  });
  const devCtlRw =
    PciExpDevCtl.CERE |
    PciExpDevCtl.NFERE |
    PciExpDevCtl.FERE |
    PciExpDevCtl.URRE |
    PciExpDevCtl.RELAX_EN |
    PciExpDevCtl.PAYLOAD_MASK |
    PciExpDevCtl.EXT_TAG |
    PciExpDevCtl.NOSNP_EN |
    PciExpDevCtl.READRQ_MASK;
  space.define(at + PciExp.DEVCTL, 2, {
    reset: PciExpDevCtl.RELAX_EN | PciExpDevCtl.NOSNP_EN | PciExpDevCtl.READRQ_512B,
    // BCR_FLR is stored for the hook to see, which then clears it (it always reads 0).
    rw: devCtlRw | (flr ? PciExpDevCtl.BCR_FLR : 0),
    keepOnFlr: PciExpDevCtl.PAYLOAD_MASK,
  });
  space.define(at + PciExp.DEVSTA, 2, {
    reset: 0,
    w1c: PciExpDevSta.CED | PciExpDevSta.NFED | PciExpDevSta.FED | PciExpDevSta.URD,
  });
  space.define(at + PciExp.LNKCAP, 4, {
    reset: link.maxLinkSpeed | (link.maxLinkWidth << PciExpLnkCap.MLW_SHIFT),
  });
  const lnkCtlRw = PciExpLnkCtl.ASPMC_MASK | PciExpLnkCtl.RCB | PciExpLnkCtl.CCC | PciExpLnkCtl.ES;
  space.define(at + PciExp.LNKCTL, 2, { reset: 0, rw: lnkCtlRw, keepOnFlr: lnkCtlRw });
  // The link is always up at full speed and width, so lspci shows e.g. "Speed 16GT/s, Width x16".
  space.define(at + PciExp.LNKSTA, 2, {
    reset: link.maxLinkSpeed | (link.maxLinkWidth << PciExpLnkSta.NLW_SHIFT) | PciExpLnkSta.SLC,
  });
  space.define(at + PciExp.LNKCAP2, 4, {
    reset: supportedSpeedsVector(link.maxLinkSpeed) << PciExpLnkCap2.SLS_SHIFT,
  });
  space.define(at + PciExp.LNKCTL2, 2, { reset: link.maxLinkSpeed });
  for (const off of PCIE_RO_ZERO_WORDS) space.define(at + off, 2, { reset: 0 });
  for (const off of PCIE_RO_ZERO_DWORDS) space.define(at + off, 4, { reset: 0 });
}

/** Supported link speeds vector: every speed up to the maximum (bit 0 = 2.5 GT/s). */
export function supportedSpeedsVector(maxSpeed: PciLinkSpeedCode): number {
  return (1 << maxSpeed) - 1;
}

function align4(n: number): number {
  return (n + 3) & ~3;
}
