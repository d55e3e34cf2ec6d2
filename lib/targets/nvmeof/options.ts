// Operator input for the NVMe-oF target: the `--backend nvmeof[:k=v,...]`
// string (docs/nvmeof.md, "Options"). Every option is checked with
// zod; a bad one is one line naming the option and its value
// (`nvmeof backend: bad size 'bogus' (...)`), which the CLI prints before the
// device is presented.

import { isIPv4 } from 'net';
import { z } from 'zod';
import { byteCountOption, integerOption, parseBackendOptions } from '../backend-options';
import { BLOCK_SIZES, MAX_RAM_NS_BYTES } from './namespace';
import { DISCOVERY_NQN, MAX_IO_QUEUES, MAX_NQN_BYTES, validNqn } from './subsystem';
import type { ConfigResult } from '../../mesh/config';

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

function ascii(maxBytes: number) {
  return z
    .string()
    .min(1, 'empty')
    .max(maxBytes, `at most ${maxBytes} characters`)
    .regex(/^[\x20-\x7e]+$/, 'printable ASCII only');
}

const sizeSchema = byteCountOption();

const bsSchema = integerOption(512, 4096)
  .refine((n) => (BLOCK_SIZES as readonly number[]).includes(n), `one of ${BLOCK_SIZES.join(', ')}`)
  .transform((n) => n as NvmeofOptions['bs']);

const nqnSchema = z
  .string()
  .refine(validNqn, `1 to ${MAX_NQN_BYTES} printable ASCII characters, no spaces`)
  .refine((s) => s !== DISCOVERY_NQN, 'that is the discovery NQN');

/** One schema per option; each turns the text into the typed value. */
const OPTION_SCHEMAS = {
  size: sizeSchema,
  bs: bsSchema,
  file: z.string().transform((s) => (s === '' ? undefined : s)),
  nqn: nqnSchema,
  ip: z.string().refine((s) => isIPv4(s), 'an IPv4 address (a.b.c.d)'),
  port: integerOption(1, 65535),
  queues: integerOption(1, MAX_IO_QUEUES),
  nsid: integerOption(1, MAX_NSID),
  model: ascii(MODEL_BYTES),
  serial: ascii(SERIAL_BYTES),
} as const;

function formatSize(n: number): string {
  for (const [suffix, unit] of [
    ['T', 2 ** 40],
    ['G', 2 ** 30],
    ['M', 2 ** 20],
    ['K', 2 ** 10],
  ] as const) {
    if (n % unit === 0) return `${n / unit}${suffix}`;
  }
  return String(n);
}

/**
 * Parse `nvmeof` or `nvmeof:k=v,...`. Unknown or repeated options, and any
 * bad value, give one line naming it.
 */
export function parseNvmeofBackend(text: string): ConfigResult<NvmeofOptions> {
  return parseBackendOptions<NvmeofOptions>('nvmeof', text, OPTION_SCHEMAS, NVMEOF_DEFAULTS, (out, bad) => {
    if (out.size % out.bs !== 0 || out.size < out.bs) {
      return bad(`size ${formatSize(out.size)} is not a whole number of ${out.bs}-byte blocks`);
    }
    if (out.file === undefined && out.size > MAX_RAM_NS_BYTES) {
      return bad(
        `size ${formatSize(out.size)} is too big for a RAM namespace (at most ${formatSize(MAX_RAM_NS_BYTES)}); give file=`,
      );
    }
    return null;
  });
}
