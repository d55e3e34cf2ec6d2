// `aws-chunked` request bodies (SigV4 streaming uploads, with or without
// trailing checksums): <hex size>[;chunk-signature=...]\r\n <data>\r\n ...
// a zero-size chunk, then trailer lines `name:value`, then an empty line.
// Decoding is a pure function over the whole received body with explicit
// limits (chunks, line length, trailer lines); a large body is decoded in
// steps through the pacer (../../pace.ts), as a client sizes it. The chunk and
// trailer signatures are returned with the data they sign; sigv4.ts checks
// them (verifyChunkSignatures) when the request was signed as a stream.

import { pacer, Pacer, SLICE } from '../../pace';

export interface ChunkedBody {
  readonly data: Buffer;
  /** Trailer fields, names lower case (a Map: the names are the client's). */
  readonly trailers: ReadonlyMap<string, string>;
  /** Chunks, the final empty one included. */
  readonly chunkCount: number;
  /** Chunk `i`'s data (a view of the body). */
  chunk(i: number): Buffer;
  /** Chunk `i`'s `chunk-signature` ('' when it has none). */
  chunkSignature(i: number): string;
  /** The trailer lines as signed (`name:value\n` each, x-amz-trailer-signature left out). */
  readonly trailerText: string;
  /** x-amz-trailer-signature, '' when absent. */
  readonly trailerSignature: string;
}

const CHUNK_SIGNATURE = 'chunk-signature=';
const TRAILER_SIGNATURE = 'x-amz-trailer-signature';

/** Most chunks per body, longest chunk header or trailer line, most trailer lines. */
const MAX_CHUNKS = 1 << 20;
const MAX_LINE = 4096;
const MAX_TRAILERS = 64;
/** Chunk headers or trailer lines read per step (each a few hundred nanoseconds). */
const LINES_PER_STEP = 512;
const CRLF = Buffer.from('\r\n');
const CR = 0x0d;
const LF = 0x0a;
const SEMI = 0x3b;
const CHUNK_SIGNATURE_BYTES = Buffer.from(CHUNK_SIGNATURE);

function isBlank(c: number): boolean {
  return c === 0x20 || c === 0x09;
}

/** buf[from, to) without the blanks at its start: the new start. */
function trimStart(buf: Buffer, from: number, to: number): number {
  while (from < to && isBlank(buf[from]!)) from++;
  return from;
}

/** buf[from, to) without the blanks at its end: the new end. */
function trimEnd(buf: Buffer, from: number, to: number): number {
  while (to > from && isBlank(buf[to - 1]!)) to--;
  return to;
}

function hexDigit(c: number): number {
  if (c >= 0x30 && c <= 0x39) return c - 0x30;
  if (c >= 0x61 && c <= 0x66) return c - 0x57;
  if (c >= 0x41 && c <= 0x46) return c - 0x37;
  return -1;
}

/** Is this request body aws-chunked (by Content-Encoding or the streaming payload hash)? */
export function isAwsChunked(contentEncoding: string | undefined, contentSha256: string | undefined): boolean {
  if (contentEncoding && contentEncoding.split(',').some((e) => e.trim().toLowerCase() === 'aws-chunked')) return true;
  return contentSha256 !== undefined && contentSha256.startsWith('STREAMING-');
}

/**
 * The framing of one body read a step at a time: chunk headers, then trailer
 * lines. Chunks are kept as numbers (where each one's data and signature sit
 * in the body), not as a view per chunk: a million views would be a hundred
 * megabytes of heap for the collector to walk.
 */
class ChunkedReader {
  /** Chunks read so far. */
  count = 0;
  /** Where each chunk's data starts and its size; where its signature is in the body and its length (0: none). */
  readonly starts: Uint32Array;
  readonly sizes: Uint32Array;
  readonly sigAt: Uint32Array;
  readonly sigLen: Uint32Array;
  readonly trailers = new Map<string, string>();
  trailerText = '';
  trailerSignature = '';
  total = 0;
  /** null while reading; then whether the framing was good. */
  result: boolean | null = null;
  #at = 0;
  #inTrailers = false;

  constructor(
    readonly body: Buffer,
    private readonly limit: number,
  ) {
    // Sized once for the most chunks the body can hold (6 bytes each at least, the last 3): never grown, never copied.
    const most = Math.min(MAX_CHUNKS + 1, Math.floor(body.length / 6) + 2);
    this.starts = new Uint32Array(most);
    this.sizes = new Uint32Array(most);
    this.sigAt = new Uint32Array(most);
    this.sigLen = new Uint32Array(most);
  }

  /** End of the line at `at` (the CR of its CRLF), looking at most MAX_LINE bytes; -1 when none. */
  #eol(at: number): number {
    const i = this.body.subarray(at, Math.min(this.body.length, at + MAX_LINE + CRLF.length)).indexOf(CRLF);
    return i < 0 ? -1 : at + i;
  }

  step(): boolean {
    for (let n = 0; n < LINES_PER_STEP && this.result === null; n++) {
      if (!(this.#inTrailers ? this.#trailer() : this.#chunk())) this.result = false;
    }
    return this.result !== null;
  }

  /** A chunk header, read byte by byte (no string per chunk: a body may have a million). */
  #chunk(): boolean {
    const body = this.body;
    if (this.count >= this.starts.length) return false;
    const from = this.#at;
    const lim = Math.min(body.length, from + MAX_LINE + CRLF.length);
    let eol = -1;
    let semi = -1;
    for (let i = from; i + 1 < lim; i++) {
      const c = body[i]!;
      if (c === CR && body[i + 1] === LF) {
        eol = i;
        break;
      }
      if (c === SEMI && semi < 0) semi = i;
    }
    if (eol < 0) return false;
    // The size: 1 to 8 hex digits, blanks around them allowed.
    const sizeEnd = trimEnd(body, from, semi < 0 ? eol : semi);
    let i = trimStart(body, from, sizeEnd);
    if (sizeEnd - i < 1 || sizeEnd - i > 8) return false;
    let size = 0;
    for (; i < sizeEnd; i++) {
      const d = hexDigit(body[i]!);
      if (d < 0) return false;
      size = size * 16 + d;
    }
    // The signature: what follows `chunk-signature=` in the extension, blanks trimmed.
    let sigAt = 0;
    let sigLen = 0;
    if (semi >= 0) {
      const extEnd = trimEnd(body, semi + 1, eol);
      const ext = trimStart(body, semi + 1, extEnd);
      if (
        extEnd - ext >= CHUNK_SIGNATURE_BYTES.length &&
        body.compare(
          CHUNK_SIGNATURE_BYTES,
          0,
          CHUNK_SIGNATURE_BYTES.length,
          ext,
          ext + CHUNK_SIGNATURE_BYTES.length,
        ) === 0
      ) {
        sigAt = ext + CHUNK_SIGNATURE_BYTES.length;
        sigLen = extEnd - sigAt;
      }
    }
    let at = eol + CRLF.length;
    if (size > 0 && (this.total + size > this.limit || at + size + CRLF.length > body.length)) return false;
    const k = this.count++;
    this.starts[k] = at;
    this.sizes[k] = size;
    this.sigAt[k] = sigAt;
    this.sigLen[k] = sigLen;
    if (size === 0) {
      this.#at = at;
      this.#inTrailers = true;
      return true;
    }
    this.total += size;
    at += size;
    if (body[at] !== CR || body[at + 1] !== LF) return false;
    this.#at = at + CRLF.length;
    return true;
  }

  #trailer(): boolean {
    const body = this.body;
    if (this.#at >= body.length) {
      this.result = true;
      return true;
    }
    const eol = this.#eol(this.#at);
    const end = eol < 0 ? body.length : eol;
    if (end - this.#at > MAX_LINE) return false;
    const line = body.toString('latin1', this.#at, end);
    this.#at = end + CRLF.length;
    if (line === '') {
      this.result = true;
      return true;
    }
    const colon = line.indexOf(':');
    if (colon <= 0) return false;
    const name = line.slice(0, colon).trim().toLowerCase();
    const value = line.slice(colon + 1).trim();
    if (name === TRAILER_SIGNATURE) {
      this.trailerSignature = value;
      return true;
    }
    if (this.trailers.size >= MAX_TRAILERS) return false;
    this.trailers.set(name, value);
    this.trailerText += `${name}:${value}\n`;
    return true;
  }

  /** The data of chunks [from, to) copied into `out` at `at`; the new `at`. */
  copyData(out: Buffer, at: number, from: number, to: number): number {
    const body = this.body;
    for (let i = from; i < to; i++) {
      const s = this.starts[i]!;
      const n = this.sizes[i]!;
      if (n < 32) for (let j = 0; j < n; j++) out[at++] = body[s + j]!;
      else at += body.copy(out, at, s, s + n);
    }
    return at;
  }

  finish(data: Buffer): ChunkedBody {
    const body = this.body;
    const { starts, sizes, sigAt, sigLen } = this;
    return {
      data,
      trailers: this.trailers,
      trailerText: this.trailerText,
      trailerSignature: this.trailerSignature,
      chunkCount: this.count,
      chunk: (i) => body.subarray(starts[i]!, starts[i]! + sizes[i]!),
      chunkSignature: (i) => (sigLen[i] ? body.toString('latin1', sigAt[i]!, sigAt[i]! + sigLen[i]!) : ''),
    };
  }

  /** The data, whole: a view when it is one chunk. */
  dataNow(): Buffer {
    if (this.count <= 2 && this.sizes[0] === this.total)
      return this.body.subarray(this.starts[0]!, this.starts[0]! + this.total);
    const out = Buffer.allocUnsafe(this.total);
    this.copyData(out, 0, 0, this.count);
    return out;
  }
}

/** Decode a whole aws-chunked body at once; null when malformed or its data exceeds `limit` bytes. */
export function decodeAwsChunked(body: Buffer, limit: number): ChunkedBody | null {
  const r = new ChunkedReader(body, limit);
  while (!r.step()) {
    /* all of it now */
  }
  if (!r.result) return null;
  return r.finish(r.dataNow());
}

/** decodeAwsChunked through the pacer: the framing a few hundred lines per step, the data joined a slice at a time. */
export async function decodeAwsChunkedPaced(
  body: Buffer,
  limit: number,
  p: Pacer = pacer,
): Promise<ChunkedBody | null> {
  const r = new ChunkedReader(body, limit);
  await p.start(() => r.step());
  if (!r.result) return null;
  if (r.total <= SLICE.copy || r.count <= 2) return r.finish(r.dataNow());
  // Many chunks: their data joined a slice per step (a chunk costs a little besides its bytes).
  const out = Buffer.allocUnsafe(r.total);
  let i = 0;
  let at = 0;
  await p.run(() => {
    let budget = SLICE.copy;
    const from = i;
    while (i < r.count && budget > 0) budget -= r.sizes[i++]! + 64;
    at = r.copyData(out, at, from, i);
    return i >= r.count;
  });
  return r.finish(out);
}
