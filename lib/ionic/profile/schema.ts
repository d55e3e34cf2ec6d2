// Every profile value checked with zod: one schema per field (each message
// completes "<key> = <value>: ..."), the whole-profile shape, and the
// cross-field rules, each naming its keys (the one set last gets the blame).

import { z } from 'zod';
import {
  formatLinkSpeed,
  IniKey,
  IonicAsicType,
  IonicXcvrPid,
  LINK_SPEEDS_MBPS,
  NicProfile,
  ProfileError,
  ProfileLimits,
} from './model';

const PRINTABLE_ASCII = /^[\x20-\x7e]*$/;

function wholeNumber(range: string, ok: (v: number) => boolean): z.ZodType<number> {
  return z.number().refine((v) => Number.isSafeInteger(v) && ok(v), { message: `must be ${range}` });
}

function between(lo: number, hi: number): z.ZodType<number> {
  return wholeNumber(`between ${lo} and ${hi}`, (v) => v >= lo && v <= hi);
}

function printable(min: number, max: number): z.ZodType<string> {
  const what = min > 0 ? `${min} to ${max} printable ASCII characters` : `at most ${max} printable ASCII characters`;
  return z
    .string()
    .refine((s) => s.length >= min && s.length <= max && PRINTABLE_ASCII.test(s), { message: `must be ${what}` });
}

export const nameSchema = printable(1, ProfileLimits.NAME_MAX_CHARS);
export const descriptionSchema = printable(1, ProfileLimits.DESCRIPTION_MAX_CHARS);
export const msixVectorsSchema = between(ProfileLimits.MSIX_VECTORS_MIN, ProfileLimits.MSIX_VECTORS_MAX);
export const ethQueuesSchema = between(ProfileLimits.ETH_QUEUES_MIN, ProfileLimits.ETH_QUEUES_MAX);
export const rdmaEqsSchema = wholeNumber(
  `0 (no RDMA) or between ${ProfileLimits.RDMA_EQS_MIN} and ${ProfileLimits.RDMA_EQS_MAX} (ionic_rdma needs at least ${ProfileLimits.RDMA_EQS_MIN} event queues)`,
  (v) => v === 0 || (v >= ProfileLimits.RDMA_EQS_MIN && v <= ProfileLimits.RDMA_EQS_MAX),
);
export const LINK_SPEED_FORMS = `one of ${LINK_SPEEDS_MBPS.map(formatLinkSpeed).join(', ')} (or the same in Mbps)`;
export const linkSpeedSchema = wholeNumber(LINK_SPEED_FORMS, (v) => LINK_SPEEDS_MBPS.includes(v));
export const phySchema = z.enum(['copper', 'fiber', 'none'], {
  errorMap: () => ({ message: 'must be copper, fiber or none' }),
});
export const pidSchema = between(0, 0xffff);
export const transceiverDescriptionSchema = printable(1, ProfileLimits.TRANSCEIVER_MAX_CHARS);
export const maxMtuSchema = between(ProfileLimits.MAX_MTU_MIN, ProfileLimits.MAX_MTU_MAX);
export const firmwareVersionSchema = printable(1, ProfileLimits.FIRMWARE_VERSION_MAX_CHARS);
export const statsIntervalSchema = between(ProfileLimits.STATS_INTERVAL_MIN_MS, ProfileLimits.STATS_INTERVAL_MAX_MS);
export const asicTypeSchema = wholeNumber(
  "1 (CAPRI), 3 (GIGLIO) or 4 (SALINA): 0 and 2 turn on the driver's doorbell-polling workaround",
  (v) => v === IonicAsicType.CAPRI || v === IonicAsicType.GIGLIO || v === IonicAsicType.SALINA,
);
export const asicRevSchema = between(0, 0xff);
export const serialNumberSchema = printable(0, ProfileLimits.SERIAL_NUMBER_MAX_CHARS);
/** An offload key's ini value. */
export const onOffSchema = z.enum(['on', 'off'], { errorMap: () => ({ message: 'must be on or off' }) });

export interface CrossRule {
  readonly keys: readonly [IniKey, IniKey];
  readonly broken: (p: NicProfile) => boolean;
  readonly message: (p: NicProfile) => string;
}

export const CROSS_RULES: readonly CrossRule[] = [
  {
    // ionic_lif_size halves the RDMA EQ count down to 1, never to 0, so with RDMA
    // EQs the smallest request is adminq + 1 queue pair + 1 EQ = 3 vectors; fewer
    // and probe fails with "Can't get minimum 2 intrs".
    keys: ['rdma_eqs', 'msix_vectors'],
    broken: (p) => p.rdmaEqs > 0 && p.msixVectors < 3,
    message: (p) =>
      `rdma_eqs = ${p.rdmaEqs} needs msix_vectors >= 3 (the driver never cuts RDMA event queues below 1), but msix_vectors = ${p.msixVectors}`,
  },
  {
    keys: ['transceiver_phy', 'transceiver_pid'],
    broken: (p) => p.transceiver.phy === 'none' && p.transceiver.pid !== IonicXcvrPid.UNKNOWN,
    message: (p) => `transceiver_phy = none needs transceiver_pid = 0, but transceiver_pid = ${p.transceiver.pid}`,
  },
];

/** Every field and its range, without the cross-field rules. */
export const profileShape = z
  .object({
    name: nameSchema,
    description: descriptionSchema,
    msixVectors: msixVectorsSchema,
    ethQueues: ethQueuesSchema,
    rdmaEqs: rdmaEqsSchema,
    linkSpeedMbps: linkSpeedSchema,
    transceiver: z.object({ phy: phySchema, pid: pidSchema, description: transceiverDescriptionSchema }).strict(),
    maxMtu: maxMtuSchema,
    firmwareVersion: firmwareVersionSchema,
    statsIntervalMs: statsIntervalSchema,
    asicType: asicTypeSchema,
    asicRev: asicRevSchema,
    serialNumber: serialNumberSchema,
    offloads: z
      .object({
        txSg: z.boolean(),
        txCsum: z.boolean(),
        tso: z.boolean(),
        rxCsum: z.boolean(),
        rxHash: z.boolean(),
        vlan: z.boolean(),
      })
      .strict(),
  })
  .strict();

/** The whole-profile schema: every range above plus the cross-field rules. */
export const nicProfileSchema: z.ZodType<NicProfile> = profileShape.superRefine((p, ctx) => {
  for (const rule of CROSS_RULES) {
    if (rule.broken(p)) ctx.addIssue({ code: z.ZodIssueCode.custom, message: rule.message(p), path: [] });
  }
});

/** Ini key for each path into NicProfile, as zod reports it. */
const KEY_FOR_PATH: Readonly<Record<string, IniKey>> = {
  name: 'name',
  description: 'description',
  msixVectors: 'msix_vectors',
  ethQueues: 'eth_queues',
  rdmaEqs: 'rdma_eqs',
  linkSpeedMbps: 'link_speed',
  'transceiver.phy': 'transceiver_phy',
  'transceiver.pid': 'transceiver_pid',
  'transceiver.description': 'transceiver',
  maxMtu: 'max_mtu',
  firmwareVersion: 'firmware_version',
  statsIntervalMs: 'stats_interval_ms',
  asicType: 'asic_type',
  asicRev: 'asic_rev',
  serialNumber: 'serial_number',
  'offloads.txSg': 'offload_tx_sg',
  'offloads.txCsum': 'offload_tx_csum',
  'offloads.tso': 'offload_tso',
  'offloads.rxCsum': 'offload_rx_csum',
  'offloads.rxHash': 'offload_rx_hash',
  'offloads.vlan': 'offload_vlan',
};

function keyForPath(p: readonly (string | number)[]): string {
  const dotted = p.join('.');
  return KEY_FOR_PATH[dotted] ?? dotted;
}

function deepFreeze(p: NicProfile): NicProfile {
  Object.freeze(p.transceiver);
  Object.freeze(p.offloads);
  return Object.freeze(p);
}

/** Checks a whole profile object; throws ProfileError naming `source` and the first bad key. */
export function validateProfile(value: unknown, source = 'value'): NicProfile {
  const r = nicProfileSchema.safeParse(value);
  if (r.success)
    return deepFreeze({ ...r.data, transceiver: { ...r.data.transceiver }, offloads: { ...r.data.offloads } });
  const issue = r.error.issues[0];
  if (issue === undefined) throw new ProfileError(`profile ${source}: invalid`, 'BAD_VALUE');
  if (issue.path.length === 0) {
    // Whole-object issues: a cross-field rule, or a key NicProfile does not have.
    const code = issue.code === z.ZodIssueCode.custom ? 'CROSS_FIELD' : 'BAD_VALUE';
    throw new ProfileError(`profile ${source}: ${issue.message}`, code);
  }
  throw new ProfileError(`profile ${source}: ${keyForPath(issue.path)}: ${issue.message}`, 'BAD_VALUE');
}
