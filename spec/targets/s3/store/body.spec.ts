// Request bodies and their checks, below the SDK: aws-chunked decoding of
// hand-written bodies (chunk signatures, trailers, malformed framing,
// limits), and over raw HTTP the BadDigest answers for a wrong
// x-amz-checksum-*, Content-MD5 or trailer, an
// unsigned request when credentials are set, and the Error document's shape.

import { expect } from 'chai';
import * as http from 'http';
import { decodeAwsChunked, isAwsChunked } from '../../../../lib/targets/s3/store';
import { badChecksum } from '../../../../lib/targets/s3/store/checksums';
import { serve, Served } from '../helpers';

function raw(
  endpoint: string,
  method: string,
  path: string,
  headers: Record<string, string>,
  body?: Buffer | string,
): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = http.request(`${endpoint}${path}`, { method, headers }, (res) => {
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

describe('s3 aws-chunked decoding', () => {
  it('signed chunks, no trailers', () => {
    const d = decodeAwsChunked(
      Buffer.from('5;chunk-signature=ab12\r\nhello\r\n6;chunk-signature=cd\r\n world\r\n0;chunk-signature=ef\r\n\r\n'),
      100,
    );
    expect(d && [d.data.toString(), [...d.trailers]]).to.deep.equal(['hello world', []]);
  });

  it('unsigned chunks with a trailing checksum', () => {
    const d = decodeAwsChunked(Buffer.from('3\r\nabc\r\n0\r\nx-amz-checksum-crc32:NSRBwg==\r\n\r\n'), 100);
    expect(d && [d.data.toString(), [...d.trailers]]).to.deep.equal(['abc', [['x-amz-checksum-crc32', 'NSRBwg==']]]);
  });

  it('refuses bad framing and data past the limit', () => {
    for (const bad of [
      '3\r\nabcd\r\n0\r\n\r\n',
      'zz\r\nabc\r\n0\r\n\r\n',
      '3\r\nab',
      '3abc',
      '3\r\nabc\r\n0\r\nno-colon\r\n\r\n',
    ]) {
      expect(decodeAwsChunked(Buffer.from(bad), 100), JSON.stringify(bad)).to.equal(null);
    }
    expect(decodeAwsChunked(Buffer.from('3\r\nabc\r\n3\r\ndef\r\n0\r\n\r\n'), 5)).to.equal(null);
  });

  it('recognised by Content-Encoding or a STREAMING- payload hash', () => {
    expect(isAwsChunked('aws-chunked', undefined)).to.equal(true);
    expect(isAwsChunked('gzip, aws-chunked', undefined)).to.equal(true);
    expect(isAwsChunked(undefined, 'STREAMING-UNSIGNED-PAYLOAD-TRAILER')).to.equal(true);
    expect(isAwsChunked(undefined, 'UNSIGNED-PAYLOAD')).to.equal(false);
  });
});

describe('s3 x-amz-checksum-* values', () => {
  const check = Buffer.from('123456789');

  it('CRC32 (zlib.crc32) and CRC32C match their check values 0xcbf43926 and 0xe3069283', () => {
    expect(badChecksum({ 'x-amz-checksum-crc32': 'y/Q5Jg==', 'x-amz-checksum-crc32c': '4waSgw==' }, check)).to.equal(
      null,
    );
    expect(badChecksum({ 'x-amz-checksum-crc32': '4waSgw==' }, check)).to.equal('x-amz-checksum-crc32');
    expect(badChecksum({ 'x-amz-checksum-crc32c': 'y/Q5Jg==' }, check)).to.equal('x-amz-checksum-crc32c');
  });

  it('an algorithm named after an Object property is unknown, not called', () => {
    for (const name of ['constructor', 'toString', '__proto__', 'hasOwnProperty']) {
      expect(badChecksum({ [`x-amz-checksum-${name}`]: 'x' }, check), name).to.equal(null);
    }
  });
});

describe('s3 body checks over raw http', function () {
  this.timeout(60000);
  let s: Served;
  beforeEach(async () => {
    s = await serve();
  });
  afterEach(async () => {
    await s.close();
  });

  it('BadDigest for a wrong x-amz-checksum-crc32, Content-MD5 or trailer; the right ones store the object', async () => {
    const bad = await raw(
      s.endpoint,
      'PUT',
      '/ernic/k',
      { 'x-amz-checksum-crc32': 'AAAAAA==', 'content-length': '3' },
      'abc',
    );
    expect([bad.status, bad.body]).to.satisfy(
      ([st, b]: [number, string]) => st === 400 && b.includes('<Code>BadDigest</Code>'),
    );
    const md5 = await raw(
      s.endpoint,
      'PUT',
      '/ernic/k',
      { 'content-md5': 'AAAAAAAAAAAAAAAAAAAAAA==', 'content-length': '3' },
      'abc',
    );
    expect(md5.status).to.equal(400);
    const chunkedBad = await raw(
      s.endpoint,
      'PUT',
      '/ernic/k',
      {
        'content-encoding': 'aws-chunked',
        'x-amz-content-sha256': 'STREAMING-UNSIGNED-PAYLOAD-TRAILER',
        'x-amz-decoded-content-length': '3',
      },
      '3\r\nabc\r\n0\r\nx-amz-checksum-crc32:AAAAAA==\r\n\r\n',
    );
    expect(chunkedBad.status).to.equal(400);
    expect(s.store.get('k')).to.equal(undefined);
    const good = await raw(
      s.endpoint,
      'PUT',
      '/ernic/k',
      {
        'content-encoding': 'aws-chunked',
        'x-amz-content-sha256': 'STREAMING-UNSIGNED-PAYLOAD-TRAILER',
        'x-amz-decoded-content-length': '3',
        'content-md5': 'kAFQmDzST7DWlj99KOF/cg==',
      },
      '3\r\nabc\r\n0\r\nx-amz-checksum-crc32:NSRBwg==\r\n\r\n',
    );
    expect(good.status).to.equal(200);
    expect(s.store.get('k')!.data.toString()).to.equal('abc');
  });

  it('an Error document names the code, message, resource and request id; MethodNotAllowed', async () => {
    const r = await raw(s.endpoint, 'GET', '/ernic/no/such', {});
    expect(r.status).to.equal(404);
    expect(r.body).to.match(
      /^<\?xml version="1.0" encoding="UTF-8"\?><Error><Code>NoSuchKey<\/Code><Message>[^<]+<\/Message><Resource>\/ernic\/no\/such<\/Resource><RequestId>[0-9A-F]{16}<\/RequestId><\/Error>$/,
    );
    const patch = await raw(s.endpoint, 'PATCH', '/ernic/x', {});
    expect(patch.status).to.equal(405);
  });

  it('with credentials set, an unsigned request is AccessDenied', async () => {
    await s.close();
    s = await serve({ auth: true });
    const r = await raw(s.endpoint, 'GET', '/ernic?list-type=2', {});
    expect(r.status).to.equal(403);
    expect(r.body).to.contain('<Code>AccessDenied</Code>');
  });

  it('a PUT whose declared size cannot be kept is refused before its body is read (EntityTooLarge, 507)', async () => {
    await s.close();
    s = await serve({ limits: { size: 1000, maxpart: 800 } });
    await s.store.put('a', Buffer.alloc(500), 'binary/octet-stream');
    const big = await raw(s.endpoint, 'PUT', '/ernic/b', { 'content-length': '801' }, Buffer.alloc(801));
    expect(big.status).to.equal(400);
    expect(big.body).to.contain('EntityTooLarge');
    const full = await raw(s.endpoint, 'PUT', '/ernic/b', { 'content-length': '600' }, Buffer.alloc(600));
    expect(full.status).to.equal(507);
    const over = await raw(s.endpoint, 'PUT', '/ernic/a', { 'content-length': '800' }, Buffer.alloc(800));
    expect(over.status).to.equal(200);
  });
});
