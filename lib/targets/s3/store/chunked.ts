// `aws-chunked` request bodies (SigV4 streaming uploads, with or without
// trailing checksums): <hex size>[;chunk-signature=...]\r\n <data>\r\n ...
// a zero-size chunk, then trailer lines `name:value`, then an empty line.
// Decoding is a pure function over the whole received body with explicit
// limits. The chunk and trailer signatures are returned with the data they
// sign; sigv4.ts checks them (verifyChunkSignatures) when the request was
// signed as a stream.

export interface ChunkedBody {
  readonly data: Buffer;
  /** Trailer fields, names lower case. */
  readonly trailers: Record<string, string>;
  /** Each chunk's data (views of the body), the final empty chunk last. */
  readonly chunks: readonly Buffer[];
  /** Each chunk's `chunk-signature` ('' when it has none), aligned with `chunks`. */
  readonly chunkSignatures: readonly string[];
  /** The trailer lines as signed (`name:value\n` each, x-amz-trailer-signature left out). */
  readonly trailerText: string;
  /** x-amz-trailer-signature, '' when absent. */
  readonly trailerSignature: string;
}

const CHUNK_SIGNATURE = 'chunk-signature=';
const TRAILER_SIGNATURE = 'x-amz-trailer-signature';

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
  const chunks: Buffer[] = [];
  const chunkSignatures: string[] = [];
  let total = 0;
  let at = 0;
  for (let n = 0; ; n++) {
    if (n > MAX_CHUNKS) return null;
    const eol = body.indexOf(CRLF, at);
    if (eol < 0 || eol - at > MAX_LINE) return null;
    const line = body.toString('latin1', at, eol);
    const semi = line.indexOf(';');
    const sizeText = (semi < 0 ? line : line.slice(0, semi)).trim();
    if (!/^[0-9a-fA-F]{1,8}$/.test(sizeText)) return null;
    const ext = semi < 0 ? '' : line.slice(semi + 1).trim();
    chunkSignatures.push(ext.startsWith(CHUNK_SIGNATURE) ? ext.slice(CHUNK_SIGNATURE.length) : '');
    const size = parseInt(sizeText, 16);
    at = eol + CRLF.length;
    if (size === 0) {
      chunks.push(body.subarray(at, at));
      break;
    }
    if (total + size > limit || at + size + CRLF.length > body.length) return null;
    parts.push(body.subarray(at, at + size));
    chunks.push(parts[parts.length - 1]!);
    total += size;
    at += size;
    if (!body.subarray(at, at + CRLF.length).equals(CRLF)) return null;
    at += CRLF.length;
  }
  const trailers: Record<string, string> = {};
  let trailerText = '';
  let trailerSignature = '';
  while (at < body.length) {
    const eol = body.indexOf(CRLF, at);
    const end = eol < 0 ? body.length : eol;
    if (end - at > MAX_LINE) return null;
    const line = body.toString('latin1', at, end);
    at = end + CRLF.length;
    if (line === '') break;
    const colon = line.indexOf(':');
    if (colon <= 0) return null;
    const name = line.slice(0, colon).trim().toLowerCase();
    const value = line.slice(colon + 1).trim();
    if (name === TRAILER_SIGNATURE) {
      trailerSignature = value;
      continue;
    }
    trailers[name] = value;
    trailerText += `${name}:${value}\n`;
  }
  return {
    data: parts.length === 1 ? parts[0]! : Buffer.concat(parts, total), trailers, chunks, chunkSignatures, trailerText, trailerSignature,
  };
}
