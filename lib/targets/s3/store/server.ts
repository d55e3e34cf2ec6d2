// S3 semantics on Node's http.Server: the request handler of the store.
// Path-style (/bucket/key) and virtual-host (bucket.host/key) addressing of
// the one configured bucket; list buckets, ListObjects (V2 with continuation
// tokens, and V1), HEAD/GET/PUT bucket checks, object PUT/GET/HEAD/DELETE
// with MD5 ETags and user metadata, ranged GET (206/416), multipart uploads
// (create, upload part, complete, abort, list parts), DeleteObjects, XML
// errors, aws-chunked bodies with their trailing checksums, x-amz-checksum-*
// and Content-MD5 checks, and SigV4 when credentials are configured. GET
// and PUT with an `x-amz-rdma-token` header move the data through the RDMA
// hook (lib/targets/s3/rdma.ts) instead of the body. Every client mistake is
// an S3 error document; nothing a client sends throws.

import { randomBytes } from 'crypto';
import * as http from 'http';
import { replyValue } from '../token';
import {
  BodyBudget,
  Ctx,
  quoted,
  RDMA_BYTES_HEADER,
  RDMA_REPLY_HEADER,
  RDMA_TOKEN_HEADER,
  refuse,
  S3ServerOptions,
  sendEmpty,
  sendError,
  sendXml,
} from './context';
import { fail, ok, S3Error, s3err, S3Result } from './errors';
import { readPayload, readRaw } from './request-body';
import { MAX_LIST_KEYS, ObjectStore } from './objects';
import { queryPairs, SigV4Verified, uriEncode, verifySigV4 } from './sigv4';
import { MAX_COMPLETE_BODY, MAX_DELETE_BODY, parseCompleteMultipart, parseDeleteObjects } from './xml-requests';
import { xmlDocument, xmlDocumentPaced, XmlNode } from './xml-writer';
import { objectHeaders, parseRange, rdmaErrorReply, userMetadata } from './object-headers';

const DEFAULT_CONTENT_TYPE = 'binary/octet-stream';
const MAX_PARTS_LISTED = 1000;
/** A body no call here reads (CreateMultipartUpload has none): read and dropped, up to this much. */
const MAX_IGNORED_BODY = 8 * 1024;
/** GET object's response header overrides (?response-content-type=...): the header is the name without `response-`. */
const RESPONSE_OVERRIDES = [
  'response-content-type',
  'response-content-language',
  'response-expires',
  'response-cache-control',
  'response-content-disposition',
  'response-content-encoding',
] as const;
/**
 * Query parameters the store understands. Anything else names an S3 call it
 * does not implement (?tagging, ?acl, ?versioning, ?versionId=...), answered
 * 501 NotImplemented rather than mistaken for a plain GET or PUT.
 */
const KNOWN_QUERY = new Set([
  'list-type',
  'prefix',
  'delimiter',
  'max-keys',
  'continuation-token',
  'start-after',
  'encoding-type',
  'marker',
  'fetch-owner',
  'location',
  'uploads',
  'delete',
  'uploadId',
  'partNumber',
  'part-number-marker',
  'max-parts',
  'x-id',
  'X-Amz-Algorithm',
  'X-Amz-Credential',
  'X-Amz-Date',
  'X-Amz-Expires',
  'X-Amz-SignedHeaders',
  'X-Amz-Signature',
  'X-Amz-Security-Token',
  'X-Amz-Content-Sha256',
  'x-amz-checksum-mode',
  'x-amz-sdk-checksum-algorithm',
  // A presigned PUT carries its checksum in the query: checked like the header (readPayload).
  'x-amz-checksum-crc32',
  'x-amz-checksum-crc32c',
  'x-amz-checksum-sha1',
  'x-amz-checksum-sha256',
  'x-amz-checksum-crc64nvme',
  ...RESPONSE_OVERRIDES,
]);

/**
 * Where a request came from. The guest's own wire is the guest reaching its
 * own memory; the host listener is anyone on the host (or past it), so the
 * token path there needs a signature that covers the token.
 */
type RequestOrigin = 'guest' | 'host';

/** The handler: http.Server calls it with (req, res), which is the guest's wire; the host listener passes 'host'. */
export type S3RequestHandler = (req: http.IncomingMessage, res: http.ServerResponse, origin?: RequestOrigin) => void;

/** An http.Server answering S3 for `opts.store` (requests taken as the guest's). */
export function createS3Server(opts: S3ServerOptions): http.Server {
  return http.createServer(s3Handler(opts));
}

/**
 * The request listener alone, for a server built elsewhere. Pipelined
 * requests on one connection run one after another: http.Server hands them
 * out at once, and a GET must not overtake the PUT before it (RFC 9112 9.3.2:
 * only safe methods may be processed in parallel).
 */
export function s3Handler(opts: S3ServerOptions): S3RequestHandler {
  const inFlight = new WeakMap<object, Promise<void>>();
  const budget = new BodyBudget(opts.store.limits.size);
  return (req, res, origin = 'guest') => {
    const conn = req.socket;
    const run = (): Promise<void> =>
      handle(req, res, opts, budget, origin).catch((e: unknown) => {
        // A safety net for our own bugs, not control flow.
        if (!res.headersSent)
          sendError(res, req.method ?? 'GET', s3err('InternalError', String(e)), req.url ?? '/', 'internal');
        else res.destroy();
      });
    const before = inFlight.get(conn);
    const mine = before ? before.then(run) : run();
    inFlight.set(conn, mine);
    void mine.finally(() => {
      if (inFlight.get(conn) === mine) inFlight.delete(conn);
    });
  };
}

function requestBucketAndKey(
  req: http.IncomingMessage,
  store: ObjectStore,
  rawPath: string,
): { bucket: string; key: string } | null {
  const segs = rawPath.split('/').slice(1);
  let decoded: string[];
  try {
    decoded = segs.map((s) => decodeURIComponent(s));
  } catch {
    return null;
  }
  const host = (req.headers.host ?? '').split(':')[0]!.toLowerCase();
  if (host.startsWith(`${store.bucket}.`)) return { bucket: store.bucket, key: decoded.join('/') };
  return { bucket: decoded[0] ?? '', key: decoded.slice(1).join('/') };
}

/**
 * Why a request naming guest memory by token is refused, or null. On the
 * host listener, and on the guest's wire once credentials are set, the
 * token must be under the signature: an unsigned header added to a
 * presigned URL would otherwise reach guest memory with someone else's
 * signature.
 */
function tokenRefusal(origin: RequestOrigin, signed: SigV4Verified | null, credentialsSet: boolean): S3Error | null {
  if (signed)
    return signed.signedHeaders.includes(RDMA_TOKEN_HEADER)
      ? null
      : s3err('AccessDenied', `${RDMA_TOKEN_HEADER} must be a signed header`);
  if (origin === 'host' || credentialsSet)
    return s3err(
      'AccessDenied',
      `${RDMA_TOKEN_HEADER} on the host listener needs a SigV4 request that signs it (ERNIC_S3_ACCESS_KEY, ERNIC_S3_SECRET_KEY)`,
    );
  return null;
}

/** Request ids: unique, not secret (as S3's are 16 hex digits): a random prefix per process and a counter. */
const REQUEST_ID_PREFIX = randomBytes(4).toString('hex').toUpperCase();
let requestCount = 0;

function nextRequestId(): string {
  requestCount = (requestCount + 1) >>> 0;
  return REQUEST_ID_PREFIX + requestCount.toString(16).toUpperCase().padStart(8, '0');
}

async function handle(
  req: http.IncomingMessage,
  res: http.ServerResponse,
  opts: S3ServerOptions,
  budget: BodyBudget,
  origin: RequestOrigin,
): Promise<void> {
  const requestId = nextRequestId();
  const url = req.url ?? '/';
  const qAt = url.indexOf('?');
  const rawPath = qAt < 0 ? url : url.slice(0, qAt);
  const pairs = queryPairs(qAt < 0 ? '' : url.slice(qAt + 1));
  const bk = requestBucketAndKey(req, opts.store, rawPath);
  const method = req.method ?? 'GET';
  if (!pairs || !bk) {
    sendError(res, method, s3err('InvalidArgument', 'bad request target'), rawPath, requestId);
    return;
  }
  const ctx: Ctx = {
    req,
    res,
    opts,
    requestId,
    query: new Map(pairs),
    bucket: bk.bucket,
    key: bk.key,
    resource: `/${bk.bucket}${bk.key ? `/${bk.key}` : ''}`,
    payloadHash: undefined,
    signed: null,
    budget,
  };
  if (opts.credentials && opts.credentials.length > 0) {
    const v = verifySigV4(
      { method, url, headers: req.headers, rawHeaders: req.rawHeaders },
      opts.credentials,
      opts.now?.(),
    );
    if (!v.ok) return refuse(ctx, v.error);
    ctx.payloadHash = v.value.payloadHash;
    ctx.signed = v.value;
  } else {
    ctx.payloadHash = req.headers['x-amz-content-sha256'] as string | undefined;
  }
  if (req.headers[RDMA_TOKEN_HEADER] !== undefined) {
    const refusal = tokenRefusal(origin, ctx.signed, (opts.credentials?.length ?? 0) > 0);
    if (refusal) return refuse(ctx, refusal, rdmaErrorReply(refusal));
  }
  for (const name of ctx.query.keys()) {
    if (!KNOWN_QUERY.has(name)) return refuse(ctx, s3err('NotImplemented', `?${name}`));
  }
  if (ctx.bucket === '') return listBuckets(ctx);
  if (ctx.bucket !== opts.store.bucket) {
    if (method === 'PUT' && ctx.key === '') return refuse(ctx, s3err('NotImplemented', 'this store has one bucket'));
    return refuse(ctx, s3err('NoSuchBucket'));
  }
  return ctx.key === '' ? bucketOp(ctx) : objectOp(ctx);
}

// GET / : the one bucket.

function listBuckets(ctx: Ctx): void {
  if (ctx.req.method !== 'GET') return refuse(ctx, s3err('MethodNotAllowed'));
  const s = ctx.opts.store;
  sendXml(
    ctx,
    200,
    xmlDocument('ListAllMyBucketsResult', {
      Owner: { ID: 'ernic', DisplayName: 'ernic' },
      Buckets: { Bucket: [{ Name: s.bucket, CreationDate: s.created.toISOString() }] },
    }),
  );
}

// Bucket operations.

async function bucketOp(ctx: Ctx): Promise<void> {
  const q = ctx.query;
  switch (ctx.req.method) {
    case 'HEAD':
      return sendEmpty(ctx, 200, { 'x-amz-bucket-region': 'us-east-1' });
    case 'PUT':
      return refuse(ctx, s3err('BucketAlreadyOwnedByYou'));
    case 'GET':
      if (q.has('location')) return sendXml(ctx, 200, xmlDocument('LocationConstraint', {}));
      if (q.has('uploads')) return refuse(ctx, s3err('NotImplemented', 'ListMultipartUploads'));
      return listObjects(ctx);
    case 'POST':
      if (q.has('delete')) return deleteObjects(ctx);
      return refuse(ctx, s3err('MethodNotAllowed'));
    default:
      return refuse(ctx, s3err('MethodNotAllowed'));
  }
}

async function listObjects(ctx: Ctx): Promise<void> {
  const q = ctx.query;
  const v2 = q.get('list-type') === '2';
  const prefix = q.get('prefix') ?? '';
  const delimiter = q.get('delimiter') ?? '';
  const mk = q.get('max-keys');
  const maxKeys = mk === undefined ? MAX_LIST_KEYS : Number(mk);
  if (!Number.isInteger(maxKeys) || maxKeys < 0) return refuse(ctx, s3err('InvalidArgument', 'max-keys'));
  const urlEncode = q.get('encoding-type') === 'url';
  if (q.has('encoding-type') && !urlEncode) return refuse(ctx, s3err('InvalidArgument', 'encoding-type'));
  const enc = (s: string): string => (urlEncode ? uriEncode(s, true) : s);
  // The page's keys and prefixes encoded as the paced writer reaches them (1,000 keys of 1 KiB: ~20 ms in one go).
  const encLater = (s: string): XmlNode => (urlEncode ? () => uriEncode(s, true) : s);
  let after = '';
  const token = q.get('continuation-token');
  if (v2) {
    if (token !== undefined) {
      after = Buffer.from(token, 'base64url').toString('utf8');
      if (token === '' || Buffer.from(after, 'utf8').toString('base64url') !== token)
        return refuse(ctx, s3err('InvalidArgument', 'continuation-token'));
    } else after = q.get('start-after') ?? '';
  } else after = q.get('marker') ?? '';
  const page = ctx.opts.store.list({ prefix, delimiter, maxKeys: Math.min(maxKeys, MAX_LIST_KEYS), after });
  const body: Record<string, XmlNode> = { Name: ctx.bucket, Prefix: enc(prefix) };
  if (v2) {
    if (token !== undefined) body['ContinuationToken'] = token;
    if (q.has('start-after')) body['StartAfter'] = enc(q.get('start-after')!);
    body['KeyCount'] = page.contents.length + page.commonPrefixes.length;
  } else body['Marker'] = enc(after);
  body['MaxKeys'] = maxKeys;
  if (delimiter) body['Delimiter'] = enc(delimiter);
  if (urlEncode) body['EncodingType'] = 'url';
  body['IsTruncated'] = page.truncated;
  if (page.truncated) {
    if (v2) body['NextContinuationToken'] = Buffer.from(page.lastKey, 'utf8').toString('base64url');
    else body['NextMarker'] = enc(page.lastKey);
  }
  body['Contents'] = page.contents.map((o) => ({
    Key: encLater(o.key),
    LastModified: o.lastModified.toISOString(),
    ETag: quoted(o.etag),
    Size: o.data.length,
    StorageClass: 'STANDARD',
  }));
  body['CommonPrefixes'] = page.commonPrefixes.map((p) => ({ Prefix: encLater(p) }));
  sendXml(ctx, 200, await xmlDocumentPaced('ListBucketResult', body));
}

/**
 * The XML body of DeleteObjects or CompleteMultipartUpload, at most `cap`
 * bytes: a bigger one cannot be a document S3 accepts (MalformedXML, as S3
 * answers more than 1,000 keys), refused before it is read when declared.
 */
async function readXmlBody(ctx: Ctx, cap: number): Promise<S3Result<Buffer>> {
  const declared = Number(
    ctx.req.headers['x-amz-decoded-content-length'] ?? ctx.req.headers['content-length'] ?? Number.NaN,
  );
  if (Number.isSafeInteger(declared) && declared > cap) return fail('MalformedXML', `a body of more than ${cap} bytes`);
  const body = await readPayload(ctx, cap);
  if (!body.ok)
    return body.error.code === 'EntityTooLarge' ? fail('MalformedXML', `a body of more than ${cap} bytes`) : body;
  return ok(body.value.data);
}

async function deleteObjects(ctx: Ctx): Promise<void> {
  const body = await readXmlBody(ctx, MAX_DELETE_BODY);
  if (!body.ok) return refuse(ctx, body.error);
  const d = await parseDeleteObjects(body.value);
  if (!d) return refuse(ctx, s3err('MalformedXML'));
  for (const k of d.keys) await ctx.opts.store.delete(k.toString('utf8'));
  sendXml(
    ctx,
    200,
    await xmlDocumentPaced('DeleteResult', { Deleted: d.quiet ? [] : d.keys.map((k) => ({ Key: k })) }),
  );
}

// Object operations.

async function objectOp(ctx: Ctx): Promise<void> {
  const q = ctx.query;
  const uploadId = q.get('uploadId');
  switch (ctx.req.method) {
    case 'GET':
      if (uploadId !== undefined) return listParts(ctx, uploadId);
      return getObject(ctx, false);
    case 'HEAD':
      return getObject(ctx, true);
    case 'PUT':
      if (ctx.req.headers['x-amz-copy-source'] !== undefined) return refuse(ctx, s3err('NotImplemented', 'CopyObject'));
      if (uploadId !== undefined) return uploadPart(ctx, uploadId);
      return putObject(ctx);
    case 'DELETE':
      if (uploadId !== undefined) {
        const r = await ctx.opts.store.abort(uploadId, ctx.key);
        return r.ok ? sendEmpty(ctx, 204) : refuse(ctx, r.error);
      }
      await ctx.opts.store.delete(ctx.key);
      return sendEmpty(ctx, 204);
    case 'POST':
      if (q.has('uploads')) return createUpload(ctx);
      if (uploadId !== undefined) return completeUpload(ctx, uploadId);
      return refuse(ctx, s3err('MethodNotAllowed'));
    default:
      return refuse(ctx, s3err('MethodNotAllowed'));
  }
}

async function getObject(ctx: Ctx, head: boolean): Promise<void> {
  const o = ctx.opts.store.get(ctx.key);
  if (!o) return refuse(ctx, s3err('NoSuchKey'));
  const range = parseRange(ctx.req.headers.range, o.data.length);
  if (range === null) return refuse(ctx, s3err('InvalidRange'), { 'Content-Range': `bytes */${o.data.length}` });
  const [start, end] = range === 'all' ? [0, o.data.length - 1] : range;
  const slice = o.data.subarray(start, end + 1);
  const headers: Record<string, string | number> = objectHeaders(o);
  const status = range === 'all' ? 200 : 206;
  if (status === 206) headers['Content-Range'] = `bytes ${start}-${end}/${o.data.length}`;
  const token = ctx.req.headers[RDMA_TOKEN_HEADER];
  if (typeof token === 'string' && !head) {
    if (!ctx.opts.rdma) return refuse(ctx, s3err('NotImplemented', 'no RDMA data path'));
    const r = await ctx.opts.rdma.write(
      token,
      slice.subarray(0, Math.min(slice.length, ctx.opts.store.limits.maxpart)),
    );
    if (!r.ok) return refuse(ctx, r.error, rdmaErrorReply(r.error));
    headers[RDMA_REPLY_HEADER] = replyValue(status, r.value.serverToken);
    headers[RDMA_BYTES_HEADER] = r.value.bytes;
    headers['Content-Length'] = 0;
    return sendEmpty(ctx, status, headers);
  }
  for (const q of RESPONSE_OVERRIDES) {
    const v = ctx.query.get(q);
    if (v !== undefined) headers[q.slice('response-'.length)] = v;
  }
  headers['Content-Length'] = slice.length;
  ctx.res.statusCode = status;
  ctx.res.setHeader('x-amz-request-id', ctx.requestId);
  for (const [k, v] of Object.entries(headers)) ctx.res.setHeader(k, v);
  ctx.res.end(head ? undefined : slice);
}

async function putObject(ctx: Ctx): Promise<void> {
  const meta = userMetadata(ctx.req.headers);
  if (!meta.ok) return refuse(ctx, meta.error);
  const store = ctx.opts.store;
  const contentType = (ctx.req.headers['content-type'] as string | undefined) ?? DEFAULT_CONTENT_TYPE;
  const token = ctx.req.headers[RDMA_TOKEN_HEADER];
  let data: Buffer;
  let md5: string | null = null;
  const extra: Record<string, string | number> = {};
  if (typeof token === 'string') {
    const r = await readByToken(ctx, token);
    if (!r.ok) return;
    data = r.value.data;
    Object.assign(extra, r.value.headers);
  } else {
    if (ctx.req.headers['content-length'] === undefined && ctx.req.headers['transfer-encoding'] === undefined) {
      return refuse(ctx, s3err('MissingContentLength'));
    }
    // Refuse before buffering a body that could not be kept.
    const declared = Number(
      ctx.req.headers['x-amz-decoded-content-length'] ?? ctx.req.headers['content-length'] ?? Number.NaN,
    );
    if (Number.isSafeInteger(declared)) {
      if (declared > store.limits.maxpart) return refuse(ctx, s3err('EntityTooLarge'));
      if (!store.roomFor(ctx.key, declared)) return refuse(ctx, s3err('InsufficientStorage'));
    }
    const body = await readPayload(ctx, store.limits.maxpart, true);
    if (!body.ok) return refuse(ctx, body.error);
    data = body.value.data;
    md5 = body.value.md5;
  }
  const r = await store.put(ctx.key, data, contentType, meta.value, md5 ?? undefined);
  if (!r.ok) return refuse(ctx, r.error);
  sendEmpty(ctx, 200, { ETag: quoted(r.value.etag), ...extra });
}

/**
 * The payload of a PUT or UploadPart with an RDMA token: read out of the
 * client's buffer, capped by the token's length, maxpart and the declared
 * size (x-amz-decoded-content-length) when given. On a refusal the answer is
 * already sent.
 */
async function readByToken(
  ctx: Ctx,
  token: string,
): Promise<S3Result<{ data: Buffer; headers: Record<string, string | number> }>> {
  const store = ctx.opts.store;
  if (!ctx.opts.rdma) {
    refuse(ctx, s3err('NotImplemented', 'no RDMA data path'));
    return fail('NotImplemented');
  }
  const body = await readRaw(ctx.req, 0, ctx.budget); // the data comes from the client's buffer, not the body
  if (!body.ok) {
    refuse(ctx, s3err('InvalidRequest', 'a request with an RDMA token carries no body'));
    return fail('InvalidRequest');
  }
  const declared = Number(ctx.req.headers['x-amz-decoded-content-length'] ?? Number.NaN);
  const max =
    Number.isSafeInteger(declared) && declared >= 0 ? Math.min(declared, store.limits.maxpart) : store.limits.maxpart;
  const r = await ctx.opts.rdma.read(token, max);
  if (!r.ok) {
    refuse(ctx, r.error, rdmaErrorReply(r.error));
    return r;
  }
  return ok({
    data: r.value.data,
    headers: { [RDMA_REPLY_HEADER]: replyValue(200, r.value.serverToken), [RDMA_BYTES_HEADER]: r.value.data.length },
  });
}

async function createUpload(ctx: Ctx): Promise<void> {
  const meta = userMetadata(ctx.req.headers);
  if (!meta.ok) return refuse(ctx, meta.error);
  const body = await readRaw(ctx.req, MAX_IGNORED_BODY, ctx.budget);
  if (!body.ok) return refuse(ctx, body.error);
  const contentType = (ctx.req.headers['content-type'] as string | undefined) ?? DEFAULT_CONTENT_TYPE;
  const r = await ctx.opts.store.createUpload(ctx.key, contentType, meta.value);
  if (!r.ok) return refuse(ctx, r.error);
  sendXml(
    ctx,
    200,
    xmlDocument('InitiateMultipartUploadResult', { Bucket: ctx.bucket, Key: ctx.key, UploadId: r.value }),
  );
}

async function uploadPart(ctx: Ctx, uploadId: string): Promise<void> {
  const n = Number(ctx.query.get('partNumber'));
  if (!ctx.opts.store.upload(uploadId, ctx.key)) return refuse(ctx, s3err('NoSuchUpload'));
  if (!Number.isInteger(n)) return refuse(ctx, s3err('InvalidArgument', 'partNumber'));
  // A part may come by token too: read out of the client's buffer like a PUT's object.
  const token = ctx.req.headers[RDMA_TOKEN_HEADER];
  let data: Buffer;
  let md5: string | null = null;
  let extra: Record<string, string | number> = {};
  if (typeof token === 'string') {
    const t = await readByToken(ctx, token);
    if (!t.ok) return;
    data = t.value.data;
    extra = t.value.headers;
  } else {
    const body = await readPayload(ctx, ctx.opts.store.limits.maxpart, true);
    if (!body.ok) return refuse(ctx, body.error);
    data = body.value.data;
    md5 = body.value.md5;
  }
  const r = await ctx.opts.store.uploadPart(uploadId, ctx.key, n, data, md5 ?? undefined);
  if (!r.ok) return refuse(ctx, r.error);
  sendEmpty(ctx, 200, { ETag: quoted(r.value.etag), ...extra });
}

async function completeUpload(ctx: Ctx, uploadId: string): Promise<void> {
  const body = await readXmlBody(ctx, MAX_COMPLETE_BODY);
  if (!body.ok) return refuse(ctx, body.error);
  const parts = await parseCompleteMultipart(body.value);
  if (!parts) return refuse(ctx, s3err('MalformedXML'));
  const r = await ctx.opts.store.complete(uploadId, ctx.key, parts);
  if (!r.ok) return refuse(ctx, r.error);
  const host = ctx.req.headers.host ?? 'localhost';
  sendXml(
    ctx,
    200,
    xmlDocument('CompleteMultipartUploadResult', {
      Location: `http://${host}${ctx.resource}`,
      Bucket: ctx.bucket,
      Key: ctx.key,
      ETag: quoted(r.value.etag),
    }),
  );
}

async function listParts(ctx: Ctx, uploadId: string): Promise<void> {
  const r = ctx.opts.store.listParts(uploadId, ctx.key);
  if (!r.ok) return refuse(ctx, r.error);
  const marker = Number(ctx.query.get('part-number-marker') ?? '0');
  const max = Math.min(Number(ctx.query.get('max-parts') ?? String(MAX_PARTS_LISTED)), MAX_PARTS_LISTED);
  if (!Number.isInteger(marker) || marker < 0 || !Number.isInteger(max) || max < 0)
    return refuse(ctx, s3err('InvalidArgument', 'part-number-marker or max-parts'));
  const after = r.value.parts.filter((p) => p.partNumber > marker);
  const page = after.slice(0, max);
  const truncated = after.length > page.length;
  sendXml(
    ctx,
    200,
    await xmlDocumentPaced('ListPartsResult', {
      Bucket: ctx.bucket,
      Key: ctx.key,
      UploadId: uploadId,
      PartNumberMarker: marker,
      NextPartNumberMarker: page.length ? page[page.length - 1]!.partNumber : marker,
      MaxParts: max,
      IsTruncated: truncated,
      StorageClass: 'STANDARD',
      Part: page.map((p) => ({
        PartNumber: p.partNumber,
        LastModified: p.lastModified.toISOString(),
        ETag: quoted(p.etag),
        Size: p.data.length,
      })),
    }),
  );
}
