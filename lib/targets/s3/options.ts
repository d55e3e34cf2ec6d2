// Operator input for the S3 store: the `--backend s3[:k=v,...]` string
// (reference/anchor-rocm-ernic.md 1.8, plus listen= and dir=). Every option
// is checked with zod; a bad one is one line naming the option and its value
// (`s3 backend: bad size 'lots' (...)`), for the CLI to print before the
// device is presented.

import { constants as bufferConstants } from 'buffer';
import { isIPv4, isIPv6 } from 'net';
import { z } from 'zod';

export type ConfigResult<T> = { readonly ok: true; readonly value: T } | { readonly ok: false; readonly error: string };

export interface S3Options {
  readonly bucket: string;
  /** RAM capacity in bytes (objects and parts in progress). */
  readonly size: number;
  /** Object slots. */
  readonly objects: number;
  /** The store's IPv4 address on the guest's segment. */
  readonly ip: string;
  /** HTTP port on that address. */
  readonly port: number;
  /** Largest single transfer or part, bytes. */
  readonly maxpart: number;
  /** Also listen on the host (HOST:PORT), for host-side clients; undefined: no host listener. */
  readonly listen: { readonly host: string; readonly port: number } | undefined;
  /** Persistence directory; undefined: RAM only. */
  readonly dir: string | undefined;
}

export const S3_DEFAULTS: S3Options = {
  bucket: 'ernic', size: 256 * 2 ** 20, objects: 256, ip: '192.168.200.1', port: 9000, maxpart: 256 * 2 ** 20, listen: undefined, dir: undefined,
};

export const MAX_OBJECTS = 65536;
/** Largest RAM capacity accepted. */
export const MAX_STORE_BYTES = 64 * 2 ** 30;
/** Largest single transfer: S3's 5 GiB part limit, or what one Buffer can hold if smaller. */
export const MAX_PART_BYTES = Math.min(5 * 2 ** 30, bufferConstants.MAX_LENGTH);

const UNITS: Readonly<Record<string, number>> = {
  '': 1, k: 2 ** 10, kib: 2 ** 10, m: 2 ** 20, mib: 2 ** 20, g: 2 ** 30, gib: 2 ** 30, t: 2 ** 40, tib: 2 ** 40,
};

/** A byte count with an optional binary unit (4096, 64K, 256M, 1GiB); undefined when it is not one. */
export function parseByteCount(text: string): number | undefined {
  const m = /^([0-9]+)([a-z]*)$/i.exec(text);
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

function bytes(max: number) {
  return z.string().transform((s, ctx) => {
    const n = parseByteCount(s);
    if (n === undefined) {
      ctx.addIssue({ code: z.ZodIssueCode.custom, message: 'a byte count with K, M, G, T or KiB, MiB, GiB, TiB' });
      return z.NEVER;
    }
    if (n > max) {
      ctx.addIssue({ code: z.ZodIssueCode.custom, message: `at most ${max} bytes` });
      return z.NEVER;
    }
    return n;
  });
}

/** An S3 bucket name: 3 to 63 lower-case letters, digits, dots and hyphens, starting and ending with a letter or digit, not an IP address. */
const bucketSchema = z.string()
  .regex(/^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$/, 'a DNS name of 3 to 63 lower-case letters, digits, dots or hyphens')
  .refine((s) => !s.includes('..') && !isIPv4(s), 'no empty labels, not an IP address');

const listenSchema = z.string().transform((s, ctx) => {
  if (s === '') return undefined;
  const m = /^(?:\[([0-9a-fA-F:.]+)\]|([^:\s]+)):([0-9]{1,5})$/.exec(s);
  const port = m ? Number(m[3]) : -1;
  const host = m ? (m[1] ?? m[2]!) : '';
  if (!m || port > 65535 || (m[1] !== undefined && !isIPv6(host)) || (m[2] !== undefined && !/^[A-Za-z0-9.-]+$/.test(host))) {
    ctx.addIssue({ code: z.ZodIssueCode.custom, message: 'HOST:PORT (IPv6 in brackets), port 0 to 65535' });
    return z.NEVER;
  }
  return { host, port };
});

const OPTION_SCHEMAS = {
  bucket: bucketSchema,
  size: bytes(MAX_STORE_BYTES),
  objects: integer(1, MAX_OBJECTS),
  ip: z.string().refine((s) => isIPv4(s), 'an IPv4 address (a.b.c.d)'),
  port: integer(1, 65535),
  maxpart: bytes(MAX_PART_BYTES),
  listen: listenSchema,
  dir: z.string().transform((s) => (s === '' ? undefined : s)),
} as const;

type OptionName = keyof typeof OPTION_SCHEMAS;

function isOptionName(k: string): k is OptionName {
  return Object.prototype.hasOwnProperty.call(OPTION_SCHEMAS, k);
}

/** Parse `s3` or `s3:k=v,...`. Unknown or repeated options, and any bad value, give one line naming it. */
export function parseS3Backend(text: string): ConfigResult<S3Options> {
  const bad = (why: string): ConfigResult<S3Options> => ({ ok: false, error: `s3 backend: ${why}` });
  const m = /^s3(?::(.*))?$/s.exec(text);
  if (!m) return bad(`'${text}' is not s3[:key=value,...]`);
  const out: { -readonly [K in keyof S3Options]: S3Options[K] } = { ...S3_DEFAULTS };
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
      if (!r.success) return bad(`bad ${key} '${value}' (${r.error.issues[0]!.message.replace(/\s+/g, ' ')})`);
      (out as Record<OptionName, unknown>)[key] = r.data;
    }
  }
  if (out.maxpart > out.size) return bad(`maxpart ${out.maxpart} is larger than size ${out.size}`);
  return { ok: true, value: out };
}
