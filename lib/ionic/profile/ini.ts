// The ini form of a profile (profiles/README.md): one row per key, parsing and
// formatting.
//
// Ini format: `key = value` lines, whole-line `#` or `;` comments, blank lines,
// one optional `[profile]` header. Values run to the end of the line (no
// trailing comments, so a description may hold `#`); one pair of surrounding
// double quotes is stripped, to keep leading or trailing spaces. A file sets
// only the keys it names. Errors are ProfileError, one line naming the file,
// line and key.
//
// Not the npm package `ini` (6.0.0): with it parsing, 46 of the 87 profile
// specs failed. It keeps no line numbers (errors and the cross-field "set
// last" blame need them), takes a duplicate key silently (last wins), cuts a
// value at `#` or `;`, reads `msix_vectors 8` as a key set to true and turns
// `true`/`null` into non-strings.

import type { z } from 'zod';
import { formatLinkSpeed, IniKey, NicProfile, parseLinkSpeed, ProfileError } from './model';
import {
  asicRevSchema,
  asicTypeSchema,
  descriptionSchema,
  ethQueuesSchema,
  firmwareVersionSchema,
  LINK_SPEED_FORMS,
  linkSpeedSchema,
  maxMtuSchema,
  msixVectorsSchema,
  nameSchema,
  onOffSchema,
  phySchema,
  pidSchema,
  rdmaEqsSchema,
  serialNumberSchema,
  statsIntervalSchema,
  transceiverDescriptionSchema,
} from './schema';

type ValueKind = 'integer' | 'text' | 'speed' | 'phy' | 'switch';

/** A parsed ini value: a number (link_speed in Mbps) or a string. */
type ProfileValue = number | string;

interface KeySpec {
  readonly key: IniKey;
  readonly kind: ValueKind;
  readonly schema: z.ZodType<number> | z.ZodType<string>;
  /** The field's value (link_speed in Mbps). */
  readonly get: (p: NicProfile) => ProfileValue;
  /** The comment formatProfile writes above the key. */
  readonly comment: string;
}

const KEY_SPECS: readonly KeySpec[] = [
  {
    key: 'name',
    kind: 'text',
    schema: nameSchema,
    get: (p) => p.name,
    comment: 'informational: a resolved profile is named after its layer list',
  },
  {
    key: 'description',
    kind: 'text',
    schema: descriptionSchema,
    get: (p) => p.description,
    comment: 'free text for --nic-profile list/show',
  },
  {
    key: 'msix_vectors',
    kind: 'integer',
    schema: msixVectorsSchema,
    get: (p) => p.msixVectors,
    comment: 'MSI-X table size = dev_identity.nintrs (2..128)',
  },
  {
    key: 'eth_queues',
    kind: 'integer',
    schema: ethQueuesSchema,
    get: (p) => p.ethQueues,
    comment: 'Ethernet queue pairs: lif_identity queue_count[TXQ] and [RXQ] (1..64)',
  },
  {
    key: 'rdma_eqs',
    kind: 'integer',
    schema: rdmaEqsSchema,
    get: (p) => p.rdmaEqs,
    comment: 'RDMA event queues: lif_identity rdma.eq_qtype.qid_count (0, or 4..64)',
  },
  {
    key: 'link_speed',
    kind: 'speed',
    schema: linkSpeedSchema,
    get: (p) => p.linkSpeedMbps,
    comment: 'lif_status.link_speed and port_info speed: 1G 10G 25G 40G 50G 100G 200G 400G, or Mbps',
  },
  {
    key: 'transceiver_phy',
    kind: 'phy',
    schema: phySchema,
    get: (p) => p.transceiver.phy,
    comment: 'port_info xcvr.phy: copper, fiber or none',
  },
  {
    key: 'transceiver_pid',
    kind: 'integer',
    schema: pidSchema,
    get: (p) => p.transceiver.pid,
    comment: 'port_info xcvr.pid: an enum ionic_xcvr_pid code (0..65535)',
  },
  {
    key: 'transceiver',
    kind: 'text',
    schema: transceiverDescriptionSchema,
    get: (p) => p.transceiver.description,
    comment: 'transceiver description, for logs',
  },
  {
    key: 'max_mtu',
    kind: 'integer',
    schema: maxMtuSchema,
    get: (p) => p.maxMtu,
    comment: 'largest MTU (1500..9194): lif_identity max_frame_size = max_mtu + 18',
  },
  {
    key: 'firmware_version',
    kind: 'text',
    schema: firmwareVersionSchema,
    get: (p) => p.firmwareVersion,
    comment: 'dev_info.fw_version (1..31 printable ASCII characters)',
  },
  {
    key: 'stats_interval_ms',
    kind: 'integer',
    schema: statsIntervalSchema,
    get: (p) => p.statsIntervalMs,
    comment: 'rewrite changed statistics blocks at most this often (100..60000 ms)',
  },
  {
    key: 'asic_type',
    kind: 'integer',
    schema: asicTypeSchema,
    get: (p) => p.asicType,
    comment: 'dev_info.asic_type: 1 CAPRI, 3 GIGLIO, 4 SALINA',
  },
  {
    key: 'asic_rev',
    kind: 'integer',
    schema: asicRevSchema,
    get: (p) => p.asicRev,
    comment: 'dev_info.asic_rev (0..255)',
  },
  {
    key: 'serial_number',
    kind: 'text',
    schema: serialNumberSchema,
    get: (p) => p.serialNumber,
    comment: 'dev_info.serial_num (at most 31 printable ASCII characters)',
  },
  {
    key: 'offload_tx_sg',
    kind: 'switch',
    schema: onOffSchema,
    get: (p) => onOff(p.offloads.txSg),
    comment: 'offer TX scatter-gather (lif feature TX_SG): on or off',
  },
  {
    key: 'offload_tx_csum',
    kind: 'switch',
    schema: onOffSchema,
    get: (p) => onOff(p.offloads.txCsum),
    comment: 'offer TX checksum offload (TX_CSUM): on or off',
  },
  {
    key: 'offload_tso',
    kind: 'switch',
    schema: onOffSchema,
    get: (p) => onOff(p.offloads.tso),
    comment: 'offer TCP segmentation, IPv4 and IPv6 (TSO, TSO_IPV6, TSO_ECN; needs TX SG and checksum): on or off',
  },
  {
    key: 'offload_rx_csum',
    kind: 'switch',
    schema: onOffSchema,
    get: (p) => onOff(p.offloads.rxCsum),
    comment: 'offer RX checksum (RX_CSUM: a complete sum with every frame): on or off',
  },
  {
    key: 'offload_rx_hash',
    kind: 'switch',
    schema: onOffSchema,
    get: (p) => onOff(p.offloads.rxHash),
    comment: 'offer the RX flow hash (RX_HASH): on or off',
  },
  {
    key: 'offload_vlan',
    kind: 'switch',
    schema: onOffSchema,
    get: (p) => onOff(p.offloads.vlan),
    comment: 'offer VLAN tag insert on TX and strip on RX (VLAN_TX_TAG, VLAN_RX_STRIP): on or off',
  },
];

function onOff(v: boolean): string {
  return v ? 'on' : 'off';
}

const KEY_BY_NAME: ReadonlyMap<string, KeySpec> = new Map(KEY_SPECS.map((s) => [s.key, s]));

/** Every ini key, in the order formatProfile writes them. */
export const PROFILE_KEYS: readonly IniKey[] = KEY_SPECS.map((s) => s.key);

type FlatProfile = Record<IniKey, ProfileValue>;

export function flatten(p: NicProfile): FlatProfile {
  const out: Partial<FlatProfile> = {};
  for (const s of KEY_SPECS) out[s.key] = s.get(p);
  return out as FlatProfile;
}

/** The nested object for a flat key map; the schema decides whether it is a NicProfile. */
export function assemble(v: FlatProfile): unknown {
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
    offloads: {
      txSg: v.offload_tx_sg === 'on',
      txCsum: v.offload_tx_csum === 'on',
      tso: v.offload_tso === 'on',
      rxCsum: v.offload_rx_csum === 'on',
      rxHash: v.offload_rx_hash === 'on',
      vlan: v.offload_vlan === 'on',
    },
  };
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
    case 'integer':
      value = parseWholeNumber(text);
      break;
    case 'speed':
      value = parseLinkSpeed(text);
      break;
    case 'phy':
      value = text.toLowerCase();
      break;
    case 'switch':
      value = text.toLowerCase();
      break;
    case 'text':
      value = text;
      break;
  }
  if (value === undefined) {
    const problem =
      spec.kind === 'speed' ? `must be ${LINK_SPEED_FORMS}` : `must be a whole number, ${rangeText(spec)}`;
    return { ok: false, problem };
  }
  const r = spec.schema.safeParse(value);
  if (!r.success) return { ok: false, problem: r.error.issues[0]?.message ?? 'invalid' };
  return { ok: true, value };
}

/** An integer key's range as its schema words it ("between 2 and 128"): every integer schema refuses -1. */
function rangeText(spec: KeySpec): string {
  const r = spec.schema.safeParse(-1);
  const msg = r.success ? '' : (r.error.issues[0]?.message ?? '');
  return msg.replace(/^must be /, '');
}

/** One `key = value` line of an ini file, already checked against its key's range. */
interface ProfileSetting {
  readonly key: IniKey;
  /** Parsed value: a number (link_speed in Mbps) or a string. */
  readonly value: ProfileValue;
  /** The value as written (quotes stripped). */
  readonly raw: string;
  readonly line: number;
}

interface ProfileLayer {
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
      if (sawSection)
        throw new ProfileError(`${where}: second [profile] section (one profile per file)`, 'BAD_SECTION');
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
export function clip(s: string): string {
  const oneLine = s.replace(/[^\x20-\x7e]/g, '?');
  return oneLine.length > 60 ? `${oneLine.slice(0, 57)}...` : oneLine;
}

function suggestKey(key: string): string | undefined {
  const snake = key
    .replace(/([a-z0-9])([A-Z])/g, '$1_$2')
    .replace(/-/g, '_')
    .toLowerCase();
  if (KEY_BY_NAME.has(snake)) return snake;
  if (snake.length >= 3) {
    const prefixed = PROFILE_KEYS.find((k) => k.startsWith(snake));
    if (prefixed) return prefixed;
  }
  let best: string | undefined;
  let bestDistance = 3;
  for (const k of PROFILE_KEYS) {
    const d = editDistance(snake, k);
    if (d < bestDistance) {
      best = k;
      bestDistance = d;
    }
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
