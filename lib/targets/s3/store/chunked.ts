// `aws-chunked` request bodies (SigV4 streaming uploads, with or without
// trailing checksums): <hex size>[;chunk-signature=...]\r\n <data>\r\n ...
// a zero-size chunk, then trailer lines `name:value`, then an empty line.
// Decoding is a pure function over the whole received body with explicit
// limits; chunk signatures are read but not verified (see docs/s3.md).

export interface ChunkedBody {
  readonly data: Buffer;
  /** Trailer fields, names lower case. */
  readonly trailers: Record<string, string>;
}

/** Most chunks per body, and longest chunk header or trailer line. */
export const MAX_CHUNKS = 1 << 20;
const MAX_LINE = 4096;
const CRLF = Buffer.from('\r\n');

/** Is this request body aws-chunked (by Content-Encoding or the streaming payload hash)? */
export function isAwsChunked(contentEncoding: string | undefined, contentSha256: string | undefined): boolean {
  if (contentEncoding && contentEncoding.split(',').some((e) => e.trim().toLowerCase() === 'aws-chunked')) return true;
  return contentSha256 !== undefined && contentSha256.startsWith('STREAMING-');
}

/** Decode a whole aws-chunked body; null when malformed or its data exceeds `limit` bytes. */
export function decodeAwsChunked(body: Buffer, limit: number): ChunkedBody | null {
  const parts: Buffer[] = [];
  let total = 0;
  let at = 0;
  for (let n = 0; ; n++) {
    if (n > MAX_CHUNKS) return null;
    const eol = body.indexOf(CRLF, at);
    if (eol < 0 || eol - at > MAX_LINE) return null;
    const line = body.toString('latin1', at, eol);
    const sizeText = line.split(';', 1)[0]!.trim();
    if (!/^[0-9a-fA-F]{1,8}$/.test(sizeText)) return null;
    const size = parseInt(sizeText, 16);
    at = eol + CRLF.length;
    if (size === 0) break;
    if (total + size > limit || at + size + CRLF.length > body.length) return null;
    parts.push(body.subarray(at, at + size));
    total += size;
    at += size;
    if (!body.subarray(at, at + CRLF.length).equals(CRLF)) return null;
    at += CRLF.length;
  }
  const trailers: Record<string, string> = {};
  while (at < body.length) {
    const eol = body.indexOf(CRLF, at);
    const end = eol < 0 ? body.length : eol;
    if (end - at > MAX_LINE) return null;
    const line = body.toString('latin1', at, end);
    at = end + CRLF.length;
    if (line === '') break;
    const colon = line.indexOf(':');
    if (colon <= 0) return null;
    trailers[line.slice(0, colon).trim().toLowerCase()] = line.slice(colon + 1).trim();
  }
  return { data: parts.length === 1 ? parts[0]! : Buffer.concat(parts, total), trailers };
}
