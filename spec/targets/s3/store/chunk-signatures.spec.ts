// aws-chunked bodies signed chunk by chunk (SigV4 streaming), end to end over
// raw HTTP against a store with credentials: the AWS documentation's example
// ("Signature calculations for the Authorization header: transferring payload
// in multiple chunks", sigv4-streaming.html: AKIAIOSFODNN7EXAMPLE, 2013-05-24,
// 66560 bytes of 'a' as 65536 + 1024 + 0, the published seed and chunk
// signatures) accepted byte for byte, and tampered, reordered or unsigned
// chunks refused. The trailer form (STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER)
// is signed here by a test-only chain written from the AWS pages (the seed's
// canonical request, then chunk and trailer signatures per
// sigv4-streaming-trailers.html), never with the code under test.

import { expect } from 'chai';
import { createHash, createHmac } from 'crypto';
import * as http from 'http';
import type { AddressInfo } from 'net';
import { createS3Server, ObjectStore } from '../../../../lib/targets/s3/store';

const DOC = {
  accessKeyId: 'AKIAIOSFODNN7EXAMPLE',
  secretAccessKey: 'wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY',
  date: '20130524T000000Z',
  seed: '4f232c4386841ef735655705268965c44a0e4690baa4adea153f7db9fa80a0a9',
  chunk1: 'ad80c730a21e5b8d04586a2213dd63b9a0e99e0e2307b0ade35a65485a288648',
  chunk2: '0055627c9e194cb4542bae2aa5492e3c1575bbb81b612b7d234b86a503ef5497',
  final: 'b6c6ea8a5354eaf15b3cb7646744f4275b71ea724fed81ceb9323e279d449df9',
};
const DOC_TIME = Date.UTC(2013, 4, 24);

function docBody(sigs: [string, string, string] = [DOC.chunk1, DOC.chunk2, DOC.final]): Buffer {
  return Buffer.concat([
    Buffer.from(`10000;chunk-signature=${sigs[0]}\r\n`),
    Buffer.alloc(65536, 'a'),
    Buffer.from(`\r\n400;chunk-signature=${sigs[1]}\r\n`),
    Buffer.alloc(1024, 'a'),
    Buffer.from(`\r\n0;chunk-signature=${sigs[2]}\r\n\r\n`),
  ]);
}

function docHeaders(length: number): Record<string, string> {
  return {
    Host: 's3.amazonaws.com',
    'x-amz-date': DOC.date,
    'x-amz-storage-class': 'REDUCED_REDUNDANCY',
    Authorization: `AWS4-HMAC-SHA256 Credential=${DOC.accessKeyId}/20130524/us-east-1/s3/aws4_request,SignedHeaders=content-encoding;content-length;host;x-amz-content-sha256;x-amz-date;x-amz-decoded-content-length;x-amz-storage-class,Signature=${DOC.seed}`,
    'x-amz-content-sha256': 'STREAMING-AWS4-HMAC-SHA256-PAYLOAD',
    'Content-Encoding': 'aws-chunked',
    'x-amz-decoded-content-length': '66560',
    'Content-Length': String(length),
  };
}

function send(
  port: number,
  method: string,
  path: string,
  headers: Record<string, string>,
  body: Buffer,
): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = http.request({ host: '127.0.0.1', port, method, path, headers }, (res) => {
      let s = '';
      res.on('data', (c: Buffer) => {
        s += c;
      });
      res.on('end', () => resolve({ status: res.statusCode!, body: s }));
    });
    req.on('error', reject);
    req.end(body);
  });
}

const hmacHex = (key: Buffer, text: string): string => createHmac('sha256', key).update(text).digest('hex');
const sha = (b: Buffer | string): string => createHash('sha256').update(b).digest('hex');

function signingKey(secret: string, day: string): Buffer {
  let key = createHmac('sha256', `AWS4${secret}`).update(day).digest();
  for (const part of ['us-east-1', 's3', 'aws4_request']) key = createHmac('sha256', key).update(part).digest();
  return key;
}

/** A PUT signed with the Authorization header (every header given is signed; no query). */
function signPut(
  path: string,
  headers: Record<string, string>,
  amzDate: string,
  payloadHash: string,
): { headers: Record<string, string>; seed: string } {
  const all: Record<string, string> = { ...headers, 'x-amz-date': amzDate, 'x-amz-content-sha256': payloadHash };
  const names = Object.keys(all)
    .map((n) => n.toLowerCase())
    .sort();
  const value = (n: string): string =>
    Object.entries(all)
      .find(([k]) => k.toLowerCase() === n)![1]
      .trim();
  const canonical = [
    'PUT',
    path,
    '',
    names.map((n) => `${n}:${value(n)}\n`).join(''),
    names.join(';'),
    payloadHash,
  ].join('\n');
  const scope = `${amzDate.slice(0, 8)}/us-east-1/s3/aws4_request`;
  const seed = hmacHex(
    signingKey(DOC.secretAccessKey, amzDate.slice(0, 8)),
    ['AWS4-HMAC-SHA256', amzDate, scope, sha(canonical)].join('\n'),
  );
  all['Authorization'] =
    `AWS4-HMAC-SHA256 Credential=${DOC.accessKeyId}/${scope},SignedHeaders=${names.join(';')},Signature=${seed}`;
  return { headers: all, seed };
}

describe('s3 aws-chunked chunk signatures (SigV4 streaming)', function () {
  this.timeout(30000);
  let server: http.Server;
  let store: ObjectStore;
  let port: number;
  let clock = DOC_TIME;

  beforeEach(async () => {
    store = await ObjectStore.open('examplebucket', { size: 8 << 20, objects: 16, maxpart: 4 << 20 });
    server = createS3Server({ store, credentials: [DOC], now: () => clock });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    port = (server.address() as AddressInfo).port;
  });
  afterEach(async () => {
    clock = DOC_TIME;
    server.closeAllConnections();
    await new Promise<void>((r) => server.close(() => r()));
  });

  it('accepts the AWS documentation example byte for byte (seed and three chunk signatures)', async () => {
    const body = docBody();
    expect(body.length).to.equal(66824); // the Content-Length the example gives
    const r = await send(port, 'PUT', '/examplebucket/chunkObject.txt', docHeaders(body.length), body);
    expect(r.status, r.body).to.equal(200);
    expect(store.get('chunkObject.txt')!.data.equals(Buffer.alloc(66560, 'a'))).to.equal(true);
  });

  it('refuses a tampered chunk, swapped signatures, a missing final signature and an unsigned chunk (403 SignatureDoesNotMatch)', async () => {
    const tampered = docBody();
    tampered[200] = 'b'.charCodeAt(0);
    const bodies: [string, Buffer][] = [
      ['tampered byte', tampered],
      ['signatures swapped', docBody([DOC.chunk2, DOC.chunk1, DOC.final])],
      ['final signature wrong', docBody([DOC.chunk1, DOC.chunk2, DOC.chunk2])],
      ['not hex', docBody([DOC.chunk1, 'zz'.repeat(32), DOC.final])],
      [
        'unsigned chunks',
        Buffer.concat([
          Buffer.from('10000\r\n'),
          Buffer.alloc(65536, 'a'),
          Buffer.from('\r\n400\r\n'),
          Buffer.alloc(1024, 'a'),
          Buffer.from('\r\n0\r\n\r\n'),
        ]),
      ],
    ];
    for (const [what, body] of bodies) {
      const r = await send(port, 'PUT', '/examplebucket/chunkObject.txt', docHeaders(body.length), body);
      expect([r.status, r.body.includes('<Code>SignatureDoesNotMatch</Code>')], what).to.deep.equal([403, true]);
    }
    expect(store.get('chunkObject.txt')).to.equal(undefined);
  });

  it('STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER: chunks and the trailer signature chained from the seed; a changed trailer is refused', async () => {
    clock = Date.now();
    const data = Buffer.from('hello, streamed and signed');
    const crc = 'x-amz-checksum-sha256';
    const digest = createHash('sha256').update(data).digest('base64');
    const amzDate = new Date(clock)
      .toISOString()
      .replace(/[-:]/g, '')
      .replace(/\.\d{3}/, '');
    const scope = `${amzDate.slice(0, 8)}/us-east-1/s3/aws4_request`;
    const key = signingKey(DOC.secretAccessKey, amzDate.slice(0, 8));
    const build = (path: string, trailerValue: string): { headers: Record<string, string>; body: Buffer } => {
      const chunkLen = (n: number, sig: string): string => `${n.toString(16)};chunk-signature=${sig}\r\n`;
      const trailerLine = `${crc}:${trailerValue}`;
      // The body's length depends only on sizes, so it is known before signing.
      const length =
        chunkLen(data.length, '0'.repeat(64)).length +
        data.length +
        2 +
        chunkLen(0, '0'.repeat(64)).length +
        trailerLine.length +
        2 +
        `x-amz-trailer-signature:${'0'.repeat(64)}`.length +
        2 +
        2;
      const { headers, seed } = signPut(
        path,
        {
          host: `127.0.0.1:${port}`,
          'content-encoding': 'aws-chunked',
          'x-amz-decoded-content-length': String(data.length),
          'x-amz-trailer': crc,
          'content-length': String(length),
        },
        amzDate,
        'STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER',
      );
      const empty = sha('');
      const s1 = hmacHex(key, ['AWS4-HMAC-SHA256-PAYLOAD', amzDate, scope, seed, empty, sha(data)].join('\n'));
      const s2 = hmacHex(key, ['AWS4-HMAC-SHA256-PAYLOAD', amzDate, scope, s1, empty, empty].join('\n'));
      const st = hmacHex(key, ['AWS4-HMAC-SHA256-TRAILER', amzDate, scope, s2, sha(`${crc}:${digest}\n`)].join('\n'));
      const body = Buffer.concat([
        Buffer.from(chunkLen(data.length, s1)),
        data,
        Buffer.from(`\r\n${chunkLen(0, s2)}${trailerLine}\r\nx-amz-trailer-signature:${st}\r\n\r\n`),
      ]);
      if (body.length !== length) throw new Error(`body ${body.length} != ${length}`);
      return { headers, body };
    };
    const good = build('/examplebucket/trailed', digest);
    const ok = await send(port, 'PUT', '/examplebucket/trailed', good.headers, good.body);
    expect(ok.status, ok.body).to.equal(200);
    expect(store.get('trailed')!.data.equals(data)).to.equal(true);
    // The trailer changed after signing (its value is still a valid checksum of nothing else): refused by signature.
    const wrongDigest = createHash('sha256').update('other').digest('base64');
    const bad = build('/examplebucket/trailed2', wrongDigest);
    const r = await send(port, 'PUT', '/examplebucket/trailed2', bad.headers, bad.body);
    expect([r.status, r.body.includes('SignatureDoesNotMatch')]).to.deep.equal([403, true]);
  });
});
