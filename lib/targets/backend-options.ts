// What the in-process targets' `--backend NAME[:key=value,...]` options
// share: byte counts with binary units, bounded integers, and the loop that
// splits, checks and collects the options against a table of zod schemas.
// Every refusal is one line naming the option ("nvmeof backend: ...").

import { z } from 'zod';
import type { ConfigResult } from '../mesh/config';

const UNITS: Readonly<Record<string, number>> = {
  '': 1, k: 2 ** 10, kib: 2 ** 10, m: 2 ** 20, mib: 2 ** 20, g: 2 ** 30, gib: 2 ** 30, t: 2 ** 40, tib: 2 ** 40,
};

/** A byte count with an optional binary unit (4096, 64K, 256M, 1GiB); undefined when it is not one. */
export function parseByteCount(text: string): number | undefined {
  const m = /^([0-9]+)([a-z]*)$/i.exec(text.trim());
  if (!m) return undefined;
  const unit = UNITS[m[2]!.toLowerCase()];
  if (unit === undefined) return undefined;
  const n = Number(m[1]) * unit;
  return Number.isSafeInteger(n) && n > 0 ? n : undefined;
}

/** A decimal integer option in [min, max]. */
export function integerOption(min: number, max: number) {
  return z.string()
    .regex(/^[0-9]+$/, `a decimal integer from ${min} to ${max}`)
    .transform(Number)
    .pipe(z.number().int().min(min, `at least ${min}`).max(max, `at most ${max}`));
}

/** A byte-count option (binary units), at most `max` bytes when given. */
export function byteCountOption(max?: number) {
  return z.string().transform((s, ctx) => {
    const n = parseByteCount(s);
    if (n === undefined) {
      ctx.addIssue({ code: z.ZodIssueCode.custom, message: 'a byte count with K, M, G, T or KiB, MiB, GiB, TiB' });
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
  name: string, text: string, schemas: Readonly<Record<string, z.ZodTypeAny>>, defaults: T,
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
      const schema = Object.prototype.hasOwnProperty.call(schemas, key) ? schemas[key] : undefined;
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
