// AWS Signature Version 4 verification for the S3 store, when credentials
// are configured: the Authorization header form and presigned URLs
// (X-Amz-* query parameters). The canonical request is rebuilt from what
// arrived (method, path, query, the signed headers, the payload hash the
// client declared), signed with the key derived from the secret, and the
// signatures compared in constant time. The body's SHA-256, when the client
// declared one, is checked by the server after the body is read; a body
// signed as a stream (STREAMING-AWS4-HMAC-SHA256-PAYLOAD[-TRAILER]) has each
// chunk's signature chained from the request's (the seed) and, with a
// trailer, the trailer's signature checked by verifyChunkSignatures.
//
// Not @smithy/signature-v4 (5.7, recomputing with its signer and Node's
// SHA-256): no faster (50-60 us per request either way), but 4 packages and
// 8.3 MB more (@smithy/core; the whole install is 21 MB), 21 ms more to load,
// and a signer that adds and signs x-amz-date itself and is async.

import { createHash, createHmac, Hash, timingSafeEqual } from 'crypto';
import { pacer, Pacer, SLICE } from '../../pace';
import type { IncomingHttpHeaders } from 'http';
import type { ChunkedBody } from './chunked';
import { fail, ok, S3Result } from './errors';

export interface Credentials {
  readonly accessKeyId: string;
  readonly secretAccessKey: string;
}

const SIGV4_ALGORITHM = 'AWS4-HMAC-SHA256';
const UNSIGNED_PAYLOAD = 'UNSIGNED-PAYLOAD';
/** Payload hashes of a body signed chunk by chunk (aws-chunked), without and with a signed trailer. */
const STREAMING_SIGNED = 'STREAMING-AWS4-HMAC-SHA256-PAYLOAD';
const STREAMING_SIGNED_TRAILER = 'STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER';
const CHUNK_ALGORITHM = 'AWS4-HMAC-SHA256-PAYLOAD';
const TRAILER_ALGORITHM = 'AWS4-HMAC-SHA256-TRAILER';
const EMPTY_SHA256 = 'e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855';

/** A verified request: the payload hash it declared, and what its body's chunk signatures chain from. */
export interface SigV4Verified {
  readonly payloadHash: string;
  /** The request's signature (hex): the seed of the chunk signatures. */
  readonly signature: string;
  readonly signingKey: Buffer;
  readonly amzDate: string;
  readonly scope: string;
  /** The header names the signature covers, lower case. */
  readonly signedHeaders: readonly string[];
}
/** Largest clock difference accepted, ms (S3's 15 minutes). */
const MAX_SKEW_MS = 15 * 60 * 1000;
/** Longest presigned URL lifetime, s (7 days). */
const MAX_EXPIRES = 7 * 24 * 3600;

/**
 * RFC 3986 encoding as SigV4 wants it: unreserved characters kept, everything
 * else %XX upper case. encodeURIComponent does the bulk (a listing with
 * encoding-type=url encodes 1,000 keys of 1 KiB: 150 ms byte by byte, a few
 * here); it also keeps !'()*, which SigV4 escapes.
 */
export function uriEncode(text: string, keepSlash: boolean): string {
  let out: string;
  try {
    out = encodeURIComponent(text);
  } catch {
    return uriEncodeBytes(text, keepSlash); // a lone surrogate: encoded as its UTF-8 replacement, byte by byte
  }
  if (/[!'()*]/.test(out)) out = out.replace(/[!'()*]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`);
  return keepSlash && out.includes('%2F') ? out.replace(/%2F/g, '/') : out;
}

function uriEncodeBytes(text: string, keepSlash: boolean): string {
  let out = '';
  for (const b of Buffer.from(text, 'utf8')) {
    const c = String.fromCharCode(b);
    if (/[A-Za-z0-9\-._~]/.test(c) || (keepSlash && c === '/')) out += c;
    else out += `%${b.toString(16).toUpperCase().padStart(2, '0')}`;
  }
  return out;
}

function safeDecode(s: string): string | null {
  try {
    return decodeURIComponent(s);
  } catch {
    return null;
  }
}

/** Query pairs decoded from a raw query string ('+' is a literal here, as S3 clients encode spaces as %20). */
export function queryPairs(raw: string): [string, string][] | null {
  if (raw === '') return [];
  const out: [string, string][] = [];
  for (const p of raw.split('&')) {
    if (p === '') continue;
    const eq = p.indexOf('=');
    const k = safeDecode(eq < 0 ? p : p.slice(0, eq));
    const v = safeDecode(eq < 0 ? '' : p.slice(eq + 1));
    if (k === null || v === null) return null;
    out.push([k, v]);
  }
  return out;
}

function hmac(key: Buffer | string, data: string): Buffer {
  return createHmac('sha256', key).update(data, 'utf8').digest();
}

function sha256hex(data: Buffer | string): string {
  return createHash('sha256').update(data).digest('hex');
}

function signingKey(secret: string, date: string, region: string, service: string): Buffer {
  return hmac(hmac(hmac(hmac(`AWS4${secret}`, date), region), service), 'aws4_request');
}

/** Header values by lower-case name from rawHeaders (repeats joined with ','), whitespace collapsed. */
function headerValues(rawHeaders: readonly string[]): Map<string, string> {
  const m = new Map<string, string>();
  for (let i = 0; i + 1 < rawHeaders.length; i += 2) {
    const name = rawHeaders[i]!.toLowerCase();
    const v = rawHeaders[i + 1]!.trim().replace(/\s+/g, ' ');
    m.set(name, m.has(name) ? `${m.get(name)},${v}` : v);
  }
  return m;
}

interface SignedRequest {
  readonly method: string;
  /** The raw request target: path and query as sent. */
  readonly url: string;
  readonly headers: IncomingHttpHeaders;
  readonly rawHeaders: readonly string[];
}

interface AuthFields {
  readonly accessKeyId: string;
  readonly date: string;
  readonly region: string;
  readonly service: string;
  readonly signedHeaders: string[];
  readonly signature: string;
  readonly amzDate: string;
  readonly payloadHash: string;
  readonly presigned: boolean;
  readonly expires: number;
}

function parseCredential(cred: string): { accessKeyId: string; date: string; region: string; service: string } | null {
  const parts = cred.split('/');
  if (parts.length !== 5 || parts[4] !== 'aws4_request' || !/^\d{8}$/.test(parts[1]!)) return null;
  return { accessKeyId: parts[0]!, date: parts[1]!, region: parts[2]!, service: parts[3]! };
}

function authFields(req: SignedRequest, query: [string, string][]): S3Result<AuthFields> {
  const auth = req.headers.authorization;
  if (auth !== undefined) {
    if (!auth.startsWith(`${SIGV4_ALGORITHM} `)) return fail('InvalidArgument', 'only AWS4-HMAC-SHA256 is supported');
    const kv = new Map<string, string>();
    for (const item of auth.slice(SIGV4_ALGORITHM.length + 1).split(',')) {
      const eq = item.indexOf('=');
      if (eq > 0) kv.set(item.slice(0, eq).trim(), item.slice(eq + 1).trim());
    }
    const cred = parseCredential(kv.get('Credential') ?? '');
    const sh = kv.get('SignedHeaders');
    const sig = kv.get('Signature');
    const amzDate = (req.headers['x-amz-date'] as string | undefined) ?? '';
    if (!cred || !sh || !sig || !/^\d{8}T\d{6}Z$/.test(amzDate)) return fail('AccessDenied', 'malformed Authorization');
    const payloadHash = (req.headers['x-amz-content-sha256'] as string | undefined) ?? '';
    if (!payloadHash) return fail('InvalidRequest', 'missing x-amz-content-sha256');
    return ok({
      ...cred,
      signedHeaders: sh.split(';'),
      signature: sig,
      amzDate,
      payloadHash,
      presigned: false,
      expires: 0,
    });
  }
  const q = new Map(query);
  if (q.get('X-Amz-Algorithm') === SIGV4_ALGORITHM) {
    const cred = parseCredential(q.get('X-Amz-Credential') ?? '');
    const amzDate = q.get('X-Amz-Date') ?? '';
    const expires = Number(q.get('X-Amz-Expires') ?? '');
    const sh = q.get('X-Amz-SignedHeaders');
    const sig = q.get('X-Amz-Signature');
    if (
      !cred ||
      !sh ||
      !sig ||
      !/^\d{8}T\d{6}Z$/.test(amzDate) ||
      !Number.isInteger(expires) ||
      expires < 1 ||
      expires > MAX_EXPIRES
    ) {
      return fail('AccessDenied', 'malformed presigned URL');
    }
    return ok({
      ...cred,
      signedHeaders: sh.split(';'),
      signature: sig,
      amzDate,
      payloadHash: UNSIGNED_PAYLOAD,
      presigned: true,
      expires,
    });
  }
  return fail('AccessDenied', 'request is not signed');
}

function amzDateMs(d: string): number {
  return Date.UTC(
    +d.slice(0, 4),
    +d.slice(4, 6) - 1,
    +d.slice(6, 8),
    +d.slice(9, 11),
    +d.slice(11, 13),
    +d.slice(13, 15),
  );
}

/**
 * Verify the request's signature. On success returns the payload hash the
 * client declared (a hex SHA-256, UNSIGNED-PAYLOAD or a STREAMING-* value)
 * for the body check.
 */
export function verifySigV4(
  req: SignedRequest,
  creds: readonly Credentials[],
  now = Date.now(),
): S3Result<SigV4Verified> {
  const qAt = req.url.indexOf('?');
  const rawPath = qAt < 0 ? req.url : req.url.slice(0, qAt);
  const query = queryPairs(qAt < 0 ? '' : req.url.slice(qAt + 1));
  if (!query) return fail('InvalidArgument', 'bad query string');
  const f = authFields(req, query);
  if (!f.ok) return f;
  const a = f.value;
  const cred = creds.find((c) => c.accessKeyId === a.accessKeyId);
  if (!cred) return fail('InvalidAccessKeyId');
  if (a.amzDate.slice(0, 8) !== a.date) return fail('SignatureDoesNotMatch', 'credential date differs from x-amz-date');
  const t = amzDateMs(a.amzDate);
  if (a.presigned) {
    if (now > t + a.expires * 1000) return fail('AccessDenied', 'request has expired');
    if (t - now > MAX_SKEW_MS) return fail('RequestTimeTooSkewed');
  } else if (Math.abs(now - t) > MAX_SKEW_MS) return fail('RequestTimeTooSkewed');
  if (!a.signedHeaders.includes('host')) return fail('AccessDenied', 'host must be signed');

  const segs = rawPath.split('/').map(safeDecode);
  if (segs.some((s) => s === null)) return fail('InvalidArgument', 'bad path');
  const canonicalUri = segs.map((s) => uriEncode(s!, false)).join('/') || '/';
  const canonicalQuery = query
    .filter(([k]) => !(a.presigned && k === 'X-Amz-Signature'))
    .map(([k, v]) => [uriEncode(k, false), uriEncode(v, false)] as const)
    .sort((x, y) => (x[0] < y[0] ? -1 : x[0] > y[0] ? 1 : x[1] < y[1] ? -1 : x[1] > y[1] ? 1 : 0))
    .map(([k, v]) => `${k}=${v}`)
    .join('&');
  const values = headerValues(req.rawHeaders);
  const canonicalHeaders = a.signedHeaders.map((h) => `${h}:${values.get(h) ?? ''}\n`).join('');
  const canonicalRequest = [
    req.method,
    canonicalUri,
    canonicalQuery,
    canonicalHeaders,
    a.signedHeaders.join(';'),
    a.payloadHash,
  ].join('\n');
  const scope = `${a.date}/${a.region}/${a.service}/aws4_request`;
  const stringToSign = [SIGV4_ALGORITHM, a.amzDate, scope, sha256hex(canonicalRequest)].join('\n');
  const key = signingKey(cred.secretAccessKey, a.date, a.region, a.service);
  const expected = createHmac('sha256', key).update(stringToSign, 'utf8').digest();
  if (!sameSignature(a.signature, expected)) return fail('SignatureDoesNotMatch');
  return ok({
    payloadHash: a.payloadHash,
    signature: expected.toString('hex'),
    signingKey: key,
    amzDate: a.amzDate,
    scope,
    signedHeaders: a.signedHeaders,
  });
}

/** Is `hex` the signature `expected`? Constant time over the bytes. */
function sameSignature(hex: string, expected: Buffer): boolean {
  if (!/^[0-9a-fA-F]{64}$/.test(hex)) return false;
  const given = Buffer.from(hex, 'hex');
  return given.length === expected.length && timingSafeEqual(given, expected);
}

/** Is the body signed chunk by chunk (its chunk signatures must be checked)? */
export function isSignedStream(payloadHash: string | undefined): boolean {
  return payloadHash === STREAMING_SIGNED || payloadHash === STREAMING_SIGNED_TRAILER;
}

/** Chunks whose signature one step checks at most (an HMAC each), besides SLICE.digest bytes of their data hashed. */
const CHUNKS_PER_STEP = 256;

/**
 * Check a streamed body's signatures: each chunk's, the final empty one
 * included, signs (previous signature, SHA-256 of its data) starting from the
 * request's; with a trailer, x-amz-trailer-signature signs (the final chunk's
 * signature, SHA-256 of the trailer lines). A missing signature is a mismatch.
 * A body of a million chunks, or one chunk of a gigabyte, is checked a slice
 * per step through the pacer.
 */
export async function verifyChunkSignatures(
  v: SigV4Verified,
  body: ChunkedBody,
  p: Pacer = pacer,
): Promise<S3Result<void>> {
  let previous = v.signature;
  let i = 0;
  let at = 0;
  let hash: Hash | null = null;
  let result: S3Result<void> | null = null;
  await p.start(() => {
    let bytes = 0;
    for (let n = 0; n < CHUNKS_PER_STEP && i < body.chunkCount; n++) {
      const chunk = body.chunk(i);
      hash ??= createHash('sha256');
      const take = Math.min(chunk.length - at, SLICE.digest - bytes);
      hash.update(chunk.subarray(at, at + take));
      at += take;
      bytes += take;
      if (at < chunk.length) return false; // the rest of this chunk next step
      const toSign = [CHUNK_ALGORITHM, v.amzDate, v.scope, previous, EMPTY_SHA256, hash.digest('hex')].join('\n');
      const expected = createHmac('sha256', v.signingKey).update(toSign, 'utf8').digest();
      if (!sameSignature(body.chunkSignature(i), expected)) {
        result = fail('SignatureDoesNotMatch', `chunk ${i + 1}`);
        return true;
      }
      previous = expected.toString('hex');
      hash = null;
      at = 0;
      i++;
    }
    return i >= body.chunkCount;
  });
  if (result) return result;
  if (v.payloadHash === STREAMING_SIGNED_TRAILER) {
    const toSign = [TRAILER_ALGORITHM, v.amzDate, v.scope, previous, sha256hex(body.trailerText)].join('\n');
    const expected = createHmac('sha256', v.signingKey).update(toSign, 'utf8').digest();
    if (!sameSignature(body.trailerSignature, expected)) return fail('SignatureDoesNotMatch', 'trailer');
  }
  return ok(undefined);
}
