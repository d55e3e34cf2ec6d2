// What every S3 request handler shares: the server's options (the store,
// credentials, the RDMA hook), the request context, the body budget over all
// connections, and the ways to answer (an S3 error document, XML, empty).

import * as http from 'http';
import { S3_ERRORS, S3Error, S3Result } from './errors';
import type { ObjectStore } from './objects';
import type { Credentials, SigV4Verified } from './sigv4';
import { xmlPlain } from './xml-writer';

/** What the RDMA token path offers the handler (implemented by lib/targets/s3/rdma.ts); a transfer may take several turns. */
export interface RdmaHook {
  /** GET: write `data` into the client's buffer named by the token header; the bytes moved and the server's token (hex). */
  write(tokenHeader: string, data: Buffer): Promise<S3Result<{ bytes: number; serverToken: string }>>;
  /** PUT: read the client's buffer named by the token header (at most `max` bytes). */
  read(tokenHeader: string, max: number): Promise<S3Result<{ data: Buffer; serverToken: string }>>;
}

export interface S3ServerOptions {
  readonly store: ObjectStore;
  /** When non-empty, every request must carry a valid SigV4 signature by one of these. */
  readonly credentials?: readonly Credentials[];
  readonly rdma?: RdmaHook;
  /** Clock for signature skew checks (tests). */
  readonly now?: () => number;
}

export const RDMA_TOKEN_HEADER = 'x-amz-rdma-token';
export const RDMA_REPLY_HEADER = 'x-amz-rdma-reply';
export const RDMA_BYTES_HEADER = 'x-amz-rdma-bytes';

/**
 * Bytes of request bodies being read at once, over every connection of one
 * server: at most the store's size. Each request's own cap is maxpart, but
 * eight guest connections (and any host clients) uploading together would
 * otherwise hold eight times that before the store's size is checked.
 */
export class BodyBudget {
  #left: number;

  constructor(bytes: number) {
    this.#left = bytes;
  }

  take(n: number): boolean {
    if (n > this.#left) return false;
    this.#left -= n;
    return true;
  }

  give(n: number): void {
    this.#left += n;
  }
}

export interface Ctx {
  readonly req: http.IncomingMessage;
  readonly res: http.ServerResponse;
  readonly opts: S3ServerOptions;
  readonly requestId: string;
  readonly query: Map<string, string>;
  readonly bucket: string;
  readonly key: string;
  readonly resource: string;
  /** The declared payload hash once the signature was verified. */
  payloadHash: string | undefined;
  /** The verified signature, when credentials are configured (chunk signatures chain from it). */
  signed: SigV4Verified | null;
  readonly budget: BodyBudget;
}

// Responses.

export function sendError(
  res: http.ServerResponse,
  method: string,
  err: S3Error,
  resource: string,
  requestId: string,
  extra?: Record<string, string>,
): void {
  const e = S3_ERRORS[err.code];
  res.statusCode = e.status;
  res.setHeader('x-amz-request-id', requestId);
  if (extra) for (const [k, v] of Object.entries(extra)) res.setHeader(k, v);
  if (method === 'HEAD') {
    res.end();
    return;
  }
  const body = xmlPlain('Error', {
    Code: err.code,
    Message: err.detail ? `${e.message} (${err.detail})` : e.message,
    Resource: resource,
    RequestId: requestId,
  });
  res.setHeader('Content-Type', 'application/xml');
  res.setHeader('Content-Length', body.length);
  res.end(body.toString('utf8')); // a string goes out in one write with the headers (one segment on the guest's TCP)
}

export function refuse(ctx: Ctx, err: S3Error, extra?: Record<string, string>): void {
  // An unread request body would be taken as the next request: when one is still coming, close after the answer.
  if (!ctx.req.complete) ctx.res.setHeader('Connection', 'close');
  sendError(ctx.res, ctx.req.method ?? 'GET', err, ctx.resource, ctx.requestId, extra);
  if (!ctx.req.complete) ctx.req.resume();
}

/** An XML document, whole or in pieces (written one after the other, never joined). */
export function sendXml(ctx: Ctx, status: number, xml: Buffer | readonly Buffer[]): void {
  const pieces = Buffer.isBuffer(xml) ? [xml] : xml;
  let length = 0;
  for (const p of pieces) length += p.length;
  ctx.res.statusCode = status;
  ctx.res.setHeader('x-amz-request-id', ctx.requestId);
  ctx.res.setHeader('Content-Type', 'application/xml');
  ctx.res.setHeader('Content-Length', length);
  // One piece as a string, which goes out in one write with the headers (one segment on the guest's TCP, as before).
  if (pieces.length === 1) return void ctx.res.end(pieces[0]!.toString('utf8'));
  for (let i = 0; i + 1 < pieces.length; i++) ctx.res.write(pieces[i]);
  ctx.res.end(pieces[pieces.length - 1]);
}

export function sendEmpty(ctx: Ctx, status: number, headers: Record<string, string | number> = {}): void {
  ctx.res.statusCode = status;
  ctx.res.setHeader('x-amz-request-id', ctx.requestId);
  for (const [k, v] of Object.entries(headers)) ctx.res.setHeader(k, v);
  if (status !== 204 && !Object.hasOwn(headers, 'Content-Length')) ctx.res.setHeader('Content-Length', 0);
  ctx.res.end();
}

export function quoted(etag: string): string {
  return `"${etag}"`;
}
