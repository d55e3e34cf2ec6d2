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

function crc32c(data: Buffer): number {
  let c = 0xffffffff;
  for (let i = 0; i < data.length; i++) c = CRC32C[(c ^ data[i]!) & 0xff]! ^ (c >>> 8);
  return (c ^ 0xffffffff) >>> 0;
}

function be32(n: number): Buffer {
  const b = Buffer.alloc(4);
  b.writeUInt32BE(n, 0);
  return b;
}

/** Algorithm name (as in x-amz-checksum-<name>) to its base64 digest; a Map, as the name comes from the client. */
export const CHECKSUMS: ReadonlyMap<string, (data: Buffer) => string> = new Map([
  ['crc32', (d: Buffer) => be32(crc32(d)).toString('base64')],
  ['crc32c', (d: Buffer) => be32(crc32c(d)).toString('base64')],
  ['sha1', (d: Buffer) => createHash('sha1').update(d).digest('base64')],
  ['sha256', (d: Buffer) => createHash('sha256').update(d).digest('base64')],
]);

export function md5base64(data: Buffer): string {
  return createHash('md5').update(data).digest('base64');
}

/**
 * Check every x-amz-checksum-* value in `fields` (header or trailer names,
 * lower case) against `data`. Unknown algorithms (crc64nvme) are not checked.
 * Returns the name of the first one that does not match, or null.
 */
export function badChecksum(fields: Readonly<Record<string, string | string[] | undefined>>, data: Buffer): string | null {
  for (const [name, value] of Object.entries(fields)) {
    if (!name.startsWith('x-amz-checksum-') || typeof value !== 'string') continue;
    const fn = CHECKSUMS.get(name.slice('x-amz-checksum-'.length));
    if (fn && fn(data) !== value.trim()) return name;
  }
  return null;
}
