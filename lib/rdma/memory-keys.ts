// Memory keys: the MRs, fast-registration MRs and memory windows of the
// resource manager, by key index (key = index << 8 | tag), and the
// translation of (key, va, len) into guest address segments with the access,
// PD and bounds checks (ionic RDMA R3). Each mapped MR keeps its page table as
// runs (page-table.ts), charged to the run budget. Nothing here throws on
// guest input: operations return a status.

import { isAddrRange, PageTable, PtStatus, RunBudget } from './page-table';
import { HandleSerial, RmError, RmResult, rmFail, rmOk } from './records';
import { MR_ACCESS_MASK, MrFlag, MrKind } from './types';

/** A key is its MR's index and an 8-bit tag the consumer may change (REG_MR, BIND_MW). */
const KEY_TAG_BITS = 8;
const KEY_TAG_MASK = (1 << KEY_TAG_BITS) - 1;
/** Largest key (keys are 32 bits). */
const MAX_KEY = 0xffffffff;

/** The MR table index a key names. */
function keyIndex(key: number): number {
  return key >>> KEY_TAG_BITS;
}

/** `key` with its tag replaced by the low 8 bits of `tag` (a REG_MR / BIND_MW new key). */
export function retagKey(key: number, tag: number): number {
  return ((key & ~KEY_TAG_MASK) | (tag & KEY_TAG_MASK)) >>> 0;
}

export interface MrRecord {
  /** Key index (key >> 8), the table slot. */
  readonly index: number;
  /** Current full key (index << 8 | tag); REG_MR and BIND_MW change the tag. */
  key: number;
  readonly kind: MrKind;
  readonly pdId: number;
  readonly handle: number;
  /** MrFlag access bits (bits 0..11). */
  access: number;
  /** Mapped and not invalidated: usable for translation. */
  valid: boolean;
  /** First byte's address (iova), or 0 with ZERO_BASED. */
  iova: number;
  length: number;
  zeroBased: boolean;
  /** The page table; null while unmapped (FRMR before REG_MR, windows). */
  table: PageTable | null;
  /** For a bound window: the MR it opens onto (its handle pins the binding). */
  boundTo: { readonly mr: MrRecord; readonly handle: number } | null;
}

export interface MrSpec {
  readonly key: number;
  readonly pdId: number;
  /** CREATE_MR flags: access bits plus UKEY_EN / IS_MW / INV_EN. */
  readonly flags: number;
  readonly iova: number;
  readonly length: number;
}

/** Result of `translate`. */
export const enum KeyStatus {
  OK = 0,
  /** No MR/MW has that key index (or key 0 where the DMA key is not allowed). */
  NO_KEY = 1,
  /** The index exists with another tag (a stale key). */
  TAG = 2,
  /** The MR/MW is not mapped (FRMR before REG_MR, invalidated, unbound window). */
  INVALID = 3,
  /** The MR lacks an access right the operation needs. */
  ACCESS = 4,
  /** The range is outside the MR. */
  BOUNDS = 5,
  /** The range wraps, or passes 2^53. */
  BAD_RANGE = 6,
  /** The MR belongs to another PD. */
  PD = 7,
}

export interface TranslateOptions {
  /** Key 0 is the identity map (a privileged QP's lkey, a remote-privileged QP's rkey). */
  readonly dmaKey: boolean;
  /** When set, the MR must belong to this PD. */
  readonly pdId?: number;
}

/** Kinds an MR index may hold, by CREATE_MR flags (ionic RDMA R3.3). */
export function mrKindOf(flags: number): MrKind | null {
  const type = flags & (MrFlag.UKEY_EN | MrFlag.IS_MW | MrFlag.INV_EN);
  switch (type) {
    case 0:
      return MrKind.USER;
    case MrFlag.UKEY_EN | MrFlag.INV_EN:
      return MrKind.FRMR;
    case MrFlag.UKEY_EN | MrFlag.IS_MW:
      return MrKind.MW1;
    case MrFlag.UKEY_EN | MrFlag.IS_MW | MrFlag.INV_EN:
      return MrKind.MW2;
    default:
      return null;
  }
}

export class MemoryKeys {
  /** MRs and windows by key index. */
  readonly mrs = new Map<number, MrRecord>();
  readonly #limit: number;
  readonly #budget: RunBudget;
  readonly #serial: HandleSerial;

  /** Key indices 1..limit-1; tables are charged to `budget`; handles come from `serial`. */
  constructor(limit: number, budget: RunBudget, serial: HandleSerial) {
    this.#limit = limit;
    this.#budget = budget;
    this.#serial = serial;
  }

  #release(t: PageTable | null): void {
    if (t) this.#budget.give(t.runs);
  }

  /** Can an MR with this key be created? (cheap checks, before a table is read) */
  checkMr(spec: MrSpec): RmError | null {
    const index = keyIndex(spec.key);
    if (!Number.isInteger(spec.key) || spec.key < 0 || spec.key > MAX_KEY) return 'bad-id';
    if (index === 0 || index >= this.#limit) return 'bad-id';
    if (this.mrs.has(index)) return 'exists';
    if (mrKindOf(spec.flags) === null) return 'bad-type';
    if (!isAddrRange(spec.iova, spec.length)) return 'bad-attr';
    return null;
  }

  /**
   * Create an MR or window. A USER MR comes with its table (mapped now); FRMRs
   * and windows come without (mapped later by the data path). The table's runs
   * must already be charged to `budget`; on failure they are given back.
   */
  createMr(spec: MrSpec, table: PageTable | null): RmResult<MrRecord> {
    const err = this.checkMr(spec);
    const kind = mrKindOf(spec.flags);
    if (err || kind === null) {
      this.#release(table);
      return rmFail(err ?? 'bad-type');
    }
    if ((kind === MrKind.USER) !== (table !== null)) {
      this.#release(table);
      return rmFail('bad-attr');
    }
    const mr: MrRecord = {
      index: keyIndex(spec.key),
      key: spec.key >>> 0,
      kind,
      pdId: spec.pdId,
      handle: this.#serial.take(),
      access: spec.flags & MR_ACCESS_MASK,
      valid: kind === MrKind.USER,
      iova: spec.iova,
      length: spec.length,
      zeroBased: (spec.flags & MrFlag.ZERO_BASED) !== 0,
      table,
      boundTo: null,
    };
    this.mrs.set(mr.index, mr);
    return rmOk(mr);
  }

  /** DESTROY_MR: by index (the tag may have changed since creation). */
  destroyMr(key: number): RmResult<MrRecord> {
    const mr = this.mrs.get(keyIndex(key));
    if (!mr) return rmFail('unknown');
    this.#release(mr.table);
    this.mrs.delete(mr.index);
    return rmOk(mr);
  }

  /** The MR/MW a key names, with its tag checked. */
  lookupKey(key: number): MrRecord | KeyStatus {
    const mr = this.mrs.get(keyIndex(key));
    if (!mr || keyIndex(key) === 0) return KeyStatus.NO_KEY;
    if (mr.key !== key >>> 0) return KeyStatus.TAG;
    return mr;
  }

  /**
   * Translate (key, va, len) for an access needing the MrFlag bits in `need`
   * (LOCAL_WRITE to write into a local buffer; REMOTE_READ / REMOTE_WRITE /
   * REMOTE_ATOMIC for a remote request; 0 to read a local buffer). On OK the
   * guest segments are appended to `out` as flat (addr, len) pairs; on error
   * nothing is appended. A zero-length range needs a valid key and no bounds.
   */
  translate(key: number, va: number, len: number, need: number, opts: TranslateOptions, out: number[]): KeyStatus {
    if (!Number.isSafeInteger(va) || !Number.isSafeInteger(len) || va < 0 || len < 0) return KeyStatus.BAD_RANGE;
    if (key >>> 0 === 0) {
      if (!opts.dmaKey) return KeyStatus.NO_KEY;
      if (!isAddrRange(va, len)) return KeyStatus.BAD_RANGE;
      if (len > 0) out.push(va, len);
      return KeyStatus.OK;
    }
    const mr = this.lookupKey(key);
    if (typeof mr === 'number') return mr;
    if (!mr.valid) return KeyStatus.INVALID;
    if (opts.pdId !== undefined && mr.pdId !== opts.pdId) return KeyStatus.PD;
    if ((need & ~mr.access & MR_ACCESS_MASK) !== 0) return KeyStatus.ACCESS;
    const st = this.#bounds(mr, va, len);
    if (st !== KeyStatus.OK || len === 0) return st;
    if (mr.boundTo) {
      // A window: its range lies within the MR it was bound to, at the same addresses.
      const target = mr.boundTo.mr;
      if (target.handle !== mr.boundTo.handle || !target.valid || this.mrs.get(target.index) !== target)
        return KeyStatus.INVALID;
      const tst = this.#bounds(target, va, len);
      if (tst !== KeyStatus.OK) return tst;
      return this.#walk(target, va, len, out);
    }
    return this.#walk(mr, va, len, out);
  }

  #bounds(mr: MrRecord, va: number, len: number): KeyStatus {
    const base = mr.zeroBased ? 0 : mr.iova;
    if (!isAddrRange(va, len)) return KeyStatus.BAD_RANGE;
    if (va < base || va - base > mr.length || len > mr.length - (va - base)) return KeyStatus.BOUNDS;
    return KeyStatus.OK;
  }

  #walk(mr: MrRecord, va: number, len: number, out: number[]): KeyStatus {
    if (!mr.table) return KeyStatus.INVALID;
    const base = mr.zeroBased ? 0 : mr.iova;
    const st = mr.table.translate(va - base, len, out);
    return st === PtStatus.OK ? KeyStatus.OK : st === PtStatus.BOUNDS ? KeyStatus.BOUNDS : KeyStatus.BAD_RANGE;
  }

  /**
   * Fast registration (a REG_MR WQE): `key` names the FRMR by its index,
   * `newKey` is its new key (same index, new tag). Only the index of `key`
   * counts: kernel consumers bump the key first (ib_update_fast_reg_key) and
   * the driver then sends the *new* key there too (seen with nvme-rdma).
   * The FRMR must be unmapped. The table's runs must be charged already; on
   * failure they are given back.
   */
  fastRegister(
    key: number,
    newKey: number,
    iova: number,
    length: number,
    access: number,
    zeroBased: boolean,
    table: PageTable,
  ): KeyStatus {
    const index = keyIndex(key);
    const mr = index === 0 ? undefined : this.mrs.get(index);
    const refuse = (s: KeyStatus): KeyStatus => {
      this.#release(table);
      return s;
    };
    if (!mr) return refuse(KeyStatus.NO_KEY);
    if (mr.kind !== MrKind.FRMR || keyIndex(newKey) !== mr.index) return refuse(KeyStatus.NO_KEY);
    if (mr.valid) return refuse(KeyStatus.INVALID);
    if (!isAddrRange(iova, length) || table.length !== length) return refuse(KeyStatus.BAD_RANGE);
    this.#release(mr.table);
    mr.key = newKey >>> 0;
    mr.iova = iova;
    mr.length = length;
    mr.access = access & MR_ACCESS_MASK;
    mr.zeroBased = zeroBased;
    mr.table = table;
    mr.valid = true;
    return KeyStatus.OK;
  }

  /** LOCAL_INV / SEND_INV: only FRMRs and type-2 windows may be invalidated. */
  invalidate(key: number): KeyStatus {
    const mr = this.lookupKey(key);
    if (typeof mr === 'number') return mr;
    if (mr.kind !== MrKind.FRMR && mr.kind !== MrKind.MW2) return KeyStatus.ACCESS;
    mr.valid = false;
    mr.boundTo = null;
    return KeyStatus.OK;
  }

  /**
   * BIND_MW: open window `mwKey` (re-keyed to `newKey`) onto [va, va + length)
   * of MR `mrKey` with `access`. Length 0 on a type-1 window unbinds it. The MR
   * must be valid, allow MW_BIND, and cover the range; a window cannot grant
   * remote write or atomic access on an MR without local write.
   */
  bindMw(mwKey: number, newKey: number, mrKey: number, va: number, length: number, access: number): KeyStatus {
    const mw = this.lookupKey(mwKey);
    if (typeof mw === 'number') return mw;
    if ((mw.kind !== MrKind.MW1 && mw.kind !== MrKind.MW2) || keyIndex(newKey) !== mw.index) return KeyStatus.NO_KEY;
    if (mw.kind === MrKind.MW1 && length === 0) {
      mw.valid = false;
      mw.boundTo = null;
      mw.key = newKey >>> 0;
      return KeyStatus.OK;
    }
    const mr = this.lookupKey(mrKey);
    if (typeof mr === 'number') return mr;
    if (!mr.valid || mr.boundTo || mr.kind === MrKind.MW1 || mr.kind === MrKind.MW2) return KeyStatus.INVALID;
    if (!(mr.access & MrFlag.MW_BIND)) return KeyStatus.ACCESS;
    if (access & (MrFlag.REMOTE_WRITE | MrFlag.REMOTE_ATOMIC) && !(mr.access & MrFlag.LOCAL_WRITE))
      return KeyStatus.ACCESS;
    if (mr.pdId !== mw.pdId && mw.kind === MrKind.MW1) return KeyStatus.PD;
    const st = this.#bounds(mr, va, length);
    if (st !== KeyStatus.OK) return st;
    mw.key = newKey >>> 0;
    mw.iova = va;
    mw.length = length;
    mw.zeroBased = false;
    mw.access = access & MR_ACCESS_MASK;
    mw.boundTo = { mr, handle: mr.handle };
    mw.valid = true;
    return KeyStatus.OK;
  }
}
