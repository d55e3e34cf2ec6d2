// The S3 fuzz target's requests (spec/fuzz/targets/s3.ts): keys, query
// strings, headers, XML bodies and whole requests, random or mutated from good
// ones, drawn from the fuzzer's seeded generator and what it knows so far
// (keys stored, uploads started).

import { createHash } from 'crypto';
import type { Prng } from '../../support/ionic/rig';

const MiB = 1024 * 1024;
export const BUCKET = 'ernic';

export interface Req {
  readonly method: string;
  readonly path: string;
  readonly headers: Record<string, string>;
  readonly body: Buffer;
  /** Framed so the server can answer (false: cut short on purpose). */
  readonly complete: boolean;
  readonly what: string;
  /** A well-formed DeleteObjects body's keys, `${stem}${i}` for i below count (its answer is checked against them). */
  readonly deleteKeys?: { readonly stem: string; readonly count: number };
}

const HOSTILE = ['__proto__', 'constructor', 'toString', 'hasOwnProperty', 'valueOf', 'prototype'];
const QUERY_NAMES = [
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
  'response-content-type',
  'x-amz-checksum-crc32',
  'tagging',
  'acl',
  'versionId',
  'X-Amz-Algorithm',
  'X-Amz-Credential',
  'X-Amz-Date',
  'X-Amz-Expires',
  'X-Amz-SignedHeaders',
  'X-Amz-Signature',
  ...HOSTILE,
];
const ALGORITHMS = ['crc32', 'crc32c', 'sha1', 'sha256', 'crc64nvme', ...HOSTILE];

export function b64(d: Buffer, alg: string): string {
  return createHash(alg).update(d).digest('base64');
}
/** What the fuzzer knows that requests draw on: keys it stored or will, uploads it started. */
export interface KnownState {
  keys: string[];
  uploads: Set<string>;
}

export class S3Requests {
  constructor(
    private readonly rnd: Prng,
    private readonly state: KnownState,
  ) {}

  key(): string {
    const rnd = this.rnd;
    switch (rnd.below(8)) {
      case 0:
        return rnd.pick(HOSTILE);
      case 1:
        return `${'long/'.repeat(rnd.below(250))}x`;
      case 2:
        return encodeURIComponent(
          String.fromCodePoint(...Array.from({ length: 1 + rnd.below(8) }, () => 0x20 + rnd.below(0x2000))),
        );
      case 3:
        return `%${rnd.pick(['zz', '2', 'C0%80', '00', 'E2%82'])}`;
      default:
        return rnd.pick(this.state.keys);
    }
  }

  query(): string {
    const rnd = this.rnd;
    const n = rnd.below(4);
    const parts: string[] = [];
    for (let i = 0; i < n; i++) {
      const name =
        rnd.below(8) === 0
          ? encodeURIComponent(String.fromCharCode(0x21 + rnd.below(90)).repeat(1 + rnd.below(4)))
          : rnd.pick(QUERY_NAMES);
      let value: string;
      switch (name) {
        case 'uploadId':
          value = rnd.below(3) ? rnd.pick([...this.state.uploads, 'none']) : rnd.bytes(16).toString('hex');
          break;
        case 'partNumber':
        case 'max-keys':
        case 'max-parts':
        case 'part-number-marker':
          value = String(rnd.pick([0, 1, 2, 3, -1, 1000, 10_000, 10_001, 2 ** 53, 1.5, 'x', '']));
          break;
        case 'continuation-token':
          value = rnd.below(2) ? Buffer.from(this.key()).toString('base64url') : rnd.bytes(6).toString('base64');
          break;
        case 'encoding-type':
          value = rnd.pick(['url', 'xml', '']);
          break;
        default:
          value = rnd.below(2) ? this.key() : encodeURIComponent(rnd.bytes(rnd.below(12)).toString('latin1'));
      }
      parts.push(rnd.below(6) === 0 ? name : `${name}=${encodeURIComponent(value)}`);
    }
    if (rnd.below(10) === 0) parts.push(rnd.pick(['%zz', '&&', '=', 'a=%', `${'x'.repeat(3000)}=1`]));
    return parts.length ? `?${parts.join('&')}` : '';
  }

  headers(body: Buffer): Record<string, string> {
    const rnd = this.rnd;
    const h: Record<string, string> = {};
    const n = rnd.below(5);
    for (let i = 0; i < n; i++) {
      switch (rnd.below(12)) {
        case 0:
          h['content-md5'] = rnd.below(2) ? b64(body, 'md5') : rnd.pick(['', 'xx', b64(rnd.bytes(4), 'md5')]);
          break;
        case 1: {
          const alg = rnd.pick(ALGORITHMS);
          const real = ['sha1', 'sha256'].includes(alg) ? b64(body, alg) : 'AAAAAA==';
          h[`x-amz-checksum-${alg}`] = rnd.below(2) ? real : rnd.bytes(6).toString('base64');
          break;
        }
        case 2:
          h['x-amz-content-sha256'] = rnd.pick([
            createHash('sha256').update(body).digest('hex'),
            '0'.repeat(64),
            'UNSIGNED-PAYLOAD',
            'STREAMING-UNSIGNED-PAYLOAD-TRAILER',
            'STREAMING-AWS4-HMAC-SHA256-PAYLOAD',
            'junk',
          ]);
          break;
        case 3:
          h.range = rnd.pick([
            'bytes=0-0',
            'bytes=-1',
            'bytes=5-',
            'bytes=10-2',
            'bytes=0-99999999',
            'bytes=-0',
            'bytes=a-b',
            'bytes=0-1,3-4',
            'items=0-1',
          ]);
          break;
        case 4:
          h[`x-amz-meta-${rnd.pick([...HOSTILE, 'm', 'x'.repeat(300)])}`] = rnd.pick([
            'v',
            'x'.repeat(rnd.below(3000)),
          ]);
          break;
        case 5:
          h['x-amz-copy-source'] = `/${BUCKET}/${this.key()}`;
          break;
        case 6:
          h['x-amz-rdma-token'] = rnd.pick([rnd.bytes(44).toString('hex'), `${'01'.repeat(44)}:0:0`, 'zz', '']);
          break;
        case 7:
          h['content-type'] = rnd.pick(['text/plain', 'application/xml', '', 'x'.repeat(500)]);
          break;
        case 8:
          h.authorization = rnd.pick([
            'AWS4-HMAC-SHA256 Credential=FUZZKEY/20240101/us-east-1/s3/aws4_request, SignedHeaders=host, Signature=' +
              'a'.repeat(64),
            'AWS4-HMAC-SHA256 ',
            'Basic x',
            `AWS4-HMAC-SHA256 ${'Credential=,'.repeat(50)}`,
          ]);
          h['x-amz-date'] = rnd.pick([
            '20240101T000000Z',
            new Date().toISOString().replace(/[-:]/g, '').replace(/\.\d+/, ''),
            'x',
          ]);
          break;
        case 9:
          h['x-amz-decoded-content-length'] = String(rnd.pick([0, body.length, body.length + 1, -1, 2 ** 40]));
          break;
        case 10:
          h['content-encoding'] = rnd.pick(['aws-chunked', 'gzip', 'gzip, aws-chunked']);
          break;
        default:
          h[`x-${rnd.pick(HOSTILE).toLowerCase()}`] = 'y';
      }
    }
    return h;
  }

  /** An XML body: a good document of either kind, mutated or not, or something else altogether. */
  xml(kind: 'delete' | 'complete'): Buffer {
    const rnd = this.rnd;
    const n = rnd.pick([1, 2, 5, 50, 1000, 1001, 10_000, 10_001]);
    let doc: string;
    if (kind === 'delete') {
      const count = Math.min(n, 1001);
      doc = `<?xml version="1.0" encoding="UTF-8"?><Delete xmlns="http://s3.amazonaws.com/doc/2006-03-01/">${rnd.below(2) ? '<Quiet>true</Quiet>' : ''}${Array.from({ length: count }, () => `<Object><Key>${xmlEscape(this.key())}</Key></Object>`).join('')}</Delete>`;
    } else {
      doc = `<CompleteMultipartUpload>${Array.from({ length: n }, (_, i) => `<Part><PartNumber>${i + 1}</PartNumber><ETag>"${rnd.bytes(16).toString('hex')}"</ETag>${rnd.below(2) ? '<ChecksumCRC32>AAAAAA==</ChecksumCRC32>' : ''}</Part>`).join('')}</CompleteMultipartUpload>`;
    }
    switch (rnd.below(10)) {
      case 0:
      case 1:
      case 2:
        return Buffer.from(doc);
      case 3: {
        // bytes flipped
        const b = Buffer.from(doc);
        for (let i = rnd.below(8); i >= 0; i--) b[rnd.below(b.length)] = rnd.next() & 0xff;
        return b;
      }
      case 4:
        return Buffer.from(doc.slice(0, rnd.below(doc.length)));
      case 5: {
        // a snippet spliced in
        const at = doc.indexOf('>', rnd.below(doc.length)) + 1 || doc.length;
        const snippet = rnd.pick([
          '<!DOCTYPE x [<!ENTITY a "b">]>',
          '&a;',
          '&#0;',
          '&#x110000;',
          '<![CDATA[x]]>',
          '<!-- c -->',
          '<?pi?>',
          '<a/>'.repeat(1 + rnd.below(5000)),
          '<b>'.repeat(20),
          '</Delete>',
          '<Key>x</Key>',
          '\u0000',
          '&amp;'.repeat(3000),
        ]);
        return Buffer.from(doc.slice(0, at) + snippet + doc.slice(at));
      }
      case 6:
        return rnd.bytes(rnd.below(5000));
      case 7:
        return Buffer.from(
          `<${kind === 'delete' ? 'Delete' : 'CompleteMultipartUpload'}>${'<a/>'.repeat(rnd.below(300_000))}</x>`,
        );
      case 8:
        return Buffer.from(`${'<x>'.repeat(rnd.below(50_000))}`);
      default:
        return Buffer.from(
          doc.replace(/<Key>/g, '<Key> ').replace(/Object/g, rnd.pick(['Object', 'object', 'Obj', '__proto__'])),
        );
    }
  }

  /** A random or mutated request of at most `maxBody` bytes of body (some framed aws-chunked). */
  request(maxBody = 64 * 1024): Req {
    const rnd = this.rnd;
    const method =
      rnd.below(12) === 0
        ? rnd.pick(['OPTIONS', 'PATCH', 'TRACE', 'PROPFIND', 'COPY'])
        : rnd.pick(['GET', 'GET', 'PUT', 'PUT', 'POST', 'DELETE', 'HEAD']);
    const bucket = rnd.below(10) === 0 ? rnd.pick(['', 'other', '%zz', 'ERNIC', 'x'.repeat(70)]) : BUCKET;
    let path = `/${bucket}`;
    if (rnd.below(5)) path += `/${this.key()}`;
    let query = this.query();
    let body: Buffer = Buffer.alloc(0);
    if (method === 'POST' && rnd.below(3)) {
      const del = rnd.below(2) === 0;
      body = this.xml(del ? 'delete' : 'complete');
      query = del ? '?delete' : `?uploadId=${encodeURIComponent(rnd.pick([...this.state.uploads, 'none']))}`;
      if (!del) path = `/${BUCKET}/${this.key()}`;
    } else if (method === 'PUT' || rnd.below(8) === 0) {
      body = rnd.bytes(rnd.pick([0, 1, 100, 4096, rnd.below(maxBody)]));
    }
    const headers = this.headers(body);
    let complete = true;
    if (rnd.below(6) === 0 && body.length > 0) {
      body = chunked(body, rnd);
      headers['content-encoding'] = 'aws-chunked';
      headers['x-amz-decoded-content-length'] ??= String(body.length);
    }
    if (rnd.below(25) === 0) complete = false;
    return { method, path: path + query, headers, body, complete, what: `${method} ${path}${query}`.slice(0, 200) };
  }

  /** A big body: up to the store's maxpart, a PUT, or a DeleteObjects near S3's caps. */
  big(): Req {
    const rnd = this.rnd;
    if (rnd.below(2)) {
      const body = Buffer.alloc(rnd.below(8 * MiB + 2), rnd.next() & 0xff);
      for (let i = 0; i < 64 && body.length > 0; i++) body[rnd.below(body.length)] = rnd.next() & 0xff;
      const headers: Record<string, string> = rnd.below(2)
        ? {
            'content-md5': rnd.bytes(16).toString('base64'),
            'x-amz-checksum-crc32c': 'AAAAAA==',
            'x-amz-checksum-sha256': rnd.bytes(32).toString('base64'),
          }
        : {};
      return { method: 'PUT', path: `/${BUCKET}/big`, headers, body, complete: true, what: `PUT big ${body.length}` };
    }
    // 1,000 keys of up to 1,020 characters, each maybe written as an entity: up to S3's cap.
    const unit = rnd.pick(['k', '&amp;', '&apos;']);
    const stem = unit.repeat(rnd.pick([6, 296, 1020]));
    const body = Buffer.from(
      `<Delete>${Array.from({ length: 1000 }, (_, i) => `<Object><Key>${stem}${i}</Key></Object>`).join('')}</Delete>`,
    );
    const deleteKeys = {
      stem: unit === 'k' ? stem : (unit === '&amp;' ? '&' : "'").repeat(stem.length / unit.length),
      count: 1000,
    };
    return {
      method: 'POST',
      path: `/${BUCKET}?delete`,
      headers: {},
      body,
      complete: true,
      what: `DeleteObjects of ${body.length} bytes`,
      deleteKeys,
    };
  }
}

function xmlEscape(s: string): string {
  return s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');
}

/** aws-chunked framing of `data`: chunks of random sizes, sometimes a trailer, sometimes broken. */
function chunked(data: Buffer, rnd: Prng): Buffer {
  const parts: Buffer[] = [];
  for (let at = 0; at < data.length;) {
    const n = Math.min(data.length - at, 1 + rnd.below(rnd.below(4) === 0 ? 16 : 20_000));
    parts.push(
      Buffer.from(`${n.toString(16)}${rnd.below(4) === 0 ? `;chunk-signature=${'a'.repeat(64)}` : ''}\r\n`),
      data.subarray(at, at + n),
      Buffer.from('\r\n'),
    );
    at += n;
  }
  parts.push(
    Buffer.from(
      `0\r\n${rnd.below(2) ? `x-amz-checksum-${rnd.pick(ALGORITHMS)}:AAAAAA==\r\n` : ''}${rnd.below(8) === 0 ? '__proto__:x\r\n' : ''}\r\n`,
    ),
  );
  const out = Buffer.concat(parts);
  if (rnd.below(6) === 0) out[rnd.below(out.length)] = rnd.next() & 0xff;
  return out;
}
