// The RDMA token path: the 44-byte token against bytes laid out by hand
// (docs/s3.md, "The token path"), the <token>:<addr>:<len> form, and GET/PUT through an
// http.Server whose DMA callbacks use a Buffer as guest memory behind one
// MR (rkey, base, length, bounds checked).

import { expect } from 'chai';
import { createHash, randomBytes } from 'crypto';
import * as http from 'http';
import { RdmaDma, RdmaPath } from '../../../lib/targets/s3/rdma';
import { encodeToken, parseTokenHeader } from '../../../lib/targets/s3/token';
import { signHeaders } from '../../support/s3-sign';
import { CREDS, serve, Served } from './helpers';

const RKEY = 0x00c0ffee;
const BASE = 0x7f0000001000n;
const MEM = 1 << 20;

/** The token bytes written out field by field: transport, qpn, gid, rkey, addr, len, port, lid (little-endian). */
function tokenHex(
  o: { transport?: number; qpn?: number; rkey?: number; addr?: bigint; len?: bigint; lid?: number } = {},
): string {
  const b = Buffer.alloc(44);
  b[0] = o.transport ?? 1;
  b.writeUInt32LE(o.qpn ?? 0x11, 1);
  for (let i = 0; i < 16; i++) b[5 + i] = 0xa0 + i;
  b.writeUInt32LE(o.rkey ?? RKEY, 21);
  b.writeBigUInt64LE(o.addr ?? BASE, 25);
  b.writeBigUInt64LE(o.len ?? BigInt(MEM), 33);
  b[41] = 1;
  b.writeUInt16LE(o.lid ?? 0x0203, 42);
  return b.toString('hex');
}

class GuestMemory implements RdmaDma {
  readonly mem = Buffer.alloc(MEM);
  calls = 0;
  #range(rkey: number, addr: bigint, len: number): number | null {
    this.calls++;
    if (rkey !== RKEY || addr < BASE || addr + BigInt(len) > BASE + BigInt(MEM)) return null;
    return Number(addr - BASE);
  }
  fromHost(rkey: number, addr: bigint, dst: Buffer): boolean {
    const at = this.#range(rkey, addr, dst.length);
    if (at === null) return false;
    this.mem.copy(dst, 0, at, at + dst.length);
    return true;
  }
  toHost(rkey: number, addr: bigint, data: Buffer): boolean {
    const at = this.#range(rkey, addr, data.length);
    if (at === null) return false;
    data.copy(this.mem, at);
    return true;
  }
}

interface Reply {
  status: number;
  headers: http.IncomingHttpHeaders;
  body: Buffer;
}

function request(
  endpoint: string,
  method: string,
  path: string,
  headers: Record<string, string>,
  body?: Buffer,
): Promise<Reply> {
  return new Promise((resolve, reject) => {
    const req = http.request(`${endpoint}${path}`, { method, headers }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode!, headers: res.headers, body: Buffer.concat(chunks) }));
    });
    req.on('error', reject);
    req.end(body);
  });
}

describe('s3 rdma token', () => {
  it('decodes the 44-byte layout, little-endian, and encodes it back', () => {
    const hex = tokenHex({ qpn: 0x00010203, addr: 0x1122334455667788n, len: 0x1000n });
    expect(hex).to.have.length(88);
    const r = parseTokenHeader(hex.toUpperCase());
    if (!r.ok) throw new Error(r.error);
    expect(r.token).to.deep.include({
      transport: 1,
      qpNum: 0x00010203,
      rkey: RKEY,
      remoteAddr: 0x1122334455667788n,
      length: 0x1000n,
      portNum: 1,
      lid: 0x0203,
    });
    expect([...r.token.gid]).to.deep.equal(Array.from({ length: 16 }, (_, i) => 0xa0 + i));
    expect(encodeToken(r.token)).to.equal(hex);
  });

  it("<token>:<addr>:<len>: non-zero values override, zero keeps the token's", () => {
    const r = parseTokenHeader(`${tokenHex()}:7f0000002000:0`);
    expect(r.ok && [r.token.remoteAddr, r.token.length]).to.deep.equal([0x7f0000002000n, BigInt(MEM)]);
    const s = parseTokenHeader(`${tokenHex()}:0:0x40`);
    expect(s.ok && [s.token.remoteAddr, s.token.length]).to.deep.equal([BASE, 0x40n]);
  });

  it('refuses a short token, non-hex, an unknown transport and bad overrides', () => {
    for (const bad of [
      tokenHex().slice(2),
      `${tokenHex().slice(0, 86)}zz`,
      tokenHex({ transport: 2 }),
      `${tokenHex()}:1`,
      `${tokenHex()}:g:0`,
      `${tokenHex()}:${'1'.repeat(17)}:0`,
    ]) {
      expect(parseTokenHeader(bad).ok, bad).to.equal(false);
    }
  });
});

describe('s3 rdma token path over http', function () {
  this.timeout(60000);
  let s: Served;
  let guest: GuestMemory;
  let path: RdmaPath;
  beforeEach(async () => {
    guest = new GuestMemory();
    path = new RdmaPath(guest, Buffer.from([192, 168, 200, 1]));
    s = await serve({ limits: { maxpart: 256 * 1024 }, extra: { rdma: path } });
  });
  afterEach(async () => {
    await s.close();
  });

  it('GET writes the object into the client buffer; reply 200:<server token>, x-amz-rdma-bytes', async () => {
    const data = randomBytes(100_000);
    await s.store.put('obj', data, 'binary/octet-stream');
    const r = await request(s.endpoint, 'GET', '/ernic/obj', { 'x-amz-rdma-token': tokenHex({ addr: BASE + 4096n }) });
    expect(r.status).to.equal(200);
    expect(r.body.length).to.equal(0);
    expect(r.headers['x-amz-rdma-bytes']).to.equal('100000');
    expect(guest.mem.subarray(4096, 4096 + 100_000).equals(data)).to.equal(true);
    const reply = String(r.headers['x-amz-rdma-reply']);
    expect(reply).to.match(/^200:[0-9a-f]{88}$/);
    const t = parseTokenHeader(reply.slice(4));
    expect(t.ok && [t.token.qpNum, t.token.length, [...t.token.gid.subarray(10)]]).to.deep.equal([
      0x00d00000,
      100_000n,
      [0xff, 0xff, 192, 168, 200, 1],
    ]);
  });

  it('GET is capped by the token length (short transfer), and a ranged GET moves the range', async () => {
    await s.store.put('obj', Buffer.from('0123456789'), 'binary/octet-stream');
    const r = await request(s.endpoint, 'GET', '/ernic/obj', { 'x-amz-rdma-token': `${tokenHex()}:0:4` });
    expect([r.status, r.headers['x-amz-rdma-bytes'], guest.mem.toString('latin1', 0, 5)]).to.deep.equal([
      200,
      '4',
      '0123\0',
    ]);
    const g = await request(s.endpoint, 'GET', '/ernic/obj', {
      'x-amz-rdma-token': tokenHex({ addr: BASE + 100n }),
      range: 'bytes=6-',
    });
    expect([g.status, g.headers['x-amz-rdma-bytes'], guest.mem.toString('latin1', 100, 104)]).to.deep.equal([
      206,
      '4',
      '6789',
    ]);
    expect(g.headers['x-amz-rdma-reply']).to.equal('206');
  });

  it('PUT reads the object from the client buffer, capped by maxpart and a declared size; MD5 ETag', async () => {
    const data = randomBytes(5000);
    data.copy(guest.mem, 8192);
    const r = await request(s.endpoint, 'PUT', '/ernic/up', {
      'x-amz-rdma-token': `${tokenHex()}:${(BASE + 8192n).toString(16)}:1388`,
      'content-length': '0',
    });
    expect([r.status, r.headers['x-amz-rdma-bytes'], r.headers.etag]).to.deep.equal([
      200,
      '5000',
      `"${createHash('md5').update(data).digest('hex')}"`,
    ]);
    expect(s.store.get('up')!.data.equals(data)).to.equal(true);
    const capped = await request(s.endpoint, 'PUT', '/ernic/big', {
      'x-amz-rdma-token': tokenHex(),
      'content-length': '0',
    });
    expect([capped.status, capped.headers['x-amz-rdma-bytes']]).to.deep.equal([200, String(256 * 1024)]);
    const sized = await request(s.endpoint, 'PUT', '/ernic/sized', {
      'x-amz-rdma-token': tokenHex(),
      'x-amz-decoded-content-length': '77',
      'content-length': '0',
    });
    expect([sized.status, s.store.get('sized')!.data.length]).to.deep.equal([200, 77]);
  });

  it('UploadPart by token: parts read out of the client buffer, completed into one object (digest-of-digests ETag)', async () => {
    const a = randomBytes(70_000);
    const b = randomBytes(30_000);
    a.copy(guest.mem, 0);
    b.copy(guest.mem, 200_000);
    const created = await request(s.endpoint, 'POST', '/ernic/mp?uploads', {});
    const id = /<UploadId>([^<]+)<\/UploadId>/.exec(created.body.toString())![1]!;
    const p1 = await request(s.endpoint, 'PUT', `/ernic/mp?partNumber=1&uploadId=${id}`, {
      'x-amz-rdma-token': `${tokenHex()}:0:${(70_000).toString(16)}`,
    });
    const p2 = await request(s.endpoint, 'PUT', `/ernic/mp?partNumber=2&uploadId=${id}`, {
      'x-amz-rdma-token': tokenHex({ addr: BASE + 200_000n, len: 30_000n }),
    });
    expect([p1.status, p1.headers['x-amz-rdma-bytes'], p2.status, p2.headers['x-amz-rdma-bytes']]).to.deep.equal([
      200,
      '70000',
      200,
      '30000',
    ]);
    const md5 = (x: Buffer): Buffer => createHash('md5').update(x).digest();
    expect(p1.headers.etag).to.equal(`"${md5(a).toString('hex')}"`);
    const xml = `<CompleteMultipartUpload><Part><PartNumber>1</PartNumber><ETag>${p1.headers.etag}</ETag></Part><Part><PartNumber>2</PartNumber><ETag>${p2.headers.etag}</ETag></Part></CompleteMultipartUpload>`;
    const done = await request(s.endpoint, 'POST', `/ernic/mp?uploadId=${id}`, {}, Buffer.from(xml));
    expect(done.status).to.equal(200);
    expect(done.body.toString()).to.contain(
      `${createHash('md5')
        .update(Buffer.concat([md5(a), md5(b)]))
        .digest('hex')}-2`,
    );
    expect(s.store.get('mp')!.data.equals(Buffer.concat([a, b]))).to.equal(true);
    const refused = await request(s.endpoint, 'PUT', `/ernic/mp2?partNumber=1&uploadId=${id}`, {
      'x-amz-rdma-token': tokenHex({ rkey: 0 }),
    });
    expect(refused.status).to.equal(404); // the upload is complete: NoSuchUpload before any DMA
  });

  it('key 0 is refused before any DMA; a range outside the MR is refused; both answer 403 with a bare reply status', async () => {
    await s.store.put('obj', Buffer.from('x'), 'binary/octet-stream');
    const k0 = await request(s.endpoint, 'GET', '/ernic/obj', { 'x-amz-rdma-token': tokenHex({ rkey: 0 }) });
    expect([k0.status, k0.headers['x-amz-rdma-reply'], guest.calls]).to.deep.equal([403, '403', 0]);
    expect(k0.body.toString()).to.contain('<Code>AccessDenied</Code>');
    const out = await request(s.endpoint, 'PUT', '/ernic/o2', {
      'x-amz-rdma-token': tokenHex({ addr: BASE + BigInt(MEM) - 10n, len: 100n }),
      'content-length': '0',
    });
    expect([out.status, out.headers['x-amz-rdma-reply']]).to.deep.equal([403, '403']);
    const bad = await request(s.endpoint, 'GET', '/ernic/obj', { 'x-amz-rdma-token': 'abc' });
    expect(bad.status).to.equal(400);
    expect(path.counts.refused).to.equal(3);
  });

  it('without a DMA path, a token request is NotImplemented (501); the body path still works', async () => {
    await s.close();
    s = await serve();
    await s.store.put('obj', Buffer.from('body'), 'text/plain');
    const r = await request(s.endpoint, 'GET', '/ernic/obj', { 'x-amz-rdma-token': tokenHex() });
    expect(r.status).to.equal(501);
    const b = await request(s.endpoint, 'GET', '/ernic/obj', {});
    expect([b.status, b.body.toString()]).to.deep.equal([200, 'body']);
  });

  it("on the guest's wire with credentials set, a token must be under the signature: unsigned or added after signing is refused, signed moves the bytes", async () => {
    await s.close();
    s = await serve({ auth: true, extra: { rdma: path } });
    const data = randomBytes(5000);
    await s.store.put('obj', data, 'binary/octet-stream');
    const host = s.endpoint.slice('http://'.length);
    const token = tokenHex({ addr: BASE + 64n });
    const bare = await signHeaders({ method: 'GET', host, path: '/ernic/obj' }, CREDS);
    const added = await request(s.endpoint, 'GET', '/ernic/obj', { ...bare, 'x-amz-rdma-token': token });
    expect([added.status, added.headers['x-amz-rdma-reply'], guest.calls]).to.deep.equal([403, '403', 0]);
    expect(added.body.toString()).to.contain('x-amz-rdma-token must be a signed header');
    const unsigned = await request(s.endpoint, 'GET', '/ernic/obj', { 'x-amz-rdma-token': token });
    expect([unsigned.status, guest.calls]).to.deep.equal([403, 0]);
    const signed = await signHeaders(
      { method: 'GET', host, path: '/ernic/obj', headers: { 'x-amz-rdma-token': token } },
      CREDS,
    );
    const r = await request(s.endpoint, 'GET', '/ernic/obj', signed);
    expect([r.status, r.headers['x-amz-rdma-bytes']]).to.deep.equal([200, '5000']);
    expect(guest.mem.subarray(64, 64 + 5000).equals(data)).to.equal(true);
  });
});
