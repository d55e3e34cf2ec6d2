// NIC profiles: the numbers the emulated ionic function reports about itself.
//
// A profile sets what the stock driver sizes itself by: the MSI-X table
// (dev_identity.nintrs), the Ethernet queue pairs and RDMA event queues of the
// LIF (lif_identity queue_count[TXQ/RXQ] and rdma.eq_qtype.qid_count), the
// largest frame, the link speed and transceiver in port_info, the firmware
// version, serial, ASIC type and revision in dev_info, and how often the
// statistics blocks are rewritten. `resolveProfile` layers built-ins and ini
// files over `compat`; every value is checked at the edge (here), so the device
// code can take a NicProfile as valid.
//
// Ini format (profiles/README.md): `key = value` lines, whole-line `#` or `;`
// comments, blank lines, one optional `[profile]` header. Values run to the end
// of the line (no trailing comments, so a description may hold `#`); one pair of
// surrounding double quotes is stripped, to keep leading or trailing spaces.
// A file sets only the keys it names. Errors are ProfileError, one line naming
// the file, line and key.

import * as fs from 'node:fs';
import * as path from 'node:path';
import { z } from 'zod';

// ---------------------------------------------------------------------------
// Types

export type TransceiverPhy = 'copper' | 'fiber' | 'none';

/** What port_info.status.xcvr reports. */
export interface Transceiver {
  /** xcvr.phy: copper (1), fiber (2) or none (0). ethtool prints speed only for copper or fiber. */
  readonly phy: TransceiverPhy;
  /** xcvr.pid, an `enum ionic_xcvr_pid` code (u16); it selects the link modes ethtool lists. */
  readonly pid: number;
  /** Human-readable name of the module, for logs and `--nic-profile show`. */
  readonly description: string;
}

export interface NicProfile {
  /** Built-in name, or the resolved layer list ("compat+dsc-25+./x.ini"). */
  readonly name: string;
  readonly description: string;
  /** MSI-X table size and dev_identity.nintrs, 2..128. */
  readonly msixVectors: number;
  /** Ethernet TX/RX queue pairs the LIF offers, 1..64. */
  readonly ethQueues: number;
  /** RDMA event queues, 0 (no RDMA) or 4..64. */
  readonly rdmaEqs: number;
  /** Link speed in Mbps, one of LINK_SPEEDS_MBPS. */
  readonly linkSpeedMbps: number;
  readonly transceiver: Transceiver;
  /** Largest MTU, 1500..9194; lif max_frame_size = maxMtu + FRAME_OVERHEAD. */
  readonly maxMtu: number;
  /** dev_info.fw_version: printable ASCII, 1..31 characters. */
  readonly firmwareVersion: string;
  /** How often changed statistics blocks are rewritten, 100..60000 ms. */
  readonly statsIntervalMs: number;
  /** dev_info.asic_type: 1 CAPRI, 3 GIGLIO or 4 SALINA. */
  readonly asicType: number;
  /** dev_info.asic_rev, u8. */
  readonly asicRev: number;
  /** dev_info.serial_num: printable ASCII, at most 31 characters. */
  readonly serialNumber: string;
}

// ---------------------------------------------------------------------------
// Constants

/** `enum ionic_xcvr_pid` codes (ionic_if.h) that the built-ins use or that are handy in an ini. */
export const IonicXcvrPid = {
  UNKNOWN: 0,
  QSFP_100G_CR4: 1,
  QSFP_40GBASE_CR4: 2,
  SFP_25GBASE_CR_S: 3,
  QSFP_200G_CR4: 8, // added upstream in Dec 2024, with the 200G/400G speeds
  QSFP_400G_CR4: 9,
  QSFP_100G_SR4: 52,
  SFP_25GBASE_SR: 59,
  QSFP_200G_SR4: 77,
  QSFP_400G_DR4: 80,
} as const;

/** `enum ionic_phy_type`: the byte written to port_info.status.xcvr.phy. */
export const IonicPhyType: Readonly<Record<TransceiverPhy, number>> = { none: 0, copper: 1, fiber: 2 };

/** `ionic_asic_type` values a profile may report. 0 (NONE) and 2 (ELBA) turn on the driver's doorbell-polling workaround. */
export const IonicAsicType = { CAPRI: 1, GIGLIO: 3, SALINA: 4 } as const;

/** Link speeds a profile may report, in Mbps (IONIC_SPEED_*). */
export const LINK_SPEEDS_MBPS: readonly number[] = [1000, 10000, 25000, 40000, 50000, 100000, 200000, 400000];

/** lif max_frame_size - max MTU: the driver computes max_mtu = max_frame_size - 18. */
export const FRAME_OVERHEAD = 18;

/** Ranges checked for every profile. */
export const ProfileLimits = {
  MSIX_VECTORS_MIN: 2,
  MSIX_VECTORS_MAX: 128,
  ETH_QUEUES_MIN: 1,
  ETH_QUEUES_MAX: 64,
  /** ionic_rdma refuses to probe with fewer event queues than this. */
  RDMA_EQS_MIN: 4,
  RDMA_EQS_MAX: 64,
  MAX_MTU_MIN: 1500,
  MAX_MTU_MAX: 9194,
  STATS_INTERVAL_MIN_MS: 100,
  STATS_INTERVAL_MAX_MS: 60000,
  FIRMWARE_VERSION_MAX_CHARS: 31,
  SERIAL_NUMBER_MAX_CHARS: 31,
  DESCRIPTION_MAX_CHARS: 200,
  TRANSCEIVER_MAX_CHARS: 64,
  NAME_MAX_CHARS: 255,
  /** An ini file larger than this is refused before it is parsed. */
  FILE_MAX_BYTES: 64 * 1024,
} as const;

/** lif_identity eth.max_frame_size for a profile. */
export function maxFrameSize(p: NicProfile): number {
  return p.maxMtu + FRAME_OVERHEAD;
}

// ---------------------------------------------------------------------------
// Errors

export type ProfileErrorCode =
  | 'EMPTY_SPEC' // no profile named, or an empty entry in the list
  | 'UNKNOWN_PROFILE' // not a built-in and not a path
  | 'READ_FAILED' // the file could not be read
  | 'TOO_LARGE' // the file is over FILE_MAX_BYTES
  | 'SYNTAX' // a line that is not a comment, header or key = value
  | 'BAD_SECTION' // a section other than [profile], or a second [profile]
  | 'UNKNOWN_KEY'
  | 'DUPLICATE_KEY'
  | 'BAD_VALUE' // a value outside its key's range or form
  | 'CROSS_FIELD'; // two values that cannot go together

/** A profile that cannot be used. The message is one line naming the file, line and key where relevant. */
export class ProfileError extends Error {
  override readonly name = 'ProfileError';
  constructor(message: string, readonly code: ProfileErrorCode) {
    super(message);
  }
}

// ---------------------------------------------------------------------------
// Field schemas. Each message completes "<key> = <value>: ...".

const PRINTABLE_ASCII = /^[\x20-\x7e]*$/;

function wholeNumber(range: string, ok: (v: number) => boolean): z.ZodType<number> {
  return z.number().refine((v) => Number.isSafeInteger(v) && ok(v), { message: `must be ${range}` });
}

function between(lo: number, hi: number): z.ZodType<number> {
  return wholeNumber(`between ${lo} and ${hi}`, (v) => v >= lo && v <= hi);
}

function printable(min: number, max: number): z.ZodType<string> {
  const what = min > 0 ? `${min} to ${max} printable ASCII characters` : `at most ${max} printable ASCII characters`;
  return z.string().refine((s) => s.length >= min && s.length <= max && PRINTABLE_ASCII.test(s), { message: `must be ${what}` });
}

const L = ProfileLimits;

const nameSchema = printable(1, L.NAME_MAX_CHARS);
const descriptionSchema = printable(1, L.DESCRIPTION_MAX_CHARS);
const msixVectorsSchema = between(L.MSIX_VECTORS_MIN, L.MSIX_VECTORS_MAX);
const ethQueuesSchema = between(L.ETH_QUEUES_MIN, L.ETH_QUEUES_MAX);
const rdmaEqsSchema = wholeNumber(
  `0 (no RDMA) or between ${L.RDMA_EQS_MIN} and ${L.RDMA_EQS_MAX} (ionic_rdma needs at least ${L.RDMA_EQS_MIN} event queues)`,
  (v) => v === 0 || (v >= L.RDMA_EQS_MIN && v <= L.RDMA_EQS_MAX),
);
const LINK_SPEED_FORMS = `one of ${LINK_SPEEDS_MBPS.map(formatLinkSpeed).join(', ')} (or the same in Mbps)`;
const linkSpeedSchema = wholeNumber(LINK_SPEED_FORMS, (v) => LINK_SPEEDS_MBPS.includes(v));
const phySchema = z.enum(['copper', 'fiber', 'none'], { errorMap: () => ({ message: 'must be copper, fiber or none' }) });
const pidSchema = between(0, 0xffff);
const transceiverDescriptionSchema = printable(1, L.TRANSCEIVER_MAX_CHARS);
const maxMtuSchema = between(L.MAX_MTU_MIN, L.MAX_MTU_MAX);
const firmwareVersionSchema = printable(1, L.FIRMWARE_VERSION_MAX_CHARS);
const statsIntervalSchema = between(L.STATS_INTERVAL_MIN_MS, L.STATS_INTERVAL_MAX_MS);
const asicTypeSchema = wholeNumber(
  '1 (CAPRI), 3 (GIGLIO) or 4 (SALINA): 0 and 2 turn on the driver\'s doorbell-polling workaround',
  (v) => v === IonicAsicType.CAPRI || v === IonicAsicType.GIGLIO || v === IonicAsicType.SALINA,
);
const asicRevSchema = between(0, 0xff);
const serialNumberSchema = printable(0, L.SERIAL_NUMBER_MAX_CHARS);

// ---------------------------------------------------------------------------
// Cross-field rules: each names its keys; the one set last gets the blame.

interface CrossRule {
  readonly keys: readonly [IniKey, IniKey];
  readonly broken: (p: NicProfile) => boolean;
  readonly message: (p: NicProfile) => string;
}

const CROSS_RULES: readonly CrossRule[] = [
  {
    // ionic_lif_size halves the RDMA EQ count down to 1, never to 0, so with RDMA
    // EQs the smallest request is adminq + 1 queue pair + 1 EQ = 3 vectors; fewer
    // and probe fails with "Can't get minimum 2 intrs".
    keys: ['rdma_eqs', 'msix_vectors'],
    broken: (p) => p.rdmaEqs > 0 && p.msixVectors < 3,
    message: (p) => `rdma_eqs = ${p.rdmaEqs} needs msix_vectors >= 3 (the driver never cuts RDMA event queues below 1), but msix_vectors = ${p.msixVectors}`,
  },
  {
    keys: ['transceiver_phy', 'transceiver_pid'],
    broken: (p) => p.transceiver.phy === 'none' && p.transceiver.pid !== IonicXcvrPid.UNKNOWN,
    message: (p) => `transceiver_phy = none needs transceiver_pid = 0, but transceiver_pid = ${p.transceiver.pid}`,
  },
];

/** Every field and its range, without the cross-field rules. */
const profileShape = z
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
  })
  .strict();

/** The whole-profile schema: every range above plus the cross-field rules. */
export const nicProfileSchema: z.ZodType<NicProfile> = profileShape.superRefine((p, ctx) => {
  for (const rule of CROSS_RULES) {
    if (rule.broken(p)) ctx.addIssue({ code: z.ZodIssueCode.custom, message: rule.message(p), path: [] });
  }
});

// ---------------------------------------------------------------------------
// Ini keys: one row per key, in the order formatProfile writes them.

type ValueKind = 'integer' | 'text' | 'speed' | 'phy';
/** A parsed ini value: a number (link_speed in Mbps) or a string. */
export type ProfileValue = number | string;

interface KeySpec {
  readonly key: IniKey;
  readonly kind: ValueKind;
  readonly schema: z.ZodType<number> | z.ZodType<string>;
  /** The field's value (link_speed in Mbps). */
  readonly get: (p: NicProfile) => ProfileValue;
  /** The comment formatProfile writes above the key. */
  readonly comment: string;
}

export type IniKey =
  | 'name' | 'description' | 'msix_vectors' | 'eth_queues' | 'rdma_eqs' | 'link_speed'
  | 'transceiver_phy' | 'transceiver_pid' | 'transceiver' | 'max_mtu' | 'firmware_version'
  | 'stats_interval_ms' | 'asic_type' | 'asic_rev' | 'serial_number';

const KEY_SPECS: readonly KeySpec[] = [
  { key: 'name', kind: 'text', schema: nameSchema, get: (p) => p.name,
    comment: 'informational: a resolved profile is named after its layer list' },
  { key: 'description', kind: 'text', schema: descriptionSchema, get: (p) => p.description,
    comment: 'free text for --nic-profile list/show' },
  { key: 'msix_vectors', kind: 'integer', schema: msixVectorsSchema, get: (p) => p.msixVectors,
    comment: 'MSI-X table size = dev_identity.nintrs (2..128)' },
  { key: 'eth_queues', kind: 'integer', schema: ethQueuesSchema, get: (p) => p.ethQueues,
    comment: 'Ethernet queue pairs: lif_identity queue_count[TXQ] and [RXQ] (1..64)' },
  { key: 'rdma_eqs', kind: 'integer', schema: rdmaEqsSchema, get: (p) => p.rdmaEqs,
    comment: 'RDMA event queues: lif_identity rdma.eq_qtype.qid_count (0, or 4..64)' },
  { key: 'link_speed', kind: 'speed', schema: linkSpeedSchema, get: (p) => p.linkSpeedMbps,
    comment: 'lif_status.link_speed and port_info speed: 1G 10G 25G 40G 50G 100G 200G 400G, or Mbps' },
  { key: 'transceiver_phy', kind: 'phy', schema: phySchema, get: (p) => p.transceiver.phy,
    comment: 'port_info xcvr.phy: copper, fiber or none' },
  { key: 'transceiver_pid', kind: 'integer', schema: pidSchema, get: (p) => p.transceiver.pid,
    comment: 'port_info xcvr.pid: an enum ionic_xcvr_pid code (0..65535)' },
  { key: 'transceiver', kind: 'text', schema: transceiverDescriptionSchema, get: (p) => p.transceiver.description,
    comment: 'transceiver description, for logs' },
  { key: 'max_mtu', kind: 'integer', schema: maxMtuSchema, get: (p) => p.maxMtu,
    comment: 'largest MTU (1500..9194): lif_identity max_frame_size = max_mtu + 18' },
  { key: 'firmware_version', kind: 'text', schema: firmwareVersionSchema, get: (p) => p.firmwareVersion,
    comment: 'dev_info.fw_version (1..31 printable ASCII characters)' },
  { key: 'stats_interval_ms', kind: 'integer', schema: statsIntervalSchema, get: (p) => p.statsIntervalMs,
    comment: 'rewrite changed statistics blocks at most this often (100..60000 ms)' },
  { key: 'asic_type', kind: 'integer', schema: asicTypeSchema, get: (p) => p.asicType,
    comment: 'dev_info.asic_type: 1 CAPRI, 3 GIGLIO, 4 SALINA' },
  { key: 'asic_rev', kind: 'integer', schema: asicRevSchema, get: (p) => p.asicRev,
    comment: 'dev_info.asic_rev (0..255)' },
  { key: 'serial_number', kind: 'text', schema: serialNumberSchema, get: (p) => p.serialNumber,
    comment: 'dev_info.serial_num (at most 31 printable ASCII characters)' },
];

const KEY_BY_NAME: ReadonlyMap<string, KeySpec> = new Map(KEY_SPECS.map((s) => [s.key, s]));

/** Every ini key, in the order formatProfile writes them. */
export const PROFILE_KEYS: readonly IniKey[] = KEY_SPECS.map((s) => s.key);

/** Ini key for each path into NicProfile, as zod reports it. */
const KEY_FOR_PATH: Readonly<Record<string, IniKey>> = {
  name: 'name', description: 'description', msixVectors: 'msix_vectors', ethQueues: 'eth_queues',
  rdmaEqs: 'rdma_eqs', linkSpeedMbps: 'link_speed', 'transceiver.phy': 'transceiver_phy',
  'transceiver.pid': 'transceiver_pid', 'transceiver.description': 'transceiver', maxMtu: 'max_mtu',
  firmwareVersion: 'firmware_version', statsIntervalMs: 'stats_interval_ms', asicType: 'asic_type',
  asicRev: 'asic_rev', serialNumber: 'serial_number',
};

function keyForPath(p: readonly (string | number)[]): string {
  const dotted = p.join('.');
  return KEY_FOR_PATH[dotted] ?? dotted;
}

type FlatProfile = Record<IniKey, ProfileValue>;

function flatten(p: NicProfile): FlatProfile {
  const out: Partial<FlatProfile> = {};
  for (const s of KEY_SPECS) out[s.key] = s.get(p);
  return out as FlatProfile;
}

/** The nested object for a flat key map; the schema decides whether it is a NicProfile. */
function assemble(v: FlatProfile): unknown {
  return {
    name: v.name,
    description: v.description,
    msixVectors: v.msix_vectors,
    ethQueues: v.eth_queues,
    rdmaEqs: v.rdma_eqs,
    linkSpeedMbps: v.link_speed,
    transceiver: { phy: v.transceiver_phy, pid: v.transceiver_pid, description: v.transceiver },
    maxMtu: v.max_mtu,
    firmwareVersion: v.firmware_version,
    statsIntervalMs: v.stats_interval_ms,
    asicType: v.asic_type,
    asicRev: v.asic_rev,
    serialNumber: v.serial_number,
  };
}

function deepFreeze(p: NicProfile): NicProfile {
  Object.freeze(p.transceiver);
  return Object.freeze(p);
}

/** Checks a whole profile object; throws ProfileError naming `source` and the first bad key. */
export function validateProfile(value: unknown, source = 'value'): NicProfile {
  const r = nicProfileSchema.safeParse(value);
  if (r.success) return deepFreeze({ ...r.data, transceiver: { ...r.data.transceiver } });
  const issue = r.error.issues[0];
  if (issue === undefined) throw new ProfileError(`profile ${source}: invalid`, 'BAD_VALUE');
  if (issue.path.length === 0) {
    // Whole-object issues: a cross-field rule, or a key NicProfile does not have.
    const code = issue.code === z.ZodIssueCode.custom ? 'CROSS_FIELD' : 'BAD_VALUE';
    throw new ProfileError(`profile ${source}: ${issue.message}`, code);
  }
  throw new ProfileError(`profile ${source}: ${keyForPath(issue.path)}: ${issue.message}`, 'BAD_VALUE');
}

// ---------------------------------------------------------------------------
// Values

/** "100G" for 100000; speeds not a whole number of Gb/s are written in Mbps. */
export function formatLinkSpeed(mbps: number): string {
  return mbps % 1000 === 0 && mbps > 0 ? `${mbps / 1000}G` : String(mbps);
}

/** Mbps for "100G", "25g" or "100000"; undefined when the text is neither form (the range is checked elsewhere). */
export function parseLinkSpeed(text: string): number | undefined {
  const t = text.trim();
  const g = /^(\d{1,6})\s*[gG]$/.exec(t);
  if (g) return Number(g[1]) * 1000;
  if (/^\d{1,9}$/.test(t)) return Number(t);
  return undefined;
}

function parseWholeNumber(text: string): number | undefined {
  if (/^\d{1,15}$/.test(text)) return Number(text);
  if (/^0[xX][0-9a-fA-F]{1,12}$/.test(text)) return Number.parseInt(text.slice(2), 16);
  return undefined;
}

/** The typed value for `spec`, or the reason the text is not one ("must be ..."). */
function parseValue(spec: KeySpec, text: string): { ok: true; value: ProfileValue } | { ok: false; problem: string } {
  let value: ProfileValue | undefined;
  switch (spec.kind) {
    case 'integer': value = parseWholeNumber(text); break;
    case 'speed': value = parseLinkSpeed(text); break;
    case 'phy': value = text.toLowerCase(); break;
    case 'text': value = text; break;
  }
  if (value === undefined) {
    const problem = spec.kind === 'speed' ? `must be ${LINK_SPEED_FORMS}` : `must be a whole number, ${rangeText(spec)}`;
    return { ok: false, problem };
  }
  const r = spec.schema.safeParse(value);
  if (!r.success) return { ok: false, problem: r.error.issues[0]?.message ?? 'invalid' };
  return { ok: true, value };
}

/** An integer key's range as its schema words it ("between 2 and 128"): every integer schema refuses -1. */
function rangeText(spec: KeySpec): string {
  const r = spec.schema.safeParse(-1);
  const msg = r.success ? '' : r.error.issues[0]?.message ?? '';
  return msg.replace(/^must be /, '');
}

// ---------------------------------------------------------------------------
// Ini parsing

/** One `key = value` line of an ini file, already checked against its key's range. */
export interface ProfileSetting {
  readonly key: IniKey;
  /** Parsed value: a number (link_speed in Mbps) or a string. */
  readonly value: ProfileValue;
  /** The value as written (quotes stripped). */
  readonly raw: string;
  readonly line: number;
}

export interface ProfileLayer {
  /** How errors name the file: the path as the user wrote it. */
  readonly source: string;
  readonly settings: readonly ProfileSetting[];
}

/** Parses ini text into checked settings; throws ProfileError naming `source`, the line and the key. */
export function parseProfileIni(text: string, source: string): ProfileLayer {
  const settings: ProfileSetting[] = [];
  const firstLine = new Map<string, number>();
  let sawSection = false;
  const lines = text.replace(/^\uFEFF/, '').split(/\r\n|\n|\r/);
  for (let i = 0; i < lines.length; i++) {
    const lineNo = i + 1;
    const where = `profile ${source} line ${lineNo}`;
    const line = (lines[i] ?? '').trim();
    if (line === '' || line.startsWith('#') || line.startsWith(';')) continue;

    if (line.startsWith('[')) {
      const m = /^\[\s*([^\]]*?)\s*\]$/.exec(line);
      if (!m) throw new ProfileError(`${where}: malformed section header '${line}'`, 'SYNTAX');
      const section = m[1] ?? '';
      if (section.toLowerCase() !== 'profile') {
        throw new ProfileError(`${where}: unknown section [${section}] (only [profile] is allowed)`, 'BAD_SECTION');
      }
      if (sawSection) throw new ProfileError(`${where}: second [profile] section (one profile per file)`, 'BAD_SECTION');
      sawSection = true;
      continue;
    }

    const eq = line.indexOf('=');
    if (eq < 0) throw new ProfileError(`${where}: expected 'key = value', got '${clip(line)}'`, 'SYNTAX');
    const key = line.slice(0, eq).trim();
    if (key === '') throw new ProfileError(`${where}: missing key before '='`, 'SYNTAX');
    const spec = KEY_BY_NAME.get(key);
    if (spec === undefined) {
      const guess = suggestKey(key);
      const hint = guess ? ` (did you mean '${guess}'?)` : ` (keys: ${PROFILE_KEYS.join(', ')})`;
      throw new ProfileError(`${where}: unknown key '${clip(key)}'${hint}`, 'UNKNOWN_KEY');
    }
    const earlier = firstLine.get(key);
    if (earlier !== undefined) {
      throw new ProfileError(`${where}: duplicate key '${key}' (first set on line ${earlier})`, 'DUPLICATE_KEY');
    }
    firstLine.set(key, lineNo);

    const raw = unquote(line.slice(eq + 1).trim());
    const parsed = parseValue(spec, raw);
    if (!parsed.ok) throw new ProfileError(`${where}: ${key} = ${clip(raw)}: ${parsed.problem}`, 'BAD_VALUE');
    settings.push({ key: spec.key, value: parsed.value, raw, line: lineNo });
  }
  return { source, settings };
}

function unquote(v: string): string {
  return v.length >= 2 && v.startsWith('"') && v.endsWith('"') ? v.slice(1, -1) : v;
}

/** Keeps echoed input short so a message stays one readable line. */
function clip(s: string): string {
  const oneLine = s.replace(/[^\x20-\x7e]/g, '?');
  return oneLine.length > 60 ? `${oneLine.slice(0, 57)}...` : oneLine;
}

function suggestKey(key: string): string | undefined {
  const snake = key.replace(/([a-z0-9])([A-Z])/g, '$1_$2').replace(/-/g, '_').toLowerCase();
  if (KEY_BY_NAME.has(snake)) return snake;
  if (snake.length >= 3) {
    const prefixed = PROFILE_KEYS.find((k) => k.startsWith(snake));
    if (prefixed) return prefixed;
  }
  let best: string | undefined;
  let bestDistance = 3;
  for (const k of PROFILE_KEYS) {
    const d = editDistance(snake, k);
    if (d < bestDistance) { best = k; bestDistance = d; }
  }
  return best;
}

function editDistance(a: string, b: string): number {
  let prev = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const cur = [i];
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      cur.push(Math.min((prev[j] ?? 0) + 1, (cur[j - 1] ?? 0) + 1, (prev[j - 1] ?? 0) + cost));
    }
    prev = cur;
  }
  return prev[b.length] ?? 0;
}

// ---------------------------------------------------------------------------
// Formatting

function formatValue(spec: KeySpec, v: ProfileValue): string {
  const s = spec.kind === 'speed' && typeof v === 'number' ? formatLinkSpeed(v) : String(v);
  const needsQuotes = s === '' || s !== s.trim() || (s.length >= 2 && s.startsWith('"') && s.endsWith('"'));
  return needsQuotes ? `"${s}"` : s;
}

/** The ini text of a whole profile (profiles/*.ini and `--nic-profile show`); parses back to the same values. */
export function formatProfile(p: NicProfile): string {
  const out: string[] = [
    `# rocm-ernic NIC profile '${p.name}'. Keys, ranges and layering: profiles/README.md`,
    '[profile]',
  ];
  for (const s of KEY_SPECS) {
    out.push('', `# ${s.comment}`, `${s.key} = ${formatValue(s, s.get(p))}`);
  }
  return out.join('\n') + '\n';
}

// ---------------------------------------------------------------------------
// Built-in profiles. Queue and vector counts are scaled to the emulator's
// limits (128 vectors), not read off a real card; the link, transceiver, ASIC
// and MTU follow the named card.

const COMPAT: NicProfile = {
  name: 'compat',
  description: 'Default: 32 MSI-X vectors, 16 queue pairs, 32 RDMA EQs, 100 Gb/s copper QSFP28, MTU 9000',
  msixVectors: 32,
  ethQueues: 16,
  rdmaEqs: 32,
  linkSpeedMbps: 100000,
  transceiver: { phy: 'copper', pid: IonicXcvrPid.QSFP_100G_CR4, description: '100 Gb/s copper QSFP' },
  maxMtu: 9000,
  firmwareVersion: '1.0.0-ernic',
  statsIntervalMs: 1000,
  asicType: IonicAsicType.CAPRI,
  asicRev: 0,
  serialNumber: 'ERNIC-00000000',
};

const BUILTIN_LIST: readonly NicProfile[] = [
  COMPAT,
  {
    ...COMPAT,
    name: 'dsc-25',
    description: 'AMD Pensando DSC-25 (Capri ASIC), 2x25G SFP28: one 25 Gb/s port, copper DAC',
    msixVectors: 48,
    ethQueues: 16,
    rdmaEqs: 16,
    linkSpeedMbps: 25000,
    transceiver: { phy: 'copper', pid: IonicXcvrPid.SFP_25GBASE_CR_S, description: '25 Gb/s copper SFP28 DAC (25GBASE-CR-S)' },
    maxMtu: 9194,
    firmwareVersion: '1.0.0-ernic-dsc25',
    serialNumber: 'ERNIC-D25-0001',
  },
  {
    ...COMPAT,
    name: 'dsc-100',
    description: 'AMD Pensando DSC-100 (Capri ASIC), 2x100G QSFP28: one 100 Gb/s port, SR4 optics',
    msixVectors: 96,
    ethQueues: 32,
    rdmaEqs: 32,
    linkSpeedMbps: 100000,
    transceiver: { phy: 'fiber', pid: IonicXcvrPid.QSFP_100G_SR4, description: '100 Gb/s fiber QSFP28 (100GBASE-SR4)' },
    maxMtu: 9194,
    firmwareVersion: '1.0.0-ernic-dsc100',
    serialNumber: 'ERNIC-D100-0001',
  },
  {
    ...COMPAT,
    name: 'pollara-400',
    description: 'AMD Pensando Pollara 400 AI NIC, 1x400G, PCIe Gen5 x16, 3rd-gen P4 ASIC (reported as SALINA)',
    msixVectors: 128,
    ethQueues: 64,
    rdmaEqs: 32,
    linkSpeedMbps: 400000,
    transceiver: { phy: 'fiber', pid: IonicXcvrPid.QSFP_400G_DR4, description: '400 Gb/s fiber QSFP (400GBASE-DR4)' },
    maxMtu: 9194,
    firmwareVersion: '1.0.0-ernic-pollara400',
    asicType: IonicAsicType.SALINA,
    serialNumber: 'ERNIC-P400-0001',
  },
  {
    ...COMPAT,
    name: 'low-vectors',
    description: 'Test: compat with 8 MSI-X vectors, 2 queue pairs and 4 RDMA EQs (1 + 2 + 4 = 7 fit)',
    msixVectors: 8,
    ethQueues: 2,
    rdmaEqs: 4,
  },
];

const BUILTINS: ReadonlyMap<string, NicProfile> = new Map(
  BUILTIN_LIST.map((p) => [p.name, validateProfile(p, `built-in '${p.name}'`)]),
);

/** The default profile. */
export const COMPAT_PROFILE: NicProfile = BUILTINS.get('compat') ?? validateProfile(COMPAT, "built-in 'compat'");

/** A built-in profile by name, or undefined. */
export function builtinProfile(name: string): NicProfile | undefined {
  return BUILTINS.get(name);
}

/** Built-in profiles, `compat` first. */
export function listProfiles(): { name: string; description: string }[] {
  return [...BUILTINS.values()].map((p) => ({ name: p.name, description: p.description }));
}

// ---------------------------------------------------------------------------
// Resolving a --nic-profile list

export interface ResolveOptions {
  /** Directory relative ini paths are read from (default: process.cwd()). */
  readonly baseDir?: string;
}

interface Origin {
  /** "./x.ini" or "built-in 'dsc-25'". */
  readonly source: string;
  readonly line?: number;
  /** Layer position, for "which key was set last". */
  readonly order: number;
}

/** True when a --nic-profile entry names a file rather than a built-in. */
export function isProfilePath(entry: string): boolean {
  return entry.includes('/') || entry.endsWith('.ini');
}

/**
 * Layers a comma-separated list of built-in names and ini paths, in order, over
 * `compat`; later entries win. The result is frozen and named after the list.
 */
export function resolveProfile(spec: string, opts: ResolveOptions = {}): NicProfile {
  const entries = spec.split(',').map((e) => e.trim());
  const builtinNames = [...BUILTINS.keys()].join(', ');
  if (entries.every((e) => e === '')) {
    throw new ProfileError(`empty NIC profile list (built-ins: ${builtinNames})`, 'EMPTY_SPEC');
  }
  if (entries.some((e) => e === '')) {
    throw new ProfileError(`NIC profile list '${spec}' has an empty entry`, 'EMPTY_SPEC');
  }

  const values = flatten(COMPAT_PROFILE);
  const origins = new Map<IniKey, Origin>();
  for (const k of PROFILE_KEYS) origins.set(k, { source: "built-in 'compat'", order: 0 });
  const nameParts = ['compat'];

  entries.forEach((entry, index) => {
    const order = index + 1;
    if (isProfilePath(entry)) {
      const layer = parseProfileIni(readProfileFile(entry, opts.baseDir), entry);
      for (const s of layer.settings) {
        values[s.key] = s.value;
        origins.set(s.key, { source: entry, line: s.line, order });
      }
    } else {
      const p = BUILTINS.get(entry);
      if (p === undefined) {
        throw new ProfileError(`unknown NIC profile '${clip(entry)}' (built-ins: ${builtinNames}; a file needs a '/' or '.ini')`, 'UNKNOWN_PROFILE');
      }
      const flat = flatten(p);
      for (const k of PROFILE_KEYS) {
        values[k] = flat[k];
        origins.set(k, { source: `built-in '${entry}'`, order });
      }
    }
    if (!(index === 0 && entry === 'compat')) nameParts.push(entry);
  });
  values.name = nameParts.join('+');

  const name = nameParts.join('+');
  const candidate = assemble(values);
  // Each value was checked on its own line; this catches only a bad name (a long list).
  const fields = profileShape.safeParse(candidate);
  if (!fields.success) return validateProfile(candidate, name);
  for (const rule of CROSS_RULES) {
    if (rule.broken(fields.data)) throw crossFieldError(rule, fields.data, origins);
  }
  return validateProfile(fields.data, name);
}

function crossFieldError(rule: CrossRule, p: NicProfile, origins: ReadonlyMap<IniKey, Origin>): ProfileError {
  const [a, b] = rule.keys;
  const oa = origins.get(a);
  const ob = origins.get(b);
  const aLater = oa !== undefined && (ob === undefined || laterThan(oa, ob));
  const blamed = aLater ? oa : ob;
  const [otherKey, other] = aLater ? [b, ob] : [a, oa];
  const where = blamed === undefined ? 'profile' : `profile ${describeOrigin(blamed)}`;
  const from = other === undefined ? '' : ` (${otherKey} from ${describeOrigin(other)})`;
  return new ProfileError(`${where}: ${rule.message(p)}${from}`, 'CROSS_FIELD');
}

function laterThan(x: Origin, y: Origin): boolean {
  return x.order !== y.order ? x.order > y.order : (x.line ?? 0) >= (y.line ?? 0);
}

function describeOrigin(o: Origin): string {
  return o.line === undefined ? o.source : `${o.source} line ${o.line}`;
}

function readProfileFile(entry: string, baseDir: string | undefined): string {
  const full = path.resolve(baseDir ?? process.cwd(), entry);
  let fd: number;
  try {
    fd = fs.openSync(full, 'r');
  } catch (e) {
    throw new ProfileError(`profile ${entry}: cannot read: ${errnoCode(e)}`, 'READ_FAILED');
  }
  try {
    // Read at most one byte past the limit, so an endless file (a FIFO, /dev/zero) cannot hold us.
    const buf = Buffer.alloc(L.FILE_MAX_BYTES + 1);
    let filled = 0;
    for (;;) {
      const n = fs.readSync(fd, buf, filled, buf.length - filled, null);
      if (n === 0) break;
      filled += n;
      if (filled > L.FILE_MAX_BYTES) {
        throw new ProfileError(`profile ${entry}: too large (over ${L.FILE_MAX_BYTES} bytes)`, 'TOO_LARGE');
      }
    }
    return buf.subarray(0, filled).toString('utf8');
  } catch (e) {
    if (e instanceof ProfileError) throw e;
    throw new ProfileError(`profile ${entry}: cannot read: ${errnoCode(e)}`, 'READ_FAILED');
  } finally {
    fs.closeSync(fd);
  }
}

function errnoCode(e: unknown): string {
  if (e instanceof Error) {
    const code = (e as NodeJS.ErrnoException).code;
    return typeof code === 'string' ? code : e.message.split('\n')[0] ?? 'error';
  }
  return String(e);
}

// ---------------------------------------------------------------------------
// What the driver will make of a profile

export interface VectorPlan {
  /** Ethernet queue pairs the driver brings up. */
  readonly nxqs: number;
  /** RDMA event-queue vectors the driver reserves. */
  readonly neqs: number;
  /** Vectors it requests: 1 (adminq + notifyq) + nxqs + neqs; 0 when probe fails. */
  readonly nintrs: number;
  /** Probe fails: not even the minimum fits in the table. */
  readonly probeFails: boolean;
  /** ionic_rdma gets the >= 4 event queues it needs. */
  readonly rdmaUsable: boolean;
}

/**
 * Replays ionic_lif_size for a guest with `onlineCpus` CPUs, assuming the OS
 * grants every vector the table holds: nxqs = min(eth, cpus), neqs = min(eqs,
 * cpus); while 1 + nxqs + neqs exceeds the table, halve neqs (down to 1), then
 * nxqs (down to 1).
 */
export function planVectors(p: NicProfile, onlineCpus: number): VectorPlan {
  const cpus = Math.max(1, Math.floor(onlineCpus));
  let nxqs = Math.min(p.ethQueues, cpus);
  let neqs = Math.min(p.rdmaEqs, cpus);
  for (;;) {
    const nintrs = 1 + nxqs + neqs;
    if (nintrs <= p.msixVectors) {
      return { nxqs, neqs, nintrs, probeFails: false, rdmaUsable: neqs >= L.RDMA_EQS_MIN };
    }
    if (neqs > 1) neqs >>= 1;
    else if (nxqs > 1) nxqs >>= 1;
    else return { nxqs: 0, neqs: 0, nintrs: 0, probeFails: true, rdmaUsable: false };
  }
}
