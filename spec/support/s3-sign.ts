// SigV4 for raw HTTP requests in specs and benches, with @smithy/signature-v4
// (the AWS SDK's own signer) rather than our verifier's code: a header-signed
// request, or a presigned path, whose signature may cover x-amz-rdma-token.

import { SignatureV4 } from '@smithy/signature-v4';
import { createHash, createHmac, Hash, Hmac } from 'crypto';

interface SigningCredentials {
  readonly accessKeyId: string;
  readonly secretAccessKey: string;
}

/** The signer's hash: SHA-256, or HMAC-SHA-256 when given a secret. */
type Data = string | ArrayBuffer | ArrayBufferView;

function bytes(d: Data): string | Uint8Array {
  if (typeof d === 'string') return d;
  return ArrayBuffer.isView(d) ? new Uint8Array(d.buffer, d.byteOffset, d.byteLength) : new Uint8Array(d);
}

class Sha256 {
  #h: Hash | Hmac;
  readonly #secret: string | Uint8Array | undefined;

  constructor(secret?: Data) {
    this.#secret = secret === undefined ? undefined : bytes(secret);
    this.#h = this.#secret === undefined ? createHash('sha256') : createHmac('sha256', this.#secret);
  }

  update(data: Data): void {
    this.#h.update(bytes(data));
  }

  digest(): Promise<Uint8Array> {
    return Promise.resolve(this.#h.digest());
  }

  reset(): void {
    this.#h = this.#secret === undefined ? createHash('sha256') : createHmac('sha256', this.#secret);
  }
}

interface RawRequest {
  readonly method: string;
  /** host:port, as the Host header carries it. */
  readonly host: string;
  /** Path and query, already encoded. */
  readonly path: string;
  readonly headers?: Readonly<Record<string, string>>;
  readonly body?: Buffer;
}

function split(r: RawRequest): {
  hostname: string;
  port: number | undefined;
  path: string;
  query: Record<string, string>;
} {
  const at = r.path.indexOf('?');
  const query: Record<string, string> = {};
  if (at >= 0) for (const [k, v] of new URLSearchParams(r.path.slice(at + 1))) query[k] = v;
  const colon = r.host.lastIndexOf(':');
  return {
    hostname: colon > 0 ? r.host.slice(0, colon) : r.host,
    port: colon > 0 ? Number(r.host.slice(colon + 1)) : undefined,
    path: decodeURIComponent(at >= 0 ? r.path.slice(0, at) : r.path),
    query,
  };
}

function signer(creds: SigningCredentials): SignatureV4 {
  return new SignatureV4({
    credentials: creds,
    region: 'us-east-1',
    service: 's3',
    sha256: Sha256,
    uriEscapePath: true,
  });
}

/** Every header of `r` (host included) plus the signature's: all of them are signed. */
export async function signHeaders(r: RawRequest, creds: SigningCredentials): Promise<Record<string, string>> {
  const { hostname, port, path, query } = split(r);
  const signed = await signer(creds).sign({
    method: r.method,
    protocol: 'http:',
    hostname,
    ...(port !== undefined ? { port } : {}),
    path,
    query,
    headers: { host: r.host, ...r.headers },
    ...(r.body ? { body: r.body } : {}),
  });
  return signed.headers as Record<string, string>;
}

/** A presigned path (query signature) for `r`; its headers are signed too and must be sent as given. */
export async function presignPath(r: RawRequest, creds: SigningCredentials, expiresIn = 300): Promise<string> {
  const { hostname, port, path, query } = split(r);
  const headers = { host: r.host, ...r.headers };
  const p = await signer(creds).presign(
    // A presigned URL's payload is unsigned (what S3 and the store expect): the hash the signer takes, neither signed nor sent.
    {
      method: r.method,
      protocol: 'http:',
      hostname,
      ...(port !== undefined ? { port } : {}),
      path,
      query,
      headers: { ...headers, 'x-amz-content-sha256': 'UNSIGNED-PAYLOAD' },
    },
    // The given headers stay headers (signed), not moved into the query as x-amz-* headers are by default.
    {
      expiresIn,
      unhoistableHeaders: new Set([...Object.keys(headers).map((h) => h.toLowerCase()), 'x-amz-content-sha256']),
      unsignableHeaders: new Set(['x-amz-content-sha256']),
    },
  );
  const q = new URLSearchParams(p.query as Record<string, string>).toString();
  return `${r.path.split('?')[0]}?${q}`;
}
