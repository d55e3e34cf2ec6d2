// What the in-process targets' `--backend NAME[:key=value,...]` options
// share: byte counts with binary units, bounded integers, and the loop that
// splits, checks and collects the options against a table of zod schemas.
// Every refusal is one line naming the option ("nvmeof backend: ...").

import bytes from 'bytes';
import { z } from 'zod';
import type { ConfigResult } from '../mesh/config';

/**
 * The forms a byte count may take: digits, then optionally K, M, G or T with
 * an optional B or iB, any case. Checked here because `bytes` alone reads
 * '64M' as 64 (it falls back to parseInt) and takes '1.5mb', '-1mb', '12xyz'.
 */
const BYTE_COUNT = /^([0-9]{1,16})(?:([kmgt])(i?b)?)?$/i;

/**
 * A byte count with an optional binary unit (4096, 64K, 256M, 64MiB, 4GB:
 * 1K = 1KB = 1KiB = 1024, as the `bytes` package counts); undefined when it
 * is not one, is 0 or is beyond 2^53.
 */
export function parseByteCount(text: string): number | undefined {
  const m = BYTE_COUNT.exec(text.trim());
  if (!m) return undefined;
  const n = bytes.parse(m[2] === undefined ? m[1]! : `${m[1]}${m[2]}b`);
  return n !== null && Number.isSafeInteger(n) && n > 0 ? n : undefined;
}

/** A decimal integer option in [min, max]. */
export function integerOption(min: number, max: number) {
  return z
    .string()
    .regex(/^[0-9]+$/, `a decimal integer from ${min} to ${max}`)
    .transform(Number)
    .pipe(z.number().int().min(min, `at least ${min}`).max(max, `at most ${max}`));
}

/** A byte-count option (binary units), at most `max` bytes when given. */
export function byteCountOption(max?: number) {
  return z.string().transform((s, ctx) => {
    const n = parseByteCount(s);
    if (n === undefined) {
      ctx.addIssue({
        code: z.ZodIssueCode.custom,
        message: 'a byte count: digits with K, M, G or T (binary: 1K = 1024), e.g. 64M or 4G',
      });
      return z.NEVER;
    }
    if (max !== undefined && n > max) {
      ctx.addIssue({ code: z.ZodIssueCode.custom, message: `at most ${max} bytes` });
      return z.NEVER;
    }
    return n;
  });
}

/**
 * Parse `NAME` or `NAME:k=v,...` against `schemas`, starting from
 * `defaults`. Unknown or repeated options and bad values are refused with
 * one line naming them; `check` then judges the options together.
 */
export function parseBackendOptions<T extends object>(
  name: string,
  text: string,
  schemas: Readonly<Record<string, z.ZodTypeAny>>,
  defaults: T,
  check: (v: T, bad: (why: string) => ConfigResult<T>) => ConfigResult<T> | null = () => null,
): ConfigResult<T> {
  const bad = (why: string): ConfigResult<T> => ({ ok: false, error: `${name} backend: ${why}` });
  const m = new RegExp(`^${name}(?::(.*))?$`, 's').exec(text);
  if (!m) return bad(`'${text}' is not ${name}[:key=value,...]`);
  const out = { ...defaults } as Record<string, unknown>;
  const seen = new Set<string>();
  const body = m[1];
  if (body !== undefined && body !== '') {
    for (const item of body.split(',')) {
      const eq = item.indexOf('=');
      if (eq <= 0) return bad(`option '${item}' is not key=value`);
      const key = item.slice(0, eq);
      const value = item.slice(eq + 1);
      const schema = Object.hasOwn(schemas, key) ? schemas[key] : undefined;
      if (!schema) return bad(`unknown option '${key}' (known: ${Object.keys(schemas).join(', ')})`);
      if (seen.has(key)) return bad(`option '${key}' given twice`);
      seen.add(key);
      const r = schema.safeParse(value);
      if (!r.success) return bad(`bad ${key} '${value}' (${r.error.issues[0]!.message.replace(/\s+/g, ' ')})`);
      out[key] = r.data;
    }
  }
  const v = out as T;
  return check(v, bad) ?? { ok: true, value: v };
}
