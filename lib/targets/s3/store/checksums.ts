// Checksums an S3 client may send with a body (x-amz-checksum-* headers or
// aws-chunked trailers; Content-MD5): CRC32, CRC32C, SHA-1, SHA-256, MD5,
// each as the base64 of its big-endian digest.

import { createHash } from 'crypto';
import { crc32 } from 'zlib';

// CRC32 is Node's own (zlib.crc32, ~4 GiB/s against ~0.4 for a JS table
// loop); CRC32C (Castagnoli) has no Node or zlib function, so it is a table here.
function crcTable(poly: number): Uint32Array {
  const t = new Uint32Array(256);
  for (let n = 0; n < 256; n++) {
    let c = n;
    for (let k = 0; k < 8; k++) c = c & 1 ? (c >>> 1) ^ poly : c >>> 1;
    t[n] = c >>> 0;
  }
  return t;
}

const CRC32C = crcTable(0x82f63b78);

function crc32cUpdate(c: number, data: Buffer): number {
  for (let i = 0; i < data.length; i++) c = CRC32C[(c ^ data[i]!) & 0xff]! ^ (c >>> 8);
  return c;
}

function be32(n: number): Buffer {
  const b = Buffer.alloc(4);
  b.writeUInt32BE(n >>> 0, 0);
  return b;
}

/** A digest fed in pieces (a large body is hashed a slice per step, ../../pace.ts), then read as base64. */
export interface RunningDigest {
  update(data: Buffer): void;
  digest(): string;
}

function hashDigest(algorithm: string, encoding: 'base64' | 'hex' = 'base64'): RunningDigest {
  const h = createHash(algorithm);
  return {
    update: (d) => {
      h.update(d);
    },
    digest: () => h.digest(encoding),
  };
}

/** Algorithm name (as in x-amz-checksum-<name>) to a new running digest; a Map, as the name comes from the client. */
export const CHECKSUMS: ReadonlyMap<string, () => RunningDigest> = new Map<string, () => RunningDigest>([
  [
    'crc32',
    () => {
      let c = 0;
      return {
        update: (d) => {
          c = crc32(d, c);
        },
        digest: () => be32(c).toString('base64'),
      };
    },
  ],
  [
    'crc32c',
    () => {
      let c = 0xffffffff;
      return {
        update: (d) => {
          c = crc32cUpdate(c, d);
        },
        digest: () => be32(c ^ 0xffffffff).toString('base64'),
      };
    },
  ],
  ['sha1', () => hashDigest('sha1')],
  ['sha256', () => hashDigest('sha256')],
]);

/** MD5 as Content-MD5 has it (base64), running. */
export function md5Digest(): RunningDigest {
  return hashDigest('md5');
}

/** One x-amz-checksum-* value to check: the field's name, its algorithm, the value sent. */
interface ChecksumCheck {
  readonly field: string;
  readonly algorithm: string;
  readonly expected: string;
}

/**
 * The x-amz-checksum-* values among `fields` (header or trailer names, lower
 * case) whose algorithm we compute. Unknown algorithms (crc64nvme) are not
 * checked.
 */
export function checksumChecks(fields: Iterable<readonly [string, unknown]>): ChecksumCheck[] {
  const out: ChecksumCheck[] = [];
  for (const [field, value] of fields) {
    if (!field.startsWith('x-amz-checksum-') || typeof value !== 'string') continue;
    const algorithm = field.slice('x-amz-checksum-'.length);
    if (CHECKSUMS.has(algorithm)) out.push({ field, algorithm, expected: value.trim() });
  }
  return out;
}

/**
 * Check every x-amz-checksum-* value in `fields` against `data` at once (small
 * bodies, tests). Returns the name of the first one that does not match, or null.
 */
export function badChecksum(
  fields: Readonly<Record<string, string | string[] | undefined>>,
  data: Buffer,
): string | null {
  for (const c of checksumChecks(Object.entries(fields))) {
    const d = CHECKSUMS.get(c.algorithm)!();
    d.update(data);
    if (d.digest() !== c.expected) return c.field;
  }
  return null;
}
