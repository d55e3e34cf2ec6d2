// Get / Set Features as a table: one entry per feature the controller
// knows, with its default, whether Set may change it, and a named handler
// when a change has an effect (Keep Alive Timer re-arms the timer, Number of
// Queues answers with what the subsystem grants, Async Event Configuration
// is masked to the events we can raise). Plain features just keep what the
// host set. Nothing is saveable; Get's select field is honoured.

import { CmdResult, dataToHost, checkSgl, done, fail, NvmeCommand, sqeField, SUCCESS, TargetDma } from './command';
import { FEATURE_SEL_MASK, FEATURE_SV, FeatureId, ID_CTRL, nvme_features, NvmeStatus } from './layouts';
import { KATO_GRANULARITY_MS, MAX_KATO_MS } from './limits';

/** The controller state features read and change. */
export interface FeatureHost {
  readonly discovery: boolean;
  readonly maxIoQueues: number;
  /** 128-bit host identifier from Connect. */
  readonly hostid: Buffer;
  /** Keep-alive timeout, ms (0: off). */
  readonly kato: number;
  setKato(ms: number): void;
  /** Asynchronous event configuration. */
  aec: number;
  /** Plain features' current values, by feature id. */
  readonly featureValues: Map<number, number>;
}

/** SMART critical warning bits 4:0. */
const AEC_SMART_CRITICAL = 0x1f;
/** What Set Features may enable: the critical warnings and namespace attribute notices (bit 8), as OAES says. */
const AEC_SUPPORTED_NVM = AEC_SMART_CRITICAL | ID_CTRL.OAES_NS_ATTR;
/** Discovery log page change notices (bit 31). */
const AEC_SUPPORTED_DISCOVERY = ID_CTRL.OAES_DISC_CHANGE;

/** Number of queues value meaning "as many as possible" that a host may not send. */
const NQ_RESERVED = 0xffff;
const NQ_NCQR_SHIFT = 16;
const POWER_STATE_MASK = 0x1f;
const WCE = 0x1;
/** Host identifier: EXHID (bit 0 of dword 11) asks for the 128-bit form; the data is 16 bytes. */
const HOSTID_EXHID = 0x1;
const HOSTID_BYTES = 16;
/** Get Features select values, and the capability bits select 3 returns. */
const SEL_CURRENT = 0;
const SEL_SUPPORTED_CAPS = 3;
const CAPS_CHANGEABLE = 0x4;
/** Over-temperature threshold default: 343 K (70 C). */
const TEMP_THRESHOLD_DEFAULT = 343;

interface FeatureDef {
  readonly name: string;
  /** Value before any Set. */
  readonly dflt: (h: FeatureHost) => number;
  /** The discovery controller offers it too. */
  readonly discovery: boolean;
  /** Set handler (absent: not changeable). Returns the completion; plain features store dword 11. */
  readonly set?: (h: FeatureHost, dw11: number) => CmdResult;
  /** Current value (absent: the stored one). */
  readonly current?: (h: FeatureHost) => number;
}

function storePlain(fid: number, mask: number) {
  return (h: FeatureHost, dw11: number): CmdResult => {
    h.featureValues.set(fid, dw11 & mask);
    return SUCCESS;
  };
}

function queuesGranted(h: FeatureHost): number {
  return (h.maxIoQueues - 1) | ((h.maxIoQueues - 1) << NQ_NCQR_SHIFT);
}

const FEATURES: ReadonlyMap<number, FeatureDef> = new Map<number, FeatureDef>([
  [
    FeatureId.ARBITRATION,
    { name: 'arbitration', dflt: () => 0, discovery: false, set: storePlain(FeatureId.ARBITRATION, 0xffffffff) },
  ],
  [
    FeatureId.POWER_MGMT,
    {
      name: 'power management',
      dflt: () => 0,
      discovery: false,
      // One power state (NPSS 0): only state 0 exists.
      set: (h, dw11) =>
        (dw11 & POWER_STATE_MASK) !== 0
          ? fail(NvmeStatus.INVALID_FIELD, nvme_features.dword11)
          : storePlain(FeatureId.POWER_MGMT, 0xff)(h, dw11),
    },
  ],
  [
    FeatureId.TEMP_THRESH,
    {
      name: 'temperature threshold',
      dflt: () => TEMP_THRESHOLD_DEFAULT,
      discovery: false,
      set: storePlain(FeatureId.TEMP_THRESH, 0xffff),
    },
  ],
  [
    FeatureId.ERR_RECOVERY,
    { name: 'error recovery', dflt: () => 0, discovery: false, set: storePlain(FeatureId.ERR_RECOVERY, 0x1ffff) },
  ],
  [
    FeatureId.VOLATILE_WC,
    { name: 'volatile write cache', dflt: () => WCE, discovery: false, set: storePlain(FeatureId.VOLATILE_WC, WCE) },
  ],
  [
    FeatureId.NUM_QUEUES,
    {
      name: 'number of queues',
      dflt: queuesGranted,
      discovery: false,
      current: queuesGranted,
      set: (h, dw11) => {
        if ((dw11 & 0xffff) === NQ_RESERVED || dw11 >>> NQ_NCQR_SHIFT === NQ_RESERVED)
          return fail(NvmeStatus.INVALID_FIELD, nvme_features.dword11);
        return done(queuesGranted(h));
      },
    },
  ],
  [
    FeatureId.WRITE_ATOMIC,
    { name: 'write atomicity', dflt: () => 0, discovery: false, set: storePlain(FeatureId.WRITE_ATOMIC, 0x1) },
  ],
  [
    FeatureId.ASYNC_EVENT,
    {
      name: 'asynchronous event configuration',
      dflt: () => 0,
      discovery: true,
      current: (h) => h.aec,
      set: (h, dw11) => {
        const supported = h.discovery ? AEC_SUPPORTED_DISCOVERY : AEC_SUPPORTED_NVM;
        if ((dw11 & ~supported) !== 0) return fail(NvmeStatus.INVALID_FIELD, nvme_features.dword11);
        h.aec = dw11 >>> 0;
        return SUCCESS;
      },
    },
  ],
  [
    FeatureId.KATO,
    {
      name: 'keep alive timer',
      dflt: () => 0,
      discovery: true,
      current: (h) => h.kato,
      set: (h, dw11) => {
        if (dw11 > MAX_KATO_MS) return fail(NvmeStatus.INVALID_FIELD, nvme_features.dword11);
        h.setKato(roundKato(dw11));
        return SUCCESS;
      },
    },
  ],
]);

/** KATO rounded up to the keep-alive granularity (Identify KAS). */
export function roundKato(ms: number): number {
  return Math.ceil(ms / KATO_GRANULARITY_MS) * KATO_GRANULARITY_MS;
}

/** Set Features. */
export function setFeature(h: FeatureHost, cmd: NvmeCommand): CmdResult {
  const fid = sqeField(cmd, nvme_features.fid);
  const sgl = checkSgl(cmd, 0, true);
  if (fid === FeatureId.HOST_ID && !h.discovery) return fail(NvmeStatus.CMD_SEQ_ERROR, nvme_features.fid); // given by Connect
  const def = FEATURES.get(fid);
  if (!def || (h.discovery && !def.discovery)) return fail(NvmeStatus.INVALID_FIELD, nvme_features.fid);
  if (sqeField(cmd, nvme_features.sv_byte) & FEATURE_SV)
    return fail(NvmeStatus.FEATURE_NOT_SAVEABLE, nvme_features.sv_byte);
  if (sgl) return sgl;
  if (!def.set) return fail(NvmeStatus.FEATURE_NOT_CHANGEABLE, nvme_features.fid);
  return def.set(h, sqeField(cmd, nvme_features.dword11));
}

/** Get Features (the Host Identifier one moves 16 bytes to the host). */
export async function getFeature(h: FeatureHost, cmd: NvmeCommand, dma: TargetDma): Promise<CmdResult> {
  const fid = sqeField(cmd, nvme_features.fid);
  const sel = sqeField(cmd, nvme_features.sel) & FEATURE_SEL_MASK;
  if (fid === FeatureId.HOST_ID && !h.discovery) {
    if ((sqeField(cmd, nvme_features.dword11) & HOSTID_EXHID) === 0)
      return fail(NvmeStatus.INVALID_FIELD, nvme_features.dword11);
    const bad = checkSgl(cmd, HOSTID_BYTES, false);
    if (bad) return bad;
    return (await dataToHost(cmd, dma, h.hostid)) ?? SUCCESS;
  }
  const def = FEATURES.get(fid);
  if (!def || (h.discovery && !def.discovery)) return fail(NvmeStatus.INVALID_FIELD, nvme_features.fid);
  const bad = checkSgl(cmd, 0, false);
  if (bad) return bad;
  if (sel === SEL_SUPPORTED_CAPS) return done(def.set ? CAPS_CHANGEABLE : 0);
  if (sel !== SEL_CURRENT) return done(def.dflt(h)); // default and saved: nothing is saveable
  const value = def.current ? def.current(h) : (h.featureValues.get(fid) ?? def.dflt(h));
  return done(value);
}
