// Named offsets and bits of PCI configuration space: what region 7 of a
// vfio-user PCI device holds. The PCI library (lib/pci) builds config spaces
// on them; the replay (./replay.ts) reads BAR registers with them.
//
// Names follow linux include/uapi/linux/pci_regs.h so a reader can hold them
// against the kernel and lspci. Offsets inside a capability are relative to the
// capability's start. Access kinds are in the comments: RO, RW, W1C (write 1
// to clear), WO (reads 0), RsvdP (reserved, reads 0).

/** Sizes of the two config spaces. */
export const PciConfigSize = {
  /** Conventional PCI: the type-0 header plus the capability area. */
  CONVENTIONAL: 256,
  /** PCI Express: adds the extended capability area from 0x100. */
  EXPRESS: 4096,
} as const;

/** Type-0 header (pci_regs.h PCI_*), with each field's width in bytes. */
export const PciHeader = {
  VENDOR_ID: { offset: 0x00, size: 2 }, // RO
  DEVICE_ID: { offset: 0x02, size: 2 }, // RO
  COMMAND: { offset: 0x04, size: 2 }, // RW bits of PciCommand
  STATUS: { offset: 0x06, size: 2 }, // RO with W1C error bits
  REVISION_ID: { offset: 0x08, size: 1 }, // RO
  CLASS_CODE: { offset: 0x09, size: 3 }, // RO: prog-if, subclass, base class
  CACHE_LINE_SIZE: { offset: 0x0c, size: 1 }, // RW (no effect on PCIe)
  LATENCY_TIMER: { offset: 0x0d, size: 1 }, // RW on conventional PCI, RO 0 on PCIe
  HEADER_TYPE: { offset: 0x0e, size: 1 }, // RO
  BIST: { offset: 0x0f, size: 1 }, // RO 0: no built-in self test
  BASE_ADDRESS_0: { offset: 0x10, size: 4 }, // BARs 0-5 at 0x10 + 4 * i
  CARDBUS_CIS: { offset: 0x28, size: 4 }, // RO 0
  SUBSYSTEM_VENDOR_ID: { offset: 0x2c, size: 2 }, // RO
  SUBSYSTEM_ID: { offset: 0x2e, size: 2 }, // RO
  ROM_ADDRESS: { offset: 0x30, size: 4 }, // RO 0: no expansion ROM
  CAPABILITY_LIST: { offset: 0x34, size: 1 }, // RO: first capability
  INTERRUPT_LINE: { offset: 0x3c, size: 1 }, // RW scratch for the OS
  INTERRUPT_PIN: { offset: 0x3d, size: 1 }, // RO: 1 = INTA, 0 = none
  MIN_GNT: { offset: 0x3e, size: 1 }, // RO 0
  MAX_LAT: { offset: 0x3f, size: 1 }, // RO 0
} as const;

/** First byte after the type-0 header: where capabilities may start. */
export const PCI_STD_HEADER_SIZEOF = 0x40;
/** Number of BAR slots in a type-0 header. */
export const PCI_NUM_BARS = 6;
/** Offset of BAR `i`. */
export function barOffset(index: number): number {
  return PciHeader.BASE_ADDRESS_0.offset + 4 * index;
}

/** COMMAND register bits (PCI_COMMAND_*). */
export const PciCommand = {
  IO: 0x0001, // respond to I/O space
  MEMORY: 0x0002, // respond to memory space
  MASTER: 0x0004, // bus master: the function may DMA
  SPECIAL: 0x0008,
  INVALIDATE: 0x0010,
  VGA_PALETTE: 0x0020,
  PARITY: 0x0040, // parity error response
  WAIT: 0x0080,
  SERR: 0x0100, // SERR# enable
  FAST_BACK: 0x0200,
  INTX_DISABLE: 0x0400, // INTx emulation disable
} as const;

/** STATUS register bits (PCI_STATUS_*). */
export const PciStatus = {
  IMM_READY: 0x0001,
  INTERRUPT: 0x0008, // RO: INTx level of the function
  CAP_LIST: 0x0010, // RO: capability list at CAPABILITY_LIST
  MHZ_66: 0x0020,
  FAST_BACK: 0x0080,
  PARITY: 0x0100, // W1C: master data parity error
  DEVSEL_MASK: 0x0600,
  SIG_TARGET_ABORT: 0x0800, // W1C
  REC_TARGET_ABORT: 0x1000, // W1C
  REC_MASTER_ABORT: 0x2000, // W1C
  SIG_SYSTEM_ERROR: 0x4000, // W1C
  DETECTED_PARITY: 0x8000, // W1C
} as const;

/** All W1C error bits of STATUS. */
export const PCI_STATUS_ERROR_BITS =
  PciStatus.PARITY |
  PciStatus.SIG_TARGET_ABORT |
  PciStatus.REC_TARGET_ABORT |
  PciStatus.REC_MASTER_ABORT |
  PciStatus.SIG_SYSTEM_ERROR |
  PciStatus.DETECTED_PARITY;

/** HEADER_TYPE values. */
export const PciHeaderType = {
  NORMAL: 0x00,
  MULTI_FUNCTION: 0x80,
} as const;

/** INTERRUPT_PIN values. */
export const PciInterruptPin = {
  NONE: 0,
  INTA: 1,
} as const;

/** BAR low-bit encodings (PCI_BASE_ADDRESS_*). */
export const PciBar = {
  SPACE_IO: 0x01, // bit 0: I/O BAR
  MEM_TYPE_32: 0x00, // bits 2:1 = 00
  MEM_TYPE_64: 0x04, // bits 2:1 = 10: this and the next slot form one BAR
  MEM_PREFETCH: 0x08, // bit 3
  /** Bits of a memory BAR that are type information, not address. */
  MEM_FLAGS_MASK: 0x0f,
  /** Bits of an I/O BAR that are type information, not address. */
  IO_FLAGS_MASK: 0x03,
} as const;

/** Smallest BAR sizes the PCI spec allows (libvfio-user enforces the same). */
export const PCI_BAR_MIN_MEM_SIZE = 16;
export const PCI_BAR_MIN_IO_SIZE = 4;
/** Largest I/O BAR a function may request. */
export const PCI_BAR_MAX_IO_SIZE = 256;
/** Largest 32-bit memory BAR: address bit 31 must stay writable. */
export const PCI_BAR_MAX_MEM32_SIZE = 0x8000_0000;

/** Capability ids (PCI_CAP_ID_*). */
export const PciCapId = {
  PM: 0x01,
  MSI: 0x05,
  EXP: 0x10,
  MSIX: 0x11,
} as const;

/** Generic capability header: id and next pointer (PCI_CAP_LIST_*). */
export const PciCap = {
  ID: 0x00,
  NEXT: 0x01,
  /** The capability's 16-bit register after the header (PCI_CAP_FLAGS). */
  FLAGS: 0x02,
} as const;

/** Power Management capability (PCI_PM_*); 8 bytes. */
export const PciPm = {
  PMC: 0x02, // RO: capabilities
  CTRL: 0x04, // PMCSR: power state RW, rest RO here
  BSE: 0x06, // RO 0: bridge extensions
  DATA: 0x07, // RO 0
  SIZEOF: 8,
} as const;

/** PMC bits. */
export const PciPmCap = {
  VER_MASK: 0x0007,
  VER_3: 0x0003, // PCI PM 1.2
  D1: 0x0200,
  D2: 0x0400,
  PME_MASK: 0xf800,
} as const;

/** PMCSR bits. */
export const PciPmCtrl = {
  STATE_MASK: 0x0003, // RW: D0..D3hot
  NO_SOFT_RESET: 0x0008, // RO: D3hot -> D0 keeps function state
  PME_ENABLE: 0x0100,
  PME_STATUS: 0x8000,
} as const;

/** Power states in PMCSR. */
export const PciPowerState = {
  D0: 0,
  D1: 1,
  D2: 2,
  D3HOT: 3,
} as const;

/** MSI-X capability (PCI_MSIX_*); 12 bytes. */
export const PciMsix = {
  FLAGS: 0x02, // message control
  TABLE: 0x04, // RO: table offset | BIR
  PBA: 0x08, // RO: PBA offset | BIR
  SIZEOF: 12,
} as const;

/** MSI-X message control bits. */
export const PciMsixFlags = {
  QSIZE: 0x07ff, // RO: table size - 1
  MASKALL: 0x4000, // RW: function mask
  ENABLE: 0x8000, // RW: MSI-X enable
} as const;

/** Largest MSI-X table (QSIZE + 1). */
export const PCI_MSIX_MAX_VECTORS = 2048;

/** MSI-X table entry (PCI_MSIX_ENTRY_*); 16 bytes per vector. */
export const PciMsixEntry = {
  LOWER_ADDR: 0x0,
  UPPER_ADDR: 0x4,
  DATA: 0x8,
  VECTOR_CTRL: 0xc,
  SIZE: 16,
} as const;

/** Vector control bits. */
export const PciMsixEntryCtrl = {
  MASKBIT: 0x1, // RW: per-vector mask, set at reset
} as const;

/** PCI Express capability (PCI_EXP_*), version 2 layout; 0x3c bytes. */
export const PciExp = {
  FLAGS: 0x02, // RO: version, device/port type
  DEVCAP: 0x04, // RO
  DEVCTL: 0x08, // RW, bit 15 initiates FLR
  DEVSTA: 0x0a, // W1C error bits
  LNKCAP: 0x0c, // RO
  LNKCTL: 0x10, // RW (endpoint subset)
  LNKSTA: 0x12, // RO
  SLTCAP: 0x14, // RO 0: no slot on an endpoint
  SLTCTL: 0x18,
  SLTSTA: 0x1a,
  RTCTL: 0x1c, // RO 0: not a root port
  RTCAP: 0x1e,
  RTSTA: 0x20,
  DEVCAP2: 0x24, // RO
  DEVCTL2: 0x28,
  DEVSTA2: 0x2a,
  LNKCAP2: 0x2c, // RO: supported link speeds vector
  LNKCTL2: 0x30, // target link speed
  LNKSTA2: 0x32,
  SLTCAP2: 0x34,
  SLTCTL2: 0x38,
  SLTSTA2: 0x3a,
  SIZEOF_V2: 0x3c,
} as const;

/** PCIe capabilities register (FLAGS). */
export const PciExpFlags = {
  VERS_MASK: 0x000f,
  VERS_2: 0x0002,
  TYPE_MASK: 0x00f0,
  TYPE_SHIFT: 4,
} as const;

/** Device/port types in FLAGS bits 7:4 (PCI_EXP_TYPE_*). */
export const PciExpType = {
  ENDPOINT: 0x0,
  LEG_END: 0x1,
  RC_END: 0x9,
} as const;

/** DEVCAP bits. */
export const PciExpDevCap = {
  PAYLOAD_MASK: 0x0000_0007, // max payload supported: 128 << n
  PAYLOAD_256B: 0x0000_0001,
  EXT_TAG: 0x0000_0020, // 8-bit tags
  L0S_MASK: 0x0000_01c0, // acceptable L0s latency
  L1_MASK: 0x0000_0e00, // acceptable L1 latency
  RBER: 0x0000_8000, // role-based error reporting
  FLR: 0x1000_0000, // function level reset capable
} as const;

/** DEVCTL bits. */
export const PciExpDevCtl = {
  CERE: 0x0001, // correctable error reporting
  NFERE: 0x0002, // non-fatal error reporting
  FERE: 0x0004, // fatal error reporting
  URRE: 0x0008, // unsupported request reporting
  RELAX_EN: 0x0010, // relaxed ordering, set at reset
  PAYLOAD_MASK: 0x00e0, // max payload size
  EXT_TAG: 0x0100,
  PHANTOM: 0x0200,
  AUX_PME: 0x0400,
  NOSNP_EN: 0x0800, // no snoop, set at reset
  READRQ_MASK: 0x7000, // max read request size
  READRQ_512B: 0x2000, // reset value of max read request
  BCR_FLR: 0x8000, // WO: initiate function level reset
} as const;

/** DEVSTA bits. */
export const PciExpDevSta = {
  CED: 0x0001, // W1C: correctable error detected
  NFED: 0x0002, // W1C
  FED: 0x0004, // W1C
  URD: 0x0008, // W1C
  AUXPD: 0x0010, // RO
  TRPND: 0x0020, // RO: transactions pending
} as const;

/** LNKCAP fields. */
export const PciExpLnkCap = {
  SLS_MASK: 0x0000_000f, // max link speed (PciLinkSpeed)
  MLW_MASK: 0x0000_03f0, // max link width
  MLW_SHIFT: 4,
  ASPMS_MASK: 0x0000_0c00,
  PN_MASK: 0xff00_0000, // port number
} as const;

/** LNKCTL bits an endpoint implements. */
export const PciExpLnkCtl = {
  ASPMC_MASK: 0x0003,
  RCB: 0x0008, // read completion boundary 128 bytes
  CCC: 0x0040, // common clock configuration
  ES: 0x0080, // extended synch
} as const;

/** LNKSTA fields. */
export const PciExpLnkSta = {
  CLS_MASK: 0x000f, // current link speed (PciLinkSpeed)
  NLW_MASK: 0x03f0, // negotiated link width
  NLW_SHIFT: 4,
  LT: 0x0800, // link training
  SLC: 0x1000, // slot clock configuration
  DLLLA: 0x2000,
} as const;

/** LNKCAP2: bit n of the vector (register bit n) = speed encoding n supported. */
export const PciExpLnkCap2 = {
  SLS_MASK: 0x0000_00fe,
  SLS_SHIFT: 1,
} as const;

/** Link speed encodings of LNKCAP/LNKSTA/LNKCTL2 (PCI_EXP_LNKCAP_SLS_*). */
export const PciLinkSpeed = {
  GT_2_5: 1,
  GT_5_0: 2,
  GT_8_0: 3,
  GT_16_0: 4,
  GT_32_0: 5,
  GT_64_0: 6,
} as const;
export type PciLinkSpeedCode = 1 | 2 | 3 | 4 | 5 | 6;

/** Link widths a port may report. */
export type PciLinkWidth = 1 | 2 | 4 | 8 | 16 | 32;
export const PCI_LINK_WIDTHS: readonly PciLinkWidth[] = [1, 2, 4, 8, 16, 32];

/** Extended capability header at 0x100 and up (PCI_EXT_CAP_*). */
export const PciExtCap = {
  FIRST: 0x100,
  /** An all-zero header means "no extended capabilities". */
  HEADER_SIZE: 4,
} as const;
