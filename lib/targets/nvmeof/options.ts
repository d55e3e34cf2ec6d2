// Operator input for the NVMe-oF target: the `--backend nvmeof[:k=v,...]`
// string (reference/anchor-rocm-ernic.md 1.7). Every option is checked with
// zod; a bad one is one line naming the option and its value
// (`nvmeof backend: bad size 'bogus' (...)`), which the CLI prints before the
// device is presented.

import { isIPv4 } from 'net';
import { z } from 'zod';
import { BLOCK_SIZES, MAX_RAM_NS_BYTES } from './namespace';
import { DISCOVERY_NQN, MAX_IO_QUEUES, MAX_NQN_BYTES, validNqn } from './subsystem';

export type ConfigResult<T> = { readonly ok: true; readonly value: T } | { readonly ok: false; readonly error: string };

export interface NvmeofOptions {
  /** Namespace size in bytes (a whole number of blocks). */
  readonly size: number;
  readonly bs: (typeof BLOCK_SIZES)[number];
  /** Backing file (created if absent, sized to `size`); undefined: anonymous RAM. */
  readonly file: string | undefined;
  readonly nqn: string;
  /** The controller's IPv4 address on the guest's segment. */
  readonly ip: string;
  /** Service id (rdma_cm port). */
  readonly port: number;
  /** I/O queues per controller. */
  readonly queues: number;
  readonly nsid: number;
  readonly model: string;
  readonly serial: string;
}

export const NVMEOF_DEFAULTS: NvmeofOptions = {
  size: 64 * 1024 * 1024,
  bs: 512,
  file: undefined,
  nqn: 'nvmet-test',
  ip: '192.168.200.1',
  port: 4420,
  queues: 8,
  nsid: 1,
  model: 'rocm-ernic NVMe-oF target',
  serial: 'ERNIC0000000000001',
};

const MODEL_BYTES = 40;
const SERIAL_BYTES = 20;
const MAX_NSID = 0xfffffffe;
const UNITS: Readonly<Record<string, number>> = {
  '': 1, k: 2 ** 10, kib: 2 ** 10, m: 2 ** 20, mib: 2 ** 20, g: 2 ** 30, gib: 2 ** 30, t: 2 ** 40, tib: 2 ** 40,
};

/** A byte count with an optional binary unit: 4096, 64M, 64MiB, 8G, 1T. */
export function parseSize(text: string): number | undefined {
  const m = /^([0-9]+)([a-z]*)$/i.exec(text.trim());
  if (!m) return undefined;
  const unit = UNITS[m[2]!.toLowerCase()];
  if (unit === undefined) return undefined;
  const n = Number(m[1]) * unit;
  return Number.isSafeInteger(n) && n > 0 ? n : undefined;
}

function integer(min: number, max: number) {
  return z.string()
    .regex(/^[0-9]+$/, `a decimal integer from ${min} to ${max}`)
    .transform(Number)
    .pipe(z.number().int().min(min, `at least ${min}`).max(max, `at most ${max}`));
}

function ascii(maxBytes: number) {
  return z.string()
    .min(1, 'empty')
    .max(maxBytes, `at most ${maxBytes} characters`)
    .regex(/^[\x20-\x7e]+$/, 'printable ASCII only');
}

const sizeSchema = z.string().transform((s, ctx) => {
  const n = parseSize(s);
  if (n === undefined) {
    ctx.addIssue({ code: z.ZodIssueCode.custom, message: 'a byte count with K, M, G, T or KiB, MiB, GiB, TiB' });
    return z.NEVER;
  }
  return n;
});

const bsSchema = integer(512, 4096).refine((n) => (BLOCK_SIZES as readonly number[]).includes(n), `one of ${BLOCK_SIZES.join(', ')}`)
  .transform((n) => n as NvmeofOptions['bs']);

const nqnSchema = z.string()
  .refine(validNqn, `1 to ${MAX_NQN_BYTES} printable ASCII characters, no spaces`)
  .refine((s) => s !== DISCOVERY_NQN, 'that is the discovery NQN');

/** One schema per option; each turns the text into the typed value. */
const OPTION_SCHEMAS = {
  size: sizeSchema,
  bs: bsSchema,
  file: z.string().transform((s) => (s === '' ? undefined : s)),
  nqn: nqnSchema,
  ip: z.string().refine((s) => isIPv4(s), 'an IPv4 address (a.b.c.d)'),
  port: integer(1, 65535),
  queues: integer(1, MAX_IO_QUEUES),
  nsid: integer(1, MAX_NSID),
  model: ascii(MODEL_BYTES),
  serial: ascii(SERIAL_BYTES),
} as const;

type OptionName = keyof typeof OPTION_SCHEMAS;

function isOptionName(k: string): k is OptionName {
  return Object.prototype.hasOwnProperty.call(OPTION_SCHEMAS, k);
}

function formatSize(n: number): string {
  for (const [suffix, unit] of [['T', 2 ** 40], ['G', 2 ** 30], ['M', 2 ** 20], ['K', 2 ** 10]] as const) {
    if (n % unit === 0) return `${n / unit}${suffix}`;
  }
  return String(n);
}

/**
 * Parse `nvmeof` or `nvmeof:k=v,...`. Unknown or repeated options, and any
 * bad value, give one line naming it.
 */
export function parseNvmeofBackend(text: string): ConfigResult<NvmeofOptions> {
  const bad = (why: string): ConfigResult<NvmeofOptions> => ({ ok: false, error: `nvmeof backend: ${why}` });
  const m = /^nvmeof(?::(.*))?$/s.exec(text);
  if (!m) return bad(`'${text}' is not nvmeof[:key=value,...]`);
  const out: { -readonly [K in keyof NvmeofOptions]: NvmeofOptions[K] } = { ...NVMEOF_DEFAULTS };
  const seen = new Set<string>();
  const body = m[1];
  if (body !== undefined && body !== '') {
    for (const item of body.split(',')) {
      const eq = item.indexOf('=');
      if (eq <= 0) return bad(`option '${item}' is not key=value`);
      const key = item.slice(0, eq);
      const value = item.slice(eq + 1);
      if (!isOptionName(key)) return bad(`unknown option '${key}' (known: ${Object.keys(OPTION_SCHEMAS).join(', ')})`);
      if (seen.has(key)) return bad(`option '${key}' given twice`);
      seen.add(key);
      const r = OPTION_SCHEMAS[key].safeParse(value);
      if (!r.success) return bad(`bad ${key} '${value}' (${r.error.issues[0]!.message})`);
      (out as Record<OptionName, unknown>)[key] = r.data;
    }
  }
  if (out.size % out.bs !== 0 || out.size < out.bs) {
    return bad(`size ${formatSize(out.size)} is not a whole number of ${out.bs}-byte blocks`);
  }
  if (out.file === undefined && out.size > MAX_RAM_NS_BYTES) {
    return bad(`size ${formatSize(out.size)} is too big for a RAM namespace (at most ${formatSize(MAX_RAM_NS_BYTES)}); give file=`);
  }
  return { ok: true, value: out };
}
