// Operator input for the S3 store: the `--backend s3[:k=v,...]` string
// (docs/s3.md, "Running it", plus listen= and dir=). Every option
// is checked with zod; a bad one is one line naming the option and its value
// (`s3 backend: bad size 'lots' (...)`), for the CLI to print before the
// device is presented.

import { constants as bufferConstants } from 'buffer';
import { isIPv4, isIPv6 } from 'net';
import { z } from 'zod';
import { byteCountOption, integerOption, parseBackendOptions } from '../backend-options';
import type { ConfigResult } from '../../mesh/config';
import { isLoopbackAddress } from '../../mesh/address';

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
  /** Also listen on the host (PORT on 127.0.0.1, or HOST:PORT), for host-side clients; undefined: no host listener. */
  readonly listen: { readonly host: string; readonly port: number } | undefined;
  /** Persistence directory; undefined: RAM only. */
  readonly dir: string | undefined;
}

export const S3_DEFAULTS: S3Options = {
  bucket: 'ernic',
  size: 256 * 2 ** 20,
  objects: 256,
  ip: '192.168.200.1',
  port: 9000,
  maxpart: 256 * 2 ** 20,
  listen: undefined,
  dir: undefined,
};

const MAX_OBJECTS = 65536;
/** Largest RAM capacity accepted. */
const MAX_STORE_BYTES = 64 * 2 ** 30;
/** Largest single transfer: S3's 5 GiB part limit, or what one Buffer can hold if smaller. */
const MAX_PART_BYTES = Math.min(5 * 2 ** 30, bufferConstants.MAX_LENGTH);
const integer = integerOption;
const bytes = byteCountOption;

/** An S3 bucket name: 3 to 63 lower-case letters, digits, dots and hyphens, starting and ending with a letter or digit, not an IP address. */
const bucketSchema = z
  .string()
  .regex(/^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$/, 'a DNS name of 3 to 63 lower-case letters, digits, dots or hyphens')
  .refine((s) => !s.includes('..') && !isIPv4(s), 'no empty labels, not an IP address');

/** Where a bare `listen=PORT` binds: the host's loopback, never every address. */
const S3_LISTEN_DEFAULT_HOST = '127.0.0.1';

/** Is `host` this machine's loopback: an address the mesh's rule calls loopback, or the name localhost? */
function isLoopbackHost(host: string): boolean {
  return host === 'localhost' || isLoopbackAddress(host);
}

/**
 * Why the host listener may not start, or null. The token path reaches
 * guest memory, so a listener other hosts can reach needs credentials.
 */
export function hostListenerRefusal(
  listen: { readonly host: string; readonly port: number },
  credentialsSet: boolean,
): string | null {
  if (credentialsSet || isLoopbackHost(listen.host)) return null;
  return (
    `s3 backend: listen=${listen.host.includes(':') ? `[${listen.host}]` : listen.host}:${listen.port} is not loopback and no credentials are set: ` +
    'set ERNIC_S3_ACCESS_KEY and ERNIC_S3_SECRET_KEY (SigV4), or listen on 127.0.0.1'
  );
}

const listenSchema = z.string().transform((s, ctx) => {
  if (s === '') return undefined;
  if (/^[0-9]{1,5}$/.test(s) && Number(s) <= 65535) return { host: S3_LISTEN_DEFAULT_HOST, port: Number(s) };
  const m = /^(?:\[([0-9a-fA-F:.]+)\]|([^:\s]+)):([0-9]{1,5})$/.exec(s);
  const port = m ? Number(m[3]) : -1;
  const host = m ? (m[1] ?? m[2]!) : '';
  if (
    !m ||
    port > 65535 ||
    (m[1] !== undefined && !isIPv6(host)) ||
    (m[2] !== undefined && !/^[A-Za-z0-9.-]+$/.test(host))
  ) {
    ctx.addIssue({
      code: z.ZodIssueCode.custom,
      message: 'PORT (on 127.0.0.1) or HOST:PORT (IPv6 in brackets), port 0 to 65535',
    });
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

/** Parse `s3` or `s3:k=v,...`. Unknown or repeated options, and any bad value, give one line naming it. */
export function parseS3Backend(text: string): ConfigResult<S3Options> {
  return parseBackendOptions<S3Options>('s3', text, OPTION_SCHEMAS, S3_DEFAULTS, (out, bad) =>
    out.maxpart > out.size ? bad(`maxpart ${out.maxpart} is larger than size ${out.size}`) : null,
  );
}
