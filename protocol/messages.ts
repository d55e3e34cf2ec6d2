// Message types: what the codec turns bytes into and back. Types only.
//
// Every message is a header plus a body. The body is a discriminated union on
// `kind`: the command's request form (`dmaMap`) or its reply form
// (`dmaMapReply`). An error reply has kind `error` whatever the command.
// u64 fields are plain numbers: values above 2^53-1 are refused at decode.

import type { Command } from './constants';

/**
 * Bytes after a request's fixed struct. Peers may send more than the struct
 * (libvfio-user's client sends argsz bytes with GET_REGION_INFO); servers ignore
 * them, and the codec keeps them so that re-encoding gives the same bytes.
 */
export interface Trailing {
  readonly trailing?: Buffer;
}

export interface Header {
  /** msg_id: chosen by the sender, echoed by the reply. */
  readonly id: number;
  readonly command: number;
  /** msg_size: the whole message including the 16-byte header. */
  readonly size: number;
  readonly flags: number;
  readonly error: number;
}

export interface VersionBody {
  readonly major: number;
  readonly minor: number;
  /** The JSON text without its terminating NUL, or undefined when the message has none. */
  readonly json: string | undefined;
}
export interface Version extends VersionBody {
  readonly kind: 'version';
}
export interface VersionReply extends VersionBody {
  readonly kind: 'versionReply';
}

export interface DmaMap extends Trailing {
  readonly kind: 'dmaMap';
  readonly argsz: number;
  readonly flags: number;
  /** Offset into the fd that backs the range (0 without fd). */
  readonly offset: number;
  readonly address: number;
  readonly size: number;
}
export interface DmaMapReply {
  readonly kind: 'dmaMapReply';
}

export interface DirtyBitmap {
  readonly pgsize: number;
  readonly size: number;
  readonly data: Buffer;
}
export interface DmaUnmapBody {
  readonly argsz: number;
  readonly flags: number;
  readonly address: number;
  readonly size: number;
  /** Only with the legacy GET_DIRTY_BITMAP flag. */
  readonly bitmap?: DirtyBitmap;
}
export interface DmaUnmap extends DmaUnmapBody {
  readonly kind: 'dmaUnmap';
}
export interface DmaUnmapReply extends DmaUnmapBody {
  readonly kind: 'dmaUnmapReply';
}

export interface DeviceInfoBody {
  readonly argsz: number;
  readonly flags: number;
  readonly numRegions: number;
  readonly numIrqs: number;
}
export interface DeviceGetInfo extends DeviceInfoBody, Trailing {
  readonly kind: 'deviceGetInfo';
}
export interface DeviceGetInfoReply extends DeviceInfoBody {
  readonly kind: 'deviceGetInfoReply';
}

export interface SparseMmapArea {
  readonly offset: number;
  readonly size: number;
}
export type RegionCap =
  | { readonly id: 1; readonly version: number; readonly areas: readonly SparseMmapArea[] }
  | { readonly id: 2; readonly version: number; readonly type: number; readonly subtype: number }
  /** Any other capability, kept as its bytes after the 8-byte header. */
  | { readonly id: number; readonly version: number; readonly raw: Buffer };

export interface RegionInfoBody {
  readonly argsz: number;
  readonly flags: number;
  readonly index: number;
  readonly capOffset: number;
  readonly size: number;
  readonly offset: number;
}
export interface DeviceGetRegionInfo extends RegionInfoBody, Trailing {
  readonly kind: 'deviceGetRegionInfo';
}
export interface DeviceGetRegionInfoReply extends RegionInfoBody {
  readonly kind: 'deviceGetRegionInfoReply';
  /** The capability chain, in chain order (empty without CAPS). */
  readonly caps: readonly RegionCap[];
}

export interface RegionIoFdsBody {
  readonly argsz: number;
  readonly flags: number;
  readonly index: number;
  readonly count: number;
}
export interface DeviceGetRegionIoFds extends RegionIoFdsBody, Trailing {
  readonly kind: 'deviceGetRegionIoFds';
}
export interface DeviceGetRegionIoFdsReply extends RegionIoFdsBody {
  readonly kind: 'deviceGetRegionIoFdsReply';
  /** The sub-region array as sent (40-byte entries per the spec, 48 from libvfio-user). */
  readonly entries: Buffer;
}

export interface IrqInfoBody {
  readonly argsz: number;
  readonly flags: number;
  readonly index: number;
  readonly count: number;
}
export interface DeviceGetIrqInfo extends IrqInfoBody, Trailing {
  readonly kind: 'deviceGetIrqInfo';
}
export interface DeviceGetIrqInfoReply extends IrqInfoBody {
  readonly kind: 'deviceGetIrqInfoReply';
}

export interface DeviceSetIrqs {
  readonly kind: 'deviceSetIrqs';
  readonly argsz: number;
  readonly flags: number;
  readonly index: number;
  readonly start: number;
  readonly count: number;
  /** Bytes after the 20-byte struct: `count` booleans with DATA_BOOL, else normally empty. */
  readonly data: Buffer;
}
export interface DeviceSetIrqsReply {
  readonly kind: 'deviceSetIrqsReply';
}

export interface RegionAccess {
  readonly offset: number;
  readonly region: number;
  readonly count: number;
}
export interface RegionRead extends RegionAccess, Trailing {
  readonly kind: 'regionRead';
}
export interface RegionReadReply extends RegionAccess {
  readonly kind: 'regionReadReply';
  readonly data: Buffer;
}
export interface RegionWrite extends RegionAccess {
  readonly kind: 'regionWrite';
  readonly data: Buffer;
}
export interface RegionWriteReply extends RegionAccess {
  readonly kind: 'regionWriteReply';
}

export interface DmaAccess {
  readonly address: number;
  readonly count: number;
}
export interface DmaRead extends DmaAccess, Trailing {
  readonly kind: 'dmaRead';
}
export interface DmaReadReply extends DmaAccess {
  readonly kind: 'dmaReadReply';
  readonly data: Buffer;
}
export interface DmaWrite extends DmaAccess {
  readonly kind: 'dmaWrite';
  readonly data: Buffer;
}
export interface DmaWriteReply extends DmaAccess {
  readonly kind: 'dmaWriteReply';
}

/**
 * Legacy DIRTY_PAGES (14), removed from the spec in favour of DEVICE_FEATURE
 * dirty logging: argsz, flags (START 1, STOP 2, GET_BITMAP 4), then for
 * GET_BITMAP a bitmap range {iova u64, size u64, pgsize u64, bitmap size u64}
 * and, in the reply, the bitmap. Kept as bytes after the 8-byte head.
 */
export interface DirtyPagesBody {
  readonly argsz: number;
  readonly flags: number;
  readonly data: Buffer;
}
export interface DirtyPages extends DirtyPagesBody {
  readonly kind: 'dirtyPages';
}
export interface DirtyPagesReply extends DirtyPagesBody {
  readonly kind: 'dirtyPagesReply';
}

export interface DeviceReset {
  readonly kind: 'deviceReset';
}
export interface DeviceResetReply {
  readonly kind: 'deviceResetReply';
}

export interface WriteMultiEntry {
  readonly offset: number;
  readonly region: number;
  readonly count: number;
  /** Always the 8 data bytes of the entry; only the first `count` are meaningful. */
  readonly data: Buffer;
}
export interface RegionWriteMulti {
  readonly kind: 'regionWriteMulti';
  readonly entries: readonly WriteMultiEntry[];
}
export interface RegionWriteMultiReply {
  readonly kind: 'regionWriteMultiReply';
  readonly wrCnt: number;
}

export interface DeviceFeatureBody {
  readonly argsz: number;
  readonly flags: number;
  readonly data: Buffer;
}
export interface DeviceFeature extends DeviceFeatureBody {
  readonly kind: 'deviceFeature';
}
export interface DeviceFeatureReply extends DeviceFeatureBody {
  readonly kind: 'deviceFeatureReply';
}

export interface MigDataRead extends Trailing {
  readonly kind: 'migDataRead';
  readonly argsz: number;
  readonly size: number;
}
export interface MigDataReadReply {
  readonly kind: 'migDataReadReply';
  readonly argsz: number;
  readonly size: number;
  readonly data: Buffer;
}
export interface MigDataWrite {
  readonly kind: 'migDataWrite';
  readonly argsz: number;
  readonly size: number;
  readonly data: Buffer;
}
export interface MigDataWriteReply {
  readonly kind: 'migDataWriteReply';
}

/** A reply with the ERROR flag: header only, errno in the header. */
export interface ErrorReply {
  readonly kind: 'error';
  readonly errno: number;
}

export type Request =
  | Version
  | DmaMap
  | DmaUnmap
  | DeviceGetInfo
  | DeviceGetRegionInfo
  | DeviceGetRegionIoFds
  | DeviceGetIrqInfo
  | DeviceSetIrqs
  | RegionRead
  | RegionWrite
  | DmaRead
  | DmaWrite
  | DeviceReset
  | DirtyPages
  | RegionWriteMulti
  | DeviceFeature
  | MigDataRead
  | MigDataWrite;

export type Reply =
  | VersionReply
  | DmaMapReply
  | DmaUnmapReply
  | DeviceGetInfoReply
  | DeviceGetRegionInfoReply
  | DeviceGetRegionIoFdsReply
  | DeviceGetIrqInfoReply
  | DeviceSetIrqsReply
  | RegionReadReply
  | RegionWriteReply
  | DmaReadReply
  | DmaWriteReply
  | DeviceResetReply
  | DirtyPagesReply
  | RegionWriteMultiReply
  | DeviceFeatureReply
  | MigDataReadReply
  | MigDataWriteReply
  | ErrorReply;

export type Body = Request | Reply;

/** A whole decoded message. */
export interface Message<B extends Body = Body> {
  readonly header: Header;
  readonly body: B;
}

/** The command number each body kind belongs to (error replies carry the command in the header). */
export type CommandOf = { readonly [K in Body['kind']]: Command | undefined };
