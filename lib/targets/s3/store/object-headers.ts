// The object headers of the S3 store (./server.ts): user metadata read from a request (x-amz-meta-*), the headers
// an object is served with, a request's single Range, and the bare x-amz-rdma-reply of a failed token request.

import * as http from 'http';
import { quoted, RDMA_REPLY_HEADER } from './context';
import { fail, ok, S3_ERRORS, S3Error, S3Result } from './errors';
import { MAX_METADATA_BYTES, StoredObject } from './objects';

/** The x-amz-meta-* headers of a request, bounded in bytes. */
export function userMetadata(h: http.IncomingHttpHeaders): S3Result<Record<string, string>> {
  // No prototype: the names are the client's (x-amz-meta-__proto__ is a name like any other).
  const m = Object.create(null) as Record<string, string>;
  let bytes = 0;
  for (const [k, v] of Object.entries(h)) {
    if (!k.startsWith('x-amz-meta-') || typeof v !== 'string') continue;
    m[k.slice('x-amz-meta-'.length)] = v;
    bytes += k.length - 'x-amz-meta-'.length + v.length;
  }
  return bytes > MAX_METADATA_BYTES ? fail('InvalidArgument', 'metadata too large') : ok(m);
}

/** A failed token request still answers x-amz-rdma-reply, with the bare status. */
export function rdmaErrorReply(err: S3Error): Record<string, string> {
  return { [RDMA_REPLY_HEADER]: String(S3_ERRORS[err.code].status) };
}

/** The headers a GET or HEAD of an object answers with: ETag, dates, type, ranges, its user metadata. */
export function objectHeaders(o: StoredObject): Record<string, string> {
  const h = Object.assign(Object.create(null) as Record<string, string>, {
    ETag: quoted(o.etag),
    'Last-Modified': o.lastModified.toUTCString(),
    'Content-Type': o.contentType,
    'Accept-Ranges': 'bytes',
  });
  for (const [k, v] of Object.entries(o.metadata)) h[`x-amz-meta-${k}`] = v;
  return h;
}

/** A single `bytes=` range against `size`: [start, end] inclusive, 'all' when absent or ignorable, null when unsatisfiable. */
export function parseRange(header: string | undefined, size: number): [number, number] | 'all' | null {
  if (header === undefined) return 'all';
  const m = /^bytes=(\d*)-(\d*)$/.exec(header.trim());
  if (!m || (m[1] === '' && m[2] === '')) return 'all'; // multiple or malformed ranges: the whole object, as S3 does
  if (m[1] === '') {
    const n = Number(m[2]);
    if (n === 0 || size === 0) return null;
    return [Math.max(0, size - n), size - 1];
  }
  const start = Number(m[1]);
  const end = m[2] === '' ? size - 1 : Math.min(Number(m[2]), size - 1);
  if (start >= size || (m[2] !== '' && Number(m[2]) < start)) return null;
  return [start, end];
}
