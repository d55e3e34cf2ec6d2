// S3 semantics over a host listener, with the AWS SDK for JavaScript v3 as
// the client (SigV4 on): buckets, put/get/head/delete, ranged GET, listing
// with prefixes, delimiters and continuation tokens, multipart, DeleteObjects,
// aws-chunked uploads with trailing checksums, errors and limits, and the
// dir= persistence across a restart.

import {
  AbortMultipartUploadCommand,
  CompleteMultipartUploadCommand,
  CreateMultipartUploadCommand,
  DeleteObjectCommand,
  DeleteObjectsCommand,
  GetObjectCommand,
  HeadBucketCommand,
  HeadObjectCommand,
  ListBucketsCommand,
  ListObjectsV2Command,
  ListPartsCommand,
  PutObjectCommand,
  S3Client,
  UploadPartCommand,
} from '@aws-sdk/client-s3';
import { expect } from 'chai';
import { createHash, randomBytes } from 'crypto';
import { promises as fs } from 'fs';
import * as os from 'os';
import * as path from 'path';
import { Readable } from 'stream';
import { ObjectStore } from '../../../../lib/targets/s3/store';
import { CREDS, MiB, serve, Served } from '../helpers';

async function bytes(body: unknown): Promise<Buffer> {
  return Buffer.from(await (body as { transformToByteArray(): Promise<Uint8Array> }).transformToByteArray());
}

async function rejects(p: Promise<unknown>): Promise<{ name: string; status: number | undefined }> {
  try {
    await p;
  } catch (e) {
    const err = e as { name: string; $metadata?: { httpStatusCode?: number } };
    return { name: err.name, status: err.$metadata?.httpStatusCode };
  }
  throw new Error('expected a rejection');
}

describe('s3 store over http with the AWS SDK', function () {
  this.timeout(60000);
  let s: Served;
  beforeEach(async () => {
    s = await serve({ auth: true });
  });
  afterEach(async () => {
    await s.close();
  });

  it('lists the one bucket; HEAD bucket 200, another bucket 404', async () => {
    const r = await s.client.send(new ListBucketsCommand({}));
    expect(r.Buckets?.map((b) => b.Name)).to.deep.equal(['ernic']);
    await s.client.send(new HeadBucketCommand({ Bucket: 'ernic' }));
    expect((await rejects(s.client.send(new HeadBucketCommand({ Bucket: 'other' })))).status).to.equal(404);
  });

  it('put, get (MD5 ETag, type, metadata), head, delete (idempotent), then NoSuchKey', async () => {
    const data = randomBytes(100_000);
    const put = await s.client.send(
      new PutObjectCommand({
        Bucket: 'ernic',
        Key: 'dir/a.bin',
        Body: data,
        ContentType: 'application/x-test',
        Metadata: { who: 'spec' },
      }),
    );
    expect(put.ETag).to.equal(`"${createHash('md5').update(data).digest('hex')}"`);
    const got = await s.client.send(new GetObjectCommand({ Bucket: 'ernic', Key: 'dir/a.bin' }));
    expect((await bytes(got.Body)).equals(data)).to.equal(true);
    expect(got.ContentType).to.equal('application/x-test');
    expect(got.Metadata).to.deep.equal({ who: 'spec' });
    const head = await s.client.send(new HeadObjectCommand({ Bucket: 'ernic', Key: 'dir/a.bin' }));
    expect(head.ContentLength).to.equal(100_000);
    await s.client.send(new DeleteObjectCommand({ Bucket: 'ernic', Key: 'dir/a.bin' }));
    await s.client.send(new DeleteObjectCommand({ Bucket: 'ernic', Key: 'dir/a.bin' }));
    const e = await rejects(s.client.send(new GetObjectCommand({ Bucket: 'ernic', Key: 'dir/a.bin' })));
    expect([e.name, e.status]).to.deep.equal(['NoSuchKey', 404]);
    expect(s.store.used).to.equal(0);
  });

  it('ranged GET: 206 with Content-Range; suffix and open ranges; 416 past the end', async () => {
    const data = Buffer.from('0123456789abcdef');
    await s.client.send(new PutObjectCommand({ Bucket: 'ernic', Key: 'r', Body: data }));
    const a = await s.client.send(new GetObjectCommand({ Bucket: 'ernic', Key: 'r', Range: 'bytes=2-5' }));
    expect([a.$metadata.httpStatusCode, a.ContentRange, (await bytes(a.Body)).toString()]).to.deep.equal([
      206,
      'bytes 2-5/16',
      '2345',
    ]);
    const b = await s.client.send(new GetObjectCommand({ Bucket: 'ernic', Key: 'r', Range: 'bytes=-3' }));
    expect((await bytes(b.Body)).toString()).to.equal('def');
    const c = await s.client.send(new GetObjectCommand({ Bucket: 'ernic', Key: 'r', Range: 'bytes=14-' }));
    expect((await bytes(c.Body)).toString()).to.equal('ef');
    const e = await rejects(s.client.send(new GetObjectCommand({ Bucket: 'ernic', Key: 'r', Range: 'bytes=16-20' })));
    expect([e.name, e.status]).to.deep.equal(['InvalidRange', 416]);
  });

  it('ListObjectsV2: prefix, delimiter, max-keys and continuation tokens', async () => {
    for (const k of ['a/1', 'a/2', 'a/b/3', 'c', 'd/4', 'e'])
      await s.client.send(new PutObjectCommand({ Bucket: 'ernic', Key: k, Body: k }));
    const all = await s.client.send(new ListObjectsV2Command({ Bucket: 'ernic' }));
    expect(all.Contents?.map((o) => o.Key)).to.deep.equal(['a/1', 'a/2', 'a/b/3', 'c', 'd/4', 'e']);
    expect(all.Contents?.[0]?.Size).to.equal(3);
    const pre = await s.client.send(new ListObjectsV2Command({ Bucket: 'ernic', Prefix: 'a/', Delimiter: '/' }));
    expect(pre.Contents?.map((o) => o.Key)).to.deep.equal(['a/1', 'a/2']);
    expect(pre.CommonPrefixes?.map((p) => p.Prefix)).to.deep.equal(['a/b/']);
    const top = await s.client.send(new ListObjectsV2Command({ Bucket: 'ernic', Delimiter: '/' }));
    expect(top.CommonPrefixes?.map((p) => p.Prefix)).to.deep.equal(['a/', 'd/']);
    expect(top.Contents?.map((o) => o.Key)).to.deep.equal(['c', 'e']);
    const seen: string[] = [];
    let token: string | undefined;
    let pages = 0;
    do {
      const p = await s.client.send(
        new ListObjectsV2Command({ Bucket: 'ernic', Delimiter: '/', MaxKeys: 1, ContinuationToken: token }),
      );
      seen.push(...(p.CommonPrefixes ?? []).map((x) => x.Prefix!), ...(p.Contents ?? []).map((x) => x.Key!));
      expect(p.KeyCount).to.equal(1);
      token = p.IsTruncated ? p.NextContinuationToken : undefined;
      pages++;
    } while (token);
    expect([pages, seen]).to.deep.equal([4, ['a/', 'c', 'd/', 'e']]);
  });

  it('multipart: create, upload parts, list parts, complete (digest of digests -N); abort drops an upload', async () => {
    const p1 = randomBytes(5 * MiB);
    const p2 = randomBytes(1234);
    const c = await s.client.send(
      new CreateMultipartUploadCommand({ Bucket: 'ernic', Key: 'big', ContentType: 'application/x-big' }),
    );
    const id = c.UploadId!;
    const e1 = (
      await s.client.send(new UploadPartCommand({ Bucket: 'ernic', Key: 'big', UploadId: id, PartNumber: 1, Body: p1 }))
    ).ETag!;
    const e2 = (
      await s.client.send(new UploadPartCommand({ Bucket: 'ernic', Key: 'big', UploadId: id, PartNumber: 2, Body: p2 }))
    ).ETag!;
    const lp = await s.client.send(new ListPartsCommand({ Bucket: 'ernic', Key: 'big', UploadId: id }));
    expect(lp.Parts?.map((p) => [p.PartNumber, p.Size])).to.deep.equal([
      [1, 5 * MiB],
      [2, 1234],
    ]);
    const done = await s.client.send(
      new CompleteMultipartUploadCommand({
        Bucket: 'ernic',
        Key: 'big',
        UploadId: id,
        MultipartUpload: {
          Parts: [
            { PartNumber: 1, ETag: e1 },
            { PartNumber: 2, ETag: e2 },
          ],
        },
      }),
    );
    const md5 = (b: Buffer): Buffer => createHash('md5').update(b).digest();
    expect(done.ETag).to.equal(
      `"${createHash('md5')
        .update(Buffer.concat([md5(p1), md5(p2)]))
        .digest('hex')}-2"`,
    );
    const got = await s.client.send(new GetObjectCommand({ Bucket: 'ernic', Key: 'big' }));
    expect((await bytes(got.Body)).equals(Buffer.concat([p1, p2]))).to.equal(true);
    expect(got.ContentType).to.equal('application/x-big');
    expect(s.store.used).to.equal(5 * MiB + 1234);

    const c2 = await s.client.send(new CreateMultipartUploadCommand({ Bucket: 'ernic', Key: 'gone' }));
    await s.client.send(
      new UploadPartCommand({ Bucket: 'ernic', Key: 'gone', UploadId: c2.UploadId, PartNumber: 1, Body: p2 }),
    );
    await s.client.send(new AbortMultipartUploadCommand({ Bucket: 'ernic', Key: 'gone', UploadId: c2.UploadId }));
    const e = await rejects(
      s.client.send(new ListPartsCommand({ Bucket: 'ernic', Key: 'gone', UploadId: c2.UploadId })),
    );
    expect([e.name, e.status]).to.deep.equal(['NoSuchUpload', 404]);
    const bad = await rejects(
      s.client.send(
        new CompleteMultipartUploadCommand({
          Bucket: 'ernic',
          Key: 'x',
          UploadId: 'nope',
          MultipartUpload: { Parts: [{ PartNumber: 1, ETag: e1 }] },
        }),
      ),
    );
    expect(bad.status).to.equal(404);
    expect(s.store.used).to.equal(5 * MiB + 1234);
  });

  it('DeleteObjects removes several keys and reports them', async () => {
    for (const k of ['x1', 'x2', 'x3']) await s.client.send(new PutObjectCommand({ Bucket: 'ernic', Key: k, Body: k }));
    const r = await s.client.send(
      new DeleteObjectsCommand({
        Bucket: 'ernic',
        Delete: { Objects: [{ Key: 'x1' }, { Key: 'x3' }, { Key: 'nothere' }] },
      }),
    );
    expect(r.Deleted?.map((d) => d.Key)).to.deep.equal(['x1', 'x3', 'nothere']);
    const l = await s.client.send(new ListObjectsV2Command({ Bucket: 'ernic' }));
    expect(l.Contents?.map((o) => o.Key)).to.deep.equal(['x2']);
  });

  it('a streamed body goes aws-chunked with a trailing CRC32, decoded and checked', async () => {
    const data = randomBytes(300_000);
    await s.client.send(
      new PutObjectCommand({
        Bucket: 'ernic',
        Key: 'stream',
        Body: Readable.from([data.subarray(0, 100_000), data.subarray(100_000)]),
        ContentLength: data.length,
      }),
    );
    expect(s.store.get('stream')!.data.equals(data)).to.equal(true);
  });

  it('a wrong secret is refused with SignatureDoesNotMatch; limits answer EntityTooLarge, InsufficientStorage, TooManyObjects', async () => {
    const bad = new S3Client({
      endpoint: s.endpoint,
      region: 'us-east-1',
      forcePathStyle: true,
      credentials: { ...CREDS, secretAccessKey: 'wrong' },
      maxAttempts: 1,
    });
    const e = await rejects(bad.send(new PutObjectCommand({ Bucket: 'ernic', Key: 'k', Body: 'x' })));
    expect([e.name, e.status]).to.deep.equal(['SignatureDoesNotMatch', 403]);
    bad.destroy();
    await s.close();
    s = await serve({ auth: true, limits: { size: 3000, objects: 2, maxpart: 2000 } });
    expect(
      (await rejects(s.client.send(new PutObjectCommand({ Bucket: 'ernic', Key: 'big', Body: Buffer.alloc(2001) }))))
        .name,
    ).to.equal('EntityTooLarge');
    await s.client.send(new PutObjectCommand({ Bucket: 'ernic', Key: 'a', Body: Buffer.alloc(2000) }));
    expect(
      (await rejects(s.client.send(new PutObjectCommand({ Bucket: 'ernic', Key: 'b', Body: Buffer.alloc(1001) }))))
        .status,
    ).to.equal(507);
    await s.client.send(new PutObjectCommand({ Bucket: 'ernic', Key: 'b', Body: Buffer.alloc(10) }));
    expect(
      (await rejects(s.client.send(new PutObjectCommand({ Bucket: 'ernic', Key: 'c', Body: Buffer.alloc(1) })))).name,
    ).to.equal('TooManyObjects');
    await s.client.send(new PutObjectCommand({ Bucket: 'ernic', Key: 'a', Body: Buffer.alloc(1990) })); // overwrite: room counted without the old copy
    expect(s.store.used).to.equal(2000);
  });
});

describe('s3 store: dir= persistence', function () {
  this.timeout(60000);

  it('objects and multipart uploads in progress survive a restart; deletes stay deleted', async () => {
    const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'ernic-s3-'));
    try {
      let s = await serve({ dir });
      const data = randomBytes(70_000);
      await s.client.send(new PutObjectCommand({ Bucket: 'ernic', Key: 'keep', Body: data }));
      await s.client.send(new PutObjectCommand({ Bucket: 'ernic', Key: 'drop', Body: 'x' }));
      await s.client.send(new DeleteObjectCommand({ Bucket: 'ernic', Key: 'drop' }));
      const c = await s.client.send(new CreateMultipartUploadCommand({ Bucket: 'ernic', Key: 'mp' }));
      const e1 = (
        await s.client.send(
          new UploadPartCommand({ Bucket: 'ernic', Key: 'mp', UploadId: c.UploadId, PartNumber: 1, Body: 'part-one' }),
        )
      ).ETag!;
      await s.close();
      s = await serve({ dir });
      const got = await s.client.send(new GetObjectCommand({ Bucket: 'ernic', Key: 'keep' }));
      expect((await bytes(got.Body)).equals(data)).to.equal(true);
      const l = await s.client.send(new ListObjectsV2Command({ Bucket: 'ernic' }));
      expect(l.Contents?.map((o) => o.Key)).to.deep.equal(['keep']);
      await s.client.send(
        new CompleteMultipartUploadCommand({
          Bucket: 'ernic',
          Key: 'mp',
          UploadId: c.UploadId,
          MultipartUpload: { Parts: [{ PartNumber: 1, ETag: e1 }] },
        }),
      );
      await s.close();
      s = await serve({ dir });
      expect(s.store.get('mp')!.data.toString()).to.equal('part-one');
      expect(s.store.used).to.equal(70_000 + 8);
      await s.close();
    } finally {
      await fs.rm(dir, { recursive: true, force: true });
    }
  });
});

describe('s3 store: dir= charges size= and objects= before the disk write', function () {
  this.timeout(60000);

  it('concurrent PUTs and parts never take the store past size= or objects=', async () => {
    const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'ernic-s3-'));
    try {
      const store = await ObjectStore.open('ernic', { size: 8 * MiB, objects: 6, maxpart: 2 * MiB }, dir);
      const body = randomBytes(2 * MiB);
      const puts = await Promise.all(
        Array.from({ length: 40 }, (_, i) => store.put(`k${i}`, body, 'binary/octet-stream')),
      );
      const stored = puts.filter((r) => r.ok).length;
      expect(stored).to.equal(4);
      expect(puts.filter((r) => !r.ok && r.error.code === 'InsufficientStorage').length).to.equal(36);
      expect(store.used).to.equal(8 * MiB);
      // Small objects: the key slots are promised the same way (2 left of 6).
      const small = await Promise.all(
        Array.from({ length: 10 }, (_, i) => store.put(`s${i}`, Buffer.alloc(0), 'binary/octet-stream')),
      );
      expect(small.filter((r) => r.ok).length).to.equal(2);
      expect(store.count).to.equal(6);
      for (let i = 0; i < 4; i++) await store.delete(`k${i}`);
      const id = await store.createUpload('mp', 'binary/octet-stream');
      if (!id.ok) throw new Error('createUpload');
      const parts = await Promise.all(
        Array.from({ length: 12 }, (_, i) => store.uploadPart(id.value, 'mp', i + 1, body)),
      );
      expect(parts.filter((r) => r.ok).length).to.equal(4);
      expect(store.used).to.equal(8 * MiB);
    } finally {
      await fs.rm(dir, { recursive: true, force: true });
    }
  });
});

describe('s3 store: presigned URLs (SigV4 in the query)', function () {
  this.timeout(60000);
  let s: Served;
  beforeEach(async () => {
    s = await serve({ auth: true });
  });
  afterEach(async () => {
    await s.close();
  });

  it('a presigned GET and PUT work without headers; a tampered or expired one is refused', async () => {
    const { getSignedUrl } = await import('@aws-sdk/s3-request-presigner');
    await s.client.send(new PutObjectCommand({ Bucket: 'ernic', Key: 'dir/pre sign.txt', Body: 'presigned body' }));
    const url = await getSignedUrl(s.client, new GetObjectCommand({ Bucket: 'ernic', Key: 'dir/pre sign.txt' }), {
      expiresIn: 60,
    });
    const get = await fetch(url);
    expect([get.status, await get.text()]).to.deep.equal([200, 'presigned body']);
    const tampered = await fetch(url.replace('pre%20sign', 'pre%20sigN'));
    expect(tampered.status).to.equal(403);
    // The SDK puts the body's CRC32 in the URL: it is checked like the header (a different body is BadDigest, as on S3).
    const putUrl = await getSignedUrl(
      s.client,
      new PutObjectCommand({ Bucket: 'ernic', Key: 'up.txt', Body: 'via url' }),
      { expiresIn: 60 },
    );
    expect(putUrl).to.contain('x-amz-checksum-crc32=');
    const wrong = await fetch(putUrl, { method: 'PUT', body: 'via urL' }); // same length: content-length is signed
    expect([wrong.status, await wrong.text()]).to.satisfy(
      ([st, body]: [number, string]) => st === 400 && body.includes('<Code>BadDigest</Code>'),
    );
    const put = await fetch(putUrl, { method: 'PUT', body: 'via url' });
    expect(put.status).to.equal(200);
    expect(s.store.get('up.txt')!.data.toString()).to.equal('via url');
    await s.close();
    s = await serve({ auth: true, extra: { now: () => Date.now() + 3600_000 } });
    const late = await getSignedUrl(s.client, new GetObjectCommand({ Bucket: 'ernic', Key: 'x' }), { expiresIn: 60 });
    const expired = await fetch(late);
    expect(expired.status).to.equal(403);
    expect(await expired.text()).to.contain('expired');
  });
});
