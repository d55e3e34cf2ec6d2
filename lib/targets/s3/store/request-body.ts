// Request bodies of the S3 store: read within the server's body budget and
// a request's own cap (with room for aws-chunked framing), decoded, and every
// declared digest and checksum checked, in slices through the pacer.

import * as http from 'http';
import { concatPaced, digestPaced } from '../../pace';
import { checksumChecks, CHECKSUMS, md5Digest, RunningDigest } from './checksums';
import { decodeAwsChunkedPaced, isAwsChunked } from './chunked';
import type { BodyBudget, Ctx } from './context';
import { fail, ok, S3Result } from './errors';
import { isSignedStream, verifyChunkSignatures } from './sigv4';

/** Room for aws-chunked framing on top of the largest payload: chunk headers and trailers. */
const CHUNK_OVERHEAD = 64 * 1024;
const CHUNK_OVERHEAD_PER_MIB = 256;

// Request bodies.

/** Bytes on the wire for a payload of at most `limit` bytes: room for aws-chunked framing. */
function wireLimit(limit: number): number {
  return limit + CHUNK_OVERHEAD + Math.ceil(limit / (1 << 20)) * CHUNK_OVERHEAD_PER_MIB;
}

/** The whole request body, at most `limit` bytes on the wire, within the server's body budget (SlowDown past it). */
export function readRaw(req: http.IncomingMessage, limit: number, budget: BodyBudget): Promise<S3Result<Buffer>> {
  const declared = req.headers['content-length'];
  if (declared !== undefined && Number(declared) > limit) return Promise.resolve(fail('EntityTooLarge'));
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    let n = 0;
    let done = false;
    const finish = (r: S3Result<Buffer>): void => {
      if (done) return;
      done = true;
      req.off('data', onData);
      budget.give(n); // read out: what is kept is the store's to count now
      resolve(r);
    };
    const onData = (c: Buffer): void => {
      if (n + c.length > limit) {
        finish(fail('EntityTooLarge'));
        return;
      }
      if (!budget.take(c.length)) {
        finish(fail('SlowDown', 'too many request bodies in progress'));
        return;
      }
      n += c.length;
      chunks.push(c);
    };
    req.on('data', onData);
    // Joined a slice per step: a body may be gigabytes.
    req.once('end', () => {
      void concatPaced(chunks).then(
        (b) => finish(ok(b)),
        () => finish(fail('InternalError', 'body')),
      );
    });
    req.once('aborted', () => finish(fail('IncompleteBody')));
    req.once('error', () => finish(fail('IncompleteBody')));
  });
}

/** A request's payload, checked; `md5` is its hex MD5 (an object's or part's ETag) when asked for. */
interface Payload {
  readonly data: Buffer;
  readonly md5: string | null;
}

/**
 * The payload of a PUT or POST: aws-chunked decoded, every declared digest
 * and checksum checked. A body may be as large as maxpart (gigabytes): the
 * decoding and the digests (MD5 at ~2.5 ms per MiB) run a slice per step
 * through the pacer, all digests in one pass.
 */
export async function readPayload(ctx: Ctx, limit: number, wantMd5 = false): Promise<S3Result<Payload>> {
  const raw = await readRaw(ctx.req, wireLimit(limit), ctx.budget);
  if (!raw.ok) return raw;
  const h = ctx.req.headers;
  let data = raw.value;
  let trailers: ReadonlyMap<string, string> = new Map();
  let sha256: RunningDigest | null = null;
  if (isAwsChunked(h['content-encoding'], ctx.payloadHash)) {
    const dec = await decodeAwsChunkedPaced(data, limit);
    if (!dec) return fail('IncompleteBody', 'malformed aws-chunked body');
    if (ctx.signed && isSignedStream(ctx.payloadHash)) {
      const sig = await verifyChunkSignatures(ctx.signed, dec);
      if (!sig.ok) return sig;
    }
    data = dec.data;
    trailers = dec.trailers;
    const declared = h['x-amz-decoded-content-length'];
    if (declared !== undefined && Number(declared) !== data.length)
      return fail('IncompleteBody', 'x-amz-decoded-content-length');
  } else {
    if (data.length > limit) return fail('EntityTooLarge');
    if (ctx.payloadHash && /^[0-9a-f]{64}$/.test(ctx.payloadHash)) sha256 = CHECKSUMS.get('sha256')!();
  }
  const contentMd5 = h['content-md5'];
  const md5 = wantMd5 || typeof contentMd5 === 'string' ? md5Digest() : null;
  const checks = [...checksumChecks(Object.entries(h)), ...checksumChecks(trailers), ...checksumChecks(ctx.query)];
  // One running digest per algorithm, however many fields name it.
  const running = new Map<string, RunningDigest>();
  for (const c of checks) if (!running.has(c.algorithm)) running.set(c.algorithm, CHECKSUMS.get(c.algorithm)!());
  const all = [...(sha256 ? [sha256] : []), ...(md5 ? [md5] : []), ...running.values()];
  await digestPaced(data, all);
  if (sha256 && Buffer.from(sha256.digest(), 'base64').toString('hex') !== ctx.payloadHash)
    return fail('XAmzContentSHA256Mismatch');
  const md5b64 = md5 ? md5.digest() : null;
  if (typeof contentMd5 === 'string' && md5b64 !== contentMd5.trim()) return fail('BadDigest', 'Content-MD5');
  const values = new Map<string, string>();
  for (const [algorithm, d] of running) values.set(algorithm, d.digest());
  for (const c of checks) if (values.get(c.algorithm) !== c.expected) return fail('BadDigest', c.field);
  return ok({ data, md5: md5b64 === null ? null : Buffer.from(md5b64, 'base64').toString('hex') });
}
